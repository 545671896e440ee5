"""Login throttling over HTTP (docs/http/tokens.md): after ``login_max_failures``
(default 5) failed logins for one email within ``login_window`` (default 15 minutes)
further attempts, right password included, get 429 with ``Retry-After``; a success
before that resets the count; the count is per email (trimmed, any case), applies to
unknown emails alike, ends with the window, and is kept in storage, so two apps on
one database (as two worker processes are) share it. The lock lasts a sixteenth of the
window at first and doubles with each further failure (``hardening/test_login_limits.py``)."""

from __future__ import annotations

import time

import pytest

from locky.app import create_app
from locky.testing import PASSWORD, LockyClient, make_settings

from authz_helpers import assert_error

LOGIN = "/v1/public/users/login"


def attempt(client, email: str, password: str):
    return client.simulate_post(LOGIN, json={"email": email, "password": password})


def fail(client, email: str, times: int) -> None:
    for n in range(times):
        result = attempt(client, email, "wrong password")
        assert result.status_code == 401, (n, result.status_code, result.text)


def assert_locked(result, window: int) -> int:
    assert_error(result, 429, "429 Too Many Requests")
    retry_after = result.headers["retry-after"]
    assert retry_after.isdigit(), retry_after
    assert 1 <= int(retry_after) <= window
    return int(retry_after)


@pytest.fixture
def app_on(tmp_path):
    """``app_on(**overrides)``: an app on the test's one SQLite file; closed afterwards."""
    apps = []

    def make(**overrides):
        app = create_app(make_settings(f"sqlite:///{tmp_path / 'throttle.sqlite'}", **overrides))
        apps.append(app)
        return LockyClient(app)

    yield make
    for app in apps:
        app.close()


def test_five_failures_then_429_with_retry_after_by_default(locky_client):
    locky_client.register("ada@example.com")
    fail(locky_client, "ada@example.com", 5)
    retry = assert_locked(attempt(locky_client, "ada@example.com", "wrong password"), 15 * 60)
    assert 50 <= retry <= 57  # the first lock: a sixteenth of the window (56.25 s), rounded up


def test_while_locked_even_the_right_password_gets_429(locky_client):
    locky_client.register("ada@example.com")
    fail(locky_client, "ada@example.com", 5)
    locked = attempt(locky_client, "ada@example.com", PASSWORD)
    assert_locked(locked, 15 * 60)
    assert "access_token" not in locked.text


def test_429_repeats_while_the_window_lasts(locky_client):
    locky_client.register("ada@example.com")
    fail(locky_client, "ada@example.com", 5)
    for _ in range(3):
        assert_locked(attempt(locky_client, "ada@example.com", "wrong password"), 15 * 60)


def test_a_success_resets_the_count(locky_client):
    locky_client.register("ada@example.com")
    fail(locky_client, "ada@example.com", 4)
    assert attempt(locky_client, "ada@example.com", PASSWORD).status_code == 200
    fail(locky_client, "ada@example.com", 5)  # a full five again, not one
    assert_locked(attempt(locky_client, "ada@example.com", PASSWORD), 15 * 60)


def test_the_count_is_per_email(locky_client):
    locky_client.register("ada@example.com")
    locky_client.register("bob@example.com")
    fail(locky_client, "ada@example.com", 5)
    assert_locked(attempt(locky_client, "ada@example.com", PASSWORD), 15 * 60)
    assert attempt(locky_client, "bob@example.com", PASSWORD).status_code == 200


def test_case_and_spaces_do_not_escape_the_count(locky_client):
    locky_client.register("ada@example.com")
    for variant in ("ada@example.com", "ADA@example.com", " Ada@Example.com", "ada@EXAMPLE.COM ", "aDa@example.com"):
        assert attempt(locky_client, variant, "wrong password").status_code == 401
    assert_locked(attempt(locky_client, "ada@example.com", PASSWORD), 15 * 60)


def test_unknown_emails_are_throttled_alike(locky_client):
    fail(locky_client, "nobody@example.com", 5)
    unknown = attempt(locky_client, "nobody@example.com", "wrong password")
    assert_locked(unknown, 15 * 60)
    locky_client.register("ada@example.com")
    fail(locky_client, "ada@example.com", 5)
    known = attempt(locky_client, "ada@example.com", "wrong password")
    assert_locked(known, 15 * 60)
    assert unknown.json == known.json  # no way to tell which emails exist


def test_the_limit_is_configurable(app_on):
    client = app_on(login_max_failures=2, login_window=600)
    client.register("ada@example.com")
    fail(client, "ada@example.com", 2)
    assert_locked(attempt(client, "ada@example.com", PASSWORD), 600)


def test_the_lock_ends_with_the_window(app_on):
    client = app_on(login_max_failures=2, login_window=2)
    client.register("ada@example.com")
    fail(client, "ada@example.com", 2)
    retry = assert_locked(attempt(client, "ada@example.com", PASSWORD), 2)
    time.sleep(retry + 0.2)
    assert attempt(client, "ada@example.com", PASSWORD).status_code == 200


def test_failures_outside_the_window_do_not_add_up(app_on):
    client = app_on(login_max_failures=2, login_window=1)
    client.register("ada@example.com")
    fail(client, "ada@example.com", 1)
    time.sleep(1.2)
    fail(client, "ada@example.com", 2)  # the earlier failure has expired
    assert_locked(attempt(client, "ada@example.com", "wrong password"), 1)


def test_the_count_is_kept_in_storage_and_shared_between_apps(app_on):
    first = app_on(login_max_failures=4)
    second = app_on(login_max_failures=4)  # like a second worker process on the same database
    first.register("ada@example.com")
    fail(first, "ada@example.com", 2)
    fail(second, "ada@example.com", 2)
    assert_locked(attempt(first, "ada@example.com", PASSWORD), 15 * 60)
    assert_locked(attempt(second, "ada@example.com", PASSWORD), 15 * 60)


def test_the_count_survives_a_restart(app_on):
    client = app_on(login_max_failures=3)
    client.register("ada@example.com")
    fail(client, "ada@example.com", 3)
    restarted = app_on(login_max_failures=3)
    assert_locked(attempt(restarted, "ada@example.com", PASSWORD), 15 * 60)


def test_a_locked_email_does_not_affect_existing_sessions(locky_client):
    ada = locky_client.account("ada@example.com")
    fail(locky_client, "ada@example.com", 5)
    assert_locked(attempt(locky_client, "ada@example.com", PASSWORD), 15 * 60)
    me = locky_client.simulate_get("/v1/internal/users/me", headers=ada.headers)
    assert me.status_code == 200
    refreshed = locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": ada.refresh_token})
    assert refreshed.status_code == 200


def test_bad_login_bodies_are_400_not_counted(locky_client):
    locky_client.register("ada@example.com")
    for _ in range(6):
        assert locky_client.simulate_post(LOGIN, json={"email": "ada@example.com"}).status_code == 400
    assert attempt(locky_client, "ada@example.com", PASSWORD).status_code == 200
