"""Account-lifecycle commands (docs/http/accounts.md).

For ``locky-anonymous`` (:func:`add_account_commands`): ``verify``,
``resend-verification``, ``forgot-password`` and ``reset-password``, which need no
login. For ``locky-app`` and ``locky-admin`` (:func:`add_mfa_commands`): ``mfa enable``
and ``mfa disable``, on the logged-in account's own TOTP second factor.

Codes from messages (verification, reset) are command arguments; new passwords are
never: they are prompted for without echo, or read with ``--password-stdin``.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from .commands import Context, add_code_option, add_command, add_group, add_password_stdin
from .http import ApiError
from .tokens import needs_reauthentication
from .output import table
from .session_commands import CODE_PROMPT

VERIFY = "/v1/public/users/verify"
RESEND = "/v1/public/users/verify/resend"
FORGOT = "/v1/public/users/password/forgot"
RESET = "/v1/public/users/password/reset"
TOTP = "/v1/private/users/me/mfa/totp"
REAUTH = "/v1/private/users/me/reauth"
TOTP_CONFIRM = TOTP + "/confirm"

SETUP_HINT = ("Add the secret to your authenticator app (type it in, or open the otpauth URI, e.g. as a QR code),"
              " then enter the 6-digit code it shows.")
RECOVERY_WARNING = ("These recovery codes are shown only this once: keep them somewhere safe. Each works once,"
                    " instead of an authenticator code, to log in or to turn two-factor authentication off.")


def _code_arg(text: str) -> str:
    code = text.strip()
    if not code:
        raise argparse.ArgumentTypeError("must not be empty")
    return code


# --- without a login -----------------------------------------------------------------

def verify(ctx: Context, args: argparse.Namespace) -> None:
    ctx.client.request("POST", VERIFY, {"token": args.token})
    ctx.printer.message("Email address verified.", {"email_verified": True})


def resend_verification(ctx: Context, args: argparse.Namespace) -> None:
    body = ctx.client.request("POST", RESEND, {"email": args.email})
    if not ctx.printer.as_json:
        ctx.note(f"Then run: {ctx.prog} verify TOKEN (the Token: line of the message)")
    ctx.printer.message(
        f"If {args.email} belongs to an account that is not verified yet, a new verification message is on its way.",
        body,
    )


def forgot_password(ctx: Context, args: argparse.Namespace) -> None:
    body = ctx.client.request("POST", FORGOT, {"email": args.email})
    if not ctx.printer.as_json:
        ctx.note(f"Then run: {ctx.prog} reset-password TOKEN (the Token: line of the message)")
    ctx.printer.message(f"If {args.email} belongs to an account, a password-reset message is on its way.", body)


def reset_password(ctx: Context, args: argparse.Namespace) -> None:
    password = ctx.read_password(args, "New password: ", confirm=True)
    ctx.client.request("POST", RESET, {"token": args.token, "password": password})
    ctx.printer.message("Password changed. Every login of the account has ended: log in with the new password.",
                        {"password_reset": True})


# --- the logged-in account's second factor -------------------------------------------

def _wrong_code(exc: ApiError) -> bool:
    return exc.status == 400 and isinstance(exc.body, dict) and "code" in exc.body


def _show_setup(ctx: Context, setup: dict[str, Any]) -> None:
    if ctx.printer.as_json:
        ctx.printer.json(setup)
    else:
        ctx.printer.line(table([["secret", str(setup.get("secret"))], ["otpauth_uri", str(setup.get("otpauth_uri"))]]))
    ctx.printer.out.flush()  # a script (or a person) needs the secret before the code


def _show_recovery_codes(ctx: Context, body: dict[str, Any]) -> None:
    codes = body.get("recovery_codes") or []
    if ctx.printer.as_json:
        ctx.printer.json(body)
        ctx.note(RECOVERY_WARNING)
        return
    ctx.printer.line("Two-factor authentication is on.")
    ctx.printer.line(RECOVERY_WARNING)
    for code in codes:
        ctx.printer.line(f"  {code}")


def _proved(ctx: Context, args: argparse.Namespace, call: Callable[[], Any]) -> Any:
    """``call()``; when the server asks this login to prove its password again (a
    second factor's change needs a recent authentication), the password (prompted, or
    ``--password-stdin``), ``POST /v1/private/users/me/reauth``, and ``call()`` again."""
    try:
        return call()
    except ApiError as exc:
        if not needs_reauthentication(exc):
            raise
    ctx.note("This change needs your password again: your login is older than a few minutes.")
    ctx.session.request("POST", REAUTH, {"password": ctx.read_password(args, "Password: ")})
    return call()


def mfa_enable(ctx: Context, args: argparse.Namespace) -> None:
    if args.code is None:
        setup = _proved(ctx, args, lambda: ctx.session.request("POST", TOTP))
        _show_setup(ctx, setup)
        if args.setup_only:
            ctx.note(f"The setup is pending. Finish it with: {ctx.prog} mfa enable --code CODE")
            return
        ctx.note(SETUP_HINT)
    body = ctx.with_code(args, "Authentication code: ", lambda code: _proved(
        ctx, args, lambda: ctx.session.request("POST", TOTP_CONFIRM, {"code": code})), _wrong_code)
    _show_recovery_codes(ctx, body)


def mfa_disable(ctx: Context, args: argparse.Namespace) -> None:
    ctx.with_code(args, CODE_PROMPT, lambda code: _proved(
        ctx, args, lambda: ctx.session.request("DELETE", TOTP, {"code": code})), _wrong_code)
    ctx.printer.message("Two-factor authentication is off.", {"mfa_enabled": False})


# --- the command trees ---------------------------------------------------------------

def add_account_commands(commands: Any) -> None:
    """verify, resend-verification, forgot-password and reset-password."""
    parser = add_command(commands, "verify", "prove your email address with the code mailed to it "
                         "(POST /v1/public/users/verify)", verify)
    parser.add_argument("token", type=_code_arg, metavar="TOKEN", help="the code on the message's Token: line")
    parser = add_command(commands, "resend-verification", "mail a new verification code "
                         "(POST /v1/public/users/verify/resend)", resend_verification,
                         description="Ask for a new verification message. The server answers alike whether or "
                         "not the address has an unverified account.")
    parser.add_argument("email", metavar="EMAIL", help="the account's email address")
    parser = add_command(commands, "forgot-password", "mail a password-reset code "
                         "(POST /v1/public/users/password/forgot)", forgot_password,
                         description="Ask for a password-reset message. The server answers alike whether or not "
                         "the address has an account. Then run reset-password with the code.")
    parser.add_argument("email", metavar="EMAIL", help="the account's email address")
    parser = add_command(commands, "reset-password", "set a new password with a reset code "
                         "(POST /v1/public/users/password/reset)", reset_password,
                         description="Set a new password with the code of a password-reset message. The new "
                         "password is asked for twice without echo (or read with --password-stdin). Every "
                         "login of the account ends.")
    parser.add_argument("token", type=_code_arg, metavar="TOKEN", help="the code on the message's Token: line")
    add_password_stdin(parser, "the new password")


def add_mfa_commands(commands: Any) -> None:
    """mfa enable and mfa disable, for the logged-in account."""
    mfa = add_group(commands, "mfa", "turn two-factor authentication (TOTP) on or off for your account")
    parser = add_command(
        mfa, "enable", "set up TOTP: show a secret, confirm it with a code, get recovery codes", mfa_enable,
        description="Start a TOTP setup (POST /v1/private/users/me/mfa/totp): print the secret and its otpauth "
        "URI for an authenticator app, then ask for the code the app shows (at the terminal, or the next line "
        "of standard input when that is not a terminal), confirm it (POST .../totp/confirm) and print the "
        "recovery codes, shown only this once. In two steps for scripts: --setup-only, then --code CODE.",
    )
    add_password_stdin(parser, "your password, when the server asks this login to prove it again")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--setup-only", action="store_true",
                     help="only start the setup and print the secret; finish later with --code")
    how.add_argument("--code", type=_code_arg, metavar="CODE",
                     help="finish the pending setup (of --setup-only, or of an interrupted run) with this code "
                     "of the authenticator app, without starting a new one")
    parser = add_command(
        mfa, "disable", "turn TOTP off, proved by a code (DELETE /v1/private/users/me/mfa/totp)", mfa_disable,
        description="Turn two-factor authentication off. Needs a code of the authenticator app or an unused "
        "recovery code.",
    )
    add_code_option(parser, "the authenticator app's code, or a recovery code")
    add_password_stdin(parser, "your password, when the server asks this login to prove it again")

