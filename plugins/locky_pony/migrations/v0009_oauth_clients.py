"""Step 9: the OpenID provider's clients, consents and authorization codes
(docs/http/oauth.md).

- ``locky_oauth_clients``: registered clients, soft-deleted like the other records
  (``del_token``: ``client_id`` is unique among live clients, on every engine); the
  secret only as its SHA-256 hash; ``token_generation``, which revoking a client's
  ``client_credentials`` tokens moves on;
- ``locky_consents``: what each user allowed each client, one row per user and client;
- ``locky_oauth_codes``: authorization codes as SHA-256 hashes, single-use, indexed by
  expiry for the pruning that later codes do.
"""

from .ddl import Ddl

DESCRIPTION = "OpenID provider: locky_oauth_clients, locky_consents, locky_oauth_codes"


def statements(dialect: str, collation: str) -> list[str]:
    sql = Ddl(dialect, collation)
    stamp = sql.timestamp
    false = "FALSE" if dialect == "PostgreSQL" else "0"
    return [
        sql.table("locky_oauth_clients",
                  f"id {sql.identity}",
                  "uuid VARCHAR(36) UNIQUE NOT NULL",
                  f"created_at {stamp} NOT NULL",
                  f"updated_at {stamp} NOT NULL",
                  f"deleted_at {stamp}",
                  "del_token BIGINT NOT NULL DEFAULT 0",
                  "client_id VARCHAR(64) NOT NULL",
                  "name VARCHAR(255) NOT NULL",
                  "type VARCHAR(16) NOT NULL",
                  f"redirect_uris {sql.json} NOT NULL",
                  f"post_logout_redirect_uris {sql.json} NOT NULL",
                  f"grant_types {sql.json} NOT NULL",
                  f"scopes {sql.json} NOT NULL",
                  "id_token_signed_response_alg VARCHAR(16) NOT NULL",
                  f"first_party BOOLEAN NOT NULL DEFAULT {false}",
                  "secret_hash VARCHAR(64)",
                  "token_generation BIGINT NOT NULL DEFAULT 0"),
        sql.unique("locky_oauth_clients", "client_id", "del_token"),
        sql.index("locky_oauth_clients", "del_token", "id"),
        sql.table("locky_consents",
                  f"id {sql.identity}",
                  "uuid VARCHAR(36) UNIQUE NOT NULL",
                  "user_uuid VARCHAR(36) NOT NULL",
                  "client_id VARCHAR(64) NOT NULL",
                  f"scopes {sql.json} NOT NULL",
                  f"created_at {stamp} NOT NULL",
                  f"updated_at {stamp} NOT NULL"),
        sql.unique("locky_consents", "user_uuid", "client_id"),
        sql.table("locky_oauth_codes",
                  f"id {sql.identity}",
                  "code_hash VARCHAR(64) UNIQUE NOT NULL",
                  "client_id VARCHAR(64) NOT NULL",
                  "user_uuid VARCHAR(36) NOT NULL",
                  "redirect_uri VARCHAR(2048) NOT NULL",
                  "scope VARCHAR(1024) NOT NULL",
                  "nonce VARCHAR(1024)",
                  "code_challenge VARCHAR(128)",
                  "code_challenge_method VARCHAR(16)",
                  f"auth_time {stamp} NOT NULL",
                  "amr VARCHAR(255) NOT NULL DEFAULT ''",
                  "op_session_uuid VARCHAR(36)",
                  "session_uuid VARCHAR(36) NOT NULL",
                  f"created_at {stamp} NOT NULL",
                  f"expires_at {stamp} NOT NULL",
                  f"used_at {stamp}"),
        sql.index("locky_oauth_codes", "expires_at"),
    ]
