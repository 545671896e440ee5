"""Values kept in process memory for a while: :class:`Cache`, the store the storage cache
(:mod:`locky.cache.storage`) keeps its reads in, and :func:`kept`, the read that fills it."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Hashable

from locky.cache.context import filling_cache

__all__ = ["MISSING", "Cache", "kept"]

#: What :meth:`Cache.get` answers for a key it does not hold.
MISSING = object()


class Cache:
    """Values by key, each kept at most ``max_age`` seconds, usable while ``fresh()``.
    An entry may carry tags: :meth:`drop_tag` drops every entry with that tag. An entry
    weighs 1 unless :meth:`put` says more (a page weighs its records): a cache whose
    entries would weigh more than ``max_entries`` together is emptied."""

    def __init__(self, max_age: float, fresh: Callable[[], bool], max_entries: int = 100_000,
                 fresh_to_store: Callable[[], bool] | None = None):
        self.max_age = max_age
        self.fresh = fresh
        self.fresh_to_store = fresh_to_store or fresh
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[Any, float, int]] = {}  # value, when kept, weight
        self._weight = 0
        self._tagged: dict[str, set[Hashable]] = {}
        self._generation = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any:
        """The cached value or :data:`MISSING`."""
        if self.fresh():
            with self._lock:
                value = self._live(key, time.monotonic())
                if value is not MISSING:
                    self.hits += 1
                    return value
        self.misses += 1
        return MISSING

    def get_pair(self, first: Hashable, second: Hashable) -> tuple[Any, Any]:
        """Two cached values (or :data:`MISSING`) for one freshness check."""
        if self.fresh():
            now = time.monotonic()
            with self._lock:
                one, two = self._live(first, now), self._live(second, now)
                if one is not MISSING and two is not MISSING:
                    self.hits += 2
                    return one, two
        self.misses += 1
        return MISSING, MISSING

    def _live(self, key: Hashable, now: float) -> Any:
        """The value of ``key`` while younger than ``max_age``, else :data:`MISSING` (the
        lock held)."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None and now - entry[1] < self.max_age else MISSING

    def token(self) -> int:
        """Take before reading storage; give to :meth:`put` with the result."""
        return self._generation

    def put(self, key: Hashable, value: Any, token: int, tags: tuple[str, ...] = (), weight: int = 1) -> None:
        """Keep ``value`` unless something was invalidated since ``token`` was taken:
        a read that started before an invalidation must not store what it replaced."""
        if not self.fresh_to_store():  # first: a bus may empty the cache while it checks
            return
        with self._lock:
            if token != self._generation or weight > self.max_entries:
                return
            self._pop(key)
            if self._weight + weight > self.max_entries:
                self._entries.clear()
                self._tagged.clear()
                self._weight = 0
            self._entries[key] = (value, time.monotonic(), weight)
            self._weight += weight
            for tag in tags:
                self._tagged.setdefault(tag, set()).add(key)

    def _pop(self, key: Hashable) -> None:
        """Forget ``key``'s entry (the lock held)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._weight -= entry[2]

    def drop(self, key: Hashable) -> None:
        with self._lock:
            self._generation += 1
            self._pop(key)

    def drop_tag(self, tag: str) -> None:
        with self._lock:
            self._generation += 1
            for key in self._tagged.pop(tag, ()):
                self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()
            self._tagged.clear()
            self._weight = 0


def kept(cache: Cache, key: Hashable, read: Callable[[], Any], how: Callable[[Any], dict]) -> Any:
    """``cache``'s value of ``key``, else ``read()``, kept (unless ``None``) with the
    :meth:`Cache.put` arguments ``how(value)`` gives. The read is marked as one a cache
    keeps (:func:`locky.cache.context.filling`)."""
    found = cache.get(key)
    if found is not MISSING:
        return found
    token = cache.token()
    with filling_cache():
        found = read()
    if found is not None:
        cache.put(key, found, token, **how(found))
    return found
