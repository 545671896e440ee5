"""A decision on an account and its write are one step: races between credential changes.

Each test starts a slow request (one that hashes a password: a reset, a login, a change
of one's own email) and lands a second request inside its hashing, at a moment measured
from the hasher's real cost (bcrypt at cost 10 here, so the window is tens of
milliseconds and the timing does not depend on luck). Before accounts locked the user
in the transaction that writes, every trial of each test broke its rule:

- a reset racing an email change marked the *new* address proved, so a self-service
  change to an address in ``LOCKY_ADMIN_EMAILS`` made the account admin;
- a login inside bcrypt while a reset committed got a session that outlived the reset;
- a login's rehash to the new cost overwrote the password the reset had just set.

Now a request re-reads the account under a lock and writes only if what it decided on
still holds. Each test runs :data:`TRIALS` trials on a fresh account each (a reset code
is good for three messages an hour).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pytest

from locky.testing import ADMIN_EMAIL, PASSWORD

from lifecycle_helpers import (ME, REFRESH, WRITE, bearer, is_admin, login, me, reset, reset_code,
                               verified_account)

TRIALS = 6
NEW_PASSWORD = "an entirely new passphrase"
#: The cost the racing apps hash at: slow enough to land a request inside one hash.
ROUNDS = 10


#: Addresses ``LOCKY_ADMIN_EMAILS`` names (besides the test admin's): whoever proves one is admin.
BOSSES = tuple(f"boss-{trial}@example.com" for trial in range(TRIALS))


@pytest.fixture
def slow_client(make_client):
    """A client of an app hashing at :data:`ROUNDS`, :data:`BOSSES` admin addresses."""
    return make_client(bcrypt_rounds=ROUNDS, admin_emails=(ADMIN_EMAIL, *BOSSES))


def hash_time(client) -> float:
    """Seconds one password hash takes in this app, on this machine, now."""
    hasher = client.app.context.password_hasher
    started = time.perf_counter()
    hasher.hash("a passphrase to time")
    return time.perf_counter() - started


def staggered(first: Callable, second: Callable, delay: float) -> tuple:
    """Run ``first``, and ``second`` ``delay`` seconds after it started; both results."""
    go = threading.Event()

    def later():
        go.wait(10)
        time.sleep(delay)
        return second()

    def now():
        go.set()
        return first()

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(now), pool.submit(later)
        return a.result(60), b.result(60)


@pytest.mark.parametrize("who", ["themself", "an admin"])
def test_a_reset_never_proves_an_address_set_during_it(slow_client, who):
    client = slow_client
    admin = client.account(ADMIN_EMAIL, verified=True)
    outcomes = []
    for trial in range(TRIALS):
        email = f"racer-{trial}@example.com"
        target = BOSSES[trial]
        account = verified_account(client, email)
        code = reset_code(client, email)
        h = hash_time(client)
        do_reset = lambda: reset(client, code, NEW_PASSWORD)  # noqa: E731
        if who == "themself":
            # The change proves the current password (one hash), then writes: it starts
            # half a hash before the reset, so it commits while the reset hashes.
            change = lambda: client.simulate_put(  # noqa: E731
                f"{WRITE}/{account.id}", json={"email": target, "current_password": PASSWORD},
                headers=account.headers)
            changed, reset_result = staggered(change, do_reset, h / 2)
        else:
            change = lambda: client.simulate_put(  # noqa: E731
                f"{WRITE}/{account.id}", json={"email": target}, headers=admin.headers)
            reset_result, changed = staggered(do_reset, change, h / 3)
        assert reset_result.status_code in (204, 400), reset_result.text
        assert changed.status_code in (200, 409), changed.text
        stored = client.app.context.storage.users.get(account.id)
        outcomes.append((reset_result.status_code, changed.status_code))
        if stored.email == target:
            assert stored.email_verified is False, (trial, reset_result.status_code, changed.status_code)
            assert not is_admin(client, admin, account.uuid), trial
    # The timing puts the change inside the reset's hashing (on a quiet machine every
    # time): the trials did race, so the rule above was put to the test.
    assert outcomes.count((400, 200)) >= 1, outcomes


def test_a_login_during_a_reset_gets_no_session_that_outlives_it(slow_client):
    client = slow_client
    lived = []
    for trial in range(TRIALS):
        email = f"racer-{trial}@example.com"
        verified_account(client, email)
        code = reset_code(client, email)
        h = hash_time(client)
        # The reset hashes first; the login reads the account half a hash later (before
        # the reset commits) and checks the old password while the reset commits.
        reset_result, logged_in = staggered(lambda: reset(client, code, NEW_PASSWORD),
                                            lambda: login(client, email, PASSWORD), h / 2)
        assert reset_result.status_code == 204, reset_result.text
        assert logged_in.status_code in (200, 401), logged_in.text
        if logged_in.status_code == 200:
            tokens = logged_in.json
            me_after = client.simulate_get(ME, headers=bearer(tokens["access_token"])).status_code
            refreshed = client.simulate_post(REFRESH, json={"refresh_token": tokens["refresh_token"]}).status_code
            lived.append((trial, me_after, refreshed))
        assert login(client, email, PASSWORD).status_code == 401
        assert login(client, email, NEW_PASSWORD).status_code == 200
    assert all(me_after == 401 and refreshed == 401 for _, me_after, refreshed in lived), lived


def test_a_rehash_at_login_never_undoes_a_reset(make_client):
    old = make_client()  # the test apps' cost: 4
    emails = [f"racer-{trial}@example.com" for trial in range(TRIALS)]
    for email in emails:
        verified_account(old, email)
    client = make_client(bcrypt_rounds=ROUNDS)  # the cost went up: a login rehashes
    for email in emails:
        code = reset_code(client, email)
        h = hash_time(client)
        # The login checks the old password (at least one hash at the new cost), then
        # hashes it again at the new cost; the reset commits in between.
        logged_in, reset_result = staggered(lambda: login(client, email, PASSWORD),
                                            lambda: reset(client, code, NEW_PASSWORD), h / 4)
        assert reset_result.status_code == 204, reset_result.text
        assert logged_in.status_code in (200, 401), logged_in.text
        assert login(client, email, PASSWORD).status_code == 401, email
        tokens = login(client, email, NEW_PASSWORD)
        assert tokens.status_code == 200, (email, tokens.text)
        assert me(client, tokens.json["access_token"])["email"] == email


def test_one_refresh_token_presented_at_once_answers_its_winner(locky_client):
    """Thirty presentations of one refresh token at once: reuse ends the login, but the
    one that rotated it got its tokens, and the trail records exactly that one."""
    storage = locky_client.app.context.storage
    for trial in range(TRIALS):
        account = locky_client.account(f"racer-{trial}@example.com")
        gate = threading.Barrier(30)

        def present():
            gate.wait(10)
            return locky_client.simulate_post(REFRESH, json={"refresh_token": account.refresh_token})

        with ThreadPoolExecutor(30) as pool:
            statuses = sorted(f.result(60).status_code for f in [pool.submit(present) for _ in range(30)])
        refreshed = [e for e in storage.audit.list(event="token.refreshed", limit=500).items
                     if e.actor_uuid == account.uuid]
        assert statuses.count(200) == len(refreshed) == 1, (trial, statuses, len(refreshed))
        assert statuses == [200] + [401] * 29, statuses
