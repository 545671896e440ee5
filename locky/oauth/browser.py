"""The browser's side of the OpenID provider (docs/http/oauth.md): the OP session cookie
and the CSRF token of the sign-in, code and consent forms.

``locky_op`` names the OP session (the browser's sign-in at Locky: a ``locky_sessions``
row without a client) as ``<session uuid>.<HMAC>``: the digest, keyed from
``LOCKY_JWT_SECRET``, means nobody can name a session they were not given, not even a
login of the /v1 API whose uuid they know. The row stays the truth: signing out,
changing the password or disabling the account revokes it and the cookie then names
nothing.

``locky_csrf`` holds a random value; each form carries a keyed digest of it (the
double-submit pattern, bound to the cookie by the key): a form posted from another site
has neither the cookie (``SameSite=Lax`` keeps it off cross-site posts) nor a digest
that matches one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timezone

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from locky.records import Session, User

OP_COOKIE = "locky_op"
CSRF_COOKIE = "locky_csrf"
#: The cookies go only to the provider's own paths.
COOKIE_PATH = "/oauth"
#: The form field holding the CSRF token.
CSRF_FIELD = "csrf_token"
STATE_KEY = "locky.oauth.browser"


@dataclass(frozen=True)
class OpSession:
    """A live OP session and its user."""

    session: Session
    user: User

    @property
    def auth_time(self) -> int:
        """When the user signed in, in Unix seconds (the session's ``created_at``: naive
        UTC, as records hold times, so never read as local time)."""
        created = self.session.created_at
        return int((created if created.tzinfo else created.replace(tzinfo=timezone.utc)).timestamp())


class Browser:
    """Cookies and CSRF tokens of one app, keyed from its ``LOCKY_JWT_SECRET``."""

    def __init__(self, context):
        self.context = context
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"locky-oauth-browser",
                         info=b"locky oauth browser v1").derive(context.settings.jwt_secret.encode())
        from locky.oauth.server import public_base

        self.secure = public_base(context.settings).startswith("https://")

    def _mac(self, purpose: str, value: str) -> str:
        digest = hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    # -- the OP session -----------------------------------------------------------------

    def current(self, req) -> OpSession | None:
        """The browser's live OP session, or ``None`` (no cookie, a forged or stale one,
        a revoked session or user)."""
        session_uuid = self.cookie_session_uuid(req)
        return self.session(session_uuid) if session_uuid is not None else None

    def session(self, session_uuid: str) -> OpSession | None:
        """The live OP session ``session_uuid``, or ``None``."""
        found = self.context.storage.sessions.identity(session_uuid)
        if found is None:
            return None
        session, user = found
        if session.client_id is not None or user.disabled:
            return None
        return OpSession(session, user)

    def cookie_session_uuid(self, req) -> str | None:
        """The OP session the cookie names (live or not), when its digest is right."""
        for value in req.get_cookie_values(OP_COOKIE) or ():
            session_uuid, _, mac = value.rpartition(".")
            if session_uuid and hmac.compare_digest(mac, self._mac("op", session_uuid)):
                return session_uuid
        return None

    def set_session(self, resp, session_uuid: str) -> None:
        """Give the browser the OP session ``session_uuid`` (a cookie for the browser's
        life: the session row ends it)."""
        resp.set_cookie(OP_COOKIE, f"{session_uuid}.{self._mac('op', session_uuid)}", path=COOKIE_PATH,
                        secure=self.secure, http_only=True, same_site="Lax")

    def clear_session(self, resp) -> None:
        resp.unset_cookie(OP_COOKIE, path=COOKIE_PATH, same_site="Lax")

    # -- CSRF ---------------------------------------------------------------------------

    def csrf_token(self, req, resp) -> str:
        """The token for the forms of this answer: the digest of the browser's
        ``locky_csrf`` cookie, set here when it has none."""
        values = [v for v in (req.get_cookie_values(CSRF_COOKIE) or ()) if v]
        value = values[0] if values else None
        if value is None:
            value = secrets.token_urlsafe(32)
            resp.set_cookie(CSRF_COOKIE, value, path=COOKIE_PATH, secure=self.secure, http_only=True,
                            same_site="Lax")
        return self._mac("csrf", value)

    def csrf_ok(self, req, token: str | None) -> bool:
        """Whether a posted ``token`` matches the browser's ``locky_csrf`` cookie."""
        if not token:
            return False
        return any(hmac.compare_digest(token, self._mac("csrf", value))
                   for value in (req.get_cookie_values(CSRF_COOKIE) or ()) if value)

    # -- a sign-in this flow just made ----------------------------------------------------

    def fresh_mark(self, session_uuid: str) -> str:
        """A mark the consent form carries when it follows a sign-in in OP session
        ``session_uuid``: the answer to it honours ``prompt=login`` and ``max_age``
        without asking to sign in again."""
        return self._mac("fresh", session_uuid)

    def is_fresh(self, mark: str | None, session_uuid: str) -> bool:
        return bool(mark) and hmac.compare_digest(mark, self.fresh_mark(session_uuid))


def browser(context) -> Browser:
    """The app's :class:`Browser`, built on first use."""
    found = context.state.get(STATE_KEY)
    if found is None:
        found = context.state[STATE_KEY] = Browser(context)
    return found
