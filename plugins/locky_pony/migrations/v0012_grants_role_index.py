"""Step 12: an index on the global grants' role, with the user it is granted to.

``GET /v1/internal/authz/subjects`` reads the holders of every role that allows what it
is asked about (``GrantStore.holders``), ``admin`` among them for nearly every question.
The grants table has a row per user and role granted: a role given to every user (a
custom ``staff`` role) makes it as long as the users table, and without this index each
page of subjects read all of it once per role. The unique key ``(user_uuid, role)``
cannot answer a question by role alone; this one answers it from the index alone.
"""

DESCRIPTION = "grants: index on (role, user_uuid) for the holders of a role"

TABLE = "locky_grants"
INDEX = "idx_locky_grants__role_user_uuid"


def statements(dialect: str, collation: str) -> list[str]:
    q = "`" if dialect == "MySQL" else '"'
    return [f"CREATE INDEX {q}{INDEX}{q} ON {q}{TABLE}{q} ({q}role{q}, {q}user_uuid{q})"]
