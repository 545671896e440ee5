"""Brute force: the login lockout holds when wrong passwords arrive all at once at a
real multi-process server (``locky serve --workers 4``, 20 concurrent attempts).

The count is shared through storage, so no more than ``LOCKY_LOGIN_MAX_FAILURES`` of the
attempts may be answered 401 (checked against the password); the rest get 429 with
``Retry-After``, and the right password is refused too until the window passes.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from harden import OTHER, STRONG, fresh_database, http, served

pytestmark = pytest.mark.server

ATTEMPTS = 20
LIMIT = 5


def burst(server, email: str, password: str, count: int) -> list:
    """``count`` logins released at the same instant from as many threads."""
    gate = threading.Barrier(count)
    replies: list = [None] * count

    def attempt(n: int) -> None:
        gate.wait()
        replies[n] = http(server, "POST", "/v1/public/users/login", {"email": email, "password": password})

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return replies


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_lockout_holds_under_concurrent_attempts(tmp_path, backend):
    with fresh_database(backend, tmp_path) as url, \
            served(tmp_path, url, workers=4, LOCKY_LOGIN_MAX_FAILURES=str(LIMIT)) as server:
        assert http(server, "POST", "/v1/public/users/register",
                    {"name": "Victim", "email": "victim@example.com", "password": STRONG}).status == 201
        replies = burst(server, "victim@example.com", OTHER, ATTEMPTS)
        statuses = Counter(reply.status for reply in replies)
        print(f"\n{backend}: {ATTEMPTS} concurrent wrong passwords -> {dict(statuses)}")
        assert set(statuses) <= {401, 429}, statuses
        assert 1 <= statuses[401] <= LIMIT, statuses
        assert statuses[429] == ATTEMPTS - statuses[401]
        for reply in replies:
            if reply.status == 429:
                assert int(reply.header("Retry-After")) > 0
        # Locked: even the right password is refused now, by every worker.
        for _ in range(4):
            assert http(server, "POST", "/v1/public/users/login",
                        {"email": "victim@example.com", "password": STRONG}).status == 429
