"""``LOCKY_AUTH_CACHE=version``, the default on an SQLite file: each worker serves the
caller's session, its user and the policy revision from memory, emptied whenever
SQLite's ``PRAGMA data_version`` moves (issue 18):

- the storage contract suite passes through the cache;
- two apps on one file (two workers, or two processes of one host): reads come from
  memory, and a logout, a user change or deletion, a role change, a grant and a
  membership change made through one hold on the other's very next request;
- a change made by hand in SQL, outside Locky, is seen at once too;
- what a transaction wrote and rolled back is never served (the test fails when the
  cache is used inside a transaction);
- a data-version check that fails reads through, and the cache comes back after it;
- within a request the data version is read once (an item read served from memory asks
  once, not twice), again after the request's own writes, and every request asks anew;
- two ``locky serve`` processes (two workers each) on one file, with the same guarantee;
- the settings: ``auto`` picks the cache on an SQLite file only, ``version`` elsewhere is
  refused.
"""

from __future__ import annotations

import functools
import sqlite3

import auth_cache_scenarios as scenarios
import pytest
from auth_cache_scenarios import assert_from_memory, me, me_ok

from locky.settings import SettingsError
from locky.cache import CachingStorage, request_ended, request_started
from locky.testing import ADMIN_EMAIL, LockyClient, make_settings
from locky.testing.storage_contract import StorageContract
from locky_pony import PonyStorage, open_storage
from locky_pony.data_version import DataVersionBus
from locky_pony.settings import auth_cache_mode


def _cached_storage(url: str):
    storage = open_storage(make_settings(url))
    assert isinstance(storage, CachingStorage) and isinstance(storage.bus, DataVersionBus)
    assert storage.cache.max_entries == 10_000  # a default: bounded well within a worker's memory
    return storage


class TestContract(StorageContract):
    """The cache changes no behaviour of the storage it wraps."""

    @pytest.fixture
    def database_url(self, tmp_path):
        return f"sqlite:///{tmp_path / 'cached.sqlite'}"

    @pytest.fixture
    def storage(self, database_url):
        storage = _cached_storage(database_url)
        yield storage
        storage.close()

    @pytest.fixture
    def storage_factory(self, database_url):
        return functools.partial(_cached_storage, database_url)


@pytest.fixture
def hosts(locky_app_factory, tmp_path):
    """Two apps on one SQLite file, each with its cache."""
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    first, second = (locky_app_factory(database_url=url) for _ in range(2))
    for app in (first, second):
        assert isinstance(app.context.storage.bus, DataVersionBus)
    return LockyClient(first), LockyClient(second)


@pytest.mark.parametrize("scenario", scenarios.TWO_APPS, ids=lambda scenario: scenario.__name__)
def test_two_apps(hosts, scenario):
    scenario(*hosts)


def test_a_change_made_by_hand_in_sql_is_seen_at_once(hosts):
    a, b = hosts
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    path = b.app.context.settings.sqlite_path
    cache = b.app.context.storage.cache

    def name_on_b() -> str:
        answer = b.simulate_get(f"/v1/internal/users/{ada.id}", headers=admin.headers)
        assert answer.status_code == 200, answer.text
        return answer.json["name"]

    by_hand = sqlite3.connect(path, isolation_level=None)
    try:
        for round in range(5):
            assert_from_memory(cache, name_on_b, 3)  # the session, the revision and the record
            before = name_on_b()
            by_hand.execute("UPDATE locky_users SET name = ? WHERE id = ?", (f"by hand {round}", ada.id))
            assert name_on_b() == f"by hand {round}" != before
        assert me(b, ada) == 200 and me(b, ada) == 200
        by_hand.execute("UPDATE locky_sessions SET revoked_at = CURRENT_TIMESTAMP WHERE user_uuid = ?", (ada.uuid,))
        assert me(b, ada) == 401
    finally:
        by_hand.close()


def test_what_a_transaction_rolled_back_is_never_served(tmp_path):
    storage = _cached_storage(f"sqlite:///{tmp_path / 'rollback.sqlite'}")
    try:
        storage.migrate()
        ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
        assert storage.users.get(ada.id).name == "Ada"
        assert storage.users.get(ada.id).name == "Ada"  # from memory now

        class Undo(Exception):
            pass

        with pytest.raises(Undo):
            with storage.atomic():
                storage.users.update(ada.id, name="Never")
                assert storage.users.get(ada.id).name == "Never"  # the transaction sees its own write
                raise Undo
        for _ in range(3):
            assert storage.users.get(ada.id).name == "Ada"
    finally:
        storage.close()


def test_a_failing_check_reads_through_and_the_cache_comes_back(hosts):
    a, b = hosts
    ada = a.account("ada@example.com")
    bus, cache = b.app.context.storage.bus, b.app.context.storage.cache
    assert me(b, ada) == 200 and me(b, ada) == 200
    assert bus.fresh()

    bus._local.connection.close()  # the next check fails: the bus's own connection is gone
    misses = cache.misses
    assert bus.fresh() is False
    assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
    assert me(b, ada) == 401
    assert cache.misses > misses

    bob = a.account("bob@example.com")  # the next check opens a new connection
    assert_from_memory(cache, me_ok(b, bob), 2)


def _data_version_reads(bus) -> list[str]:
    """The statements the bus runs on this thread's connection from now on."""
    assert bus.fresh()  # this thread's connection is open
    statements: list[str] = []
    bus._local.connection.set_trace_callback(statements.append)
    return statements


def test_an_item_read_from_memory_asks_the_data_version_once(hosts):
    a, b = hosts
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    storage = b.app.context.storage

    def read_ada() -> None:
        answer = b.simulate_get(f"/v1/internal/users/{ada.id}", headers=admin.headers)
        assert answer.status_code == 200 and answer.json["email"] == "ada@example.com", answer.text

    assert_from_memory(storage.cache, read_ada, 3)  # the session, the revision and the record
    asked = _data_version_reads(storage.bus)
    hits = storage.cache.hits
    for _ in range(5):
        read_ada()
    assert storage.cache.hits - hits == 15
    assert asked == ["PRAGMA data_version"] * 5  # one per request: it was two


def test_a_request_sees_its_own_writes_through_the_cache(tmp_path):
    storage = _cached_storage(f"sqlite:///{tmp_path / 'own.sqlite'}")
    try:
        storage.migrate()
        ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
        asked = _data_version_reads(storage.bus)
        token = request_started()
        try:
            assert storage.users.get(ada.id).name == "Ada"
            assert storage.users.get(ada.id).name == "Ada"  # from memory, not asked again
            assert asked == ["PRAGMA data_version"] * 2  # the read's check, and the store's
            storage.users.update(ada.id, name="Ada Lovelace")
            assert storage.users.get(ada.id).name == "Ada Lovelace"  # asked again after the write
            assert asked == ["PRAGMA data_version"] * 4
        finally:
            request_ended(token)
    finally:
        storage.close()


def test_every_request_asks_anew(tmp_path):
    """A commit that lands while a request is served is seen by the next request; one
    that lands outside requests, by the very next read."""
    storage = _cached_storage(f"sqlite:///{tmp_path / 'anew.sqlite'}")
    by_hand = sqlite3.connect(tmp_path / "anew.sqlite", isolation_level=None)
    try:
        storage.migrate()
        ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
        for round in range(3):
            token = request_started()
            try:
                before = storage.users.get(ada.id).name
                assert storage.users.get(ada.id).name == before  # from memory
                by_hand.execute("UPDATE locky_users SET name = ? WHERE id = ?", (f"by hand {round}", ada.id))
                assert storage.users.get(ada.id).name == before  # this request: as of its check
            finally:
                request_ended(token)
            token = request_started()
            try:
                assert storage.users.get(ada.id).name == f"by hand {round}"
            finally:
                request_ended(token)
        by_hand.execute("UPDATE locky_users SET name = 'outside' WHERE id = ?", (ada.id,))
        assert storage.users.get(ada.id).name == "outside"
    finally:
        by_hand.close()
        storage.close()


@pytest.mark.server
def test_two_servers_hold_revocation_at_once(tmp_path):
    """Two ``locky serve`` processes (two workers each) on one SQLite file."""
    scenarios.two_servers_hold_revocation_at_once(f"sqlite:///{tmp_path / 'shared.sqlite'}", "version", tmp_path)


def test_settings_pick_the_cache(tmp_path):
    on_file = make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}")
    assert on_file.auth_cache == "auto" and auth_cache_mode(on_file) == "version"
    assert auth_cache_mode(make_settings("sqlite:///:memory:")) == "off"
    assert auth_cache_mode(make_settings("postgres://locky@127.0.0.1/locky")) == "revision"
    assert auth_cache_mode(make_settings("mysql://locky@127.0.0.1/locky")) == "revision"
    off = open_storage(on_file.replace(auth_cache="off"))
    try:
        assert isinstance(off, PonyStorage)
    finally:
        off.close()
    with pytest.raises(SettingsError, match="LOCKY_AUTH_CACHE=version needs an SQLite file"):
        make_settings("postgres://locky@127.0.0.1/locky", auth_cache="version")
    with pytest.raises(SettingsError, match="LOCKY_AUTH_CACHE=version needs an SQLite file"):
        make_settings("sqlite:///:memory:", auth_cache="version")
