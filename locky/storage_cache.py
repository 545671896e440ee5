"""The storage cache's former home: its names now live in :mod:`locky.cache` (storage
plugins import them from :mod:`locky.storage`). Kept so that old imports still work."""

from __future__ import annotations

from locky.cache import *  # noqa: F401,F403
from locky.cache import __all__  # noqa: F401
