"""Pony entities, declared per ``Database`` so that every app owns its own mapping.

"Unique among live rows" is enforced by the database on every engine with the
``del_token`` scheme: 0 while a row is live, its own id once soft-deleted, and a
composite unique key over (value, del_token). Emails are stored lowercased, so the
uniqueness is case-insensitive everywhere.
"""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

from pony.orm import Json, Optional, PrimaryKey, Required, Set, composite_index, composite_key

#: Bumped whenever the tables change; stored in ``locky_meta``.
SCHEMA_VERSION = 1


def define_entities(db) -> SimpleNamespace:
    """Declare Locky's tables on ``db`` and return the entity classes."""

    class UserRow(db.Entity):
        _table_ = "locky_users"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        name = Required(str, 255)
        email = Required(str, 254)
        password_hash = Required(str, 255)
        memberships = Set("MemberRow")
        composite_key(email, del_token)

    class GroupRow(db.Entity):
        _table_ = "locky_groups"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        name = Required(str, 255)
        description = Optional(str, 1024, default="")
        memberships = Set("MemberRow")
        composite_key(name, del_token)

    class MemberRow(db.Entity):
        _table_ = "locky_members"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        group = Required(GroupRow)
        user = Required(UserRow)
        # Denormalised so lists and filters need no join.
        group_uuid = Required(str, 36)
        user_uuid = Required(str, 36)
        role = Required(str, 64)
        composite_key(group, user, del_token)
        composite_index(group_uuid, del_token)
        composite_index(user_uuid, del_token)
        composite_index(role, del_token)

    class RoleRow(db.Entity):
        _table_ = "locky_roles"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        name = Required(str, 64)
        description = Optional(str, 1024, default="")
        permissions = Required(Json)
        builtin = Required(bool, default=False)
        composite_key(name, del_token)

    class SessionRow(db.Entity):
        _table_ = "locky_sessions"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True)
        user_uuid = Required(str, 36, index=True)
        created_at = Required(datetime, precision=6)
        revoked_at = Optional(datetime, precision=6)
        refresh_jti = Required(str, 64)

    class ThrottleRow(db.Entity):
        _table_ = "locky_login_throttle"
        key = PrimaryKey(str, 254)
        window_start = Required(float)
        attempts = Required(int)

    class GrantRow(db.Entity):
        _table_ = "locky_grants"
        id = PrimaryKey(int, auto=True, size=64)
        user_uuid = Required(str, 36)
        role = Required(str, 64)
        composite_key(user_uuid, role)

    class MetaRow(db.Entity):
        _table_ = "locky_meta"
        key = PrimaryKey(str, 64)
        number = Required(int, size=64)

    return SimpleNamespace(
        User=UserRow,
        Group=GroupRow,
        Member=MemberRow,
        Role=RoleRow,
        Session=SessionRow,
        Throttle=ThrottleRow,
        Grant=GrantRow,
        Meta=MetaRow,
    )
