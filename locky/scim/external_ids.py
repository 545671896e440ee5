"""A provisioning system's ``externalId`` as Locky keeps it (``external_id`` of users
and groups): any text of at most :data:`MAX_LENGTH` characters, as given; empty or
absent is none. Longer is a 400 ``invalidValue`` before storage sees it."""

from __future__ import annotations

from locky.errors import Invalid

#: The storage column's width (``VARCHAR(255)``).
MAX_LENGTH = 255


def checked(value: str | None) -> str | None:
    """``value`` as stored: ``None`` for none, else itself when it fits."""
    if not value:
        return None
    if len(value) > MAX_LENGTH:
        raise Invalid.one("externalId", f"At most {MAX_LENGTH} characters.")
    return value
