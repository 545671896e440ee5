"""The SCIM 2.0 routes (docs/http/scim.md), mounted through ``locky_routes`` like the
OpenID provider's (a bundled plugin in ``DEFAULT_PLUGINS``; ``LOCKY_BLOCK_PLUGINS=
locky.scim.routes`` turns SCIM off). Outside ``/v1`` and the Swagger document (SCIM
JSON is described in its own page).

Falcon routes each request here; Locky's authentication has run (a bearer token of a
user or a machine client, except on the public discovery endpoints); the request is
handed to ``scim2-server``'s :class:`~scim2_server.handler.ScimHandler` as a
framework-free :class:`~scim2_server.requests.ScimRequest` over
:class:`~locky.scim.storage.LockyScimStorage`, and its response written back.

Resource URLs (``meta.location``, ``Location``, members' ``$ref``) are under
``LOCKY_PUBLIC_URL`` when it is set, else under the request's own scheme and host.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

import falcon
from scim2_models import PayloadTooLargeException, SCIMException
from scim2_server.handler import ScimHandler
from scim2_server.requests import ScimRequest

from locky.errors import LockyError
from locky.plugins import hookimpl
from locky.routes import Operation, Route

from .discovery import provider
from .errors import PREFIX, SCIM_MEDIA_TYPE, ScimErrors, scim_errors, to_scim
from .service import LockyScimService, keep_status
from locky.accounts.logins import Accounts

from .storage import LockyScimStorage

TAG = "scim"
log = logging.getLogger("locky.scim")


class ScimEndpoint:
    """Serves every SCIM request of one app; the route classes below only say which
    methods each path has (Falcon answers 405 to the others)."""

    def __init__(self, context):
        self.context = context
        self.service = LockyScimService(provider(), context)
        self._accounts: Accounts | None = None

    @property
    def accounts(self) -> Accounts:
        """Registration's service (users are created as /v1 registers them); built on
        first use: it hashes a dummy password."""
        if self._accounts is None:
            self._accounts = Accounts(self.context)
        return self._accounts

    def base_url(self, req) -> str:
        public = self.context.settings.public_url
        return (public.rstrip("/") if public else req.prefix) + PREFIX

    def _body(self, req) -> bytes:
        limit = self.context.settings.max_body_bytes
        if req.content_length is not None and req.content_length > limit:
            raise PayloadTooLargeException(detail=f"The body is larger than {limit} bytes.")
        raw = req.bounded_stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLargeException(detail=f"The body is larger than {limit} bytes.")
        return raw

    def serve(self, req, resp) -> None:
        query = {key: value if isinstance(value, str) else value[-1] for key, value in req.params.items()}
        try:
            # HEAD is GET without the body (locky.routes.Router): the library knows GET.
            request = ScimRequest(method="GET" if req.method == "HEAD" else req.method, base_url=self.base_url(req), path=req.path[len(PREFIX):],
                                  query=query, headers=list(req.headers.items()), body=self._body(req),
                                  subject=req.context.identity)
            keeps_status = keep_status(self.context, request)
            storage = LockyScimStorage(self.context, req.context.identity, lambda: self.accounts,
                                       conditional=request.header("If-Match") is not None, keeps_status=keeps_status)
            handler = ScimHandler(self.service, storage)
            with scim_errors():
                response = handler.handle(request)
        except SCIMException as error:
            response = self.service.error_response(error)
        except LockyError as error:
            converted = to_scim(error)
            if converted is error:
                raise  # 429, 503: Locky's handler, then ScimErrors gives it the SCIM shape
            response = self.service.error_response(converted)
        resp.status = falcon.code_to_http_status(int(response.status))
        for name, value in response.headers.items():
            if name.lower() != "content-type":
                resp.set_header(name, value)
        if response.body is not None and response.status != HTTPStatus.NOT_MODIFIED:
            resp.data = json.dumps(response.body).encode()
            resp.content_type = SCIM_MEDIA_TYPE


class Discovery(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)


class Collection(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)

    def on_post(self, req, resp, **params):
        self.serve(req, resp)


class Root(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)


class Item(ScimEndpoint):
    def on_get(self, req, resp, **params):
        self.serve(req, resp)

    def on_put(self, req, resp, **params):
        self.serve(req, resp)

    def on_patch(self, req, resp, **params):
        self.serve(req, resp)

    def on_delete(self, req, resp, **params):
        self.serve(req, resp)


class Search(ScimEndpoint):
    def on_post(self, req, resp, **params):
        self.serve(req, resp)


def _public(summary: str) -> Operation:
    return Operation("get", summary, TAG, public=True)


def _op(method: str, summary: str, status: int = 200) -> Operation:
    return Operation(method, summary, TAG, status=status)


@hookimpl
def locky_routes(context):
    discovery = Discovery(context)
    routes = [
        Route(f"{PREFIX}/ServiceProviderConfig", discovery, (_public("SCIM service provider configuration"),),
              in_spec=False),
        Route(f"{PREFIX}/ResourceTypes", discovery, (_public("SCIM resource types"),), in_spec=False),
        Route(f"{PREFIX}/ResourceTypes/{{resource_id}}", Discovery(context), (_public("One SCIM resource type"),),
              in_spec=False),
        Route(f"{PREFIX}/Schemas", discovery, (_public("SCIM schemas"),), in_spec=False),
        Route(f"{PREFIX}/Schemas/{{resource_id}}", Discovery(context), (_public("One SCIM schema"),),
              in_spec=False),
    ]
    routes += [
        Route(PREFIX, Root(context), (_op("get", "Search users and groups together"),), in_spec=False),
        Route(f"{PREFIX}/.search", Search(context), (
            _op("post", "Search users and groups together with a SearchRequest body"),
        ), in_spec=False),
    ]
    for endpoint, kind in (("Users", "user"), ("Groups", "group")):
        routes += [
            Route(f"{PREFIX}/{endpoint}", Collection(context), (
                _op("get", f"Search {kind}s (filter, sort, page)"),
                _op("post", f"Create a {kind}", 201),
            ), in_spec=False),
            Route(f"{PREFIX}/{endpoint}/.search", Search(context), (
                _op("post", f"Search {kind}s with a SearchRequest body"),
            ), in_spec=False),
            Route(f"{PREFIX}/{endpoint}/{{resource_id}}", Item(context), (
                _op("get", f"Read a {kind}"),
                _op("put", f"Replace a {kind}"),
                _op("patch", f"Modify a {kind}"),
                _op("delete", f"Delete a {kind} (soft)", 204),
            ), in_spec=False),
        ]
    return routes


@hookimpl
def locky_middleware(context):
    return [ScimErrors()]
