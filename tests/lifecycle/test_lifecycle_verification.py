"""Email verification over HTTP (docs/http/records.md and docs/http/accounts.md): every User body carries
``email_verified``, ``disabled`` and ``mfa_enabled`` (all false for a new registration,
and in the Swagger document); registration and every email change queue one ``verify``
message (an RFC 5322 file, mode 0600, ``To`` the address, ``X-Locky-Purpose: verify``, the
code on a ``Token: <code>`` line, and a link when ``public_url`` is set); ``POST
/v1/public/users/verify`` takes the code once; ``verify/resend`` answers 202 alike for
every address and mails only known unverified ones; with ``require_verified_email`` an
unverified user cannot log in (403 after the password check)."""

from __future__ import annotations

import email.utils
import re
import stat

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_error, assert_fields
from lifecycle_helpers import (ACCEPTED, ME, RESEND, TOKEN_KEYS, USER_KEYS, USERS, VERIFY, assert_mail_settles,
                               login, mail_code, mail_count, me, put_user, verified_account, verify)

FLAGS = ("email_verified", "disabled", "mfa_enabled")


def assert_flags(user: dict, **expected: bool) -> None:
    assert set(user) == USER_KEYS, user
    for flag in FLAGS:
        assert isinstance(user[flag], bool), (flag, user)
    for flag, value in expected.items():
        assert user[flag] is value, (flag, user)


def resend(client, address):
    return client.simulate_post(RESEND, json={"email": address})


# -- the User body -------------------------------------------------------------------


def test_every_user_body_carries_the_three_flags_false_for_a_new_account(locky_client, locky_admin):
    registered = locky_client.register("ada@example.com")
    assert_flags(registered, email_verified=False, disabled=False, mfa_enabled=False)
    tokens = login(locky_client, "ada@example.com")
    assert tokens.status_code == 200, tokens.text
    assert set(tokens.json) == TOKEN_KEYS
    assert tokens.json["user"] == registered
    token = tokens.json["access_token"]
    assert me(locky_client, token) == registered
    got = locky_client.simulate_get(f"{USERS}/{registered['id']}", headers=locky_admin.headers)
    assert got.status_code == 200 and got.json == registered, got.text
    listed = locky_client.simulate_get(USERS, params={"email": "ada@example.com"}, headers=locky_admin.headers)
    assert listed.status_code == 200 and listed.json["users"] == [registered], listed.text
    renamed = put_user(locky_client, locky_admin, registered["id"], {"name": "Ada King"})
    assert renamed.status_code == 200, renamed.text
    assert_flags(renamed.json, email_verified=False, disabled=False, mfa_enabled=False)
    assert renamed.json["name"] == "Ada King"


def test_the_testing_kits_admin_is_verified_and_its_user_is_not(locky_client, locky_admin, locky_user):
    assert_flags(me(locky_client, locky_admin), email_verified=True, disabled=False, mfa_enabled=False)
    assert_flags(me(locky_client, locky_user), email_verified=False, disabled=False, mfa_enabled=False)


def test_the_swagger_user_definition_lists_the_flags(locky_client):
    result = locky_client.simulate_get("/swagger/doc.json")
    assert result.status_code == 200
    properties = result.json["definitions"]["User"]["properties"]
    for flag in FLAGS:
        assert properties[flag]["type"] == "boolean", (flag, properties.get(flag))
        assert properties[flag].get("description"), flag
    paths = result.json["paths"]
    for path in ("/public/users/verify", "/public/users/verify/resend"):
        assert "post" in paths[path], path


# -- the message ---------------------------------------------------------------------


def test_registration_queues_one_verify_message_with_a_strong_code(locky_client, locky_settings):
    locky_client.register("ada@example.com")
    message = locky_client.mailbox.wait("ada@example.com", purpose="verify")
    assert email.utils.parseaddr(message["To"])[1] == "ada@example.com", message["To"]
    assert message["X-Locky-Purpose"] == "verify"
    assert message["From"] and message["Subject"]
    text = message.get_body(preferencelist=("plain",)).get_content()
    lines = [line.strip() for line in text.splitlines()]
    (line,) = [line for line in lines if line.startswith("Token:")]
    code = line.removeprefix("Token:").strip()
    assert locky_client.mailbox.token(message) == code
    # At least 128 bits: no alphabet of 64 symbols or fewer writes that in under 22 characters.
    assert len(code) >= 22 and re.fullmatch(r"[A-Za-z0-9_\-.~]+", code), code
    assert PASSWORD not in text
    # Nothing else came, and every message file is the server user's alone.
    assert_mail_settles(locky_client, "ada@example.com", None, 1)
    files = list(locky_settings.mail_path.rglob("*.eml"))
    assert len(files) == 1, files
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600, oct(files[0].stat().st_mode)


def test_two_registrations_get_different_codes(locky_client):
    locky_client.register("ada@example.com")
    locky_client.register("bob@example.com")
    assert mail_code(locky_client, "ada@example.com", "verify") != mail_code(locky_client, "bob@example.com", "verify")


def test_with_a_public_url_the_message_links_to_it(make_client):
    client = make_client(public_url="https://auth.example.com")
    client.register("ada@example.com")
    message = client.mailbox.wait("ada@example.com", purpose="verify")
    code = client.mailbox.token(message)
    text = message.get_body(preferencelist=("plain",)).get_content()
    links = re.findall(r"https://auth\.example\.com\S*", text)
    assert any(code in link for link in links), (code, text)
    assert f"Token: {code}" in [line.strip() for line in text.splitlines()]


# -- verify ------------------------------------------------------------------------


def test_the_code_verifies_the_email_once(locky_client, locky_admin):
    account = locky_client.account("ada@example.com")
    code = mail_code(locky_client, "ada@example.com", "verify")
    result = verify(locky_client, code)
    assert result.status_code == 204, result.text
    assert result.text == ""
    user = me(locky_client, account)
    assert_flags(user, email_verified=True, disabled=False, mfa_enabled=False)
    listed = locky_client.simulate_get(USERS, params={"email": "ada@example.com"}, headers=locky_admin.headers)
    assert listed.json["users"][0]["email_verified"] is True
    assert login(locky_client, "ada@example.com").json["user"]["email_verified"] is True
    # A used code is a bad code.
    assert_fields(verify(locky_client, code), "token")
    assert me(locky_client, account)["email_verified"] is True


def test_verification_needs_no_login_and_keeps_the_logins(locky_client):
    account = locky_client.account("ada@example.com")
    client_code = mail_code(locky_client, "ada@example.com", "verify")
    result = locky_client.simulate_post(VERIFY, json={"token": client_code})  # no Authorization header
    assert result.status_code == 204, result.text
    assert locky_client.simulate_get(ME, headers=account.headers).status_code == 200


# A well-formed code no one was sent, fixed so that every collecting process names the same tests.
@pytest.mark.parametrize("token", ["nonsense", "q7Vd0cXbE2nW9sKfL4tJhR8yPzA6mU1oG3iN5eTwYxC", "x" * 2000, ""])
def test_a_bad_code_is_400_token(locky_client, token):
    locky_client.register("ada@example.com")
    mail_code(locky_client, "ada@example.com", "verify")
    assert_fields(verify(locky_client, token), "token")


@pytest.mark.parametrize("body, fields", [
    ({}, ("token",)),
    ({"token": None}, ("token",)),
    ({"token": 123456}, ("token",)),
    ({"token": ["a"]}, ("token",)),
])
def test_a_missing_or_mistyped_code_is_400_token(locky_client, body, fields):
    assert_fields(locky_client.simulate_post(VERIFY, json=body), *fields)


def test_an_unknown_field_is_400(locky_client):
    locky_client.register("ada@example.com")
    code = mail_code(locky_client, "ada@example.com", "verify")
    result = locky_client.simulate_post(VERIFY, json={"token": code, "email": "ada@example.com"})
    assert_fields(result, "email")
    # The code was not spent by the refused request.
    assert verify(locky_client, code).status_code == 204


def test_verifying_one_account_does_not_verify_another(locky_client):
    ada = locky_client.account("ada@example.com")
    bob = locky_client.account("bob@example.com")
    assert verify(locky_client, mail_code(locky_client, "bob@example.com", "verify")).status_code == 204
    assert me(locky_client, bob)["email_verified"] is True
    assert me(locky_client, ada)["email_verified"] is False


def test_a_deleted_accounts_code_does_not_verify(locky_client):
    ada = locky_client.account("ada@example.com")
    code = mail_code(locky_client, "ada@example.com", "verify")
    assert locky_client.simulate_delete(f"/v1/private/users/{ada.id}", headers=ada.headers).status_code == 204
    assert_fields(verify(locky_client, code), "token")


# -- resend ------------------------------------------------------------------------


def test_resend_answers_alike_and_mails_only_a_known_unverified_account(locky_client):
    verified_account(locky_client, "vera@example.com")
    locky_client.register("ada@example.com")
    first = mail_code(locky_client, "ada@example.com", "verify")
    answers = [resend(locky_client, address) for address in
               ("vera@example.com", "nobody@example.com", "ada@example.com")]
    for result in answers:
        assert result.status_code == 202, result.text
        assert result.json == ACCEPTED
    assert len({(r.text, r.headers.get("content-type")) for r in answers}) == 1
    second = mail_code(locky_client, "ada@example.com", "verify", count=2)
    assert second != first
    assert_mail_settles(locky_client, "ada@example.com", "verify", 2)
    assert mail_count(locky_client, "vera@example.com", "verify") == 1  # the registration's only
    assert mail_count(locky_client, "nobody@example.com") == 0


def test_after_a_resend_the_older_code_still_works(locky_client):
    account = locky_client.account("ada@example.com")
    first = mail_code(locky_client, "ada@example.com", "verify")
    assert resend(locky_client, "ada@example.com").status_code == 202
    mail_code(locky_client, "ada@example.com", "verify", count=2)
    assert verify(locky_client, first).status_code == 204
    assert me(locky_client, account)["email_verified"] is True


def test_after_a_resend_the_newer_code_works(locky_client):
    account = locky_client.account("ada@example.com")
    mail_code(locky_client, "ada@example.com", "verify")
    assert resend(locky_client, "ada@example.com").status_code == 202
    second = mail_code(locky_client, "ada@example.com", "verify", count=2)
    assert verify(locky_client, second).status_code == 204
    assert me(locky_client, account)["email_verified"] is True


@pytest.mark.parametrize("body", [{"email": "not-an-email"}, {"email": ""}, {"email": 5}, {}])
def test_resend_of_a_malformed_email_is_400_email(locky_client, body):
    assert_fields(locky_client.simulate_post(RESEND, json=body), "email")


def test_resend_with_an_unknown_field_is_400(locky_client):
    assert_fields(locky_client.simulate_post(RESEND, json={"email": "ada@example.com", "name": "Ada"}), "name")


# -- email changes -------------------------------------------------------------------


def test_an_own_email_change_unverifies_and_mails_the_new_address(locky_client):
    account = verified_account(locky_client, "ada@example.com")
    result = put_user(locky_client, account, account.id, {"email": "ada.king@example.com",
                                                          "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    assert_flags(result.json, email_verified=False)
    assert result.json["email"] == "ada.king@example.com"
    assert me(locky_client, account)["email_verified"] is False
    code = mail_code(locky_client, "ada.king@example.com", "verify")
    assert verify(locky_client, code).status_code == 204
    after = me(locky_client, account)
    assert (after["email"], after["email_verified"]) == ("ada.king@example.com", True)
    # The old address got its registration message only.
    assert_mail_settles(locky_client, "ada@example.com", "verify", 1)


def test_keeping_the_same_email_keeps_it_verified(locky_client):
    account = verified_account(locky_client, "ada@example.com")
    result = put_user(locky_client, account, account.id, {"email": "ADA@example.com", "name": "Ada"})
    assert result.status_code == 200, result.text
    assert result.json["email_verified"] is True
    assert_mail_settles(locky_client, "ada@example.com", "verify", 1)


def test_an_admins_email_change_unverifies_and_mails_the_new_address(locky_client, locky_admin):
    account = verified_account(locky_client, "ada@example.com")
    result = put_user(locky_client, locky_admin, account.id, {"email": "ada.king@example.com"})
    assert result.status_code == 200, result.text
    assert result.json["email_verified"] is False
    code = mail_code(locky_client, "ada.king@example.com", "verify")
    assert verify(locky_client, code).status_code == 204
    fetched = locky_client.simulate_get(f"{USERS}/{account.id}", headers=locky_admin.headers)
    assert fetched.json["email_verified"] is True


def test_a_code_sent_to_the_old_address_does_not_verify_the_new_one(locky_client):
    account = locky_client.account("ada@example.com")
    old = mail_code(locky_client, "ada@example.com", "verify")
    result = put_user(locky_client, account, account.id, {"email": "ada.king@example.com",
                                                          "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    mail_code(locky_client, "ada.king@example.com", "verify")
    result = verify(locky_client, old)
    assert me(locky_client, account)["email_verified"] is False
    assert_fields(result, "token")


def test_resend_after_an_email_change_goes_to_the_new_address(locky_client):
    account = locky_client.account("ada@example.com")
    mail_code(locky_client, "ada@example.com", "verify")  # sent before the change, or never
    put_user(locky_client, account, account.id, {"email": "ada.king@example.com", "current_password": PASSWORD})
    mail_code(locky_client, "ada.king@example.com", "verify")
    assert resend(locky_client, "ada.king@example.com").status_code == 202
    code = mail_code(locky_client, "ada.king@example.com", "verify", count=2)
    assert verify(locky_client, code).status_code == 204
    assert me(locky_client, account)["email_verified"] is True
    assert_mail_settles(locky_client, "ada@example.com", "verify", 1)


# -- require_verified_email ----------------------------------------------------------------


def test_require_verified_email_refuses_unverified_logins_after_the_password(make_client):
    client = make_client(require_verified_email=True)
    client.register("ada@example.com")
    refused = login(client, "ada@example.com")
    assert_error(refused, 403, "Email not verified")
    assert not {"access_token", "refresh_token"} & set(refused.json)
    # The password is checked first: a wrong one is the usual 401, an unknown email too.
    assert_error(login(client, "ada@example.com", "wrong password"), 401, "401 Unauthorized")
    assert_error(login(client, "nobody@example.com"), 401, "401 Unauthorized")
    client.verify("ada@example.com")
    result = login(client, "ada@example.com")
    assert result.status_code == 200, result.text
    assert result.json["user"]["email_verified"] is True


def test_require_verified_email_after_an_email_change(make_client):
    client = make_client(require_verified_email=True)
    client.register("ada@example.com")
    client.verify("ada@example.com")
    tokens = login(client, "ada@example.com").json
    result = client.simulate_put(f"/v1/private/users/{tokens['user']['id']}",
                                 json={"email": "ada.king@example.com", "current_password": PASSWORD},
                                 headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert result.status_code == 200, result.text
    assert_error(login(client, "ada.king@example.com"), 403, "Email not verified")
    client.verify("ada.king@example.com")
    assert login(client, "ada.king@example.com").status_code == 200


def test_without_require_verified_email_unverified_users_log_in(locky_client):
    locky_client.register("ada@example.com")
    result = login(locky_client, "ada@example.com")
    assert result.status_code == 200 and result.json["user"]["email_verified"] is False
