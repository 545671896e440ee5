"""Redis for several Locky hosts on one database: cached per-request reads, with changes
broadcast so that every host drops what it cached within a bounded time.

What it adds, honestly: Locky checks the caller's session and the policy revision in
storage on every request, so hosts sharing one database already see a logout or a role
change at once, without Redis. What that costs is a database round trip or two on every
authenticated request (the session with its user; the policy revision). This plugin is the storage provider
``redis-cache``: a wrapper around the real storage (``pony`` by default) that serves those
two reads from process memory and learns about changes through Redis pub/sub. Every
write to sessions, users, roles and grants made through Locky on any host is published
on one channel (the *revocation list* and *policy-change notifier* are these messages,
not a second copy of the data: the database stays the only record). Other reads and all
writes go to the wrapped storage unchanged; the storage contract suite passes on it.

Guarantee: a cached value is never served more than ``max_staleness`` seconds (default
1) after a change whose host reached Redis. Each process pings Redis on its subscription
four times per ``max_staleness`` and uses its cache only while a recent ping has come
back, which proves every earlier message has arrived; when Redis is away, every read
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

import logging
import os
from contextlib import contextmanager
from typing import Any

from locky import SettingsError, hookimpl
from locky.records import Authenticated

from .invalidation import MISSING, Cache, Listener

__all__ = ["CachingStorage", "locky_register_storage"]

log = logging.getLogger("locky.redis")

NAME = "redis-cache"
REVISION = "revision"
USERS = "users"
SESSION = "session:"


class _Through:
    """Everything not overridden goes to the wrapped store unchanged."""

    def __init__(self, inner, owner: "CachingStorage"):
        self._inner = inner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _write(self, what: str, method: str, *args, **kwargs):
        """The wrapped store's ``method``, then (whatever its outcome) ``what`` announced
        as changed: a write that failed half-way may still have changed something."""
        try:
            return getattr(self._inner, method)(*args, **kwargs)
        finally:
            self._owner.changed(what)


class _Users(_Through):
    def update(self, id, **changes):
        return self._write(USERS, "update", id, **changes)

    def delete(self, id):
        return self._write(USERS, "delete", id)  # also ends the user's sessions

    def mark_verified(self, uuid, email):
        return self._write(USERS, "mark_verified", uuid, email)


class _Totp(_Through):
    """Turning TOTP on or off changes the user's ``mfa_enabled``."""

    def confirm(self, user_uuid, **kwargs):
        return self._write(USERS, "confirm", user_uuid, **kwargs)

    def remove(self, user_uuid):
        return self._write(USERS, "remove", user_uuid)


class _Roles(_Through):
    def create(self, **fields):
        return self._write(REVISION, "create", **fields)

    def update(self, id, **changes):
        return self._write(REVISION, "update", id, **changes)

    def delete(self, id):
        return self._write(REVISION, "delete", id)

    def sync_builtin(self, roles):
        return self._write(REVISION, "sync_builtin", roles)


class _Grants(_Through):
    def grant(self, user_uuid, role):
        return self._write(REVISION, "grant", user_uuid, role)

    def revoke(self, user_uuid, role):
        return self._write(REVISION, "revoke", user_uuid, role)


class _Sessions(_Through):
    def identity(self, uuid):
        cache = self._owner.cache
        key = SESSION + uuid
        found = cache.get(key)
        if found is not MISSING:
            return found
        token = cache.token()
        found = self._inner.identity(uuid)
        if found is not None:  # a missing session may be created later: never cached
            cache.put(key, found, token)
        return found

    def revoke_all(self, user_uuid, *, keep=None):
        # Every cached session of the user goes with it (announced like a user change).
        return self._write(USERS, "revoke_all", user_uuid, keep=keep)

    def authenticate(self, uuid):
        """The session with its user and the revision, from the cache when both are there;
        otherwise one read of the wrapped storage, which refreshes both entries."""
        if not isinstance(uuid, str):
            return None
        cache = self._owner.cache
        key = SESSION + uuid
        identity, revision = cache.get(key), cache.get(REVISION)
        if identity is not MISSING and revision is not MISSING:
            return Authenticated(session=identity[0], user=identity[1], policy_revision=revision)
        token = cache.token()
        found = self._inner.authenticate(uuid)
        if found is not None:  # a missing session may be created later: never cached
            cache.put(key, (found.session, found.user), token)
            cache.put(REVISION, found.policy_revision, token)
        return found

    def rotate(self, uuid, presented_jti, new_jti):
        return self._write(SESSION + uuid, "rotate", uuid, presented_jti, new_jti)

    def revoke(self, uuid):
        return self._write(SESSION + uuid, "revoke", uuid)


class CachingStorage:
    """The ``redis-cache`` storage provider: ``inner`` with its per-request reads cached."""

    def __init__(self, inner, client, *, channel: str = "locky:changes", max_staleness: float = 1.0,
                 max_age: float = 10.0):
        self.inner = inner
        self.client = client
        self.channel = channel
        self.listener = Listener(client, channel, max_staleness, self._heard, self._reset)
        self.cache = Cache(max_age, self.listener.fresh)
        self.users = _Users(inner.users, self)
        self.groups = inner.groups
        self.members = inner.members
        self.roles = _Roles(inner.roles, self)
        self.sessions = _Sessions(inner.sessions, self)
        self.throttle = inner.throttle
        self.grants = _Grants(inner.grants, self)
        self.codes = inner.codes
        self.outbox = inner.outbox
        self.totp = _Totp(inner.totp, self)
        self.keys = inner.keys
        # The audit trail and webhooks go straight through, as the outbox and keys do.
        self.audit = inner.audit
        self.webhooks = inner.webhooks
        self.deliveries = inner.deliveries
        self.listener.start()

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

    # -- invalidation ------------------------------------------------------------

    def changed(self, what: str) -> None:
        """Drop ``what`` here at once, then tell every other host."""
        self._heard(what)
        try:
            self.client.publish(self.channel, what)
        except Exception as exc:
            log.warning("could not publish %r on redis channel %s (%s: %s): other hosts may serve it"
                        " from their cache for up to max_age seconds", what, self.channel,
                        type(exc).__name__, exc)

    def _heard(self, what: str) -> None:
        if what.startswith(SESSION):
            self.cache.drop(what)
        elif what == REVISION:
            self.cache.drop(REVISION)
        else:  # users (any cached session's user may have changed), or news we do not know
            self.cache.clear()

    def _reset(self) -> None:
        self.cache.clear()

    # -- Storage -------------------------------------------------------------------

    @contextmanager
    def atomic(self):
        # The writes inside announce themselves before the block commits; a read in
        # between could cache what they replace, so users are announced once more after.
        with self.inner.atomic():
            yield
        self.changed(USERS)

    def revision(self) -> int:
        found = self.cache.get(REVISION)
        if found is not MISSING:
            return found
        token = self.cache.token()
        revision = self.inner.revision()
        self.cache.put(REVISION, revision, token)
        return revision

    def schema(self):
        return self.inner.schema()

    def migrate(self, *, dry_run: bool = False):
        applied = self.inner.migrate(dry_run=dry_run)
        if applied and not dry_run:
            self._reset()  # nothing cached from before the new schema is kept
        return applied

    def ping(self) -> bool:
        return self.inner.ping()

    def close(self) -> None:
        self.listener.stop()
        try:
            self.client.close()
        finally:
            self.inner.close()


@hookimpl
def locky_register_storage(registry):
    registry.add(NAME, CachingStorage.from_context)
