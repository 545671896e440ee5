"""Step 7: the cache revision (``LOCKY_AUTH_CACHE=revision``).

A number in ``locky_meta`` that every change to a user's record moves, in the change's
own transaction (an update, a deletion, a verified address, a second factor turned on or
off). The statement that authenticates a request reads it with the session, so a worker
may serve user records it read earlier in memory for as long as the number has not
moved: see ``locky_pony.revision_bus``. A 1.0.0 database starts it at 1.
"""

DESCRIPTION = "locky_meta: cache_revision, moved by every change to a user's record"


def statements(dialect: str, collation: str) -> list[str]:
    q = "`" if dialect == "MySQL" else '"'
    return [f"INSERT INTO {q}locky_meta{q} ({q}key{q}, {q}number{q}) VALUES ('cache_revision', 1)"]
