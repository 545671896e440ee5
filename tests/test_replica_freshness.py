"""Read replicas answer only the reads whose caller can take a stale answer, and a standby
whose WAL stream stalls counts as behind (issue 31, finding 12), against a real
streaming standby (:func:`support.replica_cluster.replica_cluster`).

- While the standby's replay is paused, a write right after a create finds the record
  (PUT 200, DELETE 204, not 404), and the authorization API answers from the primary,
  while the read API's counts still come from the standby (a stale count proves it).
- With the standby's WAL receiver stopped (nothing more arrives: it has replayed all it
  received and once called itself current), a list shows a record written on the
  primary once ``LOCKY_DATABASE_REPLICA_MAX_LAG`` has passed.
"""

from __future__ import annotations

import time

import pytest

from locky.app import create_app
from locky.testing import ADMIN_EMAIL, PASSWORD, LockyClient, make_settings
from support.replica_cluster import replica_cluster

pytestmark = [pytest.mark.backend, pytest.mark.slow]  # a PostgreSQL primary and standby of its own
#: Writes and checks under a paused replay take well under this; the stall test waits it out.
MAX_LAG = 3
ROUNDS = 5


@pytest.fixture(scope="module")
def cluster():
    with replica_cluster() as running:
        yield running


@pytest.fixture
def client(cluster):
    # The cache off: under it the count and list of users, which these tests read to see
    # which server answered, would be kept, and read from the primary
    # (tests/test_replicas.py::test_a_record_a_worker_keeps_comes_from_the_primary).
    app = create_app(make_settings(cluster.primary_url, log_requests=False, bcrypt_rounds=4,
                                   database_replica_urls=(cluster.standby_url,),
                                   database_replica_max_lag=MAX_LAG, auth_cache="off"))
    try:
        yield LockyClient(app)
    finally:
        app.close()


def wait_replayed(cluster, email: str) -> None:
    deadline = time.monotonic() + 20
    while not cluster.standby_sql(f"SELECT 1 FROM locky_users WHERE email = '{email}'"):
        assert time.monotonic() < deadline, f"the standby never replayed {email}"
        time.sleep(0.05)


def caught_up(cluster, client, admin: dict[str, str], email: str) -> None:
    """The standby has replayed ``email`` and is served from again (its lag measured 0)."""
    wait_replayed(cluster, email)
    time.sleep(1.2)  # a pause left by an earlier measure ends
    client.simulate_get("/v1/internal/users/count", headers=admin)


def admin_of(client) -> dict[str, str]:
    """The admin's headers (registered by whichever test runs first)."""
    if client.simulate_post("/v1/public/users/register", json={
            "name": "Admin", "email": ADMIN_EMAIL, "password": PASSWORD}).status_code == 201:
        client.verify(ADMIN_EMAIL)
    return {"Authorization": f"Bearer {client.login(ADMIN_EMAIL)['access_token']}"}


def ok(answer, status: int = 200):
    assert answer.status_code == status, (answer.status_code, answer.text)
    return answer.json


def test_writes_and_authorization_read_the_primary_while_lists_may_lag(cluster, client):
    admin = admin_of(client)
    ada = client.account("ada@example.com")
    caught_up(cluster, client, admin, "ada@example.com")
    groups = lambda: ok(client.simulate_get("/v1/internal/groups/count", headers=admin))["count"]  # noqa: E731
    before = groups()
    for round_ in range(ROUNDS):
        cluster.standby_sql("SELECT pg_wal_replay_pause()")
        try:
            started = time.monotonic()
            group = ok(client.simulate_post("/v1/private/groups", headers=admin,
                                            json={"name": f"team {round_}"}), 201)
            path = f"/v1/private/groups/{group['id']}"
            renamed = ok(client.simulate_put(path, headers=admin, json={"name": f"renamed {round_}"}))
            assert renamed["name"] == f"renamed {round_}"
            member = ok(client.simulate_post("/v1/private/members", headers=admin, json={
                "group_uuid": group["uuid"], "user_uuid": ada.uuid, "role": "maintainer"}), 201)
            # The authorization API reads the membership just made.
            permissions = ok(client.simulate_get("/v1/internal/authz/permissions", headers=admin,
                                                 params={"user_uuid": ada.uuid}))["permissions"]
            assert any(p["group_uuid"] == group["uuid"] for p in permissions), permissions
            subjects = ok(client.simulate_get("/v1/internal/authz/subjects", headers=admin, params={
                "resource": "groups", "action": "update", "group_uuid": group["uuid"]}))["users"]
            assert ada.uuid in {user["uuid"] for user in subjects}, subjects
            ok(client.simulate_delete(f"/v1/private/members/{member['id']}", headers=admin), 204)
            role = ok(client.simulate_post("/v1/private/roles", headers=admin, json={
                "name": f"auditor-{round_}", "permissions": [{"resource": "groups", "action": "read"}]}), 201)
            ok(client.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin,
                                   json={"description": "reads groups"}))
            ok(client.simulate_delete(f"/v1/private/roles/{role['id']}", headers=admin), 204)
            # The read API may still answer from the standby: its count misses the group.
            stale = groups()
            ok(client.simulate_delete(path, headers=admin), 204)
            assert time.monotonic() - started < MAX_LAG, "too slow to tell: the standby was left alone"
            assert stale == before, "the read API's count did not come from the paused standby"
        finally:
            cluster.standby_sql("SELECT pg_wal_replay_resume()")
        caught_up(cluster, client, admin, "ada@example.com")


def test_a_standby_whose_wal_stream_stalls_is_left_alone_after_the_bound(cluster, client):
    admin = admin_of(client)
    ok(client.simulate_post("/v1/public/users/register", json={
        "name": "Grace", "email": "grace@example.com", "password": "a long test password 42"}), 201)
    count = lambda: ok(client.simulate_get("/v1/internal/users/count", headers=admin))["count"]  # noqa: E731
    conninfo = cluster.standby_sql("SHOW primary_conninfo")[0][0]
    assert conninfo, "the standby does not stream"
    caught_up(cluster, client, admin, "grace@example.com")
    # The standby's WAL receiver stops: it has replayed all it received, and receives no more.
    cluster.standby_sql("ALTER SYSTEM SET primary_conninfo = ''")
    cluster.standby_sql("SELECT pg_reload_conf()")
    try:
        deadline = time.monotonic() + 20
        while cluster.standby_sql("SELECT count(*) FROM pg_stat_wal_receiver")[0][0]:
            assert time.monotonic() < deadline, "the WAL receiver did not stop"
            time.sleep(0.1)
        before = count()
        ok(client.simulate_post("/v1/public/users/register", json={
            "name": "Late", "email": "late@example.com", "password": "a long test password 42"}), 201)
        time.sleep(MAX_LAG + 1.5)
        for _ in range(3):  # each from the primary, whichever way the replicas are taken
            assert count() == before + 1
            listed = ok(client.simulate_get("/v1/internal/users", headers=admin,
                                            params={"limit": 100}))["users"]
            assert "late@example.com" in {user["email"] for user in listed}
        assert not cluster.standby_sql("SELECT 1 FROM locky_users WHERE email = 'late@example.com'")
    finally:
        cluster.standby_sql(f"ALTER SYSTEM SET primary_conninfo = '{conninfo.replace(chr(39), chr(39) * 2)}'")
        cluster.standby_sql("SELECT pg_reload_conf()")
    # Streaming again, the standby catches up and serves the read API again.
    caught_up(cluster, client, admin, "late@example.com")
    ok(client.simulate_post("/v1/public/users/register", json={
        "name": "Later", "email": "later@example.com", "password": "a long test password 42"}), 201)
    wait_replayed(cluster, "later@example.com")
    cluster.standby_sql("SELECT pg_wal_replay_pause()")
    try:
        ok(client.simulate_post("/v1/public/users/register", json={
            "name": "Latest", "email": "latest@example.com", "password": "a long test password 42"}), 201)
        assert count() == before + 2  # the standby's: it misses "latest"
    finally:
        cluster.standby_sql("SELECT pg_wal_replay_resume()")
