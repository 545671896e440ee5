"""Key families (docs/http/tokens.md, docs/http/oauth.md): one family of signing keys per
algorithm. The configured algorithm's signs access and refresh tokens; RS256's is always
there for ID tokens (every relying party accepts RS256); ES256's or EdDSA's is made the
first time an ID token of that algorithm is signed, on any host. The JWKS publishes
every family, a rotation rotates every family, and an ID token verifies with nothing
but the JWKS, as a relying party checks it (PyJWT here)."""

from __future__ import annotations

import time
import uuid

import jwt
import pytest

from locky.testing import ADMIN_EMAIL, LockyClient

JWKS = "/.well-known/jwks.json"
ROTATE = "/v1/private/keys/rotate"
KEYS = "/v1/internal/keys"
ME = "/v1/internal/users/me"


def id_claims(app, audience: str = "wiki") -> dict:
    now = int(time.time())
    return {"iss": app.context.settings.issuer, "sub": str(uuid.uuid4()), "aud": audience, "azp": audience,
            "iat": now, "exp": now + 300, "auth_time": now, "nonce": "n-1", "amr": ["pwd"]}


def verify_with_jwks(http, token: str, audience: str = "wiki") -> dict:
    """What a relying party does: the key the ``kid`` names in the JWKS, its own ``alg``."""
    header = jwt.get_unverified_header(token)
    keys = {key["kid"]: key for key in http.simulate_get(JWKS).json["keys"]}
    jwk = keys[header["kid"]]
    assert jwk["alg"] == header["alg"]
    return jwt.decode(token, jwt.PyJWK(jwk), algorithms=[jwk["alg"]], audience=audience)


def algs(http) -> list[str]:
    return [key["alg"] for key in http.simulate_get(JWKS).json["keys"]]


@pytest.fixture
def app(locky_app_factory):
    return locky_app_factory(jwt_algorithm="ES256")


def test_the_jwks_holds_rs256_beside_es256(app):
    http = LockyClient(app)
    assert algs(http) == ["ES256", "RS256"]
    user = http.account("ada@example.com")
    assert jwt.get_unverified_header(user.access_token)["alg"] == "ES256"  # access tokens: the configured one


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_an_id_token_verifies_against_the_jwks(app, alg):
    http = LockyClient(app)
    claims = id_claims(app)
    token = app.context.tokens.sign_id_token(claims, alg=alg)
    assert verify_with_jwks(http, token) == claims
    # EdDSA's family is made by this first ID token, and published from then on.
    assert alg in algs(http)


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_an_id_token_is_never_a_bearer_token(app, alg):
    http = LockyClient(app)
    user = http.account("ada@example.com")
    claims = {**jwt.decode(user.access_token, options={"verify_signature": False}), "aud": "locky"}
    claims.pop("typ")
    token = app.context.tokens.sign_id_token(claims, alg=alg)
    assert http.simulate_get(ME, headers={"Authorization": f"Bearer {token}"}).status_code == 401
    # With typ it is still refused unless signed by the access tokens' own family.
    token = app.context.tokens.sign_id_token({**claims, "typ": "access"}, alg=alg)
    expected = 200 if alg == "ES256" else 401
    assert http.simulate_get(ME, headers={"Authorization": f"Bearer {token}"}).status_code == expected


def test_a_rotation_rotates_every_family(app):
    http = LockyClient(app)
    admin = http.account(ADMIN_EMAIL, verified=True)
    old_id_token = app.context.tokens.sign_id_token(id_claims(app), alg="EdDSA")  # a third family
    before = {key["alg"]: key["kid"] for key in http.simulate_get(JWKS).json["keys"]}
    assert set(before) == {"ES256", "RS256", "EdDSA"}
    result = http.simulate_post(ROTATE, headers=admin.headers)
    assert result.status_code == 200 and result.json["alg"] == "ES256"  # the configured algorithm's
    listed = http.simulate_get(KEYS, headers=admin.headers).json["keys"]
    for alg, old_kid in before.items():
        family = [key for key in listed if key["alg"] == alg]
        assert [key["kid"] for key in family if key["retired_at"] is not None] == [old_kid], alg
        [active] = [key for key in family if key["retired_at"] is None]
        assert active["kid"] != old_kid
    # One key.rotated per key, in one request.
    events = app.context.storage.audit.list(event="key.rotated").items
    assert sorted(e.details["alg"] for e in events) == ["ES256", "EdDSA", "RS256"]
    assert {e.target_uuid for e in events} == {key["kid"] for key in listed if key["retired_at"] is None}
    # ID tokens signed before still verify (the retired keys stay published); new ones
    # name the new keys.
    assert verify_with_jwks(http, old_id_token)["aud"] == "wiki"
    for alg in before:
        token = app.context.tokens.sign_id_token(id_claims(app), alg=alg)
        assert jwt.get_unverified_header(token)["kid"] != before[alg]
        verify_with_jwks(http, token)


def test_a_family_another_host_made_is_published_and_rotated_here(locky_app_factory):
    first, second = (locky_app_factory(jwt_algorithm="ES256") for _ in range(2))
    token = first.context.tokens.sign_id_token(id_claims(first), alg="EdDSA")  # made on the first host
    http = LockyClient(second)
    assert verify_with_jwks(http, token)["aud"] == "wiki"
    # The second host signs EdDSA ID tokens with the same active key: hosts agree.
    again = second.context.tokens.sign_id_token(id_claims(second), alg="EdDSA")
    assert jwt.get_unverified_header(again)["kid"] == jwt.get_unverified_header(token)["kid"]
    rotated = second.context.tokens.keyring.rotate()
    assert sorted(record.alg for record in rotated) == ["ES256", "EdDSA", "RS256"]


@pytest.mark.parametrize("algorithm", ["HS256"])
def test_with_hmac_the_id_token_family_is_rs256(locky_app_factory, algorithm):
    app = locky_app_factory(jwt_algorithm=algorithm)
    http = LockyClient(app)
    admin = http.account(ADMIN_EMAIL, verified=True)
    assert algs(http) == []  # nothing to publish until an OAuth client needs ID tokens
    made = http.simulate_post("/v1/private/oauth/clients", headers=admin.headers, json={
        "name": "Wiki", "type": "confidential", "redirect_uris": ["http://127.0.0.1:9/callback"]})
    assert made.status_code == 201, made.text
    assert algs(http) == ["RS256"]
    token = app.context.tokens.sign_id_token(id_claims(app), alg="RS256")
    assert verify_with_jwks(http, token)["aud"] == "wiki"
    result = http.simulate_post(ROTATE, headers=admin.headers)
    assert result.status_code == 200 and result.json["alg"] == "RS256"
    assert jwt.get_unverified_header(admin.access_token)["alg"] == algorithm  # access tokens: the secret


def test_an_unknown_id_token_algorithm_is_refused(app):
    with pytest.raises(ValueError):
        app.context.tokens.sign_id_token(id_claims(app), alg="HS256")
