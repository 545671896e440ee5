"""Health asks the database at most once a second per process (docs/http/operation.md), yet
says an outage: at once when a request met it or a write was refused, within a second
when nobody did, and a recovery at once.

The pings are counted as SQLite runs them (every connection's trace callback); the
outage is a real one, a TCP proxy in front of PostgreSQL or MariaDB that stops.
"""

from __future__ import annotations

import threading
import time

import pytest

from locky.app import create_app
from locky.testing import LockyClient, make_settings
from locky_pony import guard
from locky_pony.liveness import MAX_AGE

from proxy import proxy_to

HEALTH = "/v1/public/health"
OK, DOWN = (200, {"status": "ok"}), (503, {"status": "unavailable"})
PING = "SELECT count(*) FROM sqlite_master"


def health(client) -> tuple[int, dict]:
    result = client.simulate_get(HEALTH)
    return result.status_code, result.json


@pytest.fixture
def sqlite_app(tmp_path):
    """An app on an SQLite file whose every statement is recorded (``app.statements``)."""
    app = create_app(make_settings(f"sqlite:///{tmp_path / 'health.sqlite'}", log_requests=False), background=False)
    statements: list[str] = []
    db = app.context.storage.db

    @db.on_connect(provider="sqlite")
    def trace(_db, connection):
        connection.set_trace_callback(statements.append)

    db.disconnect()  # this thread's connection: the next one is traced
    app.statements = statements
    try:
        yield app
    finally:
        app.close()


def pings(app) -> int:
    return sum(1 for statement in app.statements if statement.strip() == PING)


def test_many_health_calls_within_a_second_ask_the_database_once(sqlite_app):
    client = LockyClient(sqlite_app)
    started = time.monotonic()
    answers = [health(client) for _ in range(50)]
    took = time.monotonic() - started
    assert answers == [OK] * 50
    if took >= MAX_AGE:
        pytest.skip(f"50 health calls took {took:.2f}s on this machine: the bound cannot be seen")
    assert pings(sqlite_app) == 1
    time.sleep(MAX_AGE + 0.05)
    assert health(client) == OK
    assert pings(sqlite_app) == 2  # an answer older than a second is asked again


def test_concurrent_health_calls_share_one_ping(sqlite_app):
    client = LockyClient(sqlite_app)
    assert health(client) == OK
    time.sleep(MAX_AGE + 0.05)
    before = pings(sqlite_app)
    start = threading.Barrier(8)
    answers = []

    def call():
        start.wait()
        answers.append(health(LockyClient(sqlite_app)))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [OK] * 8
    assert pings(sqlite_app) - before == 1


def test_a_refused_write_shows_at_once_though_the_answer_is_kept(sqlite_app, monkeypatch):
    client = LockyClient(sqlite_app)
    assert health(client) == OK
    refusal = guard._refusal_of(sqlite_app.context.storage.db)
    refusal.failed(guard.FULL)  # what a write the disk refused leaves behind
    assert health(client) == DOWN
    monkeypatch.setattr(guard, "PROBE_INTERVAL", 0.0)
    assert health(client) == OK  # the probe wrote: writes work again


@pytest.fixture
def proxy(server_url):
    with proxy_to(server_url) as proxy:
        yield proxy


def test_an_outage_shows_within_a_second_and_a_recovery_at_once(proxy):
    app = create_app(make_settings(proxy.url, log_requests=False), background=False)
    try:
        client = LockyClient(app)
        admin = client.account("ada@example.com")
        assert health(client) == OK
        proxy.stop()
        # Nobody met the outage yet: the answer kept may be given, for a second at most.
        started = time.monotonic()
        while health(client) == OK:
            assert time.monotonic() - started < MAX_AGE + 0.5, "health still says ok"
            time.sleep(0.02)
        assert health(client) == DOWN  # a failed ping is not kept
        proxy.start()
        assert health(client) == OK  # at once
        proxy.stop()
        # A request met the outage: the next health call asks, and says so.
        assert client.simulate_get("/v1/internal/users/me", headers=admin.headers).status_code == 503
        assert health(client) == DOWN
        proxy.start()
        assert health(client) == OK
    finally:
        app.close()
