"""The provider's routes (docs/http/oauth.md), mounted through ``locky_routes`` like any
plugin's: outside ``/v1``, answered without Locky's bearer authentication (each endpoint
authenticates its caller the OAuth way) and left out of the Swagger document."""

from __future__ import annotations

from locky.plugins import hookimpl
from locky.routes import Operation, Route

from . import authorize, logout
from .client_auth import introspecting_client
from .discovery import Discovery
from .server import DISCOVERY_PATH, TOKEN_PATH, USERINFO_PATH
from .token import TokenEndpoint
from .userinfo import UserInfoEndpoint

TAG = "oauth"


def public(method: str, summary: str) -> Operation:
    return Operation(method, summary, TAG, public=True)


@hookimpl
def locky_routes(context):
    return [
        Route(DISCOVERY_PATH, Discovery(context), (public("get", "OpenID provider metadata"),), in_spec=False),
        Route(TOKEN_PATH, TokenEndpoint(context), (public("post", "Token endpoint (RFC 6749)"),), in_spec=False),
        Route(USERINFO_PATH, UserInfoEndpoint(context),
              (public("get", "Userinfo (OpenID Connect)"), public("post", "Userinfo (OpenID Connect)")),
              in_spec=False),
        *authorize.routes(context),
        *logout.routes(context),
    ]


@hookimpl
def locky_authenticate(req, context):
    # A client's secret is a credential of the provider's own: it authenticates the
    # client at the introspection endpoint (RFC 7662 section 2.1); any other request
    # goes on to the bearer token check.
    return introspecting_client(req, context)
