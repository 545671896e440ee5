"""Locky records as SCIM resources (RFC 7643), read side: a user and its memberships
become a ``User``, a group and its memberships a ``Group``.

The storage of :mod:`locky.scim.storage` returns these; the server
(``scim2-server``) fills ``meta.location`` and turns the relative references
(``Users/<uuid>``) into URLs of the request's base (or ``LOCKY_PUBLIC_URL``).
``id`` is the record's uuid. ``meta.version`` is a weak ETag of what the resource
shows: a user's ``updated_at``; a group's ``updated_at`` and its members (a membership
added or removed does not touch the group's row, but changes the resource).
"""

from __future__ import annotations

import hashlib
from datetime import timezone
from typing import Any

from scim2_models import Resource

from locky.batch_reads import by_uuid, memberships_in_groups, memberships_of_users
from locky.records import Group, User

from .discovery import provider

#: The most members one group shows (and SCIM can manage): a group past it is read
#: with its first members only, which a client sees as a truncated list.
MAX_MEMBERS = 10_000


def _aware(moment):
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def weak_etag(*parts: Any) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:20]
    return f'W/"{digest}"'


def _meta(resource_type: str, record, version: str) -> dict:
    return {"resourceType": resource_type, "created": _aware(record.created_at),
            "lastModified": _aware(record.updated_at), "version": version}


def groups_of_users(context, users: list[User]) -> dict[str, list[dict]]:
    """Each user's readOnly ``groups`` attribute, by uuid (at most :data:`MAX_MEMBERS`
    each): the memberships of all of them in one read, and their groups in one more."""
    found: dict[str, list[dict]] = {user.uuid: [] for user in users}
    memberships = memberships_of_users(context.storage.members, list(found))
    groups = by_uuid(context.storage.groups, list(dict.fromkeys(m.group_uuid for m in memberships)))
    for member in memberships:
        shown, group = found.get(member.user_uuid), groups.get(member.group_uuid)
        if shown is not None and group is not None and len(shown) < MAX_MEMBERS:
            shown.append({"value": group.uuid, "$ref": f"Groups/{group.uuid}", "display": group.name})
    return found


def user_resource(context, user: User, groups: list[dict] | None = None) -> Resource:
    """``user`` as a SCIM ``User``; ``groups`` is its ``groups`` attribute when already
    read (:func:`groups_of_users`; ``[]``: shown without), else it is read here."""
    model = provider().model_for("User")
    data: dict[str, Any] = {
        "schemas": [model.__schema__ if isinstance(model.__schema__, str) else str(model.__schema__)],
        "id": user.uuid,
        "externalId": getattr(user, "external_id", None),
        "userName": user.email,
        "name": {"formatted": user.name},
        "displayName": user.name,
        "active": not user.disabled,
        "emails": [{"value": user.email, "primary": True}],
        "meta": _meta("User", user, weak_etag(user.uuid, user.updated_at.isoformat())),
    }
    if groups is None:
        groups = groups_of_users(context, [user])[user.uuid]
    if groups:
        data["groups"] = groups
    return model.model_validate(data)


def members_of_groups(context, groups: list[Group]) -> dict[str, list]:
    """Each group's live memberships, oldest first (at most :data:`MAX_MEMBERS` each), by
    uuid: those of all of them in one read."""
    found: dict[str, list] = {group.uuid: [] for group in groups}
    for member in memberships_in_groups(context.storage.members, list(found)):
        shown = found.get(member.group_uuid)
        if shown is not None and len(shown) < MAX_MEMBERS:
            shown.append(member)
    return found


def group_resource(context, group: Group, members: list | None = None) -> Resource:
    """``group`` as a SCIM ``Group``; ``members`` are its memberships when already read."""
    model = provider().model_for("Group")
    members = members_of_groups(context, [group])[group.uuid] if members is None else members
    data: dict[str, Any] = {
        "schemas": [str(model.__schema__)],
        "id": group.uuid,
        "externalId": getattr(group, "external_id", None),
        "displayName": group.name,
        "meta": _meta("Group", group, weak_etag(group.uuid, group.updated_at.isoformat(),
                                                *sorted(m.user_uuid for m in members))),
    }
    if members:
        data["members"] = [{"value": m.user_uuid, "$ref": f"Users/{m.user_uuid}", "type": "User"}
                           for m in members]
    return model.model_validate(data)


def resources(context, kind: str, records: list) -> list[Resource]:
    """``records`` of ``kind`` (``User`` or ``Group``) as whole SCIM resources, in order:
    the memberships of all of them (a user's groups, a group's members) read at once."""
    if kind == "User":
        groups = groups_of_users(context, records)
        return [user_resource(context, r, groups[r.uuid]) for r in records]
    members = members_of_groups(context, records)
    return [group_resource(context, r, members[r.uuid]) for r in records]
