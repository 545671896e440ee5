"""Audit retention (docs/http/audit.md): events older than ``LOCKY_AUDIT_RETENTION_DAYS`` go.

``locky audit prune --older-than DAYS`` is the operator's way; every server process also
applies the setting once a day (:class:`DailyPrune`, run by the webhook sender's thread).
Nothing else removes an event.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from locky.records import utcnow

log = logging.getLogger("locky.audit")

BATCH = 1000
DAY = 24 * 3600.0


def prune(storage, days: int) -> int:
    """Delete every event created more than ``days`` days ago, a batch per transaction
    (no long lock on a large table); how many went."""
    cutoff = utcnow() - timedelta(days=days)
    total = 0
    while True:
        gone = storage.audit.prune(cutoff, batch=BATCH)
        total += gone
        if gone < BATCH:
            return total


class DailyPrune:
    """Applies ``audit_retention_days`` at most once a day per process (0: never)."""

    def __init__(self, context):
        self.context = context
        self._next = time.monotonic() + 60.0  # not while the process is starting

    def tick(self) -> None:
        days = self.context.settings.audit_retention_days
        if not days or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + DAY
        gone = prune(self.context.storage, days)
        if gone:
            log.info("audit: %d events older than %d days pruned", gone, days)
