"""Schema step 13 (a role's holders by user id) carries a database at version 12 on every
engine: the grants it had learn their users' ids, and the holders of roles are then read
a page at a time by id (``GrantStore.holders_by_id``, ``MemberStore.holders_by_id``, which
``/v1/internal/authz/subjects`` reads every page's candidates with), each role as one
range of an index that holds every column asked for, on SQLite with and without the
planner's statistics."""

from __future__ import annotations

import sqlite3

from pony.orm import db_session

from locky.testing.storage_contract import BUILTIN
from locky_pony.migrations import LATEST

from test_pony_oauth_schema import storage_at

#: The version before the step.
BEFORE = 12
GRANT_INDEX = "idx_locky_grants__role_user_id_user_uuid"
MEMBER_INDEX = "idx_locky_members__group_uuid_del_token_role_user_user_uuid"


def test_step_13_gives_grants_their_users_ids_and_pages_holders_by_index(tableless_url):
    with storage_at(tableless_url, BEFORE) as storage:
        storage.roles.sync_builtin(BUILTIN)
        ada, bea, cat, dan = (storage.users.create(name=name, email=f"{name.lower()}@example.com",
                                                   password_hash="$2b$04$" + "x" * 53)
                              for name in ("Ada", "Bea", "Cat", "Dan"))
        group = storage.groups.create(name="engineers", description="", owner_uuid=dan.uuid)
        storage.members.create(group_uuid=group.uuid, user_uuid=bea.uuid, role="member")
        storage.members.create(group_uuid=group.uuid, user_uuid=cat.uuid, role="viewer")
        with db_session:  # grants as the version 12 schema takes them
            for user, role in ((cat.uuid, "auditor"), (ada.uuid, "auditor"), (bea.uuid, "admin"),
                               ("client:reports", "auditor")):
                storage.db.execute("INSERT INTO locky_grants (user_uuid, role) VALUES ($user, $role)",
                                   {"user": user, "role": role})

        assert [step.version for step in storage.migrate()] == list(range(BEFORE + 1, LATEST + 1))
        assert storage.schema().current == LATEST

        with db_session:
            ids = dict(storage.db.select("SELECT user_uuid, user_id FROM locky_grants WHERE role = 'auditor'"))
        assert ids == {cat.uuid: cat.id, ada.uuid: ada.id, "client:reports": None}
        assert sorted(storage.grants.holders("auditor")) == sorted([ada.uuid, cat.uuid, "client:reports"])
        assert storage.grants.holders_by_id(["auditor", "admin"], 0, 50) == [
            (ada.id, ada.uuid), (bea.id, bea.uuid), (cat.id, cat.uuid)]
        assert storage.grants.holders_by_id(["auditor", "admin"], ada.id, 1) == [(bea.id, bea.uuid)]
        assert storage.grants.grant(dan.uuid, "auditor") is True  # a grant made now knows its user's id
        assert storage.grants.holders_by_id(["auditor"], cat.id, 50) == [(dan.id, dan.uuid)]
        assert storage.members.holders_by_id(group.uuid, ["owner", "member"], 0, 50) == [
            (bea.id, bea.uuid), (dan.id, dan.uuid)]

        if tableless_url.startswith("sqlite"):
            grants, members = storage.grants._pages, storage.members._holder_pages
            plans = {
                GRANT_INDEX: (grants._statement(2).direct, ["auditor", 0, 11, "admin", 0, 11]),
                MEMBER_INDEX: (members._statement(1).direct, [group.uuid, "member", 0, 11]),
            }
            with sqlite3.connect(tableless_url.removeprefix("sqlite:///")) as connection:
                for analyzed in (False, True):  # without the planner's statistics, then with them
                    if analyzed:
                        connection.execute("ANALYZE")
                    for index, (statement, params) in plans.items():
                        plan = " ".join(row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}",
                                                                              params))
                        assert f"USING COVERING INDEX {index} (" in plan, plan
                        assert "TEMP B-TREE" not in plan, plan  # each range read in order, not sorted
                    plan = " ".join(row[3] for row in connection.execute(
                        f"EXPLAIN QUERY PLAN {storage.grants._holders.direct}", ["auditor"]))
                    assert f"USING COVERING INDEX {GRANT_INDEX} (role=?)" in plan, plan
