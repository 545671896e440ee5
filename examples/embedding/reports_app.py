"""Embedding Locky: a host Falcon app that serves Locky's ``/v1`` beside its own routes
and protects one of them with Locky's tokens and policy.

The host app ("reports") has ``GET /reports/{group_uuid}``: the reports of a group, for
callers whose role in that group may ``read`` ``reports``. Roles and grants are Locky's:
an admin makes a role with the permission ``{"resource": "reports", "action": "read"}``
through Locky's API and gives it to members of a group.

How the two apps are put together, and why this way: :func:`create_app` returns a
complete Falcon app with its own middleware (request ids, authentication), error
rendering and Swagger document. Copying its routes into the host app would lose those,
so the two stay whole apps and a small WSGI :class:`Dispatcher` sends ``/v1/...`` and
``/swagger/...`` to Locky and everything else to the host. The host authenticates its own
protected routes with Locky's public API: ``context.tokens.verify`` and
``context.storage.sessions.authenticate`` (plus the ``locky_authenticate`` hook, so plugin
credentials such as API keys work here too), and decides with ``context.allowed``. As in
Locky, the host declares its public requests once, in a table (``PUBLIC``); every other
request needs credentials.

Run it::

    LOCKY_ADMIN_EMAILS=ada@example.com python examples/embedding/reports_app.py
"""

from __future__ import annotations

import falcon

import locky

LOCKY_PREFIXES = ("/v1", "/swagger")
#: The host's requests answered without credentials: (URI template, method).
PUBLIC = frozenset({("/", "GET")})


class Dispatcher:
    """One WSGI app: Locky's paths to Locky, every other path to the host app."""

    def __init__(self, host: falcon.App, locky_app: locky.LockyApp, prefixes=LOCKY_PREFIXES):
        self.host, self.locky_app, self.prefixes = host, locky_app, prefixes

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        mine = any(path == p or path.startswith(p + "/") for p in self.prefixes)
        return (self.locky_app if mine else self.host)(environ, start_response)

    def close(self) -> None:
        self.locky_app.close()


class LockyAuthentication:
    """Host middleware: ``req.context.identity`` for every host request not in ``public``."""

    def __init__(self, context: locky.Context, public: frozenset[tuple[str, str]] = PUBLIC):
        self.context = context
        self.public = public

    def process_resource(self, req, resp, resource, params) -> None:
        if resource is None or (req.uri_template, req.method) in self.public:
            return
        req.context.identity = self.identity(req)

    def identity(self, req) -> locky.Identity:
        context = self.context
        # Plugin credentials first, exactly as Locky's own routes do.
        identity = context.hook.locky_authenticate(req=req, context=context)
        if identity is not None:
            return identity
        scheme, _, token = (req.get_header("Authorization") or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise locky.Unauthorized("Use Authorization: Bearer <access token from /v1/public/users/login>.")
        claims = context.tokens.verify(token.strip(), kind="access")  # raises Unauthorized
        # One read: the live session, its live user and the policy revision, which
        # travels with the identity so the decision needs no second read.
        found = context.storage.sessions.authenticate(claims.session_uuid)
        if found is None or found.user.uuid != claims.subject:
            raise locky.Unauthorized("The token has been revoked.")
        return locky.Identity(user=found.user, session_uuid=found.session.uuid,
                              policy_revision=found.policy_revision)


class Reports:
    """``GET /reports/{group_uuid}``: needs ``reports``/``read`` within the group."""

    def __init__(self, context: locky.Context):
        self.context = context

    def on_get(self, req, resp, group_uuid: str):
        group = self.context.storage.groups.get_by_uuid(group_uuid)
        if group is None:
            raise falcon.HTTPNotFound(description="No such group.")
        if not self.context.allowed(req.context.identity, "reports", "read", group_uuid=group.uuid):
            raise locky.Forbidden("Your role in this group may not read its reports.")
        resp.media = {
            "group": group.name,
            "reader": req.context.identity.user.email,
            "reports": [{"title": f"{group.name}: weekly numbers", "rows": 3}],
        }


class Home:
    def on_get(self, req, resp):
        resp.media = {"service": "reports", "auth": "/v1/public/users/login"}


def _render_locky_errors(app: falcon.App) -> None:
    def unauthorized(req, resp, error, params):
        raise falcon.HTTPUnauthorized(description=error.description, challenges=["Bearer"])

    def forbidden(req, resp, error, params):
        raise falcon.HTTPForbidden(description=error.description)

    app.add_error_handler(locky.Unauthorized, unauthorized)
    app.add_error_handler(locky.Forbidden, forbidden)


def create(settings: locky.Settings | None = None, plugins=()) -> Dispatcher:
    """The whole embedded service: Locky on ``/v1`` and ``/swagger``, reports elsewhere."""
    locky_app = locky.create_app(settings, plugins=plugins)
    context = locky_app.context
    host = falcon.App(middleware=[LockyAuthentication(context)])
    _render_locky_errors(host)
    host.add_route("/", Home())
    host.add_route("/reports/{group_uuid}", Reports(context))
    return Dispatcher(host, locky_app)


if __name__ == "__main__":
    from wsgiref.simple_server import make_server

    app = create()
    with make_server("127.0.0.1", 8000, app) as server:
        print("reports on http://127.0.0.1:8000/ and Locky on http://127.0.0.1:8000/v1/")
        try:
            server.serve_forever()
        finally:
            app.close()
