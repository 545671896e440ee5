"""Account enumeration: a login with an unknown email and one with a wrong password are
indistinguishable, in status, headers, body and time (docs/http/tokens.md).

Timing is measured with a realistic bcrypt cost (``ROUNDS``), interleaving the two kinds
of attempt so that load on the machine hits both alike, and compares medians.

Unknown emails are checked against a dummy hash of the configured bcrypt cost. An
account whose stored hash has a lower cost (made before ``LOCKY_BCRYPT_ROUNDS`` was
raised) answered a wrong password in about a millisecond instead: its existence showed
(issue 13, finding 9). Every check now costs the configured cost, and a successful
login rehashes.
"""

from __future__ import annotations

import random
import statistics
import time

import bcrypt
import pytest

from locky.app import create_app
from locky.testing import make_settings

from harden import OTHER, STRONG, RecordingClient, query

ROUNDS = 9  # ~30 ms a check here: realistic, and cheap enough for many tries
TRIES = 40
LOGIN = "/v1/public/users/login"


@pytest.fixture
def locky_settings(locky_database_url):
    # Many failures from one client address: neither the email's nor the address's limit applies.
    return make_settings(locky_database_url, bcrypt_rounds=ROUNDS, login_max_failures=1000,
                         login_max_failures_per_ip=1000)


def comparable(result) -> tuple:
    headers = {k.lower(): v for k, v in result.headers.items() if k.lower() not in ("x-request-id", "date")}
    return result.status_code, headers, result.text


def test_unknown_email_and_wrong_password_answer_alike(locky_client):
    locky_client.register("known@example.com", STRONG)
    deleted = locky_client.account("gone@example.com", STRONG)
    assert locky_client.simulate_delete(f"/v1/private/users/{deleted.id}", headers=deleted.headers).status_code == 204
    wrong_password = locky_client.simulate_post(LOGIN, json={"email": "known@example.com", "password": OTHER})
    unknown = locky_client.simulate_post(LOGIN, json={"email": "nobody@example.com", "password": OTHER})
    deleted_user = locky_client.simulate_post(LOGIN, json={"email": "gone@example.com", "password": STRONG})
    assert wrong_password.status_code == 401
    assert comparable(wrong_password) == comparable(unknown) == comparable(deleted_user)


def test_unknown_email_and_wrong_password_take_the_same_time(locky_client):
    locky_client.register("known@example.com", STRONG)
    attempts = {"wrong password": "known@example.com", "unknown email": "nobody@example.com"}
    times: dict[str, list[float]] = {kind: [] for kind in attempts}
    for kind, email in attempts.items():  # warm up both paths
        locky_client.simulate_post(LOGIN, json={"email": email, "password": OTHER})
    order = list(attempts) * TRIES
    random.Random(7).shuffle(order)
    for kind in order:
        started = time.perf_counter()
        result = locky_client.simulate_post(LOGIN, json={"email": attempts[kind], "password": OTHER})
        times[kind].append(time.perf_counter() - started)
        assert result.status_code == 401
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print(f"\nlogin medians at bcrypt cost {ROUNDS}: "
          + ", ".join(f"{kind} {value * 1000:.1f} ms" for kind, value in medians.items()))
    slow, fast = max(medians.values()), min(medians.values())
    assert (slow - fast) / slow < 0.10, medians


def test_lockout_answers_alike_for_unknown_emails(locky_database_url):
    """The lockout is per email, existing or not, so a 429 reveals nothing either."""
    app = create_app(make_settings(locky_database_url, login_max_failures=3))
    try:
        client = RecordingClient(app)
        client.register("known@example.com", STRONG)
        answers = {}
        for email in ("known@example.com", "nobody@example.com"):
            statuses = [client.simulate_post(LOGIN, json={"email": email, "password": OTHER}) for _ in range(5)]
            answers[email] = [comparable(r)[:1] + (r.headers.get("retry-after") is not None,) for r in statuses]
            last = statuses[-1]
            assert last.status_code == 429 and int(last.headers["retry-after"]) > 0
        assert answers["known@example.com"] == answers["nobody@example.com"]
        assert [a[0] for a in answers["nobody@example.com"]] == [401, 401, 401, 429, 429]
    finally:
        app.close()


# -- a stored hash of a lower cost than the configured one ---------------------------

CHEAP, CONFIGURED = 4, 10
COST_TRIES = 7


def cost_of_stored_hash(url: str, email: str) -> int:
    (hashed,), = query(url, "SELECT password_hash FROM locky_users WHERE email = %s", email)
    return int(hashed.split("$")[2])


def timed_login(client: RecordingClient, email: str, password: str) -> tuple[int, float]:
    start = time.perf_counter()
    result = client.simulate_post("/v1/public/users/login", json={"email": email, "password": password})
    return result.status_code, time.perf_counter() - start


@pytest.mark.slow  # timed: the fast run checks the same through the work each check does (below)
def test_a_cheaper_stored_hash_fails_as_slowly_as_an_unknown_email(locky_app_factory, locky_database_url):
    RecordingClient(locky_app_factory(bcrypt_rounds=CHEAP)).register("cheap@example.com", STRONG)
    assert cost_of_stored_hash(locky_database_url, "cheap@example.com") == CHEAP
    # The operator raised the cost; the account has not logged in since.
    client = RecordingClient(locky_app_factory(bcrypt_rounds=CONFIGURED, login_max_failures=1000))
    timed_login(client, "warm-up@example.com", OTHER)
    known, unknown = [], []
    for _ in range(COST_TRIES):  # interleaved, so that a busy moment slows both alike
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


def test_the_apps_of_one_process_share_the_dummy_hash_of_a_cost(locky_app_factory, monkeypatch):
    """The dummy hash is made once per process and cost (``locky serve``'s workers
    inherit the one its check at startup made): an app at a cost already seen makes no
    hash as it starts, an app at another cost makes its own, at its cost."""
    made: list[int] = []
    real = bcrypt.hashpw

    def counted(password, salt):
        made.append(int(salt.split(b"$")[2]))
        return real(password, salt)

    monkeypatch.setattr(bcrypt, "hashpw", counted)
    locky_app_factory(bcrypt_rounds=CONFIGURED)
    made.clear()
    locky_app_factory(bcrypt_rounds=CONFIGURED)
    assert made == []
    client = RecordingClient(locky_app_factory(bcrypt_rounds=CHEAP, login_max_failures=1000))
    assert made == [CHEAP]
    made.clear()
    status, _ = timed_login(client, "nobody@example.com", OTHER)
    assert (status, made) == (401, [])
