"""Password reset over HTTP (docs/http/accounts.md): ``password/forgot`` answers 202
``{"status": "accepted"}`` for every address and mails a ``reset`` code only to a live
account, at most 3 per account per hour; ``password/reset`` takes the code once, sets
the password (by the password rules), ends every login of the user and clears the
login lockout. Verification and reset codes are not interchangeable."""

from __future__ import annotations

import re

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_error, assert_fields
from lifecycle_helpers import (ACCEPTED, FORGOT, RESET, assert_mail_settles, delete_user, forgot, login, mail_code,
                               mail_count, me_status, refresh_status, reset, reset_code, verify)

NEW = "a fresh start 2024"


def test_forgot_answers_alike_for_known_and_unknown_addresses(locky_client):
    locky_client.register("ada@example.com")
    known, unknown = forgot(locky_client, "ada@example.com"), forgot(locky_client, "nobody@example.com")
    for result in (known, unknown):
        assert result.status_code == 202, result.text
        assert result.json == ACCEPTED
    assert known.text == unknown.text
    assert known.headers.get("content-type") == unknown.headers.get("content-type")
    message = locky_client.mailbox.wait("ada@example.com", purpose="reset")
    assert message["X-Locky-Purpose"] == "reset"
    code = locky_client.mailbox.token(message)
    assert len(code) >= 22, code
    assert_mail_settles(locky_client, "nobody@example.com", None, 0)
    assert mail_count(locky_client, "ada@example.com", "reset") == 1


def test_forgot_takes_the_email_in_any_case(locky_client):
    locky_client.register("ada@example.com")
    assert forgot(locky_client, " Ada@Example.COM ").status_code == 202
    assert mail_code(locky_client, "ada@example.com", "reset")


def test_a_deleted_account_gets_no_reset_message(locky_client):
    ada = locky_client.account("ada@example.com")
    delete_user(locky_client, ada, ada.id)
    assert forgot(locky_client, "ada@example.com").json == ACCEPTED
    assert_mail_settles(locky_client, "ada@example.com", "reset", 0)


def test_at_most_three_reset_messages_per_account_per_hour(locky_client):
    locky_client.register("ada@example.com")
    locky_client.register("bob@example.com")
    for _ in range(4):
        result = forgot(locky_client, "ada@example.com")
        assert result.status_code == 202 and result.json == ACCEPTED, result.text
    mail_code(locky_client, "ada@example.com", "reset", count=3)
    # The limit is per account: another one still gets its message.
    assert forgot(locky_client, "bob@example.com").status_code == 202
    assert mail_code(locky_client, "bob@example.com", "reset")
    assert_mail_settles(locky_client, "ada@example.com", "reset", 3)


@pytest.mark.parametrize("body", [{"email": "not-an-email"}, {"email": ""}, {"email": None}, {}])
def test_forgot_with_a_malformed_email_is_400_email(locky_client, body):
    assert_fields(locky_client.simulate_post(FORGOT, json=body), "email")


def test_forgot_with_an_unknown_field_is_400(locky_client):
    assert_fields(locky_client.simulate_post(FORGOT, json={"email": "ada@example.com", "password": "x"}), "password")


def test_with_a_public_url_the_reset_message_links_to_it(make_client):
    client = make_client(public_url="https://auth.example.com/")
    client.register("ada@example.com")
    assert forgot(client, "ada@example.com").status_code == 202
    message = client.mailbox.wait("ada@example.com", purpose="reset")
    code = client.mailbox.token(message)
    text = message.get_body(preferencelist=("plain",)).get_content()
    assert any(code in link for link in re.findall(r"https://auth\.example\.com\S*", text)), text
    assert "https://auth.example.com//" not in text


# -- reset --------------------------------------------------------------------------


def test_reset_sets_the_password_and_ends_every_login(locky_client):
    ada = locky_client.account("ada@example.com")
    second = locky_client.login("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    result = reset(locky_client, code, NEW)
    assert result.status_code == 204, result.text
    assert result.text == ""
    assert login(locky_client, "ada@example.com", NEW).status_code == 200
    assert_error(login(locky_client, "ada@example.com", PASSWORD), 401, "401 Unauthorized")
    for access, refresh in ((ada.access_token, ada.refresh_token),
                            (second["access_token"], second["refresh_token"])):
        assert me_status(locky_client, access) == 401
        assert refresh_status(locky_client, refresh) == 401


def test_a_reset_code_works_once(locky_client):
    locky_client.register("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    assert reset(locky_client, code, NEW).status_code == 204
    assert_fields(reset(locky_client, code, "yet another passphrase"), "token")
    assert login(locky_client, "ada@example.com", NEW).status_code == 200
    assert login(locky_client, "ada@example.com", "yet another passphrase").status_code == 401


def test_each_of_several_reset_codes_works_until_one_is_used(locky_client):
    locky_client.register("ada@example.com")
    first = reset_code(locky_client, "ada@example.com")
    second = reset_code(locky_client, "ada@example.com", count=2)
    assert first != second
    assert reset(locky_client, second, NEW).status_code == 204
    assert login(locky_client, "ada@example.com", NEW).status_code == 200


def test_reset_clears_the_login_lockout(locky_client):
    locky_client.register("ada@example.com")
    for n in range(5):
        assert login(locky_client, "ada@example.com", "wrong password").status_code == 401, n
    locked = login(locky_client, "ada@example.com", PASSWORD)
    assert_error(locked, 429, "429 Too Many Requests")
    code = reset_code(locky_client, "ada@example.com")
    assert reset(locky_client, code, NEW).status_code == 204
    result = login(locky_client, "ada@example.com", NEW)
    assert result.status_code == 200, result.text


def test_a_verify_code_is_no_reset_code_and_a_reset_code_no_verify_code(locky_client):
    ada = locky_client.account("ada@example.com")
    verify_code = mail_code(locky_client, "ada@example.com", "verify")
    code = reset_code(locky_client, "ada@example.com")
    assert_fields(reset(locky_client, verify_code, NEW), "token")
    assert login(locky_client, "ada@example.com", NEW).status_code == 401
    assert_fields(verify(locky_client, code), "token")
    assert locky_client.simulate_get("/v1/internal/users/me", headers=ada.headers).json["email_verified"] is False
    # Each still works for what it was made for.
    assert verify(locky_client, verify_code).status_code == 204
    assert reset(locky_client, code, NEW).status_code == 204


@pytest.mark.parametrize("weak", ["password1", "PASSWORD1", "short", "€" * 25, "my-zebrafish-pass", "Zebra Crossing Zebra"])
def test_a_weak_new_password_is_400_and_the_code_stays_usable(locky_client, weak):
    locky_client.register("zebrafish@example.com", name="Zebra Crossing")
    code = reset_code(locky_client, "zebrafish@example.com")
    result = reset(locky_client, code, weak)
    assert_fields(result, "password")
    assert weak not in result.text
    assert login(locky_client, "zebrafish@example.com", PASSWORD).status_code == 200
    assert reset(locky_client, code, NEW).status_code == 204
    assert login(locky_client, "zebrafish@example.com", NEW).status_code == 200


@pytest.mark.parametrize("token", ["nonsense", "A" * 43, ""])
def test_a_bad_reset_code_is_400_token(locky_client, token):
    assert_fields(reset(locky_client, token, NEW), "token")


@pytest.mark.parametrize("body, fields", [
    ({}, ("token", "password")),
    ({"password": NEW}, ("token",)),
    ({"token": None, "password": NEW}, ("token",)),
])
def test_missing_reset_fields_are_400(locky_client, body, fields):
    assert_fields(locky_client.simulate_post(RESET, json=body), *fields)


def test_a_missing_password_keeps_the_code(locky_client):
    locky_client.register("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    assert_fields(locky_client.simulate_post(RESET, json={"token": code}), "password")
    assert_fields(locky_client.simulate_post(RESET, json={"token": code, "password": NEW, "email": "x@y.z"}), "email")
    assert reset(locky_client, code, NEW).status_code == 204


def test_a_deleted_accounts_reset_code_does_not_work(locky_client):
    ada = locky_client.account("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    delete_user(locky_client, ada, ada.id)
    assert_fields(reset(locky_client, code, NEW), "token")
    assert login(locky_client, "ada@example.com", NEW).status_code == 401


def test_a_reset_code_sent_before_an_email_change_does_not_work_after_it(locky_client):
    ada = locky_client.account("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    moved = locky_client.simulate_put(f"/v1/private/users/{ada.id}", headers=ada.headers,
                                      json={"email": "ada.king@example.com", "current_password": PASSWORD})
    assert moved.status_code == 200, moved.text
    assert_fields(reset(locky_client, code, NEW), "token")
    assert login(locky_client, "ada.king@example.com", PASSWORD).status_code == 200


def test_a_reset_ends_with_a_notice_to_the_accounts_address(locky_client):
    """docs/http/accounts.md: whoever used the code, the owner hears of the reset at the address."""
    locky_client.register("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    assert reset(locky_client, code, "a brand new passphrase").status_code == 204
    notice = locky_client.mailbox.wait("ada@example.com", purpose="reset-done")
    assert notice["Subject"] == "Your password was reset" and notice["To"] == "ada@example.com"
    text = notice.get_content()
    assert "ada@example.com was just reset" in text and "every sign-in to the account was ended" in text
    assert "Token:" not in text and code not in text
    assert_mail_settles(locky_client, "ada@example.com", "reset-done", 1)
