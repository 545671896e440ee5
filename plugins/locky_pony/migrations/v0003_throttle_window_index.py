"""Step 3: the login throttle's backoff column and the index that prunes ended rows.

``last_attempt`` is when a key's last attempt was counted: a lock runs from there and
doubles with each further failure (see ``locky.providers.LoginThrottle``). Rows kept by
1.0.0 take their window start as their last attempt, so a lock in progress during the
upgrade carries on rather than lifting. The index on ``window_start`` lets every new key
delete a bounded batch of keys whose window ended, so the table no longer grows with
each email ever tried.
"""

DESCRIPTION = "login throttle: last_attempt for exponential backoff, index on window_start for pruning"

TABLE = "locky_login_throttle"
INDEX = "idx_locky_login_throttle__window_start"


def statements(dialect: str, collation: str) -> list[str]:
    q = "`" if dialect == "MySQL" else '"'
    real = {"SQLite": "REAL", "PostgreSQL": "DOUBLE PRECISION", "MySQL": "DOUBLE"}[dialect]
    table, index = f"{q}{TABLE}{q}", f"{q}{INDEX}{q}"
    return [
        f"ALTER TABLE {table} ADD COLUMN {q}last_attempt{q} {real} NOT NULL DEFAULT 0",
        f"UPDATE {table} SET {q}last_attempt{q} = {q}window_start{q}",
        f"CREATE INDEX {index} ON {table} ({q}window_start{q})",
    ]
