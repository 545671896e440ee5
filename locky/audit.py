"""The audit trail (CONTRACT §12): who did what, when, from where.

Every security event is written by :meth:`AuditTrail.record` inside the
``Storage.atomic()`` block of the change it records, so a change is never kept without
its event (nor an event without its change); in the same block every webhook whose
patterns select the event gets a delivery queued (:mod:`locky.webhook_sender` sends it).

Who and where come from the request being served: :class:`Origin` (the client address by
the ``LOCKY_TRUSTED_PROXIES`` rule, the request id, the authenticated caller), set by the
request middleware for the duration of one request; outside a request (the operator's
command line) all three are empty.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from locky.records import AuditEvent, utcnow

USER_REGISTERED = "user.registered"
USER_UPDATED = "user.updated"
USER_DELETED = "user.deleted"
USER_DISABLED = "user.disabled"
USER_ENABLED = "user.enabled"
EMAIL_VERIFIED = "email.verified"
PASSWORD_CHANGED = "password.changed"
PASSWORD_RESET_REQUESTED = "password.reset_requested"
PASSWORD_RESET = "password.reset"
MFA_ENABLED = "mfa.enabled"
MFA_DISABLED = "mfa.disabled"
LOGIN_SUCCEEDED = "login.succeeded"
LOGIN_FAILED = "login.failed"
LOGIN_LOCKED = "login.locked"
TOKEN_REFRESHED = "token.refreshed"
TOKEN_REUSE_DETECTED = "token.reuse_detected"
TOKEN_REVOKED = "token.revoked"
GROUP_CREATED = "group.created"
GROUP_UPDATED = "group.updated"
GROUP_DELETED = "group.deleted"
MEMBER_ADDED = "member.added"
MEMBER_REMOVED = "member.removed"
ROLE_CREATED = "role.created"
ROLE_UPDATED = "role.updated"
ROLE_DELETED = "role.deleted"
ADMIN_GRANTED = "admin.granted"
ADMIN_REVOKED = "admin.revoked"
KEY_ROTATED = "key.rotated"
WEBHOOK_CREATED = "webhook.created"
WEBHOOK_DELETED = "webhook.deleted"

#: Every event Locky records, in the order CONTRACT §12 lists them.
EVENTS = (
    USER_REGISTERED, USER_UPDATED, USER_DELETED, USER_DISABLED, USER_ENABLED, EMAIL_VERIFIED,
    PASSWORD_CHANGED, PASSWORD_RESET_REQUESTED, PASSWORD_RESET, MFA_ENABLED, MFA_DISABLED,
    LOGIN_SUCCEEDED, LOGIN_FAILED, LOGIN_LOCKED, TOKEN_REFRESHED, TOKEN_REUSE_DETECTED, TOKEN_REVOKED,
    GROUP_CREATED, GROUP_UPDATED, GROUP_DELETED, MEMBER_ADDED, MEMBER_REMOVED,
    ROLE_CREATED, ROLE_UPDATED, ROLE_DELETED, ADMIN_GRANTED, ADMIN_REVOKED, KEY_ROTATED,
    WEBHOOK_CREATED, WEBHOOK_DELETED,
)

#: Keys never written into ``details`` (at any depth), whatever a caller passes: the
#: trail must not become a place where credentials leak.
SECRET_KEYS = frozenset({"password", "current_password", "password_hash", "hash", "token", "access_token",
                         "refresh_token", "mfa_token", "code", "secret", "recovery_codes", "private_key"})


@dataclass
class Origin:
    """Where the change being served comes from: ``ip`` (the client address),
    ``request_id``, ``actor_uuid`` (the authenticated caller, ``None`` when anonymous).
    ``queued`` is set once a webhook delivery was queued, so the request wakes this
    process's sender when it ends (after its transaction committed)."""

    ip: str = ""
    request_id: str = ""
    actor_uuid: str | None = None
    queued: bool = field(default=False, compare=False)


_origin: ContextVar[Origin | None] = ContextVar("locky_origin", default=None)


def begin(origin: Origin):
    """Make ``origin`` the current one (a request starts); returns the token for :func:`end`."""
    return _origin.set(origin)


def end(token) -> Origin | None:
    """Restore the origin before :func:`begin`; the one that ended."""
    ended = _origin.get()
    _origin.reset(token)
    return ended


def current() -> Origin:
    """The origin of the request being served (an empty one outside requests)."""
    return _origin.get() or Origin()


def clean(details: Any) -> Any:
    """``details`` without secret keys, at any depth, as JSON-ready values."""
    if isinstance(details, dict):
        return {str(k): clean(v) for k, v in details.items() if str(k).lower() not in SECRET_KEYS}
    if isinstance(details, (list, tuple, set, frozenset)):
        return [clean(v) for v in details]
    if isinstance(details, datetime):
        return stamp(details)
    if details is None or isinstance(details, (str, int, float, bool)):
        return details
    return str(details)


def stamp(moment: datetime) -> str:
    """RFC 3339 UTC with a ``Z``, as every time on the wire."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds") + "Z"


_ORIGIN_ACTOR = object()


class AuditTrail:
    """Records events of one app, and queues their webhook deliveries."""

    def __init__(self, context):
        self.context = context

    def record(self, event: str, *, target_type: str | None = None, target_uuid: str | None = None,
               details: dict | None = None, actor_uuid: Any = _ORIGIN_ACTOR) -> AuditEvent:
        """Store ``event`` (and its deliveries) in the caller's ``atomic()`` block, or in
        a transaction of its own outside one. ``actor_uuid`` defaults to the request's
        caller; pass it where the actor is someone else (a login's user)."""
        origin = current()
        actor = origin.actor_uuid if actor_uuid is _ORIGIN_ACTOR else actor_uuid
        storage = self.context.storage
        now = utcnow()
        with storage.atomic():
            entry = storage.audit.add(uuid=str(uuid.uuid4()), event=event, actor_uuid=actor,
                                      target_type=target_type, target_uuid=target_uuid, ip=origin.ip[:64],
                                      request_id=origin.request_id[:128], details=clean(details or {}),
                                      created_at=now)
            hooks = storage.webhooks.matching(event)
            if hooks:
                payload = delivery_body(entry)
                for hook in hooks:
                    storage.deliveries.queue(webhook_id=hook.id, event_uuid=entry.uuid, event=event,
                                             payload=payload, created_at=now)
        if hooks and _origin.get() is not None:
            origin.queued = True  # the sender is woken when the request ends, after its commit
        # Outside a request (a command) the servers' senders find the deliveries on their next look.
        return entry


def event_body(entry: AuditEvent) -> dict[str, Any]:
    """An event as ``GET /v1/internal/audit`` shows it."""
    return {
        "id": entry.id, "uuid": entry.uuid, "created_at": stamp(entry.created_at), "event": entry.event,
        "actor_uuid": entry.actor_uuid, "target_type": entry.target_type, "target_uuid": entry.target_uuid,
        "ip": entry.ip, "request_id": entry.request_id, "details": entry.details,
    }


def delivery_body(entry: AuditEvent) -> str:
    """The JSON body POSTed to webhooks: ``{"id", "event", "created_at", "data"}``."""
    data = {
        "actor_uuid": entry.actor_uuid, "target_type": entry.target_type, "target_uuid": entry.target_uuid,
        "ip": entry.ip, "request_id": entry.request_id, "details": entry.details,
    }
    body = {"id": entry.uuid, "event": entry.event, "created_at": stamp(entry.created_at), "data": data}
    return orjson.dumps(body).decode()
