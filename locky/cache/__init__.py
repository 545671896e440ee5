"""The per-request reads of a storage served from process memory, for hosts that share
one database: the caller's session with its user, the policy revision, and user records.

Locky checks both in storage on every authenticated request, which is what makes a
logout or a role change hold at once on every host; it costs a database round trip per
request. :class:`CachingStorage` wraps a storage and serves those reads from a
:class:`Cache` in the process. What keeps the cache honest is a *change bus* (the
:class:`ChangeBus` protocol): every write to sessions, users, roles and grants made
through the wrapper is announced on it, and every process drops what it cached when the
announcement reaches it. The database stays the only record: announcements name what
changed, never its new value. Other reads and all writes go to the wrapped storage
unchanged; the storage contract suite passes on the wrapper.

The modules:

- :mod:`.declared`: for every store method, whether it reads or what it makes stale
  (one table), and the caches that follow those topics;
- :mod:`.bus`: the change-bus protocol and the capabilities a bus declares;
- :mod:`.storage`: :class:`CachingStorage`, built from both, and the :class:`Cache` of
  values it keeps for a while;
- :mod:`.context`: what the cache learns from the request being served.

Four buses ship with Locky, each with its own guarantee (see its module):

- SQLite's data version (:mod:`locky_pony.data_version`, ``LOCKY_AUTH_CACHE=version``,
  the default on an SQLite file): checked in every request, it empties the cache after
  any commit of any process on the file: nothing stale is ever served;
- the cache revision (:mod:`locky_pony.revision_bus`, ``LOCKY_AUTH_CACHE=revision``, the
  default on PostgreSQL and MySQL/MariaDB): a number every change to a user's record
  moves, read with the session on every request; only user records are cached, and no
  record a change through Locky replaced is served once the change was answered;
- PostgreSQL ``LISTEN/NOTIFY`` (:mod:`locky_pony.notify`, ``LOCKY_AUTH_CACHE=notify``):
  a write returns only once every host has dropped what it replaces, or could no
  longer serve it: revocation stays *at once*;
- Redis pub/sub (``contrib/locky_redis``): every host drops it within ``max_staleness``.
"""

from __future__ import annotations

from locky.cache.bus import ChangeBus, Freshness, Keeps, keep_listening
from locky.cache.context import (
    current_request, filling, request_ended, request_started, stale_ok, stale_reads,
)
from locky.cache.declared import (
    KEPT, KEYS, READ, REVISION, SESSION, STORAGE_CACHE, STORES, UNCACHED, USER_ID, USER_UUID, USERS, Effect,
    Watcher, moves,
)
from locky.cache.storage import MISSING, Cache, CachingStorage, user_tags

__all__ = ["KEPT", "KEYS", "MISSING", "READ", "REVISION", "SESSION", "STORAGE_CACHE", "STORES", "UNCACHED",
           "USERS", "USER_ID", "USER_UUID", "Cache", "CachingStorage", "ChangeBus", "Effect", "Freshness", "Keeps",
           "Watcher", "current_request", "filling", "keep_listening", "moves", "request_ended",
           "request_started", "stale_ok", "stale_reads", "user_tags"]
