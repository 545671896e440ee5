"""OAuth 2 / OpenID Connect clients and users' consents (docs/http/oauth.md): the rules a
client's registration obeys, and the one service behind the ``/v1`` routes, the console
and ``locky clients``: create, update, rotate the secret, delete, and a user's consents.

Every change is recorded in its own ``storage.atomic()`` block with its event
(``oauth.client.*``, ``oauth.consent.revoked``). The secret of a confidential client is
made here, shown once to whoever made or rotated it, and kept only as its SHA-256
(:func:`locky.accounts.codes.hash_code`): the token endpoint checks it on every
``client_credentials`` grant, where a slow hash would cost more than the grant.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import urlsplit

from locky import events
from locky.accounts.codes import hash_code, new_code
from locky.errors import Invalid, NotFound
from locky.records import OAuthClient, UUID4

CONFIDENTIAL, PUBLIC = "confidential", "public"
CLIENT_TYPES = (CONFIDENTIAL, PUBLIC)
AUTHORIZATION_CODE, REFRESH_TOKEN, CLIENT_CREDENTIALS = "authorization_code", "refresh_token", "client_credentials"
GRANT_TYPES = (AUTHORIZATION_CODE, REFRESH_TOKEN, CLIENT_CREDENTIALS)
DEFAULT_GRANT_TYPES = (AUTHORIZATION_CODE, REFRESH_TOKEN)
#: The scopes Locky's OpenID provider knows, and a new client's default: all of them.
SCOPES = ("openid", "profile", "email", "groups", "offline_access")
ID_TOKEN_ALGS = ("RS256", "ES256", "EdDSA")
DEFAULT_ID_TOKEN_ALG = "RS256"
#: At most this many redirect URIs (of each kind) per client, each at most this long.
MAX_URIS = 32
MAX_URI_LENGTH = 2000
#: The hosts an ``http://`` redirect URI may name (RFC 8252 section 7.3: a native app's
#: loopback listener); every other redirect URI is ``https://``.
LOOPBACK_NAMES = frozenset({"localhost"})
#: What the record fields of a client are, in the order the API shows them.
FIELDS = ("name", "type", "redirect_uris", "post_logout_redirect_uris", "grant_types", "scopes",
          "id_token_signed_response_alg", "first_party")
#: A numeric ``{id}`` in a path: digits only (the record's id).
DIGITS = re.compile(r"^[0-9]{1,20}$")
#: The refusals of the rules between fields and of what a client is (400s, by field).
PUBLIC_WITHOUT_CREDENTIALS = "A public client cannot use client_credentials: it holds no secret."
CODE_NEEDS_REDIRECT = "A client of the authorization_code grant needs at least one redirect URI."
TYPE_FIXED = "A client's type cannot change: register a new client."
PUBLIC_HAS_NO_SECRET = "A public client has no secret."


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI, or ``None`` when it can: absolute, no
    fragment, no wildcard, ``https://``, or ``http://`` only to a loopback host
    (127.0.0.0/8, ``::1``, ``localhost``). Redirect URIs are matched exactly, so the
    value kept is the value given."""
    if not isinstance(uri, str) or not uri:
        return "Not a URI."
    if len(uri) > MAX_URI_LENGTH:
        return f"At most {MAX_URI_LENGTH} characters."
    if any(ch.isspace() or ord(ch) < 0x21 or ord(ch) == 0x7f for ch in uri) or not uri.isascii():
        return "Must be an ASCII URI without spaces or control characters."
    try:
        parts = urlsplit(uri)
        parts.port  # read for its check: a port that is not a number in 0-65535 is a ValueError
    except ValueError:
        return "Not a valid URI."
    if not parts.scheme or not parts.netloc:
        return "Must be an absolute URI (https://host/path)."
    if "#" in uri:
        return "Must not contain a fragment (#)."
    if "*" in uri:
        return "Must not contain a wildcard: redirect URIs are matched exactly."
    if parts.username is not None or parts.password is not None:
        return "Must not contain user information (user@host)."
    host = parts.hostname or ""
    if not host:
        return "Must name a host."
    scheme = parts.scheme.lower()
    if scheme == "https":
        return None
    if scheme == "http":
        if is_loopback(host):
            return None
        return "http:// is allowed only to a loopback host (127.0.0.1, [::1], localhost); use https://."
    return "Must be https://, or http:// to a loopback host."


def is_loopback(host: str) -> bool:
    """Whether ``host`` (as :func:`urllib.parse.urlsplit` gives it, brackets removed) is
    ``localhost`` or an address in 127.0.0.0/8 or ``::1``."""
    if host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_rules(type: str, grant_types: Iterable[str], redirect_uris: Iterable[str]) -> None:
    """The rules between fields (each field alone is the schema's to check): a public
    client has no secret, so it cannot use ``client_credentials``; a client of the
    authorization code flow needs somewhere to send the user back."""
    grant_types, redirect_uris = tuple(grant_types), tuple(redirect_uris)
    if type == PUBLIC and CLIENT_CREDENTIALS in grant_types:
        raise Invalid.one("grant_types", PUBLIC_WITHOUT_CREDENTIALS)
    if AUTHORIZATION_CODE in grant_types and not redirect_uris:
        raise Invalid.one("redirect_uris", CODE_NEEDS_REDIRECT)


def new_client_id() -> str:
    """A new client_id: 128 random bits, URL-safe; never starting with ``-`` (a command
    line would read it as an option: ``locky clients delete CLIENT_ID``)."""
    while True:
        client_id = secrets.token_urlsafe(16)
        if not client_id.startswith("-"):
            return client_id


@dataclass(frozen=True)
class Made:
    """A client just made or given a new secret, with the secret (``None`` for a public
    client) that is shown this once and stored only hashed."""

    client: OAuthClient
    secret: str | None


def details(client: OAuthClient, **more: Any) -> dict:
    """What a client's events tell of it: never its secret or hash."""
    return {"client_id": client.client_id, "name": client.name, "type": client.type, **more}


class Clients:
    """The client and consent service of one app (its ``context``)."""

    def __init__(self, context, *, actor: str | None = None):
        self.context = context
        self.storage = context.storage
        self.store = context.storage.oauth_clients
        # ``"cli"`` for the operator's command: its events say so (the actor is null).
        self.actor = actor

    def _record(self, event: str, client: OAuthClient, extra: dict | None = None, *,
                target_type: str = "oauth_client", target_uuid: str | None = None) -> None:
        info = {**(extra or {})}
        if self.actor is not None:
            info["actor"] = self.actor
        kwargs = {"actor_uuid": None} if self.actor is not None else {}
        self.context.audit.record(event, target_type=target_type,
                                  target_uuid=target_uuid if target_uuid is not None else client.uuid,
                                  details=info, record=client, **kwargs)

    # -- reads -------------------------------------------------------------------------

    def find(self, key: str | int) -> OAuthClient:
        """The live client named by its id (digits), uuid or client_id; :class:`NotFound`."""
        client = None
        if isinstance(key, int):
            client = self.store.get(key) if key > 0 else None
        elif isinstance(key, str):
            if DIGITS.fullmatch(key):
                number = int(key)
                client = self.store.get(number) if 0 < number < 2**63 else None
            if client is None and UUID4.fullmatch(key.lower()):
                client = self.store.get_by_uuid(key.lower())
            if client is None:
                client = self.store.get_by_client_id(key)
        if client is None:
            raise NotFound()
        return client

    # -- writes ------------------------------------------------------------------------

    def create(self, data: dict) -> Made:
        """Register a client from a loaded ``OAuthClientRequestSchema`` body."""
        values = {
            "name": data["name"],
            "type": data["type"],
            "redirect_uris": tuple(data.get("redirect_uris") or ()),
            "post_logout_redirect_uris": tuple(data.get("post_logout_redirect_uris") or ()),
            "grant_types": tuple(data.get("grant_types") or DEFAULT_GRANT_TYPES),
            "scopes": tuple(data["scopes"]) if data.get("scopes") is not None else SCOPES,
            "id_token_signed_response_alg": data.get("id_token_signed_response_alg") or DEFAULT_ID_TOKEN_ALG,
            "first_party": bool(data.get("first_party", False)),
        }
        check_rules(values["type"], values["grant_types"], values["redirect_uris"])
        secret = new_code() if values["type"] == CONFIDENTIAL else None
        with self.storage.atomic():
            client = self.store.create(client_id=new_client_id(), **values,
                                       secret_hash=hash_code(secret) if secret is not None else None)
            self._record(events.OAUTH_CLIENT_CREATED, client,
                         details(client, grant_types=list(client.grant_types),
                                 redirect_uris=list(client.redirect_uris)))
        return Made(client, secret)

    def update(self, key: str | int, data: dict) -> OAuthClient:
        """Change the fields present in a loaded ``OAuthClientUpdateSchema`` body (the
        type stays what it was made as: a public client has no secret to start from)."""
        client = self.find(key)
        changes = {name: tuple(value) if isinstance(value, list) else value for name, value in data.items()}
        if changes.pop("type", client.type) != client.type:
            raise Invalid.one("type", TYPE_FIXED)
        merged = {name: changes.get(name, getattr(client, name)) for name in ("grant_types", "redirect_uris")}
        check_rules(client.type, merged["grant_types"], merged["redirect_uris"])
        with self.storage.atomic():
            record = self.store.update(client.id, **changes)
            self._record(events.OAUTH_CLIENT_UPDATED, record, details(record, changed=sorted(changes)))
        return record

    def rotate_secret(self, key: str | int) -> Made:
        """A new secret for a confidential client; the old one stops working at once
        (tokens already issued keep working until they expire)."""
        client = self.find(key)
        if client.type != CONFIDENTIAL:
            raise Invalid.one("type", PUBLIC_HAS_NO_SECRET)
        secret = new_code()
        with self.storage.atomic():
            record = self.store.update(client.id, secret_hash=hash_code(secret))
            self._record(events.OAUTH_CLIENT_SECRET_ROTATED, record, details(record))
        return Made(record, secret)

    def delete(self, key: str | int) -> OAuthClient:
        """Soft-delete the client and end what it holds: every login it was given ends
        (``sessions.revoke_client``) and its ``client_credentials`` tokens stop with it
        (a deleted client is not live)."""
        client = self.find(key)
        with self.storage.atomic():
            record = self.store.delete(client.id)
            ended = self.storage.sessions.revoke_client(client.client_id)
            self._record(events.OAUTH_CLIENT_DELETED, record, details(record, sessions_ended=ended))
        return record

    # -- a user's consents -----------------------------------------------------------

    def consents(self, user_uuid: str) -> list[dict]:
        """The user's consents, oldest first, each with the client's name (``None`` when
        the client is gone since)."""
        found = []
        for consent in self.storage.consents.of_user(user_uuid):
            client = self.store.get_by_client_id(consent.client_id)
            found.append({"client_id": consent.client_id, "client_name": client.name if client else None,
                          "scopes": list(consent.scopes), "created_at": consent.created_at,
                          "updated_at": consent.updated_at})
        return found

    def withdraw(self, user_uuid: str, client_id: str) -> int:
        """Withdraw the user's consent to ``client_id`` and end the user's logins of that
        client; how many logins ended. :class:`NotFound` when there was no consent."""
        with self.storage.atomic():
            consent = self.storage.consents.get(user_uuid, client_id)
            if consent is None or not self.storage.consents.withdraw(user_uuid, client_id):
                raise NotFound()
            ended = self.storage.sessions.revoke_client(client_id, user_uuid=user_uuid)
            info = {"client_id": client_id, "scopes": list(consent.scopes), "sessions_ended": ended}
            if self.actor is not None:
                info["actor"] = self.actor
            self.context.audit.record(events.OAUTH_CONSENT_REVOKED, target_type="user", target_uuid=user_uuid,
                                      details=info, record=consent)
        return ended
