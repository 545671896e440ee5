"""The sign-in and consent pages on a real ``locky serve`` (two worker processes), driven
with urllib and a cookie jar as a browser without JavaScript drives them: the forms'
posts may land on another worker than the page (the pages keep no state, and every
worker derives the same keys), and the whole flow ends in tokens and a logout."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import secrets
import urllib.error
import urllib.request
from http.cookiejar import CookieJar
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

pytestmark = pytest.mark.server

ADMIN = "admin@example.com"
PASSWORD = "correct horse battery"
REDIRECT_URI = "http://127.0.0.1:9/callback"
LOGOUT_URI = "http://127.0.0.1:9/signed-out"
VERIFIER = secrets.token_urlsafe(48)
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the test reads each redirect (to the client) itself


class Answer:
    def __init__(self, status: int, headers, body: bytes):
        self.status, self.headers, self.text = status, headers, body.decode(errors="replace")

    def fields(self) -> dict[str, str]:
        return {name: html.unescape(value) for name, value in
                re.findall(r'name="(csrf_token|request|fresh|mfa_token)" value="([^"]*)"', self.text)}

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.headers["Location"]).query).items()}


class Browser:
    def __init__(self, base: str):
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), NoRedirects())

    def open(self, method: str, path: str, form: dict[str, str] | None = None,
             headers: dict[str, str] | None = None) -> Answer:
        data = urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        if data is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            with self.opener.open(request, timeout=30) as response:
                return Answer(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.headers, error.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from support.server import free_port, locky_server

    workdir = tmp_path_factory.mktemp("oauth-pages")
    port = free_port()
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_ADMIN_EMAILS": ADMIN,
           "LOCKY_JWT_SECRET": "oauth-pages-test-secret-0123456789-abcdefghij", "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_PUBLIC_URL": f"http://127.0.0.1:{port}"}
    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("LOCKY_")]}
    try:
        with locky_server(workdir, env=env, workers=2, port=port) as running:
            yield running
    finally:
        os.environ.update(saved)


def test_sign_in_consent_code_tokens_and_logout(server):
    admin = server.sign_up(ADMIN, PASSWORD, verify=True)
    status, _, client = server.request("POST", "/v1/private/oauth/clients", {
        "name": "Server app", "type": "confidential", "redirect_uris": [REDIRECT_URI],
        "post_logout_redirect_uris": [LOGOUT_URI]}, headers=admin)
    assert status == 201, client
    server.sign_up("ada@example.com", PASSWORD)
    browser = Browser(server.url)
    query = urlencode({"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT_URI,
                       "scope": "openid email", "state": "st-9", "nonce": "n-9", "code_challenge": CHALLENGE,
                       "code_challenge_method": "S256", "login_hint": "ada@example.com"})
    page = browser.open("GET", f"/oauth/authorize?{query}")
    assert page.status == 200 and 'value="ada@example.com"' in page.text
    assert "form-action 'self' http://127.0.0.1:9;" in page.headers["Content-Security-Policy"]
    for _ in range(3):  # several posts: with two workers, some land on the other one
        wrong = browser.open("POST", "/oauth/authorize/login",
                             {**page.fields(), "email": "ada@example.com", "password": "not it"})
        assert wrong.status == 401 and "Invalid email or password." in wrong.text
    consent = browser.open("POST", "/oauth/authorize/login",
                           {**wrong.fields(), "email": "ada@example.com", "password": PASSWORD})
    assert consent.status == 200 and 'action="/oauth/authorize/consent"' in consent.text, consent.text[:400]
    done = browser.open("POST", "/oauth/authorize/consent", {**consent.fields(), "decision": "allow"})
    assert done.status == 302 and done.headers["Location"].startswith(REDIRECT_URI + "?")
    answer = done.query()
    assert answer["state"] == "st-9"

    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    tokens = browser.open("POST", "/oauth/token", {"grant_type": "authorization_code", "code": answer["code"],
                                                   "redirect_uri": REDIRECT_URI, "code_verifier": VERIFIER},
                          headers={"Authorization": f"Basic {basic}"})
    assert tokens.status == 200, tokens.text
    body = json.loads(tokens.text)
    # Signed in and consented: the next request gets its code at once.
    again = browser.open("GET", f"/oauth/authorize?{query.replace('st-9', 'st-10')}")
    assert again.status == 302 and again.query()["state"] == "st-10"

    bye = browser.open("GET", "/oauth/logout?" + urlencode({
        "id_token_hint": body["id_token"], "post_logout_redirect_uri": LOGOUT_URI, "state": "out"}))
    assert bye.status == 303 and bye.headers["Location"] == LOGOUT_URI + "?state=out"
    userinfo = browser.open("GET", "/oauth/userinfo", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert userinfo.status == 401
    assert browser.open("GET", f"/oauth/authorize?{query}").status == 200  # the sign-in page again
