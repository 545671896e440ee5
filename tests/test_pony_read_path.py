"""The Pony storage's one read path: plain-SQL reads that stay right under threads and
inside a caller's ``db_session``, the one-statement authentication read, and membership
inserts that check their references and authorize in one transaction.

Runs on SQLite always and on PostgreSQL and MariaDB/MySQL when ``backends.py`` finds
them; every test gets an empty database.
"""

from __future__ import annotations

import random
import sys
import threading

import pytest
from pony.orm import db_session

from locky.app import create_app
from locky.errors import Forbidden, Invalid
from locky.records import Authenticated, Group, Member, Permission, Role, User
from locky.testing import make_settings
from locky.testing.databases import connect, run_sql as raw, scratch_database
from support.pgbouncer import pgbouncer


def app_for(url: str):
    return create_app(make_settings(url, log_requests=False))


def seed(storage) -> dict:
    """A few records of every kind; returns them by name."""
    users = [storage.users.create(name=f"user {i}", email=f"u{i}@example.com", password_hash="h") for i in range(4)]
    role = storage.roles.create(name="auditor", description="reads", permissions=[Permission("audit", "read")])
    groups = [storage.groups.create(name=f"g{i}", description=f"d{i}", owner_uuid=users[i].uuid) for i in range(3)]
    extra = [
        storage.members.create(group_uuid=groups[0].uuid, user_uuid=users[3].uuid, role="auditor"),
        storage.members.create(group_uuid=groups[1].uuid, user_uuid=users[3].uuid, role="viewer"),
    ]
    return {"users": users, "groups": groups, "role": role, "members": extra}


def read_calls(seeded: dict) -> list:
    """Reads of every kind, each answered by a statement of its own: (what, call)."""
    users, groups, role, members = seeded["users"], seeded["groups"], seeded["role"], seeded["members"]
    u, g = users[3].uuid, groups[0].uuid
    return [
        ("users.get", lambda s: s.users.get(users[1].id)),
        ("users.list", lambda s: s.users.list(limit=2)),
        ("users.list email", lambda s: s.users.list(email="u2@example.com")),
        ("users.count", lambda s: s.users.count()),
        ("groups.get", lambda s: s.groups.get(groups[2].id)),
        ("groups.list", lambda s: s.groups.list(limit=2)),
        ("groups.list name", lambda s: s.groups.list(name="g1")),
        ("groups.count name", lambda s: s.groups.count(name="g1")),
        ("members.get", lambda s: s.members.get(members[0].id)),
        ("members.list", lambda s: s.members.list(limit=3)),
        ("members.list group", lambda s: s.members.list(group_uuid=g)),
        ("members.list user", lambda s: s.members.list(user_uuid=u)),
        ("members.list role", lambda s: s.members.list(role="viewer")),
        ("members.list group role", lambda s: s.members.list(group_uuid=g, role="owner")),
        ("members.list user role", lambda s: s.members.list(user_uuid=u, role="auditor")),
        ("members.list group user", lambda s: s.members.list(group_uuid=g, user_uuid=u)),
        ("members.count user", lambda s: s.members.count(user_uuid=u)),
        ("roles.get", lambda s: s.roles.get(role.id)),
        ("roles.list", lambda s: s.roles.list(limit=2)),
        ("roles.list name", lambda s: s.roles.list(name="auditor")),
    ]


KINDS = {"users": User, "groups": Group, "members": Member, "roles": Role}


def record_types(answer) -> set[type]:
    items = answer.items if hasattr(answer, "items") else [answer]
    return {type(item) for item in items}


# ---------------------------------------------------------------------------
# Prepared statements under threads (PostgreSQL)
# ---------------------------------------------------------------------------


@pytest.mark.backend
def test_threads_reading_every_kind_at_once_get_their_own_records(postgres_database):
    """Statements are built and prepared lazily, per connection and thread, while other
    threads read: every answer is still the record kind and values asked for. (On
    CPython 3.11 the old counter-named statements never collided between threads of one
    reader; their collision across readers is caught by the pooler test below.)"""
    postgres_database.wipe()
    url = postgres_database.url
    app = app_for(url)
    try:
        seeded = seed(app.context.storage)
        calls = read_calls(seeded)
        expected = {what: call(app.context.storage) for what, call in calls}
    finally:
        app.close()
    for what, answer in expected.items():
        kind = KINDS.get(what.split(".")[0])
        if not isinstance(answer, int):
            assert record_types(answer) == {kind}, what

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # let threads interleave between any two bytecodes
    try:
        for round in range(6):
            app = app_for(url)  # a new storage: every statement is new to it
            storage = app.context.storage
            barrier = threading.Barrier(len(calls))
            wrong: list = []

            def reader(first: int) -> None:
                order = list(range(len(calls)))
                random.Random(first).shuffle(order)
                barrier.wait(timeout=30)
                try:
                    for index in [first] + order * 3:
                        what, call = calls[index]
                        answer = call(storage)
                        if answer != expected[what]:
                            wrong.append((what, answer))
                except Exception as exc:  # reported below, with the others
                    wrong.append(("raised", repr(exc)))

            threads = [threading.Thread(target=reader, args=(i,)) for i in range(len(calls))]
            try:
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(timeout=60)
            finally:
                app.close()
            assert not wrong, (round, wrong[:3])
    finally:
        sys.setswitchinterval(switch)


@pytest.fixture
def pooled_url(postgres_database):
    """``postgres_database`` behind a PgBouncer in transaction mode with ONE server
    connection: every client (each app's Pony connections and readers) shares it."""
    postgres_database.wipe()
    with pgbouncer(postgres_database.url, server_connections=1) as url:
        yield url


@pytest.mark.backend
def test_two_apps_sharing_server_sessions_read_their_own_records(pooled_url):
    """Behind a transaction pooler, one server session serves every client: the readers
    must leave nothing session-level behind (a read-only session would refuse the next
    write, a prepared statement would meet its twin)."""
    first, second = app_for(pooled_url), app_for(pooled_url)
    try:
        seeded = seed(first.context.storage)
        calls = read_calls(seeded)
        expected = {what: call(first.context.storage) for what, call in calls}
        # The second app prepares the same reads in another order.
        for what, call in reversed(calls):
            assert call(second.context.storage) == expected[what], what
        for app in (first, second):
            for what, call in calls:
                assert call(app.context.storage) == expected[what], what
        for index, app in enumerate((first, second)):
            app.context.storage.users.create(name="late", email=f"late{index}@example.com", password_hash="h")
        assert second.context.storage.users.count() == len(seeded["users"]) + 2
    finally:
        first.close()
        second.close()


# ---------------------------------------------------------------------------
# Reads inside a caller's db_session (a batch)
# ---------------------------------------------------------------------------


@pytest.fixture
def storage(database_url):
    app = app_for(database_url)
    try:
        yield app.context.storage
    finally:
        app.close()


def test_reads_in_a_batch_see_the_batch_writes(storage):
    with db_session:
        ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="h")
        assert storage.users.get(ada.id) == ada
        assert storage.users.get_by_uuid(ada.uuid) == ada
        assert storage.users.get_by_email("ADA@example.com") == ada
        assert storage.users.list().items == [ada]
        assert storage.users.list(email="ada@example.com").items == [ada]
        assert storage.users.count() == 1
        group = storage.groups.create(name="team", description="", owner_uuid=ada.uuid)
        assert storage.groups.list(name="team").items == [group]
        [owner] = storage.members.list(group_uuid=group.uuid).items
        assert (owner.user_uuid, owner.role) == (ada.uuid, "owner")
        assert storage.members.role_of(ada.uuid, group.uuid) == "owner"
        assert storage.grants.grant(ada.uuid, "auditor") and storage.grants.roles_of(ada.uuid) == {"auditor"}
        session = storage.sessions.create(uuid="11111111-1111-4111-8111-111111111111", user_uuid=ada.uuid,
                                          refresh_jti="a")
        found = storage.sessions.authenticate(session.uuid)
        assert (found.session, found.user) == (session, ada)

        # A change the batch has not flushed yet is seen too.
        storage.groups.delete(group.id)
        assert storage.groups.get(group.id) is None
        assert storage.members.list(group_uuid=group.uuid).items == []
        assert storage.sessions.revoke(session.uuid)
        assert storage.sessions.authenticate(session.uuid) is None
        assert storage.grants.revoke(ada.uuid, "auditor") and storage.grants.roles_of(ada.uuid) == frozenset()
    assert storage.users.get(ada.id) == ada  # and committed with the batch
    assert storage.groups.count() == 0


def test_a_batch_that_fails_leaves_nothing(storage):
    with pytest.raises(RuntimeError):
        with db_session:
            ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="h")
            assert storage.users.get(ada.id) == ada
            raise RuntimeError("the caller gives up")
    assert storage.users.get(ada.id) is None
    assert storage.users.count() == 0


# ---------------------------------------------------------------------------
# Authentication in one read
# ---------------------------------------------------------------------------


def test_authenticate_finds_a_live_session_its_live_user_and_the_revision(storage):
    users = [storage.users.create(name=f"n{i}", email=f"u{i}@example.com", password_hash="h") for i in range(2)]
    live = storage.sessions.create(uuid="11111111-1111-4111-8111-111111111111", user_uuid=users[0].uuid,
                                   refresh_jti="a")
    orphan = storage.sessions.create(uuid="22222222-2222-4222-8222-222222222222", user_uuid=users[1].uuid,
                                     refresh_jti="b")
    found = storage.sessions.authenticate(live.uuid)
    assert found == Authenticated(session=live, user=users[0], policy_revision=storage.revision())
    assert storage.sessions.identity(live.uuid) == (live, users[0])

    storage.roles.create(name="auditor", description="", permissions=[Permission("audit", "read")])
    assert storage.sessions.authenticate(live.uuid).policy_revision == found.policy_revision + 1

    storage.sessions.revoke(live.uuid)
    assert storage.sessions.authenticate(live.uuid) is None
    storage.users.delete(users[1].id)
    assert storage.sessions.authenticate(orphan.uuid) is None
    for unknown in ("33333333-3333-4333-8333-333333333333", "", None, 7, b"x"):
        assert storage.sessions.authenticate(unknown) is None
    assert not hasattr(storage, "authenticate")  # one way in: storage.sessions.authenticate


@pytest.mark.backend
def test_the_authentication_read_needs_no_statistics(postgres_database):
    """On a new PostgreSQL database, before any ``ANALYZE``, the authentication read
    finds the session's user by its uuid key. (Filtering on the user's ``del_token``
    made the planner walk the live users through the ``(del_token, id)`` index and
    compare each one's uuid.)"""
    with scratch_database(postgres_database.url) as fresh:
        app = app_for(fresh.url)
        try:
            storage = app.context.storage
            raw(fresh.url, "ALTER TABLE locky_users SET (autovacuum_enabled = false)")
            users = [storage.users.create(name=f"n{i}", email=f"u{i}@example.com", password_hash="h")
                     for i in range(200)]
            session = storage.sessions.create(uuid="11111111-1111-4111-8111-111111111111",
                                              user_uuid=users[-1].uuid, refresh_jti="a")
            assert raw(fresh.url, "SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables"
                                  " WHERE relname = 'locky_users'") == [(None, None)]
            statement = storage.sessions._authentication.statement
            plan = "\n".join(row[0] for row in raw(fresh.url, "EXPLAIN " + statement.direct, session.uuid))
            assert "locky_users_uuid_key" in plan and "del_token" not in plan, plan
            assert storage.sessions.authenticate(session.uuid).user == users[-1]
            storage.users.delete(users[-1].id)
            assert storage.sessions.authenticate(session.uuid) is None
        finally:
            app.close()


def postgres_plans(url: str, statement, params: tuple) -> dict[str, str]:
    """The plans PostgreSQL makes of a prepared read: for these ``params`` (a custom
    plan) and for any (the generic plan a prepared statement settles on after five runs)."""
    connection = connect(url)
    try:
        cursor = connection.cursor()
        cursor.execute(statement.prepare)
        plans = {}
        for mode in ("force_custom_plan", "force_generic_plan"):
            cursor.execute(f"SET plan_cache_mode = {mode}")
            cursor.execute("EXPLAIN " + statement.execute, params)
            plans[mode] = "\n".join(row[0] for row in cursor.fetchall())
        return plans
    finally:
        connection.close()


def load_users(url: str, count: int, deleted_every: int = 0) -> None:
    """``count`` users written straight into PostgreSQL, as a bulk load would (uuid
    ``md5('u' || i)``); every ``deleted_every``-th one deleted."""
    deleted = f"CASE WHEN mod(i, {deleted_every}) = 0 THEN i ELSE 0 END" if deleted_every else "0"
    raw(url, "INSERT INTO locky_users (uuid, created_at, updated_at, del_token, name, email, password_hash)"
             f" SELECT md5('u' || i), now(), now(), {deleted}, 'u' || i, 'u' || i || '@example.com', 'h'"
             f" FROM generate_series(1, {count}) i")


def without_then_with_statistics(url: str, table: str):
    """``False``, then ``True`` once ``table`` has been analyzed (autovacuum is off)."""
    for analyzed in (False, True):
        if analyzed:
            raw(url, f"ANALYZE {table}")
        assert raw(url, "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = %s",
                   table) == [(analyzed,)]
        yield analyzed


@pytest.mark.backend
def test_reads_of_many_by_uuid_need_no_statistics(postgres_database):
    """On PostgreSQL, users (and groups) by many uuids at once (``get_many_by_uuid``, a
    batch of checks and a SCIM page read their users with it) are read one uuid at a
    time from the unique index, whatever the planner knows. With an ``IN`` list of 128
    uuids and a filter on ``del_token``, the generic plan, before the table's first
    ``ANALYZE``, compared every row of the table with the list: 120x slower."""
    with scratch_database(postgres_database.url) as fresh:
        app = app_for(fresh.url)
        try:
            storage = app.context.storage
            raw(fresh.url, "ALTER TABLE locky_users SET (autovacuum_enabled = false)")
            load_users(fresh.url, 4000, deleted_every=10)
            asked = [uuid for (uuid,) in raw(fresh.url, "SELECT uuid FROM locky_users ORDER BY md5(uuid) LIMIT 128")]
            live = {uuid for (uuid,) in raw(fresh.url, "SELECT uuid FROM locky_users WHERE del_token = 0")}
            expected = sorted(uuid for uuid in asked if uuid in live)
            assert 90 < len(expected) < 128
            inner = storage.inner  # the Pony storage, under the cache
            inner.users.get_many_by_uuid(asked[:2])
            statement = inner.users.reads._statements[("find_each", "uuid")]
            for _ in without_then_with_statistics(fresh.url, "locky_users"):
                for mode, plan in postgres_plans(fresh.url, statement, (asked,)).items():
                    assert "Index Scan using locky_users_uuid_key" in plan and "Nested Loop" in plan, (mode, plan)
                    assert "Seq Scan" not in plan and "del_token_id" not in plan, (mode, plan)
                found = inner.users.get_many_by_uuid(asked + ["not a uuid", asked[0]])
                assert sorted(found) == expected and all(found[uuid].uuid == uuid for uuid in expected)
                assert sorted(storage.users.get_many_by_uuid(asked)) == expected
                with db_session:  # in a caller's transaction, through Pony's own select
                    assert sorted(inner.users.get_many_by_uuid(asked)) == expected
        finally:
            app.close()


@pytest.mark.backend
def test_the_batch_role_read_probes_the_index_with_or_without_statistics(postgres_database):
    """On PostgreSQL a batch's roles (``members.roles_in``) are read pair by pair from
    the memberships' ``(user_uuid, del_token, group_uuid, role)`` index, whatever the
    planner knows: before any ``ANALYZE``, after it, planned for the arrays given or for
    any arrays (the generic plan a prepared statement settles on). Joined to the pairs
    without the lateral read, the plan before ``ANALYZE`` walked the live memberships
    through the ``(del_token, id)`` index, or hashed the whole table, 10x slower."""
    index = "idx_locky_members__user_uuid_del_token_group_uuid_role"
    with scratch_database(postgres_database.url) as fresh:
        app = app_for(fresh.url)
        try:
            storage = app.context.storage
            raw(fresh.url, "ALTER TABLE locky_members SET (autovacuum_enabled = false)")
            load_users(fresh.url, 4000)
            raw(fresh.url, "INSERT INTO locky_groups (uuid, created_at, updated_at, del_token, name, description)"
                           " SELECT md5('g' || i), now(), now(), 0, 'g' || i, '' FROM generate_series(1, 200) i")
            # Each user in two groups; every third membership of the first group ended.
            raw(fresh.url, 'INSERT INTO locky_members (uuid, created_at, updated_at, del_token, "group", "user",'
                           " group_uuid, user_uuid, role) SELECT md5('m' || u.id || '-' || g.id), now(), now(),"
                           " CASE WHEN g.id = 1 + mod(u.id, 200) AND mod(u.id, 3) = 0 THEN u.id ELSE 0 END, g.id, u.id,"
                           " g.uuid, u.uuid, CASE WHEN mod(u.id, 2) = 0 THEN 'member' ELSE 'viewer' END"
                           " FROM locky_users u JOIN locky_groups g ON g.id IN (1 + mod(u.id, 200), 1 + mod(u.id + 7, 200))")
            rows = raw(fresh.url, "SELECT user_uuid, group_uuid, role, del_token FROM locky_members"
                                  " ORDER BY md5(uuid) LIMIT 100")
            asked = [(user, group) for user, group, _, _ in rows] + [(rows[0][0], "no such group")]
            expected = {(user, group): role for user, group, role, del_token in rows if del_token == 0}
            assert 40 < len(expected) < 100
            inner = storage.inner  # the Pony storage, under the cache
            statement, _ = inner.members.by_pairs
            arrays = ([user for user, _ in asked], [group for _, group in asked])
            for _ in without_then_with_statistics(fresh.url, "locky_members"):
                for mode, plan in postgres_plans(fresh.url, statement, arrays).items():
                    assert f"Index Only Scan using {index}" in plan and "Nested Loop" in plan, (mode, plan)
                    assert "Seq Scan on locky_members" not in plan and "del_token_id" not in plan, (mode, plan)
                assert inner.members.roles_in(asked) == expected
                assert storage.members.roles_in(asked) == expected
                with db_session:  # in a caller's transaction, through Pony's own select
                    assert inner.members.roles_in(asked) == expected
        finally:
            app.close()


# ---------------------------------------------------------------------------
# Memberships: references, then the caller's authorization, then the insert
# ---------------------------------------------------------------------------


def test_member_create_checks_references_then_authorizes_then_inserts(storage):
    ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="h")
    bob = storage.users.create(name="Bob", email="bob@example.com", password_hash="h")
    group = storage.groups.create(name="team", description="", owner_uuid=ada.uuid)
    nobody = "00000000-0000-4000-8000-000000000000"
    calls: list[str] = []

    def allow() -> None:
        calls.append("authorize")

    def deny() -> None:
        calls.append("authorize")
        raise Forbidden()

    # A missing reference is reported, in the order group, user, role, before authorizing.
    for arguments, field, message in (
        ({"group_uuid": nobody, "user_uuid": nobody, "role": "nope"}, "group_uuid", "No such group."),
        ({"group_uuid": group.uuid, "user_uuid": nobody, "role": "nope"}, "user_uuid", "No such user."),
        ({"group_uuid": group.uuid, "user_uuid": bob.uuid, "role": "nope"}, "role", "No such role."),
    ):
        with pytest.raises(Invalid) as caught:
            storage.members.create(**arguments, authorize=deny)
        assert caught.value.fields == {field: message}
    assert calls == []

    # Forbidden propagates unchanged and nothing is written.
    with pytest.raises(Forbidden):
        storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer", authorize=deny)
    assert calls == ["authorize"]
    assert storage.members.count(group_uuid=group.uuid) == 1
    assert storage.members.role_of(bob.uuid, group.uuid) is None

    member = storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer", authorize=allow)
    assert calls == ["authorize", "authorize"]
    assert storage.members.get(member.id) == member
    assert storage.members.role_of(bob.uuid, group.uuid) == "viewer"
    # Without ``authorize`` it is the plain insert.
    storage.members.delete(member.id)
    again = storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
    assert storage.members.list(user_uuid=bob.uuid).items == [again]


def test_member_create_reads_the_role_as_stored_not_as_the_block_loaded_it(storage):
    # Locky decides an add in the block that inserts, and the policy's reload may load
    # the custom roles there first. A delete committed in between makes the role
    # missing: the check must not take Pony's session copy of the row (on SQLite it did,
    # leaving a membership on a deleted role).
    ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="h")
    bob = storage.users.create(name="Bob", email="bob@example.com", password_hash="h")
    group = storage.groups.create(name="team", description="", owner_uuid=ada.uuid)
    role = storage.roles.create(name="fleeting", description="", permissions=[Permission("docs", "read")])
    with pytest.raises(Invalid) as caught:
        with storage.atomic():
            assert "fleeting" in storage.roles.custom_permissions()
            deleter = threading.Thread(target=storage.roles.delete, args=(role.id,))
            deleter.start()
            deleter.join(30)
            assert not deleter.is_alive()
            storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="fleeting")
    assert caught.value.fields == {"role": "No such role."}
    assert storage.roles.get(role.id) is None
    assert storage.members.count(role="fleeting") == 0


def test_a_deleted_group_user_or_role_is_missing(storage, database_url):
    ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="h")
    bob = storage.users.create(name="Bob", email="bob@example.com", password_hash="h")
    group = storage.groups.create(name="team", description="", owner_uuid=ada.uuid)
    role = storage.roles.create(name="auditor", description="", permissions=[])
    storage.roles.delete(role.id)
    with pytest.raises(Invalid) as caught:
        storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="auditor")
    assert caught.value.fields == {"role": "No such role."}
    storage.users.delete(bob.id)
    with pytest.raises(Invalid) as caught:
        storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer")
    assert caught.value.fields == {"user_uuid": "No such user."}
    storage.groups.delete(group.id)
    with pytest.raises(Invalid) as caught:
        storage.members.create(group_uuid=group.uuid, user_uuid=ada.uuid, role="viewer")
    assert caught.value.fields == {"group_uuid": "No such group."}
    assert raw(database_url, "SELECT COUNT(*) FROM locky_members WHERE del_token = 0") == [(0,)]
