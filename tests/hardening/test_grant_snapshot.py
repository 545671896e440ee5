"""Issue 31, finding 4: a revoked global grant kept working in a threaded server.

``CasbinAuthorizer.held()`` read its grants cache, read storage on a miss, then wrote
what it read into whatever cache the authorizer held by then: when a revoke moved the
policy revision in between and another thread reloaded the policy, the reader put the
grant it had read before the revoke into the fresh cache, and the ex-admin stayed admin
until the next policy change. The cache now belongs to the policy snapshot it was filled
for, so a read older than a snapshot never lands in it.

The race through the front door: threads of one app ask an admin-only route as the
admin over and over while the main thread grants and revokes (as ``locky grant-admin``
and ``revoke-admin`` do, through ``storage.grants``); once a revoke has returned, the
ex-admin's next request must be a 403, on every trial.
"""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest

from locky.app import create_app
from locky.testing import LockyClient, make_settings

from authz_helpers import assert_forbidden

#: Grant-and-revoke rounds per engine of the free-running race.
TRIALS = 40
THREADS = 6
#: The longest a grants read takes here (a loaded database answers that slowly).
SLOWEST = 0.02
ADMIN_ONLY = "/v1/internal/audit"
PAGE = {"limit": "1"}


class SlowGrants:
    """``storage.grants`` answering like a loaded database: each read returns what it
    read after a delay (random, up to ``SLOWEST`` seconds), and a read in the thread
    named by :meth:`hold` waits, after reading, until the test releases it. Writes go
    straight through. The authorizer under test is the real one, over real storage."""

    def __init__(self, inner, slowest: float = 0.0):
        self.inner, self.slowest = inner, slowest
        self.held: threading.Thread | None = None
        self.read_done, self.release = threading.Event(), threading.Event()

    def hold(self, thread: threading.Thread) -> None:
        self.held = thread

    def roles_of(self, user_uuid: str) -> frozenset[str]:
        found = self.inner.roles_of(user_uuid)
        if threading.current_thread() is self.held:
            self.read_done.set()
            assert self.release.wait(10), "never released"
        elif self.slowest:
            time.sleep(random.uniform(0, self.slowest))
        return found

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


@pytest.fixture
def fast_switching():
    """Switch threads as often as CPython allows, so that races show within a test."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


@pytest.fixture
def app(database_url, tmp_path):
    made = create_app(make_settings(database_url, mail_dir=str(tmp_path / "mail")))
    yield made
    made.close()


def get(client, account):
    return client.simulate_get(ADMIN_ONLY, params=PAGE, headers=account.headers)


def test_a_read_from_before_the_revoke_does_not_outlive_it(app):
    """The reported interleaving, step by step: a request reads the grant, the revoke
    commits, another request reloads the policy and reads the grants again, and only
    then does the first request keep what it read."""
    client = LockyClient(app)
    storage = app.context.storage
    grants = storage.grants = SlowGrants(storage.grants)
    mallory = client.account("mallory@example.com")
    assert grants.grant(mallory.uuid, "admin")

    first: list[int] = []
    reader = threading.Thread(target=lambda: first.append(get(client, mallory).status_code))
    grants.hold(reader)
    reader.start()
    try:
        assert grants.read_done.wait(10), "the first request never read the grants"
        assert grants.revoke(mallory.uuid, "admin")
        assert_forbidden(get(client, mallory))  # the revision moved: a new policy snapshot
    finally:
        grants.release.set()
        reader.join()
    assert first == [200]  # decided on what it read before the revoke: it was in flight
    for _ in range(3):
        assert_forbidden(get(client, mallory))


def test_a_revoked_grant_is_refused_once_the_revoke_returned(app, fast_switching):
    """Free-running: threads of one app ask as the admin while grants come and go."""
    client = LockyClient(app)
    storage = app.context.storage
    grants = storage.grants = SlowGrants(storage.grants, slowest=SLOWEST)
    mallory = client.account("mallory@example.com")
    assert_forbidden(get(client, mallory))

    stop = threading.Event()
    answered: list[int] = []
    errors: list[str] = []

    def hammer():
        try:
            while not stop.is_set():
                status = get(client, mallory).status_code
                answered.append(status)
                if status not in (200, 403):
                    errors.append(f"unexpected {status}")
                    return
        except Exception as exc:  # noqa: BLE001 - the test reports what any thread raised
            errors.append(repr(exc))

    threads = [threading.Thread(target=hammer) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    survived = []
    try:
        for trial in range(TRIALS):
            assert grants.grant(mallory.uuid, "admin")
            time.sleep(SLOWEST / 4 * (trial % 4))  # the threads are reading the grant
            assert grants.revoke(mallory.uuid, "admin")
            statuses = [get(client, mallory).status_code]
            time.sleep(SLOWEST * 2)  # every read from before the revoke has ended
            statuses.append(get(client, mallory).status_code)
            if statuses != [403, 403]:
                survived.append((trial, statuses))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert 200 in answered, "the threads never saw the grant: the race was not run"
    assert survived == [], f"{len(survived)} of {TRIALS} revoked grants still worked: {survived[:10]}"
