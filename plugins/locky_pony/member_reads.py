"""Memberships read many at once: :meth:`MemberStore.roles_in`, the roles of a batch of
(user, group) pairs in one SELECT.

An authorizer asked a batch of checks (``POST /v1/internal/authz/check``, up to 100:
docs/http/authorization.md) reads here, once, the memberships every group-scoped check of the
batch needs, instead of one ``role_of`` round trip per check.

The statement selects the live memberships whose user is one of the batch's users and
whose group is one of its groups, from the ``(user_uuid, del_token, group_uuid, role)``
index alone (schema step 11): each user's live rows are one range of it, and their group
is compared there. SQLite and MariaDB are told not to use the group for the index's
ranges (``+group_uuid``, ``CONCAT(group_uuid)``: the same value, but no column to seek
on). With 128 of each list, SQLite probed the index once per (user, group), 16,384
probes, 6x slower than the ranges; MariaDB, finding that too many ranges, fell back to
the ``(user_uuid, del_token, id)`` index and read each row from the table, 3x slower.
The pairs asked for are then picked out. Its ``IN`` lists are padded to a power of two
(:func:`.reads.padded`).
"""

from __future__ import annotations

from typing import Iterable

from . import stores
from .reads import chunks, column, in_list, padded, selected


class MemberStore(stores.MemberStore):
    """The bundled member store, with the batch read of roles."""

    def __init__(self, entities, reader):
        super().__init__(entities, reader)
        self._by_size: dict[tuple[int, int], object] = {}

    def _statement(self, users: int, groups: int):
        """The SELECT for ``users`` user uuids and ``groups`` group uuids (built once each)."""
        found = self._by_size.get((users, groups))
        if found is None:
            reads = self.reads
            reader, provider, entity = reads.reader, reads.provider, reads.entity
            user_col, group_col = column(provider, entity, "user_uuid"), column(provider, entity, "group_uuid")
            # Every row in one JSON value on MySQL/MariaDB (.reader): PyMySQL reads each
            # row in Python, a few hundred rows a batch.
            columns = ", ".join(selected(reader, entity, name, column(provider, entity, name))
                                for name in ("user_uuid", "group_uuid", "role"))
            # Compare the group on each row of a user's range (see the docstring).
            group_term = {"SQLite": f"+{group_col}", "MySQL": f"CONCAT({group_col})"}.get(reader.dialect, group_col)
            found = self._by_size[(users, groups)] = reader.many_rows(
                columns, f"SELECT {{}} FROM {reads.columns.table}"
                f" WHERE {in_list(user_col, users)} AND {reads.live} AND {in_list(group_term, groups)}")
        return found

    def roles_in(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        wanted = {(u, g) for u, g in pairs if isinstance(u, str) and isinstance(g, str)}
        if not wanted:
            return {}
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
