"""Memberships read many at once: :meth:`MemberStore.roles_in`, the roles of a batch of
(user, group) pairs in one SELECT; and :meth:`MemberStore.roles_by_group`, the roles of
one user in every group, which the storage cache keeps so that a user's next decisions
in other groups cost no round trip (:meth:`MemberStore.user_with_roles_by_group` reads
them with the user's record, for a check about a user the cache holds neither of).

An authorizer asked a batch of checks (``POST /v1/internal/authz/check``, up to 100:
docs/http/authorization.md) reads here, once, the memberships every group-scoped check of the
batch needs, instead of one ``role_of`` round trip per check.

On PostgreSQL the statement takes the pairs themselves, as two arrays, and reads each
pair's live membership with one probe of the ``(user_uuid, del_token, group_uuid, role)``
index (schema step 11): a ``LATERAL`` subquery per pair, so that the plan is that nested
loop whatever the planner knows. Joined plainly to the pairs, the memberships were read,
before the table's first ``ANALYZE``, through the ``(del_token, id)`` index or by hashing
the whole table (10x slower). SQLite takes the pairs as one JSON text (``json_each``,
always built in since SQLite 3.38) and probes the same index once per pair, in that
order (``CROSS JOIN``): with statistics of a small table it walked the live memberships
instead. Against the ``IN`` lists below, this costs PostgreSQL 0.6x the CPU (psycopg2
quoted 256 parameters) and 0.4x the time, and SQLite 0.4x
(``benchmarks/batch_reads.py``); and only the pairs asked are read, not every
membership of the batch's users in its groups.

MariaDB 10.6 and later take the pairs as one JSON text too (``JSON_TABLE``, its columns
in the table's collation) and probe the same index once per pair (``STRAIGHT_JOIN``):
against the ``IN`` lists below, 0.8x the CPU and half the time for a batch of 100
(``benchmarks/batch_reads.py``).

MySQL and an older MariaDB (and an older SQLite) select the live memberships whose user
is one of the batch's users and whose group is one of its groups, from that index alone:
each user's live rows are one range of it, and their group is compared there. SQLite
and MariaDB are told not to use the group for the index's ranges (``+group_uuid``,
``CONCAT(group_uuid)``: the same value, but no column to seek on). With 128 of each
list, SQLite probed the index once per (user, group), 16,384 probes, 6x slower than the
ranges; MariaDB, finding that too many ranges, fell back to the ``(user_uuid, del_token,
id)`` index and read each row from the table, 3x slower. The pairs asked for are then
picked out. Its ``IN`` lists are padded to a power of two (:func:`.reads.padded`).
"""

from __future__ import annotations

import re
import sqlite3
from functools import cached_property
from typing import Iterable

import orjson

from locky import User

from . import compat, stores
from .holder_reads import HolderPages
from .reads import RecordReads, chunks, column, in_list, padded, selected


#: The SQLite whose JSON functions are always there (built in since 3.38).
SQLITE_JSON = (3, 38)
#: The first MariaDB with ``JSON_TABLE``.
MARIADB_JSON_TABLE = (10, 6, 0)


class MemberStore(stores.MemberStore):
    """The bundled member store, with the batch read of roles."""

    def __init__(self, entities, reader):
        super().__init__(entities, reader)
        self._by_size: dict[tuple[int, int], object] = {}

    @cached_property
    def _holder_pages(self) -> HolderPages:
        reads = self.reads
        provider, entity = reads.provider, reads.entity
        return HolderPages(reads.reader, reads.columns.table, column(provider, entity, "user"),
                           column(provider, entity, "user_uuid"),
                           f"{column(provider, entity, 'group_uuid')} = {{}} AND {reads.live}"
                           f" AND {column(provider, entity, 'role')} = {{}}")

    def holders_by_id(self, group_uuid: str, roles: Iterable[str], after_id: int,
                      limit: int) -> list[tuple[int, str]]:
        if not isinstance(group_uuid, str):
            return []
        # One range of the (group_uuid, del_token, role, user, user_uuid) index per role
        # (schema step 13), as the grants' (.holder_reads).
        return self._holder_pages.read((group_uuid,), roles, after_id, limit)

    def _statement(self, users: int, groups: int):
        """The SELECT for ``users`` user uuids and ``groups`` group uuids (built once each)."""
        found = self._by_size.get((users, groups))
        if found is None:
            reads = self.reads
            reader, provider, entity = reads.reader, reads.provider, reads.entity
            user_col, group_col = column(provider, entity, "user_uuid"), column(provider, entity, "group_uuid")
            # Every row in one JSON value on MySQL/MariaDB (.reader): PyMySQL reads each
            # row in Python, a few hundred rows a batch.
            columns = self._selected_pair_columns()
            # Compare the group on each row of a user's range (see the docstring).
            group_term = {"SQLite": f"+{group_col}", "MySQL": f"CONCAT({group_col})"}.get(reader.dialect, group_col)
            found = self._by_size[(users, groups)] = reader.many_rows(
                columns, f"SELECT {{}} FROM {reads.columns.table}"
                f" WHERE {in_list(user_col, users)} AND {reads.live} AND {in_list(group_term, groups)}")
        return found

    def _selected_pair_columns(self, prefix: str = "") -> str:
        """The select list of a membership's user, group and role, its columns written
        after ``prefix``."""
        return ", ".join(self._selected_columns(("user_uuid", "group_uuid", "role"), prefix))

    def _selected_columns(self, names: tuple[str, ...], prefix: str = "") -> list[str]:
        """The membership's columns ``names``, each as :func:`.reads.selected` gives it,
        written after ``prefix``."""
        reads = self.reads
        return [selected(reads.reader, reads.entity, name, prefix + column(reads.provider, reads.entity, name))
                for name in names]

    @cached_property
    def by_pairs(self):
        """The SELECT of the pairs themselves on PostgreSQL, SQLite and MariaDB (see the
        module's docstring), with what makes its parameters of the sorted pairs; ``None``
        where the roles are read by ``IN`` lists."""
        reads = self.reads
        reader, provider, entity = reads.reader, reads.provider, reads.entity
        user_col, group_col = column(provider, entity, "user_uuid"), column(provider, entity, "group_uuid")
        role_col = column(provider, entity, "role")
        if reader.dialect == "PostgreSQL":
            return reader.many_rows(
                f"asked.u, asked.g, found.{role_col}",
                f"SELECT {{}} FROM unnest({{}}::text[], {{}}::text[]) AS asked (u, g)"
                f" CROSS JOIN LATERAL (SELECT m.{role_col} FROM {reads.columns.table} m"
                f" WHERE m.{user_col} = asked.u AND m.{reads.live} AND m.{group_col} = asked.g LIMIT 1) found"
            ), lambda asked: ([u for u, _ in asked], [g for _, g in asked])
        if reader.dialect == "SQLite" and sqlite3.sqlite_version_info >= SQLITE_JSON:
            return reader.many_rows(
                f"m.{user_col}, m.{group_col}, m.{role_col}",
                # CROSS JOIN: SQLite keeps that order, the pairs outside.
                f"SELECT {{}} FROM json_each({{}}) AS asked CROSS JOIN {reads.columns.table} m"
                f" WHERE m.{user_col} = asked.value ->> 0 AND m.{reads.live}"
                f" AND m.{group_col} = asked.value ->> 1"
            ), lambda asked: (orjson.dumps(asked).decode(),)
        collation = self._json_table_collation() if reader.dialect == "MySQL" else None
        if collation is not None:
            # The pairs' columns in the table's own collation: compared in another, the
            # index is probed and every row found compared again.
            text = f"VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {collation}"
            columns = self._selected_pair_columns("m.")
            return reader.many_rows(
                columns,
                f"SELECT {{}} FROM JSON_TABLE({{}}, '$[*]' COLUMNS (u {text} PATH '$[0]', g {text} PATH '$[1]'))"
                # STRAIGHT_JOIN: the pairs first, then one probe of the index each.
                f" AS asked STRAIGHT_JOIN {reads.columns.table} m"
                f" WHERE m.{user_col} = asked.u AND m.{reads.live} AND m.{group_col} = asked.g"
            ), lambda asked: (orjson.dumps(asked).decode(),)
        return None

    def _json_table_collation(self) -> str | None:
        """The collation of the memberships' ``user_uuid`` on a MariaDB that has
        ``JSON_TABLE`` (10.6 and later), else ``None``: MySQL, and an older MariaDB, read
        a batch by ``IN`` lists."""
        reads = self.reads
        entity = reads.entity
        version, collation = reads.reader.select(reads.reader.statement(
            "SELECT VERSION(), (SELECT COLLATION_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {} AND COLUMN_NAME = {})"
        ), (compat.table(entity), compat.column(entity, "user_uuid")))[0]
        release = re.match(r"(\d+)\.(\d+)\.(\d+)-MariaDB", version or "")
        if release is None or collation is None or not re.fullmatch(r"\w+", collation):
            return None
        return collation if tuple(int(part) for part in release.groups()) >= MARIADB_JSON_TABLE else None

    @cached_property
    def _by_group(self):
        """The SELECT of :meth:`roles_by_group`: one range of the ``(user_uuid,
        del_token, group_uuid, role)`` index, cut at the bound before the rows are
        packed (on MySQL/MariaDB they are aggregated into one value, which a ``LIMIT``
        outside would not cut)."""
        return self.reads.reader.many_rows("mine.g, mine.r", f"SELECT {{}} FROM {self._range_of_user}")

    @cached_property
    def _range_of_user(self) -> str:
        """The derived table ``mine`` (``g``, ``r``: group and role) of one user's live
        memberships, one range of the ``(user_uuid, del_token, group_uuid, role)`` index,
        written with ``{}`` for the user's uuid and then for the ``LIMIT``."""
        reads = self.reads
        user_col = column(reads.provider, reads.entity, "user_uuid")
        group, role = self._selected_columns(("group_uuid", "role"))
        return (f"(SELECT {group} AS g, {role} AS r FROM {reads.columns.table}"
                f" WHERE {user_col} = {{}} AND {reads.live} LIMIT {{}}) mine")

    @cached_property
    def _user_with_roles(self) -> tuple[object, RecordReads]:
        """The SELECT of :meth:`user_with_roles_by_group`, and the users' reads whose
        columns it selects: the live user's row once per membership of
        :attr:`_by_group`'s range (its ``LIMIT`` inside), or once with no group and role
        for a user with none (``LEFT JOIN``). A user's record comes again on each of their
        rows, which costs less than a second round trip."""
        reader = self.reads.reader
        users = RecordReads(reader, self.entities.User, User)
        statement = reader.statement(
            f"SELECT {reader.select_list(users.columns.sql + ', mine.g, mine.r')} FROM {users.columns.table}"
            f" LEFT JOIN {self._range_of_user} ON 1 = 1"
            f" WHERE {column(users.provider, users.entity, 'uuid')} = {{}} AND {users.live}", packed=True)
        return statement, users

    def user_with_roles_by_group(self, user_uuid: str, at_most: int) -> tuple[User | None, dict[str, str] | None]:
        if not isinstance(user_uuid, str):
            return None, {}
        statement, users = self._user_with_roles
        rows = self.reads.reader.select(statement, (user_uuid, int(at_most) + 1, user_uuid))
        if not rows:
            return None, {}
        width = users.columns.width
        roles = {row[width]: row[width + 1] for row in rows if row[width] is not None}
        return users.columns.build(rows[0]), (None if len(roles) > at_most else roles)

    def roles_by_group(self, user_uuid: str, at_most: int) -> dict[str, str] | None:
        if not isinstance(user_uuid, str):
            return {}
        rows = self.reads.reader.select(self._by_group, (user_uuid, int(at_most) + 1))
        return None if len(rows) > at_most else {group_uuid: role for group_uuid, role in rows}

    def roles_in(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        wanted = {(u, g) for u, g in pairs if isinstance(u, str) and isinstance(g, str)}
        if not wanted:
            return {}
        if self.by_pairs is not None:
            statement, parameters = self.by_pairs
            return {(user_uuid, group_uuid): role for user_uuid, group_uuid, role
                    in self.reads.reader.select(statement, parameters(sorted(wanted)))
                    if (user_uuid, group_uuid) in wanted}
        users = sorted({u for u, _ in wanted})
        groups = sorted({g for _, g in wanted})
        found: dict[tuple[str, str], str] = {}
        for user_chunk in chunks(users):
            for group_chunk in chunks(groups):
                user_values, group_values = padded(user_chunk), padded(group_chunk)
                statement = self._statement(len(user_values), len(group_values))
                for user_uuid, group_uuid, role in self.reads.reader.select(
                        statement, (*user_values, *group_values)):
                    if (user_uuid, group_uuid) in wanted:
                        found[(user_uuid, group_uuid)] = role
        return found
