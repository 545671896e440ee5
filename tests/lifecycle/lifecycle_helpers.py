"""Helpers of the account-lifecycle tests (docs/http/authorization.md and docs/http/accounts.md): the routes,
short calls that assert the status they expect, the mail the app sends (read through
``locky.testing``'s ``MailBox``, waiting for the background sender, never sleeping and
reading) and a small RFC 6238 authenticator written here from the RFC (no pyotp), so the
server's TOTP is checked against an independent implementation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import time
from typing import Any

from locky.testing import PASSWORD, Account

REGISTER = "/v1/public/users/register"
LOGIN = "/v1/public/users/login"
LOGIN_MFA = "/v1/public/users/login/mfa"
REFRESH = "/v1/public/users/refresh"
VERIFY = "/v1/public/users/verify"
RESEND = "/v1/public/users/verify/resend"
FORGOT = "/v1/public/users/password/forgot"
RESET = "/v1/public/users/password/reset"
ME = "/v1/internal/users/me"
USERS = "/v1/internal/users"
WRITE = "/v1/private/users"
TOTP = "/v1/private/users/me/mfa/totp"
TOTP_CONFIRM = "/v1/private/users/me/mfa/totp/confirm"

USER_KEYS = {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "email",
             "email_verified", "disabled", "mfa_enabled"}
TOKEN_KEYS = {"access_token", "token_type", "expires_in", "refresh_token", "user"}
ACCEPTED = {"status": "accepted"}
#: How long the background sender may take to empty the outbox before a test fails (it
#: hands queued letters to the mailer well under a second).
SENDER_TIMEOUT = 10.0


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def post(client, path: str, body: Any, token: str | None = None):
    return client.simulate_post(path, json=body, headers=bearer(token) if token else None)


def login(client, email: str, password: str = PASSWORD):
    return client.simulate_post(LOGIN, json={"email": email, "password": password})


def me_status(client, access_token: str) -> int:
    """200 while ``access_token`` works, 401 once it does not (any other status fails)."""
    result = client.simulate_get(ME, headers=bearer(access_token))
    assert result.status_code in (200, 401), (result.status_code, result.text)
    return result.status_code


def refresh_status(client, refresh_token: str) -> int:
    result = client.simulate_post(REFRESH, json={"refresh_token": refresh_token})
    assert result.status_code in (200, 401), (result.status_code, result.text)
    return result.status_code


def me(client, account_or_token) -> dict:
    token = account_or_token if isinstance(account_or_token, str) else account_or_token.access_token
    result = client.simulate_get(ME, headers=bearer(token))
    assert result.status_code == 200, result.text
    assert set(result.json) == USER_KEYS, result.json
    return result.json


def put_user(client, caller: Account, user_id: int, body: dict):
    return client.simulate_put(f"{WRITE}/{user_id}", json=body, headers=caller.headers)


def delete_user(client, caller: Account, user_id: int) -> None:
    result = client.simulate_delete(f"{WRITE}/{user_id}", headers=caller.headers)
    assert result.status_code == 204, result.text


def mail_code(client, to: str, purpose: str, count: int = 1) -> str:
    """The code of the newest ``purpose`` message to ``to``, once ``count`` of them exist."""
    message = client.mailbox.wait(to, purpose=purpose, count=count)
    return client.mailbox.token(message)


def mail_count(client, to: str, purpose: str | None = None) -> int:
    return len(client.mailbox.messages(to=to, purpose=purpose))


def sender_settled(client) -> None:
    """Return once the app's background sender has handled every letter queued so far:
    its outbox is empty, each letter sent or dropped (a request queues its letters
    before it answers, and the sender deletes one only after the mailer took it)."""
    outbox = client.app.context.storage.outbox
    deadline = time.monotonic() + SENDER_TIMEOUT
    while (waiting := outbox.pending()) > 0:
        assert time.monotonic() < deadline, f"{waiting} letter(s) still in the outbox after {SENDER_TIMEOUT} s"
        time.sleep(0.01)


def assert_mail_settles(client, to: str, purpose: str | None, expected: int) -> None:
    """Once the sender has handled everything queued, exactly ``expected`` ``purpose``
    messages went to ``to``."""
    sender_settled(client)
    found = client.mailbox.messages(to=to, purpose=purpose)
    assert len(found) == expected, (to, purpose, [m["Subject"] for m in found])


def verify(client, token: str):
    return client.simulate_post(VERIFY, json={"token": token})


def verified_account(client, email: str, password: str = PASSWORD, name: str | None = None) -> Account:
    """Register ``email``, verify it through the mail it got, and log it in."""
    account = client.account(email, password, name)
    client.verify(email)
    account.body = me(client, account)
    assert account.body["email_verified"] is True, account.body
    return account


def forgot(client, email: str):
    return client.simulate_post(FORGOT, json={"email": email})


def reset(client, token: str, password: str):
    return client.simulate_post(RESET, json={"token": token, "password": password})


def reset_code(client, email: str, count: int = 1) -> str:
    """Ask for a reset of ``email`` and return the code its ``count``-th message holds."""
    result = forgot(client, email)
    assert result.status_code == 202, result.text
    assert result.json == ACCEPTED
    return mail_code(client, email, "reset", count)


def is_admin(client, caller: Account, user_uuid: str) -> bool:
    """Whether the policy lets ``user_uuid`` delete any user (only admins may)."""
    result = client.simulate_get("/v1/internal/authz/check", headers=caller.headers,
                                 params={"user_uuid": user_uuid, "resource": "users", "action": "delete"})
    assert result.status_code == 200, result.text
    assert set(result.json) == {"allowed"} and isinstance(result.json["allowed"], bool), result.json
    return result.json["allowed"]


# ---------------------------------------------------------------------------
# RFC 4226 / RFC 6238
# ---------------------------------------------------------------------------


def hotp(key: bytes, counter: int, digits: int = 6, digest=hashlib.sha1) -> str:
    """RFC 4226 section 5.3: HMAC, dynamic truncation, modulo 10^digits."""
    mac = hmac.new(key, struct.pack(">Q", counter), digest).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF
    return str(value % 10 ** digits).zfill(digits)


def totp(key: bytes, unix_time: float, digits: int = 6, step: int = 30) -> str:
    """RFC 6238: HOTP of the number of ``step``-second periods since the epoch."""
    return hotp(key, int(unix_time) // step, digits)


def base32_key(secret: str) -> bytes:
    """The key of a base32 secret as authenticator apps read it (any case, no padding)."""
    cleaned = secret.replace(" ", "").upper()
    return base64.b32decode(cleaned + "=" * (-len(cleaned) % 8))


class Authenticator:
    """An authenticator app for one secret. The server accepts each code once and, in
    the usual implementation, only steps after the last one used; so this hands out
    unused steps in ascending order within the ±1 window of now (the step before now
    first), and fails loudly when a test asks for more than the window holds."""

    def __init__(self, secret: str):
        self.secret = secret
        self.key = base32_key(secret)
        self.last: int | None = None

    @staticmethod
    def now_step() -> int:
        return int(time.time()) // 30

    def at(self, step: int) -> str:
        return hotp(self.key, step)

    def code(self) -> str:
        if time.time() % 30 > 28.5:  # do not start on a step about to leave the window
            time.sleep(30 - time.time() % 30 + 0.05)
        now = self.now_step()
        step = now - 1 if self.last is None else max(now - 1, self.last + 1)
        assert step <= now + 1, "the test used every code of the ±1 window"
        self.last = step
        return self.at(step)

    def used(self) -> str:
        """The code last handed out (for replays)."""
        assert self.last is not None
        return self.at(self.last)

    def wrong(self) -> str:
        """Six digits that are no code of any step in the ±2 window of now."""
        now = self.now_step()
        valid = {self.at(s) for s in range(now - 2, now + 4)}
        candidate = 0
        while f"{candidate:06d}" in valid:
            candidate += 1
        return f"{candidate:06d}"
