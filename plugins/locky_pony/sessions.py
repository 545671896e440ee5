"""Login sessions, the login throttle and global grants of the Pony backend.

The authentication read (session, user and policy revision in one statement) is plain
SQL from :mod:`.reads`; everything else here runs on Pony's entities, one
:func:`~.guard.transaction` per method.
"""

from __future__ import annotations

import time

from locky.records import Authenticated, Session, User

from .guard import transaction
from .reader import Reader
from .reads import AuthenticationRead
from .stores import utcnow


def session_record(row) -> Session:
    return Session(
        uuid=row.uuid,
        user_uuid=row.user_uuid,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        refresh_jti=row.refresh_jti,
    )


class SessionStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self._authentication = AuthenticationRead(reader, entities)

    @transaction
    def create(self, *, uuid: str, user_uuid: str, refresh_jti: str) -> Session:
        row = self.e.Session(
            uuid=uuid, user_uuid=user_uuid, created_at=utcnow(), refresh_jti=refresh_jti
        )
        return session_record(row)

    def authenticate(self, uuid: str) -> Authenticated | None:
        """The live session ``uuid``, its live user and the policy revision: one SELECT."""
        return self._authentication.authenticate(uuid)

    def identity(self, uuid: str) -> tuple[Session, User] | None:
        found = self.authenticate(uuid)
        return None if found is None else (found.session, found.user)

    @transaction
    def rotate(self, uuid: str, presented_jti: str, new_jti: str) -> bool:
        # The row lock serialises two refreshes racing with the same token.
        row = self.e.Session.get_for_update(uuid=uuid)
        if row is None or row.revoked_at is not None:
            return False
        if row.refresh_jti != presented_jti:
            row.revoked_at = utcnow()  # a used refresh token: revoke the whole chain
            return False
        row.refresh_jti = new_jti
        return True

    @transaction
    def revoke(self, uuid: str) -> bool:
        row = self.e.Session.get_for_update(uuid=uuid)
        if row is None or row.revoked_at is not None:
            return False
        row.revoked_at = utcnow()
        return True


class LoginThrottle:
    def __init__(self, entities):
        self.e = entities

    @transaction(retries=5, retry_conflicts=True)
    def hit(self, key: str, *, limit: int, window: int) -> int | None:
        now = time.time()
        row = self.e.Throttle.get_for_update(key=key)
        if row is None:
            # A concurrent first attempt makes the insert fail; the retry then locks its row.
            self.e.Throttle(key=key, window_start=now, attempts=1)
            return None
        if now - row.window_start >= window:
            row.window_start, row.attempts = now, 1
            return None
        if row.attempts >= limit:
            return int(row.window_start + window - now) + 1
        row.attempts += 1
        return None

    @transaction
    def reset(self, key: str) -> None:
        row = self.e.Throttle.get_for_update(key=key)
        if row is not None:
            row.delete()


class GrantStore:
    def __init__(self, entities):
        self.e = entities

    def _bump(self) -> None:
        self.e.Meta.get_for_update(key="policy_revision").number += 1

    @transaction(retry_conflicts=True)  # a concurrent grant: the retry sees it
    def grant(self, user_uuid: str, role: str) -> bool:
        if self.e.Grant.get(user_uuid=user_uuid, role=role) is not None:
            return False
        self.e.Grant(user_uuid=user_uuid, role=role)
        self._bump()
        return True

    @transaction
    def revoke(self, user_uuid: str, role: str) -> bool:
        row = self.e.Grant.get(user_uuid=user_uuid, role=role)
        if row is None:
            return False
        row.delete()
        self._bump()
        return True

    @transaction
    def roles_of(self, user_uuid: str) -> frozenset[str]:
        return frozenset(g.role for g in self.e.Grant.select(lambda g: g.user_uuid == user_uuid))
