"""The ordered schema steps of the Pony storage, one module each (``vNNNN_name.py``).

A step module has ``DESCRIPTION`` and ``statements(dialect, collation) -> list[str]``
(``dialect`` is Pony's: ``SQLite``, ``PostgreSQL`` or ``MySQL``; ``collation`` the binary
collation of MySQL/MariaDB tables). Step N brings the schema from version N-1 to N;
step 1 is the 1.0.0 schema. A released step is never edited: every change to the
tables is a new step, and ``tests/upgrade`` carries a 1.0.0 database through all of them.
"""

from __future__ import annotations

from locky import Migration

from . import (
    v0001_baseline,
    v0002_schema_history,
    v0003_throttle_window_index,
    v0004_account_lifecycle,
    v0005_signing_keys,
    v0006_audit_and_webhooks,
    v0007_cache_revision,
)

#: Steps in order; a step's version is its position (1-based).
STEPS = (v0001_baseline, v0002_schema_history, v0003_throttle_window_index, v0004_account_lifecycle,
         v0005_signing_keys, v0006_audit_and_webhooks, v0007_cache_revision)
#: The schema version this code writes.
LATEST = len(STEPS)


def steps(dialect: str, collation: str, after: int = 0) -> list[Migration]:
    """The steps that follow version ``after``, with their statements for ``dialect``."""
    return [
        Migration(version, module.DESCRIPTION, tuple(module.statements(dialect, collation)))
        for version, module in enumerate(STEPS, start=1)
        if version > after
    ]
