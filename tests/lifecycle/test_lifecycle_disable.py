"""Disabling accounts (docs/http/accounts.md): an admin's ``PUT {"disabled": true}``
ends every login of the user (access and refresh tokens 401); the user's login answers
403 ``Account disabled`` after the password check (a wrong password stays 401);
``{"disabled": false}`` lets them log in again. Users cannot disable themselves: a plain
user's attempt is 403, an admin's is 400 ``{"disabled": ...}``; the value is a JSON
boolean."""

from __future__ import annotations

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_error, assert_fields, assert_forbidden
from lifecycle_helpers import USERS, login, me, me_status, put_user, refresh_status, sender_settled


def test_an_admin_disables_a_user_and_every_login_ends(locky_client, locky_admin):
    ada = locky_client.account("ada@example.com")
    other = locky_client.login("ada@example.com")
    result = put_user(locky_client, locky_admin, ada.id, {"disabled": True})
    assert result.status_code == 200, result.text
    assert result.json["disabled"] is True
    assert result.json["email"] == "ada@example.com"
    for access, refresh in ((ada.access_token, ada.refresh_token), (other["access_token"], other["refresh_token"])):
        assert me_status(locky_client, access) == 401
        assert refresh_status(locky_client, refresh) == 401
    # Others still see the account, flagged.
    fetched = locky_client.simulate_get(f"{USERS}/{ada.id}", headers=locky_admin.headers)
    assert fetched.status_code == 200 and fetched.json["disabled"] is True
    listed = locky_client.simulate_get(USERS, params={"email": "ada@example.com"}, headers=locky_admin.headers)
    assert [u["disabled"] for u in listed.json["users"]] == [True]


def test_a_disabled_users_login_is_403_after_the_password_check(locky_client, locky_admin):
    ada = locky_client.account("ada@example.com")
    assert put_user(locky_client, locky_admin, ada.id, {"disabled": True}).status_code == 200
    refused = login(locky_client, "ada@example.com", PASSWORD)
    assert_error(refused, 403, "Account disabled")
    assert not {"access_token", "refresh_token", "mfa_token"} & set(refused.json)
    assert_error(login(locky_client, "ada@example.com", "wrong password"), 401, "401 Unauthorized")


def test_enabling_again_lets_the_user_log_in_but_old_tokens_stay_dead(locky_client, locky_admin):
    ada = locky_client.account("ada@example.com")
    assert put_user(locky_client, locky_admin, ada.id, {"disabled": True}).status_code == 200
    result = put_user(locky_client, locky_admin, ada.id, {"disabled": False})
    assert result.status_code == 200, result.text
    assert result.json["disabled"] is False
    tokens = login(locky_client, "ada@example.com", PASSWORD)
    assert tokens.status_code == 200, tokens.text
    assert tokens.json["user"]["disabled"] is False
    assert me(locky_client, tokens.json["access_token"])["disabled"] is False
    assert me_status(locky_client, ada.access_token) == 401
    assert refresh_status(locky_client, ada.refresh_token) == 401


def test_a_user_cannot_disable_themself(locky_client, locky_user):
    assert_forbidden(put_user(locky_client, locky_user, locky_user.id, {"disabled": True}))
    assert me(locky_client, locky_user)["disabled"] is False
    assert me_status(locky_client, locky_user.access_token) == 200


def test_a_user_cannot_disable_someone_else(locky_client, locky_user):
    other = locky_client.account("ada@example.com")
    assert_forbidden(put_user(locky_client, locky_user, other.id, {"disabled": True}))
    assert me(locky_client, other)["disabled"] is False


def test_an_admin_cannot_disable_themself(locky_client, locky_admin):
    assert_fields(put_user(locky_client, locky_admin, locky_admin.id, {"disabled": True}), "disabled")
    assert me(locky_client, locky_admin)["disabled"] is False
    assert me_status(locky_client, locky_admin.access_token) == 200


@pytest.mark.parametrize("value", ["yes", "true", 1, None])
def test_disabled_must_be_a_boolean(locky_client, locky_admin, value):
    ada = locky_client.account("ada@example.com")
    assert_fields(put_user(locky_client, locky_admin, ada.id, {"disabled": value}), "disabled")
    assert me(locky_client, ada)["disabled"] is False


def test_a_disabled_user_cannot_reset_their_way_back_in(locky_client, locky_admin):
    ada = locky_client.account("ada@example.com")
    assert put_user(locky_client, locky_admin, ada.id, {"disabled": True}).status_code == 200
    result = locky_client.simulate_post("/v1/public/users/password/forgot", json={"email": "ada@example.com"})
    assert result.status_code == 202 and result.json == {"status": "accepted"}
    sender_settled(locky_client)  # whether a reset code is sent to a disabled account is not specified
    messages = locky_client.mailbox.messages(to="ada@example.com", purpose="reset")
    password = PASSWORD
    for message in messages:
        answer = locky_client.simulate_post("/v1/public/users/password/reset",
                                            json={"token": locky_client.mailbox.token(message),
                                                  "password": "back in again ok"})
        if answer.status_code == 204:
            password = "back in again ok"
    # Whatever the reset did, the account stays disabled.
    assert_error(login(locky_client, "ada@example.com", password), 403, "Account disabled")
