"""PostgreSQL ``LISTEN/NOTIFY`` as the change bus of the storage cache
(``LOCKY_AUTH_CACHE=notify``): each worker serves the caller's session and the policy
revision from memory, and revocation stays *at once* across hosts.

Every worker process is a *listener*: one connection of its own (not from the pool),
``LISTEN locky_auth``, and a thread. Messages on the channel:

- ``c TOKEN WHAT``: a write announces what it changed. The announcement is a
  ``pg_notify`` run inside the write's own transaction (:func:`.guard.before_commit`),
  so it is delivered when the write commits, and never for one that did not.
- ``h ID [TOKEN ...]``: a listener's heartbeat, carrying its acknowledgements: the
  changes it has applied (dropped from its cache) since its last one.

Why a cached value is never served after the write that replaced it was answered:

- *Caught up.* PostgreSQL delivers to a listening connection, before the answer to any
  statement it runs, every notification committed before that statement began. A
  listener that sent a heartbeat at time *s* and read its answer has therefore applied
  every change committed before *s*; it serves from its cache only while such an *s* lies
  within the last lease (``LOCKY_AUTH_CACHE_LEASE_MS``), and sends one every quarter lease.
  Away from the database, or behind, it reads through: slower, never stale.
- *Acknowledged.* After its commit, a write waits until its own listener is caught up
  past the commit (it then knows every listener that sent a heartbeat within the last
  lease: the only ones that may serve from their cache), and until each of those has
  acknowledged the change. A listener that does not answer is not waited for beyond
  the commit plus one lease: by then it has applied the change, or its lease (from a
  heartbeat before the commit) has run out and it reads through.
- A listener that (re)connects empties its cache: what was announced while it was not
  listening is lost to it.

So a write costs its announcement and one round of acknowledgements (milliseconds),
and at most one lease when a worker stops answering; a read of a cached session costs
no database round trip. Writes made by hand in SQL are not announced: entries are kept
at most ``max_age`` seconds (:class:`locky.cache.storage.CachingStorage`).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import select
import threading
import time
from contextlib import contextmanager
from typing import Callable

from locky.storage import Freshness, Keeps, keep_listening

from .guard import before_commit

log = logging.getLogger("locky.storage")

CHANNEL = "locky_auth"
#: Acknowledgements one heartbeat carries at most (a notification holds < 8000 bytes).
ACKS_PER_HEARTBEAT = 200


class NotifyBus:
    """The change bus of :mod:`locky.cache` over PostgreSQL ``LISTEN/NOTIFY``."""

    #: Every announced write is heard: sessions, the policy revision and user records.
    keeps = Keeps.SESSIONS
    #: A write returns once every listener has acknowledged it (or its lease ran out).
    freshness = Freshness.AT_ONCE

    def __init__(self, db, connect: Callable[[], object], lease: float):
        self.db = db  # the storage's Pony Database: announcements run in its transactions
        self.connect = connect  # opens the listener's own psycopg2 connection
        self.lease = lease
        self.heartbeat = lease / 4
        self.id = secrets.token_hex(6)
        self._tokens = itertools.count()
        self._cond = threading.Condition()
        self._confirmed = float("-inf")  # send time of the last answered heartbeat
        self._roster: dict[str, float] = {}  # listener id: when its last heartbeat came
        self._acks: dict[str, set[str]] = {}  # token of a write waiting here: who applied it
        self._batch = threading.local()
        self._stop = threading.Event()
        self._beat_now = False
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._thread: threading.Thread | None = None

    # -- ChangeBus -----------------------------------------------------------------

    def start(self, on_change: Callable[[str], None], on_reset: Callable[[], None]) -> None:
        self.on_change, self.on_reset = on_change, on_reset
        self._thread = threading.Thread(target=self._run, name="locky-auth-cache", daemon=True)
        self._thread.start()

    def fresh(self) -> bool:
        return time.monotonic() - self._confirmed < self.lease

    fresh_to_store = fresh

    def wait_fresh(self, timeout: float) -> bool:
        """Whether the listener is caught up within ``timeout`` seconds (tests, startup)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.fresh() and time.monotonic() < deadline:
                self._cond.wait(max(0.0, min(0.05, deadline - time.monotonic())))
        return self.fresh()

    @contextmanager
    def changing(self, what: str, drop_here: Callable[[str], None]):
        token = f"{self.id}.{next(self._tokens)}"
        payload = f"c {token} {what}"
        with self._cond:
            self._acks[token] = set()
        try:
            with before_commit(lambda: self.db.execute("SELECT pg_notify($CHANNEL, $payload)",
                                                       {"CHANNEL": CHANNEL, "payload": payload})):
                yield
        except BaseException:
            self._forget([token])
            raise
        finally:
            drop_here(what)
        pending = getattr(self._batch, "tokens", None)
        if pending is not None:
            pending.append(token)  # acknowledged once the whole block has committed
        else:
            self.wait_acknowledged([token], time.monotonic())

    @contextmanager
    def batch(self, drop_here: Callable[[str], None]):
        if getattr(self._batch, "tokens", None) is not None:
            yield  # an atomic block inside another: the outer one waits
            return
        self._batch.tokens = tokens = []
        try:
            yield
        except BaseException:
            self._forget(tokens)
            raise
        finally:
            self._batch.tokens = None
        if tokens:
            self.wait_acknowledged(tokens, time.monotonic())

    def close(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=5)
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- the writer's side ---------------------------------------------------------

    def wait_acknowledged(self, tokens: list[str], committed: float) -> bool:
        """Wait until every listener that may serve what ``tokens`` changed has applied
        them, or until ``committed`` plus one lease; whether all acknowledged."""
        deadline = committed + self.lease
        self._wake()  # our own listener: a heartbeat now, not at its next turn
        try:
            with self._cond:
                while self._confirmed < committed:
                    if not self._wait_until(deadline):
                        return False
                while True:
                    now = time.monotonic()
                    waiting = [host for host, heard in self._roster.items()
                               if host != self.id and now - heard < self.lease
                               and any(host not in self._acks[token] for token in tokens)]
                    if not waiting:
                        return True
                    if not self._wait_until(deadline):
                        log.info("auth cache: %d listener(s) did not acknowledge a change within the lease",
                                 len(waiting))
                        return False
        finally:
            self._forget(tokens)

    def _wait_until(self, deadline: float) -> bool:
        """Wait for news on the condition (held); False once ``deadline`` has passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._cond.wait(remaining)
        return True

    def _forget(self, tokens: list[str]) -> None:
        with self._cond:
            for token in tokens:
                self._acks.pop(token, None)

    def _wake(self) -> None:
        try:
            os.write(self._wake_write, b"!")
        except OSError:
            pass  # the pipe is full (a wake is already pending) or closed

    # -- the listener --------------------------------------------------------------

    def _run(self) -> None:
        keep_listening(self._stop, self._open, self._listen, self._lost, self._ended)

    def _open(self):
        connection = self.connect()
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            connection.close()
            raise
        self.on_reset()  # what was announced before LISTEN took effect is lost to us
        return connection

    def _lost(self, exc: Exception) -> None:
        log.warning("auth cache: the listener's connection failed (%s: %s); the cache is off"
                    " (every read goes to the database) until it is back",
                    type(exc).__name__, str(exc).strip().splitlines()[0][:200] if str(exc) else "")

    def _ended(self) -> None:
        with self._cond:
            self._confirmed = float("-inf")
            self._cond.notify_all()
        self.on_reset()

    def _listen(self, connection) -> None:
        cursor = connection.cursor()
        socket = connection.fileno()
        acks: list[str] = []
        last_beat = float("-inf")
        while not self._stop.is_set():
            now = time.monotonic()
            if acks or self._beat_now or now - last_beat >= self.heartbeat:
                self._beat_now = False
                sent = now
                carried, acks = acks[:ACKS_PER_HEARTBEAT], acks[ACKS_PER_HEARTBEAT:]
                cursor.execute("SELECT pg_notify(%s, %s)", (CHANNEL, " ".join(["h", self.id, *carried])))
                acks += self._apply(connection)
                with self._cond:
                    self._confirmed = sent  # every change committed before `sent` is applied
                    self._cond.notify_all()
                last_beat = sent
                continue
            ready, _, _ = select.select([socket, self._wake_read], [], [], last_beat + self.heartbeat - now)
            if self._wake_read in ready:
                try:
                    os.read(self._wake_read, 4096)
                except OSError:
                    pass
                self._beat_now = True
            if socket in ready:
                connection.poll()
                acks += self._apply(connection)

    def _apply(self, connection) -> list[str]:
        """Apply the notifications that arrived; the tokens to acknowledge."""
        notes = connection.notifies[:]
        del connection.notifies[:len(notes)]
        if not notes:
            return []
        acks, heard = [], time.monotonic()
        with self._cond:
            for note in notes:
                kind, _, rest = note.payload.partition(" ")
                if kind == "c":
                    token, _, what = rest.partition(" ")
                    self.on_change(what)
                    if not token.startswith(self.id + "."):
                        acks.append(token)
                elif kind == "h":
                    host, *tokens = rest.split(" ")
                    self._roster[host] = heard
                    for token in tokens:
                        if token in self._acks:
                            self._acks[token].add(host)
            for host in [host for host, at in self._roster.items() if heard - at > 10 * self.lease]:
                del self._roster[host]
            self._cond.notify_all()
        return acks


def open_bus(db, settings, bind: dict) -> NotifyBus:
    """The bus of a storage on ``db``; its listener connects with ``bind`` (Pony's
    arguments for the listen URL) and never through the pool."""
    import psycopg2

    arguments = {key: value for key, value in bind.items() if key != "provider"}
    arguments["application_name"] = "locky-listener"
    return NotifyBus(db, lambda: psycopg2.connect(**arguments), settings.auth_cache_lease_ms / 1000)
