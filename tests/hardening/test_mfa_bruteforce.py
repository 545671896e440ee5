"""Issue 16: knowing the password buys no extra guesses at the second factor.

A right password used to forget the email's failed attempts; for an account with TOTP
that would let an attacker who has the password alternate "log in again" and "guess
codes" for ever. The count now stays until the second factor is right too.
"""

from __future__ import annotations

import pyotp

from harden import STRONG, RecordingClient


def start_login(client, email):
    result = client.simulate_post("/v1/public/users/login", json={"email": email, "password": STRONG})
    return result


def test_wrong_codes_lock_the_account_whatever_the_password_does(locky_client: RecordingClient):
    account = locky_client.account("mfa@example.com", STRONG)
    secret = locky_client.simulate_post("/v1/private/users/me/mfa/totp", headers=account.headers).json["secret"]
    totp = pyotp.TOTP(secret)
    assert locky_client.simulate_post("/v1/private/users/me/mfa/totp/confirm", headers=account.headers,
                                      json={"code": totp.now()}).status_code == 200
    codes_answered, refused = 0, []
    for _ in range(10):  # log in, then two wrong codes; again and again
        first = start_login(locky_client, "mfa@example.com")
        if first.status_code == 429:
            refused.append("login")
            break
        assert first.status_code == 200 and first.json["mfa_required"] is True
        for _ in range(2):
            wrong = locky_client.simulate_post("/v1/public/users/login/mfa",
                                               json={"mfa_token": first.json["mfa_token"], "code": "000000"})
            if wrong.status_code == 429:
                refused.append("code")
                break
            assert wrong.status_code == 401
            codes_answered += 1
    # LOCKY_LOGIN_MAX_FAILURES (5) wrong codes are answered, then the account is locked;
    # the right passwords in between bought no more.
    assert codes_answered == 5 and refused, (codes_answered, refused)
    assert start_login(locky_client, "mfa@example.com").status_code == 429


def test_a_right_second_factor_clears_the_count(locky_client: RecordingClient):
    account = locky_client.account("ok@example.com", STRONG)
    secret = locky_client.simulate_post("/v1/private/users/me/mfa/totp", headers=account.headers).json["secret"]
    totp = pyotp.TOTP(secret)
    recovery = locky_client.simulate_post("/v1/private/users/me/mfa/totp/confirm", headers=account.headers,
                                          json={"code": totp.now()}).json["recovery_codes"]
    for code in recovery[:3]:  # three full logins in a row: none of them adds up
        first = start_login(locky_client, "ok@example.com")
        assert first.status_code == 200 and first.json["mfa_required"] is True
        wrong = locky_client.simulate_post("/v1/public/users/login/mfa",
                                           json={"mfa_token": first.json["mfa_token"], "code": "000000"})
        assert wrong.status_code == 401
        done = locky_client.simulate_post("/v1/public/users/login/mfa",
                                          json={"mfa_token": first.json["mfa_token"], "code": code})
        assert done.status_code == 200 and done.json["token_type"] == "Bearer"
