"""Abuse limits of the anonymous routes (docs/http/accounts.md): how many registrations and
recovery requests (password forgot and verification resend, together) one client
address may make per hour, and how many verification messages one mail address may get.

Each is a quota in the storage's throttle (:meth:`locky.providers.LoginThrottle.take`:
at most N per hour, counted from the first request, without the login lockout's
backoff), so it holds across worker processes and hosts. Each kind has a key prefix of
its own (``signup:ip:...``, ``recovery:ip:...``, ``verify-mail:<digest of the
address>``), apart from the login counts' keys. Registrations are counted before their password is hashed, so
a refused one costs a throttle row's update and nothing else: no hash, no audit record.
"""

from __future__ import annotations

import hashlib

from locky.http.client_address import client_key
from locky.errors import Locked

#: The window of every quota here.
HOUR = 3600
SIGNUP, RECOVERY = "signup", "recovery"
#: Verification messages one mail address may get per hour, whatever sends them
#: (registration, an email change, a resend).
VERIFY_MAIL_PER_HOUR = 3

REFUSED = {
    SIGNUP: "Too many registrations from this address; try again later.",
    RECOVERY: "Too many password-reset and verification requests from this address; try again later.",
}


def count_request(context, kind: str, client_address: str | None) -> None:
    """Count one ``kind`` request (:data:`SIGNUP` or :data:`RECOVERY`) from
    ``client_address`` (the request's, see :mod:`locky.http.client_address`); raise
    :class:`Locked` (429 with ``Retry-After``) when the address's hour is spent.
    ``None``: no HTTP client to count (a call from the console or a plugin)."""
    if client_address is None:
        return
    settings = context.settings
    limit = settings.signup_max_per_ip if kind == SIGNUP else settings.recovery_max_per_ip
    retry_after = context.storage.throttle.take(f"{kind}:{client_key(client_address)}", limit=limit, window=HOUR)
    if retry_after is not None:
        raise Locked(retry_after, REFUSED[kind])


def may_send_verification(context, email: str) -> bool:
    """Count one verification message to ``email``: whether it is within the address's
    hourly :data:`VERIFY_MAIL_PER_HOUR` (a message refused is not counted)."""
    # A digest, not the address: a key holds 254 characters, as an address may alone.
    key = "verify-mail:" + hashlib.sha256(email.lower().encode("utf-8", "surrogatepass")).hexdigest()
    return context.storage.throttle.take(key, limit=VERIFY_MAIL_PER_HOUR, window=HOUR) is None
