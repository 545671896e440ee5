"""Recent authentication: what a second factor's changes ask beyond an access token.

Turning TOTP on or off with nothing but a stolen access token would let a thief lock
the owner out (an authenticator of theirs) or strip the account's protection. So those
changes need a password (or second-factor) check of this very login within
:data:`RECENT`: the login itself, when it is that young, or a later
``POST /v1/private/users/me/reauth``.

A reauthentication is kept as a single-use code of purpose :data:`PURPOSE` whose subject
(the code store's ``user_uuid``) is the login's session: storage learns nothing it could
replay (the code's hash is of random bytes no one holds), and the check is one count of
those codes made since :data:`RECENT` ago. An identity without a session (an API key of
a plugin) is never recent.
"""

from __future__ import annotations

from datetime import timedelta

from locky.accounts.codes import hash_code, new_code
from locky.errors import Forbidden
from locky.records import Identity, utcnow

#: How long a password or second-factor check counts as recent.
RECENT = timedelta(minutes=5)
PURPOSE = "reauth"
#: RFC 9470's challenge: the token is good, the authentication behind it too old.
CHALLENGE = ('Bearer error="insufficient_user_authentication", error_description="A recent authentication'
             f' is required: POST /v1/private/users/me/reauth", max_age={int(RECENT.total_seconds())}')


def record(context, identity: Identity) -> None:
    """Note that ``identity``'s login proved its password just now."""
    if identity.session_uuid is None:
        return
    context.storage.codes.add(code_hash=hash_code(new_code()), purpose=PURPOSE, user_uuid=identity.session_uuid,
                              email=identity.user.email, expires_at=utcnow() + RECENT)


def is_recent(context, identity: Identity) -> bool:
    """Whether ``identity``'s login checked a password or code within :data:`RECENT`."""
    if identity.session_uuid is None:
        return False
    storage, since = context.storage, utcnow() - RECENT
    found = storage.sessions.identity(identity.session_uuid)
    if found is not None and _naive(found[0].created_at) >= since:
        return True
    return storage.codes.count_since(identity.session_uuid, PURPOSE, since) > 0


def require(context, identity: Identity) -> None:
    """Raise a 403 titled "Recent authentication required" unless ``identity``'s
    authentication is recent. It carries RFC 9470's ``insufficient_user_authentication``
    challenge, so a client can tell it from a policy refusal; the token itself is good,
    which is why the status is not 401 (a client would refresh it and try again)."""
    if not is_recent(context, identity):
        raise Forbidden("A recent authentication is required for this change: confirm your password with"
                        " POST /v1/private/users/me/reauth, then try again.",
                        title="Recent authentication required", challenge=CHALLENGE)


def _naive(moment):
    """``moment`` as naive UTC, as :func:`utcnow` gives it."""
    return moment.replace(tzinfo=None) if moment.tzinfo is not None else moment
