"""An event subscriber: every event of Locky's audit trail as one JSON line in a file.

Load it by module name (``LOCKY_PLUGINS=locky_audit_log`` with this folder on
``PYTHONPATH``) and name the file in the TOML settings::

    [plugins.audit_log]
    path = "/var/log/locky/audit.jsonl"

or with ``LOCKY_AUDIT_LOG=/var/log/locky/audit.jsonl``. Each line holds the event's
name (``event``), ``uuid``, ``created_at`` (RFC 3339 UTC), ``actor_uuid``, ``target_type``,
``target_uuid``, ``ip``, ``request_id`` and ``details``, as ``GET /v1/internal/audit``
shows them, and the ``record`` after the change. Events come from requests and from the
operator's commands (``locky grant-admin``) alike. Password hashes are never written
(the ``User`` record's is empty, and dropped here), and events never carry passwords or
tokens.

Lines are appended with ``O_APPEND`` and one ``write`` each, so several worker processes
can share the file without interleaving lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from datetime import datetime, timezone
from typing import Any

from locky import SettingsError, hookimpl

STATE = "audit_log"  # our key in context.state
NEVER_WRITTEN = {"password", "password_hash", "access_token", "refresh_token", "token"}


class AuditLog:
    """An append-only JSON-lines file."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SettingsError(f"audit_log: cannot open {path}: {exc.strerror}") from None

    def write(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, default=_json, ensure_ascii=False, sort_keys=True) + "\n").encode()
        with self._lock:
            os.write(self._fd, line)

    def close(self) -> None:
        os.close(self._fd)


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if dataclasses.is_dataclass(value):
        return _clean(dataclasses.asdict(value))
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in NEVER_WRITTEN}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def entry(event) -> dict[str, Any]:
    """The JSON object written for ``event``."""
    record = _clean(dataclasses.asdict(event.record)) if dataclasses.is_dataclass(event.record) else event.record
    return {
        "event": event.name,
        "uuid": event.uuid,
        "created_at": event.created_at,
        "actor_uuid": event.actor_uuid,
        "target_type": event.target_type,
        "target_uuid": event.target_uuid,
        "ip": event.client_address,
        "request_id": event.request_id,
        "record": record,
        "details": _clean(event.details),
    }


@hookimpl
def locky_add_settings(settings):
    """``[plugins.audit_log]``: a misspelt option stops startup instead of being ignored."""
    settings.add_table("audit_log", {"path": "the JSON-lines file events are appended to (or LOCKY_AUDIT_LOG)"})


@hookimpl
def locky_startup(context):
    options = context.settings.extra.get("audit_log", {})
    path = options.get("path") or os.environ.get("LOCKY_AUDIT_LOG")
    if not path:
        raise SettingsError(
            "locky_audit_log needs a file: [plugins.audit_log] path = \"...\" or LOCKY_AUDIT_LOG"
        )
    context.state[STATE] = AuditLog(str(path))


@hookimpl
def locky_event(event, context):
    log = context.state.get(STATE)
    if log is not None:  # events during startup (none today) come before the file is open
        log.write(entry(event))


@hookimpl
def locky_shutdown(context):
    log = context.state.pop(STATE, None)
    if log is not None:
        log.close()
