"""Commands about the caller's own session: health, register, login, refresh, logout, whoami.

Every audience logs in the same way but keeps its own token file, so
``locky-admin login`` and ``locky-app login`` can hold different accounts.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from .commands import Context, add_code_option, add_command, add_password_stdin
from .http import ApiError, ConnectionFailed, HttpClient
from .tokens import AuthSession, NotLoggedIn, token_claims

HEALTH = "/v1/public/health"
REGISTER = "/v1/public/users/register"
LOGOUT = "/v1/private/users/logout"
ME = "/v1/internal/users/me"


def _who(user: dict[str, Any] | None) -> str:
    user = user or {}
    return f"{user.get('name', '?')} <{user.get('email', '?')}>"


def _utc(epoch: float | None) -> str | None:
    if not isinstance(epoch, (int, float)):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def health(ctx: Context, args: argparse.Namespace) -> None:
    body = ctx.client.request("GET", HEALTH)
    ctx.printer.message(f"{body.get('status', '?')} ({ctx.url})", body)


def register(ctx: Context, args: argparse.Namespace) -> None:
    name = ctx.ask(args.name, "Name: ", "--name")
    email = ctx.ask(args.email, "Email: ", "--email")
    password = ctx.read_password(args, confirm=True)
    user = ctx.client.request("POST", REGISTER, {"name": name, "email": email, "password": password})
    if not ctx.printer.as_json:
        ctx.note(f"Registered {_who(user)}. Log in with: {ctx.prog} login --email {user.get('email', email)}")
    ctx.printer.record(user)


CODE_PROMPT = "Authentication code (or a recovery code): "


def _wrong_code(exc: ApiError) -> bool:
    """A 401 of the second step that another code may fix (not a dead mfa_token)."""
    return exc.status == 401 and "mfa token" not in exc.message.lower()


def login(ctx: Context, args: argparse.Namespace) -> None:
    email = ctx.ask(args.email, "Email: ", "--email")
    password = ctx.read_password(args)
    body = ctx.session.login(email, password)
    if body.get("mfa_required"):
        # Second step (docs/http/accounts.md): a TOTP or recovery code, then the usual tokens.
        mfa_token = str(body["mfa_token"])
        body = ctx.with_code(args, CODE_PROMPT, lambda code: ctx.session.login_mfa(mfa_token, code), _wrong_code)
    user = body.get("user") or {}
    ctx.printer.message(
        f"Logged in to {ctx.url} as {_who(user)}.",
        {"user": user, "token_type": body.get("token_type"), "expires_in": body.get("expires_in")},
    )


def refresh(ctx: Context, args: argparse.Namespace) -> None:
    data = ctx.session.refresh()
    expires = _utc(token_claims(data["access_token"]).get("exp", data.get("expires_at")))
    ctx.printer.message(f"Access token refreshed; it expires at {expires}.", {"expires_at": expires})


def logout(ctx: Context, args: argparse.Namespace) -> int | None:
    data = ctx.store.load()
    if not data:
        ctx.printer.message("Not logged in.", {"logged_out": False})
        return None
    # Revoke the session where it lives, whatever --url says now.
    origin = str(data.get("url") or ctx.url).rstrip("/")
    session = AuthSession(HttpClient(origin, user_agent=ctx.client.user_agent), ctx.store, f"{ctx.prog} login")
    try:
        session.request("POST", LOGOUT)
    except NotLoggedIn:
        pass  # the tokens were already dead: nothing left to revoke
    except ApiError as exc:
        if exc.status != 401:
            ctx.store.clear()
            raise
    except ConnectionFailed as exc:
        ctx.store.clear()
        raise ConnectionFailed(exc.url, f"{exc.reason} (local tokens removed; the session was not revoked)") from None
    ctx.store.clear()
    ctx.printer.message(f"Logged out of {origin}.", {"logged_out": True})
    return None


def whoami(ctx: Context, args: argparse.Namespace) -> None:
    ctx.printer.record(ctx.session.request("GET", ME))


def add_health(commands: Any) -> None:
    add_command(commands, "health", "check that the server answers (GET /v1/public/health)", health)


def add_register(commands: Any) -> None:
    parser = add_command(commands, "register", "create an account (POST /v1/public/users/register)", register)
    parser.add_argument("--name", help="display name (prompted for when missing)")
    parser.add_argument("--email", help="email address (prompted for when missing)")
    add_password_stdin(parser)


def add_session_commands(commands: Any) -> None:
    """login, refresh, logout and whoami, with this audience's token file."""
    parser = add_command(
        commands, "login", "log in and store the tokens (POST /v1/public/users/login)", login,
        description="Log in and keep the access and refresh tokens in this client's token file "
        "($XDG_CONFIG_HOME/locky or ~/.config/locky, mode 0600). Tokens are never printed. "
        "An account with two-factor authentication is then asked for a code of its authenticator "
        "app (or one of its recovery codes): --code, the next line of standard input, or a prompt.",
    )
    parser.add_argument("--email", help="account email (prompted for when missing)")
    add_password_stdin(parser)
    add_code_option(parser, "the authenticator app's code, or a recovery code, if the account asks for one")
    add_command(commands, "refresh", "exchange the stored refresh token for new tokens now", refresh,
                description="Refresh the stored tokens now. Other commands do this by themselves "
                "when the access token has expired.")
    add_command(commands, "logout", "revoke the session on the server and remove the stored tokens", logout)
    add_command(commands, "whoami", "show the logged-in user (GET /v1/internal/users/me)", whoami)
