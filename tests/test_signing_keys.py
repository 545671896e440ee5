"""Tokens that other applications verify (docs/http/tokens.md), through HTTP: the
Falcon test client, and real ``locky serve`` processes where several processes, the
command line or an outside verifier are the point.

- The JWKS (RFC 7517) and the authorization-server metadata (RFC 8414): shapes, cache
  headers, no private member ever; RS256's key (ID tokens) beside the configured
  algorithm's, and only it with an HMAC algorithm; the issuer
  equal to the tokens' ``iss``, absolute URLs, from ``LOCKY_PUBLIC_URL`` when set.
- A token verified with nothing but the JWKS, the way an outside application would
  (PyJWT's ``PyJWKClient`` against a real server).
- Rotation: ``POST /v1/private/keys/rotate`` (admins only; every family, answering the
  configured algorithm's new key, RS256's with HMAC) and ``locky keys rotate``; tokens signed before stay valid, later ones name the new key;
  ``GET /v1/internal/keys``; a retired key leaves the JWKS once its tokens have expired
  (time is moved forward by editing ``retired_at`` in ``locky_signing_keys``);
  ``LOCKY_KEY_ROTATION_DAYS``; a change of algorithm.
- Several processes (and several apps on one database) agree on one active key, and
  follow a rotation made by another within ``ACTIVE_RECHECK`` seconds.
- Introspection (RFC 7662) and revocation (RFC 7009), as JSON and as a form.
- No private key material in any response, log, or unencrypted column; the warning of
  an upgraded database about its users' HS256 tokens, and HS256 still working.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from http.client import HTTPConnection
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlencode, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

import locky_jwt.keys as keys_module
from locky import utcnow
from locky.sealing import SealError, Sealer
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, LockyClient
from locky.testing.databases import run_sql
from support.server import ServerProcess, locky_server

# HS384/HS512 with the 45-byte test secret is below RFC 7518's key size (PyJWT warns).
pytestmark = pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")

JWKS = "/.well-known/jwks.json"
METADATA = "/.well-known/oauth-authorization-server"
KEYS = "/v1/internal/keys"
ROTATE = "/v1/private/keys/rotate"
INTROSPECT = "/v1/internal/tokens/introspect"
REVOKE = "/v1/public/tokens/revoke"
LOGIN = "/v1/public/users/login"
REFRESH = "/v1/public/users/refresh"
LOGOUT = "/v1/private/users/logout"
ME = "/v1/internal/users/me"
FORM = "application/x-www-form-urlencoded"
ISSUER = "http://127.0.0.1:8080"

ASYMMETRIC = ["ES256", "EdDSA", "RS256"]
HMAC = ["HS256", "HS384", "HS512"]
ALGORITHMS = ASYMMETRIC + ["HS256"]
#: Each asymmetric algorithm's key type and its public members (RFC 7518 section 6, RFC 8037).
KEY_TYPES = {"ES256": ("EC", "P-256", {"crv", "x", "y"}), "EdDSA": ("OKP", "Ed25519", {"crv", "x"}),
             "RS256": ("RSA", None, {"n", "e"})}
#: RFC 7638: the members a thumbprint hashes.
THUMBPRINT = {"EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x"), "RSA": ("e", "kty", "n")}
#: JWK members that hold private key material (RFC 7518 6.2.2, 6.3.2, 6.4; RFC 8037).
PRIVATE_MEMBERS = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"}
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
INTROSPECTION_KEYS = {"active", "sub", "username", "token_type", "exp", "iat", "nbf", "jti", "iss", "aud"}


# ---------------------------------------------------------------------------------------
# Everything the tests saw, scanned for private key material after each test
# ---------------------------------------------------------------------------------------

SEEN: list[tuple[str, str]] = []  # (where, text): response bodies, server logs, command output
DATABASES: list[str] = []  # databases besides the test's own whose keys the scan must know


def seen(where: str, text: str) -> None:
    SEEN.append((where, text))


class RecordingClient(LockyClient):
    """``locky.testing``'s client, keeping every response body for the scan."""

    def simulate_request(self, method="GET", path="/", *args, **kwargs):
        result = super().simulate_request(method, path, *args, **kwargs)
        seen(f"{method} {path}", result.text)
        return result


@pytest.fixture
def locky_client(locky_app) -> RecordingClient:
    return RecordingClient(locky_app)


def private_material(database_url: str) -> list[str]:
    """Every stored key's private half, as text that must never show: the sealed column
    value, the base64 lines of its PEM, and its private JWK members."""
    try:
        rows = run_sql(database_url, "SELECT kid, alg, private_key FROM locky_signing_keys")
    except Exception:  # no such table (no app ran), or no such database
        return []
    found = []
    for kid, alg, sealed in rows:
        found.append(sealed)
        pem = Sealer(TEST_SECRET, "signing-keys").open(sealed, kid)
        found += [line for line in pem.splitlines() if line and not line.startswith("-----")]
        private = serialization.load_pem_private_key(pem.encode(), password=None)
        jwk = json.loads(jwt.get_algorithm_by_name(alg).to_jwk(private))
        found += [str(jwk[name]) for name in PRIVATE_MEMBERS if name in jwk]
    return found


def private_members_in(value: Any, where: str) -> list[str]:
    """Private JWK members of any key object (one with ``kty``) in a JSON value."""
    found = []
    if isinstance(value, dict):
        if "kty" in value and PRIVATE_MEMBERS & set(value):
            found.append(f"private members {sorted(PRIVATE_MEMBERS & set(value))} in {where}")
        if "private_key" in value:
            found.append(f"a private_key field in {where}")
        for item in value.values():
            found += private_members_in(item, where)
    elif isinstance(value, list):
        for item in value:
            found += private_members_in(item, where)
    return found


@pytest.fixture(autouse=True)
def no_private_key_material(caplog, locky_database_url):
    """After each test: no response body, log line or command output it saw holds a
    private key: no PEM private key, no private JWK member, nothing of any stored key's
    private half (opened from storage with the test secret)."""
    caplog.set_level(logging.DEBUG, logger="locky")
    start = len(SEEN)
    DATABASES.clear()
    yield
    texts = SEEN[start:] + [("the in-process log", caplog.text)]
    secrets = []
    for url in {locky_database_url, *DATABASES}:
        secrets += private_material(url)
    problems = []
    for where, text in texts:
        if "PRIVATE KEY" in text:
            problems.append(f"a PEM private key in {where}")
        problems += [f"a stored key's private half in {where}" for secret in secrets if secret in text]
        try:
            problems += private_members_in(json.loads(text), where)
        except ValueError:
            pass
    assert not problems, "\n".join(problems[:20])


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def header_of(token: str) -> dict[str, Any]:
    return jwt.get_unverified_header(token)


def kid_of(token: str) -> str | None:
    return header_of(token).get("kid")


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def assert_401(result) -> None:
    assert result.status_code == 401, result.text
    assert result.headers["www-authenticate"] == "Bearer"


def post_token(client, path: str, token: str, *, form: bool, headers: dict[str, str] | None = None, **extra):
    """``{"token": ...}`` as JSON or as an HTML form (RFC 7662 / RFC 7009 clients send forms)."""
    fields = {"token": token, **extra}
    if form:
        return client.simulate_post(path, body=urlencode(fields), headers={"Content-Type": FORM, **(headers or {})})
    return client.simulate_post(path, json=fields, headers=headers or {})


def signer(app):
    """``sign(claims, **headers)`` with the app's own active key (or secret), as only an
    insider could: for tokens whose only fault is a claim the test chose."""
    algorithm = app.context.settings.jwt_algorithm
    keys = app.context.tokens.keys
    if keys is None:
        return lambda claims, **headers: jwt.encode(claims, app.context.settings.jwt_secret, algorithm=algorithm,
                                                    headers=headers or None)
    kid, private = keys.signing_key()
    return lambda claims, **headers: jwt.encode(claims, private, algorithm=algorithm, headers={"kid": kid, **headers})


def utc_text(moment: datetime) -> str:
    """A naive UTC time as the SQLite ``locky_signing_keys`` columns hold it."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def retire_at(database_url: str, kid: str, moment: datetime) -> None:
    """Move time forward for one key: it was retired at ``moment``."""
    run_sql(database_url, "UPDATE locky_signing_keys SET retired_at = %s WHERE kid = %s", utc_text(moment), kid)


def thumbprint(jwk: dict[str, Any]) -> str:
    members = {name: jwk[name] for name in THUMBPRINT[jwk["kty"]]}
    digest = hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def assert_public_jwk(jwk: dict[str, Any], algorithm: str) -> None:
    """An RFC 7517 public JWK of ``algorithm``, usable by PyJWT, with no private member."""
    kty, crv, members = KEY_TYPES[algorithm]
    assert not PRIVATE_MEMBERS & set(jwk), jwk
    assert {"kid", "kty", "alg", "use"} <= set(jwk), jwk
    assert set(jwk) <= {"kid", "kty", "alg", "use", "key_ops"} | members, jwk
    assert members <= set(jwk), jwk
    assert (jwk["kty"], jwk["alg"], jwk["use"]) == (kty, algorithm, "sig")
    if crv:
        assert jwk["crv"] == crv
    if "key_ops" in jwk:  # RFC 7517 4.3: if both are given they must agree
        assert jwk["key_ops"] == ["verify"], jwk
    assert isinstance(jwk["kid"], str) and jwk["kid"] == thumbprint(jwk)  # as the Swagger spec documents
    key = jwt.PyJWK(jwk)
    assert key.algorithm_name == algorithm and key.key_id == jwk["kid"]
    if algorithm == "RS256":
        assert key.key.key_size >= 2048


def assert_cacheable(headers) -> None:
    cache = {part.strip() for part in headers["cache-control"].split(",")}
    assert "public" in cache, cache
    ages = [int(part.split("=", 1)[1]) for part in cache if part.startswith("max-age=")]
    assert len(ages) == 1 and 0 < ages[0] <= 300, cache
    assert "no-store" not in cache


def keys_listing(client, headers) -> list[dict[str, Any]]:
    result = client.simulate_get(KEYS, headers=headers)
    assert result.status_code == 200, result.text
    return result.json["keys"]


def published_kids(client, alg: str | None = None) -> list[str]:
    """The kids the JWKS publishes (of the ``alg`` family only, when given)."""
    return [key["kid"] for key in client.simulate_get(JWKS).json["keys"] if alg is None or key["alg"] == alg]


def of_family(keys: list[dict[str, Any]], alg: str) -> list[dict[str, Any]]:
    """The keys (JWKs or listed keys) of the ``alg`` family."""
    return [key for key in keys if key["alg"] == alg]


@pytest.fixture
def app_client(locky_app_factory):
    """``make(**settings) -> (app, client)``: an app on the test's database."""
    def make(**settings):
        app = locky_app_factory(**settings)
        return app, RecordingClient(app)
    return make


# ---------------------------------------------------------------------------------------
# The JWKS
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_the_jwks_publishes_the_active_public_key(app_client, algorithm):
    app, client = app_client(jwt_algorithm=algorithm)
    account = client.account("ada@example.com")
    result = client.simulate_get(JWKS)  # public: no token
    assert result.status_code == 200
    assert result.headers["content-type"].split(";")[0] in ("application/json", "application/jwk-set+json")
    assert_cacheable(result.headers)
    assert set(result.json) == {"keys"}
    # The configured algorithm's key first, and RS256's (ID tokens) beside it.
    jwk, *others = result.json["keys"]
    assert [other["alg"] for other in others] == ([] if algorithm == "RS256" else ["RS256"])
    for each in (jwk, *others):
        assert_public_jwk(each, each["alg"])
    assert jwk["alg"] == algorithm
    assert kid_of(account.access_token) == kid_of(account.refresh_token) == jwk["kid"]
    # The published key verifies the login's tokens.
    claims = jwt.decode(account.access_token, jwt.PyJWK(jwk), algorithms=[algorithm], audience="locky", issuer=ISSUER)
    assert claims["sub"] == account.uuid


@pytest.mark.parametrize("algorithm", HMAC)
def test_with_an_hmac_algorithm_the_jwks_is_empty_until_a_client_needs_id_token_keys(app_client, algorithm):
    """Access tokens are signed with the secret: nothing to publish, nothing to rotate
    (409). Once the OpenID provider has a client, its ID tokens need a key every relying
    party can check: RS256's."""
    app, client = app_client(jwt_algorithm=algorithm)
    account = client.account("ada@example.com")
    admin = client.account(ADMIN_EMAIL, verified=True)
    result = client.simulate_get(JWKS)
    assert result.status_code == 200
    assert result.json == {"keys": []}
    assert_cacheable(result.headers)
    assert keys_listing(client, account.headers) == []
    refused = client.simulate_post(ROTATE, headers=admin.headers)
    assert refused.status_code == 409, refused.text
    assert "LOCKY_JWT_SECRET" in refused.json["description"]

    made = client.simulate_post("/v1/private/oauth/clients", headers=admin.headers, json={
        "name": "Reports", "type": "confidential", "redirect_uris": ["http://127.0.0.1:9/callback"]})
    assert made.status_code == 201, made.text
    result = client.simulate_get(JWKS)
    [jwk] = result.json["keys"]
    assert_public_jwk(jwk, "RS256")
    assert_cacheable(result.headers)
    assert "kid" not in header_of(account.access_token)
    assert [(key["kid"], key["alg"]) for key in keys_listing(client, account.headers)] == [(jwk["kid"], "RS256")]


# ---------------------------------------------------------------------------------------
# The metadata (RFC 8414)
# ---------------------------------------------------------------------------------------


def assert_metadata(metadata: dict[str, Any], base: str, issuer: str) -> None:
    assert metadata["issuer"] == issuer
    assert metadata["jwks_uri"] == base + JWKS
    # The OpenID provider's endpoints and grants (docs/http/oauth.md; they replaced the login's).
    assert metadata["token_endpoint"] == base + "/oauth/token"
    assert metadata["authorization_endpoint"] == base + "/oauth/authorize"
    assert metadata["introspection_endpoint"] == base + INTROSPECT
    assert metadata["revocation_endpoint"] == base + REVOKE
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token", "client_credentials"]
    assert metadata["token_endpoint_auth_methods_supported"] == ["client_secret_basic", "client_secret_post", "none"]
    for name, value in metadata.items():
        if name.endswith(("_uri", "_endpoint")):
            parts = urlsplit(value)
            assert parts.scheme in ("http", "https") and parts.netloc, (name, value)  # absolute
            assert not parts.query and not parts.fragment, (name, value)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_metadata_names_the_issuer_of_the_tokens_and_absolute_urls(app_client, algorithm):
    app, client = app_client(jwt_algorithm=algorithm)
    token = client.account("ada@example.com").access_token
    result = client.simulate_get(METADATA, host="auth.test", port=8443, protocol="https")
    assert result.status_code == 200
    assert_cacheable(result.headers)
    # No LOCKY_PUBLIC_URL: the URLs come from the issuer (host and port), never from the
    # request's Host (issue 31, finding 15; tests/hardening/test_metadata_origin.py).
    assert_metadata(result.json, ISSUER, ISSUER)
    assert claims_of(token)["iss"] == result.json["issuer"]


@pytest.mark.parametrize("public_url, base", [("https://auth.example.com", "https://auth.example.com"),
                                              ("https://example.com/locky/", "https://example.com/locky")])
def test_metadata_is_built_from_locky_public_url(app_client, public_url, base):
    app, client = app_client(public_url=public_url)
    account = client.account("ada@example.com")
    metadata = client.simulate_get(METADATA, host="internal.test").json
    assert_metadata(metadata, base, base)  # the request's host does not matter
    assert claims_of(account.access_token)["iss"] == base
    # And the tokens check out against that issuer.
    assert client.simulate_get(ME, headers=account.headers).status_code == 200


def test_locky_jwt_issuer_names_the_issuer_and_public_url_the_urls(app_client):
    app, client = app_client(public_url="https://auth.example.com", jwt_issuer="urn:example:locky")
    account = client.account("ada@example.com")
    metadata = client.simulate_get(METADATA).json
    assert_metadata(metadata, "https://auth.example.com", "urn:example:locky")
    assert claims_of(account.access_token)["iss"] == "urn:example:locky"


# ---------------------------------------------------------------------------------------
# Real servers
# ---------------------------------------------------------------------------------------


class Reply:
    def __init__(self, status: int, headers: dict[str, str], text: str):
        self.status, self.headers, self.text = status, {k.lower(): v for k, v in headers.items()}, text

    @property
    def json(self) -> Any:
        return json.loads(self.text) if self.text else None


def call(server: ServerProcess, method: str, path: str, body: Any = None, *, token: str | None = None,
         form: dict[str, str] | None = None) -> Reply:
    """One request over a fresh connection (so every worker serves some), recorded."""
    url = urlsplit(server.url)
    headers = bearer(token) if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if form is not None:
        data, headers["Content-Type"] = urlencode(form).encode(), FORM
    connection = HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        reply = Reply(response.status, dict(response.getheaders()), response.read().decode("utf-8", "replace"))
    finally:
        connection.close()
    seen(f"{method} {path} (server {server.url})", reply.text)
    return reply


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    return {"LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": TEST_SECRET, "LOCKY_BCRYPT_ROUNDS": "4",
            "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL, "LOCKY_LOGIN_MAX_FAILURES_PER_IP": "1000", **extra}


@contextmanager
def serve(workdir: Path, env: dict[str, str], workers: int = 2) -> Iterator[ServerProcess]:
    """A real ``locky serve``; its log joins what the scan reads when it stops."""
    server = None
    try:
        with locky_server(workdir, env, workers=workers) as server:
            yield server
    finally:
        if server is not None:
            seen(f"the log of {server.url}", server.log())


def server_account(server: ServerProcess, email: str, verified: bool = False) -> dict[str, Any]:
    """Register (and prove, when ``verified``) ``email`` and log in: the token body."""
    reply = call(server, "POST", "/v1/public/users/register", {"name": "n", "email": email, "password": PASSWORD})
    assert reply.status == 201, reply.text
    if verified:
        server.verify(email)
    return server_login(server, email)


def server_login(server: ServerProcess, email: str) -> dict[str, Any]:
    reply = call(server, "POST", LOGIN, {"email": email, "password": PASSWORD})
    assert reply.status == 200, reply.text
    return reply.json


def locky_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """``locky ...`` in another process, with the server's environment."""
    result = subprocess.run([sys.executable, "-m", "locky.cli.main", *args], env={**os.environ, **env}, cwd=cwd,
                            capture_output=True, text=True, timeout=120)
    seen(f"locky {' '.join(args)}", result.stdout + result.stderr)
    return result


def wait_for_new_kid(server: ServerProcess, email: str, kid: str, deadline: float) -> float:
    """Log in until eight logins in a row (fresh connections, so both workers) carry
    ``kid``; fail after ``deadline`` (``time.monotonic()``). The time it took."""
    started = time.monotonic()
    while True:
        kids = [kid_of(server_login(server, email)["access_token"]) for _ in range(8)]
        if set(kids) == {kid}:
            return time.monotonic() - started
        assert time.monotonic() < deadline, f"still signing with other keys: {kids}"
        time.sleep(0.5)


@pytest.mark.server
@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_an_outside_application_verifies_tokens_with_the_jwks_alone(tmp_path, locky_database_url, algorithm):
    """PyJWT's ``PyJWKClient``, pointed at the real server's JWKS found through its
    metadata, verifies the server's tokens and nothing else."""
    with serve(tmp_path / "server", server_env(locky_database_url, LOCKY_JWT_ALGORITHM=algorithm)) as server:
        tokens = server_account(server, "ada@example.com")
        metadata = call(server, "GET", METADATA).json
        assert metadata["issuer"] == server.url  # http://<host>:<port> of the running server
        assert_metadata(metadata, server.url, server.url)
        client = jwt.PyJWKClient(metadata["jwks_uri"], cache_keys=False)
        for token, typ in ((tokens["access_token"], "access"), (tokens["refresh_token"], "refresh")):
            key = client.get_signing_key_from_jwt(token)
            assert key.key_id == kid_of(token)
            claims = jwt.decode(token, key, algorithms=[algorithm], audience="locky", issuer=metadata["issuer"])
            assert (claims["sub"], claims["typ"]) == (tokens["user"]["uuid"], typ)
        # A token of a key the server never made, naming the real kid, does not verify.
        claims = claims_of(tokens["access_token"])
        foreign = {"ES256": lambda: ec.generate_private_key(ec.SECP256R1()),
                   "EdDSA": ed25519.Ed25519PrivateKey.generate,
                   "RS256": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)}[algorithm]()
        forged = jwt.encode(claims, foreign, algorithm=algorithm, headers={"kid": kid_of(tokens["access_token"])})
        with pytest.raises(jwt.InvalidSignatureError):
            jwt.decode(forged, client.get_signing_key_from_jwt(forged), algorithms=[algorithm], audience="locky",
                       issuer=metadata["issuer"])
        with pytest.raises(jwt.PyJWKClientError):
            client.get_signing_key_from_jwt(jwt.encode(claims, foreign, algorithm=algorithm,
                                                       headers={"kid": "no-such-key"}))
        # The server agrees with the outside verifier.
        assert call(server, "GET", ME, token=tokens["access_token"]).status == 200
        assert call(server, "GET", ME, token=forged).status == 401


# ---------------------------------------------------------------------------------------
# Rotation
# ---------------------------------------------------------------------------------------


def test_rotation_is_for_admins(locky_client, locky_user):
    assert_401(locky_client.simulate_post(ROTATE))
    result = locky_client.simulate_post(ROTATE, headers=locky_user.headers)
    assert result.status_code == 403, result.text
    # Nothing rotated: one key per family (the configured ES256 and RS256 for ID tokens).
    assert sorted(key["alg"] for key in keys_listing(locky_client, locky_user.headers)) == ["ES256", "RS256"]


@pytest.mark.parametrize("algorithm", HMAC)
def test_rotation_with_an_hmac_algorithm_rotates_the_id_token_key(app_client, algorithm):
    app, client = app_client(jwt_algorithm=algorithm)
    admin = client.account(ADMIN_EMAIL, verified=True)
    made = client.simulate_post("/v1/private/oauth/clients", headers=admin.headers, json={
        "name": "Reports", "type": "confidential", "redirect_uris": ["http://127.0.0.1:9/callback"]})
    assert made.status_code == 201, made.text
    [old] = published_kids(client)
    result = client.simulate_post(ROTATE, headers=admin.headers)
    assert result.status_code == 200, result.text
    assert_public_jwk(result.json, "RS256")
    assert result.json["kid"] != old
    assert sorted(published_kids(client)) == sorted([old, result.json["kid"]])
    assert client.simulate_get(ME, headers=admin.headers).status_code == 200  # the secret still signs


def test_the_key_list_needs_a_token_and_shows_public_information_only(locky_client, locky_user):
    assert_401(locky_client.simulate_get(KEYS))
    key, id_token_key = keys_listing(locky_client, locky_user.headers)  # oldest first
    for each in (key, id_token_key):
        assert set(each) == {"kid", "alg", "created_at", "retired_at"}
        assert RFC3339_UTC.match(each["created_at"]) and each["retired_at"] is None
    assert key["kid"] == kid_of(locky_user.access_token) and key["alg"] == "ES256"
    assert id_token_key["alg"] == "RS256"


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_rotation_over_http(app_client, algorithm):
    app, client = app_client(jwt_algorithm=algorithm)
    admin = client.account(ADMIN_EMAIL, verified=True)
    user = client.account("ada@example.com")
    old_kid = kid_of(user.access_token)

    result = client.simulate_post(ROTATE, headers=admin.headers)
    assert result.status_code == 200, result.text
    jwk = result.json  # the new public key, a bare JWK
    assert_public_jwk(jwk, algorithm)
    assert jwk["kid"] != old_kid

    # Tokens signed before stay valid, access and refresh alike.
    assert client.simulate_get(ME, headers=user.headers).status_code == 200
    refreshed = client.simulate_post(REFRESH, json={"refresh_token": user.refresh_token})
    assert refreshed.status_code == 200, refreshed.text
    # Tokens signed after name the new key.
    assert kid_of(refreshed.json["access_token"]) == kid_of(refreshed.json["refresh_token"]) == jwk["kid"]
    later = client.login("ada@example.com")
    assert kid_of(later["access_token"]) == jwk["kid"]
    assert client.simulate_get(ME, headers=bearer(later["access_token"])).status_code == 200

    # Both keys are listed and published; the old one is retired. The ID-token
    # family (RS256) was rotated too.
    listed = {key["kid"]: key for key in of_family(keys_listing(client, user.headers), algorithm)}
    assert set(listed) == {old_kid, jwk["kid"]}
    assert listed[jwk["kid"]]["retired_at"] is None
    assert RFC3339_UTC.match(listed[old_kid]["retired_at"])
    assert listed[old_kid]["retired_at"] >= listed[old_kid]["created_at"]
    assert listed[jwk["kid"]]["created_at"] >= listed[old_kid]["created_at"]
    published = of_family(client.simulate_get(JWKS).json["keys"], algorithm)
    assert {key["kid"] for key in published} == {old_kid, jwk["kid"]}
    assert next(key for key in published if key["kid"] == jwk["kid"]) == jwk
    for key in published:
        assert_public_jwk(key, algorithm)
    if algorithm != "RS256":
        id_token_keys = of_family(keys_listing(client, user.headers), "RS256")
        assert [key["retired_at"] is None for key in id_token_keys] == [False, True]


def test_a_retired_key_leaves_the_jwks_once_its_tokens_have_expired(app_client, locky_database_url):
    """access_ttl=10 s and refresh_ttl=60 s (the least settings allow): a retired key
    verifies for 60 s + 5 s of leeway. Time moves by editing ``retired_at``."""
    app, client = app_client(access_ttl=10, refresh_ttl=60)
    admin = client.account(ADMIN_EMAIL, verified=True)
    client.register("ada@example.com")
    first, second = client.login("ada@example.com"), client.login("ada@example.com")
    old_kid = kid_of(first["access_token"])
    sign_old = signer(app)

    new_kid = client.simulate_post(ROTATE, headers=admin.headers).json["kid"]
    assert sorted(published_kids(client, "ES256")) == sorted([old_kid, new_kid])

    # Retired 50 s ago: its refresh tokens may still be valid, so it stays.
    retire_at(locky_database_url, old_kid, utcnow() - timedelta(seconds=50))
    time.sleep(1.1)  # the keys are re-read at most once a second (keys.RELOAD_INTERVAL)
    assert sorted(published_kids(client, "ES256")) == sorted([old_kid, new_kid])
    assert client.simulate_get(ME, headers=bearer(first["access_token"])).status_code == 200

    # Retired 70 s ago: no token it signed can be valid any more.
    retire_at(locky_database_url, old_kid, utcnow() - timedelta(seconds=70))
    time.sleep(1.1)
    assert published_kids(client, "ES256") == [new_kid]
    # A token with its kid is refused: tokens the old key signed, never shown before,
    # and one freshly signed with it (its private half stolen, say).
    assert_401(client.simulate_post(REFRESH, json={"refresh_token": second["refresh_token"]}))
    fresh = sign_old({**claims_of(second["access_token"]), "jti": uuid.uuid4().hex, "exp": int(time.time()) + 600})
    assert_401(client.simulate_get(ME, headers=bearer(fresh)))
    assert client.simulate_post(INTROSPECT, json={"token": fresh}, headers=admin.headers).json == {"active": False}
    # The new key signs on.
    assert kid_of(client.login("ada@example.com")["access_token"]) == new_kid


def test_another_app_refuses_a_key_retired_past_its_lifetime_without_a_jwks_request(
        app_client, locky_database_url, monkeypatch):
    monkeypatch.setattr(keys_module, "RELOAD_INTERVAL", 0.0)
    monkeypatch.setattr(keys_module, "ACTIVE_RECHECK", 0.0)
    first_app, first = app_client(access_ttl=10, refresh_ttl=60)
    second_app, second = app_client(access_ttl=10, refresh_ttl=60)
    user = first.account("ada@example.com")
    assert second.simulate_get(ME, headers=user.headers).status_code == 200  # the second app reads the key
    old_kid, sign_old = kid_of(user.access_token), signer(first_app)
    first_app.context.tokens.keys.rotate()
    retire_at(locky_database_url, old_kid, utcnow() - timedelta(seconds=70))
    fresh = sign_old({**claims_of(user.access_token), "jti": uuid.uuid4().hex})
    assert_401(second.simulate_get(ME, headers=bearer(fresh)))


@pytest.mark.server
@pytest.mark.slow  # waits out the workers' recheck of the active key (ACTIVE_RECHECK, 30 s)
def test_locky_keys_rotate_on_the_command_line(tmp_path, locky_database_url):
    env = server_env(locky_database_url)
    with serve(tmp_path / "server", env) as server:
        before = server_account(server, "ada@example.com")
        old_kid = kid_of(before["access_token"])
        result = locky_cli("keys", "rotate", env=env, cwd=tmp_path)
        rotated = time.monotonic()
        assert result.returncode == 0, result.stderr
        listing = locky_cli("keys", "list", env=env, cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        # Every family rotated: ES256 (the configured algorithm) and RS256 (ID tokens).
        lines = [line for line in listing.stdout.splitlines() if " ES256 " in line]
        assert len(lines) == 2 and old_kid in lines[0] and "retired" in lines[0] and "active" in lines[1]
        new_kid = lines[1].split()[0]
        assert new_kid != old_kid and new_kid in result.stdout
        id_token_lines = [line for line in listing.stdout.splitlines() if " RS256 " in line]
        assert [line.split()[0] in result.stdout for line in id_token_lines][-1]
        assert "retired" in id_token_lines[-2] and "active" in id_token_lines[-1]

        # The server lists and publishes both at once (the JWKS within its reload second).
        listed = {key["kid"]: key for key in call(server, "GET", KEYS, token=before["access_token"]).json["keys"]
                  if key["alg"] == "ES256"}
        assert set(listed) == {old_kid, new_kid}
        assert listed[new_kid]["retired_at"] is None and RFC3339_UTC.match(listed[old_kid]["retired_at"])
        deadline = time.monotonic() + 5
        while {key["kid"] for key in call(server, "GET", JWKS).json["keys"] if key["alg"] == "ES256"} \
                != {old_kid, new_kid}:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        # Tokens signed before still work.
        assert call(server, "GET", ME, token=before["access_token"]).status == 200
        # Every worker signs with the new key within ACTIVE_RECHECK seconds.
        wait_for_new_kid(server, "ada@example.com", new_kid, rotated + keys_module.ACTIVE_RECHECK + 5)
        after = server_login(server, "ada@example.com")
        client = jwt.PyJWKClient(server.url + JWKS, cache_keys=False)
        for token in (before["access_token"], after["access_token"]):
            jwt.decode(token, client.get_signing_key_from_jwt(token), algorithms=["ES256"], audience="locky",
                       issuer=server.url)
            assert call(server, "GET", ME, token=token).status == 200


def test_a_changed_secret_stops_startup_with_a_message(tmp_path, locky_database_url):
    """The signing keys are sealed with LOCKY_JWT_SECRET: another secret cannot open them,
    and a command started with it says so in one line instead of a traceback."""
    env = server_env(locky_database_url)
    assert locky_cli("migrate", env=env, cwd=tmp_path).returncode == 0
    assert locky_cli("keys", "rotate", env=env, cwd=tmp_path).returncode == 0
    other = {**env, "LOCKY_JWT_SECRET": "another-secret-" + "x" * 40}
    result = locky_cli("keys", "list", env=other, cwd=tmp_path)
    assert result.returncode != 0
    assert "does not open with this LOCKY_JWT_SECRET" in result.stderr
    assert "Traceback" not in result.stderr and other["LOCKY_JWT_SECRET"] not in result.stderr
    assert locky_cli("keys", "list", env=env, cwd=tmp_path).returncode == 0  # the right secret still works


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_keys_older_than_the_rotation_days_are_rotated(app_client, locky_database_url, algorithm):
    first_app, first = app_client(jwt_algorithm=algorithm)
    user = first.account("ada@example.com")
    old_kid = kid_of(user.access_token)
    run_sql(locky_database_url, "UPDATE locky_signing_keys SET created_at = %s WHERE kid = %s",
            utc_text(utcnow() - timedelta(days=2)), old_kid)
    # LOCKY_KEY_ROTATION_DAYS=0: never.
    never_app, never = app_client(jwt_algorithm=algorithm, key_rotation_days=0)
    assert kid_of(never.login("ada@example.com")["access_token"]) == old_kid
    # LOCKY_KEY_ROTATION_DAYS=1: the two-day-old key is replaced at startup.
    daily_app, daily = app_client(jwt_algorithm=algorithm, key_rotation_days=1)
    later = daily.login("ada@example.com")
    assert kid_of(later["access_token"]) != old_kid
    listed = {key["kid"]: key for key in of_family(keys_listing(daily, user.headers), algorithm)}
    assert set(listed) == {old_kid, kid_of(later["access_token"])}
    assert listed[old_kid]["retired_at"] is not None
    # The old key's tokens still verify.
    assert daily.simulate_get(ME, headers=user.headers).status_code == 200


def test_a_change_of_algorithm_makes_a_key_of_the_new_one(app_client):
    es_app, es = app_client(jwt_algorithm="ES256")
    user = es.account("ada@example.com")
    ed_app, ed = app_client(jwt_algorithm="EdDSA")
    token = ed.login("ada@example.com")["access_token"]
    assert header_of(token)["alg"] == "EdDSA"
    # The configured algorithm's key first; the ES256 key stays, as the family of
    # ES256 ID tokens, beside RS256's.
    jwk, *others = ed.simulate_get(JWKS).json["keys"]
    assert_public_jwk(jwk, "EdDSA")
    assert jwk["kid"] == kid_of(token)
    assert [other["alg"] for other in others] == ["RS256", "ES256"]
    assert_401(ed.simulate_get(ME, headers=user.headers))  # ES256 is not the algorithm any more
    assert ed.simulate_get(ME, headers=bearer(token)).status_code == 200
    listed = {key["kid"]: key for key in keys_listing(ed, bearer(token))}
    assert listed[kid_of(user.access_token)]["alg"] == "ES256"
    assert listed[jwk["kid"]] == {**listed[jwk["kid"]], "alg": "EdDSA", "retired_at": None}


# ---------------------------------------------------------------------------------------
# Several processes, one key
# ---------------------------------------------------------------------------------------


def test_apps_starting_at_once_on_an_empty_database_agree_on_one_key(app_client, monkeypatch):
    barrier = threading.Barrier(4)

    def start(_):
        barrier.wait(timeout=30)
        return app_client()

    with ThreadPoolExecutor(4) as pool:
        pairs = list(pool.map(start, range(4)))
    clients = [client for _, client in pairs]
    admin = clients[0].account(ADMIN_EMAIL, verified=True)
    tokens = [client.login(ADMIN_EMAIL)["access_token"] for client in clients]
    [key] = of_family(keys_listing(clients[1], admin.headers), "ES256")
    assert key["retired_at"] is None
    assert {kid_of(token) for token in tokens} == {key["kid"]}
    for client in clients:
        assert published_kids(client, "ES256") == [key["kid"]]
        for token in tokens:
            assert client.simulate_get(ME, headers=bearer(token)).status_code == 200

    # A rotation in one app: the others verify its tokens (once their keys may be
    # re-read: RELOAD_INTERVAL) and sign with the new key once ACTIVE_RECHECK has
    # passed (shortened here).
    monkeypatch.setattr(keys_module, "ACTIVE_RECHECK", 0.5)
    new_kid = clients[0].simulate_post(ROTATE, headers=admin.headers).json["kid"]
    newer = clients[0].login(ADMIN_EMAIL)["access_token"]
    assert kid_of(newer) == new_kid
    time.sleep(max(keys_module.RELOAD_INTERVAL, keys_module.ACTIVE_RECHECK) + 0.1)
    for client in clients[1:]:
        assert client.simulate_get(ME, headers=bearer(newer)).status_code == 200
    for client in clients:
        assert kid_of(client.login(ADMIN_EMAIL)["access_token"]) == new_kid
        for token in tokens:  # the old key's tokens stay valid
            assert client.simulate_get(ME, headers=bearer(token)).status_code == 200


def test_apps_rotating_at_once_end_with_one_active_key(app_client, monkeypatch):
    pairs = [app_client() for _ in range(4)]
    clients = [client for _, client in pairs]
    admin = clients[0].account(ADMIN_EMAIL, verified=True)
    old_kid = kid_of(admin.access_token)
    barrier = threading.Barrier(4)

    def rotate(client):
        barrier.wait(timeout=30)
        return client.simulate_post(ROTATE, headers=admin.headers)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(rotate, clients))
    assert [result.status_code for result in results] == [200] * 4, [result.text for result in results]
    listed = keys_listing(clients[0], admin.headers)
    active = [key["kid"] for key in of_family(listed, "ES256") if key["retired_at"] is None]
    assert len(active) == 1 and active[0] != old_kid
    assert len([key for key in of_family(listed, "RS256") if key["retired_at"] is None]) == 1
    monkeypatch.setattr(keys_module, "ACTIVE_RECHECK", 0.0)
    for client in clients:
        assert kid_of(client.login(ADMIN_EMAIL)["access_token"]) == active[0]
        assert client.simulate_get(ME, headers=admin.headers).status_code == 200


@pytest.mark.slow  # waits out ACTIVE_RECHECK (30 s) on two servers
@pytest.mark.server
def test_two_servers_on_one_database_agree_on_one_key(tmp_path, locky_database_url):
    """Two ``locky serve`` (two workers each) start at once on an empty database and
    sign with one key; after a rotation in one, the other signs with the new key within
    ``ACTIVE_RECHECK`` seconds, and each accepts the other's tokens throughout."""
    env = server_env(locky_database_url, LOCKY_JWT_ISSUER="http://locky.test",
                     LOCKY_MAIL_DIR=str(tmp_path / "mail"))  # one outbox, one folder
    with ExitStack() as stack:
        def start(name):
            manager = serve(tmp_path / name, env)
            return manager, manager.__enter__()

        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(start, name) for name in ("a", "b")]
            started, errors = [], []
            for future in futures:
                try:
                    started.append(future.result())
                except Exception as exc:  # the other server must still be stopped
                    errors.append(exc)
        for manager, _ in started:
            stack.push(manager.__exit__)
        if errors:
            raise errors[0]
        a, b = (server for _, server in started)

        admin = server_account(a, ADMIN_EMAIL, verified=True)
        server_account(b, "ada@example.com")
        tokens = [server_login(server, email)["access_token"] for server in (a, b) for email in
                  (ADMIN_EMAIL, "ada@example.com") for _ in range(3)]
        for server in (a, b):
            [key] = of_family(call(server, "GET", KEYS, token=admin["access_token"]).json["keys"], "ES256")
            assert key["retired_at"] is None
            assert [k["kid"] for k in of_family(call(server, "GET", JWKS).json["keys"], "ES256")] == [key["kid"]]
        assert {kid_of(token) for token in tokens} == {key["kid"]}
        for server in (a, b):
            for token in tokens:
                assert call(server, "GET", ME, token=token).status == 200

        reply = call(a, "POST", ROTATE, token=admin["access_token"])
        rotated = time.monotonic()
        assert reply.status == 200, reply.text
        new_kid = reply.json["kid"]
        # The other server verifies the new key's tokens (once its workers may re-read
        # the keys: RELOAD_INTERVAL), and signs with it within ACTIVE_RECHECK.
        newer = [server_login(a, "ada@example.com")["access_token"] for _ in range(4)]
        time.sleep(keys_module.RELOAD_INTERVAL + 0.1)
        for token in newer:
            if kid_of(token) == new_kid:
                assert call(b, "GET", ME, token=token).status == 200
        took = wait_for_new_kid(b, "ada@example.com", new_kid, rotated + keys_module.ACTIVE_RECHECK + 5)
        wait_for_new_kid(a, "ada@example.com", new_kid, rotated + keys_module.ACTIVE_RECHECK + 5)
        assert took <= keys_module.ACTIVE_RECHECK + 5
        latest = server_login(b, "ada@example.com")["access_token"]
        for server in (a, b):
            for token in (*tokens, latest):
                assert call(server, "GET", ME, token=token).status == 200
            [active] = [k for k in of_family(call(server, "GET", KEYS, token=latest).json["keys"], "ES256")
                        if k["retired_at"] is None]
            assert active["kid"] == new_kid


# ---------------------------------------------------------------------------------------
# Introspection (RFC 7662)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
def test_introspection_needs_a_bearer_token(locky_client, locky_user, form):
    assert_401(post_token(locky_client, INTROSPECT, locky_user.access_token, form=form))
    assert_401(post_token(locky_client, INTROSPECT, locky_user.access_token, form=form, headers=bearer("garbage")))
    assert_401(post_token(locky_client, INTROSPECT, locky_user.access_token, form=form,
                          headers=bearer(locky_user.refresh_token)))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
def test_introspection_of_live_tokens(app_client, algorithm, form):
    app, client = app_client(jwt_algorithm=algorithm)
    caller = client.account("caller@example.com")  # any user may introspect (the shipped policy)
    ada = client.account("ada@example.com")
    for token, kind in ((ada.access_token, "access"), (ada.refresh_token, "refresh")):
        result = post_token(client, INTROSPECT, token, form=form, headers=caller.headers)
        assert result.status_code == 200, result.text
        body = result.json
        assert set(body) == INTROSPECTION_KEYS
        claims = claims_of(token)
        assert body["active"] is True
        assert (body["sub"], body["username"], body["token_type"]) == (ada.uuid, "ada@example.com", kind)
        assert {name: body[name] for name in ("exp", "iat", "nbf", "jti", "iss", "aud")} == {
            name: claims[name] for name in ("exp", "iat", "nbf", "jti", "iss", "aud")}
        assert body["iss"] == ISSUER and body["aud"] == "locky"
    # Introspecting used nothing up: the refresh token still refreshes.
    assert client.simulate_post(REFRESH, json={"refresh_token": ada.refresh_token}).status_code == 200


def dead_token(kind: str, app, client, admin) -> str:
    """A token of ``kind`` that is not valid now (docs/http/tokens.md)."""
    email = f"{uuid.uuid4().hex[:12]}@example.com"
    account = client.account(email)
    sign = signer(app)
    claims = claims_of(account.access_token)
    if kind == "expired":
        now = int(time.time())
        return sign({**claims, "iat": now - 3600, "nbf": now - 3600, "exp": now - 60})
    if kind == "not yet valid":
        return sign({**claims, "nbf": int(time.time()) + 3600})
    if kind == "revoked by logout":
        assert client.simulate_post(LOGOUT, headers=account.headers).status_code == 204
        return account.access_token
    if kind == "refresh token of a logged-out login":
        assert client.simulate_post(LOGOUT, headers=account.headers).status_code == 204
        return account.refresh_token
    if kind == "owner deleted":
        assert client.simulate_delete(f"/v1/private/users/{account.id}", headers=account.headers).status_code == 204
        return account.access_token
    if kind == "owner disabled":
        result = client.simulate_put(f"/v1/private/users/{account.id}", json={"disabled": True},
                                     headers=admin.headers)
        assert result.status_code == 200, result.text
        return account.refresh_token
    if kind == "bad signature":
        head, payload, signature = account.access_token.split(".")
        return f"{head}.{payload}.{signature[:-4]}{'AAAA' if not signature.endswith('AAAA') else 'BBBB'}"
    if kind == "tampered payload":
        head, _, signature = account.access_token.split(".")
        payload = base64.urlsafe_b64encode(json.dumps({**claims, "sub": admin.uuid}).encode()).rstrip(b"=").decode()
        return f"{head}.{payload}.{signature}"
    if kind == "wrong alg (HS256 with the secret)":
        return jwt.encode(claims, TEST_SECRET, algorithm="HS256", headers={"kid": kid_of(account.access_token)})
    if kind == "wrong alg (none)":
        head = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
        return f"{head}.{account.access_token.split('.')[1]}."
    if kind == "foreign key":
        return jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256",
                          headers={"kid": kid_of(account.access_token)})
    if kind == "wrong issuer":
        return sign({**claims, "iss": "locky"})
    if kind == "used refresh token":
        assert client.simulate_post(REFRESH, json={"refresh_token": account.refresh_token}).status_code == 200
        return account.refresh_token
    if kind == "garbage":
        return "garbage"
    if kind == "three dots of garbage":
        return "a.b.c"
    if kind == "a JWT of nobody":
        return jwt.encode({"sub": "x"}, TEST_SECRET, algorithm="HS256")
    raise AssertionError(kind)


DEAD = ["expired", "not yet valid", "revoked by logout", "refresh token of a logged-out login", "owner deleted",
        "owner disabled", "bad signature", "tampered payload", "wrong alg (HS256 with the secret)",
        "wrong alg (none)", "foreign key", "wrong issuer", "used refresh token", "garbage",
        "three dots of garbage", "a JWT of nobody"]


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
@pytest.mark.parametrize("kind", DEAD)
def test_introspection_of_dead_tokens_is_inactive(locky_app, locky_client, locky_admin, kind, form):
    token = dead_token(kind, locky_app, locky_client, locky_admin)
    result = post_token(locky_client, INTROSPECT, token, form=form, headers=locky_admin.headers)
    assert result.status_code == 200, result.text
    assert result.json == {"active": False}


def test_introspecting_a_used_refresh_token_does_not_end_the_login(locky_client, locky_user):
    """Presenting a used refresh token at the refresh endpoint ends its login (theft);
    asking about one is no such presentation."""
    later = locky_client.simulate_post(REFRESH, json={"refresh_token": locky_user.refresh_token}).json
    asked = post_token(locky_client, INTROSPECT, locky_user.refresh_token, form=False, headers=locky_user.headers)
    assert asked.json == {"active": False}
    assert post_token(locky_client, INTROSPECT, later["refresh_token"], form=False,
                      headers=locky_user.headers).json["active"] is True
    assert locky_client.simulate_post(REFRESH, json={"refresh_token": later["refresh_token"]}).status_code == 200


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
def test_the_optional_token_type_hint_is_accepted(locky_client, locky_user, form):
    asked = post_token(locky_client, INTROSPECT, locky_user.access_token, form=form, headers=locky_user.headers,
                       token_type_hint="access_token")
    assert asked.status_code == 200 and asked.json["active"] is True, asked.text
    revoked = post_token(locky_client, REVOKE, locky_user.refresh_token, form=form, token_type_hint="refresh_token")
    assert revoked.status_code == 200 and revoked.json == {}, revoked.text


# ---------------------------------------------------------------------------------------
# Revocation (RFC 7009)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
@pytest.mark.parametrize("token", ["garbage", "a.b.c", "x" * 300, "eyJhbGciOiJub25lIn0.e30."])
def test_revoking_garbage_is_200_and_changes_nothing(locky_client, locky_user, token, form):
    result = post_token(locky_client, REVOKE, token, form=form)  # public: no bearer
    assert result.status_code == 200, result.text
    assert result.json == {}
    assert locky_client.simulate_get(ME, headers=locky_user.headers).status_code == 200


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
@pytest.mark.parametrize("which", ["access", "refresh"])
def test_revoking_a_live_token_ends_its_whole_login(locky_client, locky_user, which, form):
    other = locky_client.login(locky_user.email)  # another login of the same user
    later = locky_client.simulate_post(REFRESH, json={"refresh_token": locky_user.refresh_token}).json
    token = later["access_token"] if which == "access" else later["refresh_token"]
    result = post_token(locky_client, REVOKE, token, form=form)
    assert result.status_code == 200, result.text
    assert result.json == {}
    # Every token of that login is dead: access and refresh, earlier and later.
    for access in (locky_user.access_token, later["access_token"]):
        assert_401(locky_client.simulate_get(ME, headers=bearer(access)))
    assert_401(locky_client.simulate_post(REFRESH, json={"refresh_token": later["refresh_token"]}))
    assert post_token(locky_client, INTROSPECT, token, form=form,
                      headers=bearer(other["access_token"])).json == {"active": False}
    # Revoking again is the same 200; the other login is untouched.
    assert post_token(locky_client, REVOKE, token, form=form).json == {}
    assert locky_client.simulate_get(ME, headers=bearer(other["access_token"])).status_code == 200
    assert locky_client.simulate_post(REFRESH, json={"refresh_token": other["refresh_token"]}).status_code == 200


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_revocation_and_introspection_with_every_algorithm(app_client, algorithm):
    app, client = app_client(jwt_algorithm=algorithm)
    ada, bob = client.account("ada@example.com"), client.account("bob@example.com")
    assert post_token(client, INTROSPECT, ada.access_token, form=True, headers=bob.headers).json["active"] is True
    assert post_token(client, REVOKE, ada.refresh_token, form=True).json == {}
    assert post_token(client, INTROSPECT, ada.access_token, form=True, headers=bob.headers).json == {"active": False}
    assert_401(client.simulate_get(ME, headers=ada.headers))


# ---------------------------------------------------------------------------------------
# Private keys stay private
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_private_keys_are_sealed_at_rest(app_client, locky_database_url, algorithm):
    app, client = app_client(jwt_algorithm=algorithm)
    admin = client.account(ADMIN_EMAIL, verified=True)
    assert client.simulate_post(ROTATE, headers=admin.headers).status_code == 200
    rows = run_sql(locky_database_url, "SELECT kid, alg, public_jwk, private_key FROM locky_signing_keys")
    # Two of the configured algorithm's (the first and the rotated), and RS256's (ID tokens).
    families = [algorithm] if algorithm == "RS256" else [algorithm, "RS256"]
    assert sorted(alg for _, alg, _, _ in rows) == sorted(families * 2)
    for kid, alg, public, sealed in rows:
        assert sealed.startswith("v1.")
        assert "PRIVATE KEY" not in sealed and "-----" not in sealed
        raw = base64.urlsafe_b64decode(sealed[3:] + "=" * (-len(sealed[3:]) % 4))
        assert b"PRIVATE KEY" not in raw
        assert_public_jwk(json.loads(public), alg)
        # Only LOCKY_JWT_SECRET opens it, and only on its own row.
        assert "PRIVATE KEY" in Sealer(TEST_SECRET, "signing-keys").open(sealed, kid)
        with pytest.raises(SealError):
            Sealer("another-secret-that-is-long-enough-0123456789", "signing-keys").open(sealed, kid)
        with pytest.raises(SealError):
            Sealer(TEST_SECRET, "signing-keys").open(sealed, "another-kid")


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_no_private_key_material_in_any_answer_or_log(app_client, algorithm):
    """Every endpoint that touches keys, and the failures around them; the autouse scan
    checks every body and log line against the stored private keys."""
    app, client = app_client(jwt_algorithm=algorithm)
    admin = client.account(ADMIN_EMAIL, verified=True)
    user = client.account("ada@example.com")
    for _ in range(2):
        assert client.simulate_post(ROTATE, headers=admin.headers).status_code == 200
    assert client.simulate_post(ROTATE, headers=user.headers).status_code == 403
    client.simulate_get(JWKS)
    client.simulate_get(METADATA)
    client.simulate_get(KEYS, headers=user.headers)
    client.simulate_get(KEYS)
    for form in (False, True):
        post_token(client, INTROSPECT, user.access_token, form=form, headers=admin.headers)
        post_token(client, INTROSPECT, "garbage", form=form, headers=admin.headers)
        post_token(client, REVOKE, "garbage", form=form)
    client.simulate_post(INTROSPECT, json={"token": ""}, headers=admin.headers)
    client.simulate_post(REVOKE, body="token=a&token=b", headers={"Content-Type": FORM})
    client.simulate_get(ME, headers=bearer(user.access_token + "x"))
    client.simulate_get("/v1/swagger.json")
    post_token(client, REVOKE, user.refresh_token, form=True)
    assert_401(client.simulate_get(ME, headers=user.headers))


# ---------------------------------------------------------------------------------------
# Upgrades: a database with accounts and no key
# ---------------------------------------------------------------------------------------

UPGRADE_WARNING = "tokens issued before (HS256 with LOCKY_JWT_SECRET) are no longer accepted"


def warnings_of(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "locky.keys" and record.levelno == logging.WARNING]


def test_an_upgraded_database_warns_about_its_hs256_tokens(app_client, caplog):
    # What 1.x left behind: accounts, their HS256 tokens, no signing key.
    old_app, old = app_client(jwt_algorithm="HS256")
    ada = old.account("ada@example.com")
    assert header_of(ada.access_token)["alg"] == "HS256"
    assert warnings_of(caplog) == []
    caplog.clear()

    new_app, new = app_client()  # ES256, the default
    [warning] = warnings_of(caplog)
    assert UPGRADE_WARNING in warning and "ES256" in warning and "LOCKY_JWT_ALGORITHM=HS256" in warning
    assert_401(new.simulate_get(ME, headers=ada.headers))  # the users log in again
    assert new.simulate_get(ME, headers=bearer(new.login("ada@example.com")["access_token"])).status_code == 200
    caplog.clear()
    app_client()  # the key exists now: no second warning
    assert warnings_of(caplog) == []


def test_a_database_whose_keys_are_gone_warns_too(app_client, locky_database_url, caplog):
    app, client = app_client()
    client.account("ada@example.com")
    run_sql(locky_database_url, "DELETE FROM locky_signing_keys")
    caplog.clear()
    app_client()
    assert len([w for w in warnings_of(caplog) if UPGRADE_WARNING in w]) == 1


def test_a_new_database_starts_without_the_warning(app_client, caplog):
    app_client()
    assert warnings_of(caplog) == []
    assert any("made signing key" in record.getMessage() for record in caplog.records)


def test_with_hs256_tokens_signed_with_the_secret_keep_working(app_client):
    first_app, first = app_client(jwt_algorithm="HS256")
    ada = first.account("ada@example.com")
    # A restart with HS256 (after an ES256 run made a key in the same database).
    app_client()
    again_app, again = app_client(jwt_algorithm="HS256")
    assert again.simulate_get(ME, headers=ada.headers).status_code == 200
    assert again.simulate_post(REFRESH, json={"refresh_token": ada.refresh_token}).status_code == 200
    # Any token the secret signs for a live login is accepted; nothing asks for a kid.
    claims = claims_of(ada.access_token)
    crafted = jwt.encode({**claims, "jti": uuid.uuid4().hex}, TEST_SECRET, algorithm="HS256")
    assert again.simulate_get(ME, headers=bearer(crafted)).status_code == 200
    # Without an OAuth client the JWKS publishes nothing (and never a secret)...
    assert again.simulate_get(JWKS).json == {"keys": []}
    # ...with one, RS256's key (ID tokens) and the ES256 family the earlier run made.
    admin = again.account(ADMIN_EMAIL, verified=True)
    made = again.simulate_post("/v1/private/oauth/clients", headers=admin.headers, json={
        "name": "Reports", "type": "confidential", "redirect_uris": ["http://127.0.0.1:9/callback"]})
    assert made.status_code == 201, made.text
    assert sorted(key["alg"] for key in again.simulate_get(JWKS).json["keys"]) == ["ES256", "RS256"]
