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

from locky.paging import every
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


def user_groups(context, user: User) -> list[dict]:
    """The user's groups as the readOnly ``groups`` attribute shows them."""
    found = []
    for member in every(context.storage.members, user_uuid=user.uuid):
        group = context.storage.groups.get_by_uuid(member.group_uuid)
        if group is not None:
            found.append({"value": group.uuid, "$ref": f"Groups/{group.uuid}", "display": group.name})
        if len(found) >= MAX_MEMBERS:
            break
    return found


def user_resource(context, user: User, *, with_groups: bool = True) -> Resource:
    """``user`` as a SCIM ``User``."""
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
    if with_groups:
        groups = user_groups(context, user)
        if groups:
            data["groups"] = groups
    return model.model_validate(data)


def group_members(context, group: Group) -> list:
    """The group's live memberships, oldest first (at most :data:`MAX_MEMBERS`)."""
    found = []
    for member in every(context.storage.members, group_uuid=group.uuid):
        found.append(member)
        if len(found) >= MAX_MEMBERS:
            break
    return found


def group_resource(context, group: Group, members: list | None = None) -> Resource:
    """``group`` as a SCIM ``Group``; ``members`` are its memberships when already read."""
    model = provider().model_for("Group")
    members = group_members(context, group) if members is None else members
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
