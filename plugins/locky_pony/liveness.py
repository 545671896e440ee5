"""Whether the database answers, asked at most once a second per process: health
(``GET /v1/public/health``, docs/http/operation.md) calls ``storage.ping()`` on every request,
and a round trip for each would make health cost what a read costs.

An answer that the database answered is kept :data:`MAX_AGE` seconds (a
:class:`locky.storage.Cache`), and not used once any statement of this process failed
for want of the database since it was kept (:func:`.guard.failures` moved), nor after
the storage closed: an outage the requests meet is said by the next health call, and one
nobody met yet within :data:`MAX_AGE`. A failed ping is never kept: while the database
is away every health call asks again, so its recovery shows at once. Concurrent callers
that find no answer share one ping (the first asks, the others wait for its answer), so
an outage costs each of them one timeout, not one each in turn.

Whether writes are refused is not kept here: :func:`.guard.writes_refused` remembers it
in memory and probes a few seconds apart, so a refused write shows at once.
"""

from __future__ import annotations

import threading
from typing import Callable

from locky.storage import Cache

from . import guard

#: Seconds an answer of the database is trusted for health.
MAX_AGE = 1.0


class _Ping:
    """One ping in flight: its answer, once ``done``."""

    def __init__(self):
        self.done = threading.Event()
        self.answered = False


class Liveness:
    """The database's last answer to a ping, kept :data:`MAX_AGE` seconds."""

    def __init__(self):
        self._answers = Cache(MAX_AGE, fresh=lambda: True, max_entries=4)
        self._lock = threading.Lock()
        self._in_flight: _Ping | None = None

    def answers(self, ping: Callable[[], bool]) -> bool:
        """Whether the database answers: kept, or ``ping()``'s answer (one at a time)."""
        key = guard.failures()  # a failure since an answer was kept makes another key
        if self._answers.get(key) is True:
            return True
        with self._lock:
            flight, leads = self._in_flight, self._in_flight is None
            if leads:
                flight = self._in_flight = _Ping()
        if not leads:
            flight.done.wait()
            return flight.answered
        try:
            token = self._answers.token()
            flight.answered = bool(ping())
            if flight.answered:
                self._answers.put(key, True, token)
            return flight.answered
        finally:
            with self._lock:
                self._in_flight = None
            flight.done.set()

    def forget(self) -> None:
        """Trust no kept answer (the storage closed its connections)."""
        self._answers.clear()
