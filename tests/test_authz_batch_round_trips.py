"""A batch of checks (``POST /v1/internal/authz/check``, docs/http/authorization.md) reads the
memberships it needs once: one statement for up to 100 group-scoped checks of many users
in many groups, not one per check; and each answer is still the single check's.

The statements are counted as SQLite runs them (the read connection's trace callback):
the SQLite test database only. The answers are compared on every engine
(``LOCKY_TEST_DATABASE_URL``).
"""

from __future__ import annotations

import random

import pytest

from authz_helpers import NOBODY, add_member, create_group, create_role
from authz_helpers import check as decide

CHECK = "/v1/internal/authz/check"


@pytest.fixture
def world(locky_client, locky_admin):
    """8 groups of one owner, 12 users each a member of some of them with several roles."""
    client = locky_client
    create_role(client, locky_admin, "billing", [("invoices", "approve")])
    owner = client.account("owner@example.com")
    groups = [create_group(client, owner, f"Team {n}")["uuid"] for n in range(8)]
    users = [client.register(f"person{n}@example.com")["uuid"] for n in range(12)]
    roles = ("billing", "viewer", "member", "maintainer")
    for n, user_uuid in enumerate(users):
        for k, group_uuid in enumerate(groups):
            if (n + k) % 3 == 0:
                add_member(client, owner, {"uuid": group_uuid}, user_uuid, roles[(n + k) % len(roles)])
    return {"owner": owner, "groups": groups, "users": users + [owner.uuid]}


def checks_of(world, count: int, seed: int = 5) -> list[dict]:
    rng = random.Random(seed)
    asked = [("invoices", "approve"), ("groups", "read"), ("groups", "delete"), ("members", "write"),
             ("members", "assign:owner")]
    groups = world["groups"] + [NOBODY]
    found = []
    for n in range(count):
        resource, action = rng.choice(asked)
        check = {"user_uuid": rng.choice(world["users"] + [NOBODY]), "resource": resource, "action": action}
        if n % 10:  # most in a group, some global
            check["group_uuid"] = rng.choice(groups)
        found.append(check)
    return found


class Statements:
    """The statements SQLite runs on the storage's read connection of this thread."""

    def __init__(self, storage):
        reader = storage.reader
        if reader.direct != "sqlite":
            pytest.skip("counts statements on the SQLite test database")
        self.connection = reader._connection()
        self.seen: list[str] = []
        self.connection.set_trace_callback(self.seen.append)

    def on(self, table: str) -> list[str]:
        return [s for s in self.seen if table in s]

    def close(self) -> None:
        self.connection.set_trace_callback(None)


def until_measured(measure, expected, tries: int = 20) -> None:
    """``measure()`` again until it gives ``expected``, at most ``tries`` times: on SQLite
    any commit (a background sender's too) empties the storage cache, and a measurement a
    commit came into is made again."""
    found = []
    while len(found) < tries and expected not in found:
        found.append(measure())
    assert found[-1] == expected, found


def batch(client, caller, checks):
    result = client.simulate_post(CHECK, json={"checks": checks}, headers=caller.headers)
    assert result.status_code == 200, result.text
    return [r["allowed"] for r in result.json["results"]]


def test_a_batch_answers_each_check_as_the_single_check_does(locky_client, locky_user, world):
    checks = checks_of(world, 100)
    answers = batch(locky_client, locky_user, checks)
    singles = [decide(locky_client, locky_user, c["user_uuid"], c["resource"], c["action"], c.get("group_uuid"))
               for c in checks]
    assert answers == singles
    assert True in answers and False in answers


def test_a_batch_of_100_reads_the_memberships_in_one_statement(locky_client, locky_user, world):
    """From a cold cache a batch reads its memberships in one statement, and one by one
    the checks read one per user (the user with their roles in every group); asked again,
    they come from the storage cache. A check about a user nobody has reads again every
    time (nothing is kept of nobody; it read the user before, now the user with the
    roles, one statement either way). On SQLite any commit empties that cache (a
    background sender's too): a measurement a commit came into is made again."""
    checks = checks_of(world, 100, seed=11)
    pairs = {(c["user_uuid"], c["group_uuid"]) for c in checks if "group_uuid" in c}
    known_users = {user for user, _ in pairs if user != NOBODY}
    assert len(pairs) > 50 and len(pairs) > 2 * len(known_users)  # many users in many groups
    storage = locky_client.app.context.storage
    answers = batch(locky_client, locky_user, checks)  # users and grants read, the policy loaded
    statements = Statements(storage)

    def measured(ask) -> tuple[int, int]:
        """The statements on the memberships of ``ask()`` from a cold cache, and then warm."""
        storage.cache.clear()
        statements.seen.clear()
        assert ask() == answers
        cold = len(statements.on("locky_members"))
        statements.seen.clear()
        assert ask() == answers
        return cold, len(statements.on("locky_members"))

    def singles():
        return [decide(locky_client, locky_user, c["user_uuid"], c["resource"], c["action"], c.get("group_uuid"))
                for c in checks]

    try:
        nobody = sum(1 for c in checks if c["user_uuid"] == NOBODY and "group_uuid" in c)
        assert nobody > 0
        for ask, cold, warm in ((lambda: batch(locky_client, locky_user, checks), 1, 0),
                                (singles, len(known_users) + nobody, nobody)):
            until_measured(lambda: measured(ask), (cold, warm))
    finally:
        statements.close()


def test_a_batch_after_single_checks_about_its_users_reads_no_membership(locky_client, locky_user, world):
    """Single checks keep each user's roles in every group; a batch about the same users
    then answers its memberships from those, in groups they are not in too, and reads
    none (a commit that empties SQLite's cache in between makes the measurement again)."""
    checks = checks_of(world, 100, seed=11)
    storage = locky_client.app.context.storage
    answers = batch(locky_client, locky_user, checks)  # users and grants read, the policy loaded
    statements = Statements(storage)

    def measured() -> int:
        storage.cache.clear()
        for c in checks:
            decide(locky_client, locky_user, c["user_uuid"], c["resource"], c["action"], c.get("group_uuid"))
        statements.seen.clear()
        assert batch(locky_client, locky_user, checks) == answers
        return len(statements.on("locky_members"))

    try:
        until_measured(measured, 0)
    finally:
        statements.close()


def test_a_batch_with_no_group_reads_no_membership(locky_client, locky_user, world):
    checks = [{"user_uuid": u, "resource": "groups", "action": "read"} for u in world["users"]]
    batch(locky_client, locky_user, checks)
    statements = Statements(locky_client.app.context.storage)
    try:
        assert batch(locky_client, locky_user, checks) == [True] * len(checks)
        assert statements.on("locky_members") == []
    finally:
        statements.close()


def test_a_membership_ended_between_two_batches_is_seen_by_the_next(locky_client, locky_user, world):
    owner, group = world["owner"], world["groups"][0]
    user = locky_client.register("late@example.com")["uuid"]
    member = add_member(locky_client, owner, {"uuid": group}, user, "billing")
    check = [{"user_uuid": user, "resource": "invoices", "action": "approve", "group_uuid": group}] * 3
    assert batch(locky_client, locky_user, check) == [True] * 3
    removed = locky_client.simulate_delete(f"/v1/private/members/{member['id']}", headers=owner.headers)
    assert removed.status_code in (200, 204), removed.text
    assert batch(locky_client, locky_user, check) == [False] * 3


def test_a_plainly_valid_item_is_loaded_as_the_schema_loads_it():
    """The batch's quick reading of an item (locky.resources.authz.plain_item) gives what
    the item schema gives, or leaves the item to it: never another answer."""
    from marshmallow import ValidationError

    from locky.resources.authz import plain_item
    from locky.schemas import AuthzCheckItemSchema

    schema = AuthzCheckItemSchema()
    uuids = ["3F2B1C4D-1234-4ABC-8DEF-0123456789AB", "3f2b1c4d-1234-7abc-bdef-0123456789ab", "", "not-a-uuid",
             "3f2b1c4d-1234-4abc-8def-0123456789ab\n", "{3f2b1c4d-1234-4abc-8def-0123456789ab}",
             "00000000-0000-0000-0000-000000000000", None, 7, ["x"]]
    parts = ["groups", "app1.res3", "assign:owner", "*", "a" * 64, "a" * 65, "Groups", "read\n", "", " read", None, 1]
    rng = random.Random(3)

    def pick(values, good):  # a value that passes, more often than not
        return rng.choice(values[:good] if rng.random() < 0.7 else values)

    plain = 0
    for n in range(3000):
        item = {"user_uuid": pick(uuids, 2), "resource": pick(parts, 5), "action": pick(parts, 5)}
        if n % 3:
            item["group_uuid"] = pick(uuids, 2)
        if n % 7 == 0:
            del item[rng.choice(list(item))]
        if n % 11 == 0:
            item[rng.choice(["extra", "explain", "id"])] = "x"
        try:
            expected = schema.load(item)
        except ValidationError:
            expected = None
        found = plain_item(item)
        if found is not None:
            plain += 1
            assert found == expected, item
    assert plain > 300
    assert plain_item(["not", "an", "object"]) is None and plain_item("x") is None


def test_a_batch_reads_the_users_it_asks_about_in_one_statement(locky_client, locky_user, world):
    checks = checks_of(world, 100, seed=11)
    asked = {c["user_uuid"] for c in checks}
    assert len(asked) > 10
    storage = locky_client.app.context.storage
    answers = batch(locky_client, locky_user, checks)  # the policy loaded, the grants read
    statements = Statements(storage)
    try:
        storage.cache.clear()  # every checked user is read anew
        assert batch(locky_client, locky_user, checks) == answers
        users = [s for s in statements.seen if 'FROM "locky_users"' in s and "locky_sessions" not in s]
        assert len(users) == 1, users
        assert all(uuid in users[0] for uuid in asked - {NOBODY})
    finally:
        statements.close()
