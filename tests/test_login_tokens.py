"""Login, tokens and sessions over HTTP (docs/http/tokens.md): the login body
and its JWTs (claims, lifetimes, ES256 by default with the ``kid`` of a key the JWKS
publishes), identical 401s for unknown emails and wrong passwords (at the same cost),
refresh-token rotation with reuse detection that revokes the whole login, logout, and
the 401 matrix of protected endpoints: missing header, wrong scheme, malformed, bad
signature, an ``alg`` other than the configured one (``none`` included), a key the
server never made, expired, not yet valid, wrong ``typ``/``iss``/``aud``, missing
claims, revoked, and owner deleted. Tokens are crafted with PyJWT and the server's own
signing key (read from the app, as only an insider could), and a control token made
the same way is shown to work first; every attack changes one thing from it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import statistics
import time
import uuid
from functools import lru_cache
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from locky.app import create_app
from locky.testing import PASSWORD, TEST_SECRET, LockyClient, make_settings

from authz_helpers import UUID4, assert_error, assert_fields

# Crafting HS384/HS512 tokens with the 45-byte test secret is deliberate.
pytestmark = pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")

LOGIN = "/v1/public/users/login"
REFRESH = "/v1/public/users/refresh"
LOGOUT = "/v1/private/users/logout"
ME = "/v1/internal/users/me"
JWKS = "/.well-known/jwks.json"
CLAIMS = {"sub", "sid", "iat", "nbf", "exp", "jti", "iss", "aud", "typ"}
TOKEN_KEYS = {"access_token", "token_type", "expires_in", "refresh_token", "user"}
OTHER_SECRET = "some-other-secret-that-is-long-enough-0123456789"
#: The tokens' ``iss`` by default: http://<LOCKY_HOST>:<LOCKY_PORT> (docs/http/tokens.md).
ISSUER = "http://127.0.0.1:8080"
ASYMMETRIC = ("ES256", "EdDSA", "RS256")
ALGORITHMS = ("ES256", "EdDSA", "RS256", "HS256", "HS384", "HS512")


@lru_cache(maxsize=None)
def foreign_key(algorithm: str):
    """A key of ``algorithm``'s type that no Locky server ever made."""
    if algorithm in ("ES256",):
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    if algorithm in ("RS256", "PS256"):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return OTHER_SECRET


class ServerKey:
    """The signing key of an app: its private key and ``kid`` (asymmetric algorithms),
    or ``LOCKY_JWT_SECRET`` (HMAC). Read from the running app, as only an insider could:
    tokens signed with it are genuine, so a refusal can only be the claim or header the
    test changed."""

    def __init__(self, app):
        self.algorithm = app.context.settings.jwt_algorithm
        keys = app.context.tokens.keys
        if keys is None:
            self.kid, self.private, self.public = None, app.context.settings.jwt_secret, app.context.settings.jwt_secret
        else:
            self.kid, self.private = keys.signing_key()
            self.public = self.private.public_key()

    @property
    def headers(self) -> dict[str, str]:
        return {"kid": self.kid} if self.kid else {}

    def sign(self, claims: dict, **headers: Any) -> str:
        return jwt.encode(claims, self.private, algorithm=self.algorithm, headers={**self.headers, **headers})

    def decode(self, token: str) -> dict:
        """The claims of a token this key signed, every check on (as a resource server)."""
        return jwt.decode(token, self.public, algorithms=[self.algorithm], audience="locky", issuer=ISSUER)

    def public_pem(self) -> bytes:
        return self.public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def claims_of(token: str) -> dict:
    """A token's payload read without checking it (what anyone holding it can see)."""
    return jwt.decode(token, options={"verify_signature": False})


def b64(data: dict | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned(claims: dict, alg: str = "none", **headers: Any) -> str:
    return f"{b64({'alg': alg, 'typ': 'JWT', **headers})}.{b64(claims)}."


def hmac_signed(header: dict, claims: dict, key: bytes, digest=hashlib.sha256) -> str:
    """A JWT HMAC-signed by hand (PyJWT refuses PEM keys as HMAC secrets on purpose)."""
    signing_input = f"{b64(header)}.{b64(claims)}"
    return f"{signing_input}.{b64(hmac.new(key, signing_input.encode(), digest).digest())}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_401(result) -> None:
    assert_error(result, 401, "401 Unauthorized")
    assert result.headers["www-authenticate"] == "Bearer"


def login(client, email: str, password: str = PASSWORD):
    return client.simulate_post(LOGIN, json={"email": email, "password": password})


def me(client, token: str):
    return client.simulate_get(ME, headers=bearer(token))


@pytest.fixture
def server_key(locky_app) -> ServerKey:
    return ServerKey(locky_app)


@pytest.fixture
def access_claims(locky_user, server_key) -> dict:
    return server_key.decode(locky_user.access_token)


def craft(key: ServerKey, base: dict, drop: tuple[str, ...] = (), **changes) -> str:
    """A token signed with the server's own key from ``base`` with ``changes`` applied."""
    return key.sign({k: v for k, v in {**base, **changes}.items() if k not in drop})


# -- login -----------------------------------------------------------------------


def test_login_body_is_the_oauth_token_response(locky_client):
    registered = locky_client.register("ada@example.com")
    result = login(locky_client, "ada@example.com")
    assert result.status_code == 200, result.text
    body = result.json
    assert set(body) == TOKEN_KEYS
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 15 * 60
    assert isinstance(body["access_token"], str) and isinstance(body["refresh_token"], str)
    assert body["access_token"] != body["refresh_token"]
    assert body["user"] == registered
    assert result.headers["cache-control"] == "no-store"


def jwks_verify(client, token: str) -> dict:
    """The claims of ``token`` checked the way another application would: with the key
    of its ``kid`` from the published JWKS, the configured algorithm, issuer and audience."""
    keys = jwt.PyJWKSet.from_dict(client.simulate_get(JWKS).json)
    header = jwt.get_unverified_header(token)
    key = next(k for k in keys.keys if k.key_id == header["kid"])
    return jwt.decode(token, key, algorithms=[key.algorithm_name], audience="locky", issuer=ISSUER)


def test_login_tokens_are_es256_jwts_with_exactly_the_contract_claims(locky_client):
    user = locky_client.register("ada@example.com")
    body = login(locky_client, "ada@example.com").json
    published = locky_client.simulate_get(JWKS).json["keys"]
    # One ES256 key, the active one, first; RS256's (ID tokens) beside it.
    assert [key["alg"] for key in published] == ["ES256", "RS256"]
    for token in (body["access_token"], body["refresh_token"]):
        header = jwt.get_unverified_header(token)
        assert header["alg"] == "ES256"  # the default (docs/http/tokens.md)
        assert header["kid"] == published[0]["kid"]  # the key that signed it is published
        assert set(header) <= {"alg", "kid", "typ"}  # no jku/jwk/x5u: nothing points elsewhere
    access, refresh = jwks_verify(locky_client, body["access_token"]), jwks_verify(locky_client, body["refresh_token"])
    assert set(access) == CLAIMS and set(refresh) == CLAIMS  # no roles in the token
    assert access["sub"] == refresh["sub"] == user["uuid"]
    assert access["sid"] == refresh["sid"]
    assert (access["typ"], refresh["typ"]) == ("access", "refresh")
    assert access["iss"] == refresh["iss"] == ISSUER
    assert access["aud"] == refresh["aud"] == "locky"
    assert access["jti"] != refresh["jti"]
    assert abs(access["iat"] - time.time()) < 60 and access["nbf"] <= access["iat"] + 1
    assert access["exp"] - access["iat"] == 15 * 60
    assert refresh["exp"] - refresh["iat"] == 7 * 24 * 3600


def test_each_login_is_its_own_session(locky_client):
    locky_client.register("ada@example.com")
    first, second = login(locky_client, "ada@example.com").json, login(locky_client, "ada@example.com").json
    assert claims_of(first["access_token"])["sid"] != claims_of(second["access_token"])["sid"]
    assert me(locky_client, first["access_token"]).status_code == 200
    assert me(locky_client, second["access_token"]).status_code == 200


def test_the_access_token_reaches_protected_endpoints(locky_client, locky_user):
    result = me(locky_client, locky_user.access_token)
    assert result.status_code == 200
    assert result.json == locky_user.body


def test_the_scheme_name_is_case_insensitive(locky_client, locky_user):
    for scheme in ("bearer", "BEARER", "Bearer"):
        result = locky_client.simulate_get(ME, headers={"Authorization": f"{scheme} {locky_user.access_token}"})
        assert result.status_code == 200, scheme


def test_login_email_is_trimmed_and_case_insensitive(locky_client):
    locky_client.register("ada@example.com")
    assert login(locky_client, "  ADA@Example.Com ").status_code == 200


def test_unknown_email_and_wrong_password_answer_identically(locky_client):
    locky_client.register("ada@example.com")
    wrong = login(locky_client, "ada@example.com", "wrong password")
    unknown = login(locky_client, "nobody@example.com", "wrong password")
    for result in (wrong, unknown):
        assert_401(result)
        assert result.headers["cache-control"] == "no-store"
    assert wrong.status_code == unknown.status_code
    assert wrong.json == unknown.json
    assert wrong.headers["www-authenticate"] == unknown.headers["www-authenticate"]


def test_a_deleted_users_login_answers_like_an_unknown_email(locky_client):
    ada = locky_client.account("ada@example.com")
    assert locky_client.simulate_delete(f"/v1/private/users/{ada.id}", headers=ada.headers).status_code == 204
    gone = login(locky_client, "ada@example.com")
    assert_401(gone)
    assert gone.json == login(locky_client, "nobody@example.com").json


def test_a_password_longer_than_72_bytes_is_not_truncated_at_login(locky_client):
    password = "p" * 72
    locky_client.register("ada@example.com", password=password)
    assert login(locky_client, "ada@example.com", password).status_code == 200
    for longer in (password + "x", password + "\u00e9", password * 2):
        assert_401(login(locky_client, "ada@example.com", longer))


def test_login_errors_do_not_echo_the_password(locky_client):
    locky_client.register("ada@example.com")
    result = login(locky_client, "ada@example.com", "Hunter2-wrong-secret")
    assert_401(result)
    assert "Hunter2" not in result.text


@pytest.mark.parametrize(
    "body, fields",
    [
        ({}, ("email", "password")),
        ({"email": "ada@example.com"}, ("password",)),
        ({"password": PASSWORD}, ("email",)),
        ({"email": 5, "password": PASSWORD}, ("email",)),
        ({"email": "ada@example.com", "password": None}, ("password",)),
        ({"email": "ada@example.com", "password": PASSWORD, "remember": True}, ("remember",)),
    ],
)
def test_bad_login_bodies_are_field_400s(locky_client, body, fields):
    locky_client.register("ada@example.com")
    assert_fields(locky_client.simulate_post(LOGIN, json=body), *fields)


def test_login_configured_lifetimes_show_in_expires_in_and_claims(tmp_path):
    settings = make_settings(f"sqlite:///{tmp_path / 'ttl.sqlite'}", access_ttl=60, refresh_ttl=3600)
    app = create_app(settings)
    try:
        client = LockyClient(app)
        client.register("ada@example.com")
        body = login(client, "ada@example.com").json
        assert body["expires_in"] == 60
        access, refresh = jwks_verify(client, body["access_token"]), jwks_verify(client, body["refresh_token"])
        assert access["exp"] - access["iat"] == 60
        assert refresh["exp"] - refresh["iat"] == 3600
    finally:
        app.close()


def test_unknown_email_costs_a_hash_check_like_a_wrong_password(tmp_path):
    """With a realistic bcrypt cost, an unknown email must not answer measurably faster."""
    settings = make_settings(f"sqlite:///{tmp_path / 'timing.sqlite'}", bcrypt_rounds=10, login_max_failures=1000)
    app = create_app(settings)
    try:
        client = LockyClient(app)
        client.register("ada@example.com")

        def timed(email: str) -> float:
            started = time.perf_counter()
            assert_401(login(client, email, "wrong password"))
            return time.perf_counter() - started

        wrong = statistics.median(timed("ada@example.com") for _ in range(5))
        unknown = statistics.median(timed(f"nobody{i}@example.com") for i in range(5))
        # One bcrypt check at cost 10 dwarfs everything else a login does.
        assert unknown > 0.5 * wrong, (unknown, wrong)
    finally:
        app.close()


# -- refresh ---------------------------------------------------------------------


def refresh(client, token: str):
    return client.simulate_post(REFRESH, json={"refresh_token": token})


def test_refresh_returns_a_new_token_body(locky_client, locky_user):
    result = refresh(locky_client, locky_user.refresh_token)
    assert result.status_code == 200, result.text
    body = result.json
    assert set(body) == TOKEN_KEYS
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 15 * 60
    assert body["user"] == locky_user.body
    assert body["refresh_token"] != locky_user.refresh_token
    assert body["access_token"] != locky_user.access_token
    assert result.headers["cache-control"] == "no-store"
    old, new = claims_of(locky_user.refresh_token), jwks_verify(locky_client, body["refresh_token"])
    assert new["sid"] == old["sid"] and new["jti"] != old["jti"]
    assert new["typ"] == "refresh" and jwks_verify(locky_client, body["access_token"])["typ"] == "access"
    assert me(locky_client, body["access_token"]).status_code == 200


def test_refresh_tokens_rotate_along_a_chain(locky_client, locky_user):
    token = locky_user.refresh_token
    for _ in range(3):
        result = refresh(locky_client, token)
        assert result.status_code == 200, result.text
        token = result.json["refresh_token"]
        assert me(locky_client, result.json["access_token"]).status_code == 200


def test_reusing_a_refresh_token_is_401_and_revokes_the_whole_chain(locky_client, locky_user):
    other_login = login(locky_client, locky_user.email).json  # a separate session
    first = refresh(locky_client, locky_user.refresh_token).json
    second = refresh(locky_client, first["refresh_token"]).json

    assert_401(refresh(locky_client, locky_user.refresh_token))  # reuse of a spent token

    # Every token of that login is dead now: the latest refresh token and the access tokens.
    assert_401(refresh(locky_client, second["refresh_token"]))
    for access in (locky_user.access_token, first["access_token"], second["access_token"]):
        assert_401(me(locky_client, access))
    # Another login of the same user is untouched.
    assert me(locky_client, other_login["access_token"]).status_code == 200
    assert refresh(locky_client, other_login["refresh_token"]).status_code == 200


def test_a_refresh_token_is_single_use_even_when_reused_at_once(locky_client, locky_user):
    assert refresh(locky_client, locky_user.refresh_token).status_code == 200
    assert_401(refresh(locky_client, locky_user.refresh_token))
    assert_401(refresh(locky_client, locky_user.refresh_token))


def test_an_access_token_is_not_a_refresh_token(locky_client, locky_user):
    assert_401(refresh(locky_client, locky_user.access_token))
    assert me(locky_client, locky_user.access_token).status_code == 200  # and nothing was revoked


def test_a_refresh_token_is_not_an_access_token(locky_client, locky_user):
    assert_401(me(locky_client, locky_user.refresh_token))
    assert_401(locky_client.simulate_post(LOGOUT, headers=bearer(locky_user.refresh_token)))


@pytest.mark.parametrize("token", ["garbage", "a.b.c", "x" * 300], ids=["garbage", "dots", "long"])
def test_refresh_with_a_malformed_token_is_401(locky_client, token):
    assert_401(refresh(locky_client, token))


def test_refresh_with_a_forged_token_is_401(locky_client, locky_user, server_key):
    claims = claims_of(locky_user.refresh_token)
    foreign = jwt.encode(claims, foreign_key("ES256"), algorithm="ES256", headers={"kid": server_key.kid})
    assert_401(refresh(locky_client, foreign))
    assert_401(refresh(locky_client, jwt.encode(claims, TEST_SECRET, algorithm="HS256")))
    assert_401(refresh(locky_client, unsigned(claims)))
    assert_401(refresh(locky_client, craft(server_key, claims, exp=int(time.time()) - 60)))
    assert_401(refresh(locky_client, craft(server_key, claims, iss="locky")))  # the issuer before tokens carried the public URL
    assert refresh(locky_client, locky_user.refresh_token).status_code == 200  # not spent by those


@pytest.mark.parametrize(
    "body, fields",
    [({}, ("refresh_token",)), ({"refresh_token": ""}, ("refresh_token",)), ({"refresh_token": 1}, ("refresh_token",)),
     ({"refresh_token": "x", "grant_type": "refresh_token"}, ("grant_type",))],
)
def test_bad_refresh_bodies_are_field_400s(locky_client, body, fields):
    assert_fields(locky_client.simulate_post(REFRESH, json=body), *fields)


def test_refresh_after_the_user_is_deleted_is_401(locky_client, locky_user):
    assert locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_user.headers).status_code == 204
    assert_401(refresh(locky_client, locky_user.refresh_token))


# -- logout ----------------------------------------------------------------------


def test_logout_is_204_and_revokes_the_access_and_refresh_token(locky_client, locky_user):
    result = locky_client.simulate_post(LOGOUT, headers=locky_user.headers)
    assert result.status_code == 204
    assert result.content == b""
    assert_401(me(locky_client, locky_user.access_token))
    assert_401(refresh(locky_client, locky_user.refresh_token))
    assert_401(locky_client.simulate_post(LOGOUT, headers=locky_user.headers))


def test_logout_also_kills_access_tokens_refreshed_from_that_login(locky_client, locky_user):
    later = refresh(locky_client, locky_user.refresh_token).json
    assert locky_client.simulate_post(LOGOUT, headers=bearer(later["access_token"])).status_code == 204
    assert_401(me(locky_client, later["access_token"]))
    assert_401(refresh(locky_client, later["refresh_token"]))


def test_logout_ends_only_the_calling_session(locky_client, locky_user):
    other = login(locky_client, locky_user.email).json
    assert locky_client.simulate_post(LOGOUT, headers=locky_user.headers).status_code == 204
    assert me(locky_client, other["access_token"]).status_code == 200
    assert refresh(locky_client, other["refresh_token"]).status_code == 200


def test_logout_needs_a_token(locky_client):
    assert_401(locky_client.simulate_post(LOGOUT))


def test_login_after_logout_works(locky_client, locky_user):
    assert locky_client.simulate_post(LOGOUT, headers=locky_user.headers).status_code == 204
    again = login(locky_client, locky_user.email)
    assert again.status_code == 200
    assert me(locky_client, again.json["access_token"]).status_code == 200


# -- the 401 matrix ----------------------------------------------------------------

PROTECTED = [
    ("GET", "/v1/internal/users/me"),
    ("GET", "/v1/internal/users"),
    ("GET", "/v1/internal/users/count"),
    ("GET", "/v1/internal/users/1"),
    ("GET", "/v1/internal/groups"),
    ("GET", "/v1/internal/members"),
    ("GET", "/v1/internal/roles"),
    ("PUT", "/v1/private/users/1"),
    ("DELETE", "/v1/private/users/1"),
    ("POST", "/v1/private/groups"),
    ("POST", "/v1/private/users/logout"),
]


@pytest.mark.parametrize("method, path", PROTECTED)
def test_every_protected_endpoint_needs_a_token(locky_client, locky_user, method, path):
    kwargs = {"json": {"name": "x"}} if method in ("PUT", "POST") else {}
    assert_401(locky_client.simulate_request(method, path, **kwargs))
    assert_401(locky_client.simulate_request(method, path, headers=bearer("nonsense"), **kwargs))


def test_a_crafted_control_token_is_accepted(locky_client, locky_user, access_claims, server_key):
    # The matrix below changes one thing at a time from this working token.
    token = craft(server_key, access_claims, jti=uuid.uuid4().hex)
    assert jwt.get_unverified_header(token) == {"alg": "ES256", "kid": server_key.kid, "typ": "JWT"}
    assert me(locky_client, token).status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer    ",
        "Basic dXNlckBleGFtcGxlLmNvbTpwYXNzd29yZA==",
        "Token {token}",
        "JWT {token}",
        "{token}",
        "Bearer: {token}",
        "Bearer {token} extra",
        "Bearer {token}x",
        "Bearer x{token}",
        "Bearer not-a-jwt",
        "Bearer a.b.c",
        "Bearer ....",
        "Bearer e30.e30.e30",
    ],
)
def test_missing_wrong_scheme_and_malformed_headers_are_401(locky_client, locky_user, header):
    headers = {} if header is None else {"Authorization": header.format(token=locky_user.access_token)}
    assert_401(locky_client.simulate_get(ME, headers=headers))


@pytest.mark.parametrize("kid", ["real", "made-up", "none"])
def test_a_token_signed_with_a_key_the_server_never_made_is_401(locky_client, access_claims, server_key, kid):
    headers = {"real": {"kid": server_key.kid}, "made-up": {"kid": "attacker-key-1"}, "none": {}}[kid]
    assert_401(me(locky_client, jwt.encode(access_claims, foreign_key("ES256"), algorithm="ES256", headers=headers)))


def test_a_token_without_a_kid_is_401_even_with_the_right_key(locky_client, access_claims, server_key):
    assert_401(me(locky_client, jwt.encode(access_claims, server_key.private, algorithm="ES256")))


def test_a_token_signed_with_the_secret_is_401(locky_client, access_claims, server_key):
    # LOCKY_JWT_SECRET seals the keys; with ES256 it signs nothing.
    assert_401(me(locky_client, jwt.encode(access_claims, TEST_SECRET, algorithm="HS256")))
    assert_401(me(locky_client, jwt.encode(access_claims, TEST_SECRET, algorithm="HS256",
                                           headers={"kid": server_key.kid})))


def test_a_token_with_a_tampered_payload_is_401(locky_client, locky_user, access_claims):
    header, _, signature = locky_user.access_token.split(".")
    payload = b64({**access_claims, "exp": access_claims["exp"] + 3600})
    assert_401(me(locky_client, f"{header}.{payload}.{signature}"))


@pytest.mark.parametrize("alg", ["none", "None", "NONE", "nOnE"])
def test_alg_none_is_401(locky_client, access_claims, server_key, alg):
    assert_401(me(locky_client, unsigned(access_claims, alg)))
    assert_401(me(locky_client, unsigned(access_claims, alg, kid=server_key.kid)))
    # The same with a signature part left on.
    assert_401(me(locky_client, unsigned(access_claims, alg) + "c2ln"))
    assert_401(me(locky_client, unsigned(access_claims, alg, kid=server_key.kid) + "c2ln"))


@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
def test_an_hmac_alg_keyed_with_the_public_key_is_401(locky_client, locky_user, access_claims, server_key, alg):
    # Algorithm confusion: the public key (as the JWKS gives it away) used as an HMAC secret.
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    jwk = next(k for k in locky_client.simulate_get(JWKS).json["keys"] if k["kid"] == server_key.kid)
    der = server_key.public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    for key in (server_key.public_pem(), der, json.dumps(jwk).encode()):
        assert_401(me(locky_client, hmac_signed({"alg": alg, "typ": "JWT", "kid": server_key.kid}, access_claims, key,
                                                digest)))
        assert_401(me(locky_client, hmac_signed({"alg": alg, "typ": "JWT"}, access_claims, key, digest)))


@pytest.mark.parametrize("alg", ["RS256", "EdDSA", "PS256", "ES384"])
def test_another_asymmetric_alg_with_the_real_kid_is_401(locky_client, access_claims, server_key, alg):
    key = {"RS256": foreign_key("RS256"), "PS256": foreign_key("RS256"), "EdDSA": foreign_key("EdDSA"),
           "ES384": ec.generate_private_key(ec.SECP384R1())}[alg]
    assert_401(me(locky_client, jwt.encode(access_claims, key, algorithm=alg, headers={"kid": server_key.kid})))


def test_an_es256_header_with_the_secret_as_hmac_key_is_401(locky_client, locky_user, access_claims, server_key):
    # Algorithm confusion the other way: claim ES256 but sign the HS256 way with the secret.
    for header in ({"alg": "ES256", "typ": "JWT"}, {"alg": "ES256", "typ": "JWT", "kid": server_key.kid}):
        assert_401(me(locky_client, hmac_signed(header, access_claims, TEST_SECRET.encode())))


def foreign_sign(algorithm: str, claims: dict, kid: str | None) -> str:
    """``claims`` signed with ``algorithm`` by a key no server made: a fresh key pair, or
    a secret that is not the server's (``LOCKY_JWT_SECRET`` for an asymmetric server)."""
    headers = {"kid": kid} if kid else {}
    key = TEST_SECRET if algorithm.startswith("HS") else foreign_key(algorithm)
    return jwt.encode(claims, key, algorithm=algorithm, headers=headers)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_only_the_configured_algorithm_is_accepted(tmp_path, algorithm):
    app = create_app(make_settings(f"sqlite:///{tmp_path / 'alg.sqlite'}", jwt_algorithm=algorithm))
    try:
        client = LockyClient(app)
        account = client.account("ada@example.com")
        key = ServerKey(app)
        header = jwt.get_unverified_header(account.access_token)
        assert header["alg"] == algorithm
        assert header.get("kid") == key.kid  # a kid with every asymmetric algorithm, none with HMAC
        # The configured algorithm's key and RS256's for ID tokens; with HMAC none (no OAuth client yet).
        published = client.simulate_get(JWKS).json["keys"]
        if algorithm in ASYMMETRIC:
            assert [k["kid"] for k in published if k["alg"] == algorithm] == [key.kid]
            assert sorted({k["alg"] for k in published}) == sorted({algorithm, "RS256"})
        else:
            assert published == []
        claims = key.decode(account.access_token)
        assert me(client, key.sign({**claims, "jti": "control"})).status_code == 200
        for other in ALGORITHMS:
            if other != algorithm:
                assert_401(me(client, foreign_sign(other, claims, key.kid)))
                assert_401(me(client, foreign_sign(other, claims, None)))
        assert_401(me(client, unsigned(claims)))
        assert_401(me(client, unsigned(claims, algorithm, **key.headers)))  # the right alg, no signature
    finally:
        app.close()


def test_an_expired_token_is_401(locky_client, access_claims, server_key):
    now = int(time.time())
    assert_401(me(locky_client, craft(server_key, access_claims, iat=now - 3600, nbf=now - 3600, exp=now - 60)))


def test_a_token_not_yet_valid_is_401(locky_client, access_claims, server_key):
    now = int(time.time())
    assert_401(me(locky_client, craft(server_key, access_claims, nbf=now + 600, iat=now, exp=now + 1200)))


@pytest.mark.parametrize(
    "changes",
    [
        {"typ": "refresh"},
        {"typ": "id"},
        {"typ": ""},
        {"typ": None},
        {"iss": "someone-else"},
        {"iss": ""},
        {"iss": "locky"},  # the issuer before tokens carried the public URL
        {"iss": "http://127.0.0.1:8080/"},
        {"iss": "https://127.0.0.1:8080"},
        {"aud": "another-service"},
        {"aud": ["another-service"]},
        # Fixed values (test ids must be the same in every collecting process).
        {"sub": "0f1e2d3c-4b5a-4698-8776-a5b4c3d2e1f0"},  # someone else than the session's owner
        {"sid": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"},  # a session that never existed
        {"sub": 12345},
        {"sid": 12345},
        {"exp": "tomorrow"},
    ],
    ids=lambda c: ",".join(f"{k}={v!r}" for k, v in c.items()),
)
def test_wrong_claims_are_401(locky_client, access_claims, server_key, changes):
    assert_401(me(locky_client, craft(server_key, access_claims, **changes)))


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_a_missing_claim_is_401(locky_client, access_claims, server_key, claim):
    assert_401(me(locky_client, craft(server_key, access_claims, drop=(claim,))))


def test_another_users_session_id_with_my_subject_is_401(locky_client, locky_user, access_claims, server_key):
    other = locky_client.account("other@example.com")
    mixed = craft(server_key, access_claims, sid=claims_of(other.access_token)["sid"])
    assert_401(me(locky_client, mixed))


def test_a_revoked_token_is_401(locky_client, locky_user, access_claims, server_key):
    forged_later = craft(server_key, access_claims, jti=uuid.uuid4().hex)  # same session, made before logout
    assert locky_client.simulate_post(LOGOUT, headers=locky_user.headers).status_code == 204
    assert_401(me(locky_client, locky_user.access_token))
    assert_401(me(locky_client, forged_later))


def test_an_owner_deleted_token_is_401(locky_client, locky_user):
    other_session = login(locky_client, locky_user.email).json["access_token"]
    assert locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_user.headers).status_code == 204
    assert_401(me(locky_client, locky_user.access_token))
    assert_401(me(locky_client, other_session))
    assert_401(locky_client.simulate_get("/v1/internal/users", headers=locky_user.headers))


def test_a_deleted_and_re_registered_email_does_not_revive_old_tokens(locky_client, locky_user):
    assert locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_user.headers).status_code == 204
    again = locky_client.register(locky_user.email)
    assert again["uuid"] != locky_user.uuid
    assert_401(me(locky_client, locky_user.access_token))


@pytest.mark.parametrize("secret", [OTHER_SECRET, TEST_SECRET], ids=["other secret", "same secret"])
def test_a_token_from_another_deployment_is_401(tmp_path, locky_client, secret):
    # Even with the same LOCKY_JWT_SECRET, another database made its own keys.
    other = create_app(make_settings(f"sqlite:///{tmp_path / 'other.sqlite'}", jwt_secret=secret))
    try:
        stranger = LockyClient(other).account("user@example.com")
    finally:
        other.close()
    locky_client.register("user@example.com")
    assert_401(me(locky_client, stranger.access_token))


def test_401_bodies_never_echo_the_token(locky_client, locky_user, access_claims, server_key):
    token = foreign_sign("ES256", access_claims, server_key.kid)
    result = me(locky_client, token)
    assert_401(result)
    assert token not in result.text and token.split(".")[2] not in result.text


def test_401s_carry_a_fresh_request_id(locky_client):
    result = locky_client.simulate_get(ME)
    assert_401(result)
    assert UUID4.match(result.headers["x-request-id"])
