"""Codes expire (docs/http/accounts.md: ``verify_ttl``, ``reset_ttl``; the ``mfa_token``
lives 5 minutes). Nobody waits a TTL out in a test: these move the stored expiry of the
codes into the past in the SQLite database (the ``locky_codes`` table of the bundled
storage) and check what HTTP answers. Skipped on other databases."""

from __future__ import annotations

import sqlite3

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_error, assert_fields
from lifecycle_helpers import LOGIN_MFA, TOTP, TOTP_CONFIRM, Authenticator, login, mail_code, me, reset, reset_code, verify


@pytest.fixture
def expire(locky_database_url):
    if not locky_database_url.startswith("sqlite:///"):
        pytest.skip("moves expiry times in the SQLite database")
    path = locky_database_url.removeprefix("sqlite:///")

    def run(purpose: str) -> None:
        with sqlite3.connect(path) as db:
            changed = db.execute("UPDATE locky_codes SET expires_at = '2001-01-01 00:00:00.000000'"
                                 " WHERE purpose = ?", (purpose,)).rowcount
        assert changed >= 1, f"no {purpose} code stored"

    return run


def test_an_expired_verify_code_is_400_token(locky_client, expire):
    account = locky_client.account("ada@example.com")
    code = mail_code(locky_client, "ada@example.com", "verify")
    expire("verify")
    assert_fields(verify(locky_client, code), "token")
    assert me(locky_client, account)["email_verified"] is False


def test_an_expired_reset_code_is_400_token(locky_client, expire):
    locky_client.register("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    expire("reset")
    assert_fields(reset(locky_client, code, "a fresh start 2024"), "token")
    assert login(locky_client, "ada@example.com", PASSWORD).status_code == 200


def test_an_expired_mfa_token_is_401(locky_client, expire):
    account = locky_client.account("ada@example.com")
    authenticator = Authenticator(locky_client.simulate_post(TOTP, json={}, headers=account.headers).json["secret"])
    confirmed = locky_client.simulate_post(TOTP_CONFIRM, json={"code": authenticator.code()}, headers=account.headers)
    assert confirmed.status_code == 200, confirmed.text
    token = login(locky_client, "ada@example.com").json["mfa_token"]
    expire("mfa")
    result = locky_client.simulate_post(LOGIN_MFA, json={"mfa_token": token, "code": authenticator.code()})
    assert_error(result, 401, "401 Unauthorized")
