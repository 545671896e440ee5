"""One app's SCIM requests handed to ``scim2-server``: each Falcon request becomes a
framework-free :class:`~scim2_server.requests.ScimRequest`, handled by
:class:`~scim2_server.handler.ScimHandler` over
:class:`~locky.scim.storage.LockyScimStorage`, and its response written back.

Resource URLs (``meta.location``, ``Location``, members' ``$ref``) are under
``LOCKY_PUBLIC_URL`` when it is set, else under the request's own scheme and host.
"""

from __future__ import annotations

import json
from http import HTTPStatus

import falcon
from scim2_models import PayloadTooLargeException, SCIMException
from scim2_server.handler import ScimHandler
from scim2_server.requests import ScimRequest

from locky.accounts.logins import Accounts
from locky.errors import LockyError

from .discovery import provider
from .error_bodies import PREFIX, SCIM_MEDIA_TYPE
from .errors import scim_errors, to_scim
from .service import LockyScimService, keep_status
from .storage import LockyScimStorage


class ScimProtocol:
    """Serves every SCIM request of one app (the routes of :mod:`locky.scim.routes` say
    which methods each path has)."""

    def __init__(self, context):
        self.context = context
        self.service = LockyScimService(provider(), context)
        self._accounts: Accounts | None = None

    @property
    def accounts(self) -> Accounts:
        """Registration's service (users are created as /v1 registers them), built on
        first use."""
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
