"""Client authentication outside the token endpoint: RFC 7662 introspection and RFC 7009
revocation (docs/http/tokens.md) take a client's credentials as the token endpoint does,
through Authlib's own client authentication: ``Authorization: Basic``
(``client_secret_basic``), or ``client_id`` and ``client_secret`` in the body
(``client_secret_post``; JSON bodies too, as those endpoints read them), or a public
client's bare ``client_id`` (``none``, where the endpoint allows it)."""

from __future__ import annotations

import json
from typing import Any

import falcon
from authlib.oauth2.rfc6749 import InvalidClientError

from locky.errors import LockyError
from locky.http.media import FORM, read_json_or_form
from locky.oauth.server import Client, OAuthRequest, oauth_server, unauthorized
from locky.records import Identity, client_principal

INTROSPECTION_PATH = "/v1/internal/tokens/introspect"
#: Confidential clients only: a public client has no secret to prove who asks. With
#: client_secret_basic listed, a failure is 401 (RFC 6749 section 5.2), as §15 wants.
INTROSPECTION_METHODS = ["client_secret_basic", "client_secret_post"]

#: The body fields that carry a client's credentials (taken out before the endpoint's
#: own schema reads the body).
CREDENTIAL_FIELDS = ("client_id", "client_secret")


class ClientRefused(Exception):
    """Client authentication failed: answer ``status`` with ``body`` and ``headers``
    (RFC 6749 ``invalid_client``, 401 with a ``Basic`` challenge)."""

    def __init__(self, status: int, body: dict[str, Any], headers: list[tuple[str, str]]):
        super().__init__(body.get("error"))
        self.status, self.body, self.headers = status, body, headers

    def write(self, resp) -> None:
        resp.status = self.status
        for name, value in self.headers:
            if name.lower() != "content-type":
                resp.set_header(name, value)
        resp.media = self.body


class InvalidClient(falcon.HTTPError):
    """:class:`ClientRefused` raised through Falcon (from the authentication hook): the
    same RFC 6749 body and headers."""

    def __init__(self, refused: ClientRefused):
        headers = {name: value for name, value in refused.headers if name.lower() != "content-type"}
        super().__init__(refused.status, headers=headers)
        self.body = refused.body

    def to_dict(self, obj_type=dict):
        return obj_type(self.body)

    def to_json(self, handler=None) -> bytes:
        return json.dumps(self.body).encode()


def uses_basic(req) -> bool:
    return (req.get_header("Authorization") or "").strip()[:6].lower() == "basic "


def authenticate(context, req, fields: dict[str, Any], methods: list[str], endpoint: str) -> Client:
    """The client whose credentials the request carries (``fields``: the body's
    ``client_id`` / ``client_secret``); :class:`ClientRefused` when they are wrong."""
    server = oauth_server(context)
    pairs = [(name, value) for name, value in fields.items() if isinstance(value, str)]
    request = OAuthRequest(req.method, server.base + req.path, dict(req.headers), [], pairs)
    try:
        return server.authenticate_client(request, methods, endpoint)
    except InvalidClientError as error:
        status, body, headers = unauthorized(error)()
        raise ClientRefused(status, dict(body), list(headers)) from None


def credential_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Take the client's credential fields out of a request body ``data``."""
    return {name: data.pop(name) for name in CREDENTIAL_FIELDS if name in data}


def introspecting_client(req, context) -> Identity | None:
    """The caller of ``POST /v1/internal/tokens/introspect`` when it is a client proving
    its secret (``locky_authenticate``: a credential of the provider's own), or ``None``
    for every other request (a bearer token goes on to Locky's own check).

    ``client_secret_post`` means reading the body here: it is kept on
    ``req.context.oauth_body`` for the endpoint (a stream reads once). A body that
    cannot be read is left to the bearer check's 401, as before."""
    if req.uri_template != INTROSPECTION_PATH or req.method != "POST":
        return None
    if uses_basic(req):
        fields: dict[str, Any] = {}
    elif req.get_header("Authorization") is None and (req.content_type or "").split(";")[0].strip().lower() == FORM:
        try:
            data = read_json_or_form(req, context.settings.max_body_bytes)
        except (LockyError, falcon.HTTPError):
            return None
        req.context.oauth_body = data
        fields = credential_fields(data)
        if "client_id" not in fields:
            return None
    else:
        return None
    try:
        client = authenticate(context, req, fields, INTROSPECTION_METHODS, "introspection")
    except ClientRefused as refused:
        raise InvalidClient(refused) from None
    return Identity(user=client_principal(client.record), session_uuid=None, scheme="client")
