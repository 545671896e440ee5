"""A browser for the OpenID provider's pages over Falcon's test client: a cookie jar,
the forms' hidden fields read from the HTML, and an OAuth client to sign in to."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from locky.accounts.codes import hash_code

REDIRECT_URI = "http://127.0.0.1:9999/callback"
LOGOUT_URI = "http://127.0.0.1:9999/signed-out"
SCOPES = ("openid", "profile", "email", "groups", "offline_access")
SECRET = "client-secret-" + "s" * 40
AUTHORIZE = "/oauth/authorize"
VERIFIER = "v" * 64
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")


def make_client(app, *, first_party: bool = False, scopes=SCOPES, name: str = "Example <App> & Co"):
    """A confidential client registered straight in storage."""
    return app.context.storage.oauth_clients.create(
        client_id=secrets.token_urlsafe(16), name=name, type="confidential", redirect_uris=[REDIRECT_URI],
        post_logout_redirect_uris=[LOGOUT_URI], grant_types=["authorization_code", "refresh_token"],
        scopes=list(scopes), id_token_signed_response_alg="RS256", first_party=first_party,
        secret_hash=hash_code(SECRET))


def authorize_params(client, **extra: str) -> dict[str, str]:
    params = {"response_type": "code", "client_id": client.client_id, "redirect_uri": REDIRECT_URI,
              "scope": "openid email", "state": "st-" + secrets.token_hex(4), "nonce": "n-1",
              "code_challenge": CHALLENGE, "code_challenge_method": "S256"}
    params.update(extra)
    return {k: v for k, v in params.items() if v is not None}


def hidden(text: str, name: str) -> str:
    """The value of the form field ``name`` in a page."""
    found = re.search(rf'name="{re.escape(name)}" value="([^"]*)"', text)
    assert found, f"no field {name} in the page"
    return html.unescape(found.group(1))


def redirect_params(result) -> dict[str, str]:
    """The query of a redirect to the client."""
    location = result.headers.get("location")
    assert location and location.startswith(REDIRECT_URI), (result.status, location, result.text[:400])
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


@dataclass
class Browser:
    """Falcon's test client with a cookie jar (what a browser sends to ``/oauth``)."""

    client: Any
    cookies: dict[str, str] = field(default_factory=dict)
    address: str = "198.51.100.20"
    last: Any = None

    def request(self, method: str, path: str, **kwargs):
        result = self.client.simulate_request(method, path, cookies=dict(self.cookies),
                                              remote_addr=self.address, **kwargs)
        for name, cookie in result.cookies.items():
            if cookie.value and not (cookie.max_age == 0 or (cookie.expires and cookie.expires.year < 2000)):
                self.cookies[name] = cookie.value
            else:
                self.cookies.pop(name, None)
        self.last = result
        return result

    def authorize(self, params: dict[str, str]):
        return self.request("GET", AUTHORIZE, query_string=urlencode(params))

    def post(self, path: str, fields: dict[str, str], **kwargs):
        return self.request("POST", path, body=urlencode(fields),
                            headers={"Content-Type": "application/x-www-form-urlencoded", **kwargs.pop("headers", {})},
                            **kwargs)

    def submit(self, page, action: str, **fields: str):
        """Post the page's form ``action`` (``login``, ``code``, ``consent``) with its hidden fields."""
        text = page.text
        carried = {"csrf_token": hidden(text, "csrf_token"), "request": hidden(text, "request")}
        if action == "code":
            carried["mfa_token"] = hidden(text, "mfa_token")
        if action == "consent":
            carried["fresh"] = hidden(text, "fresh")
        return self.post(f"{AUTHORIZE}/{action}", {**carried, **fields})

    def sign_in(self, params: dict[str, str], email: str, password: str):
        page = self.authorize(params)
        assert page.status_code == 200 and 'action="/oauth/authorize/login"' in page.text, page.text[:500]
        return self.submit(page, "login", email=email, password=password)
