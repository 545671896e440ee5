"""Reading many records at once: one storage read for a whole page or batch, through the
store methods made for it (``get_many_by_uuid``, ``MemberStore.of_users`` and
``of_groups``), and record by record from a storage written before them."""

from __future__ import annotations

from typing import Any, Iterable

from locky.paging import every
from locky.records import Member


def by_uuid(store, uuids: Iterable[str]) -> dict[str, Any]:
    """The live records of ``store`` (users or groups) with these uuids, by uuid:
    ``store.get_many_by_uuid`` when it has it, else ``get_by_uuid`` one by one."""
    many = getattr(store, "get_many_by_uuid", None)
    if many is not None:
        return many(uuids)
    return {uuid: record for uuid in dict.fromkeys(uuids) if (record := store.get_by_uuid(uuid)) is not None}


def memberships_of_users(members, user_uuids: Iterable[str]) -> list[Member]:
    """The live memberships of these users, oldest first: ``members.of_users`` when the
    store has it, else its list walked user by user."""
    return _memberships(members, "of_users", "user_uuid", user_uuids)


def memberships_in_groups(members, group_uuids: Iterable[str]) -> list[Member]:
    """The live memberships in these groups, oldest first: ``members.of_groups`` when the
    store has it, else its list walked group by group."""
    return _memberships(members, "of_groups", "group_uuid", group_uuids)


def _memberships(members, method: str, field: str, uuids: Iterable[str]) -> list[Member]:
    many = getattr(members, method, None)
    if many is not None:
        return many(uuids)
    found = [m for uuid in dict.fromkeys(uuids) if isinstance(uuid, str) for m in every(members, **{field: uuid})]
    return sorted(found, key=lambda m: m.id)
