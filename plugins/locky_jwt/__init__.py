"""Locky's bundled token backend ``jwt``: HMAC-signed JWTs made and checked with PyJWT."""

from __future__ import annotations

import time
import uuid

import jwt

from locky.errors import Unauthorized
from locky.plugins import hookimpl
from locky.providers import Claims, IssuedToken

REQUIRED_CLAIMS = ["sub", "sid", "iat", "nbf", "exp", "jti", "iss", "aud", "typ"]
MAX_TOKEN_LENGTH = 4096
LEEWAY = 5  # seconds of clock skew allowed on exp/nbf/iat
VERIFIED_CACHE_SIZE = 4096  # tokens remembered as verified, per process


class JWTBackend:
    """Access and refresh JWTs with claims ``sub``, ``sid``, ``iat``, ``nbf``, ``exp``,
    ``jti``, ``iss``, ``aud`` and ``typ``. Only the configured algorithm is accepted."""

    def __init__(self, settings):
        self.secret = settings.jwt_secret
        self.algorithm = settings.jwt_algorithm
        self.issuer = settings.jwt_issuer
        self.audience = settings.jwt_audience
        self.ttl = {"access": settings.access_ttl, "refresh": settings.refresh_ttl}
        if not self.secret:
            raise RuntimeError("the jwt token backend needs a secret")
        self._verified: dict[tuple[str, str], Claims] = {}

    def issue(self, *, user_uuid: str, session_uuid: str, kind: str) -> IssuedToken:
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
            "aud": self.audience,
            "typ": kind,
        }
        token = jwt.encode(claims, self.secret, algorithm=self.algorithm)
        return IssuedToken(token=token, jti=jti, expires_in=self.ttl[kind])

    def verify(self, token: str, *, kind: str) -> Claims:
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise Unauthorized("The token is malformed.")
        # A token's signature and claims never change: a token verified once is known
        # good until it expires (checked on every use). Revocation is storage's
        # business (the session check), not the token's.
        cached = self._verified.get((token, kind))
        if cached is not None:
            if time.time() >= cached.expires_at + LEEWAY:  # as PyJWT: exp <= now - leeway
                self._verified.pop((token, kind), None)
                raise Unauthorized("The token has expired.")
            return cached
        claims = self._verify(token, kind)
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            self._verified.clear()
        self._verified[(token, kind)] = claims
        return claims

    def _verify(self, token: str, kind: str) -> Claims:
        try:
            claims = jwt.decode(
                token,
                self.secret,
                algorithms=[self.algorithm],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": REQUIRED_CLAIMS, "verify_signature": True},
                leeway=LEEWAY,
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("The token has expired.") from None
        except jwt.PyJWTError:
            raise Unauthorized("The token is invalid.") from None
        if claims.get("typ") != kind:
            raise Unauthorized("The token is of the wrong type.")
        if not all(isinstance(claims[k], str) for k in ("sub", "sid", "jti")):
            raise Unauthorized("The token is invalid.")
        return Claims(
            subject=claims["sub"],
            session_uuid=claims["sid"],
            jti=claims["jti"],
            kind=kind,
            expires_at=int(claims["exp"]),
        )


@hookimpl
def locky_register_tokens(registry):
    registry.add("jwt", lambda context: JWTBackend(context.settings))
