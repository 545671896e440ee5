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
from locky.schemas import KeyListSchema, TokenRequestSchema

JWKS_PATH = "/.well-known/jwks.json"
METADATA_PATH = "/.well-known/oauth-authorization-server"
#: Seconds clients may keep the JWKS and metadata; a verifier meeting a kid it does not
#: know (a key rotated in the meantime) fetches the JWKS again.
JWKS_MAX_AGE = 300
KEY_LIST = KeyListSchema()


def signing_keys(context):
    """The token backend's key families (every algorithm's: the configured one's and
    RS256's for ID tokens), or ``None`` (a backend without keys of its own)."""
    return getattr(context.tokens, "keyring", None)


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
    """RFC 8414's document: where the keys, the login and the token endpoints are.

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
        resp.media = {
            "issuer": settings.issuer,
            "jwks_uri": base + JWKS_PATH,
            "token_endpoint": base + "/v1/public/users/login",
            "introspection_endpoint": base + "/v1/internal/tokens/introspect",
            "revocation_endpoint": base + "/v1/public/tokens/revoke",
            "grant_types_supported": ["password", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "introspection_endpoint_auth_methods_supported": ["bearer"],
            "response_types_supported": [],
            "id_token_signing_alg_values_supported": [settings.jwt_algorithm],
        }
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
    """What a token is now: its verified claims and whether its login still holds."""

    def __init__(self, context):
        self.context = context

    def live_claims(self, token: str) -> dict[str, Any] | None:
        """The claims of a token valid now (signature, time, issuer, audience, a live
        session of a live, enabled user), or ``None``."""
        claims = _unverified_claims(token)  # only to learn its type; verify() checks everything
        if claims is None:
            return None
        kind = claims.get("typ")
        if kind not in ("access", "refresh"):
            return None
        try:
            checked = self.context.tokens.verify(token, kind=kind)
            found = self.context.storage.sessions.authenticate(checked.session_uuid)
        except LockyError:
            return None
        if found is None or found.user.uuid != checked.subject or found.user.disabled:
            return None
        if kind == "refresh" and found.session.refresh_jti != checked.jti:
            return None  # an earlier refresh token of the login: used, so dead
        claims["username"] = found.user.email
        return claims


class Introspection:
    def __init__(self, context):
        self.context = context
        self.inspector = Inspector(context)

    def on_post(self, req, resp):
        self.context.require(req.context.identity, "tokens", "introspect")
        data = load(TokenRequestSchema(), read_json_or_form(req, self.context.settings.max_body_bytes))
        claims = self.inspector.live_claims(data["token"])
        if claims is None:
            resp.media = {"active": False}
            return
        resp.media = {
            "active": True, "sub": claims["sub"], "username": claims["username"], "token_type": claims["typ"],
            "exp": claims["exp"], "iat": claims["iat"], "nbf": claims["nbf"], "jti": claims["jti"],
            "iss": claims["iss"], "aud": claims["aud"],
        }


class Revocation:
    """Ends the login a token belongs to; always ``200 {}`` (RFC 7009: a bad or unknown
    token is no error, so the answer tells nothing)."""

    def __init__(self, context):
        self.context = context
        self.inspector = Inspector(context)

    def on_post(self, req, resp):
        data = load(TokenRequestSchema(), read_json_or_form(req, self.context.settings.max_body_bytes))
        claims = self.inspector.live_claims(data["token"])
        if claims is not None:
            revoke_session(self.context, claims["sid"], "revocation endpoint", claims["sub"])
        resp.media = {}


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
                                  " HMAC algorithm the ID-token keys only."),
        )),
        Route("/v1/private/keys/rotate", KeyRotation(context), (
            Operation("post", "Make a new active signing key", tag, response="Jwk", errors=(401, 403, 409, 503),
                      description="Rotates every key family (the configured algorithm's, RS256's, and any"
                                  " other ID-token family) and answers the configured algorithm's new public"
                                  " JWK (RS256's with an HMAC algorithm). Tokens signed before stay valid"
                                  " until they expire; the retired keys stay in the JWKS until then. 409 with"
                                  " a token backend that keeps no keys."),
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
