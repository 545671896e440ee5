"""Tokens other applications verify (docs/http/tokens.md): the JWKS, the authorization-server
metadata (RFC 8414), key rotation and listing, introspection (RFC 7662) and
revocation (RFC 7009)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from locky import audit
from locky.accounts.logins import revoke_session
from locky.errors import Conflict, LockyError, StateConflict
from locky.http.media import load, read_json_or_form
from locky.routes import Operation, Route
from locky.oauth.client_auth import ClientRefused, authenticate, credential_fields, uses_basic
from locky.oauth.discovery import capabilities as oauth_capabilities, endpoints as oauth_endpoints
from locky.records import CLIENT_SUBJECT_PREFIX
from locky.schemas import KeyListSchema, TokenRequestSchema

JWKS_PATH = "/.well-known/jwks.json"
METADATA_PATH = "/.well-known/oauth-authorization-server"
#: Seconds clients may keep the JWKS and metadata; a verifier meeting a kid it does not
#: know (a key rotated in the meantime) fetches the JWKS again.
JWKS_MAX_AGE = 300
KEY_LIST = KeyListSchema()


def signing_keys(context):
    """The token backend's key families (every algorithm's: the configured one's and
    RS256's for ID tokens), or ``None``: a backend without keys of its own, or a
    shared-secret (HMAC) algorithm while no OAuth client is registered. HMAC access
    tokens are verified by Locky alone, so their JWKS stays ``{"keys": []}`` and there is
    nothing to rotate (409); the ID-token keys appear once the OpenID provider has a
    client, whose relying parties need them."""
    keyring = getattr(context.tokens, "keyring", None)
    if keyring is None:
        return None
    if context.settings.jwt_algorithm.startswith("HS") and context.storage.oauth_clients.count() == 0:
        return None
    return keyring


class Jwks:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        keys = signing_keys(self.context)
        resp.media = {"keys": keys.published() if keys is not None else []}
        resp.cache_control = ["public", f"max-age={JWKS_MAX_AGE}"]


def configured_base(settings) -> str | None:
    """Where Locky's public URLs start, as configured: ``LOCKY_PUBLIC_URL``, else the
    tokens' issuer when it is an ``http(s)://`` URL (``LOCKY_JWT_ISSUER``, by default
    ``http://<LOCKY_HOST>:<LOCKY_PORT>``); ``None`` when the issuer is no URL (a URN)
    and no public URL is set."""
    if settings.public_base:
        return settings.public_base
    issuer = settings.issuer
    if re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", issuer):
        return issuer.rstrip("/")
    return None


class Metadata:
    """RFC 8414's document: where the keys and the OpenID provider's endpoints are, and
    the grants it supports (the same as its discovery document).

    Its URLs come from the settings (:func:`configured_base`), never from the request's
    ``Host``: a client (``locky.client`` follows ``jwks_uri``) or a shared cache must not
    learn them from whoever asked. Only when nothing names a URL (``LOCKY_JWT_ISSUER`` a
    URN, no ``LOCKY_PUBLIC_URL``) are they the request's own, and then the answer is
    ``Cache-Control: no-store``: no cache keeps what one caller's ``Host`` made."""

    def __init__(self, context):
        self.context = context
        self.base = configured_base(context.settings)

    def on_get(self, req, resp):
        settings = self.context.settings
        base = self.base or req.prefix
        # The OpenID provider's endpoints and grants (docs/http/oauth.md), as its
        # discovery document names them.
        resp.media = {"issuer": settings.issuer, **oauth_endpoints(base), **oauth_capabilities()}
        resp.cache_control = ["public", f"max-age={JWKS_MAX_AGE}"] if self.base else ["no-store"]


class KeyList:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        self.context.require(req.context.identity, "keys", "read")
        keys = signing_keys(self.context)
        resp.media = KEY_LIST.dump({"keys": keys.listing() if keys is not None else []})


def rotate_keys(context, keyring, attempts: int = 3, *, details: dict[str, Any] | None = None):
    """Rotate every key family, with one ``key.rotated`` event per new key (``details``
    added to each: an operator command's ``actor``), in one transaction; the new keys,
    the configured algorithm's first (RS256's with an HMAC algorithm). Hosts rotating at
    once may collide on a family's active key: the loser runs again (the store would
    retry on its own, but not inside a caller's block) and rotates after the winner."""
    for attempt in range(attempts):
        try:
            with context.storage.atomic():
                records = keyring.rotate()
                for record in records:
                    context.audit.record(audit.KEY_ROTATED, target_type="key", target_uuid=record.kid,
                                         details={"kid": record.kid, "alg": record.alg, **(details or {})})
            return records
        except Conflict as exc:
            if attempt == attempts - 1 or "request" not in exc.fields:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


class KeyRotation:
    def __init__(self, context):
        self.context = context

    def on_post(self, req, resp):
        self.context.require(req.context.identity, "keys", "rotate")
        keyring = signing_keys(self.context)
        if keyring is None:
            if self.context.settings.jwt_algorithm.startswith("HS"):
                raise StateConflict(f"{self.context.settings.jwt_algorithm} tokens are signed with"
                                    " LOCKY_JWT_SECRET: there is no key to rotate.")
            raise StateConflict(f"the {self.context.settings.tokens} token backend keeps no signing keys:"
                                " there is no key to rotate.")
        records = rotate_keys(self.context, keyring)
        resp.media = json.loads(records[0].public_jwk)


def _unverified_claims(token: str) -> dict[str, Any] | None:
    """The claims a compact JWS carries, unchecked, or ``None`` when it is not one. The
    core reads them without the token library, which belongs to the token plugin."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, binascii.Error):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return claims if isinstance(claims, dict) else None


class Inspector:
    """What a token is now: its verified claims and whether its login (or its machine
    client) still holds."""

    def __init__(self, context):
        self.context = context

    def live_claims(self, token: str) -> dict[str, Any] | None:
        """The claims of a token valid now (signature, time, issuer, audience, a live
        session of a live, enabled user, or for a ``client_credentials`` token its live
        client), or ``None``."""
        claims = _unverified_claims(token)  # only to learn its type; verify() checks everything
        if claims is None:
            return None
        kind = claims.get("typ")
        if kind not in ("access", "refresh"):
            return None
        try:
            checked = self.context.tokens.verify(token, kind=kind)
            if checked.session_uuid.startswith(CLIENT_SUBJECT_PREFIX):
                return claims if kind == "access" and self.live_client(checked) is not None else None
            found = self.context.storage.sessions.authenticate(checked.session_uuid)
        except LockyError:
            return None
        if found is None or found.user.uuid != checked.subject or found.user.disabled:
            return None
        if kind == "refresh" and found.session.refresh_jti != checked.jti:
            return None  # an earlier refresh token of the login: used, so dead
        claims["username"] = found.user.email
        return claims

    def live_client(self, checked):
        """The client of a ``client_credentials`` token (``sid`` ``client:<client uuid>:
        <token generation>``) while the token holds: the client live, with the grant, and
        its tokens not revoked since; else ``None``."""
        _, client_uuid, generation = (checked.session_uuid.split(":") + ["", ""])[:3]
        if checked.client_id != checked.subject:
            return None
        client = self.context.storage.oauth_clients.get_by_client_id(checked.subject)
        if (client is None or client.uuid != client_uuid or str(client.token_generation) != generation
                or "client_credentials" not in client.grant_types):
            return None
        return client


class Introspection:
    """RFC 7662. The caller: a user whose bearer token the policy lets introspect, or a
    client proving its secret (authenticated by ``locky.oauth``'s ``locky_authenticate``,
    which keeps a form body it read on ``req.context.oauth_body``)."""

    def __init__(self, context):
        self.context = context
        self.inspector = Inspector(context)

    def on_post(self, req, resp):
        self.context.require(req.context.identity, "tokens", "introspect")
        body = getattr(req.context, "oauth_body", None)
        if body is None:
            body = read_json_or_form(req, self.context.settings.max_body_bytes)
            if req.context.identity.scheme == "client":
                credential_fields(body)  # a client sends its credentials along
        data = load(TokenRequestSchema(), body)
        claims = self.inspector.live_claims(data["token"])
        if claims is None:
            resp.media = {"active": False}
            return
        answer = {
            "active": True, "sub": claims["sub"], "token_type": claims["typ"],
            "exp": claims["exp"], "iat": claims["iat"], "nbf": claims["nbf"], "jti": claims["jti"],
            "iss": claims["iss"], "aud": claims["aud"],
        }
        if "username" in claims:  # a user's token (a machine client's has none)
            answer["username"] = claims["username"]
        if claims.get("client_id") is not None:  # a token of the OpenID provider
            answer["client_id"] = claims["client_id"]
            answer["scope"] = claims.get("scope") or ""
        resp.media = answer


class Revocation:
    """Ends the login a token belongs to; always ``200 {}`` (RFC 7009: a bad or unknown
    token is no error, so the answer tells nothing).

    A client may authenticate (``client_secret_basic``, ``client_secret_post``, or a
    public client's ``client_id``): a token the OpenID provider issued to a client is
    revoked only at that client's request (RFC 7009 section 2.1). A ``client_credentials``
    token ends every token of its client (its generation moves on)."""

    def __init__(self, context):
        self.context = context
        self.inspector = Inspector(context)

    def on_post(self, req, resp):
        body = read_json_or_form(req, self.context.settings.max_body_bytes)
        fields = credential_fields(body)
        caller = None
        if fields or uses_basic(req):
            try:
                caller = authenticate(self.context, req, fields, ["client_secret_basic", "client_secret_post", "none"],
                                      "revocation")
            except ClientRefused as refused:
                refused.write(resp)
                return
        data = load(TokenRequestSchema(), body)
        claims = self.inspector.live_claims(data["token"])
        owner = claims.get("client_id") if claims is not None else None
        if claims is None or (owner is not None and (caller is None or caller.client_id != owner)):
            pass  # dead, unknown, or another client's: nothing changes, and the answer says nothing
        elif claims["sid"].startswith(CLIENT_SUBJECT_PREFIX):
            self.revoke_client_tokens(caller)
        else:
            revoke_session(self.context, claims["sid"], "revocation endpoint", claims["sub"])
        resp.media = {}

    def revoke_client_tokens(self, client) -> None:
        with self.context.storage.atomic():
            if self.context.storage.oauth_clients.revoke_tokens(client.record.id) is not None:
                self.context.audit.record(audit.TOKEN_REVOKED, target_type="oauth_client",
                                          target_uuid=client.record.uuid,
                                          details={"reason": "revocation endpoint", "client_id": client.client_id})


#: Why the two well-known paths read ``/../.well-known/...`` in the Swagger document.
OUTSIDE = (" Swagger 2.0 has one base path, so the path shown climbs out of it (/v1/../.well-known/...),"
           " which resolves to the served one.")


def routes(context) -> list[Route]:
    tag = "tokens"
    form = ("Body as application/json or application/x-www-form-urlencoded (token=...).")
    return [
        Route(JWKS_PATH, Jwks(context), (
            Operation("get", "The public keys that sign tokens (JWKS, RFC 7517)", tag, response="Jwks",
                      public=True, errors=(503,), headers={"Cache-Control": "public, max-age=300"},
                      description=f"Served at {JWKS_PATH}, outside the base path /v1." + OUTSIDE),
        )),
        Route(METADATA_PATH, Metadata(context), (
            Operation("get", "Authorization-server metadata (RFC 8414)", tag, response="ServerMetadata",
                      public=True, errors=(503,),
                      headers={"Cache-Control": "public, max-age=300; no-store when no setting names"
                                                " Locky's URL (the URLs are then the request's own)"},
                      description=f"Served at {METADATA_PATH}, outside the base path /v1." + OUTSIDE),
        )),
        Route("/v1/internal/keys", KeyList(context), (
            Operation("get", "The signing keys: active and retired", tag, response="KeyList",
                      errors=(401, 403, 503),
                      description="Public information only: kid, alg, created_at, retired_at (null while"
                                  " active). Every family: the configured algorithm's keys and RS256's (ID"
                                  " tokens), ES256's or EdDSA's once a client's ID tokens use them; with an"
                                  " HMAC algorithm the ID-token keys only, once an OAuth client is registered."),
        )),
        Route("/v1/private/keys/rotate", KeyRotation(context), (
            Operation("post", "Make a new active signing key", tag, response="Jwk", errors=(401, 403, 409, 503),
                      description="Rotates every key family (the configured algorithm's, RS256's, and any"
                                  " other ID-token family) and answers the configured algorithm's new public"
                                  " JWK (RS256's with an HMAC algorithm). Tokens signed before stay valid"
                                  " until they expire; the retired keys stay in the JWKS until then. 409 with"
                                  " a token backend that keeps no keys, and with an HMAC algorithm while no"
                                  " OAuth client is registered."),
        )),
        Route("/v1/internal/tokens/introspect", Introspection(context), (
            Operation("post", "Is this token valid now? (RFC 7662)", tag, body="TokenRequest",
                      response="Introspection", errors=(400, 401, 403, 413, 415, 503),
                      description="Always 200 for a well-formed request: {\"active\": false} for a token"
                                  " expired, revoked, of a deleted or disabled user, badly signed or not a"
                                  " token at all. " + form),
        )),
        Route("/v1/public/tokens/revoke", Revocation(context), (
            Operation("post", "Revoke a token's login (RFC 7009)", tag, body="TokenRequest", response="Empty",
                      public=True, errors=(400, 413, 415, 503),
                      description="Always 200 {} for a well-formed request: an access or refresh token ends"
                                  " its whole login; an unknown or dead token changes nothing. " + form),
        )),
    ]
