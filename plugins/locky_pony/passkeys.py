"""Users' passkeys in the Pony backend (docs/http/accounts.md#passkeys).

Reads go through the read layer (:mod:`.reads`: one statement each). A credential id is
found by its SHA-256 (``credential_hash``, see the entity): the unique key the database
enforces, so two registrations of one credential, whichever users and processes make
them, keep one. A sign-in's counter check is one conditional UPDATE: the database
decides, row by row, whether the counter moves on, so of concurrent sign-ins reporting
one count exactly one finds its row changed (PostgreSQL and MariaDB re-check the WHERE
against the row the waiting UPDATE locked; SQLite runs writes one at a time). A use that
changes nothing in the row (a counter at 0, at the very moment of the last use) still
counts its row: on MySQL and MariaDB Pony connects with ``CLIENT_FOUND_ROWS``, so the row
count is of rows matched, not changed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Iterable

from locky import Conflict, Passkey, utcnow

from . import compat
from .guard import integrity_errors, transaction
from .inserts import insert
from .reader import Reader
from .reads import RecordReads, column, is_id, record_builder
from .stores import new_uuid

#: The record the writes answer, built from the row (or the values written).
passkey_record = record_builder(Passkey)


def credential_hash(credential_id: str) -> str:
    """The SHA-256 (hex) of a credential id, as ``credential_hash`` keeps it; any
    ``str`` has one (a lone surrogate included)."""
    return hashlib.sha256(credential_id.encode("utf-8", "surrogatepass")).hexdigest()


def _naive_utc(moment: datetime) -> datetime:
    """``moment`` as the naive UTC datetime Pony stores (Locky passes naive UTC already)."""
    return moment if moment.tzinfo is None else moment.astimezone(timezone.utc).replace(tzinfo=None)


def _counter(value) -> int:
    """A signature counter: an ``int`` (not a ``bool``), 0 or more."""
    if type(value) is not int or value < 0:
        raise ValueError("sign_count must be an int, 0 or more")
    return value


class PasskeyStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.entity = entities.Passkey
        self.reads = RecordReads(reader, entities.Passkey, Passkey)
        db = compat.database_of(self.entity)
        provider = db.provider
        self.db = db

        def col(name: str) -> str:
            return column(provider, self.entity, name)

        count = col("sign_count")
        # The counter moves on, or both are 0 (an authenticator that counts nothing).
        self.use_sql = (f"UPDATE {provider.quote_name(compat.table(self.entity))}"
                        f" SET {count} = $count, {col('last_used_at')} = $now"
                        f" WHERE {col('id')} = $id AND ({count} < $count OR ({count} = 0 AND $count = 0))")

    @transaction
    def add(self, *, user_uuid: str, credential_id: str, public_key: str, sign_count: int, name: str,
            transports: Iterable[str], aaguid: str, backed_up: bool) -> Passkey:
        with integrity_errors(Conflict("credential", "Already registered.")):
            row = insert(self.entity, uuid=new_uuid(), user_uuid=user_uuid,
                         credential_hash=credential_hash(credential_id), credential_id=credential_id,
                         public_key=public_key, sign_count=_counter(sign_count), name=name,
                         transports=list(transports), aaguid=aaguid, backed_up=bool(backed_up),
                         created_at=utcnow())
        return passkey_record(row)

    def of_user(self, user_uuid: str) -> list[Passkey]:
        return self.reads.every(user_uuid=user_uuid) if isinstance(user_uuid, str) else []

    def get_by_credential_id(self, credential_id: str) -> Passkey | None:
        if not isinstance(credential_id, str):
            return None
        found = self.reads.find(credential_hash=credential_hash(credential_id))
        # The hash found it; the id itself decides (no collision of SHA-256 is known).
        return found if found is not None and found.credential_id == credential_id else None

    @transaction
    def use(self, id: int, *, sign_count: int, now: datetime) -> Passkey | None:
        sign_count = _counter(sign_count)
        if not is_id(id):
            return None
        cursor = self.db.execute(self.use_sql, {
            "count": sign_count, "id": id,
            "now": compat.sql_value(self.entity, "last_used_at", _naive_utc(now))})
        if cursor.rowcount != 1:
            return None  # the counter did not move on, or the passkey is gone
        return passkey_record(self.entity[id])

    @transaction
    def rename(self, user_uuid: str, id: int, name: str) -> Passkey | None:
        row = self._mine(user_uuid, id)
        if row is None:
            return None
        row.name = name
        return passkey_record(row)

    @transaction
    def remove(self, user_uuid: str, id: int) -> Passkey | None:
        row = self._mine(user_uuid, id)
        if row is None:
            return None
        removed = passkey_record(row)
        row.delete()
        return removed

    def _mine(self, user_uuid: str, id: int):
        """The passkey ``id`` of ``user_uuid``, locked; ``None`` when it is another
        user's or there is none."""
        if not (isinstance(user_uuid, str) and is_id(id)):
            return None
        return self.entity.get_for_update(id=id, user_uuid=user_uuid)
