"""Events announced to plugins through the ``locky_event`` hook: their names, the
:class:`Event` a plugin gets, and :data:`SPECS`, the one description of when each fires
and what it carries (``docs/events.md`` is generated from it by ``docs/gen_events.py``,
and ``tests/test_docs_events.py`` drives every row through the API).

These are the plugin-facing events, announced after a change commits. The audit trail
(:mod:`locky.audit`, ``GET /v1/internal/audit`` and webhooks) has names of its own,
some alike (``login.succeeded``), some not (``user.email_verified`` here is
``email.verified`` there): it records more (every refused access, each field changed)
and stores what it records.
"""

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
    ``sessions``, ``keys``) where there is one; ``actor_uuid`` is the caller, if known;
    ``record`` is the record as it is after the change. Never holds a password or token.

    ``request_id`` (the response's ``X-Request-ID``) and ``client_address`` (the
    caller's address by the ``LOCKY_TRUSTED_PROXIES`` rule) are filled in by
    :meth:`locky.context.Context.emit` from the request being served; both are ``None``
    for an event outside a request (a command such as ``locky keys rotate``).
    :data:`SPECS` says which ``kind``, ``record`` and ``details`` each event has.
    """

    name: str
    kind: str | None = None
    record: Any = None
    actor_uuid: str | None = None
    request_id: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    details: dict[str, Any] = field(default_factory=dict)
    client_address: str | None = None


@dataclass(frozen=True)
class EventSpec:
    """One way an event fires: a row of ``docs/events.md``.

    ``action`` is the request that fires it (``"POST /v1/public/users/login"``), or the
    command outside any request; ``fires_when`` says when in words; ``kind`` and
    ``record`` (the name of the :mod:`locky.records` class, or ``None``) and ``details``
    (its keys, exactly) are what the :class:`Event` carries. An event fired by several
    actions, or in several shapes, has a row for each.
    """

    name: str
    action: str
    fires_when: str
    kind: str | None
    record: str | None
    details: tuple[str, ...] = ()


_LOGIN = "POST /v1/public/users/login"
_MFA_LOGIN = "POST /v1/public/users/login/mfa"
_USER = "PUT /v1/private/users/{id}"

#: Every event, every action that fires it, and what it carries; the single source of
#: ``docs/events.md``. Record events come after the change's transaction committed;
#: ``record`` is the record as stored then (a deleted one with its ``deleted_at``).
SPECS: tuple[EventSpec, ...] = (
    EventSpec(USER_REGISTERED, "POST /v1/public/users/register", "An account is registered.", "users", "User"),
    EventSpec(RECORD_CREATED, "POST /v1/public/users/register",
              "An account is registered (right after `user.registered`).", "users", "User"),
    EventSpec(RECORD_CREATED, "POST /v1/private/groups", "A group is created.", "groups", "Group"),
    EventSpec(RECORD_CREATED, "POST /v1/private/members", "A user joins a group.", "members", "Member"),
    EventSpec(RECORD_CREATED, "POST /v1/private/roles", "A custom role is created.", "roles", "Role"),
    EventSpec(RECORD_UPDATED, _USER, "A user is updated (any field, `disabled` included).", "users", "User"),
    EventSpec(RECORD_UPDATED, "PUT /v1/private/groups/{id}", "A group is updated.", "groups", "Group"),
    EventSpec(RECORD_UPDATED, "PUT /v1/private/roles/{id}", "A custom role is updated.", "roles", "Role"),
    EventSpec(RECORD_DELETED, "DELETE /v1/private/users/{id}", "A user is soft-deleted.", "users", "User"),
    EventSpec(RECORD_DELETED, "DELETE /v1/private/groups/{id}", "A group is soft-deleted.", "groups", "Group"),
    EventSpec(RECORD_DELETED, "DELETE /v1/private/members/{id}", "A membership ends (removed, or left).",
              "members", "Member"),
    EventSpec(RECORD_DELETED, "DELETE /v1/private/roles/{id}", "A custom role is soft-deleted.", "roles", "Role"),
    EventSpec(LOGIN_SUCCEEDED, _LOGIN, "A password login issues tokens (an account without a second factor).",
              "users", "User"),
    EventSpec(LOGIN_SUCCEEDED, _MFA_LOGIN, "The second step of a login (TOTP or recovery code) issues tokens.",
              "users", "User"),
    EventSpec(LOGIN_FAILED, _LOGIN, "A wrong password, or no live account has the email (401).",
              None, None, ("email",)),
    EventSpec(LOGIN_FAILED, _LOGIN, "The right password for an account that is disabled, or whose email is not"
              " verified while `LOCKY_REQUIRE_VERIFIED_EMAIL` is on (403); `actor_uuid` is the account.",
              "users", None, ("email", "reason")),
    EventSpec(LOGIN_FAILED, _MFA_LOGIN, "A wrong TOTP or recovery code (401); `actor_uuid` is the account.",
              "users", None, ("email", "reason")),
    EventSpec(LOGIN_FAILED, _USER, "A user changing their own password or email gives no `current_password`,"
              " or a wrong one (400); `actor_uuid` is the account.", "users", None, ("email", "reason")),
    EventSpec(LOGIN_FAILED, _LOGIN, "The email or the client address is locked after too many failures (429);"
              " likewise on `/login/mfa` and a `PUT` that checks `current_password`.",
              None, None, ("email", "reason")),
    EventSpec(TOKEN_REVOKED, "POST /v1/private/users/logout", "The caller logs out: their login ends.",
              "sessions", None, ("session_uuid", "reason")),
    EventSpec(TOKEN_REVOKED, "POST /v1/public/tokens/revoke", "A live token is revoked: its login ends.",
              "sessions", None, ("session_uuid", "reason")),
    EventSpec(TOKEN_REVOKED, "POST /v1/public/users/refresh", "A refresh token is used a second time: its login"
              " ends (401). Also sent for a refresh token of a login already ended.", "sessions", None, ("session_uuid", "reason")),
    EventSpec(TOKEN_REVOKED, _USER, "A password change, an admin's change of someone's email, or disabling an"
              " account ends that user's other logins (`sessions`: how many).",
              "sessions", None, ("user_uuid", "sessions", "reason")),
    EventSpec(EMAIL_VERIFIED, "POST /v1/public/users/verify", "A verification code proves the account's email.",
              "users", "User"),
    EventSpec(PASSWORD_RESET, "POST /v1/public/users/password/reset", "A reset code sets a new password; every"
              " login of the account ends (`sessions_revoked`: how many).", "users", "User", ("sessions_revoked",)),
    EventSpec(MFA_ENABLED, "POST /v1/private/users/me/mfa/totp/confirm", "A first code confirms TOTP: the"
              " account now needs a second factor.", "users", "User"),
    EventSpec(MFA_DISABLED, "DELETE /v1/private/users/me/mfa/totp", "TOTP is turned off, proved by a code.",
              "users", "User"),
    EventSpec(KEY_ROTATED, "POST /v1/private/keys/rotate", "An admin rotates the signing key.",
              "keys", None, ("kid", "alg")),
    EventSpec(KEY_ROTATED, "locky keys rotate", "The operator rotates the signing key from the command line (no"
              " request: `actor_uuid`, `request_id` and `client_address` are null).", "keys", None, ("kid", "alg")),
)
