"""One bounded pool of server connections per worker process (PostgreSQL, MySQL/MariaDB).

Pony keeps one connection per thread for as long as the thread lives and never bounds
them, and the plain-SQL reader used to keep one more of its own: a worker with many
threads (and background senders) could hold any number of connections, and a few hosts
exhausted ``max_connections`` while ``/health`` still said ok. This pool replaces Pony's
for the server engines:

- at most ``LOCKY_DATABASE_POOL_SIZE`` connections are open per process, idle or in use,
  shared by every thread (Pony's transactions and the reader's plain reads alike);
- a caller waits at most ``LOCKY_DATABASE_POOL_TIMEOUT`` seconds for one, then gets
  :class:`PoolTimeout` (Locky's 503, and ``/health`` answers 503);
- a connection comes back with its transaction ended and nothing else done to it:
  Locky sets nothing on a session (no ``SET``, no read-only session) but MySQL's
  autocommit mode, which the pool itself owns (the reader's SELECTs run in autocommit,
  Pony's transactions get the connection back in transaction mode), and the statements
  the reader prepared on it are what keeping it is for, so Pony's ``DISCARD ALL`` on
  every release (one round trip, and the prepared statements gone) is not sent;
- the thread holding a connection is the one the watchdog (:mod:`.deadline`) cuts it
  for: a connection is watched from the moment a thread takes it until it comes back;
- after a fork the child starts empty and never touches its parent's sockets.

SQLite keeps Pony's own pool: it has no server to exhaust.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any, Callable

from . import compat
from .deadline import WATCHDOG


class PoolTimeout(TimeoutError):
    """No connection became free within the pool's timeout."""


class BoundedPool:
    """Pony's pool interface (``connect``, ``release``, ``drop``, ``disconnect``) over a
    bounded set of connections shared by the threads of one process."""

    def __init__(self, open_connection: Callable[[], Any], size: int, timeout: float, call_timeout: float):
        self.open_connection = open_connection
        self.size = size
        self.timeout = timeout
        #: What the watchdog allows one call on a connection (``LOCKY_DB_TIMEOUT``).
        self.call_timeout = call_timeout
        #: MySQL/MariaDB (:func:`install`): puts a connection the reader left in autocommit
        #: back in transaction mode before Pony gets it, and tells whether a transaction is
        #: open (PyMySQL's ROLLBACK is a round trip even when none is).
        self.for_transactions: Callable[[Any], None] | None = None
        self.in_transaction: Callable[[Any], bool] | None = None
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        # A slot is a connection in use or about to be opened; idle ones hold none.
        self._slots = threading.BoundedSemaphore(self.size)
        self._idle: deque = deque()
        self._opened = 0

    def _after_fork(self) -> None:
        if self._pid != os.getpid():
            self._start()  # the parent's connections stay the parent's: never closed here

    def connect(self, *, transactional: bool = True) -> tuple[Any, bool]:
        """A connection and whether it is new (Pony then runs its ``on_connect`` hooks);
        in transaction mode unless ``transactional`` is false (the reader's plain reads,
        which set the mode they need themselves)."""
        self._after_fork()
        if not self._slots.acquire(timeout=self.timeout):
            raise PoolTimeout(f"no database connection free within {self.timeout:g} s"
                              f" (LOCKY_DATABASE_POOL_SIZE={self.size})")
        with self._lock:
            connection = self._idle.pop() if self._idle else None
        new = connection is None
        if new:
            try:
                connection = self.open_connection()
            except BaseException:
                self._slots.release()
                raise
            with self._lock:
                self._opened += 1
        WATCHDOG.track(connection, self.call_timeout)
        if transactional and self.for_transactions is not None:
            try:
                self.for_transactions(connection)
            except BaseException:
                self.drop(connection)
                raise
        return connection, new

    def release(self, connection) -> None:
        """End the connection's transaction and keep it for the next caller."""
        try:
            # psycopg2 sends nothing when no transaction is open; PyMySQL is asked first.
            if self.in_transaction is None or self.in_transaction(connection):
                connection.rollback()
        except Exception:
            self.drop(connection)
            raise
        self.put_back(connection)

    def put_back(self, connection) -> None:
        """Keep a connection whose transaction the caller ended (or never began)."""
        WATCHDOG.untrack(connection)
        if self._pid != os.getpid():
            return
        with self._lock:
            self._idle.append(connection)
        self._slots.release()

    def drop(self, connection) -> None:
        """Close a broken (or DDL-used) connection; its slot is free again."""
        WATCHDOG.untrack(connection)
        if self._pid != os.getpid():
            return
        try:
            connection.close()
        except Exception:
            pass
        with self._lock:
            self._opened -= 1
        self._slots.release()

    def disconnect(self) -> None:
        """Close the idle connections (those in use close when they come back dropped)."""
        if self._pid != os.getpid():
            return
        with self._lock:
            idle, self._idle = list(self._idle), deque()
            self._opened -= len(idle)
        for connection in idle:
            try:
                connection.close()
            except Exception:
                pass

    def stats(self) -> dict[str, int]:
        """Connections open (idle or in use) and idle, in this process."""
        with self._lock:
            return {"size": self.size, "open": self._opened, "idle": len(self._idle)}


def install(db, size: int, timeout: float, call_timeout: float) -> BoundedPool:
    """Give a bound server-engine ``Database`` a :class:`BoundedPool` in place of Pony's
    thread-local one. Pony's own pool object opens connections the way its provider
    means to (driver converters, client encoding), so the new pool opens through it."""
    pool = compat.replace_pool(db, lambda open_connection: BoundedPool(open_connection, size, timeout, call_timeout))
    if db.provider.dialect == "MySQL":
        from pymysql.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS

        # The reader runs its SELECTs in autocommit (one round trip, no ROLLBACK after);
        # PyMySQL switches a connection's mode only when it differs (one round trip then).
        pool.for_transactions = lambda connection: connection.autocommit(False)
        pool.in_transaction = lambda connection: bool(connection.server_status & SERVER_STATUS_IN_TRANS)
    return pool
