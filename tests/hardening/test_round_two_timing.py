"""Issue 13, finding 9: the time of a failed login does not tell which accounts exist.

Unknown emails are checked against a dummy hash of the configured bcrypt cost. An
account whose stored hash has a lower cost (made before ``LOCKY_BCRYPT_ROUNDS`` was
raised) answered a wrong password in about a millisecond instead: its existence showed.
Every check now costs at least the configured cost, and a successful login rehashes.
"""

from __future__ import annotations

import statistics
import time

import bcrypt
import pytest

from harden import OTHER, STRONG, RecordingClient, query

CHEAP, CONFIGURED = 4, 10
TRIES = 7


def cost_of_stored_hash(url: str, email: str) -> int:
    (hashed,), = query(url, "SELECT password_hash FROM locky_users WHERE email = %s", email)
    return int(hashed.split("$")[2])


def timed_login(client: RecordingClient, email: str, password: str) -> tuple[int, float]:
    start = time.perf_counter()
    result = client.simulate_post("/v1/public/users/login", json={"email": email, "password": password})
    return result.status_code, time.perf_counter() - start


def test_a_cheaper_stored_hash_fails_as_slowly_as_an_unknown_email(locky_app_factory, locky_database_url):
    RecordingClient(locky_app_factory(bcrypt_rounds=CHEAP)).register("cheap@example.com", STRONG)
    assert cost_of_stored_hash(locky_database_url, "cheap@example.com") == CHEAP
    # The operator raised the cost; the account has not logged in since.
    client = RecordingClient(locky_app_factory(bcrypt_rounds=CONFIGURED, login_max_failures=1000))
    timed_login(client, "warm-up@example.com", OTHER)
    known, unknown = [], []
    for _ in range(TRIES):  # interleaved, so that a busy moment slows both alike
        status, seconds = timed_login(client, "cheap@example.com", OTHER)
        assert status == 401
        known.append(seconds)
        status, seconds = timed_login(client, "nobody@example.com", OTHER)
        assert status == 401
        unknown.append(seconds)
    known_median, unknown_median = statistics.median(known), statistics.median(unknown)
    figures = f"wrong password {known_median * 1000:.1f} ms, unknown email {unknown_median * 1000:.1f} ms"
    assert 0.75 * unknown_median <= known_median <= 1.6 * unknown_median, figures
    assert cost_of_stored_hash(locky_database_url, "cheap@example.com") == CHEAP  # failures change nothing


def test_a_successful_login_rehashes_at_the_configured_cost(locky_app_factory, locky_database_url):
    RecordingClient(locky_app_factory(bcrypt_rounds=CHEAP)).register("rehash@example.com", STRONG)
    client = RecordingClient(locky_app_factory(bcrypt_rounds=CONFIGURED))
    client.login("rehash@example.com", STRONG)
    assert cost_of_stored_hash(locky_database_url, "rehash@example.com") == CONFIGURED
    client.login("rehash@example.com", STRONG)  # the new hash checks the same password
    assert cost_of_stored_hash(locky_database_url, "rehash@example.com") == CONFIGURED


@pytest.mark.parametrize("stored", [4, 7, 9, 10])
def test_a_failed_check_is_the_work_of_one_check_at_the_configured_cost(locky_app_factory, monkeypatch, stored):
    """Issue 31, finding 14: a hash of an older, lower cost was checked, then once more
    at the configured cost: 2^c + 2^r, 26 % slower than an unknown email at c = r - 2.
    The bcrypt work of each check is counted (2^cost per ``checkpw``, the real one run)."""
    RecordingClient(locky_app_factory(bcrypt_rounds=stored)).register(f"cost{stored}@example.com", STRONG)
    client = RecordingClient(locky_app_factory(bcrypt_rounds=CONFIGURED, login_max_failures=1000))
    timed_login(client, "warm-up@example.com", OTHER)  # the dummy hash and equalizers exist
    timed_login(client, f"cost{stored}@example.com", OTHER)
    work: list[int] = []
    real = bcrypt.checkpw

    def counted(password, hashed):
        work.append(2 ** int(hashed.split(b"$")[2]))
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counted)
    for email in (f"cost{stored}@example.com", "nobody@example.com"):
        work.clear()
        status, _ = timed_login(client, email, OTHER)
        assert status == 401
        assert sum(work) == 2 ** CONFIGURED, (email, work)
