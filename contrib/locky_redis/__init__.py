"""Redis for several Locky hosts on one database: cached per-request reads, with changes
broadcast so that every host drops what it cached within a bounded time.

What it adds, honestly: Locky checks the caller's session and the policy revision in
storage on every request, so hosts sharing one database already see a logout or a role
change at once, without Redis. What that costs is a database round trip or two on every
authenticated request (the session with its user; the policy revision). This plugin is the storage provider
``redis-cache``: Locky's :class:`~locky.cache.storage.CachingStorage` around the real
storage (``pony`` by default), which serves those two reads from process memory, with
Redis pub/sub as its change bus. Every
write to sessions, users, roles and grants made through Locky on any host is published
on one channel (the *revocation list* and *policy-change notifier* are these messages,
not a second copy of the data: the database stays the only record). Other reads and all
writes go to the wrapped storage unchanged; the storage contract suite passes on it.

What it trades, plainly: revocation is no longer *at once* but *within
``max_staleness``*. A logout, a user deletion or a role change answered on one host may
still be honoured by another for up to ``max_staleness`` seconds. On PostgreSQL,
``LOCKY_AUTH_CACHE=notify`` caches the same reads without Redis and keeps revocation at
once (a write waits for every host's acknowledgement); prefer it there.

Guarantee: a cached value is never served more than ``max_staleness`` seconds (default
1) after a change whose host reached Redis. A write never waits for Redis: its
announcement is sent from a thread of its own. Each process pings Redis on its
subscription four times per ``max_staleness`` and uses its cache only while a recent
ping has come back, which proves every earlier message has arrived; when Redis is away, every read
goes to the database (slower, never stale). The one gap: a host that cannot reach Redis
*when it writes* cannot tell the others, which then keep their entry up to ``max_age``
seconds (default 10); that host logs a warning.

Load it with ``LOCKY_PLUGINS=locky_redis``, choose it with ``LOCKY_STORAGE=redis-cache``
and configure it in the TOML settings (the URL also from ``LOCKY_REDIS_URL``)::

    [plugins.redis]
    url = "redis://127.0.0.1:6379/0"
    storage = "pony"             # the storage being cached
    channel = "locky:changes"    # one per deployment sharing a database
    max_staleness = 1.0
    max_age = 10.0

Install with ``pip install 'locky[redis]'``. Redis must answer at startup.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from locky import SettingsError, hookimpl
from locky.storage import USERS, CachingStorage as _CachingStorage, Freshness, Keeps

from .invalidation import Listener, Publisher

__all__ = ["CachingStorage", "RedisBus", "locky_register_storage"]

NAME = "redis-cache"


class RedisBus:
    """The change bus over one Redis channel (:class:`locky.storage.ChangeBus`):
    an announcement is published after the write, and heard within ``max_staleness``."""

    #: Every announced write is heard: sessions, the policy revision and user records.
    keeps = Keeps.SESSIONS
    #: Every host drops what a write replaced within ``max_staleness``.
    freshness = Freshness.BOUNDED

    def __init__(self, client, channel: str, max_staleness: float):
        self.client = client
        self.channel = channel
        self.max_staleness = max_staleness
        self.listener = None
        self.publisher = Publisher(client, channel)

    def start(self, on_change, on_reset) -> None:
        self.listener = Listener(self.client, self.channel, self.max_staleness, on_change, on_reset)
        self.listener.start()

    def fresh(self) -> bool:
        return self.listener is not None and self.listener.fresh()

    fresh_to_store = fresh

    @contextmanager
    def changing(self, what: str, drop_here):
        # Whatever the write's outcome: one that failed half-way may have changed something.
        try:
            yield
        finally:
            self.publish(what, drop_here)

    @contextmanager
    def batch(self, drop_here):
        # The writes inside announce themselves before the block commits; a read in
        # between could cache what they replace, so users are announced once more after.
        yield
        self.publish(USERS, drop_here)

    def publish(self, what: str, drop_here) -> None:
        """Drop ``what`` here at once, then tell every other host (without waiting)."""
        drop_here(what)
        self.publisher.publish(what)

    def close(self) -> None:
        self.publisher.stop()
        if self.listener is not None:
            self.listener.stop()
        self.client.close()


class CachingStorage(_CachingStorage):
    """The ``redis-cache`` storage provider: ``inner`` with its per-request reads cached."""

    def __init__(self, inner, client, *, channel: str = "locky:changes", max_staleness: float = 1.0,
                 max_age: float = 10.0):
        self.client = client
        self.channel = channel
        super().__init__(inner, RedisBus(client, channel, max_staleness), max_age=max_age)
        self.listener = self.bus.listener

    @classmethod
    def from_context(cls, context) -> "CachingStorage":
        import redis

        options = dict(context.settings.extra.get("redis", {}))
        url = options.pop("url", None) or os.environ.get("LOCKY_REDIS_URL")
        if not url:
            raise SettingsError('storage "redis-cache" needs [plugins.redis] url = "redis://..." or LOCKY_REDIS_URL')
        inner_name = options.pop("storage", "pony")
        if inner_name == NAME:
            raise SettingsError('[plugins.redis] storage must name the storage to cache, not "redis-cache"')
        numbers = {}
        for name in ("max_staleness", "max_age"):
            if name in options:
                try:
                    numbers[name] = float(options.pop(name))
                except (TypeError, ValueError):
                    raise SettingsError(f"[plugins.redis] {name} must be a number of seconds") from None
                if not 0.05 <= numbers[name] <= 3600:
                    raise SettingsError(f"[plugins.redis] {name} must be between 0.05 and 3600 seconds")
        channel = str(options.pop("channel", "locky:changes"))
        if options:
            raise SettingsError(f"[plugins.redis] has unknown key(s): {', '.join(sorted(options))}")
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2, socket_keepalive=True)
        try:
            client.ping()
        except Exception as exc:
            client.close()
            raise SettingsError(f"cannot reach Redis at [plugins.redis] url: {type(exc).__name__}: {exc}") from None
        try:
            inner = context.registries["storage"].create(inner_name, context)
        except BaseException:
            client.close()
            raise
        return cls(inner, client, channel=channel, **numbers)


@hookimpl
def locky_register_storage(registry):
    registry.add(NAME, CachingStorage.from_context)
