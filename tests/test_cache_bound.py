"""The storage cache's bound (``max_entries``): a new entry makes room by dropping the
oldest kept, so a working set a little larger than the bound keeps most of its entries.
A cache that emptied itself whenever it filled lost them all, every time, and each
request after that read storage again."""

from __future__ import annotations

from locky.cache import MISSING, Cache, CachingStorage
from locky.testing import make_settings
from locky_pony import open_storage
from locky_pony.data_version import DataVersionBus


def kept(cache: Cache, keys) -> list:
    return [key for key in keys if cache.get(key) is not MISSING]


def test_the_oldest_entries_make_room():
    cache = Cache(max_age=10.0, fresh=lambda: True, max_entries=3)
    for key in "abc":
        cache.put(key, key.upper(), cache.token(), tags=(f"tag-{key}",))
    cache.put("d", "D", cache.token(), tags=("tag-d",))
    assert kept(cache, "abcd") == ["b", "c", "d"]
    cache.put("b", "B2", cache.token(), tags=("tag-b",))  # kept again: now the newest
    cache.put("e", "E", cache.token())
    assert kept(cache, "abcde") == ["b", "d", "e"] and cache.get("b") == "B2"
    cache.put("wide", "W", cache.token(), weight=2)  # two make room for one that weighs 2
    assert kept(cache, ["b", "d", "e", "wide"]) == ["e", "wide"]

    # Tags still name what they tag: dropping one drops its entry, not a newer one.
    cache.drop_tag("tag-c")  # its entry went to make room
    cache.drop_tag("tag-d")
    assert kept(cache, ["e", "wide"]) == ["e", "wide"]
    cache.put("f", "F", cache.token(), tags=("shared",))
    cache.put("g", "G", cache.token(), tags=("shared",))
    cache.drop_tag("shared")
    assert kept(cache, "fg") == []


def test_entries_dropped_to_make_room_leave_no_tags_behind():
    cache = Cache(max_age=10.0, fresh=lambda: True, max_entries=50)
    for n in range(5000):
        cache.put(("user", n), n, cache.token(), tags=(f"user-id:{n}", f"user-uuid:{n}"))
    assert kept(cache, [("user", n) for n in range(4950, 5000)]) == [("user", n) for n in range(4950, 5000)]
    assert cache.get(("user", 4949)) is MISSING
    # Only the kept entries' tags remain: a bounded cache stays bounded.
    assert len(cache._tagged) == 100


def test_a_working_set_above_the_bound_keeps_most_of_it(tmp_path):
    path = tmp_path / "bound.sqlite"
    inner = open_storage(make_settings(f"sqlite:///{path}", auth_cache="off"))
    storage = CachingStorage(inner, DataVersionBus(str(path), 5.0), max_entries=20)
    try:
        storage.migrate()
        uuids = [storage.users.create(email=f"u{n}@example.com", password_hash="x", name=f"U{n}").uuid
                 for n in range(30)]
        for uuid in uuids[:24]:  # 24 users into 20 places: the first four make room
            assert storage.users.get_by_uuid(uuid).uuid == uuid
        hits = storage.cache.hits
        for uuid in uuids[4:24]:
            assert storage.users.get_by_uuid(uuid).uuid == uuid
        assert storage.cache.hits == hits + 20  # emptied when full, none of them was left
        misses = storage.cache.misses
        assert storage.users.get_by_uuid(uuids[0]).uuid == uuids[0]
        assert storage.cache.misses == misses + 1
    finally:
        storage.close()


def test_a_read_of_more_users_than_half_the_room_keeps_the_working_set(tmp_path):
    """Reading many users at once (``get_many_by_uuid``: the holders of a role everyone
    holds, for ``/authz/subjects``) answers them all, but keeps them only while they
    take at most half the cache's room: a larger read would push out every other
    request's entries, each then read from storage again."""
    path = tmp_path / "many.sqlite"
    inner = open_storage(make_settings(f"sqlite:///{path}", auth_cache="off"))
    storage = CachingStorage(inner, DataVersionBus(str(path), 5.0), max_entries=20)
    try:
        storage.migrate()
        users = [storage.users.create(email=f"u{n}@example.com", password_hash="x", name=f"U{n}")
                 for n in range(40)]
        working = [user.uuid for user in users[:8]]
        for uuid in working:
            assert storage.users.get_by_uuid(uuid).uuid == uuid
        wanted = [user.uuid for user in users[8:]]  # 32 users: more than the cache holds
        found = storage.users.get_many_by_uuid(wanted)
        assert {uuid: user.email for uuid, user in found.items()} == {
            user.uuid: user.email for user in users[8:]}
        hits = storage.cache.hits
        for uuid in working:  # still kept: the large read kept none of its own
            assert storage.users.get_by_uuid(uuid).uuid == uuid
        assert storage.cache.hits == hits + len(working)
        misses = storage.cache.misses
        assert len(storage.users.get_many_by_uuid(wanted[:10])) == 10  # 10 of 20 places: kept
        assert storage.cache.misses == misses + 10
        hits = storage.cache.hits
        assert len(storage.users.get_many_by_uuid(wanted[:10])) == 10
        assert storage.cache.hits == hits + 10
    finally:
        storage.close()
