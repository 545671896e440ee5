"""Locky's bundled authorizer ``casbin``: decisions from the policy files and stored roles.

Who holds what is data (memberships, grants, ``LOCKY_ADMIN_EMAILS``); what each role
may do is policy (``model.conf`` + ``policy.csv`` + custom roles stored through the
API). A check enforces the Casbin model once per subject the caller holds, against
only the policy lines of that subject's roles, so its cost does not grow with the
number of lines or memberships.

Custom roles are also assignable as a class: for each one the snapshot holds
``g2, assign:<role>, assign:custom`` (see :data:`ASSIGN_CUSTOM`), so a policy line on
``assign:custom`` lets its holders add and remove members with any custom role, and
only with those: a built-in role's ``assign:`` action links to nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import casbin

from locky.plugins import hookimpl
from locky.providers import BuiltinRole
from locky.records import Permission, User

from . import policy_files

CACHE_SIZE = 4096
#: The action that stands for "assign any custom role" (``members``, ``assign:<role>``).
ASSIGN_CUSTOM = "assign:custom"
#: Roles held globally and never through a membership (the API refuses them as
#: membership roles); one stored before that rule grants nothing within its group.
GLOBAL_ROLES = frozenset({"admin", "user"})


class _PolicySnapshot:
    """One loaded policy: a Casbin enforcer plus an index of its ``p`` lines by subject."""

    def __init__(self, files: policy_files.PolicyFiles, custom: dict[str, tuple[Permission, ...]]):
        model = casbin.Model()
        model.load_model_from_text(files.model_text)
        self.enforcer = casbin.Enforcer(model)
        self.enforcer.enable_auto_build_role_links(False)
        rows = list(files.rows)
        for role, permissions in custom.items():
            rows.extend(["p", role, "*", p.resource, p.action] for p in permissions)
            if f"assign:{role}" != ASSIGN_CUSTOM:
                rows.append(["g2", f"assign:{role}", ASSIGN_CUSTOM])
        # Appended directly: ``model.add_policy`` checks for duplicates with a list
        # scan, which makes loading 10,000 lines quadratic (seconds per reload).
        seen: set[tuple[str, ...]] = set()
        for row in rows:
            ptype, rule = row[0], list(row[1:])
            if (ptype, *rule) in seen:
                continue
            seen.add((ptype, *rule))
            assertion = self.enforcer.model[ptype[0]][ptype]
            if assertion.priority_index >= 0:  # a model with priorities keeps lines sorted
                self.enforcer.model.add_policy(ptype[0], ptype, rule)
                continue
            assertion.policy_map[",".join(rule)] = len(assertion.policy)
            assertion.policy.append(rule)
        self.enforcer.build_role_links()
        self.all_p = self.enforcer.model["p"]["p"].policy
        self.index: dict[str, list[list[str]]] = {}
        for line in self.all_p:
            self.index.setdefault(line[0], []).append(line)
        self.closures: dict[str, tuple[str, ...]] = {}
        self.decisions: OrderedDict = OrderedDict()

    def closure(self, subject: str) -> tuple[str, ...]:
        """The subject and every role it inherits through ``g`` lines."""
        found = self.closures.get(subject)
        if found is None:
            found = (subject, *self.enforcer.get_implicit_roles_for_user(subject))
            if len(self.closures) > 65536:
                self.closures.clear()
            self.closures[subject] = found
        return found

    def enforce(self, subject: str, dom: str, obj: str, act: str) -> bool:
        lines = [line for role in self.closure(subject) for line in self.index.get(role, ())]
        if not lines:
            return False
        assertion = self.enforcer.model["p"]["p"]
        assertion.policy = lines  # evaluate the matcher over this subject's lines only
        try:
            return self.enforcer.enforce(subject, dom, obj, act)
        finally:
            assertion.policy = self.all_p


class CasbinAuthorizer:
    """The ``casbin`` authorizer. Reloads when storage's policy revision moves."""

    def __init__(self, context):
        self.storage = context.storage
        self.files = policy_files.load(context.settings.policy_dir)
        self.admin_emails = frozenset(e.strip().lower() for e in context.settings.admin_emails)
        self._lock = threading.Lock()
        self._revision = None
        self._snapshot = _PolicySnapshot(self.files, {})
        self._grants: dict[str, frozenset[str]] = {}

    # -- loading -------------------------------------------------------------

    def _current(self, revision: int | None) -> _PolicySnapshot:
        # The revision read with the caller's session at authentication, when the
        # request carries one (one query for both); storage is asked otherwise.
        if revision is None:
            revision = self.storage.revision()
        if revision != self._revision:
            with self._lock:
                if revision != self._revision:
                    self._snapshot = _PolicySnapshot(self.files, self.storage.roles.custom_permissions())
                    self._grants = {}
                    self._revision = revision
        return self._snapshot

    def builtin_roles(self) -> list[BuiltinRole]:
        names: dict[str, None] = {}
        permissions: dict[str, list[Permission]] = {}
        for row in self.files.rows:
            kind, subject = row[0], row[1]
            if kind == "p":
                names.setdefault(subject)
                if row[2] == "*":
                    permissions.setdefault(subject, []).append(Permission(row[3], row[4]))
            elif kind == "g":
                names.setdefault(subject)
                names.setdefault(row[2])
        return [
            BuiltinRole(
                name=name,
                description=self.files.descriptions.get(name, "Built-in role from the policy files."),
                permissions=tuple(dict.fromkeys(permissions.get(name, ()))),
            )
            for name in names
            if policy_files.ROLE_NAME.match(name) and not policy_files.USER_UUID.match(name)
        ]

    # -- deciding ------------------------------------------------------------

    def subjects(self, snapshot: _PolicySnapshot, user: User, group_uuid: str | None) -> list[str]:
        """Every subject the user acts as in this context."""
        subjects = ["user", user.uuid, user.email]
        if user.email in self.admin_emails:
            subjects.append("admin")
        grants = self._grants.get(user.uuid)
        if grants is None:
            grants = self.storage.grants.roles_of(user.uuid)
            if len(self._grants) > 65536:
                self._grants = {}
            self._grants[user.uuid] = grants
        subjects.extend(grants)
        if group_uuid is not None:
            role = self.storage.members.role_of(user.uuid, group_uuid)
            if role is not None and role not in GLOBAL_ROLES:
                subjects.append(role)
        return subjects

    def is_allowed(self, user: User, resource: str, action: str, *, group_uuid=None, own=False,
                   policy_revision: int | None = None) -> bool:
        snapshot = self._current(policy_revision)
        dom = "self" if own else "*"
        subjects = self.subjects(snapshot, user, group_uuid)
        # Subjects with no lines of their own (most users' uuid and email) are dropped
        # before the cache key is made, so the cache is shared across users.
        active = tuple(sorted({s for s in subjects if len(snapshot.closure(s)) > 1 or s in snapshot.index}))
        key = (active, dom, resource, action)
        with self._lock:
            cached = snapshot.decisions.get(key)
            if cached is not None:
                snapshot.decisions.move_to_end(key)
                return cached
            decision = any(snapshot.enforce(s, dom, resource, action) for s in active)
            snapshot.decisions[key] = decision
            if len(snapshot.decisions) > CACHE_SIZE:
                snapshot.decisions.popitem(last=False)
            return decision


@hookimpl
def locky_register_authorizers(registry):
    registry.add("casbin", CasbinAuthorizer)
