"""Inserting a row, and the record a write returns built from the values it wrote.

Pony leaves a column it inserted as NULL (``deleted_at``, an audit event's
``actor_uuid``) unloaded, in case the database gave it a default, and reads the whole row
back with a SELECT the first time it is asked for one: every create of a user, group,
role, membership, audit event and webhook delivery paid that SELECT for values it had
just written. :func:`insert` flushes the row (its id assigned, a broken unique key
raised there) and returns :class:`Written`, which the record builders read like the
row: a column written NULL (or left to its NULL default) answers ``None``; every
other column answers the value Pony holds for it, as validated and converted on the
way in, with no statement. Locky's tables declare no database default, so NULL
written is NULL stored.
"""

from __future__ import annotations

from typing import Any

from . import compat


class Written:
    """An inserted row as the record builders read it: ``.name`` for each column, and
    the entity row itself as ``.row`` (no table of Locky's has a column so named), for
    a relation to it."""

    __slots__ = ("row", "_nulls")

    def __init__(self, row, nulls: frozenset[str]):
        self.row = row
        self._nulls = nulls

    def __getattr__(self, name: str) -> Any:
        if name in self._nulls:
            return None
        return getattr(self.row, name)


def insert(entity, **values: Any) -> Written:
    """Insert a row of ``entity`` with ``values`` (the others take their declared
    defaults) and return it as :class:`Written`."""
    row = entity(**values)
    row.flush()
    defaults = compat.column_defaults(entity)
    return Written(row, frozenset(name for name, default in defaults.items() if values.get(name, default) is None))
