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

import pytest
from authz_helpers import auditor_in_finance
from proxy import TcpProxy

from locky.settings import SettingsError
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, LockyClient, make_settings
from locky.testing.server import locky_server, one_service
from locky.testing.storage_contract import StorageContract
from locky_pony import open_storage
from locky.testing.pgbouncer import pgbouncer

pytestmark = pytest.mark.backend

ROUNDS = 20


def notify_settings(url: str, **more):
    return make_settings(url, auth_cache="notify", **more)


def caught_up(app) -> None:
    assert app.context.storage.bus.wait_fresh(5), "the listener did not come up"


def me(client, account) -> int:
    return client.simulate_get("/v1/internal/users/me", headers=account.headers).status_code


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


def test_reads_come_from_memory_and_a_logout_holds_at_once(hosts):
    a, b = hosts
    cache = b.app.context.storage.cache
    for round in range(ROUNDS):
        ada = a.account(f"ada{round}@example.com")
        hits = cache.hits
        assert me(b, ada) == 200 and me(b, ada) == 200 and me(b, ada) == 200
        assert cache.hits - hits >= 4  # the session and the revision, twice: no database read
        assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
        assert me(b, ada) == 401, f"round {round}: B served a session A had ended"


def test_user_records_come_from_memory_and_changes_are_seen_at_once(hosts):
    a, b = hosts
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    bob = a.account("bob@example.com")
    cache = b.app.context.storage.cache

    def on_b(account=admin):
        answer = b.simulate_get(f"/v1/internal/users/{ada.id}", headers=account.headers)
        return answer.status_code, answer.json

    assert on_b()[0] == 200
    hits = cache.hits
    assert on_b()[0] == 200
    assert cache.hits - hits >= 3  # the session, the revision and the record
    for round in range(5):
        name = f"Ada {round}"
        assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                              json={"name": name}).status_code == 200
        assert on_b()[1]["name"] == name, f"round {round}"
        assert on_b(bob)[1]["name"] == name
    assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                          json={"disabled": True}).status_code == 200
    assert on_b()[1]["disabled"] is True
    assert me(b, ada) == 401  # a disabled user's session ends with it
    # A change to one user leaves what is cached for the others.
    assert me(b, bob) == 200
    hits = cache.hits
    assert me(b, bob) == 200 and cache.hits - hits >= 2
    assert a.simulate_delete(f"/v1/private/users/{ada.id}", headers=admin.headers).status_code == 204
    assert on_b()[0] == 404


def test_deletions_and_authorization_changes_hold_at_once(hosts):
    a, b = hosts
    admin, ada, bob = (a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com"),
                       a.account("bob@example.com"))
    role = a.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}).json
    group = a.simulate_post("/v1/private/groups", json={"name": "finance"}, headers=ada.headers).json
    query = {"user_uuid": bob.uuid, "resource": "reports", "action": "read", "group_uuid": group["uuid"]}

    def allowed() -> bool:
        result = b.simulate_get("/v1/internal/authz/check", headers=ada.headers, params=query)
        assert result.status_code == 200, result.text
        return result.json["allowed"]

    for round in range(5):
        member = a.simulate_post("/v1/private/members", headers=ada.headers,
                                 json={"group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "auditor"})
        assert member.status_code == 201, member.text
        assert allowed() and allowed(), f"round {round}: a new membership"
        assert a.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin.headers,
                              json={"permissions": []}).status_code == 200
        assert not allowed(), f"round {round}: a role emptied"
        assert a.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin.headers, json={
            "permissions": [{"resource": "reports", "action": "read"}]}).status_code == 200
        assert allowed(), f"round {round}: a role filled again"
        assert a.simulate_delete(f"/v1/private/members/{member.json['id']}",
                                 headers=ada.headers).status_code == 204
        assert not allowed(), f"round {round}: a membership ended"

    # A global grant, as `locky grant-admin` makes it through the storage.
    admin_only = {"user_uuid": bob.uuid, "resource": "users", "action": "list"}
    check = functools.partial(b.simulate_get, "/v1/internal/authz/check", headers=ada.headers, params=admin_only)
    assert check().json["allowed"] is False and check().json["allowed"] is False
    a.app.context.storage.grants.grant(bob.uuid, "admin")
    assert check().json["allowed"] is True

    # A deleted user's session.
    carl = a.account("carl@example.com")
    assert me(b, carl) == 200 and me(b, carl) == 200
    assert a.simulate_delete(f"/v1/private/users/{carl.id}", headers=carl.headers).status_code == 204
    assert me(b, carl) == 401


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
    env = one_service(postgres_database.url, tmp_path, LOCKY_AUTH_CACHE="notify", LOCKY_JWT_SECRET=TEST_SECRET,
                      LOCKY_ADMIN_EMAILS=ADMIN_EMAIL, LOCKY_BCRYPT_ROUNDS="4", LOCKY_LOGIN_MAX_FAILURES_PER_IP="1000")
    with locky_server(tmp_path / "a", env=env) as a, locky_server(tmp_path / "b", env=env) as b:
        def login(email: str) -> dict[str, str]:
            return a.sign_up(email, PASSWORD, verify=email == ADMIN_EMAIL)

        def on_b(headers) -> list[int]:
            return [b.request("GET", "/v1/internal/users/me", headers=headers)[0] for _ in range(4)]

        stale = 0
        for round in range(10):
            ada = login(f"ada{round}@example.com")
            assert on_b(ada) == [200] * 4  # both of B's workers have it cached
            assert a.request("POST", "/v1/private/users/logout", headers=ada)[0] == 204
            stale += on_b(ada).count(200)
        assert stale == 0

        admin, bob = login(ADMIN_EMAIL), login("bob@example.com")
        bob_uuid = a.request("GET", "/v1/internal/users/me", headers=bob)[2]["uuid"]
        role, query = auditor_in_finance(a, admin, bob_uuid)

        def allowed() -> list[bool]:
            answers = []
            for _ in range(4):
                status, _, body = b.request("GET", f"/v1/internal/authz/check?{query}", headers=bob)
                assert status == 200, body
                answers.append(body["allowed"])
            return answers

        for _ in range(5):
            assert allowed() == [True] * 4
            assert a.request("PUT", f"/v1/private/roles/{role['id']}", {"permissions": []}, admin)[0] == 200
            assert allowed() == [False] * 4
            assert a.request("PUT", f"/v1/private/roles/{role['id']}", {
                "permissions": [{"resource": "reports", "action": "read"}]}, admin)[0] == 200

        carl = login("carl@example.com")
        carl_id = a.request("GET", "/v1/internal/users/me", headers=carl)[2]["id"]
        assert on_b(carl) == [200] * 4
        assert a.request("DELETE", f"/v1/private/users/{carl_id}", headers=carl)[0] == 204
        assert on_b(carl) == [401] * 4
    assert "Traceback" not in a.log() + b.log()
