"""One loaded policy decides from many threads at once (the gthread server's model).

Each decision evaluates Casbin's matcher over the asking subject's lines only: the
snapshot puts those lines in place for the length of the call. Two threads deciding at
once on one snapshot (a check and an ``/authz/explain`` of another subject) must each
see their own lines, and Casbin's ``ast.parse`` of the matcher must never run in two
threads at once (CPython 3.11 raises ``SystemError`` when it does while a finalizer
runs: two apps starting in one process hit this in CI).
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from locky_casbin import _PolicySnapshot, policy_files

#: (subject, dom, resource, action) and what the shipped policy decides.
QUESTIONS = [
    (("admin", "*", "users", "delete"), True),
    (("user", "*", "users", "delete"), False),
    (("user", "*", "groups", "read"), True),
    (("maintainer", "*", "groups", "delete"), False),
    (("owner", "*", "groups", "delete"), True),
    (("viewer", "*", "groups", "update"), False),
]
#: Seconds the threads decide for (without the lock, a wrong answer comes within ~0.3 s).
SECONDS = 2.0


class _Finalizer:
    def __del__(self):
        sum(range(50))


@pytest.fixture
def fast_switching():
    """Switch threads as often as CPython allows, so that races show within a test."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def test_threads_deciding_on_one_snapshot_each_get_their_own_answer(fast_switching):
    snapshot = _PolicySnapshot(policy_files.load(None), {})
    wrong: list = []
    decided: list = []
    stop = threading.Event()

    def churn():  # garbage with finalizers, collected while the others parse
        while not stop.is_set():
            cycle = [_Finalizer() for _ in range(3)]
            cycle.append(cycle)
            time.sleep(0)  # let the deciders run: they are what is under test

    def decide(question, expected):
        deadline, count = time.monotonic() + SECONDS, 0
        try:
            while time.monotonic() < deadline:
                got = snapshot.enforce(*question)
                count += 1
                if got is not expected:
                    wrong.append((question, got))
                    return
            decided.append(count)
        except Exception as exc:  # noqa: BLE001 - the test reports what any thread raised
            wrong.append((question, repr(exc)))

    churner = threading.Thread(target=churn)
    churner.start()
    deciders = [threading.Thread(target=decide, args=pair) for pair in QUESTIONS]
    for thread in deciders:
        thread.start()
    for thread in deciders:
        thread.join()
    stop.set()
    churner.join()
    assert wrong == []
    assert len(decided) == len(QUESTIONS) and min(decided) > 0, decided
