"""The authorization-server metadata names where the keys are from the settings, never
from the request's ``Host``, and ``locky.client`` fetches keys only from the issuer's
own origin (issue 31, finding 15).

A metadata document built from ``Host`` and cached publicly let anyone who can reach a
shared cache make it serve a ``jwks_uri`` of their own; a verifier following it would
then trust their keys.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from locky.app import create_app
from locky.client import TokenVerifier, VerifierError
from locky.testing import LockyClient, make_settings
from support.server import free_port

METADATA = "/.well-known/oauth-authorization-server"
JWKS = "/.well-known/jwks.json"
SPOOFED = "attacker.example"


@pytest.fixture
def app_with(tmp_path):
    apps = []

    def make(**values: Any) -> LockyClient:
        app = create_app(make_settings(f"sqlite:///{tmp_path / f'{len(apps)}.sqlite'}", **values))
        apps.append(app)
        return LockyClient(app)

    yield make
    for app in apps:
        app.close()


def metadata_of(client: LockyClient, **request: Any):
    answer = client.simulate_get(METADATA, **request)
    assert answer.status_code == 200, answer.text
    return answer


def public_cache(answer) -> bool:
    return "public" in [part.strip() for part in answer.headers.get("Cache-Control", "").split(",")]


@pytest.mark.parametrize("values, base", [
    ({}, "http://127.0.0.1:8080"),  # the default issuer: http://<LOCKY_HOST>:<LOCKY_PORT>
    ({"host": "auth.internal", "port": 9443}, "http://auth.internal:9443"),
    ({"jwt_issuer": "https://login.example.com/"}, "https://login.example.com"),
    ({"public_url": "https://auth.example.com/locky/"}, "https://auth.example.com/locky"),
    ({"public_url": "https://auth.example.com", "jwt_issuer": "urn:example:locky"}, "https://auth.example.com"),
])
def test_a_spoofed_host_does_not_change_the_urls(app_with, values, base):
    client = app_with(**values)
    for request in ({}, {"host": SPOOFED}, {"host": SPOOFED, "port": 8443, "protocol": "https"},
                    {"headers": {"Host": f"{SPOOFED}:666", "X-Forwarded-Host": SPOOFED}}):
        answer = metadata_of(client, **request)
        document = answer.json
        assert document["jwks_uri"] == base + JWKS, (request, document)
        for name, value in document.items():
            if name.endswith(("_uri", "_endpoint")):
                assert value.startswith(base + "/") and SPOOFED not in value, (request, name, value)
        assert public_cache(answer)  # the same for every caller: a shared cache may keep it


def test_urls_taken_from_the_request_are_never_kept_by_a_shared_cache(app_with):
    """With an issuer that is no URL and no LOCKY_PUBLIC_URL, nothing configured says
    where Locky is: the URLs are the request's own, answered ``no-store``."""
    client = app_with(jwt_issuer="urn:example:locky")
    answer = metadata_of(client, host="locky.test", port=8443, protocol="https")
    assert answer.json["jwks_uri"] == "https://locky.test:8443" + JWKS
    assert answer.json["issuer"] == "urn:example:locky"
    assert answer.headers["Cache-Control"] == "no-store" and not public_cache(answer)


# -- the client --------------------------------------------------------------------------


class Server:
    """Serves ``documents`` by path on 127.0.0.1; ``hits`` counts requests by path."""

    def __init__(self, documents: dict[str, Any] | None = None):
        self.documents = documents or {}
        self.hits: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits[self.path] += 1
                found = server.documents.get(self.path)
                raw = json.dumps(found).encode()
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


class Key:
    def __init__(self):
        self.kid = uuid.uuid4().hex
        self.private = ec.generate_private_key(ec.SECP256R1())
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwks = {"keys": [{**jwk, "kid": self.kid, "alg": "ES256", "use": "sig"}]}

    def token(self, issuer: str) -> str:
        now = int(time.time())
        claims = {"sub": str(uuid.uuid4()), "iat": now, "nbf": now, "exp": now + 600, "iss": issuer,
                  "aud": "locky", "typ": "access", "jti": uuid.uuid4().hex}
        return jwt.encode(claims, self.private, algorithm="ES256", headers={"kid": self.kid})


@pytest.fixture
def servers():
    made: list[Server] = []

    def make() -> Server:
        made.append(Server())
        return made[-1]

    yield make
    for server in made:
        server.close()


def metadata(issuer: str, jwks_uri: str) -> dict[str, Any]:
    return {"issuer": issuer, "jwks_uri": jwks_uri, "token_endpoint": issuer + "/v1/public/users/login"}


@pytest.mark.parametrize("where", ["another port", "another host", "another scheme"])
def test_the_client_refuses_a_jwks_uri_off_the_issuers_origin(servers, where):
    issuer, attacker, key = servers(), servers(), Key()
    attacker.documents[JWKS] = key.jwks  # the attacker's keys, signing the attacker's tokens
    jwks_uri = {
        "another port": attacker.url + JWKS,
        "another host": f"http://localhost:{issuer.port}{JWKS}",
        "another scheme": f"https://127.0.0.1:{issuer.port}{JWKS}",
    }[where]
    issuer.documents[METADATA] = metadata(issuer.url, jwks_uri)
    verifier = TokenVerifier(issuer.url)
    with pytest.raises(VerifierError) as refused:
        verifier.verify(key.token(issuer.url))
    message = str(refused.value)
    assert "jwks_uri" in message and f"not on the issuer's origin http://127.0.0.1:{issuer.port}" in message
    assert attacker.hits == {} and issuer.hits == {METADATA: 1}


def test_the_client_takes_a_jwks_uri_on_the_issuers_origin(servers):
    issuer, key = servers(), Key()
    issuer.documents[JWKS] = key.jwks
    # The same origin spelled another way: scheme and host in capitals, the port as given.
    issuer.documents[METADATA] = metadata(issuer.url, f"HTTP://127.0.0.1:{issuer.port}{JWKS}")
    claims = TokenVerifier(issuer.url).verify(key.token(issuer.url))
    assert claims["iss"] == issuer.url and issuer.hits == {METADATA: 1, JWKS: 1}


def test_a_real_locky_over_http_names_its_own_origin_whatever_host_was_asked(app_with):
    """Locky served on a loopback port (no LOCKY_PUBLIC_URL): a request with a spoofed
    ``Host`` gets the issuer's URLs, and the client verifies Locky's tokens with them."""
    port = free_port()
    client = app_with(host="127.0.0.1", port=port)
    token = client.account("ada@example.com").access_token
    server = make_server("127.0.0.1", port, client.app, handler_class=QuietHandler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", METADATA, headers={"Host": SPOOFED})
        answer = connection.getresponse()
        document = json.loads(answer.read())
        connection.close()
        assert answer.status == 200 and document["jwks_uri"] == f"http://127.0.0.1:{port}{JWKS}", document
        claims = TokenVerifier(f"http://127.0.0.1:{port}").verify(token)
        assert claims["iss"] == f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass
