"""Locky's bundled token backend ``jwt``: JWTs made and checked with PyJWT.

With ``ES256`` (the default), ``EdDSA`` or ``RS256`` tokens are signed with the active
key of :mod:`.keys` (kept in storage, published as a JWKS) and carry its ``kid``; with
``HS256``/``HS384``/``HS512`` with ``LOCKY_JWT_SECRET`` (one service only: whoever can
check a token can make one). Only the configured algorithm is ever accepted.

Tokens the OpenID provider issues to a client have that client's ``client_id`` as their
``aud`` and carry ``client_id`` and ``scope`` claims. ID tokens (:meth:`JWTBackend.sign_id_token`)
are signed with the key families of :class:`.keys.KeyRing` (RS256 whatever the configured
algorithm, ES256 or EdDSA when a client asks) and never pass as access tokens: they have
no ``typ``.
"""

from __future__ import annotations

import logging
import time
import uuid

import jwt

from locky import Claims, IssuedToken, Unauthorized, hookimpl

from .keys import KeyRing

#: The algorithms whose keys Locky makes and keeps in storage (published as JWKS); the
#: others (HS256/HS384/HS512) sign with LOCKY_JWT_SECRET.
ASYMMETRIC_ALGORITHMS = ("ES256", "EdDSA", "RS256")

log = logging.getLogger("locky.tokens")

#: RFC 7518 §3.2: an HMAC key as long as the hash at least.
HMAC_KEY_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
REQUIRED_CLAIMS = ["sub", "sid", "iat", "nbf", "exp", "jti", "iss", "aud", "typ"]
MAX_TOKEN_LENGTH = 4096
LEEWAY = 5  # seconds of clock skew allowed on exp/nbf/iat
VERIFIED_CACHE_SIZE = 4096  # tokens remembered as verified, per process
#: Tokens remembered as refused for good, per process (apart from the verified ones, so
#: that a flood of bad tokens never pushes a good one out).
REFUSED_CACHE_SIZE = 1024


class JWTBackend:
    """Access and refresh JWTs with claims ``sub``, ``sid``, ``iat``, ``nbf``, ``exp``,
    ``jti``, ``iss``, ``aud`` and ``typ`` (and ``client_id``, ``scope`` for a client).
    Only the configured algorithm is accepted."""

    def __init__(self, settings, storage=None):
        self.secret = settings.jwt_secret
        self.algorithm = settings.jwt_algorithm
        self.issuer = settings.issuer
        self.audience = settings.jwt_audience
        self.ttl = {"access": settings.access_ttl, "refresh": settings.refresh_ttl}
        if not self.secret:
            raise RuntimeError("the jwt token backend needs a secret")
        self._verified: dict[tuple[str, str], Claims] = {}
        #: What was said of a token refused for a reason that cannot go away: expired, a
        #: signature its key does not make, claims that are not ours. A client presenting
        #: it again (a loop retrying an expired token) costs a lookup, not a signature
        #: check (an ECDSA verification is ~5x a whole authorized read).
        self._refused: dict[tuple[str, str], str] = {}
        #: Every key family (the configured algorithm's, RS256's, ...); ``None`` only
        #: without storage (an HMAC algorithm, tokens alone: no ID tokens, no JWKS).
        self.keyring = None
        #: The signing keys of the configured algorithm; ``None`` with an HMAC one.
        self.keys = None
        wanted = HMAC_KEY_BYTES.get(self.algorithm, 0)
        if len(self.secret.encode()) < wanted:
            log.warning("LOCKY_JWT_SECRET has %d bytes; RFC 7518 wants at least %d for %s: use a longer one",
                        len(self.secret.encode()), wanted, self.algorithm)
        asymmetric = self.algorithm in ASYMMETRIC_ALGORITHMS
        if asymmetric and storage is None:
            raise RuntimeError(f"the jwt token backend needs storage for {self.algorithm} keys")
        if storage is not None:
            self.keyring = KeyRing(storage, primary=self.algorithm if asymmetric else None, secret=self.secret,
                                   rotation_days=settings.key_rotation_days,
                                   token_lifetime=max(self.ttl.values()) + LEEWAY)
            if asymmetric:
                self.keys = self.keyring.family(self.algorithm)

    def issue(self, *, user_uuid: str, session_uuid: str, kind: str, client_id: str | None = None,
              scope: str | None = None) -> IssuedToken:
        now = int(time.time())
        jti = uuid.uuid4().hex
        claims = {
            "sub": user_uuid,
            "sid": session_uuid,
            "iat": now,
            "nbf": now,
            "exp": now + self.ttl[kind],
            "jti": jti,
            "iss": self.issuer,
            "aud": self.audience if client_id is None else client_id,
            "typ": kind,
        }
        if client_id is not None:
            claims["client_id"] = client_id
            if scope is not None:
                claims["scope"] = scope
        if self.keys is None:
            token = jwt.encode(claims, self.secret, algorithm=self.algorithm)
        else:
            kid, private = self.keys.signing_key()
            token = jwt.encode(claims, private, algorithm=self.algorithm, headers={"kid": kid})
        return IssuedToken(token=token, jti=jti, expires_in=self.ttl[kind])

    def sign_id_token(self, claims: dict, *, alg: str) -> str:
        """``claims`` signed as they are with the active key of the ``alg`` family (made
        on first need), its ``kid`` in the header."""
        if self.keyring is None:
            raise RuntimeError("the jwt token backend signs ID tokens only with storage for its keys")
        kid, private = self.keyring.family(alg).signing_key()
        return jwt.encode(claims, private, algorithm=alg, headers={"kid": kid})

    def verify(self, token: str, *, kind: str) -> Claims:
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise Unauthorized("The token is malformed.")
        # A token's signature and claims never change: a token verified once is known
        # good until it expires (checked on every use). Revocation is storage's
        # business (the session check), not the token's. A token is in at most one of
        # the two memories: the verified one is asked first, as every good request does.
        cached = self._verified.get((token, kind))
        if cached is not None:
            if time.time() >= cached.expires_at + LEEWAY:  # as PyJWT: exp <= now - leeway
                self._verified.pop((token, kind), None)
                raise Unauthorized("The token has expired.")
            return cached
        refused = self._refused.get((token, kind))
        if refused is not None:
            raise Unauthorized(refused)
        claims = self._verify(token, kind)
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            self._verified.clear()
        self._verified[(token, kind)] = claims
        return claims

    def _refuse(self, token: str, kind: str, message: str) -> Unauthorized:
        """The refusal of a token whose key was found, remembered: its signature and
        claims never change, and an expired token stays expired."""
        if len(self._refused) >= REFUSED_CACHE_SIZE:
            self._refused.clear()
        self._refused[(token, kind)] = message
        return Unauthorized(message)

    def _key(self, token: str):
        """What checks the token's signature: the secret, or the public key its ``kid``
        names (only a header of the configured algorithm gets that far; ``jku``, ``jwk``
        and ``x5u`` headers are never read)."""
        if self.keys is None:
            return self.secret
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthorized("The token is invalid.") from None
        kid = header.get("kid")
        if header.get("alg") != self.algorithm or not isinstance(kid, str):
            raise Unauthorized("The token is invalid.")
        key = self.keys.verifying_key(kid)
        if key is None:
            raise Unauthorized("The token is invalid.")
        return key

    def _verify(self, token: str, kind: str) -> Claims:
        key = self._key(token)
        try:
            # The audience is checked below: a client's token has its client_id as aud.
            claims = jwt.decode(
                token,
                key,
                algorithms=[self.algorithm],
                issuer=self.issuer,
                options={"require": REQUIRED_CLAIMS, "verify_signature": True, "verify_aud": False},
                leeway=LEEWAY,
            )
        except jwt.ExpiredSignatureError:
            raise self._refuse(token, kind, "The token has expired.") from None
        except (jwt.ImmatureSignatureError, jwt.InvalidIssuedAtError):
            raise Unauthorized("The token is invalid.") from None  # not yet: it may hold later
        except jwt.PyJWTError:
            raise self._refuse(token, kind, "The token is invalid.") from None
        client_id, scope = claims.get("client_id"), claims.get("scope")
        if (client_id is not None and not isinstance(client_id, str)) or (scope is not None and not isinstance(scope, str)):
            raise self._refuse(token, kind, "The token is invalid.")
        if (self.audience if client_id is None else client_id) not in _audiences(claims["aud"]):
            raise self._refuse(token, kind, "The token is invalid.")
        if claims.get("typ") != kind:
            raise self._refuse(token, kind, "The token is of the wrong type.")
        if not all(isinstance(claims[k], str) for k in ("sub", "sid", "jti")):
            raise self._refuse(token, kind, "The token is invalid.")
        return Claims(
            subject=claims["sub"],
            session_uuid=claims["sid"],
            jti=claims["jti"],
            kind=kind,
            expires_at=int(claims["exp"]),
            client_id=client_id,
            scope=scope,
        )


def _audiences(aud) -> list[str]:
    """The ``aud`` claim as a list, as RFC 7519 section 4.1.3 allows (a string or a list
    of strings); empty when it is neither."""
    if isinstance(aud, str):
        return [aud]
    if isinstance(aud, list) and all(isinstance(each, str) for each in aud):
        return aud
    return []


@hookimpl
def locky_add_settings(settings):
    settings.add("jwt_audience", "locky", type="str", help="the tokens' aud (LOCKY_JWT_AUDIENCE)")
    # Days an asymmetric signing key signs before a new one takes over (0: never).
    settings.add("key_rotation_days", 90, type="int", bounds=(0, 3650),
                 help="days a signing key signs before a new one takes over (LOCKY_KEY_ROTATION_DAYS; 0: never)")


@hookimpl
def locky_register_tokens(registry):
    registry.add("jwt", lambda context: JWTBackend(context.settings, context.storage))


@hookimpl
def locky_startup(context):
    # The first key is made (or the active one read) before the first login needs it,
    # and its log line comes at startup.
    # RS256's family (ID tokens) makes its first key when first needed: the first JWKS
    # read, key listing, rotation or ID token.
    backend = context.tokens
    if isinstance(backend, JWTBackend) and backend.keys is not None:
        backend.keys.signing_key()
