"""A service of its own that trusts Locky's logins: "reports".

It does not embed or import Locky's server. It only knows Locky's URL:

- every request but ``/`` and ``/health`` needs ``Authorization: Bearer <access token>``,
  a token Locky issued at ``POST /v1/public/users/login``; the service verifies it
  offline with :mod:`locky.client` (signature against Locky's published JWKS, ``exp``,
  ``nbf``, ``iss``, ``aud``, ``typ``), so a bad token costs Locky nothing;
- ``GET /reports[?group_uuid=G]`` then asks Locky whether the caller may ``read``
  ``reports`` (in group ``G``): ``GET /v1/internal/authz/check`` with the caller's own
  token. Locky authenticates that token against the live session, so a logout, a
  disabled or deleted account and a removed membership all take effect at once.

Grants are Locky's: an admin creates a role with the permission
``{"resource": "reports", "action": "read"}`` and a group owner gives it to members.

Run it (Locky on :8080 signing with ES256, EdDSA or RS256, its default)::

    LOCKY_URL=http://127.0.0.1:8080 python examples/token-verifier-app/reports_service.py

Settings: ``LOCKY_URL`` (Locky's base URL, for the authorization checks),
``LOCKY_ISSUER`` (the tokens' issuer, by default ``LOCKY_URL``), ``LOCKY_AUDIENCE``
(default ``locky``), ``REPORTS_PORT`` (default 8000).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request

import falcon

from locky.client import FalconMiddleware, TokenVerifier

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PUBLIC_PATHS = ("/", "/health")


class LockyAuthz:
    """Asks Locky for a decision with the caller's own token."""

    def __init__(self, locky_url: str, timeout: float = 5.0):
        self.check_url = locky_url.rstrip("/") + "/v1/internal/authz/check"
        self.timeout = timeout
        # Direct connections, as the verifier's: no proxy from the environment.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def allowed(self, token: str, user_uuid: str, resource: str, action: str, group_uuid: str | None = None) -> bool:
        query = {"user_uuid": user_uuid, "resource": resource, "action": action}
        if group_uuid:
            query["group_uuid"] = group_uuid
        request = urllib.request.Request(f"{self.check_url}?{urllib.parse.urlencode(query)}",
                                         headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as error:
            error.close()
            if error.code == 401:  # the session is gone: logged out, disabled, deleted
                raise falcon.HTTPUnauthorized(description="The session has ended.", challenges=["Bearer"]) from None
            if error.code == 400:
                raise falcon.HTTPBadRequest(description="Locky refused the question.") from None
            raise falcon.HTTPServiceUnavailable(description="Authorization is unavailable.") from None
        except (urllib.error.URLError, OSError, ValueError):
            raise falcon.HTTPServiceUnavailable(description="Authorization is unavailable.") from None
        return answer.get("allowed") is True


class Home:
    def on_get(self, req, resp):
        resp.media = {"service": "reports", "login": "Locky: POST /v1/public/users/login"}


class Health:
    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


class Reports:
    """``GET /reports[?group_uuid=G]``: needs ``reports``/``read`` (in group ``G``)."""

    def __init__(self, authz: LockyAuthz):
        self.authz = authz

    def on_get(self, req, resp):
        group_uuid = req.get_param("group_uuid")
        if group_uuid is not None and not UUID.match(group_uuid):
            raise falcon.HTTPBadRequest(description="group_uuid must be a UUID.")
        claims = req.context.claims  # set by locky.client's middleware: a valid access token
        if not self.authz.allowed(req.context.access_token, claims["sub"], "reports", "read", group_uuid):
            raise falcon.HTTPForbidden(description="You may not read these reports.")
        resp.media = {
            "reader": claims["sub"],
            "group_uuid": group_uuid,
            "reports": [{"title": "weekly numbers", "rows": 3}],
        }


def create_app(locky_url: str, *, issuer: str | None = None, audience: str = "locky",
               verifier: TokenVerifier | None = None) -> falcon.App:
    """The reports service for the Locky at ``locky_url``."""
    verifier = verifier or TokenVerifier(issuer or locky_url, audience=audience)
    app = falcon.App(middleware=[FalconMiddleware(verifier, exempt=PUBLIC_PATHS)])
    app.add_route("/", Home())
    app.add_route("/health", Health())
    app.add_route("/reports", Reports(LockyAuthz(locky_url)))
    return app


def main() -> None:
    from wsgiref.simple_server import make_server

    locky_url = os.environ.get("LOCKY_URL", "http://127.0.0.1:8080")
    app = create_app(locky_url, issuer=os.environ.get("LOCKY_ISSUER"),
                     audience=os.environ.get("LOCKY_AUDIENCE", "locky"))
    port = int(os.environ.get("REPORTS_PORT", "8000"))
    with make_server("127.0.0.1", port, app) as server:
        print(f"reports on http://127.0.0.1:{port}/ trusting the Locky at {locky_url}")
        server.serve_forever()


if __name__ == "__main__":
    main()
