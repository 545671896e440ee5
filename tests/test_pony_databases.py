"""The Pony storage on real engines: schema creation and versions, 64-bit ids, MariaDB
collations, races between worker processes, and a database that goes away.

Runs on SQLite always and on PostgreSQL and MariaDB/MySQL when ``backends.py`` finds
them; every test gets an empty database.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from locky.app import create_app
from locky.errors import NotFound
from locky.settings import SettingsError
from locky.testing import ADMIN_EMAIL, PASSWORD, LockyClient, make_settings
from locky.testing.databases import SCHEMA_TABLES, connect, engine
from locky.testing.databases import run_sql as raw
from locky_pony import PonyStorage
from locky_pony.migrations import LATEST as SCHEMA_VERSION

from proxy import TcpProxy, proxy_to

DRIVER_WORDS = ("psycopg", "pymysql", "sqlite", "operationalerror", "interfaceerror", "pony",
                "traceback", "connection refused", "server closed", "lost connection")


def meta_key(url: str) -> str:
    return "`key`" if engine(url) == "mysql" else '"key"'


def app_for(url: str):
    return create_app(make_settings(url, log_requests=False))


# ---------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------


def test_schema_creation_is_idempotent(database_url):
    app = app_for(database_url)
    client = LockyClient(app)
    user = client.register("ada@example.com")
    app.close()
    again = app_for(database_url)  # tables exist now: nothing to create, nothing lost
    try:
        assert again.context.storage.users.get(user["id"]).email == "ada@example.com"
        rows = raw(database_url, f"SELECT number FROM locky_meta WHERE {meta_key(database_url)} = 'schema_version'")
        assert rows == [(SCHEMA_VERSION,)]
    finally:
        again.close()


def _child(queue, index, target, barrier, args) -> None:
    try:
        queue.put((index, target(barrier, *args)))
    except BaseException as exc:  # reported to the parent
        queue.put((index, exc if _picklable(exc) else RuntimeError(repr(exc))))


def _picklable(value) -> bool:
    import pickle

    try:
        pickle.dumps(value)
        return True
    except Exception:
        return False


def in_processes(target, calls: list[tuple], timeout: float = 120) -> list:
    """``target(barrier, *args)`` for each ``args`` of ``calls``, each in its own process,
    released together by ``barrier``; the results in order."""
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(len(calls)), context.Queue()
    processes = [context.Process(target=_child, args=(queue, i, target, barrier, args))
                 for i, args in enumerate(calls)]
    for process in processes:
        process.start()
    try:
        results = dict(queue.get(timeout=timeout) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return [results[i] for i in range(len(calls))]


def _open_and_count(barrier, url: str) -> int:
    barrier.wait(timeout=60)
    storage = PonyStorage(make_settings(url))
    try:
        storage.migrate()
        return storage.roles.count()
    finally:
        storage.close()


def test_concurrent_first_starts_create_the_schema_once(database_url):
    results = in_processes(_open_and_count, [(database_url,)] * 3)
    assert results == [0, 0, 0]


def _start_app_and_count_roles(barrier, url: str) -> int:
    barrier.wait(timeout=60)
    app = app_for(url)  # schema, then the built-in roles from the policy files
    try:
        return app.context.storage.roles.count()
    finally:
        app.close()


def test_a_new_sqlite_file_locked_by_another_process_starts_once_the_lock_is_gone(tmp_path):
    """Switching a file to WAL fails at once while another connection holds a lock (SQLite
    does not wait its busy timeout for that): the app tries again instead of refusing to
    start. Four workers starting together on a new file met this in CI."""
    import sqlite3
    import threading
    import time

    path = tmp_path / "locky.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE elsewhere (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO elsewhere VALUES (1)")
    released = threading.Timer(0.5, holder.execute, ("COMMIT",))
    released.start()
    started = time.monotonic()
    app = create_app(make_settings(f"sqlite:///{path}", log_requests=False))
    try:
        assert time.monotonic() - started >= 0.4  # it waited for the lock
        assert app.context.storage.roles.count() == 8  # the built-in roles, client and provisioner among them
        assert raw(f"sqlite:///{path}", "PRAGMA journal_mode") == [("wal",)]
    finally:
        app.close()
        released.join()
        holder.close()


def test_workers_starting_together_on_a_new_database_all_start(database_url):
    # Each app writes the built-in roles at start; the race between them must not stop one.
    results = in_processes(_start_app_and_count_roles, [(database_url,)] * 4)
    # admin, user, client, provisioner (SCIM) and the four group roles
    assert results == [8, 8, 8, 8], results
    assert raw(database_url, "SELECT COUNT(*) FROM locky_roles WHERE builtin AND del_token = 0") == [(8,)]
    assert raw(database_url, "SELECT COUNT(*) FROM locky_meta") == [(3,)]  # policy and cache revisions, schema
    # The schema was made once: one history row per step.
    assert raw(database_url, "SELECT COUNT(*) FROM locky_schema_history") == [(SCHEMA_VERSION,)]


def test_a_database_ahead_of_the_code_stops_startup(database_url):
    app_for(database_url).close()
    stored = SCHEMA_VERSION + 1
    version = f"UPDATE locky_meta SET number = %s WHERE {meta_key(database_url)} = 'schema_version'"
    raw(database_url, version, stored)
    try:
        for auto_migrate in (True, False):
            with pytest.raises(SettingsError, match="newer than this Locky understands") as caught:
                create_app(make_settings(database_url, log_requests=False, auto_migrate=auto_migrate))
            assert f"version {stored}" in str(caught.value)
    finally:
        raw(database_url, version, SCHEMA_VERSION)  # the scratch database's wipe keeps the version


def undo_throttle_backoff_step(url: str) -> None:
    """Undo schema step 3 (``v0003_throttle_window_index``): its index and column."""
    index = "idx_locky_login_throttle__window_start"
    raw(url, f"DROP INDEX {index} ON locky_login_throttle" if engine(url) == "mysql" else f"DROP INDEX {index}")
    raw(url, "ALTER TABLE locky_login_throttle DROP COLUMN last_attempt")


def undo_account_lifecycle_step(url: str) -> None:
    """Undo schema step 4 (``v0004_account_lifecycle``): its tables and the users' flags."""
    for table in ("locky_totp", "locky_outbox", "locky_codes"):
        raw(url, f"DROP TABLE {table}")
    for flag in ("email_verified", "disabled", "mfa_enabled"):
        raw(url, f"ALTER TABLE locky_users DROP COLUMN {flag}")


def undo_openid_provider_steps(url: str) -> None:
    """Undo schema steps 9 (``v0009_oauth_clients``: its tables) and 8 (``v0008_oauth``:
    the sessions' columns and their indexes; its signing-key change went with the table)."""
    for table in ("locky_oauth_codes", "locky_consents", "locky_oauth_clients"):
        raw(url, f"DROP TABLE {table}")
    for column in ("client_id", "op_session_uuid"):
        index = f"idx_locky_sessions__{column}"
        raw(url, f"DROP INDEX {index} ON locky_sessions" if engine(url) == "mysql" else f"DROP INDEX {index}")
    for column in ("client_id", "scope", "op_session_uuid", "amr"):
        raw(url, f"ALTER TABLE locky_sessions DROP COLUMN {column}")


def undo_passkeys_step(url: str) -> None:
    """Undo schema step 10 (``v0010_passkeys_and_external_ids``): the passkeys table and
    the users' and groups' external_id with its index."""
    raw(url, "DROP TABLE locky_passkeys")
    for table in ("locky_users", "locky_groups"):
        index = f"idx_{table}__external_id_del_token_id"
        raw(url, f"DROP INDEX {index} ON {table}" if engine(url) == "mysql" else f"DROP INDEX {index}")
        raw(url, f"ALTER TABLE {table} DROP COLUMN external_id")


def undo_membership_roles_index_step(url: str) -> None:
    """Undo schema step 11 (``v0011_membership_roles_index``): the memberships' index
    for batch role reads."""
    index = "idx_locky_members__user_uuid_del_token_group_uuid_role"
    raw(url, f"DROP INDEX {index} ON locky_members" if engine(url) == "mysql" else f"DROP INDEX {index}")


def undo_holders_by_user_id_step(url: str) -> None:
    """Undo schema step 13 (``v0013_holders_by_user_id``): the indexes of a role's holders
    by user id and the grants' ``user_id``, and step 12's index back in their place."""
    mysql = engine(url) == "mysql"
    for table, index in (("locky_grants", "idx_locky_grants__role_user_id_user_uuid"),
                         ("locky_members", "idx_locky_members__group_uuid_del_token_role_user_user_uuid")):
        raw(url, f"DROP INDEX {index} ON {table}" if mysql else f"DROP INDEX {index}")
    raw(url, "ALTER TABLE locky_grants DROP COLUMN user_id")
    raw(url, "CREATE INDEX idx_locky_grants__role_user_uuid ON locky_grants (role, user_uuid)")


def undo_grants_role_index_step(url: str) -> None:
    """Undo schema step 12 (``v0012_grants_role_index``): the grants' index on role."""
    index = "idx_locky_grants__role_user_uuid"
    raw(url, f"DROP INDEX {index} ON locky_grants" if engine(url) == "mysql" else f"DROP INDEX {index}")


def test_a_database_behind_the_code_migrates_or_names_the_command(database_url):
    app_for(database_url).close()
    raw(database_url, f"UPDATE locky_meta SET number = 1 WHERE {meta_key(database_url)} = 'schema_version'")
    raw(database_url, "DROP TABLE locky_schema_history")  # back to the 1.0.0 schema:
    undo_holders_by_user_id_step(database_url)  # step 13 undone
    undo_grants_role_index_step(database_url)  # and step 12
    undo_membership_roles_index_step(database_url)  # and step 11
    undo_passkeys_step(database_url)  # step 10 undone
    undo_throttle_backoff_step(database_url)  # step 3 undone too
    undo_account_lifecycle_step(database_url)  # and step 4
    raw(database_url, "DROP TABLE locky_signing_keys")  # and step 5 (v0005_signing_keys)
    for table in ("locky_webhook_deliveries", "locky_webhooks", "locky_audit"):  # and step 6
        raw(database_url, f"DROP TABLE {table}")
    raw(database_url, f"DELETE FROM locky_meta WHERE {meta_key(database_url)} = 'cache_revision'")  # and step 7
    undo_openid_provider_steps(database_url)  # and steps 8 and 9
    with pytest.raises(SettingsError, match=r"run `locky migrate`") as caught:
        create_app(make_settings(database_url, log_requests=False, auto_migrate=False))
    assert "version 1" in str(caught.value)
    assert raw(database_url, f"SELECT number FROM locky_meta WHERE {meta_key(database_url)} = 'schema_version'") == [(1,)]
    app_for(database_url).close()  # LOCKY_AUTO_MIGRATE defaults to true
    rows = raw(database_url, "SELECT version, applied_at FROM locky_schema_history ORDER BY version")
    assert [version for version, _ in rows] == list(range(1, SCHEMA_VERSION + 1))
    assert rows[0][1] is None and all(applied is not None for _, applied in rows[1:])


def test_ids_are_64_bit(database_url):
    app_for(database_url).close()
    start = 2**40
    kind = engine(database_url)
    if kind == "postgres":
        raw(database_url, "SELECT setval('locky_users_id_seq', %s)", start)
    elif kind == "mysql":
        raw(database_url, f"ALTER TABLE locky_users AUTO_INCREMENT = {start + 1}")
    else:
        raw(database_url, "INSERT INTO sqlite_sequence (name, seq) VALUES ('locky_users', %s)", start)
    app = app_for(database_url)
    try:
        client = LockyClient(app)
        admin = client.account(ADMIN_EMAIL, verified=True)
        assert admin.id == start + 1
        listed = client.simulate_get("/v1/internal/users", params={"after_id": start}, headers=admin.headers)
        assert [u["id"] for u in listed.json["users"]] == [start + 1]
        assert client.simulate_get(f"/v1/internal/users/{start + 1}", headers=admin.headers).status_code == 200
    finally:
        app.close()


@pytest.mark.backend
def test_mysql_tables_are_utf8mb4_and_binary(mysql_database):
    mysql_database.wipe()
    url = mysql_database.url
    app_for(url).close()
    rows = raw(url, "SELECT table_name, table_collation FROM information_schema.tables"
                    " WHERE table_schema = DATABASE() AND table_name LIKE 'locky%%'")
    # The entities' nineteen (step 4 added codes, outbox and totp; step 5 signing keys;
    # step 6 audit, webhooks and deliveries; step 9 OAuth clients, consents and codes;
    # step 10 passkeys) and locky_schema_history.
    assert len(rows) == 20, rows
    assert {collation for _, collation in rows} == {"utf8mb4_nopad_bin"}
    columns = raw(url, "SELECT DISTINCT character_set_name FROM information_schema.columns"
                       " WHERE table_schema = DATABASE() AND character_set_name IS NOT NULL")
    assert columns == [("utf8mb4",)]


@pytest.mark.backend
def test_mysql_tables_with_a_case_insensitive_collation_are_refused(mysql_database):
    mysql_database.wipe()
    url = mysql_database.url
    app_for(url).close()
    raw(url, "ALTER TABLE locky_groups CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    try:
        with pytest.raises(SettingsError, match="locky_groups uses collation utf8mb4_general_ci"):
            app_for(url)
    finally:
        raw(url, "ALTER TABLE locky_groups CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin")


#: A stand-in for mysqlclient as Pony sees it when choosing its MySQL driver: a package
#: ``MySQLdb`` with ``converters``, ``string_literal`` and ``constants``. Pony prefers it
#: to PyMySQL whenever it imports; its connections would then fail.
MYSQLCLIENT_FILES = {
    "MySQLdb/__init__.py": "IS_STAND_IN = True\n"
                           "def string_literal(value): raise RuntimeError('the stand-in was used')\n"
                           "def connect(*args, **kwargs): raise RuntimeError('the stand-in was used')\n",
    "MySQLdb/converters.py": "conversions = {}\n",
    "MySQLdb/constants/__init__.py": "CLIENT = FIELD_TYPE = FLAG = None\n",
}

SERVE_BESIDE_MYSQLCLIENT = """
import sys
from locky.app import create_app
from locky.testing import PASSWORD, LockyClient, make_settings
app = create_app(make_settings(sys.argv[1], log_requests=False))
client = LockyClient(app)
body = {"name": "Beside", "email": "beside@example.com", "password": PASSWORD}
assert client.simulate_post("/v1/public/users/register", json=body).status_code == 201
login = client.simulate_post("/v1/public/users/login", json={"email": body["email"], "password": PASSWORD})
me = client.simulate_get("/v1/internal/users/me", headers={"Authorization": "Bearer " + login.json["access_token"]})
app.close()
import MySQLdb, pony.orm.dbproviders.mysql as provider
print(me.status_code, me.json["email"], provider.mysql_module_name, MySQLdb.IS_STAND_IN)
"""


def _beside_mysqlclient(tmp_path: Path, script: str, url: str):
    for name, text in MYSQLCLIENT_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    # Locky as installed (not the checkout: cwd is the stand-in's folder), beside the stand-in.
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", script, url], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.backend
def test_mysql_speaks_pymysql_where_mysqlclient_is_installed_too(mysql_database, tmp_path):
    """A host with mysqlclient (for other programs) runs Locky on PyMySQL, and its
    programs still import mysqlclient afterwards."""
    mysql_database.wipe()
    done = _beside_mysqlclient(tmp_path, SERVE_BESIDE_MYSQLCLIENT, mysql_database.url)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["200", "beside@example.com", "pymysql", "True"]


def test_pony_imported_with_mysqlclient_first_stops_with_a_message(tmp_path):
    script = ("import sys, pony.orm.dbproviders.mysql as p; assert p.mysql_module_name == 'MySQLdb'\n"
              "from locky.settings import SettingsError\n"
              "from locky_pony.compat import pymysql_provider\n"
              "try:\n    pymysql_provider()\nexcept SettingsError as exc:\n    print(exc)\n")
    done = _beside_mysqlclient(tmp_path, script, "")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "imported with mysqlclient (MySQLdb) before Locky" in done.stdout


# ---------------------------------------------------------------------------
# Races between worker processes
# ---------------------------------------------------------------------------


def _register(barrier, url: str, email: str) -> tuple[int, dict]:
    app = app_for(url)
    try:
        client = LockyClient(app)
        barrier.wait(timeout=60)
        result = client.simulate_post("/v1/public/users/register",
                                      json={"name": "Racer", "email": email, "password": PASSWORD})
        return result.status_code, result.json
    finally:
        app.close()


def test_one_email_registered_by_several_processes(database_url):
    emails = ["race@example.com", "RACE@example.com", "race@EXAMPLE.com", " race@example.com", "Race@Example.Com"]
    results = in_processes(_register, [(database_url, email) for email in emails])
    statuses = sorted(status for status, _ in results)
    assert statuses == [201, 400, 400, 400, 400], results
    assert all(body == {"email": "Already registered."} for status, body in results if status == 400)
    assert raw(database_url, "SELECT COUNT(*) FROM locky_users") == [(1,)]


# ---------------------------------------------------------------------------
# Lost connections
# ---------------------------------------------------------------------------


def _kill_other_connections(url: str) -> int:
    """End every other session on the database of ``url``; how many were ended."""
    name = urlsplit(url).path.strip("/")
    if engine(url) == "postgres":
        rows = raw(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()", name)
        return len(rows)
    connection = connect(url)
    try:
        cursor = connection.cursor()
        cursor.execute("SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
                       (name,))
        ids = [row[0] for row in cursor.fetchall()]
        for session in ids:
            cursor.execute(f"KILL CONNECTION {int(session)}")
        return len(ids)
    finally:
        connection.close()


def test_connections_ended_by_the_server_are_reopened(server_url):
    app = app_for(server_url)
    try:
        client = LockyClient(app)
        admin = client.account(ADMIN_EMAIL, verified=True)
        for attempt in range(3):
            assert _kill_other_connections(server_url) >= 1
            me = client.simulate_get("/v1/internal/users/me", headers=admin.headers)
            assert me.status_code == 200, me.text
            assert _kill_other_connections(server_url) >= 1
            created = client.simulate_post("/v1/private/groups", json={"name": f"g{attempt}"}, headers=admin.headers)
            assert created.status_code == 201, created.text
    finally:
        app.close()


def assert_standard_503(result) -> None:
    assert result.status_code == 503, result.text
    assert result.json == {"title": "503 Service Unavailable", "description": "Storage is not answering."}
    lowered = result.text.lower()
    assert not any(word in lowered for word in DRIVER_WORDS), result.text


@pytest.fixture
def proxy(server_url):
    with proxy_to(server_url) as proxy:
        yield proxy


def test_a_database_that_goes_away_gives_503_then_recovers(proxy):
    app = app_for(proxy.url)
    try:
        client = LockyClient(app)
        admin = client.account(ADMIN_EMAIL, verified=True)
        proxy.stop()
        assert_standard_503(client.simulate_get("/v1/internal/users", headers=admin.headers))
        assert_standard_503(client.simulate_post("/v1/public/users/register",
                                                 json={"name": "B", "email": "b@example.com", "password": PASSWORD}))
        assert_standard_503(client.simulate_post("/v1/public/users/login",
                                                 json={"email": ADMIN_EMAIL, "password": PASSWORD}))
        health = client.simulate_get("/v1/public/health")
        assert (health.status_code, health.json) == (503, {"status": "unavailable"})

        proxy.start()
        assert client.simulate_get("/v1/public/health").json == {"status": "ok"}
        listed = client.simulate_get("/v1/internal/users", headers=admin.headers)
        assert listed.status_code == 200 and [u["email"] for u in listed.json["users"]] == [ADMIN_EMAIL]
    finally:
        app.close()


def test_an_unreachable_database_stops_startup(server_url):
    parts = urlsplit(server_url)
    with TcpProxy(parts.hostname, parts.port or 5432) as closed:
        closed.stop()
        url = parts._replace(netloc=f"{parts.username}@127.0.0.1:{closed.port}").geturl()
        with pytest.raises(SettingsError, match="cannot connect to the database"):
            app_for(url)


def test_sqlite_directory_is_created(tmp_path):
    path = tmp_path / "nested" / "dir" / "locky.sqlite"
    app_for(f"sqlite:///{path}").close()
    assert Path(path).exists()


def test_updates_refuse_fields_storage_owns_or_the_record_lacks(database_url):
    """``update`` changes a record's own fields only: an id, uuid, timestamp or unknown
    name is the caller's mistake (``ValueError``), not an outage, and changes nothing."""
    storage = PonyStorage(make_settings(database_url))
    try:
        storage.migrate()
        user = storage.users.create(name="Ada", email="ada@example.com", password_hash="x" * 60)
        for changes in ({"uuid": "0" * 8 + "-0000-4000-8000-" + "0" * 12}, {"deleted_at": None}, {"created_at": None},
                        {"shoe_size": 44}, {"name": "Bea", "del_token": 7}):
            with pytest.raises(ValueError):
                storage.users.update(user.id, **changes)
        assert storage.users.get(user.id) == user
        group = storage.groups.create(name="engineers", description="", owner_uuid=user.uuid)
        with pytest.raises(ValueError):
            storage.groups.update(group.id, uuid=user.uuid)
        assert storage.users.update(user.id, name="Bea").name == "Bea"
    finally:
        storage.close()


def test_a_bool_is_not_an_id(database_url):
    storage = PonyStorage(make_settings(database_url))
    try:
        storage.migrate()
        user = storage.users.create(name="Ada", email="ada@example.com", password_hash="x" * 60)
        assert user.id == 1 and storage.users.get(1) == user
        assert storage.users.get(True) is None
        with pytest.raises(NotFound):
            storage.users.update(True, name="Bea")
    finally:
        storage.close()


def _gssencmode_of_a_pooled_connection(url: str, monkeypatch, environment: str | None) -> str:
    if environment is None:
        monkeypatch.delenv("PGGSSENCMODE", raising=False)
    else:
        monkeypatch.setenv("PGGSSENCMODE", environment)
    storage = PonyStorage(make_settings(url, log_requests=False))
    try:
        pool = storage.db.provider.pool
        connection, _ = pool.connect()
        try:
            return connection.get_dsn_parameters()["gssencmode"]
        finally:
            pool.release(connection)
    finally:
        storage.close()


def test_postgresql_connections_ask_for_no_kerberos_encryption(postgres_database, monkeypatch):
    """libpq asks for GSSAPI encryption on every connect unless told not to, and the
    Kerberos library in psycopg2's wheel can crash a process whose threads connect at once;
    Locky does not use Kerberos. An operator who does says so in the URL or PGGSSENCMODE."""
    url = postgres_database.url
    assert _gssencmode_of_a_pooled_connection(url, monkeypatch, None) == "disable"
    separator = "&" if "?" in url else "?"
    assert _gssencmode_of_a_pooled_connection(f"{url}{separator}gssencmode=prefer", monkeypatch, None) == "prefer"
    assert _gssencmode_of_a_pooled_connection(url, monkeypatch, "prefer") == "prefer"


def test_the_scratch_database_wipe_empties_every_table_and_restarts_ids(server_url, request):
    """``ScratchDatabase.wipe`` (the kit's reset between tests): rows gone, the schema's
    version kept, and ids from 1 again, also in a table a test emptied itself."""
    kind = engine(server_url)
    scratch = request.getfixturevalue(f"{kind}_database")
    app = app_for(server_url)
    try:
        client = LockyClient(app)
        client.account(ADMIN_EMAIL, verified=True)
        for name in ("a", "b"):
            assert client.simulate_post("/v1/public/users/register", json={
                "name": name, "email": f"{name}@example.com", "password": PASSWORD}).status_code == 201
    finally:
        app.close()
    assert raw(server_url, "SELECT count(*) FROM locky_groups")[0][0] == 0
    raw(server_url, "DELETE FROM locky_sessions")  # emptied by the test: its counter has moved
    scratch.wipe()
    kept = {table: raw(server_url, f"SELECT count(*) FROM {table}")[0][0] for table in SCHEMA_TABLES}
    assert all(kept.values()), kept
    for table in set(scratch.tables()) - set(SCHEMA_TABLES):
        assert raw(server_url, f"SELECT count(*) FROM {table}")[0][0] == 0, table
    app = app_for(server_url)
    try:
        client = LockyClient(app)
        admin = client.account(ADMIN_EMAIL, verified=True)
        assert client.simulate_get("/v1/internal/users/me", headers=admin.headers).json["id"] == 1
        rows = raw(server_url, "SELECT id FROM locky_sessions ORDER BY id")
        assert rows and rows[0][0] == 1
    finally:
        app.close()
