"""``LOCKY_AUTH_CACHE=notify``: each worker serves the caller's session and the policy
revision from memory, and PostgreSQL ``LISTEN/NOTIFY`` keeps revocation at once across
hosts (issue 18). Against the real PostgreSQL of ``LOCKY_TEST_POSTGRES_URL``:

- the storage contract suite passes through the cache;
- two apps on one database (two hosts): reads come from memory, and a logout, a user
  deletion, a role change, a grant and a membership change made through one are refused
  or allowed by the other on the very next request, round after round;
- a host whose listener stops applying changes holds a write up for one lease at most,
  and by then serves nothing from its cache; without the wait for acknowledgements the
  same host would have answered with a revoked session (the test can fail);
- a host whose listener loses its connection reads through, and caches again once back;
- two ``locky serve`` processes (two workers each), and two hosts behind PgBouncer in
  transaction pooling mode, with the same guarantee.
"""

from __future__ import annotations

import functools
import time
from urllib.parse import urlsplit

import auth_cache_scenarios as scenarios
import pytest
from auth_cache_scenarios import me
from proxy import TcpProxy

from locky.settings import SettingsError
from locky.testing import LockyClient, make_settings
from support.pgbouncer import pgbouncer
from locky.testing.storage_contract import StorageContract
from locky_pony import open_storage

pytestmark = pytest.mark.backend

def notify_settings(url: str, **more):
    return make_settings(url, auth_cache="notify", **more)


def caught_up(app) -> None:
    assert app.context.storage.bus.wait_fresh(5), "the listener did not come up"


class TestContract(StorageContract):
    """The cache changes no behaviour of the storage it wraps."""

    @pytest.fixture
    def storage(self, postgres_database):
        postgres_database.wipe()
        storage = open_storage(notify_settings(postgres_database.url))
        storage.migrate()
        assert storage.bus.wait_fresh(5)  # so that the suite runs with the cache on
        yield storage
        storage.close()

    @pytest.fixture
    def storage_factory(self, postgres_database):
        return functools.partial(_contract_storage, postgres_database.url)


def _contract_storage(url):
    return open_storage(notify_settings(url))


@pytest.fixture
def hosts(locky_app_factory, postgres_database):
    """Two apps with the cache on, on one PostgreSQL database: two hosts."""
    postgres_database.wipe()
    first, second = (locky_app_factory(database_url=postgres_database.url, auth_cache="notify")
                     for _ in range(2))
    caught_up(first), caught_up(second)
    return LockyClient(first), LockyClient(second)


@pytest.mark.parametrize("scenario", scenarios.TWO_APPS, ids=lambda scenario: scenario.__name__)
def test_two_apps(hosts, scenario):
    scenario(*hosts)


def test_a_listener_that_stops_applying_holds_a_write_one_lease_at_most(hosts):
    a, b = hosts
    lease = b.app.context.storage.bus.lease
    ada, bob = a.account("ada@example.com"), a.account("bob@example.com")
    assert me(b, ada) == 200 and me(b, ada) == 200
    with b.app.context.storage.bus._cond:  # B's listener hears nothing while this is held
        started = time.monotonic()
        assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
        waited = time.monotonic() - started
        assert me(b, ada) == 401  # B's lease ran out: it reads through
    assert 0.5 * lease < waited < lease + 1.0, waited

    # The same stall without waiting for acknowledgements: B serves a revoked session.
    caught_up(b.app)
    assert me(b, bob) == 200 and me(b, bob) == 200
    a.app.context.storage.bus.wait_acknowledged = lambda tokens, committed: True
    with b.app.context.storage.bus._cond:
        assert a.simulate_post("/v1/private/users/logout", headers=bob.headers).status_code == 204
        assert me(b, bob) == 200  # stale: what acknowledgements are there to prevent


def test_a_listener_without_its_connection_reads_through(locky_app_factory, postgres_database):
    postgres_database.wipe()
    parts = urlsplit(postgres_database.url)
    with TcpProxy(parts.hostname, parts.port or 5432) as proxy:
        listen = postgres_database.url.replace(parts.netloc, f"{parts.username}@127.0.0.1:{proxy.port}", 1)
        cut_off = locky_app_factory(database_url=postgres_database.url, auth_cache="notify",
                                    database_listen_url=listen)
        other = locky_app_factory(database_url=postgres_database.url, auth_cache="notify")
        caught_up(cut_off), caught_up(other)
        b, a = LockyClient(cut_off), LockyClient(other)
        ada = a.account("ada@example.com")
        assert me(b, ada) == 200 and me(b, ada) == 200

        proxy.stop()  # B's listener loses the database; B's requests still reach it
        deadline = time.monotonic() + 3
        while cut_off.context.storage.bus.fresh() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not cut_off.context.storage.bus.fresh()
        assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
        assert me(b, ada) == 401

        proxy.start()
        caught_up(cut_off)  # back, with an emptied cache
        bob = a.account("bob@example.com")
        hits = cut_off.context.storage.cache.hits
        assert me(b, bob) == 200 and me(b, bob) == 200
        assert cut_off.context.storage.cache.hits > hits


def test_settings_are_checked(postgres_database, tmp_path):
    with pytest.raises(SettingsError, match="LOCKY_AUTH_CACHE=notify needs a PostgreSQL"):
        notify_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}")
    with pytest.raises(SettingsError, match="LOCKY_AUTH_CACHE must be one of off, notify"):
        make_settings(postgres_database.url, auth_cache="redis")
    with pytest.raises(SettingsError, match="needs LOCKY_DATABASE_LISTEN_URL"):
        notify_settings(postgres_database.url, database_pooler="transaction")
    with pytest.raises(SettingsError, match="LOCKY_DATABASE_LISTEN_URL must be a postgres://"):
        notify_settings(postgres_database.url, database_listen_url="mysql://root@127.0.0.1/test")
    with pytest.raises(SettingsError, match="LOCKY_AUTH_CACHE_LEASE_MS must be between 100 and 60000"):
        notify_settings(postgres_database.url, auth_cache_lease_ms=50)


def test_two_hosts_behind_pgbouncer_in_transaction_mode(locky_app_factory, postgres_database):
    postgres_database.wipe()
    with pgbouncer(postgres_database.url, server_connections=3) as pooled:
        a, b = (LockyClient(locky_app_factory(database_url=pooled, database_pooler="transaction",
                                              auth_cache="notify", database_listen_url=postgres_database.url))
                for _ in range(2))
        caught_up(a.app), caught_up(b.app)
        for round in range(5):
            ada = a.account(f"ada{round}@example.com")
            assert me(b, ada) == 200 and me(b, ada) == 200
            assert b.app.context.storage.cache.hits > 0
            assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
            assert me(b, ada) == 401, f"round {round}"


@pytest.mark.server
def test_two_servers_hold_revocation_at_once(postgres_database, tmp_path):
    """Two ``locky serve`` processes (two workers each) on one PostgreSQL database."""
    postgres_database.wipe()
    scenarios.two_servers_hold_revocation_at_once(postgres_database.url, "notify", tmp_path)
