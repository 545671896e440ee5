"""Step 8: sessions of the OpenID provider, and one active signing key per algorithm
(docs/http/oauth.md).

- ``locky_sessions`` gets ``client_id`` (the client a login was issued to; NULL for a
  login of the /v1 API and for an OP session, the browser's sign-in at Locky),
  ``scope``, ``op_session_uuid`` (the OP session a client's login came from: signing
  out there ends them, so it is indexed, as is ``client_id`` for a deleted client's
  logins) and ``amr`` (how the user authenticated, space-separated; empty for every
  login a 1.0.0 database holds).
- ``locky_signing_keys``: the single ``active_slot`` (1 on the one active key) becomes
  ``active_alg``, the key's ``alg`` while it is the active key of that algorithm's
  family, unique: ID tokens are signed with RS256 beside the configured algorithm, each
  family rotating on its own. The active key of an upgraded database keeps being
  active, in its algorithm's family. SQLite cannot drop a column with a unique key, so
  there the table is made again (SQLite's documented way) and the rows copied.
"""

from .ddl import Ddl

DESCRIPTION = ("OpenID provider: locky_sessions client_id, scope, op_session_uuid, amr;"
               " signing keys active per algorithm (active_alg)")

SESSION_COLUMNS = (
    "client_id VARCHAR(64)",
    "scope VARCHAR(1024)",
    "op_session_uuid VARCHAR(36)",
    "amr VARCHAR(255) NOT NULL DEFAULT ''",
)


def statements(dialect: str, collation: str) -> list[str]:
    sql = Ddl(dialect, collation)
    n = sql.name

    def column(definition: str) -> str:
        name, rest = definition.split(" ", 1)
        return f"{n(name)} {rest}"

    sessions = n("locky_sessions")
    if dialect == "SQLite":  # one column per ALTER TABLE
        added = [f"ALTER TABLE {sessions} ADD COLUMN {column(c)}" for c in SESSION_COLUMNS]
    else:
        added = [f"ALTER TABLE {sessions} " + ", ".join(f"ADD COLUMN {column(c)}" for c in SESSION_COLUMNS)]
    return added + [
        sql.index("locky_sessions", "client_id"),
        sql.index("locky_sessions", "op_session_uuid"),
        *_key_families(sql, dialect),
    ]


def _key_families(sql: Ddl, dialect: str) -> list[str]:
    n = sql.name
    keys = n("locky_signing_keys")
    if dialect != "SQLite":
        return [
            f"ALTER TABLE {keys} ADD COLUMN {n('active_alg')} VARCHAR(16) UNIQUE",
            f"UPDATE {keys} SET {n('active_alg')} = {n('alg')} WHERE {n('active_slot')} IS NOT NULL",
            f"ALTER TABLE {keys} DROP COLUMN {n('active_slot')}",
        ]
    copied = ("id", "kid", "alg", "public_jwk", "private_key", "created_at", "retired_at")
    names = ", ".join(n(c) for c in copied)
    return [
        sql.table("locky_signing_keys_new",
                  f"id {sql.identity}",
                  "kid VARCHAR(64) UNIQUE NOT NULL",
                  "alg VARCHAR(16) NOT NULL",
                  "public_jwk VARCHAR(2048) NOT NULL",
                  "private_key VARCHAR(8192) NOT NULL",
                  f"created_at {sql.timestamp} NOT NULL",
                  f"retired_at {sql.timestamp}",
                  "active_alg VARCHAR(16) UNIQUE"),
        f"INSERT INTO {n('locky_signing_keys_new')} ({names}, {n('active_alg')})"
        f" SELECT {names}, CASE WHEN {n('active_slot')} IS NOT NULL THEN {n('alg')} END FROM {keys}",
        f"DROP TABLE {keys}",
        f"ALTER TABLE {n('locky_signing_keys_new')} RENAME TO {keys}",
    ]
