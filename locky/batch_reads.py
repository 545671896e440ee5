"""Reading many records at once: one storage read for a whole page or batch, through the
store methods made for it (``get_many_by_uuid``, ``MemberStore.of_users`` and
``of_groups``, the stores' ``holders_by_id``), and record by record from a storage
written before them."""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator

from locky.paging import every
from locky.providers import HolderSources
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


def holder_batches(storage, sources: HolderSources, after_id: int, size: int) -> Iterator[list[tuple[int, str]]]:
    """The users ``sources`` names whose id is above ``after_id``, as ``(user id, uuid)`` in
    id order, each once (deleted users among them), ``size`` at a time: each batch reads
    the next ``size`` of each source. A store's ``holders_by_id`` reads its part a batch
    at a time; a storage without it, and the users named one by one, are read whole
    once (:meth:`HolderSources.granted`, :meth:`HolderSources.members`, the users'
    records)."""
    parts = list(_holder_parts(storage, sources, after_id))
    while True:
        batch = sorted({pair for read in parts for pair in read(after_id, size)})[:size]
        if batch:
            yield batch
        if len(batch) < size:  # every part had fewer left
            return
        after_id = batch[-1][0]


def _holder_parts(storage, sources: HolderSources, after_id: int) -> Iterator[Callable[[int, int], list]]:
    """A read ``(after_id, size) -> [(user id, uuid), ...]`` for each part of ``sources``."""
    if sources.roles:
        paged = getattr(storage.grants, "holders_by_id", None)
        yield partial(paged, sources.roles) if paged is not None else _read_whole(
            storage.users, sources.granted(storage), after_id)
    if sources.group_uuid is not None and sources.group_roles:
        paged = getattr(storage.members, "holders_by_id", None)
        yield partial(paged, sources.group_uuid, sources.group_roles) if paged is not None else _read_whole(
            storage.users, sources.members(storage), after_id)
    if sources.user_uuids:
        yield _read_whole(storage.users, sources.user_uuids, after_id)


def _read_whole(users, uuids: Iterable[str], after_id: int) -> Callable[[int, int], list]:
    """The live users of ``uuids`` past ``after_id``, read once and put in id order, as a
    part of :func:`holder_batches`."""
    pairs = sorted((user.id, user.uuid) for user in by_uuid(users, uuids).values() if user.id > after_id)

    def read(after: int, size: int) -> list[tuple[int, str]]:
        start = bisect_right(pairs, after, key=itemgetter(0))
        return pairs[start:start + size]
    return read
