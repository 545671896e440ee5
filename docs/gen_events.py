"""Write ``docs/events.md`` from ``locky/events.py``: every event of the audit trail,
which is every event a ``locky_event`` implementation hears, each action that records
it, and its target, record and details, from the one table ``locky.events.SPECS``.

    python docs/gen_events.py          # rewrite docs/events.md
    python docs/gen_events.py --check  # exit 1 when docs/events.md is out of date

``tests/test_docs_events.py`` fails when the page and the table disagree, and drives
every row of the table through the API or the command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from locky import events

PAGE = Path(__file__).resolve().parent / "events.md"
HEADER = """# Locky events

<!-- Generated from locky/events.py (SPECS) by docs/gen_events.py; do not edit by hand. -->

One list of events: each is written to the audit trail (`GET
/v1/internal/audit`, webhooks) in the transaction of the change it tells of, and
announced to the [`locky_event` hook](hooks.md) under the same name, with the same
fields, once that transaction has committed: from the HTTP API and the console, and
from the operator's commands. A change that is undone announces nothing; an
implementation that raises is logged and changes nothing.

Every `Event` carries:

| Field | What it is |
|---|---|
| `name` | The event's name (the table below), the trail's `event`. |
| `uuid` | The event's id in the trail (a webhook delivery's `Locky-Event-Id`). |
| `actor_uuid` | Who acted: the logged-in caller (the account itself for a login or a refresh); null when nobody is logged in and on the command line. |
| `target_type`, `target_uuid` | What it was done to: `user`, `session`, `group`, `member`, `role`, `key`, `webhook` and its uuid (a key's kid); null where the table says so. |
| `client_address` | The trail's `ip`: the caller's address (`X-Forwarded-For` only from `LOCKY_TRUSTED_PROXIES`); null outside a request. |
| `request_id` | The request's `X-Request-ID` (the one the response carries); null outside a request. |
| `details` | The trail's facts of the event: the keys the table lists (one ending in `?` only where it applies). Never a password, hash, token, code or secret. |
| `created_at` | When it was recorded (aware UTC). |
| `record` | Not in the trail: the record (a `locky.records` dataclass) as it is after the change, where the table names one; else null. Never a password, password hash (a `User` has an empty `password_hash`) or token. |

A plugin records events of its own with the same call Locky uses,
`context.audit.record(name, target_type=..., target_uuid=..., details=..., record=...)`,
under names it declares with the [`locky_audit_events` hook](hooks.md) and a prefix of
its own (`api_keys.created`; Locky's prefixes below, and `locky.`, are refused). They
are stored in the trail, selected by its `event` filter (`api_keys.*`) and by webhook
patterns, and announced like these.
"""


def cell(value) -> str:
    if value is None or value == ():
        return "-"
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value)
    return str(value).replace("|", "\\|")


def render() -> str:
    out = [HEADER, "## Events\n",
           "| Event | Action | Recorded when | Target | `record` | `details` |",
           "|---|---|---|---|---|---|"]
    for name in events.NAMES:
        for spec in (s for s in events.SPECS if s.name == name):
            target = f"`{spec.target_type}`" if spec.target_type else "-"
            out.append(f"| `{spec.name}` | `{spec.action}` | {cell(spec.fires_when)} | {target}"
                       f" | {cell(spec.record)} | {cell(spec.details)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run python docs/gen_events.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
