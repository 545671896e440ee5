"""Write ``docs/events.md`` from ``locky/events.py``: every event a ``locky_event``
implementation gets, each action that fires it, and its ``kind``, ``record`` and
``details``, from the one table ``locky.events.SPECS``.

    python docs/gen_events.py          # rewrite docs/events.md
    python docs/gen_events.py --check  # exit 1 when docs/events.md is out of date

``tests/test_docs_events.py`` fails when the page and the table disagree, and drives
every row of the table through the API.
"""

from __future__ import annotations

import sys
from pathlib import Path

from locky import events

PAGE = Path(__file__).resolve().parent / "events.md"
HEADER = """# Locky events

<!-- Generated from locky/events.py (SPECS) by docs/gen_events.py; do not edit by hand. -->

Every event the [`locky_event` hook](hooks.md) announces, and each action that fires
it. An event is announced after the change it tells of is committed, in the process
that served the request; an implementation that raises is logged and changes nothing.

Every `Event` carries:

| Field | What it is |
|---|---|
| `name` | The event's name (the table below). |
| `kind` | The kind of record it is about: `users`, `groups`, `members`, `roles`, `sessions`, `keys`; or null. |
| `record` | The record (a `locky.records` dataclass) as it is after the change, or null. Never a password, password hash (a `User` has an empty `password_hash`) or token. |
| `actor_uuid` | Who acted: the caller; the account itself for a registration, login or code; null when unknown. |
| `request_id` | The request's `X-Request-ID` (the one the response carries); null outside a request. |
| `client_address` | The caller's address (`X-Forwarded-For` only from `LOCKY_TRUSTED_PROXIES`); null outside a request. |
| `at` | When it was announced (UTC). |
| `details` | Facts of the event: exactly the keys the table lists. |

These names are not the audit trail's (`GET /v1/internal/audit`, webhooks): the
trail records more, under names of its own (`email.verified` for `user.email_verified`).
"""


def cell(value) -> str:
    if value is None or value == ():
        return "-"
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value)
    return str(value).replace("|", "\\|")


def render() -> str:
    out = [HEADER, "## Events\n",
           "| Event | Action | Fires when | `kind` | `record` | `details` |",
           "|---|---|---|---|---|---|"]
    for name in events.NAMES:
        for spec in (s for s in events.SPECS if s.name == name):
            kind = f"`{spec.kind}`" if spec.kind else "-"
            out.append(f"| `{spec.name}` | `{spec.action}` | {cell(spec.fires_when)} | {kind}"
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
