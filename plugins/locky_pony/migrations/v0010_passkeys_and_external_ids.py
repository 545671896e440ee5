"""Step 10: passkeys (docs/http/accounts.md#passkeys) and a provisioning system's ids
(SCIM's ``externalId``, docs/http/scim.md).

- ``locky_users`` and ``locky_groups`` get ``external_id``, NULL for every row a
  database holds; not unique. Listing filters on it, so each gets an index on
  ``(external_id, del_token, id)`` as the members' filter columns have (a VARCHAR(255)
  of utf8mb4 stays within MariaDB's 3072 bytes of an index key).
- ``locky_passkeys``: users' WebAuthn credentials. A credential id may be 1364
  characters, beyond what MariaDB indexes: its SHA-256 (``credential_hash``) carries
  the unique key every engine enforces, and the lookups. Indexed by ``user_uuid``
  for a user's list.
"""

from .ddl import Ddl

DESCRIPTION = "passkeys: locky_passkeys; locky_users and locky_groups external_id"

#: The tables that gain ``external_id``.
EXTERNAL_ID_TABLES = ("locky_users", "locky_groups")


def statements(dialect: str, collation: str) -> list[str]:
    sql = Ddl(dialect, collation)
    n = sql.name
    stamp = sql.timestamp
    false = "FALSE" if dialect == "PostgreSQL" else "0"
    external_ids = []
    for table in EXTERNAL_ID_TABLES:
        external_ids += [
            f"ALTER TABLE {n(table)} ADD COLUMN {n('external_id')} VARCHAR(255)",
            sql.index(table, "external_id", "del_token", "id"),
        ]
    return external_ids + [
        sql.table("locky_passkeys",
                  f"id {sql.identity}",
                  "uuid VARCHAR(36) UNIQUE NOT NULL",
                  "user_uuid VARCHAR(36) NOT NULL",
                  "credential_hash VARCHAR(64) UNIQUE NOT NULL",
                  "credential_id VARCHAR(1364) NOT NULL",
                  f"public_key {sql.text} NOT NULL",
                  "sign_count BIGINT NOT NULL DEFAULT 0",
                  "name VARCHAR(255) NOT NULL DEFAULT ''",
                  f"transports {sql.json} NOT NULL",
                  "aaguid VARCHAR(36) NOT NULL",
                  f"backed_up BOOLEAN NOT NULL DEFAULT {false}",
                  f"created_at {stamp} NOT NULL",
                  f"last_used_at {stamp}"),
        sql.index("locky_passkeys", "user_uuid"),
    ]
