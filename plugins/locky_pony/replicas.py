"""PostgreSQL read replicas (``LOCKY_DATABASE_REPLICA_URLS``) for the reads whose caller
can take an answer a little stale: the read API's lists, counts and reads by id
(:func:`locky.cache.stale_reads`; :mod:`.reads` says which statements).

Logins, authentication, revocation checks, lockout, authorization answers, every write
and the existence checks writes decide on stay on the primary, as does every read inside
a transaction. A replica is used only while it is known to be close: each one's lag is
measured at most once a second and a replica over ``LOCKY_DATABASE_REPLICA_MAX_LAG``
seconds, or one that fails, is left alone for a while and the read goes to the primary
instead: a replica never turns a read into a 503.

The lag is measured against the primary, not the standby's own view: a standby whose WAL
stream stalls (its receiver stopped, a network between them that hangs) has replayed
all it received and would call itself current. Each measure reads the primary's WAL
position first, then how far the standby has replayed. A standby that has replayed up to
the primary's position is current (lag 0). Otherwise its lag is at most the time since
the last measure whose primary position it has replayed (the primary had written
nothing more then that it lacks), and at most the age of the last commit it replayed
(it lacks only later ones; this uses the two servers' clocks, kept in step by NTP): the
smaller bound counts. The measure errs on the safe side: a standby a moment behind a
primary that was idle since the last measure may look as old as that idle time, and is
then left alone for a second. When the primary's position cannot be read the read goes
to the primary.

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
#: On the primary: how far its WAL reaches (written; a commit is flushed as well).
PRIMARY_POSITION_SQL = "SELECT pg_current_wal_lsn()::text"
#: On a replica: whether it is a standby, how far it has replayed, and the seconds since
#: the commit it replayed last (NULL before its first).
STANDBY_SQL = ("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,"
               " EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())")


def wal_position(lsn: str | None) -> int | None:
    """A WAL location (``pg_lsn`` text, ``16/B374D848``) as a number, or ``None``."""
    if lsn is None:
        return None
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


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
        #: ``(time, position)``: the primary's WAL position read at that time
        #: (``time.monotonic``), one per lag measure, from the last ``max_lag`` seconds and
        #: a little more.
        self._marks: list[tuple[float, int]] = []
        self._marks_lock = threading.Lock()

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

    def lag_checked(self, replica: Replica, connection, primary_position: Callable[[], str]) -> bool:
        """Whether ``replica`` (on ``connection``, in autocommit) is close enough, measuring
        its lag when the last measure is over a second old; ``primary_position()`` reads
        the primary's WAL position (:data:`PRIMARY_POSITION_SQL`)."""
        now = time.monotonic()
        if now - replica.checked < LAG_CHECK_EVERY:
            return True
        with replica.lock:
            if now - replica.checked < LAG_CHECK_EVERY:
                return True
            marked = time.monotonic()
            try:
                position = wal_position(primary_position())
            except Exception as exc:
                self.pause(replica, f"its lag cannot be measured: the primary's WAL position could not be read"
                                    f" ({type(exc).__name__})", LAG_CHECK_EVERY)
                return False
            cursor = connection.cursor()
            try:
                cursor.execute(STANDBY_SQL)
                in_recovery, replayed, since_replay = cursor.fetchone()
            finally:
                cursor.close()
            lag = self._lag(marked, position, in_recovery, wal_position(replayed), since_replay)
            replica.checked = now
            if lag is None:
                self.pause(replica, "it is behind the primary by an amount not measured yet", LAG_CHECK_EVERY)
                return False
            if lag > self.max_lag:
                self.pause(replica, f"its lag is {lag:.1f} s, over LOCKY_DATABASE_REPLICA_MAX_LAG",
                           LAG_CHECK_EVERY)
                return False
        return True

    def _lag(self, marked: float, position: int, in_recovery: bool, replayed: int | None,
             since_replay) -> float | None:
        """The seconds a replica may be behind (see the module's docstring), measured at
        ``marked`` when the primary was at ``position``; ``None`` when it is behind by more
        than this process has seen yet."""
        with self._marks_lock:
            marks = self._marks
            marks.append((marked, position))
            horizon = marked - self.max_lag - 2 * LAG_CHECK_EVERY
            while len(marks) > 1 and marks[0][0] < horizon:
                del marks[0]
            if not in_recovery:
                return 0.0  # a primary itself
            if replayed is None:
                return None
            if replayed >= position:
                return 0.0
            caught_up = [at for at, reached in marks if reached <= replayed]
            oldest = marks[0][0]
        by_marks = marked - max(caught_up) if caught_up else None
        if by_marks is None and marked - oldest > self.max_lag:
            by_marks = marked - oldest  # behind everything seen for over the bound: at least that
        bounds = [b for b in (by_marks, None if since_replay is None else max(0.0, float(since_replay)))
                  if b is not None]
        return min(bounds) if bounds else None

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
