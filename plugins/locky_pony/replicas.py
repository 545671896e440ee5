"""PostgreSQL read replicas (``LOCKY_DATABASE_REPLICA_URLS``) for the reads that may be a
little stale: lists, counts and reads by id (:mod:`.reads` says which).

Logins, authentication, revocation checks, lockout and every write stay on the primary,
as does every read inside a transaction. A replica is used only while it is known to be
close: each one's replay lag is measured at most once a second (0 when it has replayed
all it received, else the age of its last replayed transaction) and a replica over
``LOCKY_DATABASE_REPLICA_MAX_LAG`` seconds, or one that fails, is left alone for a while
and the read goes to the primary instead: a replica never turns a read into a 503.

The measure errs on the safe side: after the primary was idle, the first transaction
still on its way makes an up-to-date standby look as old as the idle time, and it is
left alone for a second. It cannot see WAL the standby has not received yet (a network
between them that stalls): that is what the standby's own ``wal_receiver_timeout`` is for.

Each replica has a bounded pool of its own per worker (``LOCKY_DATABASE_POOL_SIZE``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Callable

from .pool import BoundedPool

log = logging.getLogger("locky.storage")

#: Seconds between two lag measurements of one replica.
LAG_CHECK_EVERY = 1.0
#: Seconds a read waits for a free connection to a replica before asking the primary.
REPLICA_POOL_WAIT = 0.2
#: Seconds a replica that failed is left alone.
FAILED_PAUSE = 5.0
#: A standby's replay lag in seconds; 0 on a server that is not in recovery.
LAG_SQL = (
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0"
    " WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0"
    " ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0) END"
)


class Replica:
    """One replica: its pool, when its lag was last measured, and until when it is left
    alone."""

    def __init__(self, label: str, pool: BoundedPool):
        self.label = label
        self.pool = pool
        self.checked = float("-inf")
        self.paused_until = float("-inf")
        self.lock = threading.Lock()


class Replicas:
    """The replicas of one app, taken in turn."""

    def __init__(self, replicas: list[Replica], max_lag: float):
        self.replicas = replicas
        self.max_lag = max_lag
        self._turn = itertools.count()

    @classmethod
    def open(cls, binds: list[tuple[str, dict]], size: int, timeout: float, call_timeout: float,
             max_lag: float) -> "Replicas":
        """Replicas for ``(label, psycopg2 connect arguments)`` pairs; nothing connects yet."""
        import psycopg2

        def opener(arguments: dict) -> Callable:
            def open_connection():
                return psycopg2.connect(**arguments)
            return open_connection

        return cls([Replica(label, BoundedPool(opener(arguments), size, timeout, call_timeout))
                    for label, arguments in binds], max_lag)

    def choose(self) -> Replica | None:
        """The next replica not left alone, or ``None`` (read from the primary)."""
        now = time.monotonic()
        count = len(self.replicas)
        for _ in range(count):
            replica = self.replicas[next(self._turn) % count]
            if replica.paused_until <= now:
                return replica
        return None

    def lag_checked(self, replica: Replica, connection) -> bool:
        """Whether ``replica`` (on ``connection``, in autocommit) is close enough, measuring
        its lag when the last measure is over a second old."""
        now = time.monotonic()
        if now - replica.checked < LAG_CHECK_EVERY:
            return True
        with replica.lock:
            if now - replica.checked < LAG_CHECK_EVERY:
                return True
            cursor = connection.cursor()
            try:
                cursor.execute(LAG_SQL)
                lag = float(cursor.fetchone()[0])
            finally:
                cursor.close()
            replica.checked = now
            if lag > self.max_lag:
                self.pause(replica, f"its replay lag is {lag:.1f} s, over LOCKY_DATABASE_REPLICA_MAX_LAG",
                           LAG_CHECK_EVERY)
                return False
        return True

    @staticmethod
    def pause(replica: Replica, why: str, seconds: float = FAILED_PAUSE) -> None:
        """Leave ``replica`` alone for ``seconds``: reads go to the primary."""
        if replica.paused_until <= time.monotonic():
            log.warning("read replica %s left alone for %g s: %s", replica.label, seconds, why)
        replica.paused_until = time.monotonic() + seconds
        replica.checked = float("-inf")

    def close(self) -> None:
        for replica in self.replicas:
            replica.pool.disconnect()
