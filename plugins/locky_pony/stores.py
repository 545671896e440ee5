"""The record stores of the Pony backend: users, groups, members, roles.

A store's reads are plain SQL (:mod:`.reads`: one statement each, no entity layer);
this module decides what they mean (which filters a kind has, emails lowercased,
``None`` for a filter not given). Its writes go through Pony's entities, each write one
:func:`~.guard.transaction`; entity rows are turned into :mod:`locky.records`
dataclasses before they leave it.

Writes that depend on other rows lock before they read (``get_for_update``: SELECT ...
FOR UPDATE), and the lock is each transaction's FIRST statement:

- PostgreSQL: Pony runs the reads before a transaction's first write or lock in
  autocommit mode, each seeing its own moment; a read that decides must come after
  the lock, which also re-checks its WHERE against the row as the locker left it.
- MariaDB (REPEATABLE READ): a plain SELECT reads the snapshot taken at the
  transaction's first plain SELECT; taking the lock first puts that snapshot after
  whatever the lock waited for.
- SQLite has no row locks: Pony emulates FOR UPDATE by starting the transaction with
  BEGIN IMMEDIATE (the database's write lock); a read before it runs outside the
  transaction, so again the lock comes first.

Membership changes of one group serialize on its row (adding, removing, deleting the
group); adding also locks the user (against its deletion) and holds a shared lock on
the role (against its deletion or rename, without serializing every add that names
the same role). So no order of concurrent requests leaves a live membership on a
deleted group, user or role, or a group whose last owner left.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime
from operator import attrgetter
from typing import Any, Callable, Iterable

from locky import Conflict, Group, Invalid, Member, NotFound, Page, Permission, Role, User, utcnow

from . import compat
from .guard import integrity_errors, transaction
from .inserts import insert
from .reader import Reader
from .reads import CACHE_REVISION, RecordReads, column, is_id, record_builder

#: The role a group's creator gets; a group keeps at least one live member holding it.
OWNER = "owner"
#: Fields of every record that only storage writes: ``update`` refuses them.
STORAGE_OWNED = frozenset({"id", "uuid", "created_at", "updated_at", "deleted_at", "del_token"})
#: Fields an ``update`` of ``""`` clears (stored as NULL): a provisioning system's id.
CLEARABLE = frozenset({"external_id"})


def new_uuid() -> str:
    return str(uuidlib.uuid4())


#: The records the writes answer, built from the row (or the values written).
user_record = record_builder(User)
group_record = record_builder(Group)
member_record = record_builder(Member)
role_record = record_builder(Role)


def soft_delete(row, now: datetime) -> None:
    row.deleted_at = now
    row.updated_at = now
    row.del_token = row.id


def move_policy_revision(entities) -> None:
    """A role or a global grant changes in this transaction: move the policy revision
    with it, so that the authorizer reloads (``Storage.revision``)."""
    entities.Meta.get_for_update(key="policy_revision").number += 1


def move_cache_revision(entities) -> None:
    """A user's record or a role in a group changes, or a user is made, in this
    transaction: move the cache revision with it, so that no worker serves what it read
    before (:mod:`.revision_bus`)."""
    row = entities.Meta.get_for_update(key=CACHE_REVISION)
    if row is not None:
        row.number += 1


class Collection:
    """Reads and soft deletes shared by every record kind."""

    #: The entity (a name in ``entities``) and the record of this kind.
    entity_name: str
    record: type
    #: Builds the record from an entity row (the writes' answers).
    to_record: Callable[[Any], Any]
    filters: tuple[str, ...] = ()

    def __init__(self, entities, reader: Reader):
        self.entities = entities
        self.entity = getattr(entities, self.entity_name)
        self.reads = RecordReads(reader, self.entity, self.record)

    # -- reads: one plain-SQL statement each ---------------------------------------

    def get(self, id: int):
        return self.reads.get(id)

    def get_by_uuid(self, uuid: str):
        return self.reads.find(uuid=uuid) if isinstance(uuid, str) else None

    def get_many_by_uuid(self, uuids: Iterable[str]) -> dict[str, Any]:
        return {record.uuid: record for record in self._live_of("uuid", uuids, unique=True)}

    def _live_of(self, name: str, values: Iterable[Any], *, unique: bool = False) -> list:
        """The live records whose column ``name`` (``unique`` or not) is one of the
        ``str`` among ``values``, in no order (:meth:`.reads.RecordReads.find_many`)."""
        wanted = sorted({value for value in values if isinstance(value, str)})
        return self.reads.find_many(name, wanted, unique=unique) if wanted else []

    def list(self, *, after_id: int = 0, limit: int = 50, **filters: Any) -> Page:
        return self.reads.page(after_id, limit, self.given_filters(filters))

    def list_documents(self, fields: tuple[tuple[str, str], ...], *, after_id: int = 0, limit: int = 50,
                       **filters: Any) -> Page:
        return self.reads.page_documents(fields, after_id, limit, self.given_filters(filters))

    def count(self, **filters: Any) -> int:
        return self.reads.count(self.given_filters(filters))

    def given_filters(self, filters: dict[str, Any]) -> dict[str, Any]:
        """The filters to apply, as stored values: unknown names are a ``ValueError``,
        ``None`` means "not given"."""
        unknown = set(filters) - set(self.filters)
        if unknown:
            raise ValueError(f"unknown filter(s): {', '.join(sorted(unknown))}")
        return {k: v for k, v in filters.items() if v is not None}

    # -- writes ------------------------------------------------------------------------

    def updatable(self) -> frozenset[str]:
        """The fields ``update`` may change: the entity's own columns, less those storage
        keeps itself (ids, uuid, timestamps, the delete token)."""
        return compat.plain_attributes(self.entity) - STORAGE_OWNED

    def _live(self, id: int):
        """The live row ``id``, locked for the rest of the transaction (see the module's
        docstring: every write locks the row it changes before it reads anything)."""
        if not is_id(id):
            return None
        row = self.entity.get_for_update(id=id)
        return row if row is not None and row.del_token == 0 else None

    def _locked_record(self, uuid: str):
        """The live record ``uuid``, its row locked for the rest of the transaction (a
        caller's atomic block: until it commits), or ``None``: what ``for_update`` of the
        users and of the groups answers."""
        if not isinstance(uuid, str):
            return None
        row = self.entity.get_for_update(uuid=uuid, del_token=0)
        return None if row is None else self.to_record(row)

    def _live_or_404(self, id: int):
        row = self._live(id)
        if row is None:
            raise NotFound()
        return row

    @transaction
    def delete(self, id: int):
        row = self._live_or_404(id)  # locked: the checks below see what the lock waited for
        self._before_delete(row)
        soft_delete(row, utcnow())
        self._after_delete(row)
        return self.to_record(row)

    def _before_delete(self, row) -> None:
        """Refuse a delete by raising (roles held by members)."""

    def _after_delete(self, row) -> None:
        """Cascade a delete inside the same transaction."""

    def _update(self, id: int, changes: dict[str, Any], unique_field: str, conflict_message: str):
        unknown = set(changes) - self.updatable()
        if unknown:  # a field the record lacks, or one storage owns (id, uuid, timestamps)
            raise ValueError(f"cannot update field(s): {', '.join(sorted(unknown))}")
        row = self._live_or_404(id)
        # ``None`` leaves a field as stored; ``""`` clears a field that may be NULL.
        wanted = {k: None if v == "" and k in CLEARABLE else v for k, v in changes.items() if v is not None}
        changed = {k: v for k, v in wanted.items() if getattr(row, k) != v}
        with integrity_errors(Conflict(unique_field, conflict_message)):
            if changed:
                row.set(**changed, updated_at=utcnow())
            row.flush()
        return row


def _email(value):
    # The API lowercases emails already; doing it here too keeps uniqueness
    # case-insensitive for every caller of the storage interface.
    return value.lower() if isinstance(value, str) else value


class UserStore(Collection):
    entity_name, record, to_record = "User", User, staticmethod(user_record)
    filters = ("email", "external_id")

    def given_filters(self, filters: dict[str, Any]) -> dict[str, Any]:
        given = super().given_filters(filters)
        if "email" in given:
            given["email"] = _email(given["email"])
        return given

    @transaction
    def create(self, *, name: str, email: str, password_hash: str, external_id: str | None = None) -> User:
        email = _email(email)
        now = utcnow()
        with integrity_errors(Conflict("email", "Already registered.")):
            row = insert(self.entity, uuid=new_uuid(), created_at=now, updated_at=now,
                         name=name, email=email, password_hash=password_hash, external_id=external_id or None)
        move_cache_revision(self.entities)  # the pages and counts of users kept hold one more
        return user_record(row)

    def get_by_email(self, email: str) -> User | None:
        return self.reads.find(email=_email(email)) if isinstance(email, str) else None

    @transaction
    def update(self, id: int, **changes: Any) -> User:
        if "email" in changes:
            changes = {**changes, "email": _email(changes["email"])}
            row = self._live_or_404(id)
            if changes["email"] not in (None, row.email):
                changes.setdefault("email_verified", False)  # a new address is not proved yet
        row = self._update(id, changes, "email", "Already registered.")
        move_cache_revision(self.entities)
        return user_record(row)

    @transaction
    def for_update(self, uuid: str) -> User | None:
        # Inside a caller's atomic block the lock holds until it commits (see the module
        # docstring: the block's first statement); alone it is a fresh primary read.
        return self._locked_record(uuid)

    @transaction
    def mark_verified(self, uuid: str, email: str) -> User | None:
        if not isinstance(uuid, str) or not isinstance(email, str):
            return None
        row = self.entity.get_for_update(uuid=uuid, del_token=0)
        if row is None or row.email != _email(email):
            return None
        if not row.email_verified:
            row.set(email_verified=True, updated_at=utcnow())
            move_cache_revision(self.entities)
        return user_record(row)

    def _after_delete(self, row) -> None:
        move_cache_revision(self.entities)
        now = row.deleted_at
        for member in row.memberships.select(lambda m: m.del_token == 0):
            soft_delete(member, now)
        for session in self.entities.Session.select(
            lambda s: s.user_uuid == row.uuid and s.revoked_at is None
        ):
            session.revoked_at = now


class GroupStore(Collection):
    entity_name, record, to_record = "Group", Group, staticmethod(group_record)
    filters = ("name", "external_id")

    @transaction
    def create(self, *, name: str, description: str, owner_uuid: str | None,
               external_id: str | None = None) -> Group:
        # Locked: a user deleted at the same time is either gone here or finds (and
        # ends) this owner membership. No owner: a provisioning system's group, made
        # empty (its members come later, one by one).
        owner = None
        if owner_uuid is not None:
            if isinstance(owner_uuid, str):
                owner = self.entities.User.get_for_update(uuid=owner_uuid, del_token=0)
            if owner is None:
                raise Invalid.one("owner_uuid", "No such user.")
        now = utcnow()
        with integrity_errors(Conflict("name")):
            row = insert(self.entity, uuid=new_uuid(), created_at=now, updated_at=now, name=name,
                         description=description, external_id=external_id or None)
        if owner is None:
            return group_record(row)
        # The owner's roles in their groups, which workers may keep (``roles_by_group``):
        # moved after the owner's lock, before the membership, as ``MemberStore.create``.
        move_cache_revision(self.entities)
        self.entities.Member(
            uuid=new_uuid(), created_at=now, updated_at=now, group=row.row, user=owner,
            group_uuid=row.uuid, user_uuid=owner.uuid, role="owner",
        )
        return group_record(row)

    @transaction
    def for_update(self, uuid: str) -> Group | None:
        # As UserStore.for_update: inside a caller's atomic block the lock holds until
        # it commits; alone it is a fresh primary read.
        return self._locked_record(uuid)

    @transaction
    def update(self, id: int, **changes: Any) -> Group:
        return group_record(self._update(id, changes, "name", "Already exists."))

    def _after_delete(self, row) -> None:
        move_cache_revision(self.entities)  # its members' roles in it end
        for member in row.memberships.select(lambda m: m.del_token == 0):
            soft_delete(member, row.deleted_at)


class MemberStore(Collection):
    entity_name, record, to_record = "Member", Member, staticmethod(member_record)
    filters = ("group_uuid", "user_uuid", "role")

    def of_users(self, user_uuids: Iterable[str]) -> list[Member]:
        return sorted(self._live_of("user_uuid", user_uuids), key=attrgetter("id"))

    def of_groups(self, group_uuids: Iterable[str]) -> list[Member]:
        return sorted(self._live_of("group_uuid", group_uuids), key=attrgetter("id"))

    @transaction
    def create(self, *, group_uuid: str, user_uuid: str, role: str,
               authorize: Callable[[], None] | None = None) -> Member:
        # Locky decides before calling this, in its atomic block (it reads the
        # references and asks its policy: docs/plugins.md); ``authorize`` is no longer
        # in the storage protocol and is kept for callers written against the earlier
        # one: called after the reference checks, whatever it raises rolls back.
        # Each reference is locked as it is found (group, user, then the role shared),
        # so a concurrent delete of any of them waits for this insert and then sees
        # (and ends, or refuses to delete under) the new membership, or went first and
        # the lock finds the row gone.
        e = self.entities
        group = e.Group.get_for_update(uuid=group_uuid, del_token=0)
        if group is None:
            raise Invalid.missing("group_uuid")
        user = e.User.get_for_update(uuid=user_uuid, del_token=0)
        if user is None:
            raise Invalid.missing("user_uuid")
        if not self._role_is_live(role):
            raise Invalid.missing("role")
        if authorize is not None:
            authorize()
        # A role in a group, which workers may keep (:mod:`.revision_bus`). The number's
        # row is locked after the group's, the user's and the role's and before any
        # membership's, as a user's or a group's delete takes them: no lock cycle.
        move_cache_revision(e)
        now = utcnow()
        with integrity_errors(Conflict("user_uuid", "Already a member of this group.")):
            row = insert(self.entity, uuid=new_uuid(), created_at=now, updated_at=now, group=group, user=user,
                         group_uuid=group.uuid, user_uuid=user.uuid, role=role)
        return member_record(row)

    def _role_is_live(self, name: str) -> bool:
        """Whether a live role has this name, holding a shared lock on its row until
        the transaction ends: a role delete or rename (which lock it exclusively) waits,
        while other adds naming the same role go on.

        The lock is taken by primary key, where the role's own writes take theirs, and
        the row is checked again as locked. On MariaDB a locking read of the name through
        the (name, del_token) index is covered by that index and locks only its entry,
        which a delete holding the row by id does not wait for (orphans in the race
        tests). SQLite has no row locks; there the transaction already holds the
        database's write lock.

        The name is looked up in SQL, never in Pony's session cache: a caller's atomic
        block may have loaded the role's row before (the policy's reload reads the
        custom roles), and a delete may have committed since (an orphan on SQLite).
        """
        if not isinstance(name, str):
            return False
        db = compat.database_of(self.entity)
        provider = db.provider
        role = self.entities.Role
        table, id_column = provider.quote_name(compat.table(role)), column(provider, role, "id")
        found = db.select(f"SELECT {id_column} FROM {table} WHERE {column(provider, role, 'name')} = $name"
                          f" AND {column(provider, role, 'del_token')} = 0", {"name": name})
        if not found:
            return False
        if provider.dialect == "SQLite":
            return True
        share = "FOR SHARE" if provider.dialect == "PostgreSQL" else "LOCK IN SHARE MODE"
        sql = (f"SELECT {column(provider, role, 'name')}, {column(provider, role, 'del_token')}"
               f" FROM {table} WHERE {id_column} = $id {share}")
        rows = db.select(sql, {"id": found[0]})
        return bool(rows) and tuple(rows[0]) == (name, 0)

    def delete(self, id: int) -> Member:
        # Which group to lock first: a membership never moves to another group, so the
        # read needs no lock (one that turns out deleted is a 404 below).
        found = self.reads.get(id)
        if found is None:
            raise NotFound()
        return self._delete(id, found.group_uuid)

    @transaction
    def _delete(self, id: int, group_uuid: str) -> Member:
        # The group's row first, as adding and deleting a group take it: two owners
        # leaving at once serialize here, and the second sees the first one gone.
        self.entities.Group.get_for_update(uuid=group_uuid)
        move_cache_revision(self.entities)  # before the membership's row, as in create
        row = self._live_or_404(id)
        if row.role == OWNER and not self.entity.exists(
            lambda m: m.group_uuid == group_uuid and m.role == OWNER and m.del_token == 0 and m.id != id
        ):
            raise Invalid.one("role", "The group's last owner cannot leave it; make another member owner first.")
        soft_delete(row, utcnow())
        return member_record(row)

    def role_of(self, user_uuid: str, group_uuid: str) -> str | None:
        if not (isinstance(user_uuid, str) and isinstance(group_uuid, str)):
            return None
        member = self.reads.find(group_uuid=group_uuid, user_uuid=user_uuid)
        return None if member is None else member.role


class RoleStore(Collection):
    entity_name, record, to_record = "Role", Role, staticmethod(role_record)
    filters = ("name",)

    @staticmethod
    def _permissions(permissions: Iterable[Permission]) -> list[dict[str, str]]:
        unique = dict.fromkeys((p.resource, p.action) for p in permissions)
        return [{"resource": r, "action": a} for r, a in unique]

    @transaction
    def create(self, *, name: str, description: str, permissions: Iterable[Permission]) -> Role:
        now = utcnow()
        with integrity_errors(Conflict("name")):
            row = insert(self.entity, uuid=new_uuid(), created_at=now, updated_at=now, name=name,
                         description=description, permissions=self._permissions(permissions))
        move_policy_revision(self.entities)
        return role_record(row)

    @transaction
    def update(self, id: int, **changes: Any) -> Role:
        row = self._live_or_404(id)
        if row.builtin:
            raise Invalid.one("name", "Built-in roles cannot be changed.")
        if changes.get("name") not in (None, row.name) and self._held(row.name):
            raise Invalid.one("name", "Cannot rename a role held by live memberships or grants.")
        if changes.get("permissions") is not None:
            changes["permissions"] = self._permissions(changes["permissions"])
        row = self._update(id, changes, "name", "Already exists.")
        move_policy_revision(self.entities)
        return role_record(row)

    def _held(self, name: str) -> bool:
        """Whether anything refers to the role by name: a live membership or a global
        grant. Such a role keeps its name and stays (a new role of that name would
        otherwise inherit them). Called with the role's row locked, which every add of a
        membership naming it waits for."""
        e = self.entities
        return (e.Member.exists(lambda m: m.role == name and m.del_token == 0)
                or e.Grant.exists(lambda g: g.role == name))

    def _before_delete(self, row) -> None:
        if row.builtin:
            raise Invalid.one("name", "Built-in roles cannot be deleted.")
        if self._held(row.name):
            raise Invalid.one("name", "The role is held by live memberships or grants.")

    def _after_delete(self, row) -> None:
        move_policy_revision(self.entities)

    # Worker processes starting together on a new database all insert the built-in
    # roles: the loser of that race runs again, finds the winner's rows, and is done.
    @transaction(retries=5, retry_conflicts=True)
    def sync_builtin(self, roles) -> None:
        wanted = {role.name: role for role in roles}
        now = utcnow()
        for row in self.entity.select(lambda r: r.builtin and r.del_token == 0):
            if row.name not in wanted:
                soft_delete(row, now)
        for name, role in wanted.items():
            permissions = self._permissions(role.permissions)
            row = self.entity.get(name=name, del_token=0)
            if row is None:
                self.entity(
                    uuid=new_uuid(), created_at=now, updated_at=now, name=name,
                    description=role.description, permissions=permissions, builtin=True,
                )
            elif (row.description, row.permissions, row.builtin) != (role.description, permissions, True):
                row.set(description=role.description, permissions=permissions, builtin=True, updated_at=now)

    @transaction
    def custom_permissions(self) -> dict[str, tuple[Permission, ...]]:
        rows = self.entity.select(lambda r: not r.builtin and r.del_token == 0)
        return {
            row.name: tuple(Permission(p["resource"], p["action"]) for p in row.permissions)
            for row in rows
        }
