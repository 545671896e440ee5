"""Every shim of ``locky_pony.compat`` (the plugin's only use of Pony's private API) works
on the installed Pony.

A Pony upgrade that moves one of those internals fails here, by name, rather than in a
request. The shims that matter only on a server engine (the pool, 64-bit ids, PyMySQL)
run on every engine ``database_url`` offers (PostgreSQL and MariaDB when configured).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

import pony
import pytest
from pony.orm import Database, OrmError, Required, db_session

from locky import Page
from locky.testing import make_settings
from locky_pony import PonyStorage, compat
from locky_pony.pool import BoundedPool


@pytest.fixture
def storage(tmp_path):
    storage = PonyStorage(make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}", mail_dir=str(tmp_path / "mail")))
    storage.migrate()
    yield storage
    storage.close()


@pytest.fixture
def server_storage(database_url, tmp_path):
    storage = PonyStorage(make_settings(database_url, mail_dir=str(tmp_path / "mail")))
    storage.migrate()
    yield storage
    storage.close()


def test_the_checked_version_is_the_installed_one():
    # Not a pin: a reminder. When this fails, read compat's docstring against the new
    # release, run this file, and move PONY_CHECKED.
    assert pony.__version__ == compat.PONY_CHECKED


def test_in_db_session_and_the_databases_it_used(storage):
    assert compat.in_db_session() is False
    with db_session:
        assert compat.in_db_session() is True
        assert compat.session_databases() == ()
        storage.db.select("SELECT 1")
        assert compat.session_databases() == (storage.db,)
    assert compat.in_db_session() is False


def test_partial_commit_exception_is_ponys_commit_wrapper():
    assert issubclass(compat.PartialCommitException, OrmError)
    assert compat.PartialCommitException.__name__ == "PartialCommitException"


def test_an_entitys_mapping(storage):
    e = storage.entities
    assert compat.table(e.User) == "locky_users"
    assert compat.column(e.User, "email") == "email"
    assert compat.column(e.Member, "group") == "group"  # a relation: its foreign key column
    assert compat.attribute_type(e.User, "email") is str
    assert compat.attribute_type(e.User, "email_verified") is bool
    assert compat.plain_attributes(e.User) == {
        "id", "uuid", "created_at", "updated_at", "deleted_at", "del_token", "name", "email",
        "email_verified", "disabled", "mfa_enabled", "password_hash", "external_id"}
    assert "group" not in compat.plain_attributes(e.Member)  # relations and sets are left out
    # A timestamp as Pony hands it to SQLite: its text, always with microseconds.
    assert compat.sql_value(e.Passkey, "last_used_at", datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02 03:04:05.000000"
    assert compat.sql_value(e.Passkey, "sign_count", 7) == 7
    assert compat.database_of(e.User) is storage.db
    assert compat.dialect_of(e.User) == "SQLite"


def test_the_session_connection_takes_no_write_lock(storage, tmp_path):
    with db_session:
        connection = compat.session_connection(storage.db)
        assert connection.execute("SELECT count(*) FROM locky_users").fetchone() == (0,)
        # Another writer is not kept waiting (db.get_connection() would BEGIN IMMEDIATE).
        other = sqlite3.connect(str(tmp_path / "locky.sqlite"), timeout=0)
        other.execute("UPDATE locky_meta SET number = number WHERE key = 'schema_version'")
        other.commit()
        other.close()


def test_the_catalog_reads(storage):
    db = storage.db
    with db_session:
        connection = compat.session_connection(db)
        assert compat.table_exists(db, connection, "locky_meta") is True
        assert compat.table_exists(db, connection, "no_such_table") is False
        compat.check_tables(db, connection)  # a migrated database matches the entities
    assert {"locky_users", "locky_members", "locky_audit"} <= set(compat.mapped_tables(db))


def test_check_tables_finds_a_missing_column(storage):
    db = storage.db
    with db_session(ddl=True):
        db.execute("ALTER TABLE locky_audit DROP COLUMN request_id")
        with pytest.raises(Exception, match="request_id"):
            compat.check_tables(db, compat.session_connection(db))


def test_call_on_connect_runs_the_databases_hooks(tmp_path):
    db = Database()
    seen = []

    @db.on_connect(provider="sqlite")
    def remember(db, connection):
        seen.append(connection)

    db.bind(provider="sqlite", filename=str(tmp_path / "hooks.sqlite"), create_db=True)
    seen.clear()
    connection = sqlite3.connect(str(tmp_path / "hooks.sqlite"))
    compat.call_on_connect(db, connection)
    assert seen == [connection]
    connection.close()
    db.disconnect()


def test_replace_pool_gives_sessions_the_new_pool(tmp_path):
    db = Database()

    class Thing(db.Entity):
        name = Required(str)

    db.bind(provider="sqlite", filename=str(tmp_path / "pool.sqlite"), create_db=True)
    db.generate_mapping(create_tables=True)
    pool = compat.replace_pool(db, KeepingPool)
    assert compat.pool_of(db) is pool
    with db_session:
        Thing(name="a")
    with db_session:
        assert [t.name for t in Thing.select()] == ["a"]
    # One connection, opened through Pony's own pool (its SQLite functions are there),
    # given back after each session and taken again.
    assert (pool.opened, len(pool.idle)) == (1, 1)
    assert pool.idle[0].execute("SELECT py_lower('A')").fetchone() == ("a",)
    db.disconnect()


class KeepingPool:
    """The pool interface Pony calls (what :class:`~locky_pony.pool.BoundedPool` offers,
    without its watchdog, which watches sockets and SQLite has none)."""

    def __init__(self, open_connection):
        self.open_connection = open_connection
        self.idle: list = []
        self.opened = 0

    def connect(self):
        if self.idle:
            return self.idle.pop(), False
        self.opened += 1
        return self.open_connection(), True

    def release(self, connection):
        connection.rollback()
        self.idle.append(connection)

    def drop(self, connection):
        connection.close()

    def disconnect(self):
        for connection in self.idle:
            connection.close()
        self.idle.clear()


def test_veto_reconnect_is_what_pony_asks(tmp_path):
    db = Database()
    db.bind(provider="sqlite", filename=str(tmp_path / "veto.sqlite"), create_db=True)
    db.generate_mapping(create_tables=False)
    db.provider.should_reconnect = lambda exc: True  # as the server engines answer for a lost link
    vetoed = [False]
    compat.veto_reconnect(db, lambda: vetoed[0])

    def broken_then_select():
        with db_session:
            db.select("SELECT 1")
        pool = compat.pool_of(db)
        pool.con = BrokenConnection(pool.con)  # the thread's connection breaks under Pony
        with db_session:
            return db.select("SELECT 1")

    assert broken_then_select() == [1]  # Pony reconnected
    vetoed[0] = True
    with pytest.raises(Exception, match="the link went away"):
        broken_then_select()  # the veto holds: no second connection
    db.disconnect()


class BrokenConnection:
    """A connection whose statements fail as a lost one's do."""

    def __init__(self, real):
        self.real = real

    def cursor(self):
        return self

    def execute(self, *args):
        raise sqlite3.OperationalError("the link went away")

    def rollback(self):
        pass

    def close(self):
        self.real.close()


def test_server_engine_shims(server_storage):
    db = server_storage.db
    dialect = db.provider.dialect
    if dialect == "SQLite":
        pytest.skip("the bounded pool, 64-bit ids and PyMySQL concern the server engines")
    assert isinstance(compat.pool_of(db), BoundedPool)
    with db_session:
        compat.check_tables(db, compat.session_connection(db))  # BIGSERIAL ids match Pony's idea
    if dialect == "PostgreSQL":
        assert "BIGSERIAL" in db.schema.tables["locky_users"].get_create_command()
    if dialect == "MySQL":
        assert compat.pymysql_provider().mysql_module_name == "pymysql"
    user = server_storage.users.create(name="n", email="n@example.com", password_hash="h")
    assert server_storage.users.list() == Page(items=[user], next_after_id=None)
