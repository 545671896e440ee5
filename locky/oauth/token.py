"""``POST /oauth/token`` (RFC 6749 section 3.2): the grants of :mod:`locky.oauth.grants`
behind Authlib's client authentication.

Every answer is OAuth's own JSON with ``Cache-Control: no-store``: tokens, or an RFC 6749
error (``invalid_client`` with 401 and ``WWW-Authenticate``, ``invalid_grant``, ...).
Locky's field-map 400 and 415 never apply here: a body that is no form, or no body, is
just a request without parameters, and a body too large or unreadable is
``invalid_request``.
"""

from __future__ import annotations

import falcon

from locky.errors import Invalid, LockyError, Unavailable
from locky.oauth.server import OAuthRequest, oauth_server, respond

NO_STORE = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]


def error_answer(status: int, error: str, description: str):
    """An RFC 6749 error body as :func:`~locky.oauth.server.respond` writes it."""
    return status, {"error": error, "error_description": description}, NO_STORE


class TokenEndpoint:
    def __init__(self, context):
        self.context = context

    def on_post(self, req, resp):
        server = oauth_server(self.context)
        try:
            request = OAuthRequest.form_post(req, server.base, server.max_body_bytes)
            repeated = sorted(name for name, values in request.payload.datalist.items() if len(values) > 1)
            if repeated:
                # RFC 6749 section 3.2: no parameter more than once (Authlib checks this at
                # the authorization endpoint only).
                result = error_answer(400, "invalid_request", f"Give each parameter once: {repeated[0]!r} is repeated.")
            else:
                result = server.create_token_response(request)
        except falcon.HTTPContentTooLarge as exc:
            result = error_answer(413, "invalid_request", exc.description or "The body is too large.")
        except Invalid as exc:
            result = error_answer(400, "invalid_request", next(iter(exc.fields.values())))
        except Unavailable:
            result = error_answer(503, "temporarily_unavailable", "Storage is not answering.")
        except LockyError:
            result = error_answer(500, "server_error", "The token could not be issued.")
        respond(resp, result)
