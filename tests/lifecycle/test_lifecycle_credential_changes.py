"""Changing a password or an email through ``PUT /v1/private/users/{id}`` (docs/http/accounts.md): your own change needs ``current_password`` (missing or wrong: 400
``{"current_password": ...}``); an own password change keeps the caller's login and ends
every other login of the user; an admin changing another user's password needs no
``current_password`` and ends all of that user's logins."""

from __future__ import annotations

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_fields
from lifecycle_helpers import login, me, me_status, put_user, refresh_status

NEW = "a brand new passphrase"


@pytest.mark.parametrize("change", [{"password": NEW}, {"email": "ada.king@example.com"},
                                    {"password": NEW, "email": "ada.king@example.com"}],
                         ids=["password", "email", "both"])
@pytest.mark.parametrize("current", [None, "wrong password", ""], ids=["missing", "wrong", "empty"])
def test_an_own_change_needs_the_current_password(locky_client, change, current):
    account = locky_client.account("ada@example.com")
    body = dict(change)
    if current is not None:
        body["current_password"] = current
    result = put_user(locky_client, account, account.id, body)
    assert_fields(result, "current_password")
    assert PASSWORD not in result.text and NEW not in result.text
    user = me(locky_client, account)
    assert user["email"] == "ada@example.com"
    assert login(locky_client, "ada@example.com", PASSWORD).status_code == 200


def test_a_name_change_needs_no_current_password(locky_client):
    account = locky_client.account("ada@example.com")
    result = put_user(locky_client, account, account.id, {"name": "Ada King"})
    assert result.status_code == 200, result.text


def test_an_own_password_change_keeps_this_login_and_ends_the_others(locky_client):
    account = locky_client.account("ada@example.com")
    other = locky_client.login("ada@example.com")
    result = put_user(locky_client, account, account.id, {"password": NEW, "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    assert me_status(locky_client, account.access_token) == 200
    assert me_status(locky_client, other["access_token"]) == 401
    assert refresh_status(locky_client, other["refresh_token"]) == 401
    assert refresh_status(locky_client, account.refresh_token) == 200
    assert login(locky_client, "ada@example.com", NEW).status_code == 200
    assert login(locky_client, "ada@example.com", PASSWORD).status_code == 401


def test_an_admin_changes_a_password_without_current_password_and_ends_every_login(locky_client, locky_admin):
    account = locky_client.account("ada@example.com")
    other = locky_client.login("ada@example.com")
    result = put_user(locky_client, locky_admin, account.id, {"password": NEW})
    assert result.status_code == 200, result.text
    for access, refresh in ((account.access_token, account.refresh_token),
                            (other["access_token"], other["refresh_token"])):
        assert me_status(locky_client, access) == 401
        assert refresh_status(locky_client, refresh) == 401
    assert me_status(locky_client, locky_admin.access_token) == 200
    assert login(locky_client, "ada@example.com", NEW).status_code == 200


def test_an_admin_changing_their_own_password_needs_the_current_password(locky_client, locky_admin):
    result = put_user(locky_client, locky_admin, locky_admin.id, {"password": NEW})
    assert_fields(result, "current_password")


def test_wrong_current_passwords_count_as_failed_logins(locky_client):
    account = locky_client.account("ada@example.com")
    for n in range(5):
        result = put_user(locky_client, account, account.id, {"password": NEW, "current_password": f"wrong {n}"})
        assert_fields(result, "current_password")
    assert login(locky_client, "ada@example.com", PASSWORD).status_code == 429
