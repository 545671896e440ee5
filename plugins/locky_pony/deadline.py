"""Every storage call ends within ``LOCKY_DB_TIMEOUT``, even when the database hangs.

The drivers bound what they can: connecting (``connect_timeout``), a network that drops
packets (libpq's ``tcp_user_timeout`` and keepalives), reads and writes on MySQL/MariaDB
(PyMySQL's ``read_timeout``), SQLite's lock waits (``timeout``). What they cannot see is
a server, or anything between, that keeps the TCP connection open and never answers: a
hung process, a stalled pooler or proxy. libpq then waits forever, past gunicorn's
worker timeout, and the worker is killed in the middle of a request.

So each process has one :class:`Watchdog` thread. A storage call notes its thread's
deadline (:meth:`Watchdog.call`); every connection a thread takes from the pool is noted
too (:meth:`Watchdog.track`), until it goes back. When a call outlives its deadline, the
watchdog shuts the sockets of that thread's connections down: the driver fails at once,
the call becomes ``Unavailable`` (a 503), and the broken connection is replaced on the
next call.

One watchdog per process (not per app) because it watches threads, which belong to the
process; each connection carries the timeout of the app that opened it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

log = logging.getLogger("locky.storage")

#: How often the watchdog looks (seconds); a hung call ends within its timeout plus this.
TICK = 0.1
#: The start time a call is given once it has been cut (it is never late again).
CUT = float("inf")


class Watchdog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[int, float] = {}  # thread -> when its current call began
        # thread -> [(weak reference to a connection, timeout)]: weak, so that a connection
        # its pool let go of (a thread that ended) closes as it would without us.
        self._connections: dict[int, list[tuple[weakref.ref, float]]] = {}
        self._pid: int | None = None

    def track(self, connection: Any, timeout: float) -> None:
        """Watch ``connection``, which this thread now uses (it opened it, or took it from
        the pool), with ``timeout`` seconds a call."""
        ident = threading.get_ident()
        with self._lock:
            self._ensure_running()
            live = [(r, t) for r, t in self._connections.get(ident, ())
                    if _fileno(r()) is not None and r() is not connection]
            live.append((weakref.ref(connection), timeout))
            self._connections[ident] = live

    def untrack(self, connection: Any) -> None:
        """Stop watching ``connection`` for this thread (it went back to the pool)."""
        ident = threading.get_ident()
        with self._lock:
            kept = [(r, t) for r, t in self._connections.get(ident, ()) if r() is not connection]
            if kept:
                self._connections[ident] = kept
            else:
                self._connections.pop(ident, None)

    @contextmanager
    def call(self) -> Iterator[None]:
        """One storage call of this thread (the outermost one counts)."""
        ident = threading.get_ident()
        if ident in self._started:
            yield
            return
        self._started[ident] = time.monotonic()
        try:
            yield
        finally:
            self._started.pop(ident, None)

    def cut_here(self) -> bool:
        """Whether this thread's current call was cut: it must not connect again (Pony
        would, once, on a broken connection), but fail now."""
        return self._started.get(threading.get_ident()) == CUT

    def _ensure_running(self) -> None:
        if self._pid == os.getpid():
            return
        # First use in this process (or a child after fork, which inherits no thread).
        self._pid = os.getpid()
        self._started.clear()
        self._connections.clear()
        threading.Thread(target=self._watch, name="locky-db-watchdog", daemon=True).start()

    def _forget_ended_threads(self) -> None:
        """Drop what threads that ended left noted (here, each tick: listing the threads
        on every :meth:`track`, once per connection taken, cost each server-engine read ~2 µs
        with a worker's seven threads)."""
        alive = {thread.ident for thread in threading.enumerate()}
        with self._lock:
            for gone in [i for i in self._connections if i not in alive]:
                del self._connections[gone]

    def _watch(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(TICK)
            self._forget_ended_threads()
            now = time.monotonic()
            for ident, started in list(self._started.items()):
                with self._lock:
                    connections = self._connections.get(ident, ())
                    late = [r() for r, timeout in connections if now - started > timeout]
                if not late or self._started.get(ident) != started:
                    continue
                self._started[ident] = CUT  # before the cut, which the caller sees at once
                for connection in late:
                    self._cut(connection, now - started)

    @staticmethod
    def _cut(connection: Any, waited: float) -> None:
        fd = _fileno(connection)
        if fd is None:
            return
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
            log.warning("a database call took %.1fs, over LOCKY_DB_TIMEOUT: its connection was cut", waited)
        except OSError:
            pass
        finally:
            sock.close()


def _fileno(connection: Any) -> int | None:
    """The socket of an open psycopg2 or PyMySQL connection, else ``None``."""
    if connection is None:
        return None
    try:
        if getattr(connection, "closed", 0):  # psycopg2: 0 while open
            return None
        sock = getattr(connection, "_sock", None)  # PyMySQL
        if sock is not None:
            return sock.fileno()
        if hasattr(connection, "get_backend_pid"):  # psycopg2
            return connection.fileno()
    except Exception:
        return None
    return None


#: The process's watchdog.
WATCHDOG = Watchdog()
