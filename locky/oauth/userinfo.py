"""``GET|POST /oauth/userinfo`` (OpenID Connect Core section 5.3): the claims of the
scopes an access token of the provider was granted.

The token comes in ``Authorization: Bearer`` or, on a POST, in the form field
``access_token`` (RFC 6750 section 2), never both. A token that is bad, expired, revoked,
of a deleted or disabled user, of a client_credentials grant (no user) or not issued by
the provider (Locky's own logins have no client) is ``401`` with ``WWW-Authenticate:
Bearer error="invalid_token"``; one without the ``openid`` scope is ``403``
``insufficient_scope``.
"""

from __future__ import annotations

import json

import falcon

from locky.errors import Invalid, LockyError, Unavailable
from locky.oauth.claims import user_info
from locky.oauth.server import read_form


class Refused(Exception):
    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


def bearer_token(req, form: list[tuple[str, str]]) -> str:
    """The access token of the request, from its header or its form body."""
    header = req.get_header("Authorization")
    in_form = [value for name, value in form if name == "access_token"]
    if header and in_form or len(in_form) > 1:
        raise Refused(400, "invalid_request", "Send the access token once: in the header or in the body.")
    if in_form:
        return in_form[0]
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused(401, "invalid_token", "A bearer access token is required.")
    return token.strip()


class UserInfoEndpoint:
    def __init__(self, context):
        self.context = context

    def claims(self, token: str) -> dict:
        context = self.context
        try:
            claims = context.tokens.verify(token, kind="access")
        except LockyError:
            raise Refused(401, "invalid_token", "The access token is invalid or expired.") from None
        if claims.client_id is None:
            raise Refused(401, "invalid_token", "The access token was not issued by the OpenID provider.")
        found = context.storage.sessions.authenticate(claims.session_uuid)
        if found is None or found.user.uuid != claims.subject or found.user.disabled:
            raise Refused(401, "invalid_token", "The access token has been revoked.")
        if "openid" not in (claims.scope or "").split():
            raise Refused(403, "insufficient_scope", "The access token was not granted the openid scope.")
        return dict(user_info(context.storage, found.user, claims.scope))

    def on_get(self, req, resp):
        try:
            try:
                form = read_form(req, self.context.settings.max_body_bytes)
            except falcon.HTTPContentTooLarge:
                raise Refused(413, "invalid_request", "The body is too large.") from None
            except Invalid:
                raise Refused(400, "invalid_request", "The body is not a valid form.") from None
            body = self.claims(bearer_token(req, form))
        except Refused as refused:
            resp.status = refused.status
            challenge = f'Bearer error="{refused.error}", error_description="{refused.description}"'
            resp.set_header("WWW-Authenticate", challenge)
            body = {"error": refused.error, "error_description": refused.description}
        except Unavailable:
            resp.status = 503
            body = {"error": "temporarily_unavailable", "error_description": "Storage is not answering."}
        resp.content_type = falcon.MEDIA_JSON
        resp.text = json.dumps(body)

    on_post = on_get
