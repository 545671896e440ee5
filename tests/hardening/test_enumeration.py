"""Account enumeration: a login with an unknown email and one with a wrong password are
indistinguishable, in status, headers, body and time (CONTRACT.md 4).

Timing is measured with a realistic bcrypt cost (``ROUNDS``), interleaving the two kinds
of attempt so that load on the machine hits both alike, and compares medians.
"""

from __future__ import annotations

import random
import statistics
import time

import pytest

from locky.app import create_app
from locky.testing import make_settings

from harden import OTHER, STRONG, RecordingClient

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
