"""Scale-out guarantees on the server engines (issue 18): each worker process holds at
most ``LOCKY_DATABASE_POOL_SIZE`` connections, ``/health`` says 503 when none is free,
and Locky works behind PgBouncer in transaction pooling mode, told so or not.

The guarantees, not the speed: figures are ``python -m benchmarks.run``'s.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from locky.settings import SettingsError
from locky.testing import ADMIN_EMAIL, LockyClient, make_settings
from locky.testing.databases import engine, run_sql
from support.server import locky_server
from locky.app import create_app
from support.pgbouncer import pgbouncer

PASSWORD = "a long test password 42"
SECRET = "scale-out-test-secret-" + "k3Rw8" * 8
JSON_ERROR = {"title", "description"}
#: A 503 in the server's request log (one JSON object a line): " 503" also matched a
#: worker's pid in gunicorn's "Booting worker with pid: 5035".
UNAVAILABLE = '"status":503'


def connections(url: str, tag: str) -> int:
    """Connections the server has open for the app tagged ``tag`` (PostgreSQL: its
    ``application_name``; MySQL/MariaDB: every connection to the scratch database
    except the one asking, the test run's own included: see ``baseline``)."""
    if engine(url) == "postgres":
        return run_sql(url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", tag)[0][0]
    database = url.rsplit("/", 1)[1]
    return run_sql(url, "SELECT count(*) FROM information_schema.PROCESSLIST"
                        " WHERE DB = %s AND ID <> CONNECTION_ID()", database)[0][0]


def tagged(url: str, tag: str) -> str:
    return f"{url}?application_name={tag}" if engine(url) == "postgres" else url


def app_on(url: str, **settings):
    return create_app(make_settings(url, log_requests=False, bcrypt_rounds=4, **settings))


class Admin:
    """An admin's requests through the app's test client (safe from many threads)."""

    def __init__(self, app):
        self.client = LockyClient(app)
        self.headers = self.client.account(ADMIN_EMAIL, PASSWORD, verified=True).headers

    def __getattr__(self, method):
        call = getattr(self.client, f"simulate_{method}")
        return lambda path, **kwargs: call(path, headers=self.headers, **kwargs)


@pytest.mark.backend
def test_a_worker_holds_no_more_connections_than_its_pool_size(server_url):
    tag = f"locky-pool-{uuid.uuid4().hex[:12]}"
    baseline = connections(server_url, tag)  # the scratch database's own (MySQL)
    app = app_on(tagged(server_url, tag), database_pool_size=2)
    seen: list[int] = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            seen.append(connections(server_url, tag) - baseline)
            time.sleep(0.01)

    try:
        admin = Admin(app)
        sampler = threading.Thread(target=sample)
        sampler.start()

        def work(n: int) -> list[int]:
            made = admin.post("/v1/public/users/register", json={"name": f"user {n}", "email": f"u{n}@example.com",
                                                                  "password": PASSWORD})
            user_id = made.json["id"]
            return [made.status_code,
                    admin.get(f"/v1/internal/users/{user_id}").status_code,
                    admin.get("/v1/internal/users", params={"limit": 50}).status_code,
                    admin.get("/v1/internal/users/count").status_code,
                    admin.put(f"/v1/private/users/{user_id}", json={"name": f"renamed {n}"}).status_code]

        with ThreadPoolExecutor(max_workers=12) as threads:
            statuses = [status for answer in threads.map(work, range(36)) for status in answer]
        stop.set()
        sampler.join()
        assert set(statuses) == {200, 201}, statuses
        assert admin.get("/v1/internal/users/count").json == {"count": 37}
        assert 1 <= max(seen) <= 2, seen
    finally:
        stop.set()
        app.close()


@pytest.mark.backend
def test_a_connection_that_served_plain_reads_is_transactional_again(server_url):
    """One pooled connection for everything: a plain read leaves it in autocommit on
    MySQL/MariaDB, and the transaction that takes it next is still all or nothing."""
    app = app_on(server_url, database_pool_size=1)
    try:
        storage = app.context.storage
        user = storage.users.create(name="before", email="a@example.com", password_hash="h")
        for _ in range(3):
            assert storage.users.get(user.id) == user  # a plain read on the one connection
            assert storage.users.list().items == [user]
            with pytest.raises(RuntimeError):
                with storage.atomic():
                    storage.users.update(user.id, name="after")
                    storage.groups.create(name="g", description="", owner_uuid=user.uuid)
                    raise RuntimeError("abort the transaction")
            assert storage.users.get(user.id).name == "before"
            assert storage.groups.count() == 0
        renamed = storage.users.update(user.id, name="after")  # committed writes still commit
        assert storage.users.get(user.id) == renamed and renamed.name == "after"
        assert storage.db.provider.pool.stats()["open"] == 1  # every call above shared it
    finally:
        app.close()


@pytest.mark.backend
def test_health_is_503_while_no_connection_is_free_and_ok_again_after(server_url):
    app = app_on(server_url, database_pool_size=2, database_pool_timeout=1)
    held = threading.Event()
    release = threading.Event()
    holders: list[threading.Thread] = []
    try:
        admin = Admin(app)
        storage = app.context.storage
        ready = threading.Barrier(3)

        def hold():  # a long transaction, with its connection
            with storage.atomic():
                storage.users.count()
                ready.wait()
                release.wait(10)

        holders = [threading.Thread(target=hold) for _ in range(2)]
        for thread in holders:
            thread.start()
        ready.wait()
        held.set()
        started = time.monotonic()
        health = admin.get("/v1/public/health")
        took = time.monotonic() - started
        assert (health.status_code, health.json) == (503, {"status": "unavailable"})
        assert took < 3, took
        users = admin.get("/v1/internal/users")
        assert users.status_code == 503 and set(users.json) <= JSON_ERROR, users.json
        release.set()
        for thread in holders:
            thread.join()
        health = admin.get("/v1/public/health")
        assert (health.status_code, health.json) == (200, {"status": "ok"})
        assert admin.get("/v1/internal/users/count").json == {"count": 1}
    finally:
        release.set()
        for thread in holders:
            thread.join()
        app.close()


@contextmanager
def behind_pgbouncer(postgres_database, tmp_path, **env: str):
    """A real ``locky serve`` (2 workers x 4 threads) on an emptied database through a
    transaction-pooling PgBouncer with three server connections: its URL and the server."""
    postgres_database.wipe()
    with pgbouncer(postgres_database.url, server_connections=3) as url, \
            locky_server(tmp_path, env={"LOCKY_DATABASE_URL": url, "LOCKY_JWT_SECRET": SECRET,
                                        "LOCKY_THREADS": "4", "LOCKY_BCRYPT_ROUNDS": "4",
                                        "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL,
                                        "LOCKY_LOGIN_MAX_FAILURES_PER_IP": "1000",
                                        "LOCKY_SIGNUP_MAX_PER_IP": "1000", **env}) as server:
        yield url, server


def sign_up(server, email: str) -> dict:
    """Register ``email`` on ``server`` and log it in: its tokens."""
    status, _, body = server.request("POST", "/v1/public/users/register",
                                     {"name": email.split("@")[0], "email": email, "password": PASSWORD})
    assert status == 201, body
    status, _, tokens = server.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
    assert status == 200, tokens
    return tokens


@pytest.mark.server
@pytest.mark.backend
def test_the_service_works_behind_pgbouncer_in_transaction_mode(postgres_database, tmp_path):
    """A real ``locky serve`` (2 workers x 4 threads) through a transaction-pooling
    PgBouncer with three server connections, told so (``LOCKY_DATABASE_POOLER=
    transaction``): every transaction may land on another server session, so nothing may
    live on one, prepared statements included."""
    with behind_pgbouncer(postgres_database, tmp_path, LOCKY_DATABASE_POOLER="transaction") as (url, server):
        def register_and_login(n: int) -> dict:
            email = f"user{n}@example.com"
            tokens = sign_up(server, email)
            auth = {"Authorization": f"Bearer {tokens['access_token']}"}
            status, _, me = server.request("GET", "/v1/internal/users/me", headers=auth)
            assert (status, me["email"]) == (200, email)
            status, _, renamed = server.request("PUT", f"/v1/private/users/{me['id']}", {"name": f"Renamed {n}"},
                                                headers=auth)
            assert (status, renamed["name"]) == (200, f"Renamed {n}"), renamed
            status, _, group = server.request("POST", "/v1/private/groups",
                                              {"name": f"team {n}", "description": ""}, headers=auth)
            assert status == 201, group
            status, _, page = server.request("GET", "/v1/internal/users?limit=50", headers=auth)
            assert status == 200 and email in {user["email"] for user in page["users"]}, page
            return {"auth": auth, "user": me, "group": group, "refresh": tokens["refresh_token"]}

        with ThreadPoolExecutor(max_workers=8) as threads:
            people = list(threads.map(register_and_login, range(24)))

        # Logout is at once: the next request with that access token is refused.
        first = people[0]
        status, _, _ = server.request("POST", "/v1/private/users/logout", headers=first["auth"])
        assert status == 204
        status, _, body = server.request("GET", "/v1/internal/users/me", headers=first["auth"])
        assert status == 401, body

        # Races: one email, one group name, many at once: exactly one wins each.
        def register_same(_):
            return server.request("POST", "/v1/public/users/register",
                                  {"name": "Twin", "email": "twin@example.com", "password": PASSWORD})[0]

        def group_same(n):
            return server.request("POST", "/v1/private/groups", {"name": "the one", "description": ""},
                                  headers=people[1 + n]["auth"])[0]

        with ThreadPoolExecutor(max_workers=8) as threads:
            registered = sorted(threads.map(register_same, range(10)))
            grouped = sorted(threads.map(group_same, range(10)))
        assert registered == [201] + [400] * 9, registered
        assert grouped == [201] + [400] * 9, grouped

        status, _, count = server.request("GET", "/v1/internal/users/count", headers=people[2]["auth"])
        assert (status, count) == (200, {"count": 25})
        log = server.log()
        assert "storage unavailable" not in log and UNAVAILABLE not in log, log[-3000:]
        # Nothing session-level leaked into the pooled server sessions: a plain client
        # through the same PgBouncer writes, and its sessions are read-write.
        assert run_sql(url, "SHOW default_transaction_read_only") == [("off",)]
        run_sql(url, "CREATE TABLE IF NOT EXISTS locky_pooler_probe (n int)")
        run_sql(url, "DROP TABLE locky_pooler_probe")


@pytest.mark.server
@pytest.mark.backend
def test_a_transaction_pooler_nobody_named_is_found_and_reads_keep_working(postgres_database, tmp_path):
    """The same PgBouncer, but ``LOCKY_DATABASE_POOLER`` left at its default: the reads
    prepare their statements until one is missing from the server session running its
    ``EXECUTE``; then the worker runs them plain, says so once, and no request fails."""
    with behind_pgbouncer(postgres_database, tmp_path) as (_, server):
        def authorization(n: int) -> dict:
            return {"Authorization": f"Bearer {sign_up(server, f'user{n}@example.com')['access_token']}"}

        with ThreadPoolExecutor(max_workers=8) as threads:
            people = list(threads.map(authorization, range(8)))

        def reads(n: int) -> list[int]:
            auth, seen = people[n % len(people)], []
            for _ in range(25):
                for path in ("/v1/internal/users/me", "/v1/internal/users?limit=5", "/v1/internal/users/count"):
                    status, _, body = server.request("GET", path, headers=auth)
                    assert status == 200, (path, status, body)
                    seen.append(status)
            return seen

        with ThreadPoolExecutor(max_workers=8) as threads:
            answered = [status for statuses in threads.map(reads, range(16)) for status in statuses]
        assert answered == [200] * 16 * 75
        log = server.log()
        assert UNAVAILABLE not in log and "storage unavailable" not in log, log[-3000:]
        found = [line for line in log.splitlines() if "a transaction-pooling proxy is in between" in line]
        assert 1 <= len(found) <= 2, log[-3000:]  # once per worker that met it


def test_an_unknown_pooler_is_refused_with_the_choices():
    with pytest.raises(SettingsError) as refused:
        make_settings("sqlite:///:memory:", database_pooler="statement")
    assert str(refused.value) == ("LOCKY_DATABASE_POOLER must be one of none, session, transaction"
                                  " (got 'statement')")


@pytest.mark.backend
@pytest.mark.parametrize("pooler, prepared", [("none", True), ("session", True), ("transaction", False)])
def test_reads_prepare_their_statements_unless_a_transaction_pooler_is_in_between(postgres_database, pooler,
                                                                                   prepared):
    postgres_database.wipe()
    app = app_on(postgres_database.url, database_pool_size=1, database_pooler=pooler)
    try:
        admin = Admin(app)
        assert admin.get("/v1/internal/users/count").json == {"count": 1}
        # The one pooled connection served that read: what its server session holds.
        pool = app.context.storage.db.provider.pool
        connection, _ = pool.connect()
        try:
            cursor = connection.cursor()
            cursor.execute("SELECT name FROM pg_prepared_statements")
            names = [row[0] for row in cursor.fetchall()]
            connection.rollback()
        finally:
            pool.put_back(connection)
        assert bool(names) is prepared and all(name.startswith("locky_") for name in names), names
    finally:
        app.close()
