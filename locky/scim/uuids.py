"""Resource ids as SCIM clients send them: a resource's ``id`` is its record's uuid.
Anything that is no uuid names no resource (404 in a path, "No such user." as a
member, no match in a filter) and never reaches storage, whose columns have a width."""

from __future__ import annotations

from locky.schemas import UUID


def record_uuid(value) -> str | None:
    """The uuid ``value`` names, as Locky stores uuids (lowercase), or ``None``."""
    if isinstance(value, str) and UUID.fullmatch(value):
        return value.lower()
    return None
