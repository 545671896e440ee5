"""``MemoryStorage``: every record in process memory, behind one lock.

It implements :class:`locky.Storage` using only Locky's public API (``locky.records``
dataclasses in and out, ``locky`` errors), which is all a storage plugin needs. The
records are frozen dataclasses, so handing the stored objects out is safe: a change
always stores a new object (``dataclasses.replace``).

Everything lives as long as the app: nothing is saved, and each worker process of
``locky serve`` has its own copy, so serve it with ``--workers 1``.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import threading
import time
import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from locky import Conflict, Group, Invalid, Member, Migration, NotFound, Page, Permission, Role, SchemaState, Session, User
from locky.records import Authenticated


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_uuid() -> str:
    return str(uuidlib.uuid4())


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
        return {k: v for k, v in changes.items() if v is not None and getattr(record, k) != v}

    # -- the RecordStore protocol ----------------------------------------------

    def get(self, id: int):
        with self.lock:
            return self._live(id)

    def get_by_uuid(self, uuid: str):
        with self.lock:
            return self._live(self.by_uuid.get(uuid)) if isinstance(uuid, str) else None

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
    filters = ("email",)

    def _filters(self, filters):
        wanted = super()._filters(filters)
        if isinstance(wanted.get("email"), str):
            wanted["email"] = wanted["email"].lower()
        return wanted

    def _email_taken(self, email: str, but: int | None = None) -> bool:
        return any(u.email == email and u.id != but for u in self._live_where())

    def create(self, *, name: str, email: str, password_hash: str) -> User:
        email = email.lower()
        with self.lock:
            if self._email_taken(email):
                raise Conflict("email", "Already registered.")
            return self._insert(lambda id, uuid, stamp: User(
                id=id, uuid=uuid, created_at=stamp, updated_at=stamp, deleted_at=None,
                name=name, email=email, password_hash=password_hash,
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
            changed = self._changed(user, changes, ("name", "email", "password_hash"))
            if "email" in changed and self._email_taken(changed["email"], but=id):
                raise Conflict("email", "Already registered.")
            return self._store(dataclasses.replace(user, **changed, updated_at=now())) if changed else user

    def _after_delete(self, user: User) -> None:
        members = self.db.members
        for member in members._live_where(user_uuid=user.uuid):
            members._soft_delete(member, user.deleted_at)
        self.db.sessions._revoke_all(user.uuid, user.deleted_at)


class GroupStore(_Records):
    filters = ("name",)

    def create(self, *, name: str, description: str, owner_uuid: str) -> Group:
        with self.lock:
            owner = self.db.users.get_by_uuid(owner_uuid)
            if owner is None:
                raise Invalid.one("owner_uuid", "No such user.")
            if self._live_where(name=name):
                raise Conflict("name")
            group = self._insert(lambda id, uuid, stamp: Group(
                id=id, uuid=uuid, created_at=stamp, updated_at=stamp, deleted_at=None,
                name=name, description=description,
            ))
            self.db.members._add(group.uuid, owner.uuid, "owner")
            return group

    def update(self, id: int, **changes: Any) -> Group:
        with self.lock:
            group = self._live_or_404(id)
            changed = self._changed(group, changes, ("name", "description"))
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

    def create(self, *, group_uuid: str, user_uuid: str, role: str,
               authorize: Callable[[], None] | None = None) -> Member:
        # All under the lock, as one transaction: the references the caller's policy
        # check relies on cannot change between the check and the insert.
        with self.lock:
            if self.db.groups.get_by_uuid(group_uuid) is None:
                raise Invalid.missing("group_uuid")
            if self.db.users.get_by_uuid(user_uuid) is None:
                raise Invalid.missing("user_uuid")
            if not self.db.roles._live_where(name=role):
                raise Invalid.missing("role")
            if authorize is not None:
                authorize()  # may raise Forbidden: nothing is written yet
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

    def create(self, *, uuid: str, user_uuid: str, refresh_jti: str) -> Session:
        with self.lock:
            session = Session(uuid=uuid, user_uuid=user_uuid, created_at=now(), revoked_at=None,
                              refresh_jti=refresh_jti)
            self.rows[uuid] = session
            return session

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
        revoked = 0
        for uuid, session in list(self.rows.items()):
            if session.user_uuid == user_uuid and session.revoked_at is None and uuid != keep:
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

    def reset(self, key: str) -> bool:
        with self.lock:
            return self.windows.pop(key, None) is not None

    def forgive(self, key: str) -> None:
        with self.lock:
            entry = self.windows.get(key)
            if entry is not None and entry[1] > 0:
                entry[1] -= 1

    def prune(self, *, window: int, batch: int = 1000) -> int:
        with self.lock:
            return self._prune(time.time(), window, batch)

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
