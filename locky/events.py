"""Events announced to plugins through the ``locky_event`` hook."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

USER_REGISTERED = "user.registered"
LOGIN_SUCCEEDED = "login.succeeded"
LOGIN_FAILED = "login.failed"
TOKEN_REVOKED = "token.revoked"
RECORD_CREATED = "record.created"
RECORD_UPDATED = "record.updated"
RECORD_DELETED = "record.deleted"
EMAIL_VERIFIED = "user.email_verified"
PASSWORD_RESET = "user.password_reset"
MFA_ENABLED = "user.mfa_enabled"
MFA_DISABLED = "user.mfa_disabled"
KEY_ROTATED = "key.rotated"

NAMES = (
    USER_REGISTERED,
    LOGIN_SUCCEEDED,
    LOGIN_FAILED,
    TOKEN_REVOKED,
    RECORD_CREATED,
    RECORD_UPDATED,
    RECORD_DELETED,
    EMAIL_VERIFIED,
    PASSWORD_RESET,
    MFA_ENABLED,
    MFA_DISABLED,
    KEY_ROTATED,
)


@dataclass(frozen=True)
class Event:
    """One thing that happened.

    ``kind`` names the record kind (``users``, ``groups``, ``members``, ``roles``,
    ``sessions``) where there is one; ``actor_uuid`` is the caller, if known;
    ``record`` is the record as it is after the change. Never holds a password or token.
    """

    name: str
    kind: str | None = None
    record: Any = None
    actor_uuid: str | None = None
    request_id: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    details: dict[str, Any] = field(default_factory=dict)
