"""The command-line clients' account-lifecycle commands (docs/http/accounts.md) against a real
Locky server over a real socket: email verification, password reset, TOTP second
factor at login, ``mfa enable``/``disable`` and an admin's ``users disable``/``enable``.

Codes come from the ``file`` mailer's outbox (:class:`locky.testing.MailBox`); TOTP codes
are computed here with :mod:`pyotp`. A TOTP code is accepted once per 30-second step, so
a second code in one step is the next step's (the server accepts ±1 step).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pyotp

from locky.cli.clients import admin, anonymous, app
from locky.testing import ADMIN_EMAIL, MailBox
from locky.testing.databases import run_sql

from clients_fixtures import alice, cli, home, locky_settings, mailbox, server, token_file  # noqa: F401
from clients_helpers import PASSWORD, command_paths

NEW_PASSWORD = "a much newer password"
CODE_PROMPT = "Authentication code (or a recovery code): "
DISABLED = "error: 403: Account disabled: An administrator has disabled this account.\n"


def mailed_code(mailbox, to, purpose, count=1):
    return MailBox.token(mailbox.wait(to, purpose=purpose, count=count))


def password_login(cli, audience, email, password=PASSWORD, code_line=None, *extra):
    """``login --password-stdin`` with the password, and a code on the next line if given."""
    stdin = password + "\n" + (code_line + "\n" if code_line is not None else "")
    return cli(audience, "login", "--email", email, "--password-stdin", *extra, stdin=stdin)


class Terminal(io.StringIO):
    """Standard input that says it is a terminal: the clients prompt and may re-ask."""

    def isatty(self):
        return True


# --- the command trees ---------------------------------------------------------------

def test_lifecycle_commands_per_audience():
    trees = {name: set(command_paths(m.build_parser())) for name, m in
             [("anonymous", anonymous), ("app", app), ("admin", admin)]}
    public = {"verify", "resend-verification", "forgot-password", "reset-password"}
    assert public <= trees["anonymous"] and not public & (trees["app"] | trees["admin"])
    assert {"mfa enable", "mfa disable"} <= trees["app"] & trees["admin"]
    assert "mfa enable" not in trees["anonymous"]
    assert {"users disable", "users enable"} <= trees["admin"]
    assert not {"users disable", "users enable"} & trees["app"]


def test_new_commands_need_their_arguments(home, capsys):
    for module, argv, wanted in [(anonymous, ["verify"], "TOKEN"), (anonymous, ["verify", " "], "must not be empty"),
                                 (anonymous, ["resend-verification"], "EMAIL"),
                                 (anonymous, ["forgot-password"], "EMAIL"), (anonymous, ["reset-password"], "TOKEN"),
                                 (admin, ["users", "disable"], "id"), (admin, ["users", "enable", "x"], "invalid int"),
                                 (app, ["mfa", "enable", "--setup-only", "--code", "1"], "not allowed with")]:
        assert module.main(argv) == 2, argv
        assert wanted in capsys.readouterr().err, argv


# --- email verification --------------------------------------------------------------

def test_verify_with_the_mailed_code(cli, mailbox):
    cli.register("Alice", "alice@example.com")
    token = mailed_code(mailbox, "alice@example.com", "verify")
    assert cli.ok("anonymous", "verify", "--", token).out == "Email address verified.\n"
    cli.login("app", "alice@example.com")
    assert cli.ok("app", "whoami", "--json").json()["email_verified"] is True
    # a code works once
    result = cli("anonymous", "verify", "--", token)
    assert result.code == 1 and result.err.startswith("error: 400: token: ") and result.err.count("\n") == 1
    assert result.out == ""
    result = cli("anonymous", "verify", "--json", "no-such-code")
    assert result.code == 1 and result.err.startswith("error: 400: token: ")


def test_resend_verification(cli, mailbox):
    cli.register("Bob", "bob@example.com")
    first = mailed_code(mailbox, "bob@example.com", "verify")
    result = cli.ok("anonymous", "resend-verification", "bob@example.com")
    assert result.out == ("If bob@example.com belongs to an account that is not verified yet,"
                          " a new verification message is on its way.\n")
    assert result.err == "Then run: locky-anonymous verify TOKEN (the Token: line of the message)\n"
    second = mailed_code(mailbox, "bob@example.com", "verify", count=2)
    assert second != first
    assert cli.ok("anonymous", "verify", "--json", "--", second).json() == {"email_verified": True}
    # the same answer for an address without an account
    assert cli.ok("anonymous", "resend-verification", "--json", "nobody@example.com").json() == {"status": "accepted"}
    result = cli("anonymous", "resend-verification", "not-an-address")
    assert (result.code, result.err) == (1, "error: 400: email: Not a valid email address.\n")


# --- password reset ------------------------------------------------------------------

def test_forgot_and_reset_password(cli, mailbox, home, alice):
    result = cli.ok("anonymous", "forgot-password", "alice@example.com")
    assert result.out == "If alice@example.com belongs to an account, a password-reset message is on its way.\n"
    assert "locky-anonymous reset-password TOKEN" in result.err
    # the same answer without an account
    assert cli.ok("anonymous", "forgot-password", "nobody@example.com").out == (
        "If nobody@example.com belongs to an account, a password-reset message is on its way.\n")
    assert cli.ok("anonymous", "forgot-password", "--json", "nobody@example.com").json() == {"status": "accepted"}
    token = mailed_code(mailbox, "alice@example.com", "reset")

    # the password rules apply, and a refused password does not spend the code
    result = cli("anonymous", "reset-password", "--password-stdin", "--", token, stdin="password\n")
    assert result.code == 1 and result.err.startswith("error: 400: password: ")
    result = cli.ok("anonymous", "reset-password", "--password-stdin", "--", token, stdin=NEW_PASSWORD + "\n")
    assert result.out == "Password changed. Every login of the account has ended: log in with the new password.\n"
    assert NEW_PASSWORD not in result.out + result.err

    # alice's stored login ended; the old password is gone, the new one works
    result = cli("app", "whoami")
    assert result.code == 1 and "run 'locky-app login' again" in result.err
    assert password_login(cli, "anonymous", "alice@example.com").err.startswith("error: 401: ")
    cli.login("app", "alice@example.com", NEW_PASSWORD)
    assert cli.ok("app", "whoami", "--json").json()["email"] == "alice@example.com"
    # the code is spent
    result = cli("anonymous", "reset-password", "--password-stdin", "--", token, stdin="yet another passphrase\n")
    assert result.code == 1 and result.err.startswith("error: 400: token: ")


def test_reset_password_prompts_twice_without_echo(cli, mailbox, monkeypatch):
    cli.register("Carol", "carol@example.com")
    cli.ok("anonymous", "forgot-password", "carol@example.com")
    token = mailed_code(mailbox, "carol@example.com", "reset")
    prompts = []
    answers = iter([NEW_PASSWORD, "something else"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or next(answers))
    result = cli("anonymous", "reset-password", "--", token)
    assert (result.code, result.err) == (2, "locky-anonymous: error: the two passwords differ\n")
    answers = iter([NEW_PASSWORD, NEW_PASSWORD])
    assert cli.ok("anonymous", "reset-password", "--json", "--", token).json() == {"password_reset": True}
    assert prompts == ["New password: ", "Repeat password: "] * 2
    cli.login("anonymous", "carol@example.com", NEW_PASSWORD)


# --- TOTP ----------------------------------------------------------------------------

def enable_mfa(cli, audience="app"):
    """``mfa enable`` in two steps; returns the secret and the recovery codes."""
    result = cli.ok(audience, "mfa", "enable", "--setup-only", "--json")
    setup = result.json()
    assert set(setup) == {"secret", "otpauth_uri"}
    assert setup["otpauth_uri"].startswith("otpauth://totp/") and f"secret={setup['secret']}" in setup["otpauth_uri"]
    assert result.err == f"The setup is pending. Finish it with: locky-{audience} mfa enable --code CODE\n"
    result = cli.ok(audience, "mfa", "enable", "--code", pyotp.TOTP(setup["secret"]).now())
    lines = result.out.splitlines()
    assert lines[0] == "Two-factor authentication is on."
    assert "shown only this once" in lines[1]
    codes = [line.strip() for line in lines[2:]]
    assert len(codes) == 10 and len(set(codes)) == 10
    return setup["secret"], codes


def test_mfa_enable_login_and_disable(cli, home, server, alice):
    secret, recovery = enable_mfa(cli)
    assert cli.ok("app", "whoami", "--json").json()["mfa_enabled"] is True
    # once on, a new setup is refused
    result = cli("app", "mfa", "enable", "--setup-only")
    assert result.code == 1 and result.err.startswith("error: 409: ")

    # login: the password alone stores nothing and asks for a code (none on stdin here)
    result = password_login(cli, "anonymous", "alice@example.com")
    assert result.code == 2
    assert result.err == ("locky-anonymous: error: no code given: use --code, or give it on the next line"
                          " of standard input\n")
    assert not token_file(home, "anonymous").exists()

    # the TOTP code on the line after the password (the next step's: confirm spent this one)
    code = pyotp.TOTP(secret).at(time.time() + 30)
    result = password_login(cli, "anonymous", "alice@example.com", PASSWORD, code)
    assert result.code == 0, result
    assert result.out == f"Logged in to {server.url} as Alice <alice@example.com>.\n"
    stored = json.loads(token_file(home, "anonymous").read_text())
    assert set(stored) == {"url", "token_type", "access_token", "refresh_token", "expires_at", "user"}
    assert stored["access_token"] not in result.out + result.err
    assert cli.ok("anonymous", "whoami", "--json").json()["uuid"] == alice["uuid"]
    # the same code again is refused, and stores nothing
    result = password_login(cli, "admin", "alice@example.com", PASSWORD, None, "--code", code)
    assert (result.code, result.err) == (1, "error: 401: Unauthorized: Invalid code.\n")
    assert not token_file(home, "admin").exists()

    # a recovery code with --code, in JSON: the usual answer, no tokens
    result = password_login(cli, "admin", "alice@example.com", PASSWORD, None, "--code", recovery[0], "--json")
    assert result.code == 0, result
    body = result.json()
    assert set(body) == {"user", "token_type", "expires_in"} and body["user"]["uuid"] == alice["uuid"]
    assert cli.ok("admin", "whoami", "--json").json()["uuid"] == alice["uuid"]
    # each recovery code works once
    result = password_login(cli, "admin", "alice@example.com", PASSWORD, None, "--code", recovery[0])
    assert result.code == 1 and result.err.startswith("error: 401: ")

    # turning it off needs a code; a wrong one is refused
    result = cli("app", "mfa", "disable", "--code", "wrong-code")
    assert (result.code, result.err) == (1, "error: 400: code: Invalid code.\n")
    result = cli("app", "mfa", "disable", stdin=recovery[1] + "\n")
    assert (result.code, result.out) == (0, "Two-factor authentication is off.\n")
    assert cli.ok("app", "whoami", "--json").json()["mfa_enabled"] is False
    result = cli("app", "mfa", "disable", "--json", "--code", recovery[2])
    assert result.code == 1 and result.err.startswith("error: 409: ")
    # and the password alone logs in again
    assert password_login(cli, "anonymous", "alice@example.com").code == 0


def test_login_code_prompt_at_a_terminal(cli, server, alice, monkeypatch, capsys):
    secret, recovery = enable_mfa(cli)
    monkeypatch.setattr("getpass.getpass", lambda prompt: PASSWORD)
    # a typo first: the prompt comes again, and the right code finishes the login
    monkeypatch.setattr(sys, "stdin", Terminal(f"not-a-code\n{recovery[3]}\n"))
    capsys.readouterr()
    assert anonymous.main(["login", "--email", "alice@example.com"]) == 0
    out, err = capsys.readouterr()
    assert out == f"Logged in to {server.url} as Alice <alice@example.com>.\n"
    assert err == CODE_PROMPT + "Unauthorized: Invalid code. Try again.\n" + CODE_PROMPT
    # three wrong codes end it
    monkeypatch.setattr(sys, "stdin", Terminal("one\ntwo\nthree\nfour\n"))
    assert app.main(["login", "--email", "alice@example.com"]) == 1
    err = capsys.readouterr().err
    assert err.count(CODE_PROMPT) == 3 and err.endswith("error: 401: Unauthorized: Invalid code.\n")
    # nothing typed
    monkeypatch.setattr(sys, "stdin", Terminal(""))
    assert app.main(["login", "--email", "alice@example.com"]) == 2
    assert capsys.readouterr().err == CODE_PROMPT + "locky-app: error: no code given\n"


def test_mfa_enable_in_one_run_reads_the_code_after_showing_the_secret(cli, server, home, alice):
    """The way a person (or a script driving it) uses ``mfa enable``: the secret and URI
    are printed first, then the code is read; the recovery codes come last."""
    env = {**os.environ, "LOCKY_URL": server.url}
    proc = subprocess.Popen([sys.executable, "-m", "locky.cli.clients.app", "mfa", "enable"], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = proc.stdout.readline()
        second = proc.stdout.readline()
        secret = re.fullmatch(r"secret\s+(\S+)\n", first).group(1)
        assert re.fullmatch(r"otpauth_uri\s+otpauth://totp/\S+\n", second), second
        proc.stdin.write(pyotp.TOTP(secret).now() + "\n")
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read()
        assert proc.wait(60) == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = rest.splitlines()
    assert lines[0] == "Two-factor authentication is on." and "shown only this once" in lines[1]
    assert len(lines[2:]) == 10
    assert "authenticator app" in err and "Traceback" not in err
    assert cli.ok("app", "whoami", "--json").json()["mfa_enabled"] is True
    # a wrong code from a script is one attempt, and the setup stays pending
    cli.ok("app", "mfa", "disable", "--code", lines[2].strip())
    result = cli("app", "mfa", "enable", "--json", stdin="not-a-code\n")
    assert result.code == 1
    assert result.err.endswith("\nerror: 400: code: Invalid code: enter the current code of your authenticator app.\n")
    secret = json.loads(result.out)["secret"]
    body = cli.ok("app", "mfa", "enable", "--json", "--code", pyotp.TOTP(secret).at(time.time() + 30)).json()
    assert len(body["recovery_codes"]) == 10


# --- admin: disable and enable -------------------------------------------------------

def test_admin_disables_and_enables_a_user(cli, mailbox, home, alice):
    root = cli.register("Root", ADMIN_EMAIL)
    cli.login("admin", ADMIN_EMAIL)
    # an admin email makes an admin only once it is verified
    result = cli("admin", "users", "disable", str(alice["id"]))
    assert result.code == 1 and result.err.startswith("error: 403: Forbidden")
    cli.ok("anonymous", "verify", "--", mailed_code(mailbox, ADMIN_EMAIL, "verify"))

    result = cli.ok("admin", "users", "disable", str(alice["id"]))
    assert result.out == f"Disabled user {alice['id']} (alice@example.com); every login of the account has ended.\n"
    assert cli.ok("admin", "users", "get", str(alice["id"]), "--json").json()["disabled"] is True
    # alice's stored login ended, and her password no longer logs her in
    result = cli("app", "whoami")
    assert result.code == 1 and "run 'locky-app login' again" in result.err
    result = password_login(cli, "app", "alice@example.com")
    assert (result.code, result.err, result.out) == (1, DISABLED, "")
    assert not token_file(home, "app").exists()

    # not on oneself, and not by a non-admin
    result = cli("admin", "users", "disable", str(root["id"]))
    assert result.code == 1 and result.err.startswith("error: 400: disabled: ")
    cli.register("Bob", "bob@example.com")
    cli.login("app", "bob@example.com")
    assert cli("app", "users", "disable", str(alice["id"])).code == 2  # no such command for users
    cli.login("admin", "bob@example.com")
    result = cli("admin", "users", "enable", str(alice["id"]))
    assert result.code == 1 and result.err.startswith("error: 403: Forbidden")

    cli.login("admin", ADMIN_EMAIL)
    user = cli.ok("admin", "users", "enable", str(alice["id"]), "--json").json()
    assert (user["id"], user["disabled"]) == (alice["id"], False)
    assert cli.ok("admin", "users", "enable", str(alice["id"])).out == f"Enabled user {alice['id']} (alice@example.com).\n"
    assert password_login(cli, "app", "alice@example.com").code == 0
    result = cli("admin", "users", "disable", "999999")
    assert result.code == 1 and result.err.startswith("error: 404: ")


def test_mfa_commands_prove_the_password_when_the_login_is_old(cli, server, alice, locky_database_url):
    """A second factor's change needs a recent authentication: past five minutes the
    server answers RFC 9470's insufficient_user_authentication, and ``mfa`` asks for the
    password (here on standard input), reauthenticates and goes on."""
    secret, recovery = enable_mfa(cli)
    then = (datetime.now(timezone.utc) - timedelta(minutes=6)).strftime("%Y-%m-%d %H:%M:%S.%f")
    run_sql(locky_database_url, "UPDATE locky_sessions SET created_at = %s WHERE user_uuid = %s", then, alice["uuid"])
    result = cli("app", "mfa", "disable", "--code", recovery[0], "--password-stdin", stdin="wrong password\n")
    assert result.code == 1 and result.err.endswith("error: 400: password: Does not match your current password.\n")
    assert cli.ok("app", "whoami", "--json").json()["mfa_enabled"] is True
    result = cli("app", "mfa", "disable", "--code", recovery[1], "--password-stdin", stdin=PASSWORD + "\n")
    assert (result.code, result.out) == (0, "Two-factor authentication is off.\n"), result
    assert "needs your password again" in result.err
    assert cli.ok("app", "whoami", "--json").json()["mfa_enabled"] is False
