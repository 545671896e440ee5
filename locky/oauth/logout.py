"""The end-session endpoint (OpenID Connect RP-Initiated Logout 1.0; docs/http/oauth.md):
``GET|POST /oauth/logout``.

It ends the browser's OP session and every login that session gave a client
(``sessions.end_op_session``), audited ``oauth.logout``, and forgets the cookie. It
sends the browser back to the client only to a ``post_logout_redirect_uri`` registered
for the client an ``id_token_hint`` we signed names (its ``aud``; expired hints are
fine: logging out is what one does with an old ID token); anything else gets the
signed-out page, never a redirect to an address the request alone chose.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from joserfc import jwt as jose_jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from locky import events
from locky.oauth import pages
from locky.oauth.browser import browser
from locky.oauth.server import read_form
from locky.resources.tokens import signing_keys

#: How many earlier OP sessions (signing in again replaced) one logout follows back.
MAX_EARLIER_SESSIONS = 20
#: The algorithms an ID token of ours may be signed with.
ID_TOKEN_ALGORITHMS = ("RS256", "ES256", "EdDSA")


class Logout:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        params = dict(reversed(parse_qsl(req.query_string, keep_blank_values=True, max_num_fields=100)))
        params.update(dict(reversed(read_form(req, self.context.settings.max_body_bytes))))
        claims = self.verified_hint(params.get("id_token_hint"))
        client_id = params.get("client_id") or _audience(claims)
        if claims is not None and client_id != _audience(claims):
            claims = None  # a hint of another client names no return address for this one
        self.end(req, resp, claims, client_id)
        target = self.return_address(params.get("post_logout_redirect_uri"), claims, client_id)
        if target is None:
            return pages.signed_out(resp)
        pages.page_headers(resp)
        resp.status = "303 See Other"
        resp.location = _with_state(target, params.get("state"))

    on_post = on_get

    def verified_hint(self, hint: str | None) -> dict | None:
        """The claims of ``hint`` when it is an ID token Locky signed (its signature by a
        key of our JWKS, its issuer ours; ``exp`` not checked), else ``None``."""
        keys = signing_keys(self.context)
        if not hint or keys is None:
            return None
        try:
            key_set = KeySet.import_key_set({"keys": keys.published()})
            claims = jose_jwt.decode(hint, key_set, algorithms=list(ID_TOKEN_ALGORITHMS)).claims
        except (JoseError, ValueError, TypeError, KeyError):
            return None
        if claims.get("iss") != self.context.settings.issuer or not isinstance(claims.get("sub"), str):
            return None
        if "typ" in claims:
            return None  # an access or refresh token (they carry typ; ID tokens do not) is no hint
        return claims

    def end(self, req, resp, claims: dict | None, client_id: str | None) -> None:
        """End the OP session of the cookie (or, without one, the session the verified
        hint's ``sid`` names for its ``sub``) and the logins it gave clients."""
        storage, trail = self.context.storage, self.context.audit
        cookies = browser(self.context)
        op_uuid, by_hint = cookies.cookie_session_uuid(req), False
        if op_uuid is None and claims is not None and isinstance(claims.get("sid"), str):
            op_uuid, by_hint = claims["sid"], True
        cookies.clear_session(resp)
        found = storage.sessions.identity(op_uuid) if op_uuid is not None else None
        if found is None:
            return
        session, user = found
        if session.client_id is not None or (by_hint and claims["sub"] != user.uuid):
            return  # not an OP session, or not the hint's user's
        with storage.atomic():
            ended, earlier = storage.sessions.end_op_session(op_uuid), session.op_session_uuid
            for _ in range(MAX_EARLIER_SESSIONS):  # the sessions it replaced when signing in again
                found = storage.sessions.identity(earlier) if earlier is not None else None
                if found is None or found[0].client_id is not None or found[1].uuid != user.uuid:
                    break
                ended += storage.sessions.end_op_session(earlier)
                earlier = found[0].op_session_uuid
            details = {"user_uuid": user.uuid, "sessions_ended": ended}
            if client_id:
                details["client_id"] = client_id
            trail.record(events.OAUTH_LOGOUT, target_type="session", target_uuid=op_uuid, actor_uuid=user.uuid,
                         details=details)

    def return_address(self, uri: str | None, claims: dict | None, client_id: str | None) -> str | None:
        """``uri`` when it is registered for the client the verified hint names."""
        if not uri or claims is None or not client_id:
            return None
        client = self.context.storage.oauth_clients.get_by_client_id(client_id)
        if client is None or uri not in client.post_logout_redirect_uris:
            return None
        return uri


def _audience(claims: dict | None) -> str | None:
    if not claims:
        return None
    aud = claims.get("aud")
    if isinstance(aud, list):
        return aud[0] if len(aud) == 1 and isinstance(aud[0], str) else claims.get("azp")
    return aud if isinstance(aud, str) else None


def _with_state(uri: str, state: str | None) -> str:
    if not state:
        return uri
    parts = urlsplit(uri)
    query = parts.query + ("&" if parts.query else "") + urlencode({"state": state})
    return urlunsplit(parts._replace(query=query))


def routes(context) -> list:
    """The end-session endpoint: public, outside the Swagger document."""
    from locky.routes import Operation, Route

    resource, tag = Logout(context), "oauth"
    return [Route("/oauth/logout", resource, (
        Operation("get", "End-session endpoint (RP-initiated logout)", tag, public=True),
        Operation("post", "End-session endpoint, form-encoded", tag, public=True),
    ), in_spec=False)]
