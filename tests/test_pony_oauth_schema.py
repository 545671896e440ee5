"""Schema steps 8 and 9 (the OpenID provider) carry a database that already has signing
keys and sessions, on every engine: the active key stays active in its algorithm's
family, retired keys stay retired, and sessions made before read back with no client
and no ``amr``. (The 1.0.0 upgrade fixtures have no signing keys: step 5 came later.)"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

from pony.orm import commit, db_session

from locky import SigningKey, utcnow
from locky.testing import make_settings
from locky_pony import PonyStorage, schema
from locky_pony.migrations import LATEST, steps

#: The version before the OpenID provider's steps.
BEFORE = 7
SESSION = "22222222-2222-4222-8222-222222222222"


def migrate_to(storage: PonyStorage, version: int) -> None:
    """Apply the schema steps up to ``version`` only, as an older Locky left them."""
    db = storage.db
    dialect = db.provider.dialect
    with db_session(ddl=True):
        collation = schema._mysql_collation(db) if dialect == "MySQL" else ""
        for current, step in enumerate(steps(dialect, collation)[:version]):
            schema._apply(db, step, current)
            commit()


@contextmanager
def storage_at(url: str, version: int) -> Iterator[PonyStorage]:
    """A Pony storage on the empty database ``url`` with the schema steps up to
    ``version`` only (:func:`migrate_to`), closed afterwards."""
    storage = PonyStorage(make_settings(url))
    try:
        migrate_to(storage, version)
        assert storage.schema().current == version
        yield storage
    finally:
        storage.close()


def key(kid: str, *, days_ago: int) -> SigningKey:
    return SigningKey(kid=kid, alg="ES256", public_jwk='{"kid": "%s"}' % kid, private_key="sealed " + kid,
                      created_at=(utcnow() - timedelta(days=days_ago)).replace(microsecond=0))


def test_steps_8_and_9_keep_the_keys_and_sessions_a_database_had(tableless_url):
    with storage_at(tableless_url, BEFORE) as storage:
        ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="x")  # users: unchanged
        old, active = key("retired-es", days_ago=40), key("active-es", days_ago=10)
        db = storage.db
        with db_session:
            for made, slot, retired in ((old, None, active.created_at), (active, 1, None)):
                db.execute("INSERT INTO locky_signing_keys (kid, alg, public_jwk, private_key, created_at, retired_at,"
                           " active_slot) VALUES ($kid, $alg, $jwk, $private, $created, $retired, $slot)",
                           {"kid": made.kid, "alg": made.alg, "jwk": made.public_jwk, "private": made.private_key,
                            "created": made.created_at, "retired": retired, "slot": slot})
            db.execute("INSERT INTO locky_sessions (uuid, user_uuid, created_at, refresh_jti)"
                       " VALUES ($uuid, $user, $created, 'jti-1')",
                       {"uuid": SESSION, "user": ada.uuid, "created": utcnow()})

        assert [step.version for step in storage.migrate()] == list(range(BEFORE + 1, LATEST + 1))
        assert storage.schema().current == LATEST

        found = storage.keys.active("ES256")
        assert (found.kid, found.private_key, found.created_at, found.retired_at) == (
            "active-es", "sealed active-es", active.created_at, None)
        assert [(k.kid, k.retired_at) for k in storage.keys.all()] == [
            ("retired-es", active.created_at), ("active-es", None)]
        assert storage.keys.active("RS256") is None
        # Each family rotates on its own from there.
        rs = SigningKey(kid="first-rs", alg="RS256", public_jwk="{}", private_key="sealed", created_at=utcnow())
        assert storage.keys.rotate(rs, replacing=None).kid == "first-rs"
        assert storage.keys.rotate(key("next-es", days_ago=0), replacing="active-es").kid == "next-es"
        assert [storage.keys.active(alg).kid for alg in ("ES256", "RS256")] == ["next-es", "first-rs"]

        session = storage.sessions.authenticate(SESSION).session
        assert (session.refresh_jti, session.client_id, session.scope, session.op_session_uuid, session.amr) == (
            "jti-1", None, None, None, ())
        assert storage.sessions.revoke_client("any") == 0 and storage.sessions.end_op_session(SESSION) == 1
