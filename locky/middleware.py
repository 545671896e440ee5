"""Falcon middleware: request ids and security headers, access logs, authentication."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

import falcon
import orjson

from locky.errors import Unauthorized
from locky.records import Identity
from locky.request_state import POLICY_REVISION

JSON_UTF8 = "application/json; charset=utf-8"
REQUEST_ID = re.compile(r"^[\x20-\x7e]{1,128}$")
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
access_log = logging.getLogger("locky.access")


class RequestContext:
    """Gives every request an id, every response the security headers, and logs one
    JSON line per request (never a body, query string, password or token)."""

    def __init__(self, log_requests: bool = True):
        self.log_requests = log_requests

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = time.perf_counter()
        given = req.get_header("X-Request-ID")
        req.context.request_id = given if given and REQUEST_ID.match(given) else str(uuid.uuid4())
        req.context.identity = None

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        resp.set_header("X-Request-ID", req.context.request_id)
        # Falcon labels JSON bodies (and its error bodies) plain application/json;
        # the contract names the charset.
        if resp.content_type == falcon.MEDIA_JSON:
            resp.content_type = JSON_UTF8
        for name, value in SECURITY_HEADERS.items():
            if name == "Cache-Control" and resp.get_header(name):
                continue
            resp.set_header(name, value)
        if self.log_requests and access_log.isEnabledFor(logging.INFO):
            identity = req.context.identity
            line = {
                "method": req.method,
                "path": req.path,
                "status": int(resp.status_code),
                "duration_ms": round((time.perf_counter() - req.context.started) * 1000, 3),
                "request_id": req.context.request_id,
                "user": identity.user.uuid if identity else None,
            }
            try:
                text = orjson.dumps(line).decode()
            except TypeError:  # a path orjson refuses (lone surrogates): the json module escapes it
                text = json.dumps(line)
            access_log.info(text)


class Authentication:
    """Sets ``req.context.identity`` for every resource that is not ``public``.

    Plugins get the first look through ``locky_authenticate``; then the configured
    token backend checks an ``Authorization: Bearer`` access token, and storage
    confirms that its session is live and its user not deleted.
    """

    def __init__(self, context):
        self.context = context
        # One query for session, user and policy revision when storage offers it.
        self.authenticate = getattr(context.storage, "authenticate", None)

    def process_request(self, req, resp) -> None:
        POLICY_REVISION.set(None)

    def process_resource(self, req, resp, resource, params) -> None:
        if resource is None or getattr(resource, "public", False) or req.method == "OPTIONS":
            return
        identity = self.context.hook.locky_authenticate(req=req, context=self.context)
        req.context.identity = identity or self.bearer(req)

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        POLICY_REVISION.set(None)  # the revision read at authentication is this request's only

    def bearer(self, req) -> Identity:
        header = req.get_header("Authorization")
        if not header:
            raise Unauthorized("A bearer token is required.")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Use the Bearer scheme: Authorization: Bearer <token>.")
        claims = self.context.tokens.verify(token.strip(), kind="access")
        if self.authenticate is not None:
            found = self.authenticate(claims.session_uuid)
            if found is None:
                raise Unauthorized("The token has been revoked.")
            session, user, revision = found
            POLICY_REVISION.set(revision)
        else:
            found = self.context.storage.sessions.identity(claims.session_uuid)
            if found is None:
                raise Unauthorized("The token has been revoked.")
            session, user = found
        if user.uuid != claims.subject:
            raise Unauthorized("The token is invalid.")
        return Identity(user=user, session_uuid=session.uuid)
