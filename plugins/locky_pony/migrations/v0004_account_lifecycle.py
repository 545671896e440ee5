"""Step 4: the account lifecycle (docs/http/accounts.md).

Users get three flags: ``email_verified``, ``disabled`` and ``mfa_enabled``, false for
every account a 1.0.0 database holds (no address was ever proved there; an admin listed
by email proves theirs once, see docs/http/authorization.md). New tables:

- ``locky_codes``: single-use codes (verification, reset, the second login step), kept
  as SHA-256 hashes only;
- ``locky_outbox``: messages waiting for the background sender; a row is deleted once a
  mailer took it;
- ``locky_totp``: each user's TOTP secret (sealed by the core), last accepted time step
  and unused recovery-code hashes.
"""

DESCRIPTION = "account lifecycle: user flags email_verified, disabled, mfa_enabled; codes, outbox, totp tables"

FLAGS = ("email_verified", "disabled", "mfa_enabled")


def statements(dialect: str, collation: str) -> list[str]:
    q = "`" if dialect == "MySQL" else '"'
    ident = {
        "SQLite": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "PostgreSQL": "BIGSERIAL PRIMARY KEY",
        "MySQL": "BIGINT PRIMARY KEY AUTO_INCREMENT",
    }[dialect]
    stamp = {"SQLite": "DATETIME", "PostgreSQL": "TIMESTAMP", "MySQL": "DATETIME(6)"}[dialect]
    false = "FALSE" if dialect == "PostgreSQL" else "0"
    table_options = f"\nCOLLATE {collation}\nDEFAULT CHARSET utf8mb4\nENGINE InnoDB" if dialect == "MySQL" else ""

    def n(name: str) -> str:
        return f"{q}{name}{q}"

    users = n("locky_users")
    if dialect == "SQLite":  # one column per ALTER TABLE
        flags = [f"ALTER TABLE {users} ADD COLUMN {n(flag)} BOOLEAN NOT NULL DEFAULT {false}" for flag in FLAGS]
    else:
        flags = [f"ALTER TABLE {users} "
                 + ", ".join(f"ADD COLUMN {n(flag)} BOOLEAN NOT NULL DEFAULT {false}" for flag in FLAGS)]
    return flags + [
        f"""CREATE TABLE {n("locky_codes")} (
  {n("id")} {ident},
  {n("code_hash")} VARCHAR(64) UNIQUE NOT NULL,
  {n("purpose")} VARCHAR(16) NOT NULL,
  {n("user_uuid")} VARCHAR(36) NOT NULL,
  {n("email")} VARCHAR(254) NOT NULL,
  {n("created_at")} {stamp} NOT NULL,
  {n("expires_at")} {stamp} NOT NULL,
  {n("used_at")} {stamp}
){table_options}""",
        f"""CREATE INDEX {n("idx_locky_codes__expires_at")} ON {n("locky_codes")} ({n("expires_at")})""",
        f"""CREATE INDEX {n("idx_locky_codes__user_uuid_purpose_created_at")} ON {n("locky_codes")}"""
        f""" ({n("user_uuid")}, {n("purpose")}, {n("created_at")})""",
        f"""CREATE TABLE {n("locky_outbox")} (
  {n("id")} {ident},
  {n("purpose")} VARCHAR(16) NOT NULL,
  {n("email")} VARCHAR(254) NOT NULL,
  {n("user_uuid")} VARCHAR(36) NOT NULL,
  {n("created_at")} {stamp} NOT NULL,
  {n("due_at")} {stamp} NOT NULL,
  {n("held_until")} {stamp},
  {n("attempts")} INTEGER NOT NULL
){table_options}""",
        f"""CREATE INDEX {n("idx_locky_outbox__due_at")} ON {n("locky_outbox")} ({n("due_at")})""",
        f"""CREATE TABLE {n("locky_totp")} (
  {n("user_uuid")} VARCHAR(36) {"NOT NULL PRIMARY KEY" if dialect == "SQLite" else "PRIMARY KEY"},
  {n("secret")} VARCHAR(255) NOT NULL,
  {n("confirmed")} BOOLEAN NOT NULL,
  {n("last_step")} BIGINT NOT NULL,
  {n("recovery_hashes")} VARCHAR(1024) NOT NULL,
  {n("created_at")} {stamp} NOT NULL
){table_options}""",
    ]
