"""Locky's bundled authorizer ``casbin``: decisions from the policy files and stored roles.

Who holds what is data (memberships, grants, ``LOCKY_ADMIN_EMAILS``); what each role
may do is policy (``model.conf`` + ``policy.csv`` + custom roles stored through the
API). A check enforces the Casbin model once per subject the caller holds, against
only the policy lines of that subject's roles, so its cost does not grow with the
number of lines or memberships.

A machine client (a ``client_credentials`` token's caller, ``user.uuid`` =
``client:<client_id>``: :func:`locky.is_client_subject`) holds the built-in role
``client`` instead of ``user``, its own subject (``g, client:<client_id>, ROLE`` lines)
and its global grants (``locky grant-role client:<client_id> ROLE``); no email, no
membership.

Custom roles are also assignable as a class: for each one the snapshot holds
``g2, assign:<role>, assign:custom`` (see :data:`ASSIGN_CUSTOM`), so a policy line on
``assign:custom`` lets its holders add and remove members with any custom role, and
only with those: a built-in role's ``assign:`` action links to nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterable, Iterator

import casbin

from locky import BuiltinRole, HolderSources, Permission, User, hookimpl, is_client_subject
from locky.storage import REVISION, Watcher

from . import matcher, policy_files

#: Decisions kept per policy snapshot, least recently asked dropped first. Questions
#: asked in turn that outnumber the cache never find it warm (each is dropped before it
#: comes again), so it holds the questions a service of a hundred roles asks over and
#: over (docs/benchmarks.md's decision API: 6,000): about 350 bytes each, 6 MB when full.
CACHE_SIZE = 16384
#: The action that stands for "assign any custom role" (``members``, ``assign:<role>``).
ASSIGN_CUSTOM = "assign:custom"
#: Roles held globally and never through a membership (the API refuses them as
#: membership roles); one stored before that rule grants nothing within its group.
GLOBAL_ROLES = frozenset({"admin", "user", "client"})
#: The role every authenticated user holds, and the one every machine client holds.
USER_ROLE, CLIENT_ROLE = "user", "client"
#: What this authorizer keeps of stored values (the custom roles' permissions and the
#: users' global grants, in each :class:`_PolicySnapshot`), and what makes it stale:
#: the writes that move the policy revision (``locky.cache.declared.STORES``).
POLICY_CACHE = Watcher(
    "casbin policy snapshot and global grants", frozenset({REVISION}),
    "Storage.revision, read with every request's session: a new number loads a new snapshot",
)


@dataclass(frozen=True)
class _Memberships:
    """The memberships a batch of decisions read at once (:meth:`CasbinAuthorizer.batch`):
    the roles found for the pairs ``asked`` (a pair asked and not found holds none), for
    the authorizer ``owner`` only."""

    owner: object
    asked: frozenset[tuple[str, str]]
    roles: dict[tuple[str, str], str]


#: The memberships of the batch being decided in this context (this request), if any.
_BATCH: ContextVar[_Memberships | None] = ContextVar("locky_casbin_batch", default=None)


class _PolicySnapshot:
    """One loaded policy: a Casbin enforcer plus an index of its ``p`` lines by subject,
    and everything cached for it (decisions, closures, the users' global grants). A
    reload makes a new snapshot, so nothing read for an older policy reaches a newer one."""

    def __init__(self, files: policy_files.PolicyFiles, custom: dict[str, tuple[Permission, ...]],
                 revision: int | None = None):
        #: Storage's policy revision this snapshot was loaded for (``None``: before any read).
        self.revision = revision
        #: Global grants (``storage.grants.roles_of``) by user uuid, each read after this
        #: snapshot was made: a read from before a revoke can only land in the snapshot
        #: it was read for, which requests past the revoke's revision no longer use.
        self.grants: dict[str, frozenset[str]] = {}
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
        #: Locky's own model is decided line by line in Python (:mod:`.matcher`); any
        #: other model by Casbin's evaluation of its matcher.
        self.rule = matcher.line_rule(self.enforcer)
        self.all_p = self.enforcer.model["p"]["p"].policy
        self.index: dict[str, list[list[str]]] = {}
        #: The same lines by subject, then by resource (``*`` included as written).
        self.by_object: dict[str, dict[str, list[list[str]]]] = {}
        for line in self.all_p:
            self.index.setdefault(line[0], []).append(line)
            self.by_object.setdefault(line[0], {}).setdefault(line[2], []).append(line)
        self.closures: dict[str, tuple[str, ...]] = {}
        self.acting: dict[str, bool] = {}
        #: The subjects a user holds everywhere that can change a decision, sorted, by
        #: the user's uuid and verified email (:meth:`CasbinAuthorizer._acting_globally`).
        self.acting_globally: dict[tuple[str, str | None], tuple[str, ...]] = {}
        self.inherited: dict[str, list[str]] = {}
        self.allowing_cache: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {}
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

    def acts(self, subject: str) -> bool:
        """Whether ``subject`` has lines of its own or inherits a role's: one that has
        neither cannot change a decision."""
        found = self.acting.get(subject)
        if found is None:
            found = len(self.closure(subject)) > 1 or subject in self.index
            if len(self.acting) > 65536:
                self.acting.clear()
            self.acting[subject] = found
        return found

    def enforce(self, subject: str, dom: str, obj: str, act: str) -> bool:
        rule = self.rule
        if rule is not None:
            # Locky's model: only the lines on ``obj`` or on ``*`` can allow (:mod:`.matcher`).
            # Loops, not ``any`` over a generator: this runs for every decision not
            # in the cache, and a generator's frames cost a third of it.
            by_object = self.by_object
            for role in self.closure(subject):
                lines = by_object.get(role)
                if lines is None:
                    continue
                for on in (obj, "*"):
                    for line in lines.get(on, ()):
                        if rule(line, subject, dom, obj, act):
                            return True
            return False
        lines = [line for role in self.closure(subject) for line in self.index.get(role, ())]
        return self._enforce_over(lines, subject, dom, obj, act)

    def _enforce_over(self, lines: list[list[str]], subject: str, dom: str, obj: str, act: str) -> bool:
        if not lines:
            return False
        rule = self.rule
        if rule is not None:
            return any(rule(line, subject, dom, obj, act) for line in lines)
        assertion = self.enforcer.model["p"]["p"]
        with policy_files.EVALUATION:
            assertion.policy = lines  # evaluate the matcher over these lines only
            try:
                return self.enforcer.enforce(subject, dom, obj, act)
            finally:
                assertion.policy = self.all_p

    def roles(self) -> set[str]:
        """Every role name the policy knows (subjects of ``p`` lines and ``g`` roles)."""
        names = set(self.index)
        for rule in self.enforcer.model["g"]["g"].policy:
            names.update(rule[:2])
        return {name for name in names if policy_files.is_role_name(name)}

    def named_subjects(self) -> set[str]:
        """Users named by the policy itself: the uuids and emails that are subjects of
        its ``g`` lines (a role given to them) or ``p`` lines (a permission of their own)."""
        subjects = {rule[0] for rule in self.enforcer.model["g"]["g"].policy} | set(self.index)
        return {s for s in subjects if policy_files.is_user_uuid(s) or "@" in s}

    def allowing(self, resource: str, action: str) -> tuple[frozenset[str], frozenset[str]]:
        """The roles, and the users named by the policy, whose lines allow ``action`` on
        ``resource`` globally; worked out once per policy snapshot and question."""
        key = (resource, action)
        found = self.allowing_cache.get(key)
        if found is None:
            roles = frozenset(role for role in self.roles() if self.enforce(role, "*", resource, action))
            named = frozenset(s for s in self.named_subjects() if self.enforce(s, "*", resource, action))
            if len(self.allowing_cache) > 4096:
                self.allowing_cache.clear()
            found = self.allowing_cache[key] = (roles, named)
        return found

    def inheriting(self, action: str) -> list[str]:
        """Actions that inherit ``action`` through ``g2`` (``write``: create, update, delete)."""
        found = self.inherited.get(action)
        if found is None:
            links = self.enforcer.model["g"]["g2"].policy if "g2" in self.enforcer.model["g"] else []
            found, todo = [], [action]
            while todo:  # g2 chains: each action that reaches ``action``
                parent = todo.pop()
                for child, target in ((rule[0], rule[1]) for rule in links):
                    if target == parent and child not in found and child != action:
                        found.append(child)
                        todo.append(child)
            self.inherited[action] = found
        return found

    def matching(self, subject: str, dom: str, obj: str, act: str) -> list[list[str]]:
        """The ``p`` lines of ``subject``'s roles that each, on its own, allow the request
        (the explanation of a decision: with the model's "some allow" effect, the request
        is allowed exactly when this list is not empty). Each line is ``[role, dom, obj,
        act]`` as the policy or a stored role wrote it."""
        return [line for role in self.closure(subject) for line in self.index.get(role, ())
                if self._enforce_over([line], subject, dom, obj, act)]


class CasbinAuthorizer:
    """The ``casbin`` authorizer. Reloads when storage's policy revision moves: a new
    :class:`_PolicySnapshot`, swapped in whole, that caches the grants it is asked for."""

    def __init__(self, context):
        self.storage = context.storage
        self.files = policy_files.load(context.settings.policy_dir)
        self.admin_emails = frozenset(e.strip().lower() for e in context.settings.admin_emails)
        self._lock = threading.Lock()
        # One attribute, replaced whole: the policy, its revision and the grants read
        # for it are always seen together (no reader pairs one's revision with
        # another's grants).
        self._snapshot = _PolicySnapshot(self.files, {})

    # -- loading -------------------------------------------------------------

    def _current(self, revision: int | None) -> _PolicySnapshot:
        # The revision read with the caller's session at authentication, when the
        # request carries one (one query for both); storage is asked otherwise.
        if revision is None:
            revision = self.storage.revision()
        snapshot = self._snapshot
        if revision != snapshot.revision:
            with self._lock:
                snapshot = self._snapshot
                if revision != snapshot.revision:
                    snapshot = _PolicySnapshot(self.files, self.storage.roles.custom_permissions(), revision)
                    self._snapshot = snapshot
        return snapshot

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
            if policy_files.is_role_name(name)
        ]

    # -- deciding ------------------------------------------------------------

    def held(self, snapshot: _PolicySnapshot, user: User, group_uuid: str | None) -> list[tuple[str, str]]:
        """Every subject the user acts as in this context, with where it holds:
        ``global``, or ``group`` for the role of the membership in ``group_uuid``.
        Global grants come from ``snapshot``'s cache, filled from storage on a miss.
        A machine client holds ``client`` where a user holds ``user``."""
        held = [(subject, "global") for subject in self._global_subjects(snapshot, user)]
        role = self._group_role(user, group_uuid)
        if role is not None:
            held.append((role, "group"))
        return held

    def _global_subjects(self, snapshot: _PolicySnapshot, user: User) -> list[str]:
        """The subjects of :meth:`held` that hold everywhere."""
        subjects = [CLIENT_ROLE if is_client_subject(user.uuid) else USER_ROLE, user.uuid]
        # An address (LOCKY_ADMIN_EMAILS, a `g, EMAIL, role` line) speaks for an account
        # only once it proved it receives mail there (docs/http/authorization.md and accounts.md): registering or
        # taking an address grants nothing by itself.
        if user.email_verified:
            subjects.append(user.email)
            if user.email in self.admin_emails:
                subjects.append("admin")
        cache = snapshot.grants
        grants = cache.get(user.uuid)
        if grants is None:
            # Read after the snapshot was made, so at its revision or later: never
            # older than what the snapshot stands for (a grant or revoke moves it).
            grants = self.storage.grants.roles_of(user.uuid)
            if len(cache) > 65536:
                cache.clear()
            cache[user.uuid] = grants
        subjects.extend(grants)
        return subjects

    def _acting_globally(self, snapshot: _PolicySnapshot, user: User) -> tuple[str, ...]:
        """The subjects of :meth:`_global_subjects` that can change a decision
        (:meth:`_PolicySnapshot.acts`), sorted; worked out once per user and snapshot
        (what they depend on, the user's grants and verified email, is in the key or
        moves the policy revision)."""
        key = (user.uuid, user.email if user.email_verified else None)
        cache = snapshot.acting_globally
        found = cache.get(key)
        if found is None:
            acts = snapshot.acts
            found = tuple(sorted({s for s in self._global_subjects(snapshot, user) if acts(s)}))
            if len(cache) > 65536:
                cache.clear()
            cache[key] = found
        return found

    def _group_role(self, user: User, group_uuid: str | None) -> str | None:
        """The subject of :meth:`held` that holds in ``group_uuid`` only, if any."""
        if group_uuid is None:
            return None
        role = self._role_of(user.uuid, group_uuid)
        return role if role is not None and role not in GLOBAL_ROLES else None

    def _role_of(self, user_uuid: str, group_uuid: str) -> str | None:
        """The user's role in the group: from the batch being decided when it read this
        pair, else from storage (whose cache keeps it until a membership changes, and
        reads it live inside an atomic block); never kept here."""
        batch = _BATCH.get()
        if batch is not None and batch.owner is self and (user_uuid, group_uuid) in batch.asked:
            return batch.roles.get((user_uuid, group_uuid))
        return self.storage.members.role_of(user_uuid, group_uuid)

    @contextmanager
    def batch(self, pairs: Iterable[tuple[str, str]]) -> Iterator[None]:
        """Around a batch of decisions made for one request (``POST
        /v1/internal/authz/check``, docs/http/authorization.md): the memberships of the
        ``(user_uuid, group_uuid)`` pairs they need are read in one storage call
        (``members.roles_in``), and each decision within reads them from there, so it
        costs no round trip. What they decide is what they decide one by one: the same
        memberships, read live at the start of the batch. A storage without
        ``roles_in`` (written before it) is asked ``role_of`` per decision, as before."""
        asked = frozenset(pairs)
        roles_in = getattr(self.storage.members, "roles_in", None)
        if roles_in is None or not asked:
            yield
            return
        token = _BATCH.set(_Memberships(self, asked, roles_in(asked)))
        try:
            yield
        finally:
            _BATCH.reset(token)

    def is_allowed(self, user: User, resource: str, action: str, *, group_uuid=None, own=False,
                   policy_revision: int | None = None) -> bool:
        snapshot = self._current(policy_revision)
        dom = "self" if own else "*"
        # Subjects with no lines of their own (most users' uuid and email) are dropped
        # before the cache key is made, so the cache is shared across users.
        active = self._acting_globally(snapshot, user)
        role = self._group_role(user, group_uuid)
        if role is not None and role not in active and snapshot.acts(role):
            active = tuple(sorted((*active, role)))
        key = (active, dom, resource, action)
        with self._lock:
            cached = snapshot.decisions.get(key)
            if cached is not None:
                snapshot.decisions.move_to_end(key)
                return cached
            decision = False
            for subject in active:
                if snapshot.enforce(subject, dom, resource, action):
                    decision = True
                    break
            snapshot.decisions[key] = decision
            if len(snapshot.decisions) > CACHE_SIZE:
                snapshot.decisions.popitem(last=False)
            return decision


    # -- explaining (docs/http/authorization.md#the-authorization-api) --------------

    def explain(self, user: User, resource: str, action: str, *, group_uuid=None, own=False,
                policy_revision: int | None = None) -> Explanation:
        """The roles the user held for this decision and the lines that allowed it."""
        snapshot = self._current(policy_revision)
        dom = "self" if own else "*"
        held = self.held(snapshot, user, group_uuid)
        matched = []
        for subject, scope in held:
            for line in snapshot.matching(subject, dom, resource, action):
                line_scope = "self" if line[1] == "self" else scope
                matched.append({"role": line[0], "scope": line_scope,
                                "group_uuid": group_uuid if scope == "group" else None,
                                "rule": "p, " + ", ".join(line)})
        # A line reached both globally and through a membership (a group role inherits
        # `user`) is the global one: held subjects come global first.
        first: dict[str, dict] = {}
        for m in matched:
            first.setdefault(m["rule"], m)
        return Explanation(roles=self._roles(snapshot, user, held, group_uuid), matched=list(first.values()))

    def _roles(self, snapshot, user: User, held, group_uuid) -> list[dict]:
        roles: dict[tuple, dict] = {}
        for subject, scope in held:
            # A user's uuid or email is no role: what its `g` lines give it is.
            names = snapshot.closure(subject)[1:] if subject in (user.uuid, user.email) else (subject,)
            for name in names:
                roles.setdefault((name, scope), {"role": name, "scope": scope,
                                                  "group_uuid": group_uuid if scope == "group" else None})
        return list(roles.values())

    def permissions(self, user: User, group_uuids: Iterable[str | None],
                    policy_revision: int | None = None) -> list[dict]:
        """What the user may do: for the global context (``None``) and each group in
        ``group_uuids``, every line of every role held there, as written (wildcards
        kept), plus the actions that inherit from a written one through ``g2`` (a line
        on ``write`` also lists ``create``, ``update``, ``delete``)."""
        snapshot = self._current(policy_revision)
        found: dict[tuple, dict] = {}
        global_roles = {role for subject, _ in self.held(snapshot, user, None) for role in snapshot.closure(subject)}
        for group_uuid in group_uuids:
            held = self.held(snapshot, user, group_uuid)
            for subject, scope in held:
                if group_uuid is not None and scope != "group":
                    continue  # the global context lists these once
                for role in snapshot.closure(subject):
                    if group_uuid is not None and role in global_roles:
                        continue  # inherited by the group role but held globally anyway (`user`)
                    for _, dom, obj, act in snapshot.index.get(role, ()):
                        line_scope = "self" if dom == "self" else scope
                        for each in (act, *snapshot.inheriting(act)):
                            entry = {"resource": obj, "action": each, "scope": line_scope,
                                     "group_uuid": group_uuid if scope == "group" else None, "via": role}
                            found.setdefault(tuple(entry.values()), entry)
        return list(found.values())

    def may_everyone(self, resource: str, action: str, policy_revision: int | None = None) -> bool:
        """Whether every authenticated user may (the role ``user`` allows it, globally)."""
        return self._current(policy_revision).enforce("user", "*", resource, action)

    def holder_sources(self, resource: str, action: str, group_uuid: str | None,
                       policy_revision: int | None = None) -> HolderSources:
        """Who may, through more than the role ``user``: the holders of the roles whose
        lines allow it, as global grants and (with ``group_uuid``) as memberships of that
        group, verified admin emails, and the policy's own ``g`` lines for uuids and
        emails. Candidates, each to be checked with :meth:`is_allowed` by the caller (a
        held role's lines may not apply)."""
        return self._sources(resource, action, group_uuid, policy_revision)

    def _sources(self, resource: str, action: str, group_uuid: str | None,
                 policy_revision: int | None) -> HolderSources:
        snapshot = self._current(policy_revision)
        roles, named = snapshot.allowing(resource, action)
        allowing = frozenset(roles) - {"user"}
        uuids: set[str] = set()
        emails = set(self.admin_emails) if "admin" in allowing else set()
        for subject in named:
            if policy_files.is_user_uuid(subject):
                uuids.add(subject)
            else:
                emails.add(subject)
        for email in emails:
            found = self.storage.users.get_by_email(email)
            if found is not None and found.email_verified:
                uuids.add(found.uuid)
        return HolderSources(roles=allowing, group_uuid=group_uuid,
                             group_roles=allowing - GLOBAL_ROLES if group_uuid is not None else frozenset(),
                             user_uuids=frozenset(uuids))

    def explicit_holders(self, resource: str, action: str, group_uuid: str | None,
                         policy_revision: int | None = None) -> set[str]:
        """The uuids of every user :meth:`holder_sources` names, read whole."""
        return self._sources(resource, action, group_uuid, policy_revision).uuids(self.storage)


@dataclass(frozen=True)
class Explanation:
    """Why a decision went as it did (docs/http/authorization.md): ``roles`` the user held for it,
    ``matched`` the policy lines (or stored permissions) that allowed it."""

    roles: list[dict]
    matched: list[dict]


@hookimpl
def locky_register_authorizers(registry):
    registry.add("casbin", CasbinAuthorizer)


@hookimpl
def locky_add_commands(subparsers):
    """``locky policy check|test|diff``: the offline policy tooling."""
    from . import commands  # it builds on .tooling, which builds on this module

    commands.add_parser(subparsers)


@hookimpl
def locky_add_settings(settings):
    """``LOCKY_POLICY_DIR``; ``locky check`` loads the policy files it names when this
    authorizer is the one in use (another authorizer checks its own when built)."""
    settings.add("policy_dir", None, type="str | None",
                 help="the directory of model.conf and policy.csv (LOCKY_POLICY_DIR); none: the shipped policy")
    settings.add_check(check_policy)


def check_policy(settings) -> None:
    """Load the policy files of the ``casbin`` authorizer when it is chosen; a problem
    raises :class:`locky.SettingsError` with the message startup would stop with."""
    if settings.authorizer == "casbin":
        policy_files.load(settings.policy_dir)
