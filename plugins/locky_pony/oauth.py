"""The OpenID provider's stores of the Pony backend: OAuth clients, consents and
authorization codes (docs/http/oauth.md).

Reads go through the read layer (:mod:`.reads`: one statement each); writes are one
:func:`~.guard.transaction` each and lock the row they change first (see
:mod:`.stores`), so that what must happen once (a code exchanged, a client's token
generation moved) happens once whatever process or host races it. Clients are records
like users and groups (:class:`~.stores.Collection`: soft delete, ``client_id``
unique among live clients by the ``del_token`` scheme).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from locky import AuthorizationCode, Conflict, Consent, OAuthClient, utcnow

from .guard import integrity_errors, transaction
from .inserts import insert
from .lifecycle import PRUNE_BATCH, skip_locked
from .reader import Reader
from .reads import RecordReads, record_builder
from .stores import Collection, new_uuid

#: Codes that expired this long ago are deleted by later ``add`` calls, a batch at a
#: time; until then a used code stays findable, so that its second use is noticed.
CODE_RETENTION = timedelta(days=1)
#: The fields ``OAuthClientStore.update`` may change (client_id and type never change).
CLIENT_UPDATABLE = frozenset({"name", "redirect_uris", "post_logout_redirect_uris", "grant_types", "scopes",
                              "id_token_signed_response_alg", "first_party", "secret_hash"})
#: The fields stored as JSON arrays: given as any iterable, kept as lists.
CLIENT_LISTS = ("redirect_uris", "post_logout_redirect_uris", "grant_types", "scopes")

#: The records the writes answer, built from the row (or the values written).
client_record = record_builder(OAuthClient)
consent_record = record_builder(Consent)
code_record = record_builder(AuthorizationCode)


def _naive_utc(moment: datetime) -> datetime:
    """``moment`` as the naive UTC datetime Pony stores (Locky passes naive UTC already)."""
    return moment if moment.tzinfo is None else moment.astimezone(timezone.utc).replace(tzinfo=None)


class OAuthClientStore(Collection):
    entity_name, record, to_record = "OAuthClient", OAuthClient, staticmethod(client_record)
    filters = ()

    def updatable(self) -> frozenset[str]:
        return CLIENT_UPDATABLE

    @transaction
    def create(self, *, client_id: str, name: str, type: str, redirect_uris: Iterable[str],
               post_logout_redirect_uris: Iterable[str], grant_types: Iterable[str], scopes: Iterable[str],
               id_token_signed_response_alg: str, first_party: bool, secret_hash: str | None) -> OAuthClient:
        now = utcnow()
        with integrity_errors(Conflict("client_id")):
            row = insert(self.entity, uuid=new_uuid(), created_at=now, updated_at=now, client_id=client_id,
                         name=name, type=type, redirect_uris=list(redirect_uris),
                         post_logout_redirect_uris=list(post_logout_redirect_uris), grant_types=list(grant_types),
                         scopes=list(scopes), id_token_signed_response_alg=id_token_signed_response_alg,
                         first_party=first_party, secret_hash=secret_hash)
        return client_record(row)

    def get_by_client_id(self, client_id: str) -> OAuthClient | None:
        return self.reads.find(client_id=client_id) if isinstance(client_id, str) else None

    @transaction
    def update(self, id: int, **changes: Any) -> OAuthClient:
        changes = {name: list(value) if name in CLIENT_LISTS and value is not None else value
                   for name, value in changes.items()}
        return client_record(self._update(id, changes, "client_id", "Already exists."))

    @transaction
    def revoke_tokens(self, id: int) -> OAuthClient | None:
        row = self._live(id)  # locked: concurrent revocations move it one each
        if row is None:
            return None
        row.token_generation += 1
        return client_record(row)


class ConsentStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.Consent, Consent)

    def get(self, user_uuid: str, client_id: str) -> Consent | None:
        if not (isinstance(user_uuid, str) and isinstance(client_id, str)):
            return None
        return self.reads.find(user_uuid=user_uuid, client_id=client_id)

    # Two first grants at once: the loser's insert breaks the unique key and its retry
    # finds (and adds to) the winner's row.
    @transaction(retry_conflicts=True)
    def grant(self, user_uuid: str, client_id: str, scopes: Iterable[str]) -> Consent:
        row = self.e.Consent.get_for_update(user_uuid=user_uuid, client_id=client_id)
        now = utcnow()
        if row is None:
            row = insert(self.e.Consent, uuid=new_uuid(), user_uuid=user_uuid, client_id=client_id,
                         scopes=sorted(set(scopes)), created_at=now, updated_at=now)
            return consent_record(row)
        union = sorted(set(row.scopes) | set(scopes))
        if union != list(row.scopes):
            row.set(scopes=union, updated_at=now)
        return consent_record(row)

    def of_user(self, user_uuid: str) -> list[Consent]:
        return self.reads.every(user_uuid=user_uuid) if isinstance(user_uuid, str) else []

    @transaction
    def withdraw(self, user_uuid: str, client_id: str) -> bool:
        if not (isinstance(user_uuid, str) and isinstance(client_id, str)):
            return False
        row = self.e.Consent.get_for_update(user_uuid=user_uuid, client_id=client_id)
        if row is None:
            return False
        row.delete()
        return True


class AuthorizationCodeStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.AuthorizationCode, AuthorizationCode)

    @transaction
    def add(self, *, code_hash: str, client_id: str, user_uuid: str, redirect_uri: str, scope: str,
            nonce: str | None, code_challenge: str | None, code_challenge_method: str | None,
            auth_time: datetime, amr: Iterable[str], op_session_uuid: str | None, session_uuid: str,
            expires_at: datetime) -> AuthorizationCode:
        entity = self.e.AuthorizationCode
        now = utcnow()
        cutoff = now - CODE_RETENTION
        for row in skip_locked(entity.select(lambda c: c.expires_at < cutoff), entity).limit(PRUNE_BATCH):
            row.delete()
        row = insert(entity, code_hash=code_hash, client_id=client_id, user_uuid=user_uuid,
                     redirect_uri=redirect_uri, scope=scope, nonce=nonce, code_challenge=code_challenge,
                     code_challenge_method=code_challenge_method, auth_time=_naive_utc(auth_time),
                     amr=" ".join(amr), op_session_uuid=op_session_uuid, session_uuid=session_uuid,
                     created_at=now, expires_at=_naive_utc(expires_at))
        return code_record(row)

    def find(self, code_hash: str) -> AuthorizationCode | None:
        return self.reads.find(code_hash=code_hash) if isinstance(code_hash, str) else None

    @transaction
    def use(self, code_hash: str, *, now: datetime) -> AuthorizationCode | None:
        if not isinstance(code_hash, str):
            return None
        # Locked, then decided: of concurrent exchanges the first marks it, the others
        # wait for the lock and find it used (SQLite: the database's write lock).
        row = self.e.AuthorizationCode.get_for_update(code_hash=code_hash)
        now = _naive_utc(now)
        if row is None or row.used_at is not None or row.expires_at <= now:
            return None
        row.used_at = now
        return code_record(row)
