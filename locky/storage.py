"""The kit for storage authors: what a storage plugin may build on, beyond the records and
store protocols :mod:`locky` exports.

A storage plugin implements :class:`locky.Storage` (its stores' docstrings are the
specification, and :class:`locky.testing.storage_contract.StorageContract` checks it).
This module gathers the helpers such a plugin needs and that Locky keeps stable between
releases: the process cache with its change-bus protocol, the delivery states of a
webhook delivery, the webhook event patterns, keyset paging, and sealing of secrets at
rest. The modules these names come from are private: import them from here, so a plugin
keeps working when the core moves them (an import-linter contract in ``pyproject.toml``
holds the bundled plugins to this).

:func:`open_storage` opens any registered storage by name, empty and ready, as the app
would: the contract suite can run on the bundled one (``storage="pony"``) beside yours.
"""

from __future__ import annotations

from locky.errors import (
    Conflict, Invalid, LockyError, NotFound, SchemaError, Unavailable, WritesRefused,
)
from locky.paging import PAGE, every
from locky.providers import Migration, SchemaState, Storage
from locky.records import FAILED, MAX_ID, PENDING, SUCCEEDED, utcnow
from locky.registry import ProviderError
from locky.sealing import SealError, Sealer
from locky.settings import Settings, SettingsError
from locky.cache import (
    KEYS, REVISION, USERS, Cache, CachingStorage, ChangeBus, Freshness, Keeps, Watcher, current_request,
    keep_listening, stale_ok,
)
from locky.webhooks.patterns import selects


def open_storage(settings: Settings) -> Storage:
    """The storage ``settings.storage`` names (``pony``, the bundled one, by default), opened
    on ``settings.database_url`` through the plugins those settings load, its schema made or
    brought up to date as at startup; close it when done. On a new database it is empty:
    what :class:`locky.testing.storage_contract.StorageContract`'s ``storage`` fixture
    returns. An unknown name raises :class:`ProviderError` listing the known ones."""
    from locky.context import Context
    from locky.migrations import prepare_storage
    from locky.plugins import build_plugin_manager
    from locky.registry import Registry

    context = Context(settings, build_plugin_manager(settings))
    registry: Registry[Storage] = Registry("storage")
    context.hook.locky_register_storage(registry=registry)
    storage = registry.create(settings.storage, context)
    try:
        prepare_storage(storage, settings)
    except BaseException:
        storage.close()
        raise
    return storage


__all__ = [
    # Errors a store raises (Locky answers each with its HTTP status).
    "Conflict", "Invalid", "LockyError", "NotFound", "SchemaError", "Unavailable", "WritesRefused",
    # The storage protocol and its schema steps.
    "Migration", "SchemaState", "Storage",
    # The values of records: the largest id, the clock, a delivery's states.
    "FAILED", "MAX_ID", "PENDING", "SUCCEEDED", "utcnow",
    # Walking a keyset-paged list.
    "PAGE", "every",
    # Which webhooks an event selects.
    "selects",
    # Secrets sealed at rest (signing keys, TOTP seeds).
    "SealError", "Sealer",
    # A registered storage by name, empty and ready (the contract suite's fixture).
    "open_storage",
    # Settings and the refusal of a misconfigured provider.
    "ProviderError", "Settings", "SettingsError",
    # The process cache a storage may wrap itself in, and what a change bus builds on.
    "USERS", "CachingStorage", "ChangeBus", "Freshness", "Keeps", "current_request", "keep_listening", "stale_ok",
    # Values kept for a while (at most max_age seconds): a storage's own answers.
    "Cache",
    # What a cache of stored values follows (locky.cache.declared says which writes move it).
    "KEYS", "REVISION", "Watcher",
]
