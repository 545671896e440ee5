"""``locky_redis``: the ``redis-cache`` storage, a cache of the per-request reads (the
caller's session, the policy revision) that every host drops within a second of a change.

Against the real Redis named by ``LOCKY_TEST_REDIS_URL`` (skipped when it is not set or
does not answer, failed instead under ``LOCKY_REQUIRE_BACKENDS=1``):

- the storage contract suite passes through the cache;
- two apps on one database (two hosts) see each other's logouts, user deletions and role
  changes within one second while serving repeated reads from their caches;
- when Redis goes away the cache turns itself off (reads go to storage, still correct),
  and when it hangs, writes do not wait for it;
- two ``locky serve`` processes on one PostgreSQL database (``LOCKY_TEST_POSTGRES_URL``)
  see a logout and a role change made through the other within one second.
"""

from __future__ import annotations

import os
import time
import uuid
from urllib.parse import urlsplit

import pytest
from authz_helpers import auditor_in_finance
from backends import required
from proxy import TcpProxy

from locky import SettingsError
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, LockyClient, make_settings
from support.server import locky_server, one_service
from locky.testing.storage_contract import StorageContract

pytestmark = pytest.mark.extras
redis = pytest.importorskip("redis", reason="pip install 'locky[redis]'")
from locky_pony import PonyStorage  # noqa: E402
from locky_redis import CachingStorage  # noqa: E402

WITHIN = 1.0  # seconds: how soon another host must see a change


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("LOCKY_TEST_REDIS_URL", "").strip()
    reason = "LOCKY_TEST_REDIS_URL is not set" if not url else None
    if url:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        try:
            client.ping()
        except redis.RedisError as exc:
            reason = f"cannot reach Redis at {url}: {exc}"
        finally:
            client.close()
    if reason:
        if required():
            pytest.fail(f"redis is required (LOCKY_REQUIRE_BACKENDS=1) but {reason}", pytrace=False)
        pytest.skip(f"redis tests skipped: {reason}")
    return url


@pytest.fixture
def channel() -> str:
    """A channel of this test's own: tests running at once on one Redis do not meet."""
    return f"locky-test:{uuid.uuid4().hex}"


def options(url: str, channel: str, **more) -> dict:
    return {"plugins": ("locky_redis",), "storage": "redis-cache",
            "extra": {"redis": {"url": url, "channel": channel, **more}}}


def eventually(check, within: float = WITHIN) -> float:
    """Seconds until ``check()`` is true; fails after ``within``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > within:
            pytest.fail(f"not seen within {within}s")
        time.sleep(0.01)
    return time.monotonic() - started


def fresh(app) -> None:
    assert app.context.storage.listener.wait_fresh(5), "the Redis subscription did not come up"


def settled(*apps) -> None:
    """Every announcement the apps made so far has reached every one of them (writes
    publish from a thread of their own: one may still be on its way)."""
    for app in apps:
        assert app.context.storage.bus.publisher.wait_sent(5)
    mark = time.monotonic()
    for app in apps:  # a ping sent after the publish came back: every earlier message is in
        eventually(lambda: app.context.storage.listener._confirmed > mark, within=5)


class TestContract(StorageContract):
    """The cache changes no behaviour of the storage it wraps."""

    @pytest.fixture
    def storage(self, tmp_path, redis_url, channel):
        inner = PonyStorage(make_settings(f"sqlite:///{tmp_path / 'contract.sqlite'}"))
        storage = CachingStorage(inner, redis.Redis.from_url(redis_url), channel=channel)
        assert storage.listener.wait_fresh(5)  # so that the suite runs with the cache on
        yield storage
        storage.close()


@pytest.fixture
def hosts(locky_app_factory, redis_url, channel):
    """Two apps on one database and one channel: two hosts."""
    first, second = (locky_app_factory(**options(redis_url, channel)) for _ in range(2))
    fresh(first), fresh(second)
    return LockyClient(first), LockyClient(second)


def me(client, account) -> int:
    return client.simulate_get("/v1/internal/users/me", headers=account.headers).status_code


def test_reads_are_cached_and_a_logout_is_seen_at_once(hosts):
    a, b = hosts
    ada = a.account("ada@example.com")
    settled(a.app, b.app)
    cache = b.app.context.storage.cache
    assert me(b, ada) == 200
    hits = cache.hits
    for _ in range(5):
        assert me(b, ada) == 200
    assert cache.hits - hits >= 10  # each request: the session and the policy revision

    assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
    eventually(lambda: me(b, ada) == 401)


def test_a_deleted_user_is_seen_at_once(hosts):
    a, b = hosts
    ada = a.account("ada@example.com")
    assert me(b, ada) == 200 and me(b, ada) == 200
    assert a.simulate_delete(f"/v1/private/users/{ada.id}", headers=ada.headers).status_code == 204
    eventually(lambda: me(b, ada) == 401)


def test_a_role_change_is_seen_at_once(hosts):
    a, b = hosts
    admin, ada, bob = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com"), a.account("bob@example.com")
    role = a.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}).json
    group = a.simulate_post("/v1/private/groups", json={"name": "finance"}, headers=ada.headers).json
    a.simulate_post("/v1/private/members", headers=ada.headers,
                    json={"group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "auditor"})
    query = {"user_uuid": bob.uuid, "resource": "reports", "action": "read", "group_uuid": group["uuid"]}

    def allowed() -> bool:
        result = b.simulate_get("/v1/internal/authz/check", headers=ada.headers, params=query)
        assert result.status_code == 200, result.text
        return result.json["allowed"]

    eventually(allowed)
    assert allowed() and allowed()  # now from B's cached policy revision
    changed = a.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin.headers, json={"permissions": []})
    assert changed.status_code == 200
    eventually(lambda: not allowed())

    # A global grant (as `locky grant-admin` makes) goes the same way.
    a.app.context.storage.grants.grant(bob.uuid, "admin")
    eventually(allowed)


def test_when_redis_goes_away_reads_go_to_storage(locky_app_factory, redis_url, channel):
    parts = urlsplit(redis_url)
    with TcpProxy(parts.hostname, parts.port or 6379) as proxy:
        proxied = redis_url.replace(parts.netloc, f"{parts.hostname}:{proxy.port}", 1)
        cut_off = locky_app_factory(**options(proxied, channel))
        other = locky_app_factory(**options(redis_url, channel))
        fresh(cut_off), fresh(other)
        b, a = LockyClient(cut_off), LockyClient(other)
        ada = a.account("ada@example.com")
        assert me(b, ada) == 200 and me(b, ada) == 200

        proxy.stop()  # B loses Redis: it cannot hear A any more
        eventually(lambda: not cut_off.context.storage.listener.fresh())
        assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
        assert me(b, ada) == 401  # at once: B's reads go to the database meanwhile

        proxy.start()
        fresh(cut_off)  # back, with an emptied cache
        bob = a.account("bob@example.com")
        assert me(b, bob) == 200


def test_a_hung_redis_costs_writes_nothing(locky_app_factory, redis_url, channel):
    parts = urlsplit(redis_url)
    with TcpProxy(parts.hostname, parts.port or 6379) as proxy:
        proxied = redis_url.replace(parts.netloc, f"{parts.hostname}:{proxy.port}", 1)
        app = locky_app_factory(**options(proxied, channel))
        fresh(app)
        client = LockyClient(app)
        accounts = [client.account(f"user{n}@example.com") for n in range(3)]
        proxy.blackhole()  # Redis keeps the connection and never answers: a hung server
        for account in accounts:
            started = time.monotonic()
            assert client.simulate_post("/v1/private/users/logout", headers=account.headers).status_code == 204
            assert time.monotonic() - started < 0.5  # was the client's 2 s timeout per write
            assert me(client, account) == 401
        eventually(lambda: not app.context.storage.listener.fresh())  # no pong: the cache is off
        proxy.restore()


def test_settings_are_checked_at_startup(locky_app_factory, redis_url, channel, tmp_path):
    with pytest.raises(SettingsError, match="needs \\[plugins.redis\\] url"):
        locky_app_factory(plugins=("locky_redis",), storage="redis-cache")
    with pytest.raises(SettingsError, match="cannot reach Redis"):
        locky_app_factory(**options("redis://127.0.0.1:1/0", channel))
    with pytest.raises(SettingsError, match="storage to cache"):
        locky_app_factory(**options(redis_url, channel, storage="redis-cache"))
    with pytest.raises(SettingsError, match="unknown storage provider 'nope'"):
        locky_app_factory(**options(redis_url, channel, storage="nope"))
    with pytest.raises(SettingsError, match="unknown key"):
        locky_app_factory(**options(redis_url, channel, ttl=3))
    with pytest.raises(SettingsError, match="max_staleness"):
        locky_app_factory(**options(redis_url, channel, max_staleness=0))


@pytest.mark.server
@pytest.mark.backend
def test_two_servers_on_one_postgresql_database(postgres_database, redis_url, channel, tmp_path):
    """Two ``locky serve`` processes (two workers each) on one PostgreSQL database."""
    postgres_database.wipe()
    config = tmp_path / "locky.toml"
    config.write_text(f'[plugins.redis]\nurl = "{redis_url}"\nchannel = "{channel}"\n')
    env = one_service(postgres_database.url, tmp_path, LOCKY_CONFIG=str(config), LOCKY_PLUGINS="locky_redis",
                      LOCKY_STORAGE="redis-cache", LOCKY_JWT_SECRET=TEST_SECRET, LOCKY_ADMIN_EMAILS=ADMIN_EMAIL,
                      LOCKY_BCRYPT_ROUNDS="4")
    with locky_server(tmp_path / "a", env=env) as a, locky_server(tmp_path / "b", env=env) as b:
        def login(email: str) -> dict[str, str]:
            return a.sign_up(email, PASSWORD, verify=email == ADMIN_EMAIL)

        admin, ada, bob = login(ADMIN_EMAIL), login("ada@example.com"), login("bob@example.com")
        bob_uuid = a.request("GET", "/v1/internal/users/me", headers=bob)[2]["uuid"]

        # A logout through A.
        for _ in range(6):  # each of B's workers has it cached
            assert b.request("GET", "/v1/internal/users/me", headers=ada)[0] == 200
        assert a.request("POST", "/v1/private/users/logout", headers=ada)[0] == 204
        eventually(lambda: all(b.request("GET", "/v1/internal/users/me", headers=ada)[0] == 401
                               for _ in range(4)))

        # A role change through A.
        role, query = auditor_in_finance(a, admin, bob_uuid)

        def allowed() -> bool:
            status, _, body = b.request("GET", f"/v1/internal/authz/check?{query}", headers=bob)
            assert status == 200, body
            return body["allowed"]

        eventually(lambda: all(allowed() for _ in range(4)))
        assert a.request("PUT", f"/v1/private/roles/{role['id']}", {"permissions": []}, admin)[0] == 200
        eventually(lambda: not any(allowed() for _ in range(4)))
        assert a.request("PUT", f"/v1/private/roles/{role['id']}", {
            "permissions": [{"resource": "reports", "action": "read"}]}, admin)[0] == 200
        eventually(lambda: all(allowed() for _ in range(4)))
    assert "Traceback" not in a.log() + b.log()
