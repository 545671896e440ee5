"""Authlib's authorization server on Falcon, built per app (docs/http/oauth.md).

Authlib does the protocol: validating authorization requests, the grants, PKCE, client
authentication and RFC 6749's error answers. This module adapts it to Falcon and to
Locky: :class:`OAuthServer` reads clients from ``storage.oauth_clients``,
:class:`OAuthRequest` turns a Falcon request into Authlib's (headers looked up in any
case, form bodies read once with Locky's body-size cap, repeated parameters kept so
Authlib can refuse them), :func:`respond` writes Authlib's ``(status, body, headers)``
back, :class:`Client` is the ``ClientMixin`` view of an :class:`~locky.records.OAuthClient`
and :class:`S256Only` is PKCE as §15 wants it. The grants live in
:mod:`locky.oauth.grants`; :func:`oauth_server` builds and keeps one server per app.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlsplit

import falcon
from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, InvalidClientError, InvalidRequestError, OAuth2Payload, OAuth2Request
from authlib.oauth2.rfc7636 import CodeChallenge

from locky.accounts.codes import hash_code
from locky.oauth import grants
from locky.errors import Invalid
from locky.http.media import FORM, read_form_pairs
from locky.records import OAuthClient, Session, User

log = logging.getLogger("locky.oauth")

#: The scopes Locky's OpenID provider knows (§15); a client may ask for those it was given.
SCOPES_SUPPORTED = ("openid", "profile", "email", "groups", "offline_access")
#: Client authentication at the token endpoint, by client type (RFC 6749 section 2.3).
CONFIDENTIAL_AUTH_METHODS = ("client_secret_basic", "client_secret_post")
PUBLIC_AUTH_METHODS = ("none",)
#: Where each of the provider's endpoints is, under the public base.
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
USERINFO_PATH = "/oauth/userinfo"
LOGOUT_PATH = "/oauth/logout"
DISCOVERY_PATH = "/.well-known/openid-configuration"
#: The ``context.state`` key of the app's server.
STATE_KEY = "locky.oauth.server"


class Headers(dict):
    """Request headers for Authlib, looked up in any case: Authlib asks for
    ``Authorization`` while Falcon's ``req.headers`` keys are upper case (without this,
    ``client_secret_basic`` would silently never match)."""

    def __init__(self, headers: dict[str, str]):
        super().__init__((name.lower(), value) for name, value in headers.items())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> Any:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class Payload(OAuth2Payload):
    """The request's parameters (query and form): ``data`` the first value of each name,
    ``datalist`` every value, which Authlib reads to refuse a repeated parameter."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        self._datalist: defaultdict[str, list[str]] = defaultdict(list)
        for name, value in pairs:
            self._datalist[name].append(value)
        self._data = {name: values[0] for name, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


def read_form(req: falcon.Request, max_bytes: int) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs of a form-encoded POST body (repeated names kept),
    capped like every Locky body; no pairs for another method or media type (the OAuth
    endpoints read forms only, and Authlib answers a missing parameter itself)."""
    media_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    if req.method != "POST" or media_type != FORM:
        return []
    return read_form_pairs(req, max_bytes)


class OAuthRequest(OAuth2Request):
    """A Falcon request as Authlib reads it: ``payload`` for the parameters, ``args`` /
    ``form`` for the query and the body (grants read ``request.form["code"]``)."""

    def __init__(self, method: str, uri: str, headers: dict[str, str], query: list[tuple[str, str]],
                 form: list[tuple[str, str]]):
        # Authlib's https-or-loopback check looks only at this string, which Locky builds
        # from its configured public base (never from the request's Host): the transport
        # is decided once per app instead (see transport_warning), so the check is given
        # a loopback URI and the real one is kept after it.
        super().__init__(method, "http://127.0.0.1/", headers=Headers(headers))
        self.uri = uri
        self._args = dict(reversed(query))
        self._form = dict(reversed(form))
        self.payload = Payload(list(query) + list(form))

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form

    @classmethod
    def from_falcon(cls, req: falcon.Request, base: str, max_bytes: int) -> "OAuthRequest":
        try:
            query = parse_qsl(req.query_string, keep_blank_values=True, max_num_fields=100)
        except ValueError:
            raise Invalid.one("query", "The query string has too many parameters.") from None
        return cls(req.method, base + req.relative_uri, dict(req.headers), query, read_form(req, max_bytes))

    @classmethod
    def form_post(cls, req: falcon.Request, base: str, max_bytes: int) -> "OAuthRequest":
        """A request whose parameters are its form body only (the token endpoint, RFC 6749
        section 3.2): a query string is not read, so a secret there is not taken."""
        return cls(req.method, base + req.path, dict(req.headers), [], read_form(req, max_bytes))

    @classmethod
    def from_params(cls, base: str, params: Iterable[tuple[str, str]], method: str = "GET",
                    headers: dict[str, str] | None = None) -> "OAuthRequest":
        """An authorization request rebuilt from its parameters (the sign-in pages carry
        them in hidden fields and re-validate the request on every post)."""
        pairs = list(params)
        return cls(method, base + AUTHORIZE_PATH, headers or {}, pairs, [])


def respond(resp: falcon.Response, result: tuple[int, Any, Iterable[tuple[str, str]]]) -> None:
    """Write one of Authlib's answers ``(status, body, headers)`` to ``resp``: a dict body
    as JSON, a redirect's empty body as nothing."""
    status, body, headers = result
    resp.status = status
    for name, value in headers:
        if name.lower() == "content-type":
            resp.content_type = value
        else:
            resp.set_header(name, value)
    if isinstance(body, dict):
        resp.content_type = falcon.MEDIA_JSON
        resp.text = json.dumps(body)
    else:
        resp.text = body or ""


class Client(ClientMixin):
    """The ``ClientMixin`` view of a live :class:`~locky.records.OAuthClient`."""

    def __init__(self, record: OAuthClient):
        self.record = record
        self.client_id = record.client_id
        self.type = record.type
        self.id_token_signed_response_alg = record.id_token_signed_response_alg
        self.client_metadata = {"post_logout_redirect_uris": list(record.post_logout_redirect_uris)}

    def get_client_id(self) -> str:
        return self.record.client_id

    def get_default_redirect_uri(self) -> None:
        # OpenID Connect requires redirect_uri on every request: there is no default.
        return None

    def get_allowed_scope(self, scope: str) -> str | None:
        """The asked scope when the client may have all of it; ``None`` (Authlib's
        ``invalid_scope``, redirected with ``state``) when it asks for more."""
        if not scope:
            return ""
        asked = scope.split()
        if not set(asked) <= set(self.record.scopes):
            return None
        return " ".join(dict.fromkeys(asked))

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        # Exact string match (§15): no prefixes, no wildcards, no normalization.
        return redirect_uri in self.record.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        stored = self.record.secret_hash
        if stored is None or not isinstance(client_secret, str):
            return False
        return hmac.compare_digest(hash_code(client_secret), stored)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        # A public client has no secret: only "none". A confidential client must prove
        # its secret: never "none" (RFC 6749 section 3.2.1).
        if self.record.type == "public":
            return method in PUBLIC_AUTH_METHODS
        return method in CONFIDENTIAL_AUTH_METHODS

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and "authorization_code" in self.record.grant_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.record.grant_types


@dataclass(frozen=True)
class EndUser:
    """The signed-in user an authorization is granted for (Authlib's ``grant_user``):
    the user and the OP session (the browser's sign-in at Locky) whose ``created_at``
    is the ``auth_time`` and whose ``amr`` says how they signed in."""

    user: User
    op_session: Session

    @property
    def uuid(self) -> str:
        return self.user.uuid


class S256Only(CodeChallenge):
    """PKCE as §15 wants it: ``S256`` only (``plain`` is refused), and a challenge
    required of public clients at the authorization endpoint (Authlib's own
    ``required=True`` only demands a verifier at the token endpoint, and takes an absent
    method as ``plain``). Raised in this hook, the errors are redirected with ``state``
    (Authlib sets both once the client and its redirect URI are verified)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        data = grant.request.payload.data
        if grant.request.client.type == "public" and not data.get("code_challenge"):
            raise InvalidRequestError("Public clients must send 'code_challenge' (PKCE, S256).")
        if data.get("code_challenge") and data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be S256.")
        return super().validate_code_challenge(grant, redirect_uri)


def public_base(settings) -> str:
    """Where the provider's URLs start: ``LOCKY_PUBLIC_URL``, else the tokens' issuer when
    it is a URL, else ``http://<LOCKY_HOST>:<LOCKY_PORT>``."""
    from locky.resources.tokens import configured_base

    return configured_base(settings) or f"http://{settings.host}:{settings.port}"


def insecure_transport(base: str) -> bool:
    """Whether ``base`` is plain http to a host other than the loopback: tokens and
    passwords would cross the network in the clear unless a proxy adds TLS."""
    parts = urlsplit(base)
    if parts.scheme == "https":
        return False
    host = parts.hostname or ""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def transport_warning(base: str) -> str | None:
    """The warning logged once when an app's provider is built on an insecure base.

    Locky's decision: serve, and warn. Authlib would refuse each request (a 500 from its
    ``InsecureTransportError``), but it judges a URL Locky configured, not the transport
    the request came over: behind a proxy that terminates TLS, ``LOCKY_PUBLIC_URL`` is the
    place to say so, and the rest of Locky's API (the login, §2) is served on the same
    terms."""
    if not insecure_transport(base):
        return None
    return (f"The OpenID provider's public URL {base} is plain http to a host other than the loopback:"
            " set LOCKY_PUBLIC_URL to the https:// URL clients reach Locky at.")


class OAuthServer(AuthorizationServer):
    """Authlib's authorization server over one app's storage and token backend."""

    def __init__(self, context):
        super().__init__(scopes_supported=list(SCOPES_SUPPORTED))
        self.context = context
        self.base = public_base(context.settings)
        self.max_body_bytes = context.settings.max_body_bytes

    def query_client(self, client_id: str) -> Client | None:
        """The live client with this ``client_id`` (a deleted one is unknown)."""
        if not isinstance(client_id, str) or not client_id:
            return None
        record = self.context.storage.oauth_clients.get_by_client_id(client_id)
        return Client(record) if record is not None else None

    def save_token(self, token, request) -> None:
        # Each grant stores what it issued in its own save_token (locky.oauth.grants),
        # inside the transaction that also records its audit event.
        pass

    def create_oauth2_request(self, request) -> OAuthRequest:
        if isinstance(request, OAuth2Request):
            return request
        return OAuthRequest.from_falcon(request, self.base, self.max_body_bytes)

    def create_json_request(self, request):
        # Only the dynamic client registration endpoints (RFC 7591/7592) read JSON.
        raise NotImplementedError

    def handle_response(self, status, body, headers):
        return status, body, headers

    def send_signal(self, name, *args, **kwargs) -> None:
        # Authlib's "after_authenticate_client" / "after_revoke_token": Locky's audit
        # events are recorded by the grants themselves, inside their transactions.
        pass

    def get_error_uri(self, request, error) -> None:
        return None

    def handle_error_response(self, request, error):
        return super().handle_error_response(request, unauthorized(error))


def unauthorized(error):
    """``error``, with a failed client authentication made a 401 with its ``Basic``
    challenge however the client tried (§15; Authlib answers 400 unless the client
    could have used ``Authorization``, which RFC 6749 section 5.2 allows)."""
    if isinstance(error, InvalidClientError):
        error.status_code = 401
    return error


def build_server(context) -> OAuthServer:
    """A new server for ``context`` with Locky's grants registered."""
    server = OAuthServer(context)
    warning = transport_warning(server.base)
    if warning:
        log.warning(warning)
    server.register_grant(grants.CodeGrant, [S256Only(required=True), grants.OpenIDCodeExtension(context)])
    server.register_grant(grants.RefreshGrant)
    server.register_grant(grants.ClientCredentialsGrant)
    return server


def oauth_server(context) -> OAuthServer:
    """The app's server, built on first use and kept in ``context.state``."""
    server = context.state.get(STATE_KEY)
    if server is None:
        server = context.state[STATE_KEY] = build_server(context)
    return server
