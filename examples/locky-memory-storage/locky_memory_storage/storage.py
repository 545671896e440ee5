"""``MemoryStorage``: every record in process memory, behind one lock.

It implements :class:`locky.Storage` using only Locky's public API (``locky.records``
dataclasses in and out, ``locky`` errors), which is all a storage plugin needs. The
records are frozen dataclasses, so handing the stored objects out is safe: a change
always stores a new object (``dataclasses.replace``).

Everything lives as long as the app: nothing is saved, and each worker process of
``locky serve`` has its own copy, so serve it with ``--workers 1``.

Transactions: every store method runs under the storage's one re-entrant lock, so each
is atomic. :meth:`MemoryStorage.atomic` holds that lock for a whole block and, on
entering the outermost block, takes a snapshot of every store's state (shallow copies:
the records are frozen); an exception leaving the block puts the snapshot back. The
stores that grow with every request, the audit trail and the webhook deliveries'
history, are append-only: their snapshot is a length, not a copy (see
:class:`AuditStore` and :class:`DeliveryStore`), so what a block costs does not grow
with the requests served.

Times: the records' own timestamps are aware UTC datetimes. Times handed in by the
caller (``expires_at``, ``now``, ``since``, ``due_at``, the ``created_at`` of audit events,
webhooks and deliveries, ...) may be naive (taken as UTC, what Locky passes) or aware;
they are compared as aware UTC and stored that way.

Signing keys are the exception: the core makes the whole :class:`~locky.records.SigningKey`
(its ``created_at`` included), so it is kept exactly as handed in, and the one time the
storage sets on it, ``retired_at``, is a naive UTC datetime, the form Locky passes times
in and Locky's own Pony storage returns them. ``prune`` compares as aware UTC either way.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import math
import threading
import time
import uuid as uuidlib
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator

from locky import (
    AuditEvent, Authenticated, AuthorizationCode, Code, Conflict, Consent, Delivery, Group, Invalid, Letter, Member,
    Migration, NotFound, OAuthClient, Page, Passkey, Permission, Role, SchemaState, Session, SigningKey, TotpState,
    User, Webhook, utcnow,
)
from locky.storage import FAILED, PENDING, SUCCEEDED, selects


def now() -> datetime:
    """Now as an aware UTC datetime: how this storage stamps the records it makes
    (times Locky passes in are naive UTC, :func:`locky.utcnow`)."""
    return datetime.now(timezone.utc)


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def aware(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime: naive ones (what Locky passes) are UTC."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


class _Records:
    """One kind of record: rows by id (deleted ones kept), ids in ascending order."""

    filters: tuple[str, ...] = ()

    def __init__(self, db: "MemoryStorage"):
        self.db = db
        self.lock = db.lock
        self.rows: dict[int, Any] = {}
        self.ids: list[int] = []  # ascending, so keyset paging can bisect
        self.by_uuid: dict[str, int] = {}
        self._last_id = 0

    # -- helpers, called with the lock held ------------------------------------

    def _snapshot(self):
        return dict(self.rows), list(self.ids), dict(self.by_uuid), self._last_id

    def _restore(self, state) -> None:
        self.rows, self.ids, self.by_uuid, self._last_id = state

    def _insert(self, make: Callable[[int, str, datetime], Any]):
        self._last_id += 1
        stamp = now()
        record = make(self._last_id, new_uuid(), stamp)
        self.rows[record.id] = record
        self.ids.append(record.id)
        self.by_uuid[record.uuid] = record.id
        return record

    def _live(self, id: Any):
        record = self.rows.get(id) if isinstance(id, int) and not isinstance(id, bool) else None
        return record if record is not None and record.deleted_at is None else None

    def _live_or_404(self, id: int):
        record = self._live(id)
        if record is None:
            raise NotFound()
        return record

    def _store(self, record):
        self.rows[record.id] = record
        return record

    def _soft_delete(self, record, stamp: datetime):
        return self._store(dataclasses.replace(record, deleted_at=stamp, updated_at=stamp))

    def _matches(self, record, filters: dict[str, Any]) -> bool:
        return record.deleted_at is None and all(getattr(record, k) == v for k, v in filters.items())

    def _filters(self, filters: dict[str, Any]) -> dict[str, Any]:
        unknown = set(filters) - set(self.filters)
        if unknown:
            raise ValueError(f"unknown filter(s): {', '.join(sorted(unknown))}")
        return {k: v for k, v in filters.items() if v is not None}

    def _live_where(self, **filters: Any) -> list:
        return [r for r in self.rows.values() if self._matches(r, filters)]

    def _changed(self, record, changes: dict[str, Any], allowed: Iterable[str]) -> dict[str, Any]:
        unknown = set(changes) - set(allowed)
        if unknown:
            raise ValueError(f"cannot change {', '.join(sorted(unknown))}")
        # ``None`` leaves a field as it is; ``""`` clears a provisioning system's id.
        wanted = {k: None if k == "external_id" and v == "" else v for k, v in changes.items() if v is not None}
        return {k: v for k, v in wanted.items() if getattr(record, k) != v}

    # -- the RecordStore protocol ----------------------------------------------

    def get(self, id: int):
        with self.lock:
            return self._live(id)

    def get_by_uuid(self, uuid: str):
        with self.lock:
            return self._live(self.by_uuid.get(uuid)) if isinstance(uuid, str) else None

    def get_many_by_uuid(self, uuids: Iterable[str]) -> dict[str, Any]:
        with self.lock:
            found = (self._live(self.by_uuid.get(uuid)) for uuid in uuids if isinstance(uuid, str))
            return {record.uuid: record for record in found if record is not None}

    def list(self, *, after_id: int = 0, limit: int = 50, **filters: Any) -> Page:
        with self.lock:
            wanted = self._filters(filters)
            items: list = []
            # Start right after ``after_id``: the same cost for every page.
            for id in self.ids[bisect.bisect_right(self.ids, after_id):]:
                record = self.rows[id]
                if self._matches(record, wanted):
                    items.append(record)
                    if len(items) > limit:
                        break
            more = len(items) > limit
            items = items[:limit]
            return Page(items=items, next_after_id=items[-1].id if more and items else None)

    def count(self, **filters: Any) -> int:
        with self.lock:
            wanted = self._filters(filters)
            return sum(1 for r in self.rows.values() if self._matches(r, wanted))

    def delete(self, id: int):
        with self.lock:
            record = self._live_or_404(id)
            self._before_delete(record)
            deleted = self._soft_delete(record, now())
            self._after_delete(deleted)
            return deleted

    def _before_delete(self, record) -> None:
        """Refuse a delete by raising."""

    def _after_delete(self, record) -> None:
        """Cascade a delete."""


class UserStore(_Records):
    filters = ("email", "external_id")

    def _filters(self, filters):
        wanted = super()._filters(filters)
        if isinstance(wanted.get("email"), str):
            wanted["email"] = wanted["email"].lower()
        return wanted

    def _email_taken(self, email: str, but: int | None = None) -> bool:
        return any(u.email == email and u.id != but for u in self._live_where())

    def create(self, *, name: str, email: str, password_hash: str, external_id: str | None = None) -> User:
        email = email.lower()
        with self.lock:
            if self._email_taken(email):
                raise Conflict("email", "Already registered.")
            return self._insert(lambda id, uuid, stamp: User(
                id=id, uuid=uuid, created_at=stamp, updated_at=stamp, deleted_at=None,
                name=name, email=email, password_hash=password_hash, external_id=external_id or None,
            ))

    def get_by_email(self, email: str) -> User | None:
        with self.lock:
            found = self._live_where(email=email.lower())
            return found[0] if found else None

    def update(self, id: int, **changes: Any) -> User:
        if isinstance(changes.get("email"), str):
            changes["email"] = changes["email"].lower()
        with self.lock:
            user = self._live_or_404(id)
            changed = self._changed(
                user, changes, ("name", "email", "password_hash", "email_verified", "disabled", "external_id"))
            if "email" in changed:
                if self._email_taken(changed["email"], but=id):
                    raise Conflict("email", "Already registered.")
                # A new address is not proved yet, unless this very call says it is.
                if changes.get("email_verified") is None and user.email_verified:
                    changed["email_verified"] = False
            return self._store(dataclasses.replace(user, **changed, updated_at=now())) if changed else user

    def for_update(self, uuid: str) -> User | None:
        # Inside atomic() the storage's one lock is held until the block ends.
        with self.lock:
            return self.get_by_uuid(uuid) if isinstance(uuid, str) else None

    def mark_verified(self, uuid: str, email: str) -> User | None:
        with self.lock:
            user = self.get_by_uuid(uuid)
            if user is None or not isinstance(email, str) or user.email != email.lower():
                return None  # gone, or the code proves an address the user no longer has
            if user.email_verified:
                return user
            return self._store(dataclasses.replace(user, email_verified=True, updated_at=now()))

    def _set_mfa(self, uuid: str, enabled: bool) -> User | None:
        """Set ``mfa_enabled`` of the live user ``uuid`` (lock held); the user or ``None``."""
        user = self.get_by_uuid(uuid)
        if user is None or user.mfa_enabled == enabled:
            return user
        return self._store(dataclasses.replace(user, mfa_enabled=enabled, updated_at=now()))

    def _after_delete(self, user: User) -> None:
        members = self.db.members
        for member in members._live_where(user_uuid=user.uuid):
            members._soft_delete(member, user.deleted_at)
        self.db.sessions._revoke_all(user.uuid, user.deleted_at)


class GroupStore(_Records):
    filters = ("name", "external_id")

    def for_update(self, uuid: str) -> Group | None:
        # Inside atomic() the storage's one lock is held until the block ends.
        with self.lock:
            return self.get_by_uuid(uuid) if isinstance(uuid, str) else None

    def create(self, *, name: str, description: str, owner_uuid: str | None,
               external_id: str | None = None) -> Group:
        with self.lock:
            # No owner: a provisioning system's group, made with no member.
            owner = None if owner_uuid is None else self.db.users.get_by_uuid(owner_uuid)
            if owner_uuid is not None and owner is None:
                raise Invalid.one("owner_uuid", "No such user.")
            if self._live_where(name=name):
                raise Conflict("name")
            group = self._insert(lambda id, uuid, stamp: Group(
                id=id, uuid=uuid, created_at=stamp, updated_at=stamp, deleted_at=None,
                name=name, description=description, external_id=external_id or None,
            ))
            if owner is not None:
                self.db.members._add(group.uuid, owner.uuid, "owner")
            return group

    def update(self, id: int, **changes: Any) -> Group:
        with self.lock:
            group = self._live_or_404(id)
            changed = self._changed(group, changes, ("name", "description", "external_id"))
            if "name" in changed and self._live_where(name=changed["name"]):
                raise Conflict("name")
            return self._store(dataclasses.replace(group, **changed, updated_at=now())) if changed else group

    def _after_delete(self, group: Group) -> None:
        members = self.db.members
        for member in members._live_where(group_uuid=group.uuid):
            members._soft_delete(member, group.deleted_at)


class MemberStore(_Records):
    filters = ("group_uuid", "user_uuid", "role")

    def _add(self, group_uuid: str, user_uuid: str, role: str) -> Member:
        return self._insert(lambda id, uuid, stamp: Member(
            id=id, uuid=uuid, created_at=stamp, updated_at=stamp, deleted_at=None,
            group_uuid=group_uuid, user_uuid=user_uuid, role=role,
        ))

    def create(self, *, group_uuid: str, user_uuid: str, role: str) -> Member:
        # All under the lock, as one transaction: the references cannot change between
        # the check and the insert (Locky's own checks and policy run before, in its
        # atomic block, which holds the same lock).
        with self.lock:
            if self.db.groups.get_by_uuid(group_uuid) is None:
                raise Invalid.missing("group_uuid")
            if self.db.users.get_by_uuid(user_uuid) is None:
                raise Invalid.missing("user_uuid")
            if not self.db.roles._live_where(name=role):
                raise Invalid.missing("role")
            if self._live_where(group_uuid=group_uuid, user_uuid=user_uuid):
                raise Conflict("user_uuid", "Already a member of this group.")
            return self._add(group_uuid, user_uuid, role)

    def _before_delete(self, member: Member) -> None:
        # Under the one lock, so two owners leaving at once cannot both pass.
        if member.role == "owner" and not any(
            m.id != member.id for m in self._live_where(group_uuid=member.group_uuid, role="owner")
        ):
            raise Invalid.one("role", "The group's last owner cannot leave it; make another member owner first.")

    def role_of(self, user_uuid: str, group_uuid: str) -> str | None:
        with self.lock:
            if self.db.groups.get_by_uuid(group_uuid) is None:
                return None
            found = self._live_where(group_uuid=group_uuid, user_uuid=user_uuid)
            return found[0].role if found else None

    def roles_in(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        wanted = {(u, g) for u, g in pairs if isinstance(u, str) and isinstance(g, str)}
        with self.lock:
            return {(m.user_uuid, m.group_uuid): m.role for m in self.rows.values()
                    if self._matches(m, {}) and (m.user_uuid, m.group_uuid) in wanted
                    and self.db.groups.get_by_uuid(m.group_uuid) is not None}

    def roles_by_group(self, user_uuid: str, at_most: int) -> dict[str, str] | None:
        if not isinstance(user_uuid, str):
            return {}
        with self.lock:
            found = {m.group_uuid: m.role for m in self._live_where(user_uuid=user_uuid)
                     if self.db.groups.get_by_uuid(m.group_uuid) is not None}
        return None if len(found) > at_most else found

    def user_with_roles_by_group(self, user_uuid: str, at_most: int) -> tuple[Any, dict[str, str] | None]:
        with self.lock:  # the user and their roles as of one moment, as one read gives them
            user = self.db.users.get_by_uuid(user_uuid)
            return (None, {}) if user is None else (user, self.roles_by_group(user_uuid, at_most))

    def of_users(self, user_uuids: Iterable[str]) -> list[Member]:
        return self._of("user_uuid", user_uuids)

    def of_groups(self, group_uuids: Iterable[str]) -> list[Member]:
        return self._of("group_uuid", group_uuids)

    def holders_by_id(self, group_uuid: str, roles: Iterable[str], after_id: int,
                      limit: int) -> list[tuple[int, str]]:
        wanted = {role for role in roles if isinstance(role, str)}
        if not isinstance(group_uuid, str):
            return []
        with self.lock:
            ids = self.db.users.by_uuid
            found = {(ids[m.user_uuid], m.user_uuid) for m in self._live_where(group_uuid=group_uuid)
                     if m.role in wanted}
        return sorted(pair for pair in found if pair[0] > after_id)[:limit]

    def _of(self, field: str, uuids: Iterable[str]) -> list[Member]:
        wanted = {uuid for uuid in uuids if isinstance(uuid, str)}
        with self.lock:
            return [m for m in self._live_where() if getattr(m, field) in wanted]


class RoleStore(_Records):
    filters = ("name",)

    @staticmethod
    def _permissions(permissions: Iterable[Permission]) -> tuple[Permission, ...]:
        return tuple(dict.fromkeys(Permission(p.resource, p.action) for p in permissions))

    def _held(self, name: str) -> bool:
        # Memberships and global grants name roles: a role they hold keeps its name and
        # stays, so a new role of that name never inherits them.
        return bool(self.db.members._live_where(role=name)) or any(
            role == name for _, role in self.db.grants.grants)

    def create(self, *, name: str, description: str, permissions: Iterable[Permission]) -> Role:
        return self._create(name, description, permissions, builtin=False)

    def _create(self, name, description, permissions, builtin: bool) -> Role:
        with self.lock:
            if self._live_where(name=name):
                raise Conflict("name")
            role = self._insert(lambda id, uuid, stamp: Role(
                id=id, uuid=uuid, created_at=stamp, updated_at=stamp, deleted_at=None, name=name,
                description=description, permissions=self._permissions(permissions), builtin=builtin,
            ))
            self.db._bump()
            return role

    def update(self, id: int, **changes: Any) -> Role:
        with self.lock:
            role = self._live_or_404(id)
            if role.builtin:
                raise Invalid.one("name", "Built-in roles cannot be changed.")
            if changes.get("permissions") is not None:
                changes["permissions"] = self._permissions(changes["permissions"])
            changed = self._changed(role, changes, ("name", "description", "permissions"))
            if "name" in changed:
                if self._held(role.name):
                    raise Invalid.one("name", "Cannot rename a role held by live memberships or grants.")
                if self._live_where(name=changed["name"]):
                    raise Conflict("name")
            if not changed:
                return role
            self.db._bump()
            return self._store(dataclasses.replace(role, **changed, updated_at=now()))

    def _before_delete(self, role: Role) -> None:
        if role.builtin:
            raise Invalid.one("name", "Built-in roles cannot be deleted.")
        if self._held(role.name):
            raise Invalid.one("name", "The role is held by live memberships or grants.")

    def _after_delete(self, role: Role) -> None:
        self.db._bump()

    def sync_builtin(self, roles) -> None:
        wanted = {role.name: role for role in roles}
        with self.lock:
            stamp = now()
            for role in self._live_where(builtin=True):
                if role.name not in wanted:
                    self._soft_delete(role, stamp)
            for name, builtin in wanted.items():
                permissions = self._permissions(builtin.permissions)
                found = self._live_where(name=name)
                if not found:
                    self._create(name, builtin.description, permissions, builtin=True)
                elif (found[0].description, found[0].permissions, found[0].builtin) != (
                        builtin.description, permissions, True):
                    self._store(dataclasses.replace(found[0], description=builtin.description,
                                                    permissions=permissions, builtin=True, updated_at=stamp))
            self.db._bump()

    def custom_permissions(self) -> dict[str, tuple[Permission, ...]]:
        with self.lock:
            return {r.name: r.permissions for r in self._live_where(builtin=False)}


class SessionStore:
    def __init__(self, db: "MemoryStorage"):
        self.db = db
        self.lock = db.lock
        self.rows: dict[str, Session] = {}

    def create(self, *, uuid: str, user_uuid: str, refresh_jti: str, client_id: str | None = None,
               scope: str | None = None, op_session_uuid: str | None = None, amr: Iterable[str] = ()) -> Session:
        with self.lock:
            session = Session(uuid=uuid, user_uuid=user_uuid, created_at=now(), revoked_at=None,
                              refresh_jti=refresh_jti, client_id=client_id, scope=scope,
                              op_session_uuid=op_session_uuid, amr=tuple(amr))
            self.rows[uuid] = session
            return session

    def _snapshot(self):
        return dict(self.rows)

    def _restore(self, state) -> None:
        self.rows = state

    def identity(self, uuid: str) -> tuple[Session, User] | None:
        found = self.authenticate(uuid)
        return None if found is None else (found.session, found.user)

    def authenticate(self, uuid: str) -> Authenticated | None:
        # One lock for session, user and revision: the three are of the same moment.
        if not isinstance(uuid, str):
            return None
        with self.lock:
            session = self.rows.get(uuid)
            if session is None or session.revoked_at is not None:
                return None
            user = self.db.users.get_by_uuid(session.user_uuid)
            if user is None:
                return None
            return Authenticated(session=session, user=user, policy_revision=self.db._revision)

    def rotate(self, uuid: str, presented_jti: str, new_jti: str) -> bool:
        with self.lock:
            session = self.rows.get(uuid)
            if session is None or session.revoked_at is not None:
                return False
            if session.refresh_jti != presented_jti:
                # A refresh token used twice: end the whole login.
                self.rows[uuid] = dataclasses.replace(session, revoked_at=now())
                return False
            self.rows[uuid] = dataclasses.replace(session, refresh_jti=new_jti)
            return True

    def revoke(self, uuid: str) -> bool:
        with self.lock:
            session = self.rows.get(uuid)
            if session is None or session.revoked_at is not None:
                return False
            self.rows[uuid] = dataclasses.replace(session, revoked_at=now())
            return True

    def revoke_all(self, user_uuid: str, *, keep: str | None = None) -> int:
        with self.lock:
            return self._revoke_all(user_uuid, now(), keep=keep)

    def _revoke_all(self, user_uuid: str, stamp: datetime, keep: str | None = None) -> int:
        return self._revoke_where(lambda s: s.user_uuid == user_uuid and s.uuid != keep, stamp)

    def end_op_session(self, uuid: str) -> int:
        if not isinstance(uuid, str):
            return 0
        with self.lock:
            return self._revoke_where(lambda s: uuid in (s.uuid, s.op_session_uuid), now())

    def revoke_client(self, client_id: str, *, user_uuid: str | None = None) -> int:
        if not isinstance(client_id, str):
            return 0
        with self.lock:
            return self._revoke_where(
                lambda s: s.client_id == client_id and user_uuid in (None, s.user_uuid), now())

    def _revoke_where(self, wanted: Callable[[Session], bool], stamp: datetime) -> int:
        """Revoke every live session ``wanted`` accepts (the lock held); how many."""
        revoked = 0
        for uuid, session in list(self.rows.items()):
            if session.revoked_at is None and wanted(session):
                self.rows[uuid] = dataclasses.replace(session, revoked_at=stamp)
                revoked += 1
        return revoked


class LoginThrottle:
    """Failed logins per key with exponential backoff (see ``locky.LoginThrottle``'s rule)."""

    #: Ended keys a new key deletes, at most (more than the one it adds).
    PRUNE_BATCH = 20

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        # key -> [window start, attempts, last counted attempt]; in window-start order,
        # since a key whose window starts again moves to the end.
        self.windows: dict[str, list] = {}
        # Quota keys (take): key -> [window end, requests]; apart, so their windows
        # (an hour) never hold up the pruning of the login keys above, which relies on
        # their order.
        self.quotas: dict[str, list] = {}

    def _snapshot(self):
        # Entries change in place: copy them.
        return ({key: list(entry) for key, entry in self.windows.items()},
                {key: list(entry) for key, entry in self.quotas.items()})

    def _restore(self, state) -> None:
        self.windows, self.quotas = state

    def hit(self, key: str, *, limit: int, window: int) -> int | None:
        with self.lock:
            clock = time.time()
            entry = self.windows.get(key)
            if entry is None:
                self._prune(clock, window, self.PRUNE_BATCH)
                self.windows[key] = [clock, 1, clock]
                return None
            start, attempts, last = entry
            if attempts >= limit:
                # Locked for window/16 after the last counted attempt, doubling per
                # further attempt, at most the window; refused attempts are not counted.
                remaining = last + min(window, window / 16 * 2 ** min(attempts - limit, 16)) - clock
                if remaining > 0:
                    return max(1, math.ceil(remaining))
            if clock - start >= window:
                del self.windows[key]
                entry = self.windows[key] = [clock, 0, clock]
            entry[1] += 1
            entry[2] = clock
            return None

    def take(self, key: str, *, limit: int, window: int) -> int | None:
        with self.lock:
            clock = time.time()
            entry = self.quotas.get(key)
            if entry is None or clock >= entry[0]:
                self._prune_quotas(clock, self.PRUNE_BATCH)
                self.quotas.pop(key, None)  # to the end: roughly in order of window end
                self.quotas[key] = [clock + window, 1]
                return None
            if entry[1] >= limit:
                return max(1, math.ceil(entry[0] - clock))  # refused and not counted
            entry[1] += 1
            return None

    def _prune_quotas(self, clock: float, batch: int) -> None:
        ended = []
        for key, (end, _) in self.quotas.items():
            if end > clock or len(ended) == batch:
                break
            ended.append(key)
        for key in ended:
            del self.quotas[key]

    def reset(self, key: str) -> bool:
        with self.lock:
            quota = self.quotas.pop(key, None) is not None
            return self.windows.pop(key, None) is not None or quota

    def reset_prefix(self, prefix: str) -> int:
        with self.lock:
            keys = [key for key in self.windows if prefix and key.startswith(prefix)]
            for key in keys:
                del self.windows[key]
            return len(keys)

    def forgive(self, key: str) -> None:
        with self.lock:
            entry = self.windows.get(key, self.quotas.get(key))
            if entry is not None and entry[1] > 0:
                entry[1] -= 1

    def prune(self, *, window: int, batch: int = 1000) -> int:
        with self.lock:
            clock = time.time()
            before = len(self.quotas)
            self._prune_quotas(clock - 2 * window, batch)
            gone = before - len(self.quotas)
            return gone + self._prune(clock, window, batch - gone)

    def _prune(self, clock: float, window: int, batch: int) -> int:
        ended = []
        for key, (start, _, _) in self.windows.items():
            if start > clock - 2 * window or len(ended) == batch:
                break
            ended.append(key)
        for key in ended:
            del self.windows[key]
        return len(ended)


class GrantStore:
    def __init__(self, db: "MemoryStorage"):
        self.db = db
        self.lock = db.lock
        self.grants: set[tuple[str, str]] = set()

    def _snapshot(self):
        return set(self.grants)

    def _restore(self, state) -> None:
        self.grants = state

    def grant(self, user_uuid: str, role: str) -> bool:
        with self.lock:
            if (user_uuid, role) in self.grants:
                return False
            self.grants.add((user_uuid, role))
            self.db._bump()
            return True

    def revoke(self, user_uuid: str, role: str) -> bool:
        with self.lock:
            if (user_uuid, role) not in self.grants:
                return False
            self.grants.discard((user_uuid, role))
            self.db._bump()
            return True

    def roles_of(self, user_uuid: str) -> frozenset[str]:
        with self.lock:
            return frozenset(role for user, role in self.grants if user == user_uuid)

    def holders(self, role: str) -> list[str]:
        with self.lock:
            return [user for user, held in self.grants if held == role]

    def holders_by_id(self, roles: Iterable[str], after_id: int, limit: int) -> list[tuple[int, str]]:
        wanted = {role for role in roles if isinstance(role, str)}
        with self.lock:
            ids = self.db.users.by_uuid  # a grant to an OAuth client names no user
            found = {(ids[user], user) for user, role in self.grants if role in wanted and user in ids}
        return sorted(pair for pair in found if pair[0] > after_id)[:limit]


class CodeStore:
    """Single-use codes by (hash, purpose); only hashes ever reach it."""

    #: Codes that expired a day or more ago that one ``add`` deletes, at most.
    PRUNE_BATCH = 100

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: dict[tuple[str, str], Code] = {}  # insertion (so creation) order

    def _snapshot(self):
        return dict(self.rows)

    def _restore(self, state) -> None:
        self.rows = state

    def add(self, *, code_hash: str, purpose: str, user_uuid: str, email: str, expires_at: datetime) -> Code:
        with self.lock:
            stamp = now()
            cutoff = stamp - timedelta(days=1)
            stale = [key for key, code in self.rows.items() if code.expires_at <= cutoff][:self.PRUNE_BATCH]
            for key in stale:
                del self.rows[key]
            code = Code(code_hash=code_hash, purpose=purpose, user_uuid=user_uuid, email=email,
                        created_at=stamp, expires_at=aware(expires_at))
            self.rows.pop((code_hash, purpose), None)  # a fresh value: moves to the end
            self.rows[(code_hash, purpose)] = code
            return code

    def _usable(self, code_hash: str, purpose: str, moment: datetime) -> Code | None:
        code = self.rows.get((code_hash, purpose)) if isinstance(code_hash, str) else None
        if code is None or code.used_at is not None or code.expires_at <= aware(moment):
            return None
        return code

    def find(self, code_hash: str, purpose: str, *, now: datetime) -> Code | None:
        with self.lock:
            return self._usable(code_hash, purpose, now)

    def use(self, code_hash: str, purpose: str, *, now: datetime) -> Code | None:
        with self.lock:  # find and mark under one lock: one of concurrent uses wins
            code = self._usable(code_hash, purpose, now)
            if code is None:
                return None
            used = dataclasses.replace(code, used_at=aware(now))
            self.rows[(code_hash, purpose)] = used
            return used

    def count_since(self, user_uuid: str, purpose: str, since: datetime) -> int:
        with self.lock:
            since = aware(since)
            return sum(1 for code in self.rows.values()
                       if code.user_uuid == user_uuid and code.purpose == purpose and code.created_at >= since)


@dataclasses.dataclass(frozen=True)
class _Queued:
    """A letter in the outbox with when it is due and until when a sender holds it."""

    letter: Letter
    due_at: datetime
    held_until: datetime | None = None


class Outbox:
    """Letters waiting to be sent, by id (ascending: oldest first)."""

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: dict[int, _Queued] = {}
        self._last_id = 0

    def _snapshot(self):
        return dict(self.rows), self._last_id

    def _restore(self, state) -> None:
        self.rows, self._last_id = state

    def put(self, *, purpose: str, email: str, user_uuid: str = "") -> Letter:
        with self.lock:
            self._last_id += 1
            stamp = now()
            letter = Letter(id=self._last_id, purpose=purpose, email=email, user_uuid=user_uuid,
                            created_at=stamp, attempts=0)
            self.rows[letter.id] = _Queued(letter, due_at=stamp)
            return letter

    def claim(self, *, now: datetime, lease: int, limit: int = 10) -> list[Letter]:
        moment = aware(now)
        with self.lock:  # one lock: concurrent claims never take the same letter
            claimed = []
            for id in sorted(self.rows):
                if len(claimed) >= limit:
                    break
                queued = self.rows[id]
                if queued.due_at > moment or (queued.held_until is not None and queued.held_until > moment):
                    continue
                letter = dataclasses.replace(queued.letter, attempts=queued.letter.attempts + 1)
                self.rows[id] = dataclasses.replace(queued, letter=letter,
                                                    held_until=moment + timedelta(seconds=lease))
                claimed.append(letter)
            return claimed

    def done(self, id: int) -> None:
        with self.lock:
            self.rows.pop(id, None)

    def retry(self, id: int, *, due_at: datetime) -> None:
        with self.lock:
            queued = self.rows.get(id)
            if queued is not None:
                self.rows[id] = dataclasses.replace(queued, due_at=aware(due_at), held_until=None)

    def pending(self) -> int:
        with self.lock:
            return len(self.rows)


class TotpStore:
    """Users' TOTP states by user uuid; ``mfa_enabled`` on the user changes with them."""

    def __init__(self, db: "MemoryStorage"):
        self.db = db
        self.lock = db.lock
        self.rows: dict[str, TotpState] = {}

    def _snapshot(self):
        return dict(self.rows)

    def _restore(self, state) -> None:
        self.rows = state

    def get(self, user_uuid: str) -> TotpState | None:
        with self.lock:
            return self.rows.get(user_uuid)

    def begin(self, user_uuid: str, secret: str) -> bool:
        with self.lock:
            state = self.rows.get(user_uuid)
            if state is not None and state.confirmed:
                return False
            self.rows[user_uuid] = TotpState(user_uuid=user_uuid, secret=secret, confirmed=False, last_step=0)
            return True

    def confirm(self, user_uuid: str, *, step: int, recovery_hashes: Iterable[str]) -> User | None:
        with self.lock:
            state = self.rows.get(user_uuid)
            if state is None or state.confirmed or step <= state.last_step:
                return None
            if self.db.users.get_by_uuid(user_uuid) is None:
                return None
            self.rows[user_uuid] = dataclasses.replace(
                state, confirmed=True, last_step=step, recovery_hashes=tuple(dict.fromkeys(recovery_hashes)))
            return self.db.users._set_mfa(user_uuid, True)

    def use_step(self, user_uuid: str, step: int) -> bool:
        with self.lock:
            state = self.rows.get(user_uuid)
            if state is None or step <= state.last_step:
                return False
            self.rows[user_uuid] = dataclasses.replace(state, last_step=step)
            return True

    def use_recovery(self, user_uuid: str, code_hash: str) -> bool:
        with self.lock:
            state = self.rows.get(user_uuid)
            if state is None or not state.confirmed or code_hash not in state.recovery_hashes:
                return False
            left = tuple(h for h in state.recovery_hashes if h != code_hash)
            self.rows[user_uuid] = dataclasses.replace(state, recovery_hashes=left)
            return True

    def remove(self, user_uuid: str) -> User | None:
        with self.lock:
            if self.rows.pop(user_uuid, None) is None:
                return None
            return self.db.users._set_mfa(user_uuid, False)


class KeyStore:
    """Token-signing keys in the order they were stored (so oldest first). Of each
    algorithm's family (``alg``) at most one has no ``retired_at``: its active one, which
    every rotation of the family replaces under the lock."""

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: list[SigningKey] = []

    def _snapshot(self):
        return list(self.rows)  # the keys are frozen: a shallow copy is the whole state

    def _restore(self, state) -> None:
        self.rows = state

    def _active(self, alg: str) -> SigningKey | None:
        return next((key for key in self.rows if key.retired_at is None and key.alg == alg), None)

    def active(self, alg: str) -> SigningKey | None:
        with self.lock:
            return self._active(alg)

    def all(self) -> list[SigningKey]:
        with self.lock:
            return list(self.rows)

    def rotate(self, new: SigningKey, *, replacing: str | None) -> SigningKey:
        # Compare and swap under the one lock: of concurrent rotations replacing the same
        # kid one wins, and every other one returns the winner's key.
        with self.lock:
            current = self._active(new.alg)  # only its family rotates
            if current is not None and current.kid != replacing:
                # Someone rotated first (or the caller's view is stale): keep theirs.
                return current
            # No active key at all: ``new`` becomes the first whatever ``replacing`` says
            # (there is no key to defer to), as Locky's Pony storage does.
            if any(key.kid == new.kid for key in self.rows):
                raise Conflict("kid", "A signing key with this kid exists.")
            if new.retired_at is not None:
                new = dataclasses.replace(new, retired_at=None)  # it is the active key now
            if current is not None:
                retired = dataclasses.replace(current, retired_at=utcnow())  # naive UTC, as Locky passes times
                self.rows = [retired if key is current else key for key in self.rows]
            self.rows.append(new)
            return new

    def prune(self, retired_before: datetime) -> int:
        with self.lock:
            cutoff = aware(retired_before)
            kept = [key for key in self.rows if key.retired_at is None or aware(key.retired_at) >= cutoff]
            pruned = len(self.rows) - len(kept)
            self.rows = kept
            return pruned


class AuditStore:
    """The audit trail: events in the order they were added, so by ascending id.

    Append-only (only :meth:`prune` removes events, and it builds a new list), so the
    state at the start of an ``atomic()`` block is the list of then cut back to its
    length of then: the snapshot is that list and its length, O(1) however long the
    trail, and restoring cuts off what the block appended (or, when the block pruned,
    takes back the list it replaced, which nothing touched since).

    Each event keeps its ``details`` as JSON text, as a database column would: what the
    caller's dict becomes after :meth:`add`, or what a reader does to the dict it is
    handed, never changes a stored event (and details that JSON cannot hold fail at once).
    """

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: list[AuditEvent] = []  # ``details`` as JSON text; see _out
        self._last_id = 0

    def _snapshot(self):
        return self.rows, len(self.rows), self._last_id

    def _restore(self, state) -> None:
        rows, length, self._last_id = state
        del rows[length:]
        self.rows = rows

    @staticmethod
    def _out(stored: AuditEvent) -> AuditEvent:
        return dataclasses.replace(stored, details=json.loads(stored.details))

    def add(self, *, uuid: str, event: str, actor_uuid: str | None, target_type: str | None,
            target_uuid: str | None, ip: str, request_id: str, details: dict,
            created_at: datetime) -> AuditEvent:
        text = json.dumps(details, ensure_ascii=False)
        with self.lock:
            self._last_id += 1
            stored = AuditEvent(id=self._last_id, uuid=uuid, created_at=aware(created_at), event=event,
                                actor_uuid=actor_uuid, target_type=target_type, target_uuid=target_uuid,
                                ip=ip, request_id=request_id, details=text)
            self.rows.append(stored)
            return self._out(stored)

    def list(self, *, after_id: int = 0, limit: int = 50, event: str | None = None,
             event_prefix: str | None = None, actor_uuid: str | None = None,
             target_uuid: str | None = None, since: datetime | None = None,
             until: datetime | None = None, ip: str | None = None) -> Page:
        since = None if since is None else aware(since)
        until = None if until is None else aware(until)

        def wanted(e: AuditEvent) -> bool:
            return ((event is None or e.event == event)
                    and (event_prefix is None or e.event.startswith(event_prefix))
                    and (actor_uuid is None or e.actor_uuid == actor_uuid)
                    and (target_uuid is None or e.target_uuid == target_uuid)
                    and (since is None or since <= e.created_at)
                    and (until is None or e.created_at < until)
                    and (ip is None or e.ip == ip))

        with self.lock:
            rows = self.rows
            items: list[AuditEvent] = []
            # Start right after ``after_id``: the same cost for every page.
            for i in range(bisect.bisect_right(rows, after_id, key=lambda e: e.id), len(rows)):
                if wanted(rows[i]):
                    items.append(rows[i])
                    if len(items) > limit:
                        break
            more = len(items) > limit
            items = [self._out(e) for e in items[:limit]]
            return Page(items=items, next_after_id=items[-1].id if more and items else None)

    def prune(self, older_than: datetime, *, batch: int = 1000) -> int:
        cutoff = aware(older_than)
        with self.lock:
            kept, gone = [], 0
            for stored in self.rows:
                if gone < batch and stored.created_at < cutoff:
                    gone += 1
                else:
                    kept.append(stored)
            if gone:
                self.rows = kept  # a new list: the one a snapshot holds stays as it was
            return gone


class WebhookStore:
    """Webhook subscriptions by id (ascending: ids only grow). Few, so each read walks
    them all; deleting one forgets its pending deliveries."""

    def __init__(self, db: "MemoryStorage"):
        self.db = db
        self.lock = db.lock
        self.rows: dict[int, Webhook] = {}
        self._last_id = 0

    def _snapshot(self):
        return dict(self.rows), self._last_id

    def _restore(self, state) -> None:
        self.rows, self._last_id = state

    def create(self, *, uuid: str, url: str, events: Iterable[str], description: str, secret: str,
               created_at: datetime) -> Webhook:
        with self.lock:
            self._last_id += 1
            hook = Webhook(id=self._last_id, uuid=uuid, url=url, events=tuple(events), description=description,
                           secret=secret, created_at=aware(created_at))
            self.rows[hook.id] = hook
            return hook

    def get(self, id: int) -> Webhook | None:
        with self.lock:
            return self.rows.get(id) if isinstance(id, int) else None

    def list(self, *, after_id: int = 0, limit: int = 50) -> Page:
        with self.lock:
            later = [hook for id, hook in self.rows.items() if id > after_id]
            items = later[:limit]
            return Page(items=items, next_after_id=items[-1].id if len(later) > limit and items else None)

    def matching(self, event: str) -> list[Webhook]:
        with self.lock:
            return [hook for hook in self.rows.values() if selects(hook.events, event)]

    def delete(self, id: int) -> Webhook | None:
        with self.lock:
            hook = self.rows.pop(id, None) if isinstance(id, int) else None
            if hook is not None:
                self.db.deliveries._forget_pending(hook.id)
            return hook


@dataclasses.dataclass(frozen=True)
class _Sending:
    """A pending delivery with until when a sender holds it."""

    delivery: Delivery
    held_until: datetime | None = None


class DeliveryStore:
    """Webhook deliveries: the pending ones (the outbox, by id, so oldest first) and the
    finished ones (the history, which grows with every event and never changes).

    A snapshot copies only the pending ones (few: the senders keep up); the history is
    append-only, so its snapshot is its length, and restoring forgets what the block
    finished (its pending state comes back with the pending ones). Ids are never handed
    out twice, not even after a block was undone (as a database sequence): the list of
    each webhook's delivery ids, kept for paging, can then only grow, and an id in it
    whose delivery is gone (undone, or pending when its webhook was deleted) is skipped.
    """

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.pending_rows: dict[int, _Sending] = {}
        self.finished: dict[int, Delivery] = {}
        self._finished_ids: list[int] = []  # in the order they finished
        self.by_webhook: dict[int, list[int]] = {}  # ascending ids, some maybe gone
        self._last_id = 0

    def _snapshot(self):
        return dict(self.pending_rows), len(self._finished_ids)

    def _restore(self, state) -> None:
        self.pending_rows, length = state
        for id in self._finished_ids[length:]:
            del self.finished[id]
        del self._finished_ids[length:]

    def _find(self, id: int) -> Delivery | None:
        sending = self.pending_rows.get(id)
        return sending.delivery if sending is not None else self.finished.get(id)

    def _finish(self, id: int, **changes: Any) -> None:
        sending = self.pending_rows.pop(id, None) if isinstance(id, int) else None
        if sending is None:
            return  # finished already, or gone with its webhook while it was being sent
        self.finished[id] = dataclasses.replace(sending.delivery, next_attempt_at=None, **changes)
        self._finished_ids.append(id)

    def _forget_pending(self, webhook_id: int) -> None:
        for id in [id for id, s in self.pending_rows.items() if s.delivery.webhook_id == webhook_id]:
            del self.pending_rows[id]

    def queue(self, *, webhook_id: int, event_uuid: str, event: str, payload: str,
              created_at: datetime) -> Delivery:
        with self.lock:
            self._last_id += 1
            stamp = aware(created_at)
            delivery = Delivery(id=self._last_id, webhook_id=webhook_id, event_uuid=event_uuid, event=event,
                                payload=payload, status=PENDING, attempts=0, last_status_code=None, last_error="",
                                created_at=stamp, next_attempt_at=stamp)
            self.pending_rows[delivery.id] = _Sending(delivery)
            self.by_webhook.setdefault(webhook_id, []).append(delivery.id)
            return delivery

    def claim(self, *, now: datetime, lease: int, limit: int = 10) -> list[Delivery]:
        moment = aware(now)
        with self.lock:  # one lock: concurrent claims never take the same delivery
            claimed = []
            for id, sending in self.pending_rows.items():
                if len(claimed) >= limit:
                    break
                if sending.delivery.next_attempt_at > moment or (
                        sending.held_until is not None and sending.held_until > moment):
                    continue
                delivery = dataclasses.replace(sending.delivery, attempts=sending.delivery.attempts + 1)
                self.pending_rows[id] = _Sending(delivery, held_until=moment + timedelta(seconds=lease))
                claimed.append(delivery)
            return claimed

    def succeeded(self, id: int, *, status_code: int, at: datetime) -> None:
        with self.lock:
            self._finish(id, status=SUCCEEDED, last_status_code=status_code, last_error="",
                         last_attempt_at=aware(at))

    def retry(self, id: int, *, status_code: int | None, error: str, at: datetime,
              due_at: datetime) -> None:
        with self.lock:
            sending = self.pending_rows.get(id) if isinstance(id, int) else None
            if sending is not None:
                self.pending_rows[id] = _Sending(dataclasses.replace(
                    sending.delivery, last_status_code=status_code, last_error=error, last_attempt_at=aware(at),
                    next_attempt_at=aware(due_at)))

    def failed(self, id: int, *, status_code: int | None, error: str, at: datetime) -> None:
        with self.lock:
            self._finish(id, status=FAILED, last_status_code=status_code, last_error=error,
                         last_attempt_at=aware(at))

    def get(self, id: int) -> Delivery | None:
        with self.lock:
            return self._find(id) if isinstance(id, int) else None

    def list(self, webhook_id: int, *, after_id: int = 0, limit: int = 50) -> Page:
        with self.lock:
            ids = self.by_webhook.get(webhook_id, [])
            items: list[Delivery] = []
            for i in range(bisect.bisect_right(ids, after_id), len(ids)):
                delivery = self._find(ids[i])
                if delivery is not None:
                    items.append(delivery)
                    if len(items) > limit:
                        break
            more = len(items) > limit
            items = items[:limit]
            return Page(items=items, next_after_id=items[-1].id if more and items else None)

    def pending(self) -> int:
        with self.lock:
            return len(self.pending_rows)


class OAuthClientStore(_Records):
    """OAuth clients, soft-deleted like the other records: ``client_id`` unique among
    live clients. The lists are kept as tuples in the order given."""

    UPDATABLE = ("name", "redirect_uris", "post_logout_redirect_uris", "grant_types", "scopes",
                 "id_token_signed_response_alg", "first_party", "secret_hash")
    LISTS = ("redirect_uris", "post_logout_redirect_uris", "grant_types", "scopes")

    def _taken(self, client_id: str) -> bool:
        return any(c.client_id == client_id for c in self._live_where())

    def create(self, *, client_id: str, name: str, type: str, redirect_uris: Iterable[str],
               post_logout_redirect_uris: Iterable[str], grant_types: Iterable[str], scopes: Iterable[str],
               id_token_signed_response_alg: str, first_party: bool, secret_hash: str | None) -> OAuthClient:
        with self.lock:
            if self._taken(client_id):
                raise Conflict("client_id")
            return self._insert(lambda id, uuid, stamp: OAuthClient(
                id=id, uuid=uuid, client_id=client_id, name=name, type=type, redirect_uris=tuple(redirect_uris),
                post_logout_redirect_uris=tuple(post_logout_redirect_uris), grant_types=tuple(grant_types),
                scopes=tuple(scopes), id_token_signed_response_alg=id_token_signed_response_alg,
                first_party=first_party, created_at=stamp, updated_at=stamp, deleted_at=None,
                secret_hash=secret_hash,
            ))

    def get_by_client_id(self, client_id: str) -> OAuthClient | None:
        if not isinstance(client_id, str):
            return None
        with self.lock:
            found = self._live_where(client_id=client_id)
            return found[0] if found else None

    def update(self, id: int, **changes: Any) -> OAuthClient:
        changes = {name: tuple(value) if name in self.LISTS and value is not None else value
                   for name, value in changes.items()}
        with self.lock:
            client = self._live_or_404(id)
            changed = self._changed(client, changes, self.UPDATABLE)
            return self._store(dataclasses.replace(client, **changed, updated_at=now())) if changed else client

    def revoke_tokens(self, id: int) -> OAuthClient | None:
        with self.lock:
            client = self._live(id)
            if client is None:
                return None
            return self._store(dataclasses.replace(client, token_generation=client.token_generation + 1))


class ConsentStore:
    """One consent per (user, client), in the order they were first given."""

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: dict[tuple[str, str], Consent] = {}
        self._last_id = 0

    def _snapshot(self):
        return dict(self.rows), self._last_id

    def _restore(self, state) -> None:
        self.rows, self._last_id = state

    def get(self, user_uuid: str, client_id: str) -> Consent | None:
        with self.lock:
            return self.rows.get((user_uuid, client_id)) if isinstance(user_uuid, str) else None

    def grant(self, user_uuid: str, client_id: str, scopes: Iterable[str]) -> Consent:
        with self.lock:
            found = self.rows.get((user_uuid, client_id))
            stamp = now()
            if found is None:
                self._last_id += 1
                consent = Consent(id=self._last_id, uuid=new_uuid(), user_uuid=user_uuid, client_id=client_id,
                                  scopes=tuple(sorted(set(scopes))), created_at=stamp, updated_at=stamp)
            else:
                union = tuple(sorted(set(found.scopes) | set(scopes)))
                if union == found.scopes:
                    return found
                consent = dataclasses.replace(found, scopes=union, updated_at=stamp)
            self.rows[(user_uuid, client_id)] = consent
            return consent

    def of_user(self, user_uuid: str) -> list[Consent]:
        with self.lock:
            return sorted((c for c in self.rows.values() if c.user_uuid == user_uuid), key=lambda c: c.id)

    def withdraw(self, user_uuid: str, client_id: str) -> bool:
        with self.lock:
            if not isinstance(user_uuid, str) or not isinstance(client_id, str):
                return False
            return self.rows.pop((user_uuid, client_id), None) is not None


class AuthorizationCodeStore:
    """Authorization codes by hash; a used one stays findable until pruned, a day after
    it expired."""

    #: Codes that expired a day or more ago that one ``add`` deletes, at most.
    PRUNE_BATCH = 100

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: dict[str, AuthorizationCode] = {}  # insertion (so creation) order
        self._last_id = 0

    def _snapshot(self):
        return dict(self.rows), self._last_id

    def _restore(self, state) -> None:
        self.rows, self._last_id = state

    def add(self, *, code_hash: str, client_id: str, user_uuid: str, redirect_uri: str, scope: str,
            nonce: str | None, code_challenge: str | None, code_challenge_method: str | None,
            auth_time: datetime, amr: Iterable[str], op_session_uuid: str | None, session_uuid: str,
            expires_at: datetime) -> AuthorizationCode:
        with self.lock:
            stamp = now()
            cutoff = stamp - timedelta(days=1)
            stale = [key for key, code in self.rows.items() if code.expires_at < cutoff][:self.PRUNE_BATCH]
            for key in stale:
                del self.rows[key]
            if code_hash in self.rows:
                raise Conflict("code_hash")
            self._last_id += 1
            code = AuthorizationCode(
                id=self._last_id, code_hash=code_hash, client_id=client_id, user_uuid=user_uuid,
                redirect_uri=redirect_uri, scope=scope, nonce=nonce, code_challenge=code_challenge,
                code_challenge_method=code_challenge_method, auth_time=aware(auth_time), amr=tuple(amr),
                op_session_uuid=op_session_uuid, session_uuid=session_uuid, created_at=stamp,
                expires_at=aware(expires_at))
            self.rows[code_hash] = code
            return code

    def find(self, code_hash: str) -> AuthorizationCode | None:
        with self.lock:
            return self.rows.get(code_hash) if isinstance(code_hash, str) else None

    def use(self, code_hash: str, *, now: datetime) -> AuthorizationCode | None:
        with self.lock:  # find and mark under one lock: one of concurrent exchanges wins
            code = self.rows.get(code_hash) if isinstance(code_hash, str) else None
            if code is None or code.used_at is not None or code.expires_at <= aware(now):
                return None
            used = dataclasses.replace(code, used_at=aware(now))
            self.rows[code_hash] = used
            return used


class PasskeyStore:
    """Users' passkeys by id, in creation order; removed ones are gone. The counter
    check of ``use`` and its write happen under the one lock: of concurrent sign-ins
    with one count, one wins."""

    def __init__(self, db: "MemoryStorage"):
        self.lock = db.lock
        self.rows: dict[int, Passkey] = {}  # by id, in creation order
        self._last_id = 0

    def _snapshot(self):
        return dict(self.rows), self._last_id

    def _restore(self, state) -> None:
        self.rows, self._last_id = state

    def add(self, *, user_uuid: str, credential_id: str, public_key: str, sign_count: int, name: str,
            transports: Iterable[str], aaguid: str, backed_up: bool) -> Passkey:
        with self.lock:
            if any(p.credential_id == credential_id for p in self.rows.values()):
                raise Conflict("credential", "Already registered.")
            self._last_id += 1
            passkey = Passkey(id=self._last_id, uuid=new_uuid(), user_uuid=user_uuid, credential_id=credential_id,
                              public_key=public_key, sign_count=sign_count, name=name,
                              transports=tuple(transports), aaguid=aaguid, backed_up=bool(backed_up),
                              created_at=now())
            self.rows[passkey.id] = passkey
            return passkey

    def of_user(self, user_uuid: str) -> list[Passkey]:
        with self.lock:
            return [p for p in self.rows.values() if p.user_uuid == user_uuid]

    def get_by_credential_id(self, credential_id: str) -> Passkey | None:
        if not isinstance(credential_id, str):
            return None
        with self.lock:
            return next((p for p in self.rows.values() if p.credential_id == credential_id), None)

    def use(self, id: int, *, sign_count: int, now: datetime) -> Passkey | None:
        if type(sign_count) is not int or sign_count < 0:
            raise ValueError("sign_count must be an int, 0 or more")
        with self.lock:
            passkey = self.rows.get(id) if type(id) is int else None
            if passkey is None:
                return None
            if not (passkey.sign_count < sign_count or passkey.sign_count == sign_count == 0):
                return None  # the counter did not move on
            used = dataclasses.replace(passkey, sign_count=sign_count, last_used_at=aware(now))
            self.rows[id] = used
            return used

    def _mine(self, user_uuid: str, id: int) -> Passkey | None:
        passkey = self.rows.get(id) if type(id) is int else None
        return passkey if passkey is not None and passkey.user_uuid == user_uuid else None

    def rename(self, user_uuid: str, id: int, name: str) -> Passkey | None:
        with self.lock:
            passkey = self._mine(user_uuid, id)
            if passkey is None:
                return None
            renamed = self.rows[id] = dataclasses.replace(passkey, name=name)
            return renamed

    def remove(self, user_uuid: str, id: int) -> Passkey | None:
        with self.lock:
            passkey = self._mine(user_uuid, id)
            return None if passkey is None else self.rows.pop(id)


class MemoryStorage:
    """The ``memory`` storage provider: a :class:`locky.Storage` in one process's memory."""

    def __init__(self):
        # One re-entrant lock for everything: each method is atomic, like a transaction.
        self.lock = threading.RLock()
        self._revision = 1
        self.users = UserStore(self)
        self.groups = GroupStore(self)
        self.members = MemberStore(self)
        self.roles = RoleStore(self)
        self.sessions = SessionStore(self)
        self.throttle = LoginThrottle(self)
        self.grants = GrantStore(self)
        self.codes = CodeStore(self)
        self.outbox = Outbox(self)
        self.totp = TotpStore(self)
        self.keys = KeyStore(self)
        self.audit = AuditStore(self)
        self.webhooks = WebhookStore(self)
        self.deliveries = DeliveryStore(self)
        self.oauth_clients = OAuthClientStore(self)
        self.consents = ConsentStore(self)
        self.oauth_codes = AuthorizationCodeStore(self)
        self.passkeys = PasskeyStore(self)
        self._depth = 0  # how many atomic() blocks are open (in the thread holding the lock)

    _STORES = ("users", "groups", "members", "roles", "sessions", "throttle", "grants", "codes", "outbox", "totp",
               "keys", "audit", "webhooks", "deliveries", "oauth_clients", "consents", "oauth_codes", "passkeys")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Hold the lock for the block; an exception leaving the outermost block puts
        back the state it started from (nested blocks join the outer one)."""
        with self.lock:
            saved = self._snapshot() if self._depth == 0 else None
            self._depth += 1
            try:
                yield
            except BaseException:
                if saved is not None:
                    self._restore(saved)
                raise
            finally:
                self._depth -= 1

    def _snapshot(self):
        return self._revision, {name: getattr(self, name)._snapshot() for name in self._STORES}

    def _restore(self, saved) -> None:
        self._revision, stores = saved
        for name, state in stores.items():
            getattr(self, name)._restore(state)

    def _bump(self) -> None:
        self._revision += 1

    def revision(self) -> int:
        with self.lock:
            return self._revision

    # A memory storage is born empty with the latest schema: nothing to carry forward.
    SCHEMA_VERSION = 1

    def schema(self) -> SchemaState:
        return SchemaState(current=self.SCHEMA_VERSION, latest=self.SCHEMA_VERSION)

    def migrate(self, *, dry_run: bool = False) -> list[Migration]:
        return []

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""
