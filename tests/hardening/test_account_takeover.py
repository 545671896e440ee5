"""Account takeover with a stolen access token: a password change kept every other
login alive and needed no current password, so the token could take the account over
for good (issue 13, finding 6).

docs/http/accounts.md: changing your own ``password`` or ``email`` through ``PUT
/v1/private/users/{id}`` needs ``current_password`` (missing or wrong: 400
``{"current_password": ...}``, counted as a failed login of that email); a new
password revokes every other login of the user, the caller's own stays; an admin
changing another user needs no current password and ends every login of that user.
"""

from __future__ import annotations

import pytest

from locky.testing import Account

from harden import OTHER, STRONG

NEW = "a-Fresh-Passw0rd-2913"


def put(client, caller: Account, user: Account, body: dict):
    return client.simulate_put(f"/v1/private/users/{user.id}", json=body, headers=caller.headers)


def me(client, tokens) -> int:
    headers = {"Authorization": f"Bearer {tokens['access_token'] if isinstance(tokens, dict) else tokens.access_token}"}
    return client.simulate_get("/v1/internal/users/me", headers=headers).status_code


def login(client, email: str, password: str):
    return client.simulate_post("/v1/public/users/login", json={"email": email, "password": password})


def refresh(client, tokens: dict):
    return client.simulate_post("/v1/public/users/refresh", json={"refresh_token": tokens["refresh_token"]})


@pytest.fixture
def ada(locky_client) -> Account:
    return locky_client.account("ada@example.com", STRONG)


def assert_current_password_400(result) -> None:
    assert result.status_code == 400, result.text
    assert list(result.json) == ["current_password"] and isinstance(result.json["current_password"], str)


# -- proving the current password -------------------------------------------------


@pytest.mark.parametrize("change", [{"password": NEW}, {"email": "ada.new@example.com"},
                                    {"password": NEW, "email": "ada.new@example.com", "name": "Ada"}])
def test_own_credentials_change_needs_the_current_password(locky_client, ada, change):
    c = locky_client
    assert_current_password_400(put(c, ada, ada, change))
    assert_current_password_400(put(c, ada, ada, {**change, "current_password": OTHER}))
    # Nothing changed: the old email and password still log in, the new ones do not.
    assert login(c, ada.email, STRONG).status_code == 200
    assert login(c, "ada.new@example.com", STRONG).status_code == 401
    assert login(c, ada.email, NEW).status_code == 401
    changed = put(c, ada, ada, {**change, "current_password": STRONG})
    assert changed.status_code == 200, changed.text
    assert "current_password" not in changed.json
    email = change.get("email", ada.email)
    assert changed.json["email"] == email
    assert login(c, email, change.get("password", STRONG)).status_code == 200


def test_other_changes_need_no_current_password(locky_client, ada):
    renamed = put(locky_client, ada, ada, {"name": "Countess", "email": "ADA@example.com"})  # the same email
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json["name"], renamed.json["email"]) == ("Countess", ada.email)
    assert me(locky_client, ada) == 200


def test_wrong_current_passwords_count_as_failed_logins(locky_client, ada):
    c = locky_client
    for _ in range(5):  # the login throttle's default limit
        assert_current_password_400(put(c, ada, ada, {"password": NEW, "current_password": OTHER}))
    # The email is locked for logins, and for further guesses through PUT.
    locked = login(c, ada.email, STRONG)
    assert locked.status_code == 429 and locked.headers.get("Retry-After"), locked.text
    guess = put(c, ada, ada, {"password": NEW, "current_password": STRONG})
    assert guess.status_code == 429 and guess.headers.get("Retry-After"), guess.text
    assert login(c, ada.email, NEW).status_code == 429


def test_missing_current_passwords_count_too(locky_client, ada):
    for _ in range(5):
        assert_current_password_400(put(locky_client, ada, ada, {"email": "elsewhere@example.com"}))
    assert login(locky_client, ada.email, STRONG).status_code == 429


def test_the_right_current_password_clears_the_count(locky_client, ada):
    c = locky_client
    for _ in range(4):
        assert_current_password_400(put(c, ada, ada, {"password": NEW, "current_password": OTHER}))
    assert put(c, ada, ada, {"password": NEW, "current_password": STRONG}).status_code == 200
    for _ in range(4):  # a fresh count: four more misses still leave the login open
        assert login(c, ada.email, OTHER).status_code == 401
    assert login(c, ada.email, NEW).status_code == 200


def test_an_admin_changing_their_own_password_proves_it_too(locky_client, locky_admin):
    assert_current_password_400(put(locky_client, locky_admin, locky_admin, {"password": NEW}))
    changed = put(locky_client, locky_admin, locky_admin, {"password": NEW, "current_password": locky_admin.password})
    assert changed.status_code == 200, changed.text


# -- which logins end ------------------------------------------------------------


def test_a_new_password_ends_every_other_login(locky_client, ada):
    c = locky_client
    others = [login(c, ada.email, STRONG).json for _ in range(2)]
    assert all(me(c, tokens) == 200 for tokens in others)
    assert put(c, ada, ada, {"password": NEW, "current_password": STRONG}).status_code == 200
    assert me(c, ada) == 200  # the caller's own login stays ...
    assert refresh(c, {"refresh_token": ada.refresh_token}).status_code == 200
    for tokens in others:  # ... every other one ends: access and refresh tokens alike
        assert me(c, tokens) == 401
        assert refresh(c, tokens).status_code == 401
    assert login(c, ada.email, STRONG).status_code == 401
    assert me(c, login(c, ada.email, NEW).json) == 200


def test_an_email_change_keeps_the_other_logins(locky_client, ada):
    c = locky_client
    other = login(c, ada.email, STRONG).json
    assert put(c, ada, ada, {"email": "ada.new@example.com", "current_password": STRONG}).status_code == 200
    assert me(c, ada) == 200 and me(c, other) == 200


def test_an_admin_changing_a_password_ends_every_login_of_that_user(locky_client, locky_admin, ada):
    c = locky_client
    bob = c.account("bob@example.com", STRONG)
    second = login(c, ada.email, STRONG).json
    changed = put(c, locky_admin, ada, {"password": NEW})  # no current_password needed
    assert changed.status_code == 200, changed.text
    assert me(c, ada) == 401 and me(c, second) == 401
    assert refresh(c, {"refresh_token": ada.refresh_token}).status_code == 401
    assert me(c, locky_admin) == 200 and me(c, bob) == 200  # nobody else's
    assert me(c, login(c, ada.email, NEW).json) == 200


def test_an_admin_changing_an_email_ends_every_login_of_that_user(locky_client, locky_admin, ada):
    c = locky_client
    changed = put(c, locky_admin, ada, {"email": "ada.moved@example.com", "current_password": "ignored-for-admins"})
    assert changed.status_code == 200, changed.text
    assert me(c, ada) == 401
    assert me(c, locky_admin) == 200


def test_an_admin_renaming_a_user_ends_no_login(locky_client, locky_admin, ada):
    assert put(locky_client, locky_admin, ada, {"name": "Renamed"}).status_code == 200
    assert me(locky_client, ada) == 200


def test_current_password_is_documented_write_only(locky_client):
    document = locky_client.simulate_get("/swagger/doc.json").json
    request = document["definitions"]["UserUpdateRequest"]["properties"]
    assert request["current_password"]["type"] == "string" and request["current_password"]["description"]
    assert "current_password" not in document["definitions"]["User"]["properties"]
