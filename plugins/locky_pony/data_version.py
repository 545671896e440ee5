"""SQLite's ``PRAGMA data_version`` as the change bus of the storage cache
(``LOCKY_AUTH_CACHE=version``, the default on an SQLite file): each worker serves the
caller's session, its user and the policy revision from memory, and a change committed
by any process on the same file is seen by the very next request.

``PRAGMA data_version`` answers, on one connection, a number that changes whenever
another connection (of this process or any other) has committed to the database since
the connection last asked. SQLite reads it from the WAL index in shared memory: a few
microseconds, against the two statements (session with user and revision; the record)
an item read would otherwise run.

Why a cached value is never served after a write that replaced it was answered:

- *Checked in every request.* :meth:`DataVersionBus.fresh` asks before a request's first
  cache read or store, and again after every write the request makes through the cache
  (a new request marker, :meth:`locky.cache.storage.CachingStorage.changing`); outside
  requests, before every use. When the number moved, the whole cache is emptied first:
  every commit empties it, whatever it changed. A write is answered only after its
  commit, so any request that starts after the answer sees the new number. A commit of another process that lands while a request
  is being served may not be seen by that request: it is served as of its first check,
  as if it had run a moment earlier, and the next request sees the commit.
- *Nothing read before a commit is kept after it.* A value read from storage is stored
  only if no emptying happened since the read began (:meth:`locky.cache.storage.Cache.put`
  checks freshness, always asking (:meth:`DataVersionBus.fresh_to_store`), then the
  generation taken before the read).
- *Nothing uncommitted is kept.* Inside a Pony session (an ``atomic`` block, or a
  caller's ``db_session``) the cache is not used: reads there see the session's own
  uncommitted writes, which a rollback would leave in memory.
- *Numbers of different connections do not compare.* Each thread asks on a connection
  of its own and keeps the number it saw; a new connection (first use, after a failure,
  or after ``fork``) empties the cache before it is trusted. A check that fails reads
  through: slower, never stale.

Writes made by hand in SQL are seen at once too: they are commits like any other.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Callable

from locky.storage import Freshness, Keeps, current_request

from .compat import in_db_session

log = logging.getLogger("locky.storage")


class DataVersionBus:
    """The change bus of :mod:`locky.cache` over SQLite's ``PRAGMA data_version``."""

    #: Any commit moves the number, whatever it changed: the storage cache may keep the
    #: reads of every record kind, pages and counts included.
    keeps = Keeps.EVERY_READ
    #: Checked before a request's first use of the cache, and after each of its writes.
    freshness = Freshness.NEXT_REQUEST

    def __init__(self, path: str, timeout: float):
        self.path = path
        self.timeout = timeout
        self._local = threading.local()
        self._reset: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._connections: list[tuple[sqlite3.Connection, int]] = []  # every thread's, to close

    def start(self, on_change: Callable[[str], None], on_reset: Callable[[], None]) -> None:
        # Every commit is news here, whatever it changed: there is nothing to listen to.
        self._reset = on_reset

    def fresh(self) -> bool:
        if in_db_session():
            return False  # inside a transaction: its reads may see its own uncommitted writes
        request = current_request()
        if request is not None and getattr(self._local, "checked_in", None) is request:
            return True  # checked in this request, which has written nothing through us since
        return self._check(request)

    def fresh_to_store(self) -> bool:
        """:meth:`fresh` before a value read from storage is kept: always asks (stores
        come after misses, so this costs nothing on the path served from memory). A
        commit seen here first empties the cache, and :meth:`locky.cache.storage.Cache.put`'s generation
        check then refuses what was read before it, as it does outside requests."""
        if in_db_session():
            return False
        return self._check(current_request())

    def _check(self, request) -> bool:
        local = self._local
        local.checked_in = None
        cursor = getattr(local, "cursor", None)
        try:
            if cursor is None or local.pid != os.getpid():
                cursor = self._open(local)
            version = cursor.execute("PRAGMA data_version").fetchone()[0]
        except Exception as exc:
            self._drop(local, exc)
            return False
        if version != local.version:
            local.version = version
            self._reset()
        local.checked_in = request
        return True

    def _open(self, local):
        # Never close a connection inherited through fork: it is the parent's.
        local.cursor = None
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                     check_same_thread=False)
        local.connection, local.pid = connection, os.getpid()
        with self._lock:
            self._connections.append((connection, local.pid))
        local.cursor = connection.cursor()
        # A number of a new connection compares with nothing seen before it.
        local.version = connection.execute("PRAGMA data_version").fetchone()[0]
        self._reset()
        if getattr(local, "failing", False):
            local.failing = False
            log.info("auth cache: the SQLite data version answers again; serving from memory")
        return local.cursor

    def _drop(self, local, exc: Exception) -> None:
        if not getattr(local, "failing", False):  # once per failure, not once per request
            local.failing = True
            log.warning("auth cache: cannot read the SQLite data version (%s); reading through",
                        type(exc).__name__)
        connection = getattr(local, "connection", None)
        local.cursor = local.connection = None
        if connection is not None and getattr(local, "pid", None) == os.getpid():
            with self._lock:
                self._connections = [(c, pid) for c, pid in self._connections if c is not connection]
            _close_quietly(connection)

    @contextmanager
    def changing(self, what: str, drop_here: Callable[[str], None]):
        # The write's commit moves the number every connection reads: the next check
        # empties the cache of every process, this one included; in this request too, which
        # has a new marker after the write (locky.cache.storage.CachingStorage.changing).
        yield

    @contextmanager
    def batch(self, drop_here: Callable[[str], None]):
        yield

    def close(self) -> None:
        self._local = threading.local()
        with self._lock:
            connections, self._connections = self._connections, []
        for connection, pid in connections:
            if pid == os.getpid():
                _close_quietly(connection)


def _close_quietly(connection) -> None:
    try:
        connection.close()
    except Exception:
        pass


def open_bus(settings) -> DataVersionBus:
    """The bus of a storage on the SQLite file of ``settings``."""
    return DataVersionBus(str(settings.sqlite_path), settings.db_timeout)
