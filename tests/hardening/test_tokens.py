"""Token attacks: every forged, stale, revoked or misused token answers 401 with
``WWW-Authenticate: Bearer`` and the contract's error object (CONTRACT.md 4).

Forgeries are made from a real login's claims, re-signed or edited the way an attacker
would; the server under test is the real app (in-process, and a real ``locky serve``
where the HTTP server's own limits matter).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from locky.testing import TEST_SECRET

from harden import STRONG, account, http, served

ME = "/v1/internal/users/me"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


NONE_HEADER = b64(b'{"alg":"none","typ":"JWT"}')


def claims_of(token: str) -> dict:
    """The payload of a real token, read without checking it (the attacker's view)."""
    return jwt.decode(token, options={"verify_signature": False})


def hs256(header: dict, claims: dict, key: bytes) -> str:
    """A JWT signed by hand (PyJWT refuses some of these keys on purpose)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def forge(kind: str, access: str, refresh: str) -> str:
    """One attack on a real login's ``access`` and ``refresh`` tokens."""
    claims = claims_of(access)
    now = int(time.time())
    if kind == "alg none":
        return f"{NONE_HEADER}.{b64(json.dumps(claims).encode())}."
    if kind == "alg none, signature kept":
        head, _, rest = access.partition(".")
        return f"{NONE_HEADER}.{rest}"
    if kind == "HS256 with another key":
        return jwt.encode(claims, "another-secret-of-at-least-32-bytes!", algorithm="HS256")
    if kind == "HS512 with the right key":  # an algorithm other than the configured one
        return jwt.encode(claims, TEST_SECRET, algorithm="HS512")
    if kind == "RS256 with an attacker's key":
        return jwt.encode(claims, rsa_key(), algorithm="RS256")
    if kind == "HS256 keyed with an RSA public key":  # the classic RS256/HS256 confusion
        public = rsa_key().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return hs256({"alg": "HS256", "typ": "JWT"}, claims, public)
    if kind == "expired":
        return jwt.encode({**claims, "iat": now - 3600, "nbf": now - 3600, "exp": now - 60}, TEST_SECRET)
    if kind == "not yet valid":
        return jwt.encode({**claims, "nbf": now + 3600, "exp": now + 7200}, TEST_SECRET)
    if kind == "issued in the future":
        return jwt.encode({**claims, "iat": now + 3600, "exp": now + 7200}, TEST_SECRET)
    if kind == "wrong iss":
        return jwt.encode({**claims, "iss": "evil"}, TEST_SECRET)
    if kind == "wrong aud":
        return jwt.encode({**claims, "aud": "another-service"}, TEST_SECRET)
    if kind == "wrong typ":
        return jwt.encode({**claims, "typ": "id"}, TEST_SECRET)
    if kind == "no typ":
        return jwt.encode({k: v for k, v in claims.items() if k != "typ"}, TEST_SECRET)
    if kind == "no exp":
        return jwt.encode({k: v for k, v in claims.items() if k != "exp"}, TEST_SECRET)
    if kind == "refresh token as access token":
        return refresh
    if kind == "tampered payload":
        head, _, rest = access.partition(".")
        payload, _, signature = rest.partition(".")
        edited = {**claims, "sub": "00000000-0000-4000-8000-000000000000"}
        return f"{head}.{b64(json.dumps(edited).encode())}.{signature}"
    if kind == "tampered signature":
        head, payload, signature = access.split(".")
        return f"{head}.{payload}.{signature[:-4]}{'AAAA' if not signature.endswith('AAAA') else 'BBBB'}"
    if kind == "truncated":
        return access[: len(access) // 2]
    if kind == "two parts":
        return access.rsplit(".", 1)[0]
    if kind == "oversized (8 KiB)":
        return access + "A" * (8 * 1024)
    if kind == "not a JWT":
        return "not-a-token"
    raise AssertionError(kind)


ATTACKS = [
    "alg none", "alg none, signature kept", "HS256 with another key", "HS512 with the right key",
    "RS256 with an attacker's key", "HS256 keyed with an RSA public key", "expired", "not yet valid",
    "issued in the future", "wrong iss", "wrong aud", "wrong typ", "no typ", "no exp",
    "refresh token as access token", "tampered payload", "tampered signature", "truncated", "two parts",
    "oversized (8 KiB)", "not a JWT",
]


def assert_401(result) -> None:
    """A 401 with the Bearer challenge and Falcon's error object, however it was reached."""
    status = getattr(result, "status_code", None) or result.status
    headers = {k.lower(): v for k, v in result.headers.items()}
    body = result.json
    assert status == 401, (status, body)
    assert headers.get("www-authenticate") == "Bearer"
    assert isinstance(body, dict) and isinstance(body.get("title"), str) and set(body) <= {"title", "description"}


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
@pytest.mark.parametrize("kind", ATTACKS)
def test_forged_tokens(locky_client, locky_user, kind):
    token = forge(kind, locky_user.access_token, locky_user.refresh_token)
    assert_401(locky_client.simulate_get(ME, headers={"Authorization": f"Bearer {token}"}))
    # The genuine token still works: the 401 was the forgery's.
    assert locky_client.simulate_get(ME, headers=locky_user.headers).status_code == 200


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Token abc", "Bearer a b"])
def test_malformed_authorization_headers(locky_client, header):
    assert_401(locky_client.simulate_get(ME, headers={"Authorization": header} if header else {}))


@pytest.mark.parametrize("kind", ["wrong typ", "expired", "tampered payload", "alg none"])
def test_forged_refresh_tokens(locky_client, locky_user, kind):
    """The refresh endpoint refuses forgeries too, and an access token in its place."""
    claims = {**claims_of(locky_user.refresh_token)}
    refresh = {
        "wrong typ": locky_user.access_token,
        "expired": jwt.encode({**claims, "exp": int(time.time()) - 60}, TEST_SECRET),
        "tampered payload": forge("tampered payload", locky_user.refresh_token, ""),
        "alg none": forge("alg none", locky_user.refresh_token, ""),
    }[kind]
    assert_401(locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": refresh}))


def test_swapped_session(locky_client, locky_user):
    """A correctly signed token naming one user and another user's session."""
    other = locky_client.account("other@example.com", STRONG)
    claims = {**claims_of(locky_user.access_token), "sid": claims_of(other.access_token)["sid"]}
    assert_401(locky_client.simulate_get(ME, headers={"Authorization": f"Bearer {jwt.encode(claims, TEST_SECRET)}"}))


def test_token_of_deleted_user(locky_client, locky_user, locky_admin):
    second = locky_client.login(locky_user.email)  # a second login of the same user
    result = locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_admin.headers)
    assert result.status_code == 204
    for token in (locky_user.access_token, second["access_token"]):
        assert_401(locky_client.simulate_get(ME, headers={"Authorization": f"Bearer {token}"}))
    for refresh in (locky_user.refresh_token, second["refresh_token"]):
        assert_401(locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": refresh}))


def test_token_of_user_who_deleted_themself(locky_client, locky_user):
    result = locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_user.headers)
    assert result.status_code == 204
    assert_401(locky_client.simulate_get(ME, headers=locky_user.headers))


def test_tokens_after_logout(locky_client, locky_user):
    other_login = locky_client.login(locky_user.email)
    assert locky_client.simulate_post("/v1/private/users/logout", headers=locky_user.headers).status_code == 204
    assert_401(locky_client.simulate_get(ME, headers=locky_user.headers))
    assert_401(locky_client.simulate_post("/v1/private/users/logout", headers=locky_user.headers))
    assert_401(locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": locky_user.refresh_token}))
    # Logging out ends that login only.
    assert locky_client.simulate_get(ME, headers={"Authorization": f"Bearer {other_login['access_token']}"}).status_code == 200


def test_reused_refresh_token_revokes_its_chain(locky_client, locky_user):
    refresh = lambda token: locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": token})  # noqa: E731
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
        assert_401(locky_client.simulate_get(ME, headers={"Authorization": f"Bearer {access}"}))
    bystanding = {"Authorization": f"Bearer {bystander['access_token']}"}
    assert locky_client.simulate_get(ME, headers=bystanding).status_code == 200


@pytest.mark.server
def test_attacks_on_a_real_server(tmp_path):
    """Through gunicorn: its header limits must not turn an oversized token into an
    HTML error page, and the answers are the same as in-process."""
    with served(tmp_path, f"sqlite:///{tmp_path / 'locky.sqlite'}", workers=2) as server:
        login = account(server, "real@example.com")
        for kind in ("oversized (8 KiB)", "alg none", "RS256 with an attacker's key", "expired",
                     "refresh token as access token", "tampered payload"):
            token = forge(kind, login["access_token"], login["refresh_token"])
            reply = http(server, "GET", ME, token=token)
            assert_401(reply)
        assert http(server, "GET", ME, token=login["access_token"]).status == 200
        assert http(server, "POST", "/v1/private/users/logout", token=login["access_token"]).status == 204
        assert_401(http(server, "GET", ME, token=login["access_token"]))
        assert_401(http(server, "POST", "/v1/public/users/refresh", {"refresh_token": login["refresh_token"]}))
