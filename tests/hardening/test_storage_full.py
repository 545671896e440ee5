"""Issue 31, finding 17: a full disk or a read-only database is said, not hidden.

A write the database refuses (SQLite's "database or disk is full" and "attempt to write
a readonly database", PostgreSQL's disk_full and read-only transaction, MariaDB's disk
full and read-only errors) answers 503 with a description saying which, and health
answers 503 ``{"status": "unavailable"}`` until a write works again. Health writes
nothing while all is well.

The disk is a real one: a 2 MiB tmpfs mounted for the test and filled up; the read-only
database is a real file under a read-only bind mount (root ignores file modes, not a
read-only mount). Both need the right to mount; without it the tests skip saying so.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from pony.orm import Database, db_session

from locky.app import create_app
from locky.errors import WritesRefused
from locky.testing import LockyClient, make_settings
from locky_pony import guard

HEALTH = "/v1/public/health"


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode}): the test needs a real"
                    " full disk or read-only file system")


def unmount(path: Path) -> None:
    gc.collect()  # a connection an exception's traceback still held
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


@pytest.fixture
def tiny_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(disk))
    try:
        yield disk
    finally:
        unmount(disk)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; the filler file, to remove to free it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_said_and_health_reports_it_until_space_is_freed(tiny_disk, monkeypatch):
    database = tiny_disk / "locky.sqlite"
    app = create_app(make_settings(f"sqlite:///{database}"), background=False)
    try:
        client = LockyClient(app)
        ada = client.account("ada@example.com")
        assert client.simulate_get(HEALTH).json == {"status": "ok"}
        # The WAL emptied to zero bytes, so the next commit needs new space (an old WAL
        # is reused from its start and could take a small write on a full disk).
        side = sqlite3.connect(database)
        assert side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        side.close()
        filler = fill(tiny_disk)

        refused = client.simulate_post("/v1/public/users/register",
                                       json={"name": "Bob", "email": "bob@example.com", "password": "bob's long password"})
        assert refused.status_code == 503, refused.text
        assert "disk is full" in refused.json["description"], refused.json
        assert "sqlite" not in refused.text.lower() and "database or disk" not in refused.text
        health = client.simulate_get(HEALTH)
        assert (health.status_code, health.json) == (503, {"status": "unavailable"})
        # Reading still works.
        me = client.simulate_get("/v1/internal/users/me", headers=ada.headers)
        assert me.status_code == 200, me.text

        monkeypatch.setattr(guard, "PROBE_INTERVAL", 0.0)
        health = client.simulate_get(HEALTH)  # its probe write is refused: still full
        assert (health.status_code, health.json) == (503, {"status": "unavailable"})

        filler.unlink()
        health = client.simulate_get(HEALTH)
        assert (health.status_code, health.json) == (200, {"status": "ok"})
        assert client.register("bob@example.com")["email"] == "bob@example.com"
    finally:
        app.close()


def test_health_writes_nothing_while_all_is_well(tmp_path):
    database = tmp_path / "locky.sqlite"
    app = create_app(make_settings(f"sqlite:///{database}"), background=False)
    try:
        client = LockyClient(app)
        client.account("ada@example.com")
        side = sqlite3.connect(database)
        before = side.execute("PRAGMA data_version").fetchone()[0]
        for _ in range(50):
            assert client.simulate_get(HEALTH).status_code == 200
        # data_version moves when another connection commits: health committed nothing.
        assert side.execute("PRAGMA data_version").fetchone()[0] == before
        side.close()
    finally:
        app.close()


def test_the_probe_writes_and_leaves_no_trace_on_every_engine(locky_app_factory, monkeypatch):
    """The probe health runs while writes are refused, on the test's database (run
    with LOCKY_TEST_DATABASE_URL for PostgreSQL and MariaDB): a write that commits,
    and leaves the policy revision as it was."""
    app = locky_app_factory()
    storage = app.context.storage
    before = storage.revision()
    guard._refusal_of(storage.db).failed(guard.FULL)
    assert storage.ping() is False  # remembered, not probed yet
    monkeypatch.setattr(guard, "PROBE_INTERVAL", 0.0)
    assert storage.ping() is True  # the probe wrote: writes work
    assert storage.revision() == before


@pytest.fixture
def read_only_database(tmp_path):
    """A SQLite file with Locky's meta table, seen through a read-only bind mount."""
    source, view = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    view.mkdir()
    with sqlite3.connect(source / "locky.sqlite") as connection:
        connection.execute("CREATE TABLE locky_meta (key TEXT PRIMARY KEY, number INTEGER NOT NULL)")
        connection.execute("INSERT INTO locky_meta VALUES ('policy_revision', 1)")
    connection.close()
    mount("--bind", str(source), str(view))
    try:
        done = subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make a read-only bind mount: {done.stderr.strip()}")
        yield source, view / "locky.sqlite"
    finally:
        unmount(view)


def test_a_read_only_database_is_said_and_remembered_for_health(read_only_database, monkeypatch):
    source, path = read_only_database
    db = Database(provider="sqlite", filename=str(path))

    @guard.transaction
    def write():
        db.execute("UPDATE locky_meta SET number = number + 1")

    try:
        with db_session:
            assert db.select("SELECT number FROM locky_meta") == [1]  # reading works
        with pytest.raises(WritesRefused) as caught:
            write()
        assert "read-only" in caught.value.description and "readonly" not in caught.value.description
        assert guard.writes_refused(db) == "read-only"
        monkeypatch.setattr(guard, "PROBE_INTERVAL", 0.0)
        assert guard.writes_refused(db) == "read-only"  # the probe write is refused too
        # Writable again (the same file, opened where it can be written): the probe says so.
        writable = Database(provider="sqlite", filename=str(source / "locky.sqlite"))
        guard._refusal_of(writable).failed(guard.READ_ONLY)
        assert guard.writes_refused(writable) is None
        writable.disconnect()
    finally:
        db.disconnect()


@pytest.mark.extras  # the drivers: .[postgres] and .[mysql]
def test_the_classes_of_refused_writes():
    """The drivers' codes, as each engine reports them."""
    pymysql = pytest.importorskip("pymysql", reason="pip install 'locky[mysql]'")
    psycopg2 = pytest.importorskip("psycopg2", reason="pip install 'locky[postgres]'")

    class PGError(psycopg2.OperationalError):
        """A psycopg2 error with a given SQLSTATE (a real one's ``pgcode`` is read-only)."""

        __module__ = "psycopg2.errors"

        def __init__(self, pgcode):
            super().__init__("x")
            self._code = pgcode

        @property
        def pgcode(self):
            return self._code

    assert guard.classify(PGError("53100")) == guard.FULL
    assert guard.classify(PGError("25006")) == guard.READ_ONLY
    assert guard.classify(pymysql.err.OperationalError(1021, "Disk full (/tmp/x); waiting ...")) == guard.FULL
    assert guard.classify(pymysql.err.OperationalError(1114, "The table 'locky_audit' is full")) == guard.FULL
    assert guard.classify(pymysql.err.OperationalError(
        1290, "The MariaDB server is running with the --read-only option so it cannot execute this statement")) \
        == guard.READ_ONLY
    assert guard.classify(pymysql.err.OperationalError(1792, "Cannot execute statement in a READ ONLY transaction")) \
        == guard.READ_ONLY
    assert guard.classify(sqlite3.OperationalError("database or disk is full")) == guard.FULL
    assert guard.classify(sqlite3.OperationalError("attempt to write a readonly database")) == guard.READ_ONLY
    assert guard.classify(sqlite3.OperationalError("database is locked")) == guard.TRANSIENT


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_a_read_only_transaction_on_a_server_is_classified_read_only(engine):
    """A real read-only refusal from each server (a READ ONLY transaction)."""
    url = os.environ.get(f"LOCKY_TEST_{'POSTGRES' if engine == 'postgres' else 'MYSQL'}_URL")
    if not url:
        pytest.skip(f"LOCKY_TEST_{engine.upper()}_URL is not set")
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    table = f"locky_read_only_probe_{os.getpid()}"
    if engine == "postgres":
        import psycopg2

        connection = psycopg2.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username,
                                      password=parts.password or "", dbname=parts.path.strip("/"))
        statements = ["SET TRANSACTION READ ONLY", f"CREATE TABLE {table} (a int)"]
    else:
        import pymysql

        connection = pymysql.connect(host=parts.hostname, port=parts.port or 3306, user=parts.username,
                                     password=parts.password or "", database=parts.path.strip("/"))
        statements = [f"CREATE TABLE {table} (a int)", "START TRANSACTION READ ONLY",
                      f"INSERT INTO {table} VALUES (1)"]
    try:
        cursor = connection.cursor()
        with pytest.raises(Exception) as caught:
            for statement in statements:
                cursor.execute(statement)
        assert guard.classify(caught.value) == guard.READ_ONLY, repr(caught.value)
    finally:
        connection.rollback()
        if engine == "mysql":
            connection.cursor().execute(f"DROP TABLE IF EXISTS {table}")
        connection.close()
