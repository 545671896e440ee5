"""Schema step 12 (the grants' index on role) carries a database at version 11, on every
engine: the grants it had are read by role afterwards (``GrantStore.holders``, which
``/v1/internal/authz/subjects`` asks for every role that allows what it lists), and the
read is answered from the new index alone instead of reading the whole table."""

from __future__ import annotations

import sqlite3

from pony.orm import db_session

from locky.testing import make_settings
from locky_pony import PonyStorage
from locky_pony.migrations import LATEST

from test_pony_oauth_schema import migrate_to

#: The version before the index.
BEFORE = 11
INDEX = "idx_locky_grants__role_user_uuid"
ADA, BEA, CAT = ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
                 "33333333-3333-4333-8333-333333333333")


def test_step_12_keeps_the_grants_and_reads_holders_by_the_index(tableless_url):
    storage = PonyStorage(make_settings(tableless_url))
    try:
        migrate_to(storage, BEFORE)
        assert storage.schema().current == BEFORE
        with db_session:  # rows as the version 11 schema takes them
            for user, role in ((ADA, "admin"), (BEA, "auditor"), (CAT, "auditor"), (ADA, "auditor")):
                storage.db.execute("INSERT INTO locky_grants (user_uuid, role) VALUES ($user, $role)",
                                   {"user": user, "role": role})

        assert [step.version for step in storage.migrate()] == list(range(BEFORE + 1, LATEST + 1))
        assert storage.schema().current == LATEST

        assert sorted(storage.grants.holders("auditor")) == [ADA, BEA, CAT]
        assert storage.grants.holders("admin") == [ADA]
        assert storage.grants.holders("nobody") == []
        assert storage.grants.revoke(ADA, "auditor") is True
        assert sorted(storage.grants.holders("auditor")) == [BEA, CAT]
        if tableless_url.startswith("sqlite"):
            with sqlite3.connect(tableless_url.removeprefix("sqlite:///")) as connection:
                statement = storage.grants._holders.direct
                for analyzed in (False, True):  # without the planner's statistics, then with them
                    if analyzed:
                        connection.execute("ANALYZE")
                    plan = " ".join(row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}",
                                                                          ["auditor"]))
                    assert f"USING COVERING INDEX {INDEX} (role=?)" in plan, plan
    finally:
        storage.close()

