"""Read replicas (``LOCKY_DATABASE_REPLICA_URLS``, issue 18) against a real streaming
standby: lists and counts come from the replica while logins and writes go to the
primary; a replica further behind than ``LOCKY_DATABASE_REPLICA_MAX_LAG`` or one that is
down is left alone and the primary answers, never a 503. What a worker keeps (user
records, and the pages and counts of users, under the default ``revision`` cache) is
read from the primary: those tests of the replica's answers turn the cache off."""

from __future__ import annotations

import time

import pytest

from locky.app import create_app
from locky.settings import SettingsError
from locky.testing import ADMIN_EMAIL, LockyClient, make_settings
from support.replica_cluster import replica_cluster
from locky_pony.revision_bus import RevisionBus

pytestmark = [pytest.mark.backend, pytest.mark.slow]  # a PostgreSQL primary and standby of its own
MAX_LAG = 3


@pytest.fixture(scope="module")
def cluster():
    with replica_cluster() as running:
        yield running


def wait_replayed(cluster, email: str) -> None:
    deadline = time.monotonic() + 20
    while not cluster.standby_sql(f"SELECT 1 FROM locky_users WHERE email = '{email}'"):
        assert time.monotonic() < deadline, f"the standby never replayed {email}"
        time.sleep(0.05)


def test_a_host_pointed_at_a_standby_says_so_in_its_log(cluster, caplog):
    """Registering writes: on a standby it cannot. The client gets a 503 saying the
    database refuses writes; the operator's log names the likely mistake. (Runs first: a later test stops the standby.)"""
    create_app(make_settings(cluster.primary_url, log_requests=False)).close()  # schema and signing key
    deadline = time.monotonic() + 20
    while True:
        try:
            if cluster.standby_sql("SELECT count(*) FROM locky_signing_keys")[0][0]:
                break
        except Exception:
            pass  # the schema is not replayed yet
        assert time.monotonic() < deadline, "the standby never replayed the schema"
        time.sleep(0.05)
    app = create_app(make_settings(cluster.standby_url, log_requests=False, bcrypt_rounds=4, auto_migrate=False))
    try:
        client = LockyClient(app)
        with caplog.at_level("ERROR", logger="locky.storage"):
            answer = client.simulate_post("/v1/public/users/register",
                                          json={"name": "Ada", "email": "ada@example.com",
                                                "password": "a long test password 42"})
        assert answer.status_code == 503 and set(answer.json) == {"title", "description"}, answer.text
        # The client is told what is wrong in Locky's words (a database refusing writes),
        # never the driver's text.
        assert answer.json["description"].startswith("The database is read-only"), answer.text
        assert "transaction" not in answer.text and "25006" not in answer.text
        assert any("Does LOCKY_DATABASE_URL name a standby?" in record.getMessage() for record in caplog.records)
    finally:
        app.close()


def test_a_record_a_worker_keeps_comes_from_the_primary():
    """With the auth cache (``revision``, the default here), a user record read to be
    kept comes from the primary: a standby behind by less than its bound would otherwise
    be kept past it, for as long as the record does not change again. So do the pages
    and counts of users: a new user is in them at once, however far behind the standby."""
    with replica_cluster() as cluster:  # its own: the test below counts the users
        _renamed_while_replay_is_paused(cluster)


def _renamed_while_replay_is_paused(cluster) -> None:
    app = create_app(make_settings(cluster.primary_url, log_requests=False, bcrypt_rounds=4,
                                   database_replica_urls=(cluster.standby_url,),
                                   database_replica_max_lag=MAX_LAG))
    try:
        assert isinstance(app.context.storage.bus, RevisionBus)
        client = LockyClient(app)
        admin, ada = client.account(ADMIN_EMAIL, verified=True), client.account("ada@example.com")
        wait_replayed(cluster, "ada@example.com")

        def name() -> str:
            answer = client.simulate_get(f"/v1/internal/users/{ada.id}", headers=admin.headers)
            assert answer.status_code == 200, answer.text
            return answer.json["name"]

        def users() -> tuple[int, set[str]]:
            count = client.simulate_get("/v1/internal/users/count", headers=admin.headers)
            page = client.simulate_get("/v1/internal/users", headers=admin.headers, params={"limit": 50})
            assert count.status_code == page.status_code == 200, (count.text, page.text)
            return count.json["count"], {user["email"] for user in page.json["users"]}

        assert name() == name()
        assert users() == users() == (2, {ADMIN_EMAIL, "ada@example.com"})
        cluster.standby_sql("SELECT pg_wal_replay_pause()")
        try:
            renamed = client.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                                          json={"name": "Ada Lovelace"})
            assert renamed.status_code == 200, renamed.text
            assert name() == "Ada Lovelace" and name() == "Ada Lovelace"
            client.register("late@example.com")
            assert users() == users() == (3, {ADMIN_EMAIL, "ada@example.com", "late@example.com"})
            assert not cluster.standby_sql("SELECT 1 FROM locky_users WHERE email = 'late@example.com'")
        finally:
            cluster.standby_sql("SELECT pg_wal_replay_resume()")
    finally:
        app.close()


def test_lists_come_from_the_replica_and_a_lagging_or_lost_one_is_left_alone(cluster):
    # The cache off: under it the count of users would be kept, and read from the primary.
    app = create_app(make_settings(cluster.primary_url, log_requests=False, bcrypt_rounds=4,
                                   database_replica_urls=(cluster.standby_url,),
                                   database_replica_max_lag=MAX_LAG, auth_cache="off"))
    try:
        client = LockyClient(app)
        admin = client.account(ADMIN_EMAIL, verified=True)
        count = lambda: client.simulate_get("/v1/internal/users/count", headers=admin.headers)  # noqa: E731
        client.register("first@example.com")
        wait_replayed(cluster, "first@example.com")
        assert count().json == {"count": 2}

        # Replay stops: the standby falls behind the primary.
        cluster.standby_sql("SELECT pg_wal_replay_pause()")
        client.register("second@example.com")
        # Logins and authentication stay on the primary: the new user logs in at once.
        tokens = client.login("second@example.com")
        me = client.simulate_get("/v1/internal/users/me",
                                 headers={"Authorization": f"Bearer {tokens['access_token']}"})
        assert (me.status_code, me.json["email"]) == (200, "second@example.com")
        # The replica is still within its lag bound: the count it answers misses the new user.
        assert count().json == {"count": 2}
        # Past the bound the replica is left alone and the primary answers.
        time.sleep(MAX_LAG + 1.5)
        assert count().json == {"count": 3}
        listed = client.simulate_get("/v1/internal/users", headers=admin.headers, params={"limit": 50})
        assert "second@example.com" in {user["email"] for user in listed.json["users"]}

        # Replay resumes: the replica catches up and serves again (a stale count proves it).
        cluster.standby_sql("SELECT pg_wal_replay_resume()")
        wait_replayed(cluster, "second@example.com")
        time.sleep(1.2)  # the lag-check pause ends
        client.register("third@example.com")
        wait_replayed(cluster, "third@example.com")
        cluster.standby_sql("SELECT pg_wal_replay_pause()")
        client.register("fourth@example.com")
        assert count().json == {"count": 4}

        # A replica that is down: the primary answers every read, never a 503.
        cluster.standby_sql("SELECT pg_wal_replay_resume()")
        cluster.stop_standby()
        for _ in range(3):
            answer = count()
            assert (answer.status_code, answer.json) == (200, {"count": 5}), answer.text
        health = client.simulate_get("/v1/public/health")
        assert (health.status_code, health.json) == (200, {"status": "ok"})
    finally:
        app.close()


def test_replicas_need_postgresql_urls():
    with pytest.raises(SettingsError) as refused:
        make_settings("sqlite:///:memory:", database_replica_urls=("postgres://replica/locky",))
    assert str(refused.value) == ("LOCKY_DATABASE_REPLICA_URLS needs a PostgreSQL LOCKY_DATABASE_URL"
                                  " (read replicas are PostgreSQL's streaming standbys)")
    with pytest.raises(SettingsError) as refused:
        make_settings("postgres://primary/locky", database_replica_urls=("mysql://replica/locky",))
    assert "each replica must be a postgres:// URL" in str(refused.value)

