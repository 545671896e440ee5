"""``locky-memory-storage``: a Locky storage plugin keeping everything in memory.

Installed, it registers the storage provider ``memory`` through the ``locky`` entry-point
group; nothing changes until the settings choose it::

    LOCKY_STORAGE=memory locky serve --workers 1

It is a complete example of a third-party storage plugin: it uses only ``locky``'s
public API and passes Locky's storage contract suite (``tests/test_contract.py``).
"""

from __future__ import annotations

from locky import hookimpl

from .storage import MemoryStorage

__all__ = ["MemoryStorage", "locky_register_storage"]


@hookimpl
def locky_register_storage(registry):
    """Offer ``memory``; a new, empty storage for every app."""
    registry.add("memory", lambda context: MemoryStorage())
