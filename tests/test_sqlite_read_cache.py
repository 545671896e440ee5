"""On an SQLite file (``LOCKY_AUTH_CACHE=version``, the default there) every commit
empties each worker's cache, so the storage cache keeps the reads of every record kind
too, lists and counts included (:data:`locky.cache.declared.KEPT`), and serves
them from memory while SQLite's data version has not moved (issue 18):

- two apps on one file: B's lists, counts and records come from memory, and every
  change made through A (groups, members, roles, users) is in B's very next answer;
- a change made by hand in SQL is seen at once too;
- a request reads its own writes, those made through no wrapper of the cache included;
- what a transaction wrote and rolled back is never served;
- a page handed out is the caller's own list;
- pages weigh their records in the cache's bound;
- the caches of other buses (the revision bus) keep no lists.

The storage contract suite runs through this cache in ``test_sqlite_auth_cache.py``.
"""

from __future__ import annotations

import sqlite3

import pytest
from auth_cache_scenarios import assert_from_memory

from locky.cache import MISSING, Cache, CachingStorage, request_ended, request_started
from locky.testing import ADMIN_EMAIL, LockyClient, make_settings
from locky_pony import open_storage
from locky_pony.data_version import DataVersionBus


@pytest.fixture
def hosts(locky_app_factory, tmp_path):
    """Two apps on one SQLite file, each with its cache."""
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    first, second = (locky_app_factory(database_url=url) for _ in range(2))
    for app in (first, second):
        assert app.context.storage.caches_everything
    return LockyClient(first), LockyClient(second)


@pytest.fixture
def storage(tmp_path):
    storage = open_storage(make_settings(f"sqlite:///{tmp_path / 'reads.sqlite'}"))
    assert isinstance(storage, CachingStorage) and isinstance(storage.bus, DataVersionBus)
    storage.migrate()
    yield storage
    storage.close()


def _reader(client, account):
    def get(path: str, **params) -> dict:
        answer = client.simulate_get(path, headers=account.headers, params=params or None)
        assert answer.status_code == 200, answer.text
        return answer.json
    return get


def test_lists_counts_and_records_come_from_memory_and_changes_are_seen_at_once(hosts):
    a, b = hosts
    admin, ada, bob = (a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com"),
                       a.account("bob@example.com"))
    on_b = _reader(b, ada)
    reads = b.app.context.storage.reads

    def group_names() -> list[str]:
        return [group["name"] for group in on_b("/v1/internal/groups")["groups"]]

    assert_from_memory(reads, lambda: on_b("/v1/internal/groups"), 1)
    for round in range(5):
        group = a.simulate_post("/v1/private/groups", json={"name": f"team {round}"}, headers=ada.headers).json
        assert group_names()[-1] == f"team {round}", f"round {round}: a new group"
        assert on_b("/v1/internal/groups/count")["count"] == round + 1
        assert a.simulate_put(f"/v1/private/groups/{group['id']}", json={"name": f"renamed {round}"},
                              headers=ada.headers).status_code == 200
        assert on_b(f"/v1/internal/groups/{group['id']}")["name"] == f"renamed {round}"
        assert group_names()[-1] == f"renamed {round}", f"round {round}: a renamed group"

        members = lambda: on_b("/v1/internal/members", group_uuid=group["uuid"])["members"]  # noqa: E731
        assert [m["user_uuid"] for m in members()] == [ada.uuid]
        added = a.simulate_post("/v1/private/members", headers=ada.headers,
                                json={"group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "viewer"})
        assert added.status_code == 201, added.text
        assert [m["user_uuid"] for m in members()] == [ada.uuid, bob.uuid], f"round {round}: a new member"
        assert on_b(f"/v1/internal/members/{added.json['id']}")["role"] == "viewer"
        assert a.simulate_delete(f"/v1/private/members/{added.json['id']}", headers=ada.headers).status_code == 204
        assert [m["user_uuid"] for m in members()] == [ada.uuid], f"round {round}: a membership ended"
        assert b.simulate_get(f"/v1/internal/members/{added.json['id']}", headers=ada.headers).status_code == 404

    role = a.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "auditor", "description": "reads reports", "permissions": []}).json
    assert on_b("/v1/internal/roles", name="auditor")["roles"][0]["description"] == "reads reports"
    assert a.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin.headers,
                          json={"description": "audits"}).status_code == 200
    assert on_b("/v1/internal/roles", name="auditor")["roles"][0]["description"] == "audits"
    assert on_b(f"/v1/internal/roles/{role['id']}")["description"] == "audits"

    users = on_b("/v1/internal/users/count")["count"]
    carl = a.account("carl@example.com")
    assert on_b("/v1/internal/users", email="carl@example.com")["users"][0]["uuid"] == carl.uuid
    assert on_b("/v1/internal/users/count")["count"] == users + 1
    assert a.simulate_delete(f"/v1/private/users/{carl.id}", headers=carl.headers).status_code == 204
    assert on_b("/v1/internal/users", email="carl@example.com")["users"] == []
    assert on_b("/v1/internal/users/count")["count"] == users
    assert reads.hits > 0


def test_a_change_made_by_hand_in_sql_is_seen_at_once(hosts):
    a, b = hosts
    ada = a.account("ada@example.com")
    group = a.simulate_post("/v1/private/groups", json={"name": "finance"}, headers=ada.headers).json
    on_b = _reader(b, ada)
    by_hand = sqlite3.connect(b.app.context.settings.sqlite_path, isolation_level=None)
    try:
        for round in range(5):
            assert_from_memory(b.app.context.storage.reads, lambda: on_b("/v1/internal/groups"), 1)
            by_hand.execute("UPDATE locky_groups SET name = ? WHERE id = ?", (f"by hand {round}", group["id"]))
            assert on_b("/v1/internal/groups")["groups"][0]["name"] == f"by hand {round}"
            assert on_b(f"/v1/internal/groups/{group['id']}")["name"] == f"by hand {round}"
        by_hand.execute("UPDATE locky_groups SET del_token = id, deleted_at = CURRENT_TIMESTAMP WHERE id = ?",
                        (group["id"],))
        assert on_b("/v1/internal/groups/count")["count"] == 0
    finally:
        by_hand.close()


def test_a_request_reads_its_own_writes(storage):
    """Groups and members are written through no wrapper of the cache: a request that
    listed them, then wrote, lists its own write all the same."""
    ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
    storage.groups.create(name="one", description="", owner_uuid=ada.uuid)
    token = request_started()
    try:
        assert [g.name for g in storage.groups.list().items] == ["one"]
        hits = storage.reads.hits
        assert [g.name for g in storage.groups.list().items] == ["one"]
        assert storage.reads.hits == hits + 1  # from memory
        storage.groups.create(name="two", description="", owner_uuid=ada.uuid)
        assert [g.name for g in storage.groups.list().items] == ["one", "two"]
        assert storage.groups.count() == 2
        assert storage.members.count(user_uuid=ada.uuid) == 2
    finally:
        request_ended(token)


def test_what_a_transaction_rolled_back_is_never_served(storage):
    ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
    assert storage.groups.list().items == [] and storage.groups.count() == 0

    class Undo(Exception):
        pass

    with pytest.raises(Undo):
        with storage.atomic():
            storage.groups.create(name="never", description="", owner_uuid=ada.uuid)
            assert [g.name for g in storage.groups.list().items] == ["never"]  # its own write
            assert storage.groups.count() == 1
            raise Undo
    for _ in range(3):
        assert storage.groups.list().items == [] and storage.groups.count() == 0


def test_a_page_handed_out_is_the_callers_own(storage):
    for n in range(3):
        storage.users.create(email=f"u{n}@example.com", password_hash="x", name=f"U{n}")
    first = storage.users.list(limit=2)
    first.items.clear()
    hits = storage.reads.hits
    again = storage.users.list(limit=2)
    assert storage.reads.hits == hits + 1
    assert [u.email for u in again.items] == ["u0@example.com", "u1@example.com"]
    assert again.next_after_id == again.items[-1].id


def test_pages_weigh_their_records(tmp_path):
    cache = Cache(max_age=10.0, fresh=lambda: True, max_entries=100)
    cache.put("page", "60 records", cache.token(), weight=61)
    cache.put("one", "record", cache.token())
    assert cache.get("page") == "60 records" and cache.get("one") == "record"
    cache.put("another page", "50 records", cache.token(), weight=51)  # 113 > 100: the oldest makes room
    assert cache.get("page") is MISSING and cache.get("one") == "record"
    assert cache.get("another page") == "50 records"
    cache.put("another page", "40 records", cache.token(), weight=41)  # replaces: 41, not 92
    cache.put("small", "record", cache.token())
    assert cache.get("another page") == "40 records" and cache.get("small") == "record"
    cache.put("huge", "200 records", cache.token(), weight=201)  # never kept
    assert cache.get("huge") is MISSING and cache.get("small") == "record"

    inner = open_storage(make_settings(f"sqlite:///{tmp_path / 'bound.sqlite'}", auth_cache="off"))
    small = CachingStorage(inner, DataVersionBus(str(tmp_path / "bound.sqlite"), 5.0), max_entries=20)
    try:
        small.migrate()
        for n in range(30):
            small.users.create(email=f"u{n}@example.com", password_hash="x", name=f"U{n}")
        for limit, kept in ((10, True), (25, False)):  # 11 and 26 weigh: 26 > 20
            small.users.list(limit=limit)
            hits = small.reads.hits
            assert len(small.users.list(limit=limit).items) == limit
            assert (small.reads.hits == hits + 1) is kept, limit
    finally:
        small.close()


def test_other_buses_keep_no_lists_but_pages_of_users(tmp_path):
    """The revision bus keeps pages and counts of users (``tests/test_revision_cache.py``),
    and no other list: a group's count is the store's own read. Outside a request
    nothing is served from memory."""
    storage = open_storage(make_settings(f"sqlite:///{tmp_path / 'revision.sqlite'}", auth_cache="revision"))
    try:
        assert isinstance(storage, CachingStorage) and not storage.caches_everything
        assert storage.keeps_user_pages
        storage.migrate()
        ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
        storage.groups.create(name="one", description="", owner_uuid=ada.uuid)
        assert storage.groups.count.__self__ is storage.inner.groups
        assert storage.groups.list.__self__ is storage.inner.groups
        assert storage.users.count.func == storage.read
        for _ in range(3):
            assert storage.groups.count() == 1 and len(storage.users.list().items) == 1
        assert storage.reads.hits == 0
    finally:
        storage.close()
