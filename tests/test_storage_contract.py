"""The storage contract suite (:mod:`locky.testing.storage_contract`) on the bundled
Pony storage, once per engine: SQLite always, PostgreSQL and MariaDB/MySQL when their
servers are configured (see ``backends.py``). Each class also gives the suite a
``storage_factory``, so uniqueness and the login throttle are raced across processes.

Last, the cross-process checks themselves are checked: a storage that checks before it
inserts, under a lock of its own process, must fail them.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from datetime import datetime, timezone

import pytest

from locky.errors import Conflict
from locky.records import User
from locky.testing import make_settings
from locky.testing.storage_contract import (
    StorageContract,
    assert_one_created_per_round,
    race_in_processes,
    register_in_race,
)
from locky_pony import PonyStorage


def open_pony(url: str) -> PonyStorage:
    """The storage on ``url``: picklable by reference, so other processes open it too."""
    return PonyStorage(make_settings(url))


def open_storage(url: str):
    storage = open_pony(url)
    try:
        yield storage
    finally:
        storage.close()


class TestSQLite(StorageContract):
    @pytest.fixture
    def database_url(self, tmp_path):
        return f"sqlite:///{tmp_path / 'contract.sqlite'}"

    @pytest.fixture
    def storage(self, database_url):
        yield from open_storage(database_url)

    @pytest.fixture
    def storage_factory(self, database_url):
        return functools.partial(open_pony, database_url)


@pytest.mark.backend
class TestPostgreSQL(StorageContract):
    @pytest.fixture
    def storage(self, postgres_database):
        postgres_database.wipe()
        yield from open_storage(postgres_database.url)

    @pytest.fixture
    def storage_factory(self, postgres_database):
        return functools.partial(open_pony, postgres_database.url)


@pytest.mark.backend
class TestMySQL(StorageContract):
    @pytest.fixture
    def storage(self, mysql_database):
        mysql_database.wipe()
        yield from open_storage(mysql_database.url)

    @pytest.fixture
    def storage_factory(self, mysql_database):
        return functools.partial(open_pony, mysql_database.url)


# -- the cross-process checks catch a storage that is unique in one process only --------------


class CheckThenInsertUsers:
    """Users in an SQLite table with no unique index: ``create`` looks for the email,
    then inserts, under a lock that only this process sees (the mistake the
    cross-process tests are there to catch). The pause stands for a round trip."""

    _lock = threading.Lock()

    def __init__(self, path: str):
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, email TEXT)")

    def create(self, *, name: str, email: str, password_hash: str) -> User:
        email = email.lower()
        with self._lock:
            if self.db.execute("SELECT 1 FROM users WHERE email = ?", (email,)).fetchone():
                raise Conflict("email", "Already registered.")
            time.sleep(0.05)
            cursor = self.db.execute("INSERT INTO users (email) VALUES (?)", (email,))
        now = datetime.now(timezone.utc)
        return User(id=cursor.lastrowid, uuid=f"uuid-{cursor.lastrowid}", created_at=now, updated_at=now,
                    deleted_at=None, name=name, email=email)


class CheckThenInsertStorage:
    def __init__(self, path: str):
        self.users = CheckThenInsertUsers(path)

    def close(self) -> None:
        self.users.db.close()


def open_check_then_insert(path: str) -> CheckThenInsertStorage:
    return CheckThenInsertStorage(path)


def test_a_per_process_lock_fails_the_cross_process_check(tmp_path):
    factory = functools.partial(open_check_then_insert, str(tmp_path / "racy.sqlite"))
    rounds = race_in_processes(factory, register_in_race, processes=3, rounds=3)
    with pytest.raises(AssertionError, match="records created"):
        assert_one_created_per_round(rounds, {"email": "Already registered."})
