"""``locky.client`` (docs/http/tokens.md): verifying Locky's access tokens in other applications.

Unit tests run the verifier against a tiny issuer served by ``http.server`` in a thread
(metadata and JWKS, every request counted), with keys made by ``cryptography``: ES256,
EdDSA and RS256. End-to-end tests run it, and the example application of
``examples/token-verifier-app``, against a real ``locky serve``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import os
import subprocess
import sys
import threading
import time
import uuid
import wsgiref.util
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import falcon
import falcon.testing
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from locky.client import (
    FalconMiddleware, InvalidToken, TokenRequired, TokenVerifier, VerifierError, bearer_token, wsgi_app,
)

EXAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples" / "token-verifier-app"
ALGORITHMS = ("ES256", "EdDSA", "RS256")


# -- a fake issuer ---------------------------------------------------------------------


class SigningKey:
    """A private key of ``algorithm`` and its public JWK."""

    def __init__(self, algorithm: str, kid: str | None = None):
        self.algorithm = algorithm
        self.kid = kid or uuid.uuid4().hex
        if algorithm == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif algorithm == "EdDSA":
            self.private = ed25519.Ed25519PrivateKey.generate()
            jwk = jwt.algorithms.OKPAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwk = {**jwk, "kid": self.kid, "alg": algorithm, "use": "sig"}

    @property
    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: dict[str, Any], **headers: Any) -> str:
        return jwt.encode(claims, self.private, algorithm=self.algorithm, headers={"kid": self.kid, **headers})


class Issuer:
    """An HTTP server answering the metadata and the JWKS; ``hits`` counts requests by path."""

    def __init__(self):
        self.hits: Counter[str] = Counter()
        self.keys: list[dict[str, Any]] = []
        self.metadata_override: dict[str, Any] | None = None
        self.jwks_headers: dict[str, str] = {}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                issuer.hits[self.path] += 1
                if self.path == "/.well-known/oauth-authorization-server":
                    self.answer(200, issuer.metadata)
                elif self.path == "/.well-known/jwks.json":
                    self.answer(200, {"keys": list(issuer.keys)}, issuer.jwks_headers)
                elif self.path == "/moved":
                    self.send_response(302)
                    self.send_header("Location", issuer.url + "/.well-known/jwks.json")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self.answer(404, {"title": "Not Found"})

            def answer(self, status, body, headers=None):
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def metadata(self) -> dict[str, Any]:
        if self.metadata_override is not None:
            return self.metadata_override
        return {
            "issuer": self.url,
            "jwks_uri": self.url + "/.well-known/jwks.json",
            "token_endpoint": self.url + "/v1/public/users/login",
            "grant_types_supported": ["password", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
        }

    @property
    def jwks_fetches(self) -> int:
        return self.hits["/.well-known/jwks.json"]

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"sub": str(uuid.uuid4()), "sid": str(uuid.uuid4()), "iat": now, "nbf": now, "exp": now + 900,
                  "jti": uuid.uuid4().hex, "iss": self.url, "aud": "locky", "typ": "access"}
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer():
    server = Issuer()
    yield server
    server.close()


@pytest.fixture(params=ALGORITHMS)
def key(request, issuer) -> SigningKey:
    signing = SigningKey(request.param)
    issuer.keys.append(signing.jwk)
    return signing


@pytest.fixture
def es_key(issuer) -> SigningKey:
    signing = SigningKey("ES256")
    issuer.keys.append(signing.jwk)
    return signing


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, Any], claims: dict[str, Any], sign=lambda signing_input: b"") -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64(sign(signing_input.encode()))}"


def refused(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        verifier.verify(token)
    assert token not in str(caught.value) and isinstance(caught.value, ValueError)
    return caught.value.reason


# -- verification --------------------------------------------------------------------------


def test_a_good_token_passes(issuer, key):
    verifier = TokenVerifier(issuer.url)
    claims = issuer.claims()
    assert verifier.verify(key.sign(claims)) == claims
    assert verifier.issuer == issuer.url and verifier.key_ids == [key.kid]
    # Keys are cached: more tokens, no more requests.
    for _ in range(5):
        verifier.verify(key.sign(issuer.claims()))
    assert issuer.hits == {"/.well-known/oauth-authorization-server": 1, "/.well-known/jwks.json": 1}


def test_the_constructor_makes_no_request(issuer, es_key):
    TokenVerifier(issuer.url + "/")
    assert issuer.hits == {}


#: Times relative to when the test runs (not when pytest collects it: a long run would
#: otherwise turn "in ten minutes" into the past): a number is seconds from now.
RELATIVE = ("exp", "nbf", "iat")


@pytest.mark.parametrize(("changes", "reason"), [
    ({"exp": -60}, "expired"),
    ({"nbf": 600}, "not yet valid"),
    ({"iat": 600}, "not yet valid"),
    ({"iss": "https://elsewhere.example.com"}, "wrong issuer"),
    ({"aud": "another-app"}, "wrong audience"),
    ({"typ": "refresh"}, "not an access token"),
    ({"typ": None}, "missing claim typ"),
    ({"exp": None}, "missing claim exp"),
    ({"nbf": None}, "missing claim nbf"),
    ({"aud": None}, "missing claim aud"),
    ({"sub": None}, "missing claim sub"),
])
def test_bad_claims_are_refused(issuer, key, changes, reason):
    now = int(time.time())
    changes = {k: now + v if k in RELATIVE and v is not None else v for k, v in changes.items()}
    verifier = TokenVerifier(issuer.url)
    assert refused(verifier, key.sign(issuer.claims(**changes))) == reason


def test_leeway_and_audience_are_settings(issuer, es_key):
    token = es_key.sign(issuer.claims(exp=int(time.time()) - 3, aud="reports"))
    assert refused(TokenVerifier(issuer.url, audience="reports", leeway=0), token) == "expired"
    assert TokenVerifier(issuer.url, audience="reports", leeway=30).verify(token)["aud"] == "reports"
    assert refused(TokenVerifier(issuer.url, leeway=30), token) == "wrong audience"


def test_a_bad_signature_is_refused(issuer, es_key):
    verifier = TokenVerifier(issuer.url)
    token = es_key.sign(issuer.claims())
    header, payload, signature = token.split(".")
    forged = b64(json.dumps({**issuer.claims(), "sub": "someone-else"}).encode())
    assert refused(verifier, f"{header}.{forged}.{signature}") == "bad signature"
    # Signed by another key under a published kid.
    impostor = SigningKey("ES256", kid=es_key.kid)
    assert refused(verifier, impostor.sign(issuer.claims())) == "bad signature"


@pytest.mark.parametrize("garbage", ["", "not.a.jwt", "a.b", "x" * 9000, "eyJhbGciOiJFUzI1NiJ9..", "...."])
def test_malformed_tokens_are_refused(issuer, es_key, garbage):
    verifier = TokenVerifier(issuer.url)
    with pytest.raises(InvalidToken):
        verifier.verify(garbage)


def test_alg_none_is_refused(issuer, es_key):
    verifier = TokenVerifier(issuer.url)
    for alg in ("none", "None", "NONE"):
        token = hand_made({"alg": alg, "typ": "JWT", "kid": es_key.kid}, issuer.claims())
        assert refused(verifier, token) == "algorithm not allowed"


@pytest.mark.parametrize("hmac_alg", ["HS256", "HS384", "HS512"])
def test_hmac_signed_with_the_public_key_is_refused(issuer, hmac_alg):
    """Algorithm confusion: the public key's bytes used as an HMAC secret."""
    rsa_key = SigningKey("RS256")
    issuer.keys.append(rsa_key.jwk)
    verifier = TokenVerifier(issuer.url)
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[hmac_alg]
    for secret in (rsa_key.public_pem, json.dumps(rsa_key.jwk).encode()):
        token = hand_made({"alg": hmac_alg, "typ": "JWT", "kid": rsa_key.kid}, issuer.claims(),
                          lambda data: hmac.new(secret, data, digest).digest())
        assert refused(verifier, token) == "algorithm not allowed"


def test_a_key_verifies_only_with_its_own_algorithm(issuer):
    """An RS256 key does not verify a PS256 token (same key type, other alg)."""
    rsa_key = SigningKey("RS256")
    issuer.keys.append(rsa_key.jwk)
    verifier = TokenVerifier(issuer.url)
    token = jwt.encode(issuer.claims(), rsa_key.private, algorithm="PS256", headers={"kid": rsa_key.kid})
    assert refused(verifier, token) == "algorithm not allowed"


def test_tokens_without_kid_or_with_crit_are_refused(issuer, es_key):
    verifier = TokenVerifier(issuer.url)
    no_kid = jwt.encode(issuer.claims(), es_key.private, algorithm="ES256")
    assert refused(verifier, no_kid) == "no key id"
    for crit in (["x-locky-test"], ["exp"]):
        token = es_key.sign(issuer.claims(), crit=crit, **{"x-locky-test": True})
        assert refused(verifier, token) in ("unsupported critical header", "malformed token")


def test_embedded_and_remote_keys_in_headers_are_ignored(issuer, es_key):
    """``jwk``, ``jku``, ``x5u`` headers are never used nor fetched."""
    verifier = TokenVerifier(issuer.url)
    verifier.verify(es_key.sign(issuer.claims()))
    attacker = SigningKey("ES256")
    before = Counter(issuer.hits)
    remote = {"jku": issuer.url + "/attacker/jwks.json", "x5u": issuer.url + "/attacker/cert.pem"}
    with_jwk = attacker.sign(issuer.claims(), jwk=attacker.jwk, **remote)
    assert refused(verifier, with_jwk) == "unknown key"
    # Even under the published kid: only the published key counts.
    under_kid = jwt.encode(issuer.claims(), attacker.private, algorithm="ES256",
                           headers={"kid": es_key.kid, "jwk": attacker.jwk, **remote})
    assert refused(verifier, under_kid) == "bad signature"
    assert not any(path.startswith("/attacker") for path in issuer.hits)
    assert issuer.hits - before == Counter({"/.well-known/jwks.json": 1})  # the unknown kid, once


# -- keys: unknown kids, rotation, caching -------------------------------------------------


def test_unknown_kid_refetches_once_per_interval(issuer, es_key):
    verifier = TokenVerifier(issuer.url)
    verifier.verify(es_key.sign(issuer.claims()))
    assert issuer.jwks_fetches == 1
    stranger = SigningKey("ES256")
    assert refused(verifier, stranger.sign(issuer.claims())) == "unknown key"
    assert issuer.jwks_fetches == 2  # one refetch
    assert refused(verifier, stranger.sign(issuer.claims())) == "unknown key"
    other = SigningKey("ES256")
    assert refused(verifier, other.sign(issuer.claims())) == "unknown key"
    assert issuer.jwks_fetches == 2  # a second unknown kid within the interval: no refetch
    verifier.verify(es_key.sign(issuer.claims()))  # known keys keep working
    assert issuer.jwks_fetches == 2


def test_the_refetch_interval_passes(issuer, es_key):
    now = [1000.0]
    verifier = TokenVerifier(issuer.url, min_refetch_interval=60, clock=lambda: now[0])
    verifier.verify(es_key.sign(issuer.claims()))
    stranger = SigningKey("ES256")
    refused(verifier, stranger.sign(issuer.claims()))
    refused(verifier, stranger.sign(issuer.claims()))
    assert issuer.jwks_fetches == 2
    now[0] += 61
    issuer.keys.append(stranger.jwk)
    assert verifier.verify(stranger.sign(issuer.claims()))["iss"] == issuer.url
    assert issuer.jwks_fetches == 3


def test_a_rotated_key_is_fetched_and_accepted(issuer, key):
    verifier = TokenVerifier(issuer.url)
    old_token = key.sign(issuer.claims())
    verifier.verify(old_token)
    rotated = SigningKey(key.algorithm)
    issuer.keys.insert(0, rotated.jwk)  # the new active key beside the retired one
    assert verifier.verify(rotated.sign(issuer.claims()))["typ"] == "access"
    assert issuer.jwks_fetches == 2
    verifier.verify(old_token)  # tokens of the retired key stay valid
    for _ in range(3):
        verifier.verify(rotated.sign(issuer.claims()))
    assert issuer.jwks_fetches == 2


def test_keys_are_refreshed_after_the_cache_ttl(issuer, es_key):
    now = [0.0]
    verifier = TokenVerifier(issuer.url, cache_ttl=300, clock=lambda: now[0])
    token = es_key.sign(issuer.claims())
    verifier.verify(token)
    now[0] = 299
    verifier.verify(token)
    assert issuer.jwks_fetches == 1
    now[0] = 301
    issuer.keys.clear()  # the key was withdrawn
    issuer.keys.append(SigningKey("ES256").jwk)
    assert refused(verifier, token) == "unknown key"
    assert issuer.jwks_fetches == 2


def test_cache_control_max_age_shortens_the_cache(issuer, es_key):
    now = [0.0]
    issuer.jwks_headers = {"Cache-Control": "public, max-age=120"}
    verifier = TokenVerifier(issuer.url, cache_ttl=300, clock=lambda: now[0])
    token = es_key.sign(issuer.claims())
    verifier.verify(token)
    now[0] = 121
    verifier.verify(token)
    assert issuer.jwks_fetches == 2


def test_a_failed_refresh_keeps_the_keys_held(issuer, es_key):
    now = [0.0]
    verifier = TokenVerifier(issuer.url, cache_ttl=300, clock=lambda: now[0])
    token = es_key.sign(issuer.claims())
    verifier.verify(token)
    issuer.keys.clear()  # JWKS without a usable key: a refresh fails
    now[0] = 301
    assert verifier.verify(token)["sub"]
    assert issuer.jwks_fetches == 2
    verifier.verify(token)  # within the backoff: no new request
    assert issuer.jwks_fetches == 2


def test_concurrent_unknown_kids_refetch_once(issuer, es_key):
    verifier = TokenVerifier(issuer.url)
    verifier.verify(es_key.sign(issuer.claims()))
    rotated = SigningKey("ES256")
    issuer.keys.append(rotated.jwk)
    strangers = [SigningKey("ES256") for _ in range(4)]
    tokens = [rotated.sign(issuer.claims()) for _ in range(8)] + [s.sign(issuer.claims()) for s in strangers]
    results: list[Any] = []

    def run(token):
        try:
            results.append(verifier.verify(token)["sub"])
        except InvalidToken as error:
            results.append(error.reason)

    threads = [threading.Thread(target=run, args=(t,)) for t in tokens * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert issuer.jwks_fetches == 2
    assert results.count("unknown key") == 12 and len(results) == 36


# -- the issuer itself -----------------------------------------------------------------------


def test_metadata_naming_another_issuer_stops_the_verifier(issuer, es_key):
    issuer.metadata_override = {**issuer.metadata, "issuer": "https://locky.example.com"}
    verifier = TokenVerifier(issuer.url)
    token = es_key.sign(issuer.claims())
    with pytest.raises(VerifierError, match="names the issuer 'https://locky.example.com'"):
        verifier.verify(token)
    assert issuer.jwks_fetches == 0


def test_a_trailing_slash_is_not_a_mismatch(issuer, es_key):
    issuer.metadata_override = {**issuer.metadata, "issuer": issuer.url + "/"}
    verifier = TokenVerifier(issuer.url)
    assert verifier.verify(es_key.sign(issuer.claims(iss=issuer.url + "/")))["sub"]
    # ... but a token's iss is compared exactly with the metadata's issuer.
    assert refused(verifier, es_key.sign(issuer.claims())) == "wrong issuer"


def test_an_hmac_locky_publishes_no_key_and_the_verifier_says_so(issuer):
    """Locky with LOCKY_JWT_ALGORITHM=HS256 answers ``{"keys": []}``."""
    verifier = TokenVerifier(issuer.url)
    token = hand_made({"alg": "HS256", "typ": "JWT", "kid": "x"}, issuer.claims(),
                      lambda data: hmac.new(b"s" * 32, data, hashlib.sha256).digest())
    with pytest.raises(VerifierError, match="no public signing key.*HS256"):
        verifier.verify(SigningKey("ES256").sign(issuer.claims()))
    assert refused(verifier, token) == "algorithm not allowed"  # decided before any key is needed


def test_secret_and_private_jwks_are_ignored(issuer):
    issuer.keys.append({"kty": "oct", "kid": "hmac", "alg": "HS256", "k": b64(b"s" * 32)})
    private = SigningKey("ES256")
    issuer.keys.append({**private.jwk, "d": "AAAA"})
    issuer.keys.append({**SigningKey("ES256").jwk, "use": "enc"})
    with pytest.raises(VerifierError, match="no public signing key"):
        TokenVerifier(issuer.url).verify(private.sign(issuer.claims()))


def test_an_unreachable_issuer_is_a_verifier_error_with_backoff(issuer, es_key):
    url = issuer.url
    issuer.close()
    verifier = TokenVerifier(url, timeout=1)
    with pytest.raises(VerifierError, match="could not be read"):
        verifier.verify(es_key.sign(issuer.claims()))
    started = time.monotonic()
    with pytest.raises(VerifierError):
        verifier.verify(es_key.sign(issuer.claims()))
    assert time.monotonic() - started < 0.5  # the same error, without a new attempt


def test_the_verifier_recovers_after_an_initial_failure(issuer, es_key):
    now = [0.0]
    issuer.keys.clear()
    verifier = TokenVerifier(issuer.url, clock=lambda: now[0])
    token = es_key.sign(issuer.claims())
    with pytest.raises(VerifierError):
        verifier.verify(token)
    issuer.keys.append(es_key.jwk)
    with pytest.raises(VerifierError):
        verifier.verify(token)  # within the backoff
    now[0] = 10
    assert verifier.verify(token)["sub"]


@pytest.mark.parametrize("url", ["ftp://example.com", "file:///etc/passwd", "example.com", "http://example.com",
                                 "https://user:pw@example.com"])
def test_issuer_urls_must_be_https(url):
    with pytest.raises(VerifierError):
        TokenVerifier(url)


def test_http_is_allowed_for_loopback_or_when_asked():
    TokenVerifier("http://localhost:8080")
    TokenVerifier("http://[::1]:8080")
    TokenVerifier("http://locky.internal:8080", allow_http=True)


def test_a_jwks_uri_of_another_scheme_or_a_redirect_is_refused(issuer, es_key):
    issuer.metadata_override = {**issuer.metadata, "jwks_uri": "file:///etc/passwd"}
    with pytest.raises(VerifierError, match="jwks_uri"):
        TokenVerifier(issuer.url).verify(es_key.sign(issuer.claims()))
    issuer.metadata_override = {**issuer.metadata, "jwks_uri": issuer.url + "/moved"}
    with pytest.raises(VerifierError, match="HTTP 302"):
        TokenVerifier(issuer.url).verify(es_key.sign(issuer.claims()))
    assert issuer.jwks_fetches == 0


def test_proxy_variables_of_the_environment_are_not_used(issuer, es_key, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert TokenVerifier(issuer.url).verify(es_key.sign(issuer.claims()))["sub"]


# -- web applications --------------------------------------------------------------------


def test_bearer_token_parsing():
    assert bearer_token("Bearer abc") == "abc" and bearer_token("bearer  abc ") == "abc"
    for bad in (None, "", "Bearer", "Bearer ", "Basic abc", "Token abc", "Bearer a b"):
        with pytest.raises(InvalidToken, match="missing bearer token"):
            bearer_token(bad)


class Whoami:
    def on_get(self, req, resp):
        resp.media = {"sub": req.context.claims["sub"] if req.context.claims else None}


def falcon_client(verifier: TokenVerifier) -> falcon.testing.TestClient:
    app = falcon.App(middleware=[FalconMiddleware(verifier, exempt=("/health", "/public/*"))])
    app.add_route("/whoami", Whoami())
    app.add_route("/health", Whoami())
    app.add_route("/public/info", Whoami())
    return falcon.testing.TestClient(app)


def test_falcon_middleware(issuer, es_key):
    client = falcon_client(TokenVerifier(issuer.url))
    claims = issuer.claims()
    token = es_key.sign(claims)
    ok = client.simulate_get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and ok.json == {"sub": claims["sub"]}

    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer not.a.jwt"},
                    {"Authorization": "Bearer " + es_key.sign(issuer.claims(typ="refresh"))},
                    {"Authorization": "Bearer " + es_key.sign(issuer.claims(exp=int(time.time()) - 60))}):
        result = client.simulate_get("/whoami", headers=headers)
        assert result.status_code == 401, headers
        assert result.headers["www-authenticate"] == "Bearer"
        assert set(result.json) == {"title", "description"}
        assert headers.get("Authorization", "-").split(" ")[-1] not in result.text
    assert client.simulate_get("/no/such/route").status_code == 401  # no route discovery without a token

    assert client.simulate_get("/health").json == {"sub": None}
    assert client.simulate_get("/public/info").status_code == 200
    assert client.simulate_get("/public").status_code == 401


def test_falcon_middleware_answers_503_when_locky_cannot_be_asked(issuer, es_key):
    issuer.keys.clear()  # an HMAC Locky: no key
    client = falcon_client(TokenVerifier(issuer.url))
    result = client.simulate_get("/whoami", headers={"Authorization": "Bearer " + es_key.sign(issuer.claims())})
    assert result.status_code == 503
    assert client.simulate_get("/health").status_code == 200


def call_wsgi(app, path: str, authorization: str | None = None) -> tuple[str, dict[str, str], bytes]:
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": "GET"}
    wsgiref.util.setup_testing_defaults(environ)
    if authorization is not None:
        environ["HTTP_AUTHORIZATION"] = authorization
    answer: dict[str, Any] = {}

    def start_response(status, headers, exc_info=None):
        answer["status"], answer["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], body


def hello(environ, start_response):
    body = json.dumps({"claims": environ["locky.claims"], "has_token": bool(environ["locky.token"])}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


def test_wsgi_wrapper(issuer, es_key):
    verifier = TokenVerifier(issuer.url)
    app = wsgi_app(hello, verifier, exempt=("/health",))
    assert isinstance(app, TokenRequired)
    claims = issuer.claims()
    status, _, body = call_wsgi(app, "/reports", "Bearer " + es_key.sign(claims))
    assert status == "200 OK" and json.loads(body) == {"claims": claims, "has_token": True}

    refresh = es_key.sign(issuer.claims(typ="refresh"))
    for authorization in (None, "Bearer garbage", "Bearer " + refresh, "Basic x"):
        status, headers, body = call_wsgi(app, "/reports", authorization)
        assert status == "401 Unauthorized"
        assert headers["WWW-Authenticate"] == "Bearer" and headers["Content-Type"] == "application/json"
        assert set(json.loads(body)) == {"title", "description"}
        assert refresh.encode() not in body
    assert json.loads(call_wsgi(app, "/reports", "Bearer " + refresh)[2])["description"] == \
        "Invalid token: not an access token."

    status, _, body = call_wsgi(app, "/health")
    assert status == "200 OK" and json.loads(body) == {"claims": None, "has_token": False}

    issuer.close()
    down = TokenRequired(hello, TokenVerifier(issuer.url, timeout=1))
    assert call_wsgi(down, "/reports", "Bearer " + es_key.sign(claims))[0] == "503 Service Unavailable"


def test_the_module_needs_no_server_code():
    """locky/client.py imports the standard library and PyJWT only (falcon lazily)."""
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('locky_client', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('locky', 'falcon', 'pony', 'casbin', "
        "'marshmallow', 'pluggy', 'orjson', 'apispec')))\n"
    )
    path = Path(__file__).resolve().parent.parent / "locky" / "client.py"
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- against a real locky serve -------------------------------------------------------------

PASSWORD = "verifier-password-1"
ADMIN = "admin@example.com"


def server_env(workdir: Path, **values: str) -> dict[str, str]:
    return {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}",
            "LOCKY_JWT_SECRET": "verifier-test-secret-0123456789-abcdefghij",
            "LOCKY_BCRYPT_ROUNDS": "4", **values}


@pytest.fixture(scope="module")
def no_locky_env():
    """``locky_server`` adds to ``os.environ``: keep a caller's LOCKY_* settings out."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("LOCKY_")]:
            mp.delenv(name)
        yield


def require_jwks(server) -> None:
    status, _, _ = server.request("GET", "/.well-known/jwks.json")
    if status == 404:
        pytest.skip("this locky serve does not publish /.well-known/jwks.json yet (docs/http/tokens.md server side)")


@pytest.fixture(scope="module")
def locky(tmp_path_factory, no_locky_env):
    from support.server import locky_server

    workdir = tmp_path_factory.mktemp("verifier-locky")
    with locky_server(workdir, env=server_env(workdir, LOCKY_ADMIN_EMAILS=ADMIN), workers=1) as server:
        require_jwks(server)
        yield server


def register_and_login(server, email: str) -> dict[str, Any]:
    status, _, user = server.request("POST", "/v1/public/users/register",
                                     {"name": email.split("@")[0] + " tester", "email": email, "password": PASSWORD})
    assert status == 201, user
    status, _, tokens = server.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
    assert status == 200, tokens
    return {"user": user, **tokens}


@pytest.mark.server
def test_real_locky_tokens_verify_offline(locky):
    login = register_and_login(locky, "ada@example.com")
    verifier = TokenVerifier(locky.url)
    claims = verifier.verify(login["access_token"])
    assert claims["sub"] == login["user"]["uuid"] and claims["typ"] == "access"
    assert claims["iss"] == locky.url and claims["aud"] == "locky"
    assert jwt.get_unverified_header(login["access_token"])["kid"] in verifier.key_ids
    assert refused(verifier, login["refresh_token"]) == "not an access token"
    assert refused(TokenVerifier(locky.url, audience="another-app"), login["access_token"]) == "wrong audience"
    metadata = verifier.metadata
    assert metadata["issuer"] == locky.url and metadata["jwks_uri"].startswith(("http://", "https://"))


@pytest.mark.server
def test_real_locky_key_rotation_reaches_the_verifier(locky):
    admin = register_and_login(locky, ADMIN)
    locky.verify(ADMIN)
    status, _, relogin = locky.request("POST", "/v1/public/users/login", {"email": ADMIN, "password": PASSWORD})
    assert status == 200, relogin
    verifier = TokenVerifier(locky.url)
    old = relogin["access_token"]
    verifier.verify(old)
    status, _, body = locky.request("POST", "/v1/private/keys/rotate",
                                    headers={"Authorization": f"Bearer {old}"})
    if status in (404, 405):
        pytest.skip("this locky serve has no POST /v1/private/keys/rotate yet")
    assert status == 200, body
    status, _, fresh = locky.request("POST", "/v1/public/users/login", {"email": ADMIN, "password": PASSWORD})
    assert jwt.get_unverified_header(fresh["access_token"])["kid"] == body["kid"]
    assert verifier.verify(fresh["access_token"])["sub"] == admin["user"]["uuid"]
    assert body["kid"] in verifier.key_ids
    verifier.verify(old)  # signed by the retired key, still valid


@pytest.mark.server
def test_real_locky_with_hmac_has_no_keys(tmp_path, no_locky_env):
    """With HS256 the access tokens are signed with the secret: the JWKS is empty (no
    OAuth client needs ID-token keys yet), and the verifier refuses the HS256 token."""
    from support.server import locky_server

    with locky_server(tmp_path, env=server_env(tmp_path, LOCKY_JWT_ALGORITHM="HS256"), workers=1) as server:
        require_jwks(server)
        status, _, jwks = server.request("GET", "/.well-known/jwks.json")
        assert status == 200 and jwks == {"keys": []}
        login = register_and_login(server, "ada@example.com")
        verifier = TokenVerifier(server.url)
        with pytest.raises(InvalidToken) as caught:  # the HS256 header is refused before any fetch
            verifier.verify(login["access_token"])
        assert caught.value.reason == "algorithm not allowed"
        with pytest.raises(VerifierError, match="no public signing key"):
            verifier.key_ids


@pytest.mark.server
def test_example_app_against_real_locky(locky, monkeypatch):
    """examples/token-verifier-app: offline verification, decisions asked of Locky."""
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    import reports_service

    client = falcon.testing.TestClient(reports_service.create_app(locky.url))

    def auth(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    status, _, login = locky.request("POST", "/v1/public/users/login", {"email": ADMIN, "password": PASSWORD})
    if status == 401:  # the admin is registered by the rotation test when it ran first
        register_and_login(locky, ADMIN)
        locky.verify(ADMIN)
        status, _, login = locky.request("POST", "/v1/public/users/login", {"email": ADMIN, "password": PASSWORD})
    assert status == 200, login
    admin = login["access_token"]
    owner = register_and_login(locky, "owner@example.com")
    bob = register_and_login(locky, "bob@example.com")
    carol = register_and_login(locky, "carol@example.com")

    status, _, role = locky.request("POST", "/v1/private/roles", {
        "name": "analyst", "permissions": [{"resource": "reports", "action": "read"}]}, headers=auth(admin))
    assert status == 201, role
    status, _, group = locky.request("POST", "/v1/private/groups", {"name": "sales"},
                                     headers=auth(owner["access_token"]))
    assert status == 201, group
    status, _, member = locky.request("POST", "/v1/private/members", {
        "group_uuid": group["uuid"], "user_uuid": bob["user"]["uuid"], "role": "analyst"},
        headers=auth(owner["access_token"]))
    assert status == 201, member

    assert client.simulate_get("/").json["service"] == "reports"
    assert client.simulate_get("/health").status_code == 200
    reports = {"group_uuid": group["uuid"]}
    ok = client.simulate_get("/reports", params=reports, headers=auth(bob["access_token"]))
    assert ok.status_code == 200, ok.text
    assert ok.json["reader"] == bob["user"]["uuid"] and ok.json["reports"]
    assert client.simulate_get("/reports", params=reports, headers=auth(carol["access_token"])).status_code == 403
    assert client.simulate_get("/reports", params=reports,
                               headers=auth(owner["access_token"])).status_code == 403  # owner, no such permission
    assert client.simulate_get("/reports", headers=auth(bob["access_token"])).status_code == 403  # not globally
    assert client.simulate_get("/reports", headers=auth(admin)).status_code == 200  # admins may do anything
    assert client.simulate_get("/reports", params={"group_uuid": "nope"},
                               headers=auth(bob["access_token"])).status_code == 400

    # Refused offline, without asking Locky: no token, garbage, a refresh token.
    for headers in ({}, auth("not.a.jwt"), auth(bob["refresh_token"])):
        result = client.simulate_get("/reports", params=reports, headers=headers)
        assert result.status_code == 401 and result.headers["www-authenticate"] == "Bearer"

    # Locky's changes take effect at once: a removed membership, a logout.
    status, _, _ = locky.request("DELETE", f"/v1/private/members/{member['id']}", headers=auth(owner["access_token"]))
    assert status == 204
    assert client.simulate_get("/reports", params=reports, headers=auth(bob["access_token"])).status_code == 403
    status, _, _ = locky.request("POST", "/v1/private/users/logout", headers=auth(admin))
    assert status == 204
    logged_out = client.simulate_get("/reports", headers=auth(admin))
    assert logged_out.status_code == 401 and logged_out.headers["www-authenticate"] == "Bearer"


def test_importing_locky_client_loads_none_of_the_server():
    """``locky/__init__.py`` re-exports lazily: an application that only verifies tokens
    imports no Falcon, Pony, Casbin or the rest of the service (cryptography may load bcrypt
    for SSH keys on its own)."""
    code = ("import sys, locky.client; print(sorted({m.split('.')[0] for m in sys.modules}"
            " & {'falcon', 'pony', 'casbin', 'marshmallow', 'pluggy', 'apispec', 'orjson'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- webhook receivers ------------------------------------------------------------------


def documented_receiver(secret: str):
    """The WSGI receiver of docs/clients.md ("Receiving webhooks"), as a reader saves it."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "clients.md").read_text()
    section = page[page.index("## Receiving webhooks"):]
    source = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(source, "<docs/clients.md>", "exec"), namespace)
    namespace["SECRET"] = secret
    return namespace


def deliver(receiver, body: bytes, headers: dict[str, str]) -> tuple[str, bytes]:
    environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(body))}
    wsgiref.util.setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answered = {}
    out = b"".join(receiver(environ, lambda status, headers: answered.setdefault("status", status)))
    return answered["status"], out


def test_verify_signature_raises_on_a_forged_delivery_and_returns_nothing_on_a_good_one():
    from locky.webhooks import signing as webhook_signing
    from locky.client import InvalidSignature, verify_signature

    secret, body = "whsec_" + "k" * 43, b'{"id":"e1","event":"user.registered","data":{}}'
    good = {"Locky-Signature": webhook_signing.header(secret, body)}
    assert verify_signature(secret, good, body) is None
    for headers, sent, reason in (
            ({}, body, "no Locky-Signature header"),
            (good, body.replace(b"e1", b"e2"), "does not match"),
            ({"Locky-Signature": webhook_signing.header("whsec_other", body)}, body, "does not match"),
            ({"Locky-Signature": webhook_signing.header(secret, body, time.time() - 3600)}, body, "seconds")):
        with pytest.raises(InvalidSignature, match=reason) as raised:
            verify_signature(secret, headers, sent)
        assert isinstance(raised.value, ValueError) and raised.value.reason


def test_the_documented_receiver_takes_locky_deliveries_and_refuses_forged_ones(capsys):
    from locky.webhooks import signing as webhook_signing

    secret = "whsec_" + "r" * 43
    namespace = documented_receiver(secret)
    receiver = namespace["receiver"]
    body = b'{"id":"4b1c","event":"user.registered","created_at":"2026-11-22T10:00:00Z","data":{"n":1}}'
    status, _ = deliver(receiver, body, {"Locky-Signature": webhook_signing.header(secret, body)})
    assert status.startswith("204")
    assert "user.registered" in capsys.readouterr().out
    forged = body.replace(b'"n":1', b'"n":2')
    for headers in ({}, {"Locky-Signature": webhook_signing.header(secret, body)},
                    {"Locky-Signature": webhook_signing.header("whsec_guess", forged)}):
        status, text = deliver(receiver, forged, headers)
        assert status.startswith("400"), (headers, status)
        assert text
    assert namespace["seen"] == {"4b1c"}
    assert capsys.readouterr().out == ""  # nothing forged was handled
