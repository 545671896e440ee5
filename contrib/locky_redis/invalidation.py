"""Redis pub/sub as the change bus of Locky's storage cache (:mod:`locky.cache`).

:class:`Listener` keeps one Redis pub/sub subscription per process; every host
publishes what it changed on one channel and every host drops those entries from its
cache when the message arrives.

Pub/sub delivers at most once, so the cache never trusts it blindly:

- The listener sends a ``PING`` every ``max_staleness / 4`` seconds carrying its send
  time; Redis answers on the same connection, after every message published before the
  ping arrived. When the answer to a ping sent at time *s* has come back, every change
  published before *s* has been applied here. The cache serves entries only while such
  an *s* lies within the last ``max_staleness`` seconds; otherwise (Redis away, the
  listener behind) every read goes to storage.
- On every (re)subscription the whole cache is emptied: messages sent while we were not
  subscribed are lost.

A write never waits for Redis: :class:`Publisher` sends its announcement from a thread
of its own, so a Redis that hangs costs writes nothing (it used to cost each one the
client's two-second timeout). Every host's cache then turns itself off as its pings go
unanswered, as above.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable

from locky.storage import keep_listening

log = logging.getLogger("locky.redis")


class Listener:
    """A daemon thread subscribed to ``channel``; ``on_message(text)`` for each message,
    ``on_reset()`` whenever messages may have been missed."""

    def __init__(self, client, channel: str, max_staleness: float,
                 on_message: Callable[[str], None], on_reset: Callable[[], None]):
        self.client = client
        self.channel = channel
        self.max_staleness = max_staleness
        self.heartbeat = max_staleness / 4
        self.on_message = on_message
        self.on_reset = on_reset
        self._confirmed = float("-inf")  # send time of the last answered ping
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"locky-redis:{channel}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def fresh(self) -> bool:
        """Whether every change published more than ``max_staleness`` ago has been applied."""
        return time.monotonic() - self._confirmed < self.max_staleness

    def wait_fresh(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.fresh() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.fresh()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        keep_listening(self._stop, self._subscribe, self._listen, self._lost, self._ended)

    def _subscribe(self):
        pubsub = self.client.pubsub()
        try:
            pubsub.subscribe(self.channel)
        except BaseException:
            pubsub.close()
            raise
        return pubsub

    def _lost(self, exc: Exception) -> None:
        log.warning("redis subscription to %s lost (%s: %s); caching is off until it is back",
                    self.channel, type(exc).__name__, exc)

    def _ended(self) -> None:
        self._confirmed = float("-inf")
        self.on_reset()

    def _listen(self, pubsub) -> None:
        subscribed = False
        last_ping = subscribed_at = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if subscribed and now - last_ping >= self.heartbeat:
                pubsub.ping(message=repr(now))
                last_ping = now
            message = pubsub.get_message(timeout=self.heartbeat / 2)
            if message is None:
                if subscribed and now - max(self._confirmed, subscribed_at) > 4 * self.max_staleness:
                    raise TimeoutError("Redis stopped answering pings")
                continue
            kind = message["type"]
            if kind == "subscribe":
                # Whatever was published before now may have been missed.
                self.on_reset()
                subscribed = True
                last_ping, subscribed_at = 0.0, time.monotonic()
            elif kind == "pong":
                data = message["data"]
                self._confirmed = max(self._confirmed, float(data.decode() if isinstance(data, bytes) else data))
            elif kind == "message":
                data = message["data"]
                self.on_message(data.decode() if isinstance(data, bytes) else str(data))


class Publisher:
    """Publishes on ``channel`` from a daemon thread, in order; at most ``backlog``
    announcements wait (beyond that they are dropped, with a warning)."""

    def __init__(self, client, channel: str, backlog: int = 10_000):
        self.client = client
        self.channel = channel
        self._queue: queue.Queue = queue.Queue(maxsize=backlog)
        self._thread = threading.Thread(target=self._run, name=f"locky-redis-publish:{channel}", daemon=True)
        self._thread.start()

    def publish(self, what: str) -> None:
        try:
            self._queue.put_nowait(what)
        except queue.Full:
            log.warning("redis announcements are backing up (Redis is not answering): %r dropped; other"
                        " hosts may serve it from their cache for up to max_age seconds", what)

    def wait_sent(self, timeout: float) -> bool:
        """Whether every announcement made so far has been handed to Redis (tests, close)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)
        return not self._queue.unfinished_tasks

    def stop(self, timeout: float = 2.0) -> None:
        self.wait_sent(timeout)
        self._queue.put(None)
        self._thread.join(timeout=timeout)

    def _run(self) -> None:
        while True:
            what = self._queue.get()
            try:
                if what is None:
                    return
                self.client.publish(self.channel, what)
            except Exception as exc:
                log.warning("could not publish %r on redis channel %s (%s: %s): other hosts may serve it"
                            " from their cache for up to max_age seconds", what, self.channel,
                            type(exc).__name__, exc)
            finally:
                self._queue.task_done()
