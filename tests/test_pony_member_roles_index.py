"""Schema step 11 (the memberships' index for batch role reads) carries a database at
version 10, on every engine: the memberships it had are found by ``roles_in``,
``role_of`` and ``roles_by_group`` afterwards, deleted ones are not, and the batch read
is answered from the new index alone, one probe a pair, a user's roles from one range of
it (SQLite's plans say so; PostgreSQL's is checked in test_pony_read_path.py, MariaDB's
here too)."""

from __future__ import annotations

import re
import sqlite3

from pony.orm import db_session

from locky import utcnow
from locky_pony.migrations import LATEST

from test_pony_oauth_schema import storage_at

#: The version before the index.
BEFORE = 10
INDEX = "idx_locky_members__user_uuid_del_token_group_uuid_role"
ADA, BEA = "11111111-1111-4111-8111-111111111111", "33333333-3333-4333-8333-333333333333"
TEAM = "22222222-2222-4222-8222-222222222222"


def test_step_11_keeps_the_memberships_and_reads_them_from_the_index(tableless_url):
    with storage_at(tableless_url, BEFORE) as storage:
        now = utcnow()
        with db_session:  # rows as the version 10 schema takes them
            db = storage.db
            for uuid, name, email in ((ADA, "Ada", "ada@example.com"), (BEA, "Bea", "bea@example.com")):
                db.execute("INSERT INTO locky_users (uuid, created_at, updated_at, del_token, name, email,"
                           " password_hash) VALUES ($uuid, $now, $now, 0, $name, $email, 'x')",
                           {"uuid": uuid, "now": now, "name": name, "email": email})
            db.execute("INSERT INTO locky_groups (uuid, created_at, updated_at, del_token, name, description)"
                       " VALUES ($uuid, $now, $now, 0, 'engineers', '')", {"uuid": TEAM, "now": now})
            for uuid, user, role, del_token in (("44444444-4444-4444-8444-444444444444", ADA, "owner", 0),
                                                ("55555555-5555-4555-8555-555555555555", BEA, "viewer", 7)):
                db.execute("INSERT INTO locky_members (uuid, created_at, updated_at, del_token, "
                           + ('"group", "user"' if not tableless_url.startswith("mysql") else "`group`, `user`")
                           + ", group_uuid, user_uuid, role) VALUES ($uuid, $now, $now, $del_token,"
                           " (SELECT id FROM locky_groups WHERE uuid = $team),"
                           " (SELECT id FROM locky_users WHERE uuid = $user), $team, $user, $role)",
                           {"uuid": uuid, "now": now, "del_token": del_token, "team": TEAM, "user": user,
                            "role": role})

        assert [step.version for step in storage.migrate()] == list(range(BEFORE + 1, LATEST + 1))
        assert storage.schema().current == LATEST

        assert storage.members.roles_in([(ADA, TEAM), (BEA, TEAM)]) == {(ADA, TEAM): "owner"}
        with db_session:  # in a caller's transaction: through Pony's own select, which reads $ as a parameter
            assert storage.members.roles_in([(ADA, TEAM), (BEA, TEAM)]) == {(ADA, TEAM): "owner"}
        assert (storage.members.role_of(ADA, TEAM), storage.members.role_of(BEA, TEAM)) == ("owner", None)
        # A user's roles in every group: one range of the same index.
        assert (storage.members.roles_by_group(ADA, 64), storage.members.roles_by_group(BEA, 64)) == ({TEAM: "owner"}, {})
        with db_session:
            assert storage.members.roles_by_group(ADA, 1) == {TEAM: "owner"}
            assert storage.members.roles_by_group(ADA, 0) is None
        # And with the user's record, in one statement: the same range.
        ada = storage.users.get_by_uuid(ADA)
        assert storage.members.user_with_roles_by_group(ADA, 64) == (ada, {TEAM: "owner"})
        assert storage.members.user_with_roles_by_group(BEA, 64) == (storage.users.get_by_uuid(BEA), {})
        with db_session:
            assert storage.members.user_with_roles_by_group(ADA, 0) == (ada, None)
        by_group = storage.members._by_group
        with_user = storage.members._user_with_roles[0]
        if tableless_url.startswith("mysql"):
            for statement, params in ((by_group, (ADA, 65)), (with_user, (ADA, 65, ADA))):
                with db_session:
                    cursor = storage.db.get_connection().cursor()
                    cursor.execute(f"EXPLAIN {statement.direct}", params)
                    names = [column[0] for column in cursor.description]
                    plan = [dict(zip(names, row)) for row in cursor.fetchall()]
                inner = [step for step in plan if step["table"] == "locky_members"]
                assert len(inner) == 1 and inner[0]["key"] == INDEX and inner[0]["type"] == "ref", plan
                assert "Using index" in (inner[0]["Extra"] or ""), plan
            user = [step for step in plan if step["table"] == "locky_users"]  # with_user's
            assert len(user) == 1 and user[0]["type"] in ("const", "eq_ref", "ref") and int(user[0]["rows"]) == 1, plan
        if tableless_url.startswith("mysql") and storage.members.by_pairs is None:
            with db_session:
                version = storage.db.select("SELECT VERSION()")[0]
            release = tuple(int(part) for part in re.match(r"(\d+)\.(\d+)", version).groups())
            assert "MariaDB" not in version or release < (10, 6), f"{version} has JSON_TABLE"
        elif tableless_url.startswith("mysql"):
            # MariaDB 10.6+ takes the pairs as one JSON text too (JSON_TABLE), then probes
            # the index once a pair, as SQLite does below.
            statement = storage.members.by_pairs[0]
            with db_session:
                cursor = storage.db.get_connection().cursor()
                cursor.execute(f"EXPLAIN {statement.plain.direct}", (f'[["{ADA}", "{TEAM}"], ["{BEA}", "{TEAM}"]]',))
                names = [column[0] for column in cursor.description]
                plan = [dict(zip(names, row)) for row in cursor.fetchall()]
            assert [step["table"] for step in plan] == ["asked", "m"], plan
            assert plan[1]["key"] == INDEX and plan[1]["type"] in ("ref", "eq_ref"), plan
            assert "Using index" in (plan[1]["Extra"] or ""), plan
            # Compared in the table's binary NO PAD collation: exactly, as role_of does.
            assert storage.members.roles_in([(f"{ADA} ", TEAM), (ADA, f"{TEAM} ")]) == {}
            # MySQL, or a MariaDB without JSON_TABLE, reads by IN lists, to the same answers.
            storage.members.__dict__["by_pairs"] = None
            assert storage.members.roles_in([(ADA, TEAM), (BEA, TEAM)]) == {(ADA, TEAM): "owner"}
            with db_session:
                assert storage.members.roles_in([(ADA, TEAM), (BEA, TEAM)]) == {(ADA, TEAM): "owner"}
        if tableless_url.startswith("sqlite"):
            path = tableless_url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as connection:
                pairs = f'[["{ADA}", "{TEAM}"], ["{BEA}", "{TEAM}"]]'
                plan = " ".join(row[3] for row in connection.execute(
                    f"EXPLAIN QUERY PLAN {with_user.direct}", [ADA, 65, ADA]))
                assert f"COVERING INDEX {INDEX} (user_uuid=? AND del_token=?)" in plan, plan
                assert "SEARCH locky_users USING INDEX" in plan and "SCAN locky_users" not in plan, plan
                statement = storage.members.by_pairs[0].direct
                for analyzed in (False, True):  # without the planner's statistics, then with them
                    if analyzed:
                        connection.execute("ANALYZE")
                    plan = " ".join(row[3] for row in connection.execute(
                        f"EXPLAIN QUERY PLAN {statement}", [pairs]))
                    assert plan.startswith("SCAN asked"), plan
                    assert f"INDEX {INDEX} (user_uuid=? AND del_token=? AND group_uuid=?)" in plan, plan
                plan = " ".join(row[3] for row in connection.execute(
                    f"EXPLAIN QUERY PLAN {by_group.direct}", [ADA, 65]))
                assert f"COVERING INDEX {INDEX} (user_uuid=? AND del_token=?)" in plan, plan
                # (With the statistics of two users, scanning them is the cheaper plan.)
                plan = " ".join(row[3] for row in connection.execute(
                    f"EXPLAIN QUERY PLAN {with_user.direct}", [ADA, 65, ADA]))
                assert f"COVERING INDEX {INDEX} (user_uuid=? AND del_token=?)" in plan, plan
                # A SQLite before 3.38 reads ranges of the same index by IN lists.
                statement = storage.members._statement(2, 2).direct
                plan = " ".join(row[3] for row in connection.execute(
                    f"EXPLAIN QUERY PLAN {statement}", [ADA, BEA, TEAM, TEAM]))
                assert f"COVERING INDEX {INDEX} (user_uuid=? AND del_token=?)" in plan, plan
