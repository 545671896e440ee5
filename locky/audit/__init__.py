"""The audit trail (docs/http/audit.md): who did what, when, from where.

Every security event is written by :meth:`AuditTrail.record` inside the
``Storage.atomic()`` block of the change it records, so a change is never kept without
its event (nor an event without its change); in the same block every webhook whose
patterns select the event gets a delivery queued (:mod:`locky.webhooks.sender` sends it).
Once the outermost block has committed, the event is announced to the ``locky_event``
plugins with the same fields (:meth:`AuditTrail.watch`): one list of names, one call
(:meth:`AuditTrail.record`) for Locky and plugins alike (docs/events.md).

Who and where come from the request being served: :class:`Origin` (the client address by
the ``LOCKY_TRUSTED_PROXIES`` rule, the request id, the authenticated caller), set by the
request middleware for the duration of one request; outside a request (the operator's
command line) all three are empty.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

import orjson

# The names are the one vocabulary of :mod:`locky.events` (docs/events.md), re-exported
# here because every recording call site says ``audit.USER_UPDATED``.
from locky.events import (
    ADMIN_GRANTED, ADMIN_REVOKED, EMAIL_VERIFIED, GROUP_CREATED, GROUP_DELETED, GROUP_UPDATED, KEY_ROTATED,
    LOGIN_FAILED, LOGIN_LOCKED, LOGIN_SUCCEEDED, MEMBER_ADDED, MEMBER_REMOVED, MFA_DISABLED, MFA_ENABLED,
    PASSWORD_CHANGED, PASSWORD_RESET, PASSWORD_RESET_REQUESTED, ROLE_CREATED, ROLE_DELETED, ROLE_UPDATED,
    TOKEN_REFRESHED, TOKEN_REUSE_DETECTED, TOKEN_REVOKED, USER_DELETED, USER_DISABLED, USER_ENABLED,
    USER_REGISTERED, USER_UPDATED, WEBHOOK_CREATED, WEBHOOK_DELETED,
)
from locky.events import NAMES as EVENTS
from locky.events import RESERVED_PREFIXES, Event
from locky.records import AuditEvent, utcnow, wire_time

log = logging.getLogger("locky")

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
        return wire_time(details)
    if details is None or isinstance(details, (str, int, float, bool)):
        return details
    return str(details)



_ORIGIN_ACTOR = object()


#: The events recorded in the outermost open ``atomic()`` block of this thread (or task),
#: announced once it has committed; ``None`` outside every block.
_block: ContextVar[list[Event] | None] = ContextVar("locky_audit_block", default=None)

#: A plugin's own event name: a prefix of its own and at least one more part, in the
#: letters the trail's filter takes (``api_keys.created``), at most 64 characters.
PLUGIN_EVENT = re.compile(r"^[a-z_]+(\.[a-z_]+)+$")
MAX_NAME = 64


class AuditTrail:
    """Records the events of one app, queues their webhook deliveries, and announces
    each to the ``locky_event`` plugins once the transaction that wrote it committed.

    ``names`` is the one list of what may be recorded: Locky's own
    (:data:`locky.events.NAMES`) and those the plugins declared (``locky_audit_events``).
    """

    def __init__(self, context):
        self.context = context
        self.names: frozenset[str] = frozenset(EVENTS)

    # -- names -----------------------------------------------------------------------

    def declare(self, declared: Iterable[Iterable[str] | None]) -> None:
        """Add the names the plugins record, one collection per plugin (what the
        ``locky_audit_events`` hook answers). Raises :class:`~locky.settings.SettingsError`
        (startup stops) for a name that is malformed, starts with one of Locky's own
        prefixes (:data:`~locky.events.RESERVED_PREFIXES`), or whose prefix another plugin
        uses too."""
        from locky.settings import SettingsError

        owners: dict[str, int] = {}
        added: set[str] = set()
        for number, names in enumerate(declared):
            for name in names or ():
                if not isinstance(name, str) or len(name) > MAX_NAME or not PLUGIN_EVENT.fullmatch(name):
                    raise SettingsError(f"plugin event {name!r}: a name is a prefix of the plugin's own and more"
                                        f" parts, lowercase letters and _ joined by dots (api_keys.created),"
                                        f" at most {MAX_NAME} characters")
                prefix = name.split(".")[0]
                if prefix in RESERVED_PREFIXES:
                    raise SettingsError(f"plugin event {name}: the prefix {prefix}. is Locky's own; give the"
                                        " plugin's events a prefix of its own")
                if owners.setdefault(prefix, number) != number:
                    raise SettingsError(f"plugin event {name}: another plugin records events under {prefix}.;"
                                        " each plugin needs a prefix of its own")
                added.add(name)
        self.names = frozenset(EVENTS) | added

    def knows(self, pattern: str) -> bool:
        """Whether a filter or webhook pattern selects some event: ``*``, a name, or a
        prefix ending in ``.*``."""
        if pattern == "*" or pattern in self.names:
            return True
        return pattern.endswith(".*") and any(name.startswith(pattern[:-1]) for name in self.names)

    # -- recording ---------------------------------------------------------------------

    def record(self, event: str, *, target_type: str | None = None, target_uuid: str | None = None,
               details: dict | None = None, actor_uuid: Any = _ORIGIN_ACTOR, record: Any = None) -> AuditEvent:
        """Store ``event`` (and its webhook deliveries) in the caller's ``atomic()``
        block, or in a transaction of its own outside one, and announce it to the
        ``locky_event`` plugins once that transaction committed (nothing is announced
        for a block that is undone).

        This is the one call that records an event, Locky's and plugins' alike: a
        plugin records names it declared with ``locky_audit_events``; any other name
        raises ``ValueError``. ``actor_uuid`` defaults to the request's caller; pass it
        where the actor is someone else (a login's user). ``record`` (not stored) is
        the record after the change, handed to the plugins with the event."""
        if event not in self.names:
            raise ValueError(f"{event!r} is no event of Locky's nor one a plugin declared (locky_audit_events)")
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
            pending = _block.get()
            if pending is not None:
                pending.append(announcement(entry, record))
        if pending is None:  # a storage whose blocks are not watched (see watch): committed by now
            self.announce([announcement(entry, record)])
        if hooks and _origin.get() is not None:
            origin.queued = True  # the sender is woken when the request ends, after its commit
        # Outside a request (a command) the servers' senders find the deliveries on their next look.
        return entry

    # -- announcing --------------------------------------------------------------------

    def watch(self, storage) -> None:
        """Make ``storage.atomic()`` note the events recorded in its outermost block and
        announce them after that block committed; a block that raises (its transaction
        undone, or its commit refused) announces nothing. Nested blocks join the
        outermost one, as the storage's own do."""
        inner = storage.atomic

        @contextmanager
        def atomic():
            if _block.get() is not None:
                with inner():
                    yield
                return
            pending: list[Event] = []
            token = _block.set(pending)
            try:
                with inner():
                    yield
            finally:
                _block.reset(token)
            self.announce(pending)

        storage.atomic = atomic

    def announce(self, announced: list[Event]) -> None:
        """Tell every ``locky_event`` implementation of each event; never raises (a
        failing implementation is logged)."""
        if not announced:
            return
        hook = self.context.hook.locky_event
        if not hook.get_hookimpls():
            return
        for event in announced:
            try:
                hook(event=event, context=self.context)
            except Exception:
                log.exception("a locky_event implementation failed on %s", event.name)


def announcement(entry: AuditEvent, record: Any = None) -> Event:
    """The :class:`~locky.events.Event` plugins hear for ``entry``: the trail's fields
    (empty ``ip`` and ``request_id`` as ``None``), aware UTC time, and ``record`` (a
    ``User`` without its ``password_hash``)."""
    if getattr(record, "password_hash", None):
        record = dataclasses.replace(record, password_hash="")
    created = entry.created_at
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return Event(name=entry.event, actor_uuid=entry.actor_uuid, target_type=entry.target_type,
                 target_uuid=entry.target_uuid, client_address=entry.ip or None, request_id=entry.request_id or None,
                 details=entry.details, created_at=created, record=record, uuid=entry.uuid)


def event_body(entry: AuditEvent) -> dict[str, Any]:
    """An event as ``GET /v1/internal/audit`` shows it."""
    return {
        "id": entry.id, "uuid": entry.uuid, "created_at": wire_time(entry.created_at), "event": entry.event,
        "actor_uuid": entry.actor_uuid, "target_type": entry.target_type, "target_uuid": entry.target_uuid,
        "ip": entry.ip, "request_id": entry.request_id, "details": entry.details,
    }


def delivery_body(entry: AuditEvent) -> str:
    """The JSON body POSTed to webhooks: ``{"id", "event", "created_at", "data"}``."""
    data = {
        "actor_uuid": entry.actor_uuid, "target_type": entry.target_type, "target_uuid": entry.target_uuid,
        "ip": entry.ip, "request_id": entry.request_id, "details": entry.details,
    }
    body = {"id": entry.uuid, "event": entry.event, "created_at": wire_time(entry.created_at), "data": data}
    return orjson.dumps(body).decode()
