"""Rendering of API answers: aligned tables for people, ``--json`` for scripts.

JSON output is the server's body, indented, with keys sorted so that two runs print
byte-identical text. Tables show chosen columns in a fixed order; a single record is a
two-column ``field value`` listing.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence, TextIO

# Columns shown in list tables, per record kind.
COLUMNS: dict[str, tuple[str, ...]] = {
    "users": ("id", "uuid", "name", "email", "created_at"),
    "groups": ("id", "uuid", "name", "description"),
    "members": ("id", "uuid", "group_uuid", "user_uuid", "role"),
    "roles": ("id", "name", "builtin", "permissions", "description"),
    # authz (docs/http/authorization.md): what a user may do, and explain's roles held and rules matched
    "permissions": ("resource", "action", "scope", "group_uuid", "via"),
    "held_roles": ("role", "scope", "group_uuid"),
    "matched": ("role", "scope", "group_uuid", "rule"),
    # the audit trail and webhooks (docs/http/audit.md); --json shows every field
    "events": ("id", "created_at", "event", "actor_uuid", "target_type", "target_uuid", "ip", "details"),
    "webhooks": ("id", "uuid", "url", "events", "description", "created_at"),
    "deliveries": ("id", "event", "event_uuid", "status", "attempts", "last_status_code", "next_attempt_at",
                   "last_error"),
}
# Field order of a single record: these first, then the rest alphabetically.
LEADING = ("id", "uuid", "name", "email", "description", "group_uuid", "user_uuid", "role", "builtin", "permissions")
TRAILING = ("created_at", "updated_at", "deleted_at")


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def cell(value: Any) -> str:
    """One value as table text: permissions as ``resource:action`` lists, null as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(cell(item) for item in value) or "-"
    if isinstance(value, dict):
        if set(value) == {"resource", "action"}:
            return f"{value['resource']}:{value['action']}"
        return json.dumps(value, sort_keys=True)
    return " ".join(str(value).split()) if isinstance(value, str) else str(value)


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    """Columns padded to their widest cell, separated by two spaces."""
    lines = [list(header)] + [list(r) for r in rows] if header else [list(r) for r in rows]
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for line in lines:
        padded = [text.ljust(width) for text, width in zip(line, widths)]
        out.append("  ".join(padded).rstrip())
    return "\n".join(out)


def record_table(kind: str, records: Iterable[Mapping[str, Any]]) -> str:
    columns = COLUMNS.get(kind)
    records = list(records)
    if columns is None:
        columns = tuple(sorted({key for record in records for key in record}))
    rows = [[cell(record.get(column)) for column in columns] for record in records]
    return table(rows, [column.upper() for column in columns])


def field_order(record: Mapping[str, Any]) -> list[str]:
    keys = set(record)
    middle = sorted(keys - set(LEADING) - set(TRAILING))
    return [k for k in LEADING if k in keys] + middle + [k for k in TRAILING if k in keys]


def record_listing(record: Mapping[str, Any]) -> str:
    return table([[key, cell(record[key])] for key in field_order(record)])


class Printer:
    """Writes answers to ``out`` as JSON or as text, per ``--json``."""

    def __init__(self, out: TextIO, as_json: bool):
        self.out = out
        self.as_json = as_json

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def json(self, value: Any) -> None:
        self.line(to_json(value))

    def record(self, record: Mapping[str, Any]) -> None:
        self.json(record) if self.as_json else self.line(record_listing(record))

    def records(self, kind: str, body: Mapping[str, Any]) -> None:
        if self.as_json:
            self.json(body)
        else:
            self.line(record_table(kind, body.get(kind) or []))

    def message(self, text: str, value: Any = None) -> None:
        """A confirmation: ``text`` for people, ``value`` (if any) for scripts."""
        if self.as_json:
            if value is not None:
                self.json(value)
        else:
            self.line(text)
