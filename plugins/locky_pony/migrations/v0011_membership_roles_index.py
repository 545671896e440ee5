"""Step 11: an index that answers "which role does this user hold in these groups?" alone.

The decision API reads the roles of a batch of (user, group) pairs in one statement
(``MemberStore.roles_in``, :mod:`locky_pony.member_reads`): the memberships of the batch's
users that are live and in the batch's groups. ``(user_uuid, del_token, id)`` found the
users' rows, and each row was then read from the table for its group and role. This
index holds all four columns the statement asks about, so it is answered from the index
alone, as is ``role_of`` for one pair.
"""

DESCRIPTION = "memberships: index on (user_uuid, del_token, group_uuid, role) for batch role reads"

TABLE = "locky_members"
INDEX = "idx_locky_members__user_uuid_del_token_group_uuid_role"


def statements(dialect: str, collation: str) -> list[str]:
    q = "`" if dialect == "MySQL" else '"'
    columns = ", ".join(f"{q}{name}{q}" for name in ("user_uuid", "del_token", "group_uuid", "role"))
    return [f"CREATE INDEX {q}{INDEX}{q} ON {q}{TABLE}{q} ({columns})"]
