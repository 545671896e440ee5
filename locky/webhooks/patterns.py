"""Which events a webhook's patterns select (docs/http/audit.md).

A pattern is an event name (``user.registered``), a prefix ending in ``.*``
(``user.*``: every event whose name starts with ``user.``), or ``*`` (every event).
"""

from __future__ import annotations

from typing import Iterable


def matches(pattern: str, event: str) -> bool:
    """Whether ``pattern`` selects ``event``."""
    if pattern == "*" or pattern == event:
        return True
    return pattern.endswith(".*") and event.startswith(pattern[:-1])


def selects(patterns: Iterable[str], event: str) -> bool:
    """Whether any of ``patterns`` selects ``event``."""
    return any(matches(pattern, event) for pattern in patterns)
