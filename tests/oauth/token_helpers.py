"""The token side of the OpenID provider, driven as a relying party drives it: clients
registered in storage, authorization codes made by the provider's own authorization
grant for a signed-in user, and the token endpoint's form posts."""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from authlib.oauth2 import OAuth2Error

from locky.accounts.codes import hash_code
from locky.oauth.server import EndUser, OAuthRequest, oauth_server

TOKEN = "/oauth/token"
USERINFO = "/oauth/userinfo"
DISCOVERY = "/.well-known/openid-configuration"
METADATA = "/.well-known/oauth-authorization-server"
JWKS = "/.well-known/jwks.json"
INTROSPECT = "/v1/internal/tokens/introspect"
REVOKE = "/v1/public/tokens/revoke"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
REDIRECT_URI = "http://127.0.0.1:9999/callback"
SECRET = "a-client-secret-" + "x" * 40
ALL_SCOPES = ("openid", "profile", "email", "groups", "offline_access")
VERIFIER = "verifier-" + "v" * 50
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")


def make_client(app, *, type: str = "confidential", grant_types=("authorization_code", "refresh_token"),
                scopes=ALL_SCOPES, alg: str = "RS256", secret: str | None = SECRET):
    """A client registered straight in storage (the /v1 registration is tested elsewhere)."""
    return app.context.storage.oauth_clients.create(
        client_id=secrets.token_urlsafe(16), name="Example App", type=type, redirect_uris=[REDIRECT_URI],
        post_logout_redirect_uris=[], grant_types=list(grant_types), scopes=list(scopes),
        id_token_signed_response_alg=alg, first_party=True,
        secret_hash=hash_code(secret) if type == "confidential" and secret else None)


def basic(client_id: str, secret: str = SECRET) -> dict[str, str]:
    raw = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {raw}", **FORM}


def sign_in(app, user_uuid: str, amr=("pwd",)):
    """An OP session of the user (what the sign-in page makes) as the grant's end user."""
    storage = app.context.storage
    session = storage.sessions.create(uuid=str(uuid.uuid4()), user_uuid=user_uuid, refresh_jti=uuid.uuid4().hex,
                                      amr=amr)
    return EndUser(user=storage.users.get_by_uuid(user_uuid), op_session=session)


def authorize(app, client, end_user, **params: str | None):
    """The authorization endpoint's answer for ``end_user`` having consented: Authlib's
    validation of the request and the code grant's redirect (or error redirect)."""
    server = oauth_server(app.context)
    query = {"response_type": "code", "client_id": client.client_id, "redirect_uri": REDIRECT_URI,
             "scope": "openid email", "state": "st-1", "nonce": "n-1", "code_challenge": CHALLENGE,
             "code_challenge_method": "S256"}
    query.update(params)
    request = OAuthRequest.from_params(server.base, [(k, v) for k, v in query.items() if v is not None])
    try:
        grant = server.get_consent_grant(request, end_user=end_user)
    except OAuth2Error as error:
        assert error.redirect_uri, error  # redirected: never an error page here
        status, _, headers = server.handle_error_response(request, error)
    else:
        status, _, headers = server.create_authorization_response(request, grant_user=end_user, grant=grant)
    assert status == 302
    return {k: v[0] for k, v in parse_qs(urlsplit(dict(headers)["Location"]).query).items()}


def issue_code(app, client, end_user, **params: str | None) -> str:
    answer = authorize(app, client, end_user, **params)
    assert "code" in answer, answer
    return answer["code"]


def exchange(locky_client, client, code: str, *, verifier: str | None = VERIFIER, secret: str | None = SECRET,
             post: bool = False, **extra: str):
    """POST /oauth/token with grant_type=authorization_code."""
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier, **extra}
    return token_request(locky_client, client, form, secret=secret, post=post)


def token_request(locky_client, client, form: dict[str, Any], *, secret: str | None = SECRET, post: bool = False):
    form = {k: v for k, v in form.items() if v is not None}
    if client.type == "public" or secret is None:
        headers, form = FORM, {"client_id": client.client_id, **form}
    elif post:
        headers, form = FORM, {"client_id": client.client_id, "client_secret": secret, **form}
    else:
        headers = basic(client.client_id, secret)
    return locky_client.simulate_post(TOKEN, body=urlencode(form), headers=headers)


def claims(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def verified_id_token(locky_client, id_token: str, audience: str, issuer: str) -> dict[str, Any]:
    """The ID token's claims, its signature checked against the published JWKS."""
    header = jwt.get_unverified_header(id_token)
    keys = {key["kid"]: key for key in locky_client.simulate_get(JWKS).json["keys"]}
    key = jwt.PyJWK(keys[header["kid"]])
    return jwt.decode(id_token, key.key, algorithms=[header["alg"]], audience=audience, issuer=issuer)


def events_named(app, name: str) -> list:
    page = app.context.storage.audit.list(limit=500, event=name)
    return page.items
