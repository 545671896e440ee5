"""A web application of its own that signs its users in with Locky (OpenID Connect).

It shares nothing with Locky but a registered client: it never sees a password. It uses
Authlib's OAuth 2 client (``authlib.integrations.requests_client.OAuth2Session``), the
way any Python application would with any OpenID provider:

- ``GET /login``: reads Locky's discovery document, sends the browser to the
  authorization endpoint (code flow, PKCE S256, ``state`` and ``nonce`` kept in this
  app's session);
- ``GET /callback``: checks ``state``, exchanges the code (with the PKCE verifier and the
  client secret) and validates the ID token: its signature against the keys of Locky's
  JWKS (read again once when a key id is unknown: a key rotated in), ``iss``, ``aud``,
  ``exp``, ``nonce`` and ``at_hash`` (Authlib's ``CodeIDToken``);
- ``GET /``: the signed-in user's name, email and groups (from the ID token);
- ``POST /logout``: forgets this app's session and sends the browser to Locky's
  end-session endpoint, which ends the Locky sign-in and comes back to ``/``.

Run it (Locky on :8080, the client registered with redirect URI
``http://127.0.0.1:8000/callback`` and post-logout URI ``http://127.0.0.1:8000/``)::

    LOCKY_URL=http://127.0.0.1:8080 OIDC_CLIENT_ID=... OIDC_CLIENT_SECRET=... python examples/oidc-web-app/app.py

Settings: ``LOCKY_URL`` (Locky's issuer: its ``LOCKY_PUBLIC_URL``), ``OIDC_CLIENT_ID``,
``OIDC_CLIENT_SECRET``, ``APP_URL`` (this app's own address, default
``http://127.0.0.1:8000``). The sessions live in this process's memory: a real
deployment keeps them in its own session store.
"""

from __future__ import annotations

import html
import json
import os
import secrets
import sys
import threading
import urllib.parse
from http.cookies import SimpleCookie
from wsgiref.simple_server import WSGIRequestHandler, make_server

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

SCOPE = "openid profile email groups"
COOKIE = "app_session"


class Locky:
    """What this app knows of the provider: its discovery document and its keys."""

    def __init__(self, issuer: str, client_id: str, client_secret: str, app_url: str):
        self.issuer, self.client_id, self.client_secret = issuer.rstrip("/"), client_id, client_secret
        self.redirect_uri = app_url.rstrip("/") + "/callback"
        self.post_logout_uri = app_url.rstrip("/") + "/"
        self._metadata: dict | None = None
        self._keys: KeySet | None = None
        self._lock = threading.Lock()

    def metadata(self) -> dict:
        if self._metadata is None:
            answer = requests.get(self.issuer + "/.well-known/openid-configuration", timeout=10)
            answer.raise_for_status()
            metadata = answer.json()
            if metadata["issuer"] != self.issuer:  # OpenID Connect Discovery 1.0 §4.3
                raise RuntimeError(f"discovery names issuer {metadata['issuer']!r}, not {self.issuer!r}")
            self._metadata = metadata
        return self._metadata

    def keys(self, refresh: bool = False) -> KeySet:
        with self._lock:
            if self._keys is None or refresh:
                answer = requests.get(self.metadata()["jwks_uri"], timeout=10)
                answer.raise_for_status()
                self._keys = KeySet.import_key_set(answer.json())
            return self._keys

    def session(self, **kwargs) -> OAuth2Session:
        return OAuth2Session(self.client_id, self.client_secret, scope=SCOPE, redirect_uri=self.redirect_uri,
                             code_challenge_method="S256", token_endpoint_auth_method="client_secret_basic",
                             **kwargs)

    def id_token_claims(self, token: dict, nonce: str) -> dict:
        """The ID token's claims, once its signature and claims are valid (else raises)."""
        algorithms = self.metadata().get("id_token_signing_alg_values_supported") or ["RS256"]
        registry = JWSRegistry(algorithms=algorithms)
        try:
            decoded = jwt.decode(token["id_token"], self.keys(), registry=registry)
        except InvalidKeyIdError:  # signed with a key rotated in since the keys were read
            decoded = jwt.decode(token["id_token"], self.keys(refresh=True), registry=registry)
        claims = CodeIDToken(decoded.claims, decoded.header,
                             {"iss": {"essential": True, "value": self.issuer},
                              "aud": {"essential": True, "value": self.client_id}},
                             {"nonce": nonce, "client_id": self.client_id, "access_token": token["access_token"]})
        claims.validate(leeway=60)
        return dict(claims)


class App:
    """The WSGI application: four pages and an in-memory session per browser."""

    def __init__(self, locky: Locky):
        self.locky = locky
        self.sessions: dict[str, dict] = {}

    def __call__(self, environ, start_response):
        path, method = environ.get("PATH_INFO", "/"), environ["REQUEST_METHOD"]
        cookie = SimpleCookie(environ.get("HTTP_COOKIE", ""))
        sid = cookie[COOKIE].value if COOKIE in cookie and cookie[COOKIE].value in self.sessions else None
        if sid is None:
            sid = secrets.token_urlsafe(32)
            self.sessions[sid] = {}
        session = self.sessions[sid]
        routes = {("GET", "/"): self.home, ("GET", "/login"): self.login, ("GET", "/callback"): self.callback,
                  ("POST", "/logout"): self.logout}
        handler = routes.get((method, path))
        if handler is None:
            status, headers, body = "404 Not Found", [], page("Not found", "<p>No such page.</p>")
        else:
            status, headers, body = handler(environ, session)
        headers = [("Set-Cookie", f"{COOKIE}={sid}; HttpOnly; SameSite=Lax; Path=/"),
                   ("Cache-Control", "no-store"), *headers]
        if body is not None:
            headers.append(("Content-Type", "text/html; charset=utf-8"))
        start_response(status, headers)
        return [body.encode() if body is not None else b""]

    def home(self, environ, session):
        user = session.get("user")
        if not user:
            return "200 OK", [], page("Reports", '<p>You are not signed in.</p><p><a href="/login">Sign in with Locky</a></p>')
        groups = "".join(f"<li>{html.escape(g)}</li>" for g in user.get("groups", [])) or "<li>(none)</li>"
        return "200 OK", [], page("Reports", (
            f'<p>Signed in as <strong id="name">{html.escape(user.get("name", ""))}</strong>'
            f' (<span id="email">{html.escape(user.get("email", ""))}</span>).</p>'
            f'<h2>Your groups</h2><ul id="groups">{groups}</ul>'
            '<form method="post" action="/logout"><button type="submit">Sign out</button></form>'))

    def login(self, environ, session):
        metadata = self.locky.metadata()
        session.update(state=generate_token(24), nonce=generate_token(24), verifier=generate_token(48))
        url, _ = self.locky.session().create_authorization_url(
            metadata["authorization_endpoint"], state=session["state"], code_verifier=session["verifier"],
            nonce=session["nonce"])
        return "302 Found", [("Location", url)], None

    def callback(self, environ, session):
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        if "error" in query:
            return "400 Bad Request", [], page("Not signed in", f"<p>Locky said: {html.escape(query['error'][0])}.</p>")
        state, nonce, verifier = session.pop("state", None), session.pop("nonce", None), session.pop("verifier", None)
        if not state:
            return "400 Bad Request", [], page("Not signed in", '<p>No sign-in was started here. <a href="/login">Start again</a>.</p>')
        here = self.locky.redirect_uri + "?" + environ.get("QUERY_STRING", "")
        try:
            # fetch_token compares the answer's state with ours before it sends the code.
            token = self.locky.session(state=state).fetch_token(
                self.locky.metadata()["token_endpoint"], authorization_response=here, code_verifier=verifier,
                state=state)
            claims = self.locky.id_token_claims(token, nonce)
        except (JoseError, ValueError, KeyError, requests.RequestException) as error:
            return "400 Bad Request", [], page("Not signed in", f"<p>The sign-in failed: {html.escape(type(error).__name__)}.</p>")
        except Exception as error:  # Authlib's OAuth errors (invalid_grant, mismatching state)
            return "400 Bad Request", [], page("Not signed in", f"<p>The sign-in failed: {html.escape(str(error))}.</p>")
        session["user"] = {"sub": claims["sub"], "name": claims.get("name"), "email": claims.get("email"),
                           "groups": claims.get("groups", [])}
        session["id_token"] = token["id_token"]
        return "302 Found", [("Location", "/")], None

    def logout(self, environ, session):
        id_token = session.get("id_token")
        session.clear()
        if not id_token:
            return "302 Found", [("Location", "/")], None
        end_session = self.locky.metadata()["end_session_endpoint"]
        query = urllib.parse.urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": self.locky.post_logout_uri,
                                        "state": generate_token(16)})
        return "302 Found", [("Location", f"{end_session}?{query}")], None


def page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
            f"<body><h1>{html.escape(title)}</h1>{body}</body></html>")


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write("%s\n" % (format % args))


def main() -> int:
    app_url = os.environ.get("APP_URL", "http://127.0.0.1:8000")
    locky = Locky(os.environ["LOCKY_URL"], os.environ["OIDC_CLIENT_ID"], os.environ["OIDC_CLIENT_SECRET"], app_url)
    parts = urllib.parse.urlsplit(app_url)
    with make_server(parts.hostname, parts.port or 80, App(locky), handler_class=QuietHandler) as server:
        print(json.dumps({"listening": app_url}), flush=True)
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
