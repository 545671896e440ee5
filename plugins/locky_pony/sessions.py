"""Login sessions, the login throttle and global grants of the Pony backend.

The authentication read (session, user and policy revision in one statement) is plain
SQL from :mod:`.reads`; everything else here runs on Pony's entities, one
:func:`~.guard.transaction` per method.
"""

from __future__ import annotations

import math
import time
from typing import Iterable

from locky import Authenticated, Session, User, utcnow

from .compat import dialect_of, table
from .guard import transaction
from .holder_reads import HolderPages
from .inserts import insert
from .reader import Reader
from .reads import AuthenticationRead, column, record_builder, selected
from .stores import move_policy_revision


#: The record the writes answer, built from the row.
session_record = record_builder(Session)


class SessionStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self._authentication = AuthenticationRead(reader, entities)

    @transaction
    def create(self, *, uuid: str, user_uuid: str, refresh_jti: str, client_id: str | None = None,
               scope: str | None = None, op_session_uuid: str | None = None, amr: Iterable[str] = ()) -> Session:
        row = insert(self.e.Session, uuid=uuid, user_uuid=user_uuid, created_at=utcnow(), refresh_jti=refresh_jti,
                     client_id=client_id, scope=scope, op_session_uuid=op_session_uuid, amr=" ".join(amr))
        return session_record(row)

    def authenticate(self, uuid: str) -> Authenticated | None:
        """The live session ``uuid``, its live user and the policy revision: one SELECT."""
        return self._authentication.authenticate(uuid)

    def watch_cache_revision(self, observe) -> None:
        """Call ``observe(number)`` with the cache revision every authentication reads."""
        self._authentication.on_cache_revision = observe

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

    @transaction
    def revoke_all(self, user_uuid: str, *, keep: str | None = None) -> int:
        # Locked, as ``rotate`` locks: a refresh racing this either went first (and its
        # new token dies here) or waits and finds its session revoked.
        if not isinstance(user_uuid, str):
            return 0
        now = utcnow()
        rows = self.e.Session.select(lambda s: s.user_uuid == user_uuid and s.revoked_at is None).for_update()
        revoked = 0
        for row in rows:
            if row.uuid != keep:
                row.revoked_at = now
                revoked += 1
        return revoked

    @transaction
    def end_op_session(self, uuid: str) -> int:
        # Locked, as ``rotate`` locks: a client's refresh racing the sign-out either went
        # first (and its new token dies here) or waits and finds its session revoked.
        if not isinstance(uuid, str):
            return 0
        rows = self.e.Session.select(
            lambda s: (s.uuid == uuid or s.op_session_uuid == uuid) and s.revoked_at is None).for_update()
        return _revoke(rows)

    @transaction
    def revoke_client(self, client_id: str, *, user_uuid: str | None = None) -> int:
        if not isinstance(client_id, str) or not isinstance(user_uuid, (str, type(None))):
            return 0
        rows = self.e.Session.select(lambda s: s.client_id == client_id and s.revoked_at is None)
        if user_uuid is not None:
            rows = rows.filter(lambda s: s.user_uuid == user_uuid)
        return _revoke(rows.for_update())


def _revoke(rows) -> int:
    """Revoke the sessions ``rows`` selects (locked); how many."""
    now = utcnow()
    revoked = 0
    for row in rows:
        row.revoked_at = now
        revoked += 1
    return revoked


class LoginThrottle:
    """Failed logins per key with exponential backoff (``locky.providers.LoginThrottle``):
    one row per key, locked by each hit, so concurrent attempts count one at a time."""

    #: Ended rows a new key deletes, at most: more than the one row it adds, so the
    #: table stays bounded, and few enough to keep a login's transaction short.
    PRUNE_BATCH = 20

    def __init__(self, entities):
        self.e = entities

    @transaction(retries=5, retry_conflicts=True)
    def hit(self, key: str, *, limit: int, window: int) -> int | None:
        now = time.time()
        row = self.e.Throttle.get_for_update(key=key)
        if row is None:
            # A concurrent first attempt makes the insert fail; the retry then locks its row.
            self.e.Throttle(key=key, window_start=now, attempts=1, last_attempt=now)
            self._prune(now, window, self.PRUNE_BATCH, keep=key)
            return None
        wait = lock_remaining(row.attempts, row.last_attempt, now, limit=limit, window=window)
        if wait > 0:
            return max(1, math.ceil(wait))  # refused and not counted: the lock stays as it was
        if now - row.window_start >= window:
            row.window_start, row.attempts = now, 0
        row.attempts += 1
        row.last_attempt = now
        return None

    @transaction(retries=5, retry_conflicts=True)
    def take(self, key: str, *, limit: int, window: int) -> int | None:
        # A quota row keeps in ``window_start`` the time its window ENDS. Pruning (a new
        # key's hit, prune()) deletes rows whose window_start is twice the pruning
        # caller's window in the past; a row that holds its end is so never deleted
        # before it ended, whatever window the caller counts in (a login window of 15
        # minutes must not forget an hour's quota). No pruning here: this call does not
        # know the login window, and deleting by its own could end a longer login lock.
        now = time.time()
        row = self.e.Throttle.get_for_update(key=key)
        if row is None:
            # A concurrent first request makes the insert fail; the retry then locks its row.
            self.e.Throttle(key=key, window_start=now + window, attempts=1, last_attempt=now)
            return None
        if now >= row.window_start:
            row.window_start, row.attempts = now + window, 0
        elif row.attempts >= limit:
            return max(1, math.ceil(row.window_start - now))  # refused and not counted
        row.attempts += 1
        row.last_attempt = now
        return None

    @transaction
    def reset(self, key: str) -> bool:
        row = self.e.Throttle.get_for_update(key=key)
        if row is None:
            return False
        forgotten = row.attempts > 0  # a row whose attempts were all forgiven holds nothing
        row.delete()
        return forgotten

    @transaction
    def reset_prefix(self, prefix: str) -> int:
        if not isinstance(prefix, str) or not prefix:
            return 0
        # startswith is LIKE with %, _ and the escape character escaped; the exact
        # comparison after it keeps a case-insensitive collation (MariaDB) from matching more.
        rows = [row for row in self.e.Throttle.select(lambda t: t.key.startswith(prefix))
                if row.key.startswith(prefix)]
        forgotten = sum(row.attempts > 0 for row in rows)
        for row in rows:
            row.delete()
        return forgotten

    @transaction
    def forgive(self, key: str) -> None:
        row = self.e.Throttle.get_for_update(key=key)
        if row is not None and row.attempts > 0:
            row.attempts -= 1

    @transaction
    def prune(self, *, window: int, batch: int = 1000) -> int:
        return self._prune(time.time(), window, batch)

    def _prune(self, now: float, window: int, batch: int, keep: str | None = None) -> int:
        cutoff = now - 2 * window
        rows = self.e.Throttle.select(lambda t: t.window_start <= cutoff and t.key != keep)
        if dialect_of(self.e.Throttle) != "SQLite":
            # Rows another transaction holds (a hit on that key) are its business: skip
            # them rather than wait, so two pruning logins never wait for each other.
            rows = rows.for_update(skip_locked=True)
        ended = rows.order_by(self.e.Throttle.window_start).limit(batch)
        for row in ended:
            row.delete()
        return len(ended)


def lock_remaining(attempts: int, last_attempt: float, now: float, *, limit: int, window: int) -> float:
    """Seconds left of a key's lock (0 or less: none): once ``attempts`` reached
    ``limit``, ``window / 16`` after the last attempt, doubling per further attempt, at
    most ``window``."""
    if attempts < limit:
        return 0.0
    delay = min(window, window / 16 * 2 ** min(attempts - limit, 16))
    return last_attempt + delay - now


class GrantStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reader = reader
        entity, provider = entities.Grant, reader.db.provider
        # The roles of a user: one plain SELECT through the read layer (no ORM session,
        # no entity objects), as an authorizer asks it of every user new to its policy
        # snapshot.
        self._roles_of = reader.many_rows(
            selected(reader, entity, "role", column(provider, entity, "role")),
            f"SELECT {{}} FROM {provider.quote_name(table(entity))} WHERE {column(provider, entity, 'user_uuid')} = {{}}")
        # The holders of a role the same way: a role given to every user (a custom
        # "staff" role) has as many rows as there are users, and ``/authz/subjects``
        # reads them for every page it answers.
        self._holders = reader.many_rows(
            selected(reader, entity, "user_uuid", column(provider, entity, "user_uuid")),
            f"SELECT {{}} FROM {provider.quote_name(table(entity))} WHERE {column(provider, entity, 'role')} = {{}}")
        # A page of the holders of roles by user id (``/authz/subjects``; schema step 13).
        self._pages = HolderPages(reader, provider.quote_name(table(entity)), column(provider, entity, "user_id"),
                                  column(provider, entity, "user_uuid"), f"{column(provider, entity, 'role')} = {{}}")

    @transaction(retry_conflicts=True)  # a concurrent grant: the retry sees it
    def grant(self, user_uuid: str, role: str) -> bool:
        if self.e.Grant.get(user_uuid=user_uuid, role=role) is not None:
            return False
        user = self.e.User.get(uuid=user_uuid)
        self.e.Grant(user_uuid=user_uuid, role=role, user_id=None if user is None else user.id)
        move_policy_revision(self.e)
        return True

    @transaction
    def revoke(self, user_uuid: str, role: str) -> bool:
        row = self.e.Grant.get(user_uuid=user_uuid, role=role)
        if row is None:
            return False
        row.delete()
        move_policy_revision(self.e)
        return True

    def roles_of(self, user_uuid: str) -> frozenset[str]:
        if not isinstance(user_uuid, str):
            return frozenset()
        return frozenset(row[0] for row in self.reader.select(self._roles_of, (user_uuid,)))

    def holders(self, role: str) -> list[str]:
        if not isinstance(role, str):
            return []
        # One range of the role's index (schema step 13), however many grants others hold.
        return [row[0] for row in self.reader.select(self._holders, (role,))]

    def holders_by_id(self, roles: Iterable[str], after_id: int, limit: int) -> list[tuple[int, str]]:
        return self._pages.read((), roles, after_id, limit)
