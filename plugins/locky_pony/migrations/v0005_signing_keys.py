"""Step 5: token-signing keys (docs/http/tokens.md#published-keys-and-metadata).

``locky_signing_keys`` holds every key pair the service signs tokens with: the public
JWK, and the private half as PEM sealed with a key derived from ``LOCKY_JWT_SECRET``
(a database dump alone reveals no private key). ``active_slot`` is 1 on the one active
key and NULL on retired ones; its unique key makes a second active key impossible, so
hosts rotating at the same moment agree on one. A 1.0.0 database has no keys: the first
start with an asymmetric ``LOCKY_JWT_ALGORITHM`` makes one.
"""

DESCRIPTION = "signing keys: locky_signing_keys (public JWK, sealed private key, one active)"


def statements(dialect: str, collation: str) -> list[str]:
    q = "`" if dialect == "MySQL" else '"'
    ident = {
        "SQLite": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "PostgreSQL": "BIGSERIAL PRIMARY KEY",
        "MySQL": "BIGINT PRIMARY KEY AUTO_INCREMENT",
    }[dialect]
    stamp = {"SQLite": "DATETIME", "PostgreSQL": "TIMESTAMP", "MySQL": "DATETIME(6)"}[dialect]
    table_options = f"\nCOLLATE {collation}\nDEFAULT CHARSET utf8mb4\nENGINE InnoDB" if dialect == "MySQL" else ""

    def n(name: str) -> str:
        return f"{q}{name}{q}"

    return [
        f"""CREATE TABLE {n("locky_signing_keys")} (
  {n("id")} {ident},
  {n("kid")} VARCHAR(64) UNIQUE NOT NULL,
  {n("alg")} VARCHAR(16) NOT NULL,
  {n("public_jwk")} VARCHAR(2048) NOT NULL,
  {n("private_key")} VARCHAR(8192) NOT NULL,
  {n("created_at")} {stamp} NOT NULL,
  {n("retired_at")} {stamp},
  {n("active_slot")} INTEGER UNIQUE
){table_options}""",
    ]
