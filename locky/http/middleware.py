"""Falcon middleware: request ids and security headers, access logs, authentication."""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Iterable

import falcon

from locky import audit, cache as storage_cache
from locky.cli.logs import access_json
from locky.http.client_address import ClientAddresses
from locky.errors import Unauthorized
from locky.records import CLIENT_SUBJECT_PREFIX, Identity, client_principal
from locky.routes import Route, public_requests

JSON_UTF8 = "application/json; charset=utf-8"
REQUEST_ID = re.compile(r"^[\x20-\x7e]{1,128}$")
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
SECURITY_HEADER_LIST = list(SECURITY_HEADERS.items())
SECURITY_HEADERS_BUT_CACHE = [(name, value) for name, value in SECURITY_HEADER_LIST if name != "Cache-Control"]
access_log = logging.getLogger("locky.access")


def new_request_id() -> str:
    """A fresh UUID4 in its canonical text, as ``str(uuid.uuid4())`` gives it in half
    the time (every request without an ``X-Request-ID`` of its own takes one)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class RequestContext:
    """Gives every request an id and its client address (the ``LOCKY_TRUSTED_PROXIES``
    rule, :mod:`locky.http.client_address`), makes both the audit trail's origin for the
    request, marks the request for the storage cache
    (:func:`locky.cache.request_started`), gives every response the security
    headers, and logs one JSON line per request (never a body, query string, password
    or token).

    ``wake`` is called after a request that queued webhook deliveries (its transaction
    has committed by then)."""

    def __init__(self, log_requests: bool = True, client_addresses: ClientAddresses | None = None,
                 wake=None):
        self.log_requests = log_requests
        self.client_addresses = client_addresses or ClientAddresses()
        self.wake = wake

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        context = req.context
        context.started = time.perf_counter()
        given = req.env.get("HTTP_X_REQUEST_ID")  # what req.get_header gives, without its lookups
        context.request_id = request_id = given if given and REQUEST_ID.fullmatch(given) else new_request_id()
        context.identity = None
        context.client_address = address = self.client_addresses.of(req)
        context.origin = origin = audit.Origin(ip=address, request_id=request_id)
        context.origin_token = audit.begin(origin)
        context.cache_token = storage_cache.request_started()

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        context = req.context
        token = getattr(context, "cache_token", None)
        if token is not None:
            context.cache_token = None
            storage_cache.request_ended(token)
        token = getattr(context, "origin_token", None)
        if token is not None:
            context.origin_token = None
            origin = audit.end(token)
            if origin is not None and origin.queued and self.wake is not None:
                self.wake()
        resp.set_header("X-Request-ID", context.request_id)
        # Falcon labels JSON bodies (and its error bodies) plain application/json;
        # the contract names the charset.
        if resp.content_type == falcon.MEDIA_JSON:
            resp.content_type = JSON_UTF8
        # One call for the security headers, in their order; a Cache-Control the
        # resource chose is kept.
        resp.set_headers(SECURITY_HEADER_LIST if not resp.get_header("Cache-Control") else SECURITY_HEADERS_BUT_CACHE)
        if self.log_requests and access_log.isEnabledFor(logging.INFO):
            identity = req.context.identity
            line = {
                "method": req.method,
                "path": req.path,
                "status": int(resp.status_code),
                "duration_ms": round((time.perf_counter() - req.context.started) * 1000, 3),
                "request_id": req.context.request_id,
                "ip": getattr(req.context, "client_address", ""),
                "user": identity.user.uuid if identity else None,
            }
            write = direct_access_writer()
            if write is not None:
                write(line)
                return
            access_log.info(access_json(line))


def direct_access_writer():
    """The access log's handler's ``write_access_line`` when that handler alone takes
    its lines (``locky serve``'s JSON lines, :mod:`locky.cli.logs`), else ``None``: an
    embedding app's own handlers, filters or propagation get ordinary records."""
    handlers = access_log.handlers
    if len(handlers) != 1 or access_log.propagate or access_log.filters:
        return None
    handler = handlers[0]
    if handler.filters or handler.level > logging.INFO:
        return None
    return getattr(handler, "write_access_line", None)


class Authentication:
    """Sets ``req.context.identity`` for every operation not declared public.

    Whether an operation is public is read from the route table (``Operation.public``,
    the same declaration the Swagger document shows), looked up by the request's URI
    template and method; a method no route declares needs credentials (fail closed).
    Plugins get the first look through ``locky_authenticate``; then the configured
    token backend checks an ``Authorization: Bearer`` access token, and one storage
    read (``SessionStore.authenticate``) confirms that its session is live and its
    user not deleted, and gives the policy revision this request decides with.

    A machine client's ``client_credentials`` token (docs/http/oauth.md) has no
    session: its ``sid`` is ``client:<client uuid>:<token generation>`` and its ``sub``
    the client_id. One read of the client confirms that it is live, still has the
    grant, and has not revoked its tokens since (the generation); the caller is then
    the client as a policy subject (:func:`locky.records.client_principal`).
    """

    def __init__(self, context, routes: Iterable[Route]):
        self.context = context
        self.public = public_requests(routes)

    def process_resource(self, req, resp, resource, params) -> None:
        if resource is None or (req.uri_template, req.method) in self.public:
            return  # no resource: Falcon answers 404
        context = req.context
        plugins = self.context.hook.locky_authenticate
        identity = plugins(req=req, context=self.context) if plugins.get_hookimpls() else None
        context.identity = identity = identity or self.bearer(req)
        origin = getattr(context, "origin", None)
        if origin is not None:
            origin.actor_uuid = identity.user.uuid

    def bearer(self, req) -> Identity:
        header = req.get_header("Authorization")
        if not header:
            raise Unauthorized("A bearer token is required.")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Use the Bearer scheme: Authorization: Bearer <token>.")
        claims = self.context.tokens.verify(token.strip(), kind="access")
        if claims.session_uuid.startswith(CLIENT_SUBJECT_PREFIX):
            return self.machine_client(claims)
        found = self.context.storage.sessions.authenticate(claims.session_uuid)
        if found is None:
            raise Unauthorized("The token has been revoked.")
        if found.user.uuid != claims.subject:
            raise Unauthorized("The token is invalid.")
        if found.user.disabled:  # its logins were ended when it was disabled; this is a second guard
            raise Unauthorized("The account is disabled.")
        return Identity(user=found.user, session_uuid=found.session.uuid, policy_revision=found.policy_revision)

    def machine_client(self, claims) -> Identity:
        """The caller of a ``client_credentials`` token: its live client, as a policy subject."""
        parts = claims.session_uuid.split(":")
        _, client_uuid, generation = parts if len(parts) == 3 else ("", "", "")
        if claims.client_id != claims.subject or not generation.isdigit():
            raise Unauthorized("The token is invalid.")
        client = self.context.storage.oauth_clients.get_by_client_id(claims.subject)
        # Deleted, its tokens revoked (the generation moved on), or the grant taken
        # away: every token it was issued stops at once.
        if (client is None or client.uuid != client_uuid or str(client.token_generation) != generation
                or "client_credentials" not in client.grant_types):
            raise Unauthorized("The token has been revoked.")
        return Identity(user=client_principal(client), session_uuid=None, scheme="client")
