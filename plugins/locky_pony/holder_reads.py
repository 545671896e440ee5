"""Pages of the users who hold roles, by user id: ``GrantStore.holders_by_id`` and
``MemberStore.holders_by_id``.

``GET /v1/internal/authz/subjects`` lists the users who may do something, by id, a page
at a time (docs/http/authorization.md). It reads each page's candidates here: the holders
of the roles that allow it, past the page's cursor. Each role is one range of an index
that ends in the user's id (schema step 13): ``(role, user_id, user_uuid)`` of the
grants, ``(group_uuid, del_token, role, user, user_uuid)`` of the memberships. A page
reads the start of each range and stops, whether a role has ten holders or every user.

The statement asks for every role at once (up to 128; more take one statement per 128),
each range ordered and cut at the page's size in its own subquery, joined with ``UNION
ALL``; the few rows are merged here. One ``role IN (...)`` ordered by the user would be
answered by reading every holder of every role and sorting them: the whole grants
table, on every page, for a role given to everybody.
"""

from __future__ import annotations

from typing import Iterable

from .reader import Reader, Statement
from .reads import chunks, padded


class HolderPages:
    """The paged read of one table's holders: ``table`` (quoted), its user id and uuid
    columns, and ``where``, the conditions of a row of one role (written with ``{}`` for
    each of ``fixed`` parameters, the role's last)."""

    def __init__(self, reader: Reader, table: str, user_id: str, user_uuid: str, where: str):
        self.reader = reader
        self.range = (f"SELECT {user_id} AS holder_id, {user_uuid} AS holder_uuid FROM {table}"
                      f" WHERE {where} AND {user_id} > {{}} ORDER BY {user_id} LIMIT {{}}")
        # One statement per number of roles (a power of two), built on first use; two
        # threads building one at once build the same statement.
        self._by_count: dict[int, Statement] = {}

    def _statement(self, roles: int) -> Statement:
        found = self._by_count.get(roles)
        if found is None:
            ranges = " UNION ALL ".join(f"SELECT holder_id, holder_uuid FROM ({self.range}) r{i}"
                                        for i in range(roles))
            found = self._by_count[roles] = self.reader.statement(ranges)
        return found

    def read(self, fixed: tuple, roles: Iterable[str], after_id: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` ``(user id, uuid)`` of rows of any of ``roles`` (with the
        parameters ``fixed`` before each role) whose user id is above ``after_id``, by
        id, each user once."""
        wanted = sorted({role for role in roles if isinstance(role, str)})
        if not wanted or limit < 1:
            return []
        found: set[tuple[int, str]] = set()
        for chunk in chunks(wanted):  # SQLite takes at most 500 terms of a UNION ALL
            asked = padded(chunk)  # a few statement texts for every number of roles
            params = tuple(value for role in asked for value in (*fixed, role, after_id, limit))
            found.update((int(holder_id), holder_uuid)
                         for holder_id, holder_uuid in self.reader.select(self._statement(len(asked)), params))
        return sorted(found)[:limit]
