"""Group, member and role writes under ``/v1/private``."""

from __future__ import annotations

import fnmatch

from locky import audit
from locky.errors import Forbidden, Invalid
from locky.paging import every
from locky.records import Member, Permission, Role
from locky.routes import Operation, Route
from locky.schemas import (
    GroupRequestSchema,
    GroupSchema,
    GroupUpdateSchema,
    MemberRequestSchema,
    MemberSchema,
    RoleRequestSchema,
    RoleSchema,
    RoleUpdateSchema,
)

from .writes import audited, body, created, deleted, live, updated

GROUP, MEMBER, ROLE = GroupSchema(), MemberSchema(), RoleSchema()
BODY_ERRORS = (400, 401, 403, 413, 415, 503)
#: Roles held globally, never through a membership: every authenticated user holds
#: ``user``, and ``admin`` held in a group would match ``p, admin, *, *, *`` there.
GLOBAL_ROLES = frozenset({"admin", "user", "client"})


def membership(member) -> dict:
    """What a membership event tells: whose, where, as what."""
    return {"group_uuid": member.group_uuid, "user_uuid": member.user_uuid, "role": member.role}


def role_details(role) -> dict:
    return {"name": role.name, "permissions": [f"{p.resource}:{p.action}" for p in role.permissions]}


def assign(role: str) -> str:
    """The policy action that lets a caller add or remove a membership holding ``role``
    (docs/http/authorization.md#the-authorization-api, assignable roles)."""
    return f"assign:{role}"


class GroupWrites:
    """Create (any user; the creator becomes ``owner``), update, delete groups."""

    def __init__(self, context):
        self.context = context
        self.store = context.storage.groups

    def on_post(self, req, resp):
        self.context.require(req.context.identity, "groups", "create")
        data = body(self.context, req, GroupRequestSchema())
        group = audited(self.context, audit.GROUP_CREATED, "group",
                        lambda: self.store.create(**data, owner_uuid=req.context.identity.user.uuid),
                        lambda g: {"name": g.name, "owner_uuid": req.context.identity.user.uuid})
        created(resp, "groups", GROUP, group)

    def on_put_item(self, req, resp, id: int):
        group = live(self.store, id)
        self.context.require(req.context.identity, "groups", "update", group_uuid=group.uuid)
        data = body(self.context, req, GroupUpdateSchema())
        record = audited(self.context, audit.GROUP_UPDATED, "group", lambda: self.store.update(id, **data),
                         lambda g: {"name": g.name, "changed": sorted(data)})
        updated(resp, GROUP, record)

    def on_delete_item(self, req, resp, id: int):
        group = live(self.store, id)
        self.context.require(req.context.identity, "groups", "delete", group_uuid=group.uuid)
        audited(self.context, audit.GROUP_DELETED, "group", lambda: self.store.delete(id),
                lambda g: {"name": g.name})
        deleted(resp)


#: What a membership's role can do in Locky: the checks Locky makes in a group's scope
#: (a role held through a membership counts only there), besides ``members`` ×
#: ``assign:<role>`` for each role (see :func:`require_holding`). Every other check is
#: global, where no group role counts; any other resource is a client application's.
GROUP_ACTIONS = (("groups", "read"), ("groups", "update"), ("groups", "delete"),
                 ("members", "read"), ("members", "create"), ("members", "delete"))
#: Actions that a permission's ``write`` covers (the policy's ``g2`` lines).
WRITE = frozenset({"create", "update", "delete"})


def covers(pattern: str, action: str) -> bool:
    """Whether a permission's resource or action ``pattern`` (``*`` matches anything,
    as written in the policy) covers ``action``, ``write`` its kinds included."""
    return fnmatch.fnmatchcase(action, pattern) or (pattern == "write" and action in WRITE)


def require_holding(context, identity, role: Role, group_uuid: str) -> None:
    """Raise :class:`Forbidden` unless the caller holds, in the group, everything the
    role could do there in Locky: each of :data:`GROUP_ACTIONS`, and each role's
    ``members`` × ``assign:<role>``, that a permission of ``role`` covers. ``role`` is the
    stored record, whose permissions are those ``GET /v1/internal/roles`` lists (a custom
    role's own, a built-in role's policy lines). So a role is no
    way to hand out more power over the group than one holds (``owner``, a custom role
    with ``members`` × ``*`` or ``groups`` × ``delete``). Asked as the policy decides any
    request there, so an admin holds them all. A client application's permissions
    (``reports`` × ``read``) and global ones a group role cannot use stay the policy's
    ``assign:<role>`` to give."""
    permissions = role.permissions
    if not permissions:
        return
    roles = [r.name for r in every(context.storage.roles)]
    wanted = [*GROUP_ACTIONS, *(("members", assign(name)) for name in roles)]
    for permission in permissions:
        for resource, action in wanted:
            if not (covers(permission.resource, resource) and covers(permission.action, action)):
                continue
            if not context.allowed(identity, resource, action, group_uuid=group_uuid):
                raise Forbidden(f"The role {role.name} carries {permission.resource}:{permission.action}, which"
                                f" covers {resource}:{action}, and you do not hold that in this group: a role"
                                " may be given only by someone who holds all it could do there.")


def referenced_role(storage, *, group_uuid: str, user_uuid: str, role: str) -> Role:
    """The live role named ``role``, once the group and the user are found live too:
    else ``Invalid.missing`` for the first of ``group_uuid``, ``user_uuid``, ``role``
    that names no live record, as ``MemberStore.create`` raises it (one 400 and one
    message, whichever of the two finds it)."""
    if storage.groups.for_update(group_uuid) is None:  # held: see add_member
        raise Invalid.missing("group_uuid")
    if storage.users.get_by_uuid(user_uuid) is None:
        raise Invalid.missing("user_uuid")
    found = storage.roles.list(name=role, limit=1).items
    if not found:
        raise Invalid.missing("role")
    return found[0]


def add_member(context, identity, *, group_uuid: str, user_uuid: str, role: str) -> Member:
    """Add the user to the group with ``role`` for ``identity`` and record
    ``member.added``, deciding in the ``storage.atomic()`` block that writes both
    (docs/http/groups.md, Members):

    1. the group, the user and the role are live (:func:`referenced_role`): a 400
       whoever asks, before the policy is asked (a deleted group has no owner left to
       be allowed). The group's row is locked first (``GroupStore.for_update``), as a
       membership's removal locks it: the caller's own membership, which the policy
       reads next, cannot be removed between the decision and the insert;
    2. the policy: ``members`` × ``create`` and ``members`` × ``assign:<role>`` in the
       group, then every right the role could use there (:func:`require_holding`), else
       :class:`Forbidden` (403), which undoes the block: nothing is written;
    3. the insert: ``MemberStore.create`` checks the references again as it locks them
       (a delete committed meanwhile is ``Invalid.missing`` still) and refuses a second
       membership (``Conflict``, a 400 too).

    Storage takes no part in the decision: the store calls above are all it is asked.
    """
    own = user_uuid == identity.user.uuid
    with context.storage.atomic():
        found = referenced_role(context.storage, group_uuid=group_uuid, user_uuid=user_uuid, role=role)
        context.require(identity, "members", "create", group_uuid=group_uuid, own=own)
        context.require(identity, "members", assign(role), group_uuid=group_uuid, own=own)
        require_holding(context, identity, found, group_uuid)
        return audited(context, audit.MEMBER_ADDED, "member",
                       lambda: context.storage.members.create(group_uuid=group_uuid, user_uuid=user_uuid, role=role),
                       membership)


class MemberWrites:
    """Add and remove memberships: within the group's policy, or one's own (leave).

    Besides ``members`` × ``create``/``delete``, adding a membership with role R or
    removing one that holds R needs ``members`` × ``assign:R`` in the group: the policy
    says who may hand out which role (owners every one, maintainers not ``owner``).
    Adding one also needs every permission over Locky's records R carries, held by the
    caller in that group (:func:`require_holding`): so a maintainer gives no role that
    could do more than they may (``owner``, a custom role with ``members`` × ``*`` or
    ``groups`` × ``delete``).
    Leaving needs no such right; the group's last owner cannot leave (storage refuses).
    """

    def __init__(self, context):
        self.context = context
        self.store = context.storage.members

    def on_post(self, req, resp):
        data = body(self.context, req, MemberRequestSchema())
        if data["role"] == "client":
            raise Invalid.one("role", "Not a membership role: client is the role of every machine client.")
        if data["role"] in GLOBAL_ROLES:
            raise Invalid.one("role", "Not a membership role: admin and user are held globally.")
        record = add_member(self.context, req.context.identity, **data)
        created(resp, "members", MEMBER, record)

    def on_delete_item(self, req, resp, id: int):
        member = live(self.store, id)
        identity = req.context.identity
        own = member.user_uuid == identity.user.uuid
        self.context.require(identity, "members", "delete", group_uuid=member.group_uuid, own=own)
        if not own:  # leaving a group needs no right to hand out one's own role
            self.context.require(identity, "members", assign(member.role), group_uuid=member.group_uuid)
        audited(self.context, audit.MEMBER_REMOVED, "member", lambda: self.store.delete(id), membership)
        deleted(resp)


class RoleWrites:
    """Create, update, delete custom roles; built-in ones are read-only."""

    def __init__(self, context):
        self.context = context
        self.store = context.storage.roles

    @staticmethod
    def _permissions(data: dict) -> dict:
        if data.get("permissions") is not None:
            data["permissions"] = [Permission(p["resource"], p["action"]) for p in data["permissions"]]
        return data

    def on_post(self, req, resp):
        self.context.require(req.context.identity, "roles", "create")
        data = self._permissions(body(self.context, req, RoleRequestSchema()))
        record = audited(self.context, audit.ROLE_CREATED, "role", lambda: self.store.create(**data), role_details)
        created(resp, "roles", ROLE, record)

    def on_put_item(self, req, resp, id: int):
        live(self.store, id)
        self.context.require(req.context.identity, "roles", "update")
        data = self._permissions(body(self.context, req, RoleUpdateSchema()))
        record = audited(self.context, audit.ROLE_UPDATED, "role", lambda: self.store.update(id, **data),
                         lambda r: {**role_details(r), "changed": sorted(data)})
        updated(resp, ROLE, record)

    def on_delete_item(self, req, resp, id: int):
        live(self.store, id)
        self.context.require(req.context.identity, "roles", "delete")
        audited(self.context, audit.ROLE_DELETED, "role", lambda: self.store.delete(id), role_details)
        deleted(resp)


def routes(context) -> list[Route]:
    groups, members, roles = GroupWrites(context), MemberWrites(context), RoleWrites(context)
    item_errors = (400, 401, 403, 404, 413, 415, 503)
    delete_errors = (401, 403, 404, 503)
    return [
        Route("/v1/private/groups", groups, (
            Operation("post", "Create a group; the caller becomes its owner", "groups", status=201,
                      body="GroupRequest", response="Group", errors=BODY_ERRORS,
                      headers={"Location": "The new group's URL."}),
        )),
        Route("/v1/private/groups/{id:id}", groups, (
            Operation("put", "Update a group (owner, maintainer, admin)", "groups", body="GroupUpdateRequest",
                      response="Group", errors=item_errors),
            Operation("delete", "Delete a group (soft) and its memberships (owner, admin)", "groups",
                      status=204, errors=delete_errors),
        ), suffix="item"),
        Route("/v1/private/members", members, (
            Operation("post", "Add a member to a group (owner, maintainer, admin)", "members", status=201,
                      body="MemberRequest", response="Member", errors=BODY_ERRORS,
                      headers={"Location": "The new membership's URL."},
                      description="Needs members:assign:<role> in the group too (owners: every role;"
                                  " maintainers: maintainer, member, viewer and custom roles), and the caller"
                                  " must hold, in that group, all the role could do there in Locky: each of"
                                  " groups read/update/delete, members read/create/delete and"
                                  " members:assign:<role> that a permission of the role covers (as GET"
                                  " /v1/internal/roles lists them; * matches anything, write covers create,"
                                  " update and delete): otherwise 403. So a maintainer never makes an owner,"
                                  " nor gives a custom role with members:* or groups:delete; a client"
                                  " application's permissions (reports:read) are given as assign:<role>"
                                  " says; admins give every role. admin and user are no membership roles"
                                  " (400)."),
        )),
        Route("/v1/private/members/{id:id}", members, (
            Operation("delete", "Remove a member (owner, maintainer, admin) or leave a group", "members",
                      status=204, errors=(400, *delete_errors),
                      description="Removing a member needs members:assign:<their role> in the group;"
                                  " leaving does not. A group's last owner cannot leave (400)."),
        ), suffix="item"),
        Route("/v1/private/roles", roles, (
            Operation("post", "Create a custom role (admin)", "roles", status=201, body="RoleRequest",
                      response="Role", errors=BODY_ERRORS, headers={"Location": "The new role's URL."}),
        )),
        Route("/v1/private/roles/{id:id}", roles, (
            Operation("put", "Update a custom role (admin)", "roles", body="RoleUpdateRequest",
                      response="Role", errors=item_errors),
            Operation("delete", "Delete a custom role no live membership holds (admin)", "roles",
                      status=204, errors=(400, *delete_errors)),
        ), suffix="item"),
    ]
