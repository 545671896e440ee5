"""The storage contract suite (:mod:`locky.testing.storage_contract`) on the bundled
Pony storage, once per engine: SQLite always, PostgreSQL and MariaDB/MySQL when their
servers are configured (see ``backends.py``)."""

from __future__ import annotations

import pytest

from locky.testing import make_settings
from locky.testing.storage_contract import StorageContract
from locky_pony import PonyStorage


def open_storage(url: str):
    storage = PonyStorage(make_settings(url))
    try:
        yield storage
    finally:
        storage.close()


class TestSQLite(StorageContract):
    @pytest.fixture
    def storage(self, tmp_path):
        yield from open_storage(f"sqlite:///{tmp_path / 'contract.sqlite'}")


@pytest.mark.backend
class TestPostgreSQL(StorageContract):
    @pytest.fixture
    def storage(self, postgres_database):
        postgres_database.wipe()
        yield from open_storage(postgres_database.url)


@pytest.mark.backend
class TestMySQL(StorageContract):
    @pytest.fixture
    def storage(self, mysql_database):
        mysql_database.wipe()
        yield from open_storage(mysql_database.url)
