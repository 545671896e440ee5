"""Plain records that cross the storage boundary: no ORM object ever leaves a plugin.

Storage providers return these frozen dataclasses; resources dump them through the
marshmallow schemas in :mod:`locky.schemas`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

RecordT = TypeVar("RecordT")


@dataclass(frozen=True, slots=True)
class Permission:
    """One permission of a role: ``action`` on ``resource``."""

    resource: str
    action: str


@dataclass(frozen=True, slots=True)
class User:
    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    email: str
    # Never dumped: no response schema declares it.
    password_hash: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class Group:
    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class Member:
    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    group_uuid: str
    user_uuid: str
    role: str


@dataclass(frozen=True, slots=True)
class Role:
    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    description: str
    permissions: tuple[Permission, ...]
    builtin: bool


@dataclass(frozen=True, slots=True)
class Session:
    """One login: the chain of refresh tokens it issued, revoked as a whole."""

    uuid: str
    user_uuid: str
    created_at: datetime
    revoked_at: datetime | None
    refresh_jti: str


@dataclass(frozen=True, slots=True)
class Authenticated:
    """What one authentication read finds: a live session, its live user, and the
    storage's policy revision read in the same statement (see ``SessionStore.authenticate``)."""

    session: Session
    user: User
    policy_revision: int


@dataclass(frozen=True, slots=True)
class Page(Generic[RecordT]):
    """One page of a keyset-paged list."""

    items: list[RecordT]
    next_after_id: int | None


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: the authenticated user and the session the credential belongs to.

    ``session_uuid`` is ``None`` for credentials that are not tied to a login session
    (an API key from a plugin, say). ``policy_revision`` is storage's policy revision
    read together with the session at authentication (``SessionStore.authenticate``):
    it travels with this request to the authorizer, which may trust it instead of
    reading the revision again; ``None`` when the credential's check did not read it.
    """

    user: User
    session_uuid: str | None = None
    scheme: str = "bearer"
    policy_revision: int | None = None
