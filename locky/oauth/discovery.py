"""``GET /.well-known/openid-configuration`` (OpenID Connect Discovery 1.0): where the
provider's endpoints are and what it supports. The RFC 8414 document
(``/.well-known/oauth-authorization-server``, :mod:`locky.resources.tokens`) carries the
same endpoints and grant types, from :func:`endpoints` and :func:`capabilities`.

Its URLs come from the settings (``LOCKY_PUBLIC_URL``, else the issuer when it is a URL),
never from the request's ``Host``; only when no setting names a URL are they the
request's own, and then the answer is not cached (as for RFC 8414's document).
"""

from __future__ import annotations

from typing import Any

from locky.oauth.claims import CLAIMS_SUPPORTED
from locky.oauth.server import (
    AUTHORIZE_PATH, CONFIDENTIAL_AUTH_METHODS, LOGOUT_PATH, PUBLIC_AUTH_METHODS, SCOPES_SUPPORTED, TOKEN_PATH,
    USERINFO_PATH,
)

JWKS_PATH = "/.well-known/jwks.json"
INTROSPECTION_PATH = "/v1/internal/tokens/introspect"
REVOCATION_PATH = "/v1/public/tokens/revoke"
#: Seconds clients may keep the document (as the JWKS and RFC 8414's).
MAX_AGE = 300
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")
#: ID tokens are signed with the client's id_token_signed_response_alg: one of these.
ID_TOKEN_ALGORITHMS = ("RS256", "ES256", "EdDSA")
TOKEN_AUTH_METHODS = CONFIDENTIAL_AUTH_METHODS + PUBLIC_AUTH_METHODS
#: The introspection endpoint also takes a bearer token of a user the policy lets introspect.
INTROSPECTION_AUTH_METHODS = ("bearer",) + CONFIDENTIAL_AUTH_METHODS
REVOCATION_AUTH_METHODS = CONFIDENTIAL_AUTH_METHODS + PUBLIC_AUTH_METHODS


def endpoints(base: str) -> dict[str, str]:
    """The endpoints both documents name, under ``base``."""
    return {
        "authorization_endpoint": base + AUTHORIZE_PATH,
        "token_endpoint": base + TOKEN_PATH,
        "jwks_uri": base + JWKS_PATH,
        "introspection_endpoint": base + INTROSPECTION_PATH,
        "revocation_endpoint": base + REVOCATION_PATH,
    }


def capabilities() -> dict[str, Any]:
    """What both documents say the server supports."""
    return {
        "scopes_supported": list(SCOPES_SUPPORTED),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": list(GRANT_TYPES),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": list(TOKEN_AUTH_METHODS),
        "introspection_endpoint_auth_methods_supported": list(INTROSPECTION_AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(REVOCATION_AUTH_METHODS),
        "id_token_signing_alg_values_supported": list(ID_TOKEN_ALGORITHMS),
    }


def openid_configuration(issuer: str, base: str) -> dict[str, Any]:
    """The OpenID provider's metadata."""
    return {
        "issuer": issuer,
        **endpoints(base),
        "userinfo_endpoint": base + USERINFO_PATH,
        "end_session_endpoint": base + LOGOUT_PATH,
        **capabilities(),
        "subject_types_supported": ["public"],
        "claims_supported": list(CLAIMS_SUPPORTED),
        "prompt_values_supported": ["none", "login", "consent"],
        "claims_parameter_supported": False,
        "request_parameter_supported": False,
        "request_uri_parameter_supported": False,
    }


class Discovery:
    def __init__(self, context):
        from locky.resources.tokens import configured_base

        self.context = context
        self.base = configured_base(context.settings)

    def on_get(self, req, resp):
        resp.media = openid_configuration(self.context.settings.issuer, self.base or req.prefix)
        resp.cache_control = ["public", f"max-age={MAX_AGE}"] if self.base else ["no-store"]
