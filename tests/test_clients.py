"""The three command-line clients against a real Locky server over a real socket.

Each test gets a fresh database (``locky_app``), a server on 127.0.0.1, and a home
directory in ``tmp_path`` so token files never touch the real user's config.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from locky.cli.clients import admin, anonymous, app
from locky.cli.clients.http import HttpClient
from locky.cli.clients.output import record_table, table
from locky.cli.clients.record_commands import permission
from locky.cli.clients.tokens import config_dir, is_expired, token_claims
from locky.testing import ADMIN_EMAIL, make_settings

from clients_fixtures import alice, cli, home, locky_settings, mailbox, root, server, token_file  # noqa: F401
from clients_helpers import PASSWORD, Cli, LiveServer, unused_port


def stored(home, audience):
    return json.loads(token_file(home, audience).read_text())


def fake_jwt(**claims):
    """An unsigned token with the given claims: the client reads ``exp`` only."""
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


# --- help, version, usage ------------------------------------------------------------

def _parsers(parser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] == name:  # skip aliases
                    yield from _parsers(sub, path + (name,))


@pytest.mark.parametrize("module", [anonymous, app, admin], ids=["anonymous", "app", "admin"])
def test_help_at_every_level(module, home, capsys):
    levels = list(_parsers(module.build_parser()))
    assert len(levels) > 5
    for path, parser in levels:
        assert module.main([*path, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: {parser.prog}"), (path, out)
        assert "--url" in out and "--json" in out


def test_command_trees_differ_by_audience(capsys):
    trees = {name: {" ".join(p) for p, _ in _parsers(m.build_parser())} for name, m in
             [("anonymous", anonymous), ("app", app), ("admin", admin)]}
    assert {"health", "register", "verify", "resend-verification", "forgot-password", "reset-password",
            "login", "refresh", "logout", "whoami"} == trees["anonymous"] - {""}
    assert "roles create" in trees["admin"] and "roles create" not in trees["app"]
    assert {"users list", "users count", "users get", "users update", "users delete", "groups create",
            "members add", "members remove", "roles list", "authz check"} <= trees["app"]
    assert trees["app"] - {"health", "register"} <= trees["admin"]


@pytest.mark.parametrize("audience", ["anonymous", "app", "admin"])
def test_version(audience, home, capsys):
    from locky import __version__

    assert {"anonymous": anonymous, "app": app, "admin": admin}[audience].main(["--version"]) == 0
    assert capsys.readouterr().out == f"locky-{audience} {__version__}\n"


def test_usage_errors_exit_2(home, capsys):
    assert app.main([]) == 2
    assert "required" in capsys.readouterr().err
    assert app.main(["users", "get", "seven"]) == 2
    assert "invalid int value: 'seven'" in capsys.readouterr().err
    assert admin.main(["roles", "create", "--name", "x", "--permission", "nocolon"]) == 2
    assert "expected RESOURCE:ACTION" in capsys.readouterr().err
    assert app.main(["--url", "ftp://example.com", "whoami"]) == 2
    assert "--url must start with http:// or https://" in capsys.readouterr().err
    assert anonymous.main(["login"]) == 2  # no terminal to prompt on
    assert capsys.readouterr().err == "locky-anonymous: error: --email is required\n"


# --- anonymous -----------------------------------------------------------------------

def test_health(cli, server):
    assert cli.ok("anonymous", "health").out == f"ok ({server.url})\n"
    assert cli.ok("anonymous", "health", "--json").json() == {"status": "ok"}


def test_url_option_wins_over_environment(cli, server, monkeypatch):
    monkeypatch.setenv("LOCKY_URL", f"http://127.0.0.1:{unused_port()}")
    assert cli.ok("anonymous", "--url", server.url, "health").out.startswith("ok ")
    assert cli.ok("anonymous", "health", "--url", server.url + "/").out.startswith("ok ")


def test_server_down_names_the_url(home, cli, monkeypatch):
    url = f"http://127.0.0.1:{unused_port()}"
    monkeypatch.setenv("LOCKY_URL", url)
    for audience, argv in [("anonymous", ["health"]), ("anonymous", ["login", "--email", "a@example.com",
                                                                      "--password-stdin"])]:
        result = cli(audience, *argv, stdin="secret-password\n")
        assert result.code == 1
        assert result.err == f"error: cannot connect to {url}: Connection refused\n"
        assert result.out == ""


def test_register_prints_the_user(cli):
    result = cli.ok("anonymous", "register", "--name", "Bob", "--email", " Bob@Example.com ",
                    "--password-stdin", stdin=PASSWORD + "\n")
    lines = dict(line.split(None, 1) for line in result.out.splitlines())
    assert lines["name"] == "Bob" and lines["email"] == "bob@example.com"
    assert lines["deleted_at"] == "-"
    assert list(lines)[:4] == ["id", "uuid", "name", "email"]
    assert "Registered Bob <bob@example.com>" in result.err
    assert "password" not in result.out


def test_register_validation_error_is_one_line(cli):
    result = cli("anonymous", "register", "--name", "Bad", "--email", "not-an-email",
                 "--password-stdin", stdin=PASSWORD + "\n")
    assert result.code == 1
    assert result.err == "error: 400: email: Not a valid email address.\n"
    assert result.out == ""
    cli.register("Carol", "carol@example.com")
    result = cli("anonymous", "register", "--name", "Carol", "--email", "carol@example.com",
                 "--password-stdin", stdin=PASSWORD + "\n")
    assert (result.code, result.err) == (1, "error: 400: email: Already registered.\n")


def test_register_prompts_for_the_password_twice(cli, monkeypatch):
    answers = iter([PASSWORD, PASSWORD])
    prompts = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or next(answers))
    user = cli.ok("anonymous", "register", "--json", "--name", "Dan", "--email", "dan@example.com").json()
    assert user["email"] == "dan@example.com"
    assert prompts == ["Password: ", "Repeat password: "]
    answers = iter([PASSWORD, "something else"])
    result = cli("anonymous", "register", "--name", "Eve", "--email", "eve@example.com")
    assert result.code == 2 and "the two passwords differ" in result.err
    result = cli("anonymous", "register", "--name", "Eve", "--email", "eve@example.com", "--password-stdin")
    assert result.code == 2 and "standard input has no password line" in result.err


def test_login_whoami_refresh_logout(cli, home, server):
    user = cli.register("Alice", "alice@example.com")
    result = cli.login("anonymous", "alice@example.com")
    assert result.out == f"Logged in to {server.url} as Alice <alice@example.com>.\n"
    data = stored(home, "anonymous")
    assert data["access_token"] not in result.out and data["url"] == server.url
    assert data["user"]["uuid"] == user["uuid"]

    # 0600 file in a 0700 directory
    assert stat.S_IMODE(token_file(home, "anonymous").stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file(home, "anonymous").parent.stat().st_mode) == 0o700

    me = cli.ok("anonymous", "whoami", "--json").json()
    assert me == {**user, "updated_at": me["updated_at"]}
    assert "alice@example.com" in cli.ok("anonymous", "whoami").out

    before = stored(home, "anonymous")
    assert cli.ok("anonymous", "refresh").out.startswith("Access token refreshed; it expires at 20")
    after = stored(home, "anonymous")
    assert after["refresh_token"] != before["refresh_token"]
    assert after["access_token"] != before["access_token"]

    assert cli.ok("anonymous", "logout").out == f"Logged out of {server.url}.\n"
    assert not token_file(home, "anonymous").exists()
    # the server revoked the session too
    with pytest.raises(Exception) as caught:
        HttpClient(server.url).request("GET", "/v1/internal/users/me", token=after["access_token"])
    assert caught.value.status == 401
    result = cli("anonymous", "whoami")
    assert (result.code, result.err) == (1, "error: not logged in; run 'locky-anonymous login' first\n")
    assert cli.ok("anonymous", "logout").out == "Not logged in.\n"


def test_password_stdin_reads_one_line(cli):
    cli.register("Alice", "alice@example.com")
    cli.ok("app", "login", "--email", "alice@example.com", "--password-stdin", stdin=PASSWORD + "\r\nignored\n")
    assert cli.ok("app", "whoami", "--json").json()["email"] == "alice@example.com"


def test_login_prompts_without_echo(cli, monkeypatch):
    cli.register("Alice", "alice@example.com")
    prompts = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or PASSWORD)
    assert cli.ok("app", "login", "--email", "alice@example.com").out.endswith("as Alice <alice@example.com>.\n")
    assert prompts == ["Password: "]


def test_wrong_password(cli, home):
    cli.register("Alice", "alice@example.com")
    result = cli("anonymous", "login", "--email", "alice@example.com", "--password-stdin", stdin="wrong-password\n")
    assert result.code == 1
    assert result.err.startswith("error: 401: ") and result.err.count("\n") == 1
    assert "Traceback" not in result.err and result.out == ""
    assert not token_file(home, "anonymous").exists()


def test_too_many_failures_mention_retry_after(tmp_path, home, capsys, monkeypatch):
    live_app = __import__("locky").create_app(make_settings(
        f"sqlite:///{tmp_path / 'limits.sqlite'}", log_requests=False, login_max_failures=2))
    live = LiveServer(live_app)
    try:
        monkeypatch.setenv("LOCKY_URL", live.url)
        run = Cli(capsys, monkeypatch)
        for _ in range(2):
            assert run("anonymous", "login", "--email", "x@example.com", "--password-stdin",
                       stdin="wrong-password\n").err.startswith("error: 401: ")
        result = run("anonymous", "login", "--email", "x@example.com", "--password-stdin", stdin="wrong-password\n")
        assert result.code == 1
        assert result.err.startswith("error: 429: ") and "(retry after " in result.err
    finally:
        live.stop()
        live_app.close()


# --- tokens --------------------------------------------------------------------------

def test_each_audience_has_its_own_login(cli, home, alice, root):
    assert cli.ok("app", "whoami", "--json").json()["email"] == "alice@example.com"
    assert cli.ok("admin", "whoami", "--json").json()["email"] == ADMIN_EMAIL
    assert sorted(p.name for p in (home / "xdg" / "locky").glob("*.json")) == ["admin.json", "app.json"]
    cli.ok("app", "logout")
    assert cli.ok("admin", "whoami", "--json").json()["email"] == ADMIN_EMAIL
    assert cli("app", "whoami").err == "error: not logged in; run 'locky-app login' first\n"


def test_config_dir_falls_back_to_home(cli, home, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert config_dir() == home / ".config" / "locky"
    cli.register("Alice", "alice@example.com")
    cli.login("app", "alice@example.com")
    assert (home / ".config" / "locky" / "app.json").exists()


def test_expired_access_token_is_refreshed_first(cli, home, alice):
    data = stored(home, "app")
    data["access_token"] = fake_jwt(sub=alice["uuid"], exp=int(time.time()) - 5)
    token_file(home, "app").write_text(json.dumps(data))
    assert cli.ok("app", "whoami", "--json").json()["uuid"] == alice["uuid"]
    fresh = stored(home, "app")
    assert fresh["refresh_token"] != data["refresh_token"]
    assert not is_expired(fresh)
    assert stat.S_IMODE(token_file(home, "app").stat().st_mode) == 0o600


def test_concurrent_clients_refresh_once(cli, home, alice, server):
    """Refresh tokens are single-use: clients racing on one expired token must not
    present the same refresh token twice (the server would revoke the whole login)."""
    from concurrent.futures import ThreadPoolExecutor

    from locky.cli.clients.tokens import AuthSession, TokenStore

    data = stored(home, "app")
    data["access_token"] = fake_jwt(sub=alice["uuid"], exp=int(time.time()) - 5)
    token_file(home, "app").write_text(json.dumps(data))

    def whoami(_):
        session = AuthSession(HttpClient(server.url), TokenStore("app"), "locky-app login")
        return session.request("GET", "/v1/internal/users/me")["uuid"]

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(whoami, range(4))) == [alice["uuid"]] * 4
    assert cli.ok("app", "whoami", "--json").json()["uuid"] == alice["uuid"]


def test_401_is_retried_once_after_refresh(cli, home, alice):
    data = stored(home, "app")
    data["access_token"] = fake_jwt(sub=alice["uuid"])  # no exp: only the server can say
    token_file(home, "app").write_text(json.dumps(data))
    assert cli.ok("app", "groups", "count").out == "0\n"
    assert stored(home, "app")["refresh_token"] != data["refresh_token"]


def test_revoked_login_asks_to_log_in_again(cli, home, alice, server):
    data = stored(home, "app")
    HttpClient(server.url).request("POST", "/v1/private/users/logout", token=data["access_token"])
    result = cli("app", "users", "list")
    assert result.code == 1
    assert result.err.startswith("error: the stored login has expired or was revoked (401: ")
    assert result.err.endswith("run 'locky-app login' again\n")
    assert not token_file(home, "app").exists()


def test_tokens_are_not_sent_to_another_server(cli, alice, server):
    other = f"http://127.0.0.1:{unused_port()}"
    result = cli("app", "whoami", "--url", other)
    assert result.code == 1
    assert result.err == (f"error: logged in to {server.url}, not {other}; run 'locky-app login --url {other}'"
                          f" or pass --url {server.url}\n")


def test_logout_when_server_is_down_still_forgets_tokens(cli, home, alice, server):
    server.stop()
    result = cli("app", "logout")
    assert result.code == 1
    assert result.err.startswith(f"error: cannot connect to {server.url}: Connection refused (local tokens removed")
    assert not token_file(home, "app").exists()


def test_token_expiry_helpers():
    assert token_claims(fake_jwt(exp=5, sub="u")) == {"exp": 5, "sub": "u"}
    assert token_claims("garbage") == {}
    assert is_expired({"access_token": fake_jwt(exp=100)}, now=200)
    assert not is_expired({"access_token": fake_jwt(exp=1000)}, now=200)
    assert is_expired({"access_token": "opaque", "expires_at": 100}, now=200)
    assert not is_expired({"access_token": "opaque"}, now=200)


# --- locky-app: reads --------------------------------------------------------------------

def test_users_list_get_count(cli, alice):
    bob = cli.register("Bob", "bob@example.com")
    table_out = cli.ok("app", "users", "list").out.splitlines()
    assert table_out[0].split() == ["ID", "UUID", "NAME", "EMAIL", "CREATED_AT"]
    assert [line.split()[3] for line in table_out[1:]] == ["alice@example.com", "bob@example.com"]
    assert len({line.index(alice["uuid"][:8]) for line in table_out[1:2]} |
               {table_out[2].index(bob["uuid"][:8])}) == 1  # aligned columns

    body = cli.ok("app", "users", "list", "--json").json()
    assert body == {"users": [alice, bob], "next_after_id": None}
    assert cli.ok("app", "users", "list", "--json", "--email", "bob@example.com").json()["users"] == [bob]
    assert cli.ok("app", "users", "count").out == "2\n"
    assert cli.ok("app", "users", "count", "--json", "--email", "bob@example.com").json() == {"count": 1}
    assert cli.ok("app", "users", "get", str(bob["id"]), "--json").json() == bob

    result = cli("app", "users", "get", "999999")
    assert result.code == 1 and result.err.startswith("error: 404: ")
    result = cli("app", "users", "list", "--limit", "0")
    assert result.code == 1 and result.err.startswith("error: 400: limit: ")


def test_paging(cli, alice):
    users = [alice] + [cli.register(f"User {i}", f"user{i}@example.com") for i in range(6)]
    first = cli.ok("app", "users", "list", "--json", "--limit", "3").json()
    assert first == {"users": users[:3], "next_after_id": users[2]["id"]}
    second = cli.ok("app", "users", "list", "--json", "--limit", "3", "--after-id", str(first["next_after_id"])).json()
    assert second["users"] == users[3:6]
    result = cli.ok("app", "users", "list", "--limit", "3")
    assert result.err == f"(more: add --after-id {users[2]['id']}, or --all)\n"

    merged = cli.ok("app", "users", "list", "--json", "--all", "--limit", "2").json()
    assert merged == {"users": users, "next_after_id": None}
    tail = cli.ok("app", "users", "list", "--json", "--all", "--limit", "2", "--after-id", str(users[4]["id"])).json()
    assert tail["users"] == users[5:]
    rows = cli.ok("app", "users", "list", "--all", "--limit", "2").out.splitlines()
    assert len(rows) == 1 + len(users)


def test_roles_are_listed_with_permissions(cli, alice):
    body = cli.ok("app", "roles", "list", "--json").json()
    names = [role["name"] for role in body["roles"]]
    assert {"admin", "user", "owner", "maintainer", "member", "viewer"} <= set(names)
    assert all(role["builtin"] for role in body["roles"])
    table_out = cli.ok("app", "roles", "list").out.splitlines()
    assert table_out[0].split() == ["ID", "NAME", "BUILTIN", "PERMISSIONS", "DESCRIPTION"]
    admin_row = next(line for line in table_out if line.split()[1] == "admin")
    assert admin_row.split()[2:4] == ["true", "*:*"]
    owner = next(role for role in body["roles"] if role["name"] == "owner")
    assert cli.ok("app", "roles", "get", str(owner["id"]), "--json").json() == owner
    assert cli.ok("app", "roles", "count", "--name", "owner").out == "1\n"
    assert cli.ok("app", "roles", "list", "--name", "owner", "--json").json()["roles"] == [owner]


# --- locky-app: writes -------------------------------------------------------------------

def test_groups_lifecycle(cli, alice):
    group = cli.ok("app", "groups", "create", "--json", "--name", "ops", "--description", "On call").json()
    assert (group["name"], group["description"], group["deleted_at"]) == ("ops", "On call", None)
    listing = dict(line.split(None, 1) for line in cli.ok("app", "groups", "get", str(group["id"])).out.splitlines())
    assert listing["name"] == "ops" and listing["description"] == "On call"

    # the creator became the owner
    members = cli.ok("app", "members", "list", "--json", "--group-uuid", group["uuid"]).json()["members"]
    assert [(m["user_uuid"], m["role"]) for m in members] == [(alice["uuid"], "owner")]

    updated = cli.ok("app", "groups", "update", str(group["id"]), "--json", "--description", "Pager duty").json()
    assert (updated["name"], updated["description"]) == ("ops", "Pager duty")
    assert cli.ok("app", "groups", "count", "--name", "ops").out == "1\n"
    result = cli("app", "groups", "create", "--name", "ops")
    assert result.code == 1 and result.err.startswith("error: 400: name: ") and result.err.count("\n") == 1
    assert cli("app", "groups", "update", str(group["id"])).err == (
        "locky-app: error: nothing to update: give --name or --description\n")

    assert cli.ok("app", "groups", "delete", str(group["id"])).out == f"Deleted group {group['id']}.\n"
    assert cli.ok("app", "groups", "list", "--json").json() == {"groups": [], "next_after_id": None}
    assert cli.ok("app", "members", "count", "--group-uuid", group["uuid"]).out == "0\n"
    result = cli("app", "groups", "delete", str(group["id"]))
    assert result.code == 1 and result.err.startswith("error: 404: ")


def test_members_add_and_remove(cli, alice):
    bob = cli.register("Bob", "bob@example.com")
    group = cli.ok("app", "groups", "create", "--json", "--name", "ops").json()
    member = cli.ok("app", "members", "add", "--json", "--group-uuid", group["uuid"], "--user-uuid", bob["uuid"],
                    "--role", "viewer").json()
    assert (member["group_uuid"], member["user_uuid"], member["role"]) == (group["uuid"], bob["uuid"], "viewer")
    assert cli.ok("app", "members", "get", str(member["id"]), "--json").json() == member
    assert cli.ok("app", "members", "list", "--json", "--user-uuid", bob["uuid"]).json()["members"] == [member]
    assert cli.ok("app", "members", "count", "--role", "viewer").out == "1\n"
    table_out = cli.ok("app", "members", "list", "--group-uuid", group["uuid"]).out.splitlines()
    assert table_out[0].split() == ["ID", "UUID", "GROUP_UUID", "USER_UUID", "ROLE"]
    assert [line.split()[-1] for line in table_out[1:]] == ["owner", "viewer"]

    assert cli.ok("app", "members", "remove", str(member["id"]), "--json").json() == {"deleted": "member",
                                                                                    "id": member["id"]}
    assert cli.ok("app", "members", "count", "--group-uuid", group["uuid"]).out == "1\n"
    result = cli("app", "members", "add", "--group-uuid", group["uuid"], "--user-uuid", bob["uuid"],
                 "--role", "no-such-role")
    assert result.code == 1 and result.err.startswith("error: 400: role: ")


def test_forbidden_is_reported(cli, alice, home):
    group = cli.ok("app", "groups", "create", "--json", "--name", "alices").json()
    bob = cli.register("Bob", "bob@example.com")
    cli.ok("app", "logout")
    cli.login("app", "bob@example.com")
    for argv in (["groups", "delete", str(group["id"])],
                 ["groups", "update", str(group["id"]), "--name", "bobs"],
                 ["members", "add", "--group-uuid", group["uuid"], "--user-uuid", bob["uuid"]]):
        result = cli("app", *argv)
        assert result.code == 1, argv
        assert result.err.startswith("error: 403: Forbidden") and result.err.count("\n") == 1
    assert cli.ok("app", "groups", "get", str(group["id"]), "--json").json()["name"] == "alices"
    # and a non-admin using locky-admin gets the server's 403 too
    cli.login("admin", "bob@example.com")
    result = cli("admin", "roles", "create", "--name", "auditor", "--permission", "users:read")
    assert result.code == 1 and result.err.startswith("error: 403: Forbidden")


def test_update_own_account(cli, alice):
    updated = cli.ok("app", "users", "update", "--json", "--name", "Alice Liddell").json()
    assert (updated["id"], updated["name"], updated["email"]) == (alice["id"], "Alice Liddell", "alice@example.com")
    # Without the current password (first line of stdin) the server refuses the change.
    result = cli("app", "users", "update", "--password-stdin", stdin="wrong current password\na much newer password\n")
    assert (result.code, result.err) == (1, "error: 400: current_password: Does not match your current password.\n")
    cli.ok("app", "users", "update", "--password-stdin", stdin=PASSWORD + "\na much newer password\n")
    result = cli("anonymous", "login", "--email", "alice@example.com", "--password-stdin", stdin=PASSWORD + "\n")
    assert result.code == 1 and result.err.startswith("error: 401: ")
    cli.login("anonymous", "alice@example.com", "a much newer password")
    result = cli("app", "users", "update", "--email", "nope", "--password-stdin", stdin="a much newer password\n")
    assert (result.code, result.err) == (1, "error: 400: email: Not a valid email address.\n")
    assert cli("app", "users", "update").code == 2


def test_delete_own_account(cli, home, alice):
    result = cli("app", "users", "delete")
    assert result.code == 2 and "add --yes to confirm" in result.err
    result = cli.ok("app", "users", "delete", "--yes")
    assert result.out == f"Deleted your account alice@example.com (user {alice['id']}); logged out.\n"
    assert not token_file(home, "app").exists()
    result = cli("anonymous", "login", "--email", "alice@example.com", "--password-stdin", stdin=PASSWORD + "\n")
    assert result.code == 1


def test_authz_check(cli, alice):
    bob = cli.register("Bob", "bob@example.com")
    group = cli.ok("app", "groups", "create", "--json", "--name", "ops").json()
    base = ["authz", "check", "--resource", "groups", "--action", "write", "--group-uuid", group["uuid"]]
    assert cli.ok("app", *base, "--user-uuid", alice["uuid"]).out == "allowed\n"
    assert cli.ok("app", *base, "--user-uuid", bob["uuid"]).out == "denied\n"
    assert cli.ok("app", *base, "--user-uuid", bob["uuid"], "--json").json() == {"allowed": False}
    assert cli("app", *base, "--user-uuid", bob["uuid"], "--exit-status").code == 3
    assert cli("app", *base, "--user-uuid", alice["uuid"], "--exit-status").code == 0
    assert cli.ok("app", "authz", "check", "--user-uuid", bob["uuid"], "--resource", "users",
                  "--action", "read").out == "allowed\n"


# --- locky-admin ---------------------------------------------------------------------

def test_admin_manages_roles(cli, root):
    role = cli.ok("admin", "roles", "create", "--json", "--name", "auditor", "--description", "Reads",
                  "--permission", "users:read", "--permission", "app:docs:read").json()
    assert role["permissions"] == [{"resource": "users", "action": "read"},
                                   {"resource": "app:docs", "action": "read"}]
    assert role["builtin"] is False and role["description"] == "Reads"
    row = next(line for line in cli.ok("admin", "roles", "list").out.splitlines() if " auditor " in line)
    assert row.split()[2:4] == ["false", "users:read,app:docs:read"]

    updated = cli.ok("admin", "roles", "update", str(role["id"]), "--json", "--permission", "groups:read").json()
    assert updated["permissions"] == [{"resource": "groups", "action": "read"}]
    assert updated["description"] == "Reads"
    emptied = cli.ok("admin", "roles", "update", str(role["id"]), "--json", "--no-permissions").json()
    assert emptied["permissions"] == []

    builtin = cli.ok("admin", "roles", "list", "--json", "--name", "owner").json()["roles"][0]
    result = cli("admin", "roles", "delete", str(builtin["id"]))
    assert result.code == 1 and result.err.startswith("error: 400: ")
    result = cli("admin", "roles", "create", "--name", "ok-name", "--permission", "Bad:read")
    assert (result.code, result.err) == (1, "error: 400: permissions: Not a valid resource.\n")

    # a role held by a live membership cannot go
    carl = cli.register("Carl", "carl@example.com")
    group = cli.ok("admin", "groups", "create", "--json", "--name", "audit").json()
    member = cli.ok("admin", "members", "add", "--json", "--group-uuid", group["uuid"], "--user-uuid",
                    carl["uuid"], "--role", "auditor").json()
    result = cli("admin", "roles", "delete", str(role["id"]))
    assert result.code == 1 and result.err.startswith("error: 400: ")
    cli.ok("admin", "members", "remove", str(member["id"]))

    assert cli.ok("admin", "roles", "delete", str(role["id"])).out == f"Deleted role {role['id']}.\n"
    assert cli.ok("admin", "roles", "count", "--name", "auditor").out == "0\n"
    result = cli("admin", "roles", "create", "--name", "Bad Name")
    assert result.code == 1 and result.err.startswith("error: 400: name: ")


def test_admin_updates_and_deletes_anyone(cli, root, alice):
    updated = cli.ok("admin", "users", "update", str(alice["id"]), "--json", "--name", "A.", "--email",
                     "alice@corp.example").json()
    assert (updated["name"], updated["email"]) == ("A.", "alice@corp.example")
    # An admin's change of her email ended alice's logins: she logs in again.
    result = cli("app", "whoami")
    assert result.code == 1 and "run 'locky-app login' again" in result.err
    cli.login("app", "alice@corp.example")
    group = cli.ok("app", "groups", "create", "--json", "--name", "alices").json()
    assert cli.ok("admin", "groups", "update", str(group["id"]), "--json", "--name", "renamed").json()["name"] == "renamed"
    assert cli.ok("admin", "users", "delete", str(alice["id"])).out == f"Deleted user {alice['id']}.\n"
    assert cli.ok("admin", "users", "count").out == "1\n"
    assert cli.ok("admin", "members", "count", "--user-uuid", alice["uuid"]).out == "0\n"
    # alice's stored login no longer works
    result = cli("app", "whoami")
    assert result.code == 1 and "run 'locky-app login' again" in result.err
    result = cli("admin", "users", "delete", str(alice["id"]))
    assert result.code == 1 and result.err.startswith("error: 404: ")


# --- output units --------------------------------------------------------------------

def test_table_alignment_and_cells():
    assert table([["1", "a"], ["22", "bbb"]], ["ID", "NAME"]) == "ID  NAME\n1   a\n22  bbb"
    text = record_table("roles", [{"id": 1, "name": "r", "builtin": False, "description": None,
                                   "permissions": [{"resource": "a", "action": "b"}]}])
    assert text.splitlines()[1].split() == ["1", "r", "false", "a:b", "-"]
    assert permission("app:docs:read") == {"resource": "app:docs", "action": "read"}


# --- the installed console scripts ---------------------------------------------------

@pytest.mark.skipif(shutil.which("locky-anonymous") is None, reason="console scripts not installed")
def test_console_scripts(server, home, tmp_path):
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg"), "LOCKY_URL": server.url}
    def run(*argv, stdin=""):
        return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert run("locky-anonymous", "health", "--json").stdout == '{\n  "status": "ok"\n}\n'
    result = run("locky-anonymous", "register", "--name", "Zed", "--email", "zed@example.com", "--password-stdin",
                 stdin=PASSWORD + "\n")
    assert result.returncode == 0 and "zed@example.com" in result.stdout
    result = run("locky-app", "login", "--email", "zed@example.com", "--password-stdin", stdin=PASSWORD + "\n")
    assert result.returncode == 0, result.stderr
    result = run("locky-app", "groups", "create", "--name", "zeds", "--json")
    assert json.loads(result.stdout)["name"] == "zeds"
    result = run("locky-admin", "whoami")
    assert (result.returncode, result.stderr) == (1, "error: not logged in; run 'locky-admin login' first\n")
    down = f"http://127.0.0.1:{unused_port()}"
    # logout revokes the session on the server that issued it, whatever --url says
    result = run("locky-app", "--url", down, "logout")
    assert (result.returncode, result.stdout) == (0, f"Logged out of {server.url}.\n")
    assert not (home / "xdg" / "locky" / "app.json").exists()
    result = run(sys.executable, "-m", "locky.cli.clients.admin", "--url", down, "users", "list")
    assert result.returncode == 1 and "Traceback" not in result.stderr
