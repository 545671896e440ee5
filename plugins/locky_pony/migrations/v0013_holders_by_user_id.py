"""Step 13: the holders of a role, in the order of their users' ids.

``GET /v1/internal/authz/subjects`` lists the users who may do something by id, a page
at a time, and reads each page's candidates from the holders of the roles that allow it
(``GrantStore.holders_by_id``, ``MemberStore.holders_by_id``; :mod:`locky_pony.holder_reads`).
For that each role's holders must be one range of an index in their users' order:

- ``locky_grants`` gets ``user_id``, the id of the user ``user_uuid`` names, filled in
  here for the grants a database holds (NULL for a grant to an OAuth client, which is no
  user), and the index ``(role, user_id, user_uuid)``, which also answers what step 12's
  ``(role, user_uuid)`` did (``GrantStore.holders``): that one is dropped;
- ``locky_members`` already holds its user's id (``user``): the index
  ``(group_uuid, del_token, role, user, user_uuid)`` makes a group's holders of a role
  one range.

Both indexes hold every column the read asks for, so it is answered from the index alone.
"""

from .ddl import Ddl

DESCRIPTION = "grants: user_id; grants and memberships: indexes of a role's holders by user id"

GRANTS, MEMBERS, USERS = "locky_grants", "locky_members", "locky_users"
GRANT_INDEX = ("role", "user_id", "user_uuid")
#: Step 12's index, which the new one replaces.
STEP_12_INDEX = "idx_locky_grants__role_user_uuid"
MEMBER_INDEX = ("group_uuid", "del_token", "role", "user", "user_uuid")


def statements(dialect: str, collation: str) -> list[str]:
    ddl = Ddl(dialect, collation)
    n = ddl.name
    integer = "INTEGER" if dialect == "SQLite" else "BIGINT"
    return [
        f"ALTER TABLE {n(GRANTS)} ADD COLUMN {n('user_id')} {integer}",
        f"UPDATE {n(GRANTS)} SET {n('user_id')} = (SELECT {n('id')} FROM {n(USERS)}"
        f" WHERE {n(USERS)}.{n('uuid')} = {n(GRANTS)}.{n('user_uuid')})",
        ddl.index(GRANTS, *GRANT_INDEX),
        f"DROP INDEX {n(STEP_12_INDEX)}" + (f" ON {n(GRANTS)}" if dialect == "MySQL" else ""),
        ddl.index(MEMBERS, *MEMBER_INDEX),
    ]
