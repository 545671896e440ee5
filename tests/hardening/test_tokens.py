"""Token attacks: every forged, stale, revoked or misused token answers 401 with
``WWW-Authenticate: Bearer`` and the contract's error object (docs/http/tokens.md),
whatever ``LOCKY_JWT_ALGORITHM`` the server runs: ES256 (the default), EdDSA, RS256
(keys made by the server, published as a JWKS, named by ``kid``) and HS256 (the shared
secret).

Forgeries are made from a real login's claims, re-signed or edited the way an attacker
would: algorithm confusion (an HMAC keyed with the public key the JWKS gives away),
``none``, keys the server never made (with the real ``kid``, a made-up one or none),
headers that point elsewhere for the key (``jku``, ``jwk``, ``x5u``, ``x5c``: an
attacker's server that would serve them records that nobody asked), ``kid`` tricks
(path traversal, SQL, wrong types, the kid of a key retired past its lifetime), and
claims that are wrong while the signature is genuine (made with the server's own key,
read from the app as only an insider could: the refusal can only be the claim's).
The server under test is the real app (in-process), and a real ``locky serve`` where
the HTTP server's own limits matter.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from locky.testing import TEST_SECRET
from locky.testing.databases import run_sql

from harden import STRONG, account, http as http_request, served

ME = "/v1/internal/users/me"
REFRESH = "/v1/public/users/refresh"
JWKS = "/.well-known/jwks.json"
ALGORITHMS = ["ES256", "EdDSA", "RS256", "HS256"]
ASYMMETRIC = ["ES256", "EdDSA", "RS256"]
ATTACKER_SECRET = b"an-attacker-secret-of-at-least-32-bytes!!"

# HMAC signatures with short or odd keys are what these attacks are made of.
pytestmark = pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")


# -- the server's algorithm ------------------------------------------------------------


@pytest.fixture(params=ALGORITHMS)
def algorithm(request) -> str:
    """The ``LOCKY_JWT_ALGORITHM`` of the app under test (every one, unless a test
    parametrizes ``algorithm`` itself)."""
    return request.param


@pytest.fixture
def locky_settings(locky_settings, algorithm):
    return locky_settings.replace(jwt_algorithm=algorithm)


# -- keys ------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64json(value: Any) -> str:
    return b64(json.dumps(value).encode())


@lru_cache(maxsize=None)
def foreign_key(algorithm: str):
    """A key for ``algorithm`` that no Locky server ever made (a secret for HMAC)."""
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "ES384":
        return ec.generate_private_key(ec.SECP384R1())
    if algorithm == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    if algorithm in ("RS256", "PS256"):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ATTACKER_SECRET


def public_jwk(algorithm: str, key) -> dict[str, Any]:
    """The public JWK of a key, as an attacker would publish it."""
    if algorithm.startswith("HS"):
        return {"kty": "oct", "k": b64(key), "alg": algorithm, "kid": "attacker-oct"}
    jwk = json.loads(jwt.get_algorithm_by_name(algorithm).to_jwk(key.public_key()))
    jwk.update(alg=algorithm, use="sig", kid=f"attacker-{algorithm}")
    return jwk


def self_signed_certificate(key) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "locky.example.com")])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=30)))
    return builder.sign(key, None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256())


def raw_token(header: dict[str, Any], claims: dict[str, Any] | str, key: Any, alg: str | None = None) -> str:
    """A JWT signed by hand with ``alg`` (the header's by default): PyJWT refuses some of
    these headers (a kid that is no string) and keys (a PEM as an HMAC secret) on purpose."""
    payload = claims if isinstance(claims, str) else b64json(claims)
    signing_input = f"{b64json(header)}.{payload}".encode()
    algorithm = jwt.get_algorithm_by_name(alg or header["alg"])
    if isinstance(key, str):
        key = key.encode()
    return f"{signing_input.decode()}.{b64(algorithm.sign(signing_input, key))}"


@dataclass
class Genuine:
    """The app's own signing key: the active private key and its ``kid``, or the secret."""

    algorithm: str
    private: Any
    kid: str | None

    @classmethod
    def of(cls, app) -> "Genuine":
        algorithm = app.context.settings.jwt_algorithm
        keys = app.context.tokens.keys
        if keys is None:
            return cls(algorithm, app.context.settings.jwt_secret, None)
        kid, private = keys.signing_key()
        return cls(algorithm, private, kid)

    @property
    def asymmetric(self) -> bool:
        return self.kid is not None

    @property
    def headers(self) -> dict[str, Any]:
        return {"kid": self.kid} if self.kid else {}

    def sign(self, claims: dict[str, Any], **headers: Any) -> str:
        return jwt.encode(claims, self.private, algorithm=self.algorithm, headers={**self.headers, **headers})

    def sign_raw(self, header: dict[str, Any], claims: dict[str, Any] | str) -> str:
        return raw_token(header, claims, self.private, self.algorithm)

    def public_forms(self) -> list[bytes]:
        """The public key in every form an attacker might try as an HMAC secret (a
        stranger's public key when the server has none: HMAC)."""
        private = self.private if self.asymmetric else foreign_key("RS256")
        public = private.public_key()
        forms = [
            public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
            public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo),
            public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH),
        ]
        forms.append(forms[0].strip())  # the PEM without its final newline
        algorithm = self.algorithm if self.asymmetric else "RS256"
        forms.append(json.dumps(public_jwk(algorithm, private)).encode())
        return forms


# -- the attacker's server -------------------------------------------------------------


@dataclass
class Attacker:
    """A web server an attacker controls, serving a JWKS and certificates of the
    attacker's keys at any path; ``requests`` records every path anyone asked for."""

    url: str
    requests: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def attacker():
    body = json.dumps({"keys": [public_jwk(alg, foreign_key(alg)) for alg in ("ES256", "EdDSA", "RS256", "HS256")]})
    pem = b"".join(self_signed_certificate(foreign_key(alg)).public_bytes(serialization.Encoding.PEM)
                   for alg in ("ES256", "EdDSA", "RS256"))
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            data = pem if self.path.endswith(".pem") else body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-pem-file" if self.path.endswith(".pem")
                             else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Attacker(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


# -- the attacks -----------------------------------------------------------------------


@dataclass
class Scene:
    """What an attack starts from: a real login, the server's key, the attacker's server."""

    genuine: Genuine
    access: str
    refresh: str
    attacker_url: str

    @property
    def claims(self) -> dict[str, Any]:
        return claims_of(self.access)

    @property
    def real_kid(self) -> str:
        """The kid of the server's active key (for an HMAC server, a plausible one)."""
        return self.genuine.kid or "locky"

    @property
    def alg(self) -> str:
        return self.genuine.algorithm

    def foreign(self, alg: str | None = None, **headers: Any) -> str:
        """The claims signed with ``alg`` (the server's) by a key the server never made."""
        alg = alg or self.alg
        return raw_token({"alg": alg, "typ": "JWT", **headers}, self.claims, foreign_key(alg))

    def resigned(self, drop: tuple[str, ...] = (), **changes: Any) -> str:
        """The claims with ``changes``, signed with the server's genuine key."""
        claims = {k: v for k, v in {**self.claims, **changes}.items() if k not in drop}
        return self.genuine.sign(claims)


def claims_of(token: str) -> dict:
    """The payload of a real token, read without checking it (the attacker's view)."""
    return jwt.decode(token, options={"verify_signature": False})


def hmac_with(header: dict[str, Any], claims: dict[str, Any], key: bytes) -> str:
    return raw_token({"typ": "JWT", **header}, claims, key)


def now() -> int:
    return int(time.time())


def swap_signature(scene: Scene) -> str:
    head, payload, _ = scene.access.split(".")
    return f"{head}.{payload}.{scene.refresh.split('.')[2]}"


def zero_signature(scene: Scene) -> str:
    head, payload, signature = scene.access.split(".")
    length = len(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    return f"{head}.{payload}.{b64(bytes(length))}"


def tampered_signature(scene: Scene) -> str:
    head, payload, signature = scene.access.split(".")
    return f"{head}.{payload}.{signature[:-4]}{'AAAA' if not signature.endswith('AAAA') else 'BBBB'}"


def tampered_payload(scene: Scene) -> str:
    head, _, signature = scene.access.split(".")
    edited = {**scene.claims, "sub": "00000000-0000-4000-8000-000000000000"}
    return f"{head}.{b64json(edited)}.{signature}"


def swapped_alg_header(scene: Scene) -> str:
    _, payload, signature = scene.access.split(".")
    other = "ES384" if scene.alg != "ES384" else "ES256"
    return f"{b64json({'alg': other, 'typ': 'JWT', **scene.genuine.headers})}.{payload}.{signature}"


def other_hmac_alg(scene: Scene, kid: bool) -> str:
    alg = "HS512" if scene.alg == "HS256" else "HS256"
    return hmac_with({"alg": alg, **({"kid": scene.real_kid} if kid else {})}, scene.claims, TEST_SECRET.encode())


def confusion(scene: Scene, alg: str, kid: bool) -> list[str]:
    """An HMAC keyed with each form of the server's public key."""
    header = {"alg": alg, **({"kid": scene.real_kid} if kid else {})}
    return [hmac_with(header, scene.claims, form) for form in scene.genuine.public_forms()]


def asymmetric_header_hmac_signed(scene: Scene) -> str:
    alg = scene.alg if scene.genuine.asymmetric else "ES256"
    return raw_token({"alg": alg, "typ": "JWT", "kid": scene.real_kid}, scene.claims, TEST_SECRET.encode(), "HS256")


def embedded_jwk(scene: Scene, kid: str | None) -> str:
    jwk = public_jwk(scene.alg, foreign_key(scene.alg))
    return scene.foreign(jwk=jwk, kid=kid or jwk["kid"])


def pointing_header(scene: Scene, name: str, kid: str | None) -> str:
    where = f"{scene.attacker_url}/{'cert.pem' if name == 'x5u' else 'jwks.json'}"
    return scene.foreign(**{name: where, "kid": kid or public_jwk(scene.alg, foreign_key(scene.alg))["kid"]})


def x5c_header(scene: Scene) -> str:
    signer = scene.alg if scene.genuine.asymmetric else "RS256"
    certificate = self_signed_certificate(foreign_key(signer)).public_bytes(serialization.Encoding.DER)
    return scene.foreign(x5c=[base64.b64encode(certificate).decode()])


def genuinely_signed_header(scene: Scene, **header: Any) -> str:
    return scene.genuine.sign_raw({"alg": scene.alg, "typ": "JWT", **header}, scene.claims)


TRAVERSAL = "../../../../../../../../dev/null"
SQL_KIDS = ["' OR '1'='1", "x' UNION SELECT 'attacker-secret' --", "1; DROP TABLE locky_signing_keys; --"]

#: name -> the forged tokens (one or several) made from a scene.
ATTACKS: dict[str, Callable[[Scene], str | list[str]]] = {
    # alg none, in every spelling, with and without the real kid and a signature part
    "alg none": lambda s: f"{b64json({'alg': 'none', 'typ': 'JWT'})}.{b64json(s.claims)}.",
    "alg None/NONE/nOnE": lambda s: [f"{b64json({'alg': alg, 'typ': 'JWT'})}.{b64json(s.claims)}."
                                     for alg in ("None", "NONE", "nOnE")],
    "alg none with the real kid": lambda s: f"{b64json({'alg': 'none', 'kid': s.real_kid})}.{b64json(s.claims)}.",
    "alg none, signature kept": lambda s: f"{b64json({'alg': 'none', 'typ': 'JWT'})}.{s.access.partition('.')[2]}",
    "alg empty, missing or a list": lambda s: [
        f"{b64json(header)}.{b64json(s.claims)}.{s.access.split('.')[2]}"
        for header in ({"alg": "", **s.genuine.headers}, {"typ": "JWT", **s.genuine.headers},
                       {"alg": [s.alg], **s.genuine.headers}, {"alg": None, **s.genuine.headers})],
    "right alg, empty signature": lambda s: f"{b64json({'alg': s.alg, 'typ': 'JWT', **s.genuine.headers})}"
                                            f".{b64json(s.claims)}.",
    # algorithm confusion
    "HS256 keyed with the public key, real kid": lambda s: confusion(s, "HS256", kid=True),
    "HS256 keyed with the public key, no kid": lambda s: confusion(s, "HS256", kid=False),
    "HS384/HS512 keyed with the public key": lambda s: confusion(s, "HS384", True) + confusion(s, "HS512", True),
    "another HMAC alg with LOCKY_JWT_SECRET": lambda s: [other_hmac_alg(s, kid=True), other_hmac_alg(s, kid=False)],
    "HS384 with LOCKY_JWT_SECRET": lambda s: hmac_with({"alg": "HS384"}, s.claims, TEST_SECRET.encode()),
    "asymmetric alg header, HMAC signature by LOCKY_JWT_SECRET": asymmetric_header_hmac_signed,
    "alg header swapped, signature kept": swapped_alg_header,
    **{f"{alg} with a foreign key and the real kid": (lambda a: lambda s: s.foreign(a, kid=s.real_kid))(alg)
       for alg in ("ES256", "EdDSA", "RS256", "PS256", "ES384")},
    # keys the server never made
    "foreign key, real kid": lambda s: s.foreign(kid=s.real_kid),
    "foreign key, made-up kid": lambda s: s.foreign(kid="attacker-key-1"),
    "foreign key, its own thumbprint as kid": lambda s: s.foreign(kid=public_jwk(s.alg, foreign_key(s.alg))["kid"]),
    "foreign key, no kid": lambda s: s.foreign(),
    "foreign key, a kid of 3000 characters": lambda s: s.foreign(kid="k" * 3000),
    # headers that point elsewhere for the key
    "jwk header with the attacker's key": lambda s: embedded_jwk(s, None),
    "jwk header with the attacker's key, real kid": lambda s: embedded_jwk(s, s.real_kid),
    "jku header to the attacker's JWKS": lambda s: pointing_header(s, "jku", None),
    "jku header to the attacker's JWKS, real kid": lambda s: pointing_header(s, "jku", s.real_kid),
    "x5u header to the attacker's certificate": lambda s: pointing_header(s, "x5u", None),
    "x5c header with the attacker's certificate": x5c_header,
    # kid tricks
    "kid path traversal, HS256 with an empty key": lambda s: hmac_with({"alg": "HS256", "kid": TRAVERSAL},
                                                                      s.claims, b""),
    "kid path traversal, the server's alg": lambda s: [s.foreign(kid=TRAVERSAL), s.foreign(kid="/dev/null"),
                                                      s.foreign(kid=f"{s.real_kid}/../{s.real_kid}")],
    "kid SQL injection, HS256 keyed with the injected value": lambda s: hmac_with(
        {"alg": "HS256", "kid": SQL_KIDS[1]}, s.claims, b"attacker-secret"),
    "kid SQL injection, the server's alg": lambda s: [s.foreign(kid=kid) for kid in SQL_KIDS],
    "kid of the wrong type, genuine signature": lambda s: [
        genuinely_signed_header(s, kid=kid) for kid in (1, [s.real_kid], {"kid": s.real_kid}, None, True)],
    # genuine signature, headers the server must not accept
    "crit header with an unknown extension, genuine signature": lambda s: genuinely_signed_header(
        s, crit=["exp-check"], **{"exp-check": 1}, **s.genuine.headers),
    "b64 false, genuine signature": lambda s: genuinely_signed_header(s, b64=False, crit=["b64"],
                                                                      **s.genuine.headers),
    # genuine signature, wrong claims
    "expired": lambda s: s.resigned(iat=now() - 3600, nbf=now() - 3600, exp=now() - 60),
    "not yet valid": lambda s: s.resigned(nbf=now() + 3600, exp=now() + 7200),
    "issued in the future": lambda s: s.resigned(iat=now() + 3600, exp=now() + 7200),
    "wrong iss": lambda s: s.resigned(iss="evil"),
    "iss of the old fixed issuer (locky)": lambda s: s.resigned(iss="locky"),
    "no iss": lambda s: s.resigned(drop=("iss",)),
    "wrong aud": lambda s: s.resigned(aud="another-service"),
    "aud list without locky": lambda s: s.resigned(aud=["another-service"]),
    "wrong typ": lambda s: s.resigned(typ="id"),
    "no typ": lambda s: s.resigned(drop=("typ",)),
    "no exp": lambda s: s.resigned(drop=("exp",)),
    "exp not a number": lambda s: s.resigned(exp="tomorrow"),
    "no sid": lambda s: s.resigned(drop=("sid",)),
    "unknown sid": lambda s: s.resigned(sid=str(uuid.uuid4())),
    "unknown sub": lambda s: s.resigned(sub=str(uuid.uuid4())),
    "genuine key, no kid": lambda s: jwt.encode(s.claims, s.genuine.private, algorithm=s.alg),
    # the token itself damaged or misused
    "refresh token as access token": lambda s: s.refresh,
    "tampered payload": tampered_payload,
    "tampered signature": tampered_signature,
    "all-zero signature": zero_signature,
    "another token's signature": swap_signature,
    "truncated": lambda s: s.access[: len(s.access) // 2],
    "two parts": lambda s: s.access.rsplit(".", 1)[0],
    "four parts": lambda s: s.access + "." + s.access.split(".")[2],
    "oversized (8 KiB)": lambda s: s.access + "A" * (8 * 1024),
    "header not JSON": lambda s: f"{b64(b'not json')}.{s.access.split('.', 1)[1]}",
    "header a JSON array": lambda s: f"{b64json([s.alg])}.{s.access.split('.', 1)[1]}",
    "payload not JSON, genuine signature": lambda s: s.genuine.sign_raw(
        {"alg": s.alg, "typ": "JWT", **s.genuine.headers}, b64(b"not json")),
    "not a JWT": lambda s: "not-a-token",
}

#: Attacks that are no attack on an HMAC server (its tokens carry no kid at all).
NOT_FOR_HMAC = {"genuine key, no kid"}

#: Every attack on the default algorithm (ES256) in every run; on the others, the whole
#: matrix, under `pytest --all` (CI runs it).
CASES = [pytest.param(alg, kind, id=f"{alg}-{kind}", marks=() if alg == ALGORITHMS[0] else pytest.mark.slow)
         for alg in ALGORITHMS for kind in ATTACKS if not (alg.startswith("HS") and kind in NOT_FOR_HMAC)]


def assert_401(result) -> None:
    """A 401 with the Bearer challenge and Falcon's error object, however it was reached."""
    status = getattr(result, "status_code", None) or result.status
    headers = {k.lower(): v for k, v in result.headers.items()}
    body = result.json
    assert status == 401, (status, body)
    assert headers.get("www-authenticate") == "Bearer"
    assert isinstance(body, dict) and isinstance(body.get("title"), str) and set(body) <= {"title", "description"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def scene(locky_app, locky_user, attacker) -> Scene:
    return Scene(Genuine.of(locky_app), locky_user.access_token, locky_user.refresh_token, attacker.url)


def test_a_genuinely_signed_control_token_is_accepted(locky_client, scene, algorithm):
    """Every attack changes one thing from a token like this one, which works."""
    token = scene.resigned(jti=uuid.uuid4().hex)
    assert jwt.get_unverified_header(token)["alg"] == algorithm
    assert locky_client.simulate_get(ME, headers=bearer(token)).status_code == 200
    assert locky_client.simulate_post(REFRESH, json={"refresh_token": scene.refresh}).status_code == 200


@pytest.mark.parametrize("algorithm, kind", CASES)
def test_forged_tokens(locky_client, locky_user, scene, attacker, algorithm, kind):
    forged = ATTACKS[kind](scene)
    tokens = forged if isinstance(forged, list) else [forged]
    assert tokens and all(token != locky_user.access_token for token in tokens)
    asked_before = len(attacker.requests)
    for token in tokens:
        assert_401(locky_client.simulate_get(ME, headers=bearer(token)))
    # Nothing the token named was fetched.
    assert attacker.requests[asked_before:] == []
    # The genuine token still works: the 401 was the forgery's.
    assert locky_client.simulate_get(ME, headers=locky_user.headers).status_code == 200


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Token abc", "Bearer a b"])
def test_malformed_authorization_headers(locky_client, header):
    assert_401(locky_client.simulate_get(ME, headers={"Authorization": header} if header else {}))


REFRESH_ATTACKS = ["access token as refresh token", "wrong typ", "expired", "tampered payload", "alg none",
                   "foreign key, real kid", "jwk header with the attacker's key",
                   "HS256 keyed with the public key, real kid", "another HMAC alg with LOCKY_JWT_SECRET",
                   "wrong iss", "kid SQL injection, the server's alg"]


@pytest.mark.parametrize("kind", REFRESH_ATTACKS)
def test_forged_refresh_tokens(locky_client, locky_user, scene, kind):
    """The refresh endpoint refuses forgeries too, and an access token in its place."""
    refresh_scene = Scene(scene.genuine, locky_user.refresh_token, locky_user.access_token, scene.attacker_url)
    forged = {
        "access token as refresh token": lambda s: s.refresh,
        "wrong typ": lambda s: s.resigned(typ="access"),
    }.get(kind) or ATTACKS[kind]
    tokens = forged(refresh_scene)
    for token in tokens if isinstance(tokens, list) else [tokens]:
        assert_401(locky_client.simulate_post(REFRESH, json={"refresh_token": token}))
    # The genuine refresh token was not spent by those.
    assert locky_client.simulate_post(REFRESH, json={"refresh_token": locky_user.refresh_token}).status_code == 200


def test_swapped_session(locky_client, locky_user, scene):
    """A genuinely signed token naming one user and another user's session."""
    other = locky_client.account("other@example.com", STRONG)
    token = scene.resigned(sid=claims_of(other.access_token)["sid"])
    assert_401(locky_client.simulate_get(ME, headers=bearer(token)))


def age_key(database_url: str, kid: str, retired_at: str = "2000-01-01 00:00:00") -> None:
    """Move time forward for one key: it was retired long ago, past any token's lifetime."""
    run_sql(database_url, "UPDATE locky_signing_keys SET retired_at = %s WHERE kid = %s", retired_at, kid)


def test_kid_of_a_retired_key_past_its_lifetime(locky_app, locky_client, locky_user, locky_admin, scene,
                                                locky_database_url, locky_app_factory, algorithm):
    """A key retired longer ago than any token lives verifies nothing any more: a token
    signed with it (its private half stolen, say) and naming its kid is refused. With
    HS256, the key is one an earlier ES256 deployment of the same database made."""
    if algorithm.startswith("HS"):
        earlier = Genuine.of(locky_app_factory(jwt_algorithm="ES256"))
        token = raw_token({"alg": "ES256", "typ": "JWT", "kid": earlier.kid}, scene.claims, earlier.private)
        assert_401(locky_client.simulate_get(ME, headers=bearer(token)))
        # Never published for access tokens (HMAC's JWKS is empty while no OAuth client needs ID tokens).
        assert locky_client.simulate_get(JWKS).json == {"keys": []}
        assert locky_client.simulate_get(ME, headers=locky_user.headers).status_code == 200
        return
    old = scene.genuine
    rotated = locky_client.simulate_post("/v1/private/keys/rotate", headers=locky_admin.headers)
    assert rotated.status_code == 200, rotated.text
    new_kid = rotated.json["kid"]
    assert new_kid != old.kid
    # Within its lifetime the retired key still verifies what it signed.
    assert locky_client.simulate_get(ME, headers=bearer(old.sign({**scene.claims, "jti": uuid.uuid4().hex}))
                                     ).status_code == 200
    age_key(locky_database_url, old.kid)
    time.sleep(1.1)  # the JWKS re-reads the keys at most once a second (keys.RELOAD_INTERVAL)
    assert [key["kid"] for key in locky_client.simulate_get(JWKS).json["keys"] if key["alg"] == algorithm] == [new_kid]
    assert_401(locky_client.simulate_get(ME, headers=bearer(old.sign({**scene.claims, "jti": uuid.uuid4().hex}))))
    assert_401(locky_client.simulate_post(REFRESH, json={"refresh_token": old.sign(
        {**claims_of(scene.refresh), "jti": uuid.uuid4().hex})}))
    # Genuine tokens of that key are refused as well now (no token of it can be valid in
    # real time); a new login gets tokens of the new key, which work.
    assert_401(locky_client.simulate_get(ME, headers=locky_user.headers))
    fresh = locky_client.login(locky_user.email)
    assert jwt.get_unverified_header(fresh["access_token"])["kid"] == new_kid
    assert locky_client.simulate_get(ME, headers=bearer(fresh["access_token"])).status_code == 200
    assert locky_client.simulate_post(REFRESH, json={"refresh_token": fresh["refresh_token"]}).status_code == 200


def test_token_of_deleted_user(locky_client, locky_user, locky_admin):
    second = locky_client.login(locky_user.email)  # a second login of the same user
    result = locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_admin.headers)
    assert result.status_code == 204
    for token in (locky_user.access_token, second["access_token"]):
        assert_401(locky_client.simulate_get(ME, headers=bearer(token)))
    for refresh in (locky_user.refresh_token, second["refresh_token"]):
        assert_401(locky_client.simulate_post(REFRESH, json={"refresh_token": refresh}))


def test_token_of_user_who_deleted_themself(locky_client, locky_user):
    result = locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_user.headers)
    assert result.status_code == 204
    assert_401(locky_client.simulate_get(ME, headers=locky_user.headers))


def test_tokens_after_logout(locky_client, locky_user, scene):
    other_login = locky_client.login(locky_user.email)
    made_before = scene.resigned(jti=uuid.uuid4().hex)  # same session, genuinely signed
    assert locky_client.simulate_post("/v1/private/users/logout", headers=locky_user.headers).status_code == 204
    assert_401(locky_client.simulate_get(ME, headers=locky_user.headers))
    assert_401(locky_client.simulate_get(ME, headers=bearer(made_before)))
    assert_401(locky_client.simulate_post("/v1/private/users/logout", headers=locky_user.headers))
    assert_401(locky_client.simulate_post(REFRESH, json={"refresh_token": locky_user.refresh_token}))
    # Logging out ends that login only.
    assert locky_client.simulate_get(ME, headers=bearer(other_login["access_token"])).status_code == 200


def test_reused_refresh_token_revokes_its_chain(locky_client, locky_user):
    refresh = lambda token: locky_client.simulate_post(REFRESH, json={"refresh_token": token})  # noqa: E731
    first = refresh(locky_user.refresh_token)
    assert first.status_code == 200
    second = refresh(first.json["refresh_token"])
    assert second.status_code == 200
    bystander = locky_client.login(locky_user.email)  # another login of the same user
    # The thief replays the first refresh token: refused, and the whole chain ends.
    assert_401(refresh(locky_user.refresh_token))
    assert_401(refresh(second.json["refresh_token"]))  # the newest link of the chain
    assert_401(refresh(first.json["refresh_token"]))
    for access in (locky_user.access_token, first.json["access_token"], second.json["access_token"]):
        assert_401(locky_client.simulate_get(ME, headers=bearer(access)))
    assert locky_client.simulate_get(ME, headers=bearer(bystander["access_token"])).status_code == 200


class PublicOnly(Genuine):
    """An outsider's view of the server's key: the public half, from the JWKS."""

    def public_forms(self) -> list[bytes]:
        public = self.private  # the public key object
        forms = [
            public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
            public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo),
        ]
        return forms + [forms[0].strip()]

    def sign(self, claims, **headers):
        raise AssertionError("an outsider cannot sign with the server's key")


#: What an outsider can forge against a real server: only the JWKS is known.
SERVER_ATTACKS = ["oversized (8 KiB)", "alg none", "alg none with the real kid", "foreign key, real kid",
                  "jku header to the attacker's JWKS", "jwk header with the attacker's key",
                  "HS256 keyed with the public key, real kid", "kid path traversal, HS256 with an empty key",
                  "kid SQL injection, the server's alg", "refresh token as access token", "tampered payload",
                  "all-zero signature"]


@pytest.mark.server
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_attacks_on_a_real_server(tmp_path, attacker, algorithm):
    """Through gunicorn: its header limits must not turn an oversized token into an
    HTML error page, and the answers are the same as in-process. The attacker knows the
    JWKS only: the public key for the confusion attacks comes from there."""
    with served(tmp_path, f"sqlite:///{tmp_path / 'locky.sqlite'}", workers=2,
                LOCKY_JWT_ALGORITHM=algorithm) as server:
        login = account(server, "real@example.com")
        # The configured algorithm's key, and RS256's for ID tokens (alone with HMAC).
        published = [key for key in http_request(server, "GET", JWKS).json["keys"] if key["alg"] == algorithm]
        if algorithm.startswith("HS"):
            assert published == []
            genuine = Genuine(algorithm, foreign_key("HS256"), None)  # the secret is unknown: a guess
        else:
            kid = jwt.get_unverified_header(login["access_token"])["kid"]
            assert [key["kid"] for key in published] == [kid]
            genuine = PublicOnly(algorithm, jwt.PyJWK(published[0]).key, kid)
        scene = Scene(genuine, login["access_token"], login["refresh_token"], attacker.url)
        asked_before = len(attacker.requests)
        for kind in SERVER_ATTACKS:
            forged = ATTACKS[kind](scene)
            for token in forged if isinstance(forged, list) else [forged]:
                assert_401(http_request(server, "GET", ME, token=token))
        assert attacker.requests[asked_before:] == []
        assert http_request(server, "GET", ME, token=login["access_token"]).status == 200
        assert http_request(server, "POST", "/v1/private/users/logout", token=login["access_token"]).status == 204
        assert_401(http_request(server, "GET", ME, token=login["access_token"]))
        assert_401(http_request(server, "POST", REFRESH, {"refresh_token": login["refresh_token"]}))
