"""The account-lifecycle stores of the Pony backend: single-use codes, the outbox, TOTP;
and the token-signing keys.

Each write is one :func:`~.guard.transaction`; a code found by its hash, a user's TOTP
state and the active signing key of an algorithm are read through the read layer
(:mod:`.reads`). What must happen once (a code used, a letter claimed, a TOTP step
accepted, a recovery code spent) locks its row first (``SELECT ... FOR UPDATE``; on
SQLite the database's write lock), so concurrent callers on any engine, process or host
see each other's result.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable

from locky import Code, Letter, SigningKey, TotpState, User, utcnow

from .compat import dialect_of
from .guard import transaction
from .inserts import insert
from .reader import Reader
from .reads import RecordReads, record_builder
from .stores import move_cache_revision, user_record

#: Codes that expired this long ago are deleted by later ``add`` calls, a batch at a time.
CODE_RETENTION = timedelta(days=1)
PRUNE_BATCH = 20


#: The records the writes answer, built from the row (or the values written).
code_record = record_builder(Code)
letter_record = record_builder(Letter)
totp_record = record_builder(TotpState)
key_record = record_builder(SigningKey)


def skip_locked(query, entity):
    """``FOR UPDATE SKIP LOCKED`` where the engine has row locks: rows another
    transaction holds are its business. SQLite's write lock serializes anyway."""
    if dialect_of(entity) == "SQLite":
        return query.for_update()
    return query.for_update(skip_locked=True)


class CodeStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.Code, Code)

    @transaction
    def add(self, *, code_hash: str, purpose: str, user_uuid: str, email: str, expires_at: datetime) -> Code:
        now = utcnow()
        cutoff = now - CODE_RETENTION
        ended = skip_locked(self.e.Code.select(lambda c: c.expires_at < cutoff), self.e.Code)
        for row in ended.limit(PRUNE_BATCH):
            row.delete()
        row = self.e.Code(code_hash=code_hash, purpose=purpose, user_uuid=user_uuid, email=email,
                          created_at=now, expires_at=expires_at)
        return code_record(row)

    def find(self, code_hash: str, purpose: str, *, now: datetime) -> Code | None:
        if not isinstance(code_hash, str):
            return None
        found = self.reads.find(code_hash=code_hash)
        return found if _usable(found, purpose, now) else None

    @transaction
    def use(self, code_hash: str, purpose: str, *, now: datetime) -> Code | None:
        if not isinstance(code_hash, str):
            return None
        row = self.e.Code.get_for_update(code_hash=code_hash)
        if not _usable(row, purpose, now):
            return None
        row.used_at = now
        return code_record(row)

    @transaction
    def count_since(self, user_uuid: str, purpose: str, since: datetime) -> int:
        return self.e.Code.select(
            lambda c: c.user_uuid == user_uuid and c.purpose == purpose and c.created_at >= since).count()


def _usable(row, purpose: str, now: datetime) -> bool:
    return row is not None and row.purpose == purpose and row.used_at is None and row.expires_at > now


class Outbox:
    def __init__(self, entities):
        self.e = entities

    @transaction
    def put(self, *, purpose: str, email: str, user_uuid: str = "") -> Letter:
        now = utcnow()
        row = insert(self.e.Letter, purpose=purpose, email=email, user_uuid=user_uuid or "", created_at=now,
                     due_at=now)
        return letter_record(row)

    @transaction
    def claim(self, *, now: datetime, lease: int, limit: int = 10) -> list[Letter]:
        due = self.e.Letter.select(lambda l: l.due_at <= now and (l.held_until is None or l.held_until <= now))
        if not due.exists():  # the usual answer, read without taking a lock (SQLite: its write lock)
            return []
        rows = skip_locked(due.order_by(self.e.Letter.due_at, self.e.Letter.id), self.e.Letter).limit(limit)
        held = now + timedelta(seconds=lease)
        for row in rows:
            row.held_until = held
            row.attempts += 1
        return [letter_record(row) for row in rows]

    @transaction
    def done(self, id: int) -> None:
        row = self.e.Letter.get_for_update(id=id)
        if row is not None:
            row.delete()

    @transaction
    def retry(self, id: int, *, due_at: datetime) -> None:
        row = self.e.Letter.get_for_update(id=id)
        if row is not None:
            row.held_until = None
            row.due_at = due_at

    @transaction
    def pending(self) -> int:
        return self.e.Letter.select().count()


class TotpStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.Totp, TotpState)

    def get(self, user_uuid: str) -> TotpState | None:
        return self.reads.find(user_uuid=user_uuid) if isinstance(user_uuid, str) else None

    @transaction(retry_conflicts=True)  # two first begins: the retry finds the other's row
    def begin(self, user_uuid: str, secret: str) -> bool:
        row = self.e.Totp.get_for_update(user_uuid=user_uuid)
        if row is None:
            self.e.Totp(user_uuid=user_uuid, secret=secret, created_at=utcnow())
            return True
        if row.confirmed:
            return False
        row.set(secret=secret, last_step=0, recovery_hashes="", created_at=utcnow())
        return True

    @transaction
    def confirm(self, user_uuid: str, *, step: int, recovery_hashes: Iterable[str]) -> User | None:
        user = self.e.User.get_for_update(uuid=user_uuid, del_token=0)
        row = self.e.Totp.get_for_update(user_uuid=user_uuid)
        if user is None or row is None or row.confirmed or step <= row.last_step:
            return None
        row.set(confirmed=True, last_step=step, recovery_hashes=" ".join(recovery_hashes))
        user.set(mfa_enabled=True, updated_at=utcnow())
        move_cache_revision(self.e)
        return user_record(user)

    @transaction
    def use_step(self, user_uuid: str, step: int) -> bool:
        row = self.e.Totp.get_for_update(user_uuid=user_uuid)
        if row is None or not row.confirmed or step <= row.last_step:
            return False
        row.last_step = step
        return True

    @transaction
    def use_recovery(self, user_uuid: str, code_hash: str) -> bool:
        row = self.e.Totp.get_for_update(user_uuid=user_uuid)
        if row is None or not row.confirmed:
            return False
        hashes = row.recovery_hashes.split()
        if code_hash not in hashes:
            return False
        hashes.remove(code_hash)
        row.recovery_hashes = " ".join(hashes)
        return True

    @transaction
    def remove(self, user_uuid: str) -> User | None:
        user = self.e.User.get_for_update(uuid=user_uuid, del_token=0)
        row = self.e.Totp.get_for_update(user_uuid=user_uuid)
        if row is None:
            return None
        row.delete()
        if user is None:
            return None
        user.set(mfa_enabled=False, updated_at=utcnow())
        move_cache_revision(self.e)
        return user_record(user)


class KeyStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.Key, SigningKey)

    def active(self, alg: str) -> SigningKey | None:
        return self.reads.find(active_alg=alg) if isinstance(alg, str) else None

    @transaction
    def all(self) -> list[SigningKey]:
        return [key_record(row) for row in self.e.Key.select().order_by(self.e.Key.id)]

    @transaction(retry_conflicts=True)  # two first keys at once: the retry finds the winner's
    def rotate(self, new: SigningKey, *, replacing: str | None) -> SigningKey:
        # Only the family of ``new.alg`` is rotated: the other families' keys stay active.
        family = new.alg
        current = self.e.Key.get_for_update(active_alg=family)
        if current is None and replacing is not None:
            # PostgreSQL: a rotation that went first while this one waited for the lock
            # left the old row no longer active and its new row outside this statement's
            # snapshot; a new statement sees it.
            current = self.e.Key.select(lambda k: k.active_alg == family).first()
        if current is not None and current.kid != replacing:
            return key_record(current)  # another process rotated first: its key is the one
        if current is not None:
            current.set(active_alg=None, retired_at=new.created_at)
            current.flush()  # the family's place is free before the new key takes it
        row = insert(self.e.Key, kid=new.kid, alg=new.alg, public_jwk=new.public_jwk, private_key=new.private_key,
                     created_at=new.created_at, active_alg=family)
        return key_record(row)

    @transaction
    def prune(self, retired_before: datetime) -> int:
        rows = self.e.Key.select(lambda k: k.retired_at is not None and k.retired_at < retired_before)
        count = 0
        for row in rows:
            row.delete()
            count += 1
        return count
