"""TOTP second factor over HTTP (docs/http/accounts.md; RFC 6238 with SHA-1, 6 digits,
30-second steps, ±1 step, each code accepted once). The codes come from this suite's own
RFC 6238 implementation (checked against the RFC's test vectors), not from the server's
library. Enrolment: ``POST /me/mfa/totp`` (pending secret, replaced by a new start),
``POST /me/mfa/totp/confirm`` (10 recovery codes, ``mfa_enabled``); login then answers
``mfa_required`` with a single-use ``mfa_token`` and no tokens, and ``POST
/v1/public/users/login/mfa`` trades it and a TOTP or recovery code for the token body;
wrong codes count toward the login lockout; ``DELETE /me/mfa/totp`` turns it off."""

from __future__ import annotations

import base64
import re
import secrets
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_error, assert_fields
from lifecycle_helpers import (LOGIN_MFA, ME, TOKEN_KEYS, TOTP, TOTP_CONFIRM, USERS, Authenticator, hotp, login, me,
                               me_status, refresh_status, totp)

METHODS = ["totp", "recovery_code"]


# -- the suite's own TOTP ---------------------------------------------------------------


@pytest.mark.parametrize("unix_time, expected", [
    (59, "94287082"), (1111111109, "07081804"), (1111111111, "14050471"),
    (1234567890, "89005924"), (2000000000, "69279037"), (20000000000, "65353130"),
])
def test_the_suites_totp_matches_rfc_6238_appendix_b_sha1(unix_time, expected):
    assert totp(b"12345678901234567890", unix_time, digits=8) == expected


def test_the_suites_hotp_matches_rfc_4226_appendix_d():
    expected = ["755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"]
    assert [hotp(b"12345678901234567890", counter) for counter in range(10)] == expected


# -- helpers --------------------------------------------------------------------------


def start(client, account):
    result = client.simulate_post(TOTP, json={}, headers=account.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"secret", "otpauth_uri"}, result.json
    return result.json


def confirm(client, account, code):
    return client.simulate_post(TOTP_CONFIRM, json={"code": code}, headers=account.headers)


def disable(client, account, code):
    return client.simulate_delete(TOTP, json={"code": code}, headers=account.headers)


def mfa_login(client, mfa_token, code):
    return client.simulate_post(LOGIN_MFA, json={"mfa_token": mfa_token, "code": code})


def challenge(client, email="ada@example.com", password=PASSWORD) -> str:
    """Log in an MFA user: the ``mfa_token`` of the 200 answer that holds no tokens."""
    result = login(client, email, password)
    assert result.status_code == 200, result.text
    body = result.json
    assert body["mfa_required"] is True, body
    assert body["methods"] == METHODS, body
    assert isinstance(body["mfa_token"], str) and len(body["mfa_token"]) >= 16, body
    assert not {"access_token", "refresh_token"} & set(body), body
    return body["mfa_token"]


def assert_token_body(client, result, email="ada@example.com") -> dict:
    assert result.status_code == 200, result.text
    body = result.json
    assert set(body) == TOKEN_KEYS, body
    assert body["token_type"] == "Bearer"
    assert isinstance(body["expires_in"], int) and body["expires_in"] > 0
    assert body["user"]["email"] == email and body["user"]["mfa_enabled"] is True
    assert me(client, body["access_token"])["email"] == email
    return body


def assert_unauthorized(result) -> None:
    assert_error(result, 401, "401 Unauthorized")
    assert "access_token" not in result.text


class Enrolled:
    def __init__(self, account, authenticator, recovery_codes):
        self.account, self.authenticator, self.recovery_codes = account, authenticator, recovery_codes


@pytest.fixture
def enrolled(locky_client) -> Enrolled:
    """ada@example.com, logged in, with TOTP on (the confirm used the step before now)."""
    account = locky_client.account("ada@example.com")
    pending = start(locky_client, account)
    authenticator = Authenticator(pending["secret"])
    result = confirm(locky_client, account, authenticator.code())
    assert result.status_code == 200, result.text
    return Enrolled(account, authenticator, result.json["recovery_codes"])


# -- enrolment -------------------------------------------------------------------------


def test_start_gives_a_base32_secret_and_its_otpauth_uri(locky_client):
    account = locky_client.account("ada@example.com")
    pending = start(locky_client, account)
    secret = pending["secret"]
    assert re.fullmatch(r"[A-Z2-7]+=*", secret), secret
    assert len(base64.b32decode(secret + "=" * (-len(secret) % 8))) >= 16  # 128 bits or more
    uri = urlsplit(pending["otpauth_uri"])
    assert (uri.scheme, uri.netloc) == ("otpauth", "totp"), pending["otpauth_uri"]
    query = {k: v[0] for k, v in parse_qs(uri.query).items()}
    assert query["secret"] == secret
    assert query.get("algorithm", "SHA1").upper() == "SHA1"
    assert query.get("digits", "6") == "6" and query.get("period", "30") == "30"
    assert "ada@example.com" in unquote(uri.path)
    # Pending is not enabled.
    assert me(locky_client, account)["mfa_enabled"] is False
    assert login(locky_client, "ada@example.com").json.keys() >= {"access_token", "refresh_token"}


def test_starting_again_replaces_the_pending_secret(locky_client):
    account = locky_client.account("ada@example.com")
    first, second = start(locky_client, account), start(locky_client, account)
    assert first["secret"] != second["secret"]
    old = Authenticator(first["secret"])
    assert_fields(confirm(locky_client, account, old.code()), "code")
    assert me(locky_client, account)["mfa_enabled"] is False
    new = Authenticator(second["secret"])
    assert confirm(locky_client, account, new.code()).status_code == 200


def test_confirm_gives_ten_distinct_recovery_codes_and_enables(locky_client):
    account = locky_client.account("ada@example.com")
    authenticator = Authenticator(start(locky_client, account)["secret"])
    result = confirm(locky_client, account, authenticator.code())
    assert result.status_code == 200, result.text
    assert set(result.json) == {"recovery_codes"}
    codes = result.json["recovery_codes"]
    assert isinstance(codes, list) and len(codes) == 10
    assert all(isinstance(c, str) and len(c) >= 8 for c in codes), codes
    assert len(set(codes)) == 10
    assert me(locky_client, account)["mfa_enabled"] is True


@pytest.mark.parametrize("wrong", ["wrong", "abcdef", "12345", "1234567", ""])
def test_confirm_with_a_malformed_code_is_400_and_keeps_it_pending(locky_client, wrong):
    account = locky_client.account("ada@example.com")
    authenticator = Authenticator(start(locky_client, account)["secret"])
    assert_fields(confirm(locky_client, account, wrong), "code")
    assert confirm(locky_client, account, authenticator.code()).status_code == 200


def test_confirm_with_a_wrong_code_is_400_and_keeps_it_pending(locky_client):
    account = locky_client.account("ada@example.com")
    authenticator = Authenticator(start(locky_client, account)["secret"])
    for wrong in (authenticator.wrong(), authenticator.at(Authenticator.now_step() - 3),
                  authenticator.at(Authenticator.now_step() + 3)):
        assert_fields(confirm(locky_client, account, wrong), "code")
    assert me(locky_client, account)["mfa_enabled"] is False
    assert confirm(locky_client, account, authenticator.code()).status_code == 200
    assert me(locky_client, account)["mfa_enabled"] is True


def test_confirm_with_nothing_pending_is_400_code(locky_client):
    account = locky_client.account("ada@example.com")
    assert_fields(confirm(locky_client, account, "123456"), "code")
    assert_fields(locky_client.simulate_post(TOTP_CONFIRM, json={}, headers=account.headers), "code")


def test_starting_while_enabled_is_409(locky_client, enrolled):
    result = locky_client.simulate_post(TOTP, json={}, headers=enrolled.account.headers)
    assert result.status_code == 409, result.text
    assert isinstance(result.json.get("title"), str)
    # The enabled factor is untouched.
    token = challenge(locky_client)
    assert_token_body(locky_client, mfa_login(locky_client, token, enrolled.authenticator.code()))


def test_the_mfa_routes_need_a_login(locky_client):
    for result in (locky_client.simulate_post(TOTP, json={}),
                   locky_client.simulate_post(TOTP_CONFIRM, json={"code": "123456"}),
                   locky_client.simulate_delete(TOTP, json={"code": "123456"})):
        assert_error(result, 401, "401 Unauthorized")
        assert result.headers["www-authenticate"] == "Bearer"


# -- login ----------------------------------------------------------------------------


def test_login_asks_for_the_second_factor_then_gives_the_tokens(locky_client, enrolled):
    token = challenge(locky_client)
    body = assert_token_body(locky_client, mfa_login(locky_client, token, enrolled.authenticator.code()))
    assert refresh_status(locky_client, body["refresh_token"]) == 200
    # The mfa_token is single-use, even with a good code.
    assert_unauthorized(mfa_login(locky_client, token, enrolled.recovery_codes[0]))


def test_a_wrong_password_gets_no_mfa_token(locky_client, enrolled):
    result = login(locky_client, "ada@example.com", "wrong password")
    assert_unauthorized(result)
    assert "mfa_token" not in result.json


def test_a_totp_code_is_accepted_once(locky_client, enrolled):
    authenticator = enrolled.authenticator
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), authenticator.code()))
    assert_unauthorized(mfa_login(locky_client, challenge(locky_client), authenticator.used()))
    # The next step's code still works.
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), authenticator.code()))


def test_wrong_and_out_of_window_codes_are_401(locky_client, enrolled):
    authenticator = enrolled.authenticator
    now = Authenticator.now_step()
    # Two steps back, three ahead: outside the ±1 window even if a step passes meanwhile.
    for code in (authenticator.wrong(), authenticator.at(now - 2), authenticator.at(now + 3)):
        assert_unauthorized(mfa_login(locky_client, challenge(locky_client), code))
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), authenticator.code()))


def test_wrong_codes_count_toward_the_login_lockout(locky_client, enrolled):
    for n in range(5):
        token = challenge(locky_client)
        assert_unauthorized(mfa_login(locky_client, token, enrolled.authenticator.wrong()))
    result = login(locky_client, "ada@example.com", PASSWORD)
    assert_error(result, 429, "429 Too Many Requests")
    assert result.headers["retry-after"].isdigit()


def test_wrong_codes_on_one_mfa_token_count_toward_the_lockout(locky_client, enrolled):
    token = challenge(locky_client)
    for n in range(5):
        assert_unauthorized(mfa_login(locky_client, token, enrolled.authenticator.wrong()))
    # Locked: the right code on the same token, and a new login with the right password.
    assert_error(mfa_login(locky_client, token, enrolled.authenticator.code()), 429, "429 Too Many Requests")
    assert_error(login(locky_client, "ada@example.com", PASSWORD), 429, "429 Too Many Requests")


def test_the_code_that_confirmed_enrolment_is_spent(locky_client, enrolled):
    assert_unauthorized(mfa_login(locky_client, challenge(locky_client), enrolled.authenticator.used()))


def test_a_code_spent_on_login_does_not_turn_it_off(locky_client, enrolled):
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), enrolled.authenticator.code()))
    assert_fields(disable(locky_client, enrolled.account, enrolled.authenticator.used()), "code")
    assert me(locky_client, enrolled.account)["mfa_enabled"] is True


def test_a_password_reset_does_not_skip_the_second_factor(locky_client, enrolled):
    assert locky_client.simulate_post("/v1/public/users/password/forgot",
                                      json={"email": "ada@example.com"}).status_code == 202
    code = locky_client.mailbox.token(locky_client.mailbox.wait("ada@example.com", purpose="reset"))
    assert locky_client.simulate_post("/v1/public/users/password/reset",
                                      json={"token": code, "password": "a fresh start 2024"}).status_code == 204
    token = challenge(locky_client, password="a fresh start 2024")
    assert_token_body(locky_client, mfa_login(locky_client, token, enrolled.authenticator.code()))


def test_a_user_disabled_between_the_steps_gets_no_tokens(locky_client, locky_admin, enrolled):
    token = challenge(locky_client)
    disabled = locky_client.simulate_put(f"/v1/private/users/{enrolled.account.id}", json={"disabled": True},
                                         headers=locky_admin.headers)
    assert disabled.status_code == 200, disabled.text
    result = mfa_login(locky_client, token, enrolled.authenticator.code())
    assert result.status_code in (401, 403), result.text
    assert "access_token" not in result.json


def test_a_user_deleted_between_the_steps_gets_no_tokens(locky_client, enrolled):
    token = challenge(locky_client)
    deleted = locky_client.simulate_delete(f"/v1/private/users/{enrolled.account.id}",
                                           headers=enrolled.account.headers)
    assert deleted.status_code == 204
    assert_unauthorized(mfa_login(locky_client, token, enrolled.recovery_codes[0]))


def test_a_recovery_code_works_once(locky_client, enrolled):
    code = enrolled.recovery_codes[3]
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), code))
    assert_unauthorized(mfa_login(locky_client, challenge(locky_client), code))
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), enrolled.recovery_codes[4]))


def test_anything_but_a_fresh_mfa_token_is_401(locky_client, enrolled):
    code = enrolled.recovery_codes[0]
    for bogus in ("nonsense", secrets.token_urlsafe(32), secrets.token_urlsafe(300)):
        assert_unauthorized(mfa_login(locky_client, bogus, code))
    # A JWT is no mfa_token either: 401, or 400 when it is longer than an mfa_token may be
    # (the request schema caps codes at 512 characters; a JWT with a kid is longer).
    for jwt in (enrolled.account.access_token, enrolled.account.refresh_token):
        result = mfa_login(locky_client, jwt, code)
        if result.status_code == 400 and len(jwt) > 512:
            assert_fields(result, "mfa_token")
        else:
            assert_unauthorized(result)
    # Refused attempts did not spend the recovery code.
    assert_token_body(locky_client, mfa_login(locky_client, challenge(locky_client), code))


def test_an_mfa_token_is_no_access_token(locky_client, enrolled):
    token = challenge(locky_client)
    assert me_status(locky_client, token) == 401
    assert refresh_status(locky_client, token) == 401


def test_another_users_mfa_token_does_not_take_this_users_code(locky_client, enrolled):
    bob = locky_client.account("bob@example.com")
    bob_totp = Authenticator(start(locky_client, bob)["secret"])
    assert confirm(locky_client, bob, bob_totp.code()).status_code == 200
    bob_token = challenge(locky_client, "bob@example.com")
    result = mfa_login(locky_client, bob_token, enrolled.recovery_codes[0])
    assert_unauthorized(result)


@pytest.mark.parametrize("body, fields", [({}, ("mfa_token", "code")), ({"mfa_token": "x"}, ("code",)),
                                          ({"code": "123456"}, ("mfa_token",))])
def test_login_mfa_with_missing_fields_is_400(locky_client, body, fields):
    assert_fields(locky_client.simulate_post(LOGIN_MFA, json=body), *fields)


# -- turning it off ----------------------------------------------------------------------


def test_delete_with_a_totp_code_turns_it_off(locky_client, enrolled):
    result = disable(locky_client, enrolled.account, enrolled.authenticator.code())
    assert result.status_code == 204, result.text
    assert me(locky_client, enrolled.account)["mfa_enabled"] is False
    direct = login(locky_client, "ada@example.com")
    assert direct.status_code == 200 and set(direct.json) == TOKEN_KEYS, direct.text
    assert direct.json["user"]["mfa_enabled"] is False


def test_delete_with_a_recovery_code_turns_it_off(locky_client, enrolled):
    result = disable(locky_client, enrolled.account, enrolled.recovery_codes[9])
    assert result.status_code == 204, result.text
    assert me(locky_client, enrolled.account)["mfa_enabled"] is False


def test_delete_with_a_wrong_code_is_400_code(locky_client, enrolled):
    assert_fields(disable(locky_client, enrolled.account, enrolled.authenticator.wrong()), "code")
    assert_fields(disable(locky_client, enrolled.account, "not-a-recovery-code"), "code")
    assert_fields(locky_client.simulate_delete(TOTP, json={}, headers=enrolled.account.headers), "code")
    assert me(locky_client, enrolled.account)["mfa_enabled"] is True


def test_delete_when_not_enabled_is_409(locky_client, locky_user):
    result = disable(locky_client, locky_user, "123456")
    assert result.status_code == 409, result.text
    assert isinstance(result.json.get("title"), str)
    # Pending is not enabled either.
    start(locky_client, locky_user)
    assert disable(locky_client, locky_user, "123456").status_code == 409


def test_after_turning_it_off_it_can_be_turned_on_again(locky_client, enrolled):
    assert disable(locky_client, enrolled.account, enrolled.recovery_codes[0]).status_code == 204
    fresh = Authenticator(start(locky_client, enrolled.account)["secret"])
    result = confirm(locky_client, enrolled.account, fresh.code())
    assert result.status_code == 200, result.text
    assert not set(result.json["recovery_codes"]) & set(enrolled.recovery_codes)
    # The old recovery codes are gone with the old factor.
    assert_unauthorized(mfa_login(locky_client, challenge(locky_client), enrolled.recovery_codes[1]))


# -- secrets stay secret ---------------------------------------------------------------------


def test_the_secret_and_codes_never_show_in_user_bodies(locky_client, locky_admin, enrolled):
    secret = enrolled.authenticator.secret
    account = enrolled.account
    bodies = [
        locky_client.simulate_get(ME, headers=account.headers),
        locky_client.simulate_get(f"{USERS}/{account.id}", headers=locky_admin.headers),
        locky_client.simulate_get(USERS, headers=locky_admin.headers),
        locky_client.simulate_get(USERS, params={"email": "ada@example.com"}, headers=account.headers),
        login(locky_client, "ada@example.com"),
        locky_client.simulate_put(f"/v1/private/users/{account.id}", json={"name": "Ada K"}, headers=account.headers),
    ]
    for result in bodies:
        assert result.status_code == 200, result.text
        assert secret not in result.text and secret.lower() not in result.text
        assert not any(code in result.text for code in enrolled.recovery_codes)
        for key in ("secret", "totp_secret", "otpauth_uri", "recovery_codes"):
            assert key not in result.text
