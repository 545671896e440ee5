"""SCIM writes of groups and their members, as ``/v1``'s group and member writes make
them (docs/http/scim.md): the same store calls and events (``group.created``,
``group.updated``, ``group.deleted``, ``member.added``, ``member.removed``) with
``details.via = "scim"``.

A group made through SCIM has no owner (``GroupStore.create(owner_uuid=None)``): the
provisioning system manages it. Its ``members`` are memberships: a new one gets the
role ``member``; a member left out (PUT) or removed (PATCH) loses their membership
whatever its role, except a group's last ``owner`` (a group made through ``/v1``),
which storage keeps (400 ``invalidValue``). A member who is no live user is a 400 and
nothing of the request is kept (one transaction).
"""

from __future__ import annotations

from locky import audit
from locky.http.media import load
from locky.records import Group
from locky.resources.groups import membership
from locky.schemas import GroupRequestSchema, GroupUpdateSchema

from locky.errors import Invalid

from . import external_ids
from .uuids import record_uuid

VIA = "scim"
ROLE = "member"


def _details(record, **more) -> dict:
    return {**more, "via": VIA}


def _add_member(context, group_uuid: str, user_uuid: str) -> None:
    if record_uuid(user_uuid) is None:
        raise Invalid.missing("user_uuid")
    member = context.storage.members.create(group_uuid=group_uuid, user_uuid=record_uuid(user_uuid), role=ROLE)
    context.audit.record(audit.MEMBER_ADDED, target_type="member", target_uuid=member.uuid,
                         details={**membership(member), "via": VIA}, record=member)


def _remove_member(context, member) -> None:
    removed = context.storage.members.delete(member.id)
    context.audit.record(audit.MEMBER_REMOVED, target_type="member", target_uuid=removed.uuid,
                         details={**membership(removed), "via": VIA}, record=removed)


def create(context, *, name: str, external_id: str | None, member_uuids: list[str]) -> Group:
    data = load(GroupRequestSchema(), {"name": name})
    storage = context.storage
    with storage.atomic():
        group = storage.groups.create(name=data["name"], description=data["description"], owner_uuid=None,
                                      external_id=external_ids.checked(external_id))
        context.audit.record(audit.GROUP_CREATED, target_type="group", target_uuid=group.uuid,
                             details={"name": group.name, "owner_uuid": None, "via": VIA}, record=group)
        for user_uuid in dict.fromkeys(member_uuids):
            _add_member(context, group.uuid, user_uuid)
    return group


def update(context, group: Group, *, name: str | None, external_id: str | None, add: list[str],
           remove: list[str]) -> Group:
    """Change what differs: ``name`` (``None``: as it is), ``external_id`` (``None``
    clears it); make the users of ``add`` members and end the memberships of the users
    of ``remove``. The members are changes, not a list to reach: two provisioning
    requests adding different members at once both keep theirs. A user of ``add``
    already a member, or of ``remove`` no longer one, is left as they are."""
    changes: dict = {}
    if name is not None and name != group.name:
        changes.update(load(GroupUpdateSchema(), {"name": name}))
    if external_ids.checked(external_id) != getattr(group, "external_id", None):
        changes["external_id"] = external_id or ""
    storage = context.storage
    with storage.atomic():
        if changes:
            group = storage.groups.update(group.id, **changes)
            context.audit.record(audit.GROUP_UPDATED, target_type="group", target_uuid=group.uuid,
                                 details={"name": group.name, "changed": sorted(changes), "via": VIA},
                                 record=group)
        for user_uuid in dict.fromkeys(filter(None, map(record_uuid, remove))):
            for member in storage.members.list(group_uuid=group.uuid, user_uuid=user_uuid, limit=1).items:
                _remove_member(context, member)
        for user_uuid in dict.fromkeys(add):
            if record_uuid(user_uuid) is None or not storage.members.list(
                    group_uuid=group.uuid, user_uuid=record_uuid(user_uuid), limit=1).items:
                _add_member(context, group.uuid, user_uuid)
    return group


def delete(context, group: Group) -> Group:
    storage = context.storage
    with storage.atomic():
        deleted = storage.groups.delete(group.id)
        context.audit.record(audit.GROUP_DELETED, target_type="group", target_uuid=deleted.uuid,
                             details={"name": deleted.name, "via": VIA}, record=deleted)
    return deleted
