"""Bringing a storage's schema to this code's version at startup, or refusing to start.

The storage provider owns its schema (``Storage.schema`` and ``Storage.migrate``); this
module holds the one rule the core adds: with ``auto_migrate`` (``LOCKY_AUTO_MIGRATE``,
default true) a database behind the code is migrated under the storage's lock, otherwise
startup stops and names the command that does it. A database ahead of the code always
stops startup.
"""

from __future__ import annotations

import logging

from locky.errors import SchemaError
from locky.providers import Storage
from locky.settings import Settings

log = logging.getLogger("locky")


def prepare_storage(storage: Storage, settings: Settings) -> None:
    """Make ``storage`` ready to serve, or raise :class:`~locky.errors.SchemaError`."""
    state = storage.schema()
    if state.ahead:
        raise SchemaError(
            f"the database schema is version {state.current}, newer than this Locky understands"
            f" ({state.latest}): upgrade Locky, or point LOCKY_DATABASE_URL at another database"
        )
    if not state.pending:
        return
    if not settings.auto_migrate:
        steps = ", ".join(str(step.version) for step in state.pending)
        raise SchemaError(
            f"the database schema is version {state.current} and this Locky needs version {state.latest}"
            f" (steps {steps} pending); run `locky migrate` (see `locky migrate --dry-run`),"
            " or set LOCKY_AUTO_MIGRATE=true"
        )
    applied = storage.migrate()
    if state.current == 0:  # a new database: nothing was upgraded
        log.info("created the database schema (version %s)", state.latest)
        return
    for step in applied:
        log.warning("database schema step %s applied: %s", step.version, step.description)
