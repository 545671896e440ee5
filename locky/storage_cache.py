"""The per-request reads of a storage served from process memory, for hosts that share
one database: the caller's session with its user, the policy revision, and user records.

Locky checks both in storage on every authenticated request, which is what makes a
logout or a role change hold at once on every host; it costs a database round trip per
request. :class:`CachingStorage` wraps a storage and serves those two reads from a
:class:`Cache` in the process. What keeps the cache honest is a *change bus* (the
:class:`ChangeBus` protocol): every write to sessions, users, roles and grants made
through the wrapper is announced on it, and every process drops what it cached when the
announcement reaches it. The database stays the only record: announcements name what
changed, never its new value. Other reads and all writes go to the wrapped storage
unchanged; the storage contract suite passes on the wrapper.

Four buses ship with Locky, each with its own guarantee (see its module):

- SQLite's data version (:mod:`locky_pony.data_version`, ``LOCKY_AUTH_CACHE=version``,
  the default on an SQLite file): checked in every request, it empties the cache after
  any commit of any process on the file: nothing stale is ever served;
- the cache revision (:mod:`locky_pony.revision_bus`, ``LOCKY_AUTH_CACHE=revision``, the
  default on PostgreSQL and MySQL/MariaDB): a number every change to a user's record
  moves, read with the session on every request; only user records are cached, and no
  record a change through Locky replaced is served once the change was answered;
- PostgreSQL ``LISTEN/NOTIFY`` (:mod:`locky_pony.notify`, ``LOCKY_AUTH_CACHE=notify``):
  a write returns only once every host has dropped what it replaces, or could no
  longer serve it: revocation stays *at once*;
- Redis pub/sub (``contrib/locky_redis``): every host drops it within ``max_staleness``.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, Callable, Hashable, Protocol

from locky.records import Authenticated, Page

__all__ = ["MISSING", "Cache", "CachingStorage", "ChangeBus", "REVISION", "SESSION", "USERS", "USER_ID",
           "USER_UUID", "current_request", "filling", "keep_listening", "request_ended", "request_started",
           "stale_ok", "stale_reads"]

MISSING = object()

#: What an announcement names: the policy revision; every user (any cached session's
#: user may have changed); one session (``SESSION`` + its uuid); one user, by id
#: (``USER_ID`` + id) or by uuid (``USER_UUID`` + uuid): its record and its sessions.
REVISION = "revision"
USERS = "users"
SESSION = "session:"
USER_ID = "user-id:"
USER_UUID = "user-uuid:"


#: The request being served in this context: an object of its own per request, set by
#: Locky's request middleware (:func:`request_started`), ``None`` outside requests.
_request: ContextVar[object | None] = ContextVar("locky_cache_request", default=None)


def request_started():
    """A request begins in this context; returns the token for :func:`request_ended`.

    A bus whose freshness check costs something may then check once per request instead
    of before every use (:mod:`locky_pony.data_version`): a request that began after a
    write was answered still checks, and so sees it; one that began before may be served
    as of its first check, as if it had run a moment earlier."""
    return _request.set(object())


def request_ended(token) -> None:
    """The request of ``token`` has been answered."""
    try:
        _request.reset(token)
    except (ValueError, RuntimeError):  # set in another context, or reset already
        _request.set(None)


def current_request() -> object | None:
    """The marker of the request being served here, else ``None``."""
    return _request.get()


def _request_wrote() -> None:
    """The request being served wrote through a cache: it gets a new marker, so that a
    bus answering from the request's first check checks again."""
    if _request.get() is not None:
        _request.set(object())


#: Whether the read being made in this context fills a cache (:meth:`CachingStorage.cached`).
_filling: ContextVar[bool] = ContextVar("locky_cache_filling", default=False)


def filling() -> bool:
    """Whether the read being made will be kept by a cache: a storage must then answer
    it from the primary, never from a read replica, whose lag the cache would keep past
    the replica's own bound (:mod:`locky_pony.reader`)."""
    return _filling.get()


#: Whether the caller of the reads made in this context can take an answer a little
#: behind the latest writes (:func:`stale_reads`).
_stale_ok: ContextVar[bool] = ContextVar("locky_stale_ok", default=False)


@contextmanager
def stale_reads():
    """Around reads whose caller can take an answer a little behind the latest writes:
    the read API's plain lists, counts and reads by id (:mod:`locky.resources.records`).
    A storage may answer those from a read replica within its lag bound. Every other
    read is fresh: a write and the existence check it decides on, authentication,
    authorization answers, and a read a cache keeps (:func:`filling`)."""
    marked = _stale_ok.set(True)
    try:
        yield
    finally:
        _stale_ok.reset(marked)


def stale_ok() -> bool:
    """Whether the read being made may be answered from a read replica: its caller said
    so (:func:`stale_reads`) and no cache will keep it (:func:`filling`)."""
    return _stale_ok.get() and not _filling.get()


class ChangeBus(Protocol):
    """How the processes sharing a database tell each other what changed."""

    def start(self, on_change: Callable[[str], None], on_reset: Callable[[], None]) -> None:
        """Begin listening: ``on_change(what)`` for every announcement (this process's
        own included), ``on_reset()`` whenever announcements may have been missed."""

    def fresh(self) -> bool:
        """Whether cached values may be served now (the bus is caught up). It may call
        ``on_reset`` first; it is never called with the cache's lock held. Within one
        request (:func:`current_request`) it may answer from its first check: after a
        write through :meth:`changing` or :meth:`batch` the request has a new marker. A
        bus that does so offers ``fresh_to_store()`` too, which always checks: it is
        asked before a value read from storage is kept."""

    def changing(self, what: str, drop_here: Callable[[str], None]) -> AbstractContextManager:
        """Around one write of the wrapped storage: announce ``what`` as changed, call
        ``drop_here(what)`` once the write is done, and return when the bus's guarantee
        holds for it."""

    def batch(self, drop_here: Callable[[str], None]) -> AbstractContextManager:
        """Around an ``atomic`` block of writes (whose announcements go out together)."""

    def close(self) -> None:
        """Stop listening and let go of connections."""


def keep_listening(stop: threading.Event, open_session: Callable[[], Any], listen: Callable[[Any], None],
                   lost: Callable[[Exception], None], ended: Callable[[], None]) -> None:
    """A bus's listener thread: ``listen(open_session())`` again and again until ``stop``
    is set. ``lost(exc)`` when a session fails (not while stopping), then ``ended()`` after
    every session (the cache must not be trusted until the next one has caught up) and
    the session closed; between failed sessions it waits 0.1 s, doubling up to 5 s."""
    backoff = 0.1
    while not stop.is_set():
        session = None
        try:
            session = open_session()
            listen(session)
            backoff = 0.1
        except Exception as exc:  # any failure of the connection: start over
            if not stop.is_set():
                lost(exc)
        finally:
            ended()
            if session is not None:
                try:
                    session.close()
                except Exception:
                    pass
        stop.wait(backoff)
        backoff = min(backoff * 2, 5.0)


class Cache:
    """Values by key, each kept at most ``max_age`` seconds, usable while ``fresh()``.
    An entry may carry tags: :meth:`drop_tag` drops every entry with that tag. An entry
    weighs 1 unless :meth:`put` says more (a page weighs its records): a cache whose
    entries would weigh more than ``max_entries`` together is emptied."""

    def __init__(self, max_age: float, fresh: Callable[[], bool], max_entries: int = 100_000,
                 fresh_to_store: Callable[[], bool] | None = None):
        self.max_age = max_age
        self.fresh = fresh
        self.fresh_to_store = fresh_to_store or fresh
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[Any, float, int]] = {}  # value, when kept, weight
        self._weight = 0
        self._tagged: dict[str, set[Hashable]] = {}
        self._generation = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any:
        """The cached value or :data:`MISSING`."""
        if self.fresh():
            with self._lock:
                value = self._live(key, time.monotonic())
                if value is not MISSING:
                    self.hits += 1
                    return value
        self.misses += 1
        return MISSING

    def get_pair(self, first: Hashable, second: Hashable) -> tuple[Any, Any]:
        """Two cached values (or :data:`MISSING`) for one freshness check."""
        if self.fresh():
            now = time.monotonic()
            with self._lock:
                one, two = self._live(first, now), self._live(second, now)
                if one is not MISSING and two is not MISSING:
                    self.hits += 2
                    return one, two
        self.misses += 1
        return MISSING, MISSING

    def _live(self, key: Hashable, now: float) -> Any:
        """The value of ``key`` while younger than ``max_age``, else :data:`MISSING` (the
        lock held)."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None and now - entry[1] < self.max_age else MISSING

    def token(self) -> int:
        """Take before reading storage; give to :meth:`put` with the result."""
        return self._generation

    def put(self, key: Hashable, value: Any, token: int, tags: tuple[str, ...] = (), weight: int = 1) -> None:
        """Keep ``value`` unless something was invalidated since ``token`` was taken:
        a read that started before an invalidation must not store what it replaced."""
        if not self.fresh_to_store():  # first: a bus may empty the cache while it checks
            return
        with self._lock:
            if token != self._generation or weight > self.max_entries:
                return
            self._pop(key)
            if self._weight + weight > self.max_entries:
                self._entries.clear()
                self._tagged.clear()
                self._weight = 0
            self._entries[key] = (value, time.monotonic(), weight)
            self._weight += weight
            for tag in tags:
                self._tagged.setdefault(tag, set()).add(key)

    def _pop(self, key: Hashable) -> None:
        """Forget ``key``'s entry (the lock held)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._weight -= entry[2]

    def drop(self, key: Hashable) -> None:
        with self._lock:
            self._generation += 1
            self._pop(key)

    def drop_tag(self, tag: str) -> None:
        with self._lock:
            self._generation += 1
            for key in self._tagged.pop(tag, ()):
                self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()
            self._tagged.clear()
            self._weight = 0


def _kept(cache: Cache, key: Hashable, read: Callable[[], Any], how: Callable[[Any], dict]) -> Any:
    """``cache``'s value of ``key``, else ``read()``, kept (unless ``None``) with the
    :meth:`Cache.put` arguments ``how(value)`` gives. The read is marked as one a cache
    keeps (:func:`filling`)."""
    found = cache.get(key)
    if found is not MISSING:
        return found
    token = cache.token()
    marked = _filling.set(True)
    try:
        found = read()
    finally:
        _filling.reset(marked)
    if found is not None:
        cache.put(key, found, token, **how(found))
    return found


def user_tags(user) -> tuple[str, str]:
    """The tags of what is cached for ``user``: its record and its sessions."""
    return USER_ID + str(user.id), USER_UUID + user.uuid


#: The reads of a record store that :class:`CachingStorage` keeps when its bus sees every
#: commit (``sees_every_commit``): by id and uuid, pages (as records or documents), counts.
RECORD_READS = frozenset({"get", "get_by_uuid", "list", "list_documents", "count"})


class _Through:
    """Everything not overridden goes to the wrapped store unchanged; with ``kind`` (a
    record store's name) and a bus that sees every commit, its :data:`RECORD_READS`
    come from :meth:`CachingStorage.read`."""

    def __init__(self, inner, owner: "CachingStorage", kind: str | None = None):
        self._inner = inner
        self._owner = owner
        self._kind = kind

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if self._kind is not None and name in RECORD_READS and self._owner.caches_everything:
            return partial(self._owner.read, (self._kind, name), found)
        return found

    def _write(self, what: str, method: str, *args, **kwargs):
        with self._owner.changing(what):
            return getattr(self._inner, method)(*args, **kwargs)


class _Users(_Through):
    """Reads by id and uuid come from the cache: the records are announced whenever
    they change, and a read by id may be a little stale only as the bus allows."""

    def get(self, id):
        return self._owner.cached(("user", id), self._inner.get, id)

    def get_by_uuid(self, uuid):
        if not isinstance(uuid, str):
            return None
        return self._owner.cached(("user-uuid", uuid), self._inner.get_by_uuid, uuid)

    def update(self, id, **changes):
        return self._write(USER_ID + str(id), "update", id, **changes)

    def delete(self, id):
        return self._write(USER_ID + str(id), "delete", id)  # also ends the user's sessions

    def mark_verified(self, uuid, email):
        return self._write(USER_UUID + str(uuid), "mark_verified", uuid, email)


class _Totp(_Through):
    """Turning TOTP on or off changes the user's ``mfa_enabled``."""

    def confirm(self, user_uuid, **kwargs):
        return self._write(USER_UUID + str(user_uuid), "confirm", user_uuid, **kwargs)

    def remove(self, user_uuid):
        return self._write(USER_UUID + str(user_uuid), "remove", user_uuid)


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
        if not isinstance(uuid, str):
            return None
        if self._owner.caches_only_records:
            return self._inner.identity(uuid)
        return self._owner.cached(SESSION + uuid, self._inner.identity, uuid)

    def revoke_all(self, user_uuid, *, keep=None):
        # Every cached session of the user goes with it (announced like a user change).
        return self._write(USER_UUID + str(user_uuid), "revoke_all", user_uuid, keep=keep)

    def authenticate(self, uuid):
        """The session with its user and the revision, from the cache when both are there;
        otherwise one read of the wrapped storage, which refreshes both entries."""
        if not isinstance(uuid, str):
            return None
        if self._owner.caches_only_records:
            return self._inner.authenticate(uuid)
        cache = self._owner.cache
        key = SESSION + uuid
        identity, revision = cache.get_pair(key, REVISION)
        if identity is not MISSING:
            return Authenticated(session=identity[0], user=identity[1], policy_revision=revision)
        token = cache.token()
        found = self._inner.authenticate(uuid)
        if found is not None:  # a missing session may be created later: never cached
            cache.put(key, (found.session, found.user), token, user_tags(found.user))
            cache.put(REVISION, found.policy_revision, token)
        return found

    def rotate(self, uuid, presented_jti, new_jti):
        return self._write(SESSION + uuid, "rotate", uuid, presented_jti, new_jti)

    def revoke(self, uuid):
        return self._write(SESSION + uuid, "revoke", uuid)


class CachingStorage:
    """``inner`` with its per-request reads cached, kept honest by ``bus``.

    ``max_age`` bounds how long an entry is kept at all: what changes the database
    without going through a wrapper (a hand-written ``UPDATE``) is seen after it.
    ``max_entries`` bounds the memory it takes: a full cache is emptied. A bus with
    ``caches_only_records`` true learns whether the cache may be used from the session
    read (:mod:`locky_pony.revision_bus`): sessions and the policy revision then always
    come from the wrapped storage, and only user records from the cache.

    A bus with ``sees_every_commit`` true (:mod:`locky_pony.data_version`) empties the
    cache after any commit, whatever it changed and whoever made it: then the reads of
    every record kind, lists and counts included (:data:`RECORD_READS`), are kept too,
    in a cache of their own (:meth:`read`) that asks the bus before every use, so that a
    request that wrote anything (through this wrapper or not) reads its own writes.
    """

    def __init__(self, inner, bus: ChangeBus, *, max_age: float = 10.0, max_entries: int = 100_000):
        self.inner = inner
        self.bus = bus
        self.caches_only_records = bool(getattr(bus, "caches_only_records", False))
        self.caches_everything = bool(getattr(bus, "sees_every_commit", False)) and not self.caches_only_records
        fresh_to_store = getattr(bus, "fresh_to_store", None)
        self.cache = Cache(max_age, bus.fresh, max_entries, fresh_to_store)
        # Pages weigh their records: ``max_entries`` records in all.
        self.reads = Cache(max_age, fresh_to_store or bus.fresh, max_entries)
        self.users = _Users(inner.users, self, "users")
        self.groups = _Through(inner.groups, self, "groups")
        self.members = _Through(inner.members, self, "members")
        self.roles = _Roles(inner.roles, self, "roles")
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
        bus.start(self._heard, self._reset)

    def __getattr__(self, name: str) -> Any:
        # What the wrapped storage offers beyond the Storage interface (its reader, its
        # pool statistics) stays reachable.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- invalidation ------------------------------------------------------------

    @contextmanager
    def changing(self, what: str):
        """Around a write of ``inner`` that changes ``what``."""
        try:
            with self.bus.changing(what, self._heard):
                yield
        finally:
            _request_wrote()

    def cached(self, key, read: Callable[[Any], Any], argument):
        """``read(argument)`` from the cache under ``key``, else from storage (kept when
        found: what is missing now may be created later). A session is kept as
        ``(session, user)``; records and sessions carry their user's tags."""
        return _kept(self.cache, key, lambda: read(argument),
                     lambda found: {"tags": user_tags(found[1] if isinstance(found, tuple) else found)})

    def read(self, what: tuple[str, str], read: Callable[..., Any], *args, **kwargs):
        """``read(*args, **kwargs)`` (the record store read ``what``: its kind and method)
        from :attr:`reads`, else from storage (kept unless ``None``). A page comes with a
        list of its own; its records (and documents) are shared with the cache, for
        reading only."""
        key = (what, args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:  # an argument that cannot be a key (a list of values, say)
            return read(*args, **kwargs)
        found = _kept(self.reads, key, lambda: read(*args, **kwargs),
                      lambda found: {"weight": len(found.items) + 1 if isinstance(found, Page) else 1})
        return Page(list(found.items), found.next_after_id) if isinstance(found, Page) else found

    def _heard(self, what: str) -> None:
        if self.caches_everything:  # any announcement: a page or count may hold what it names
            self.reads.clear()
        if what.startswith(SESSION):
            self.cache.drop(what)
        elif what.startswith((USER_ID, USER_UUID)):
            self.cache.drop_tag(what)
        elif what == REVISION:
            self.cache.drop(REVISION)
        else:  # users (any cached session's user may have changed), or news we do not know
            self.cache.clear()

    def _reset(self) -> None:
        self.cache.clear()
        self.reads.clear()

    # -- Storage -------------------------------------------------------------------

    @contextmanager
    def atomic(self):
        try:
            with self.bus.batch(self._heard), self.inner.atomic():
                yield
        finally:
            _request_wrote()

    def revision(self) -> int:
        if self.caches_only_records:
            return self.inner.revision()
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
        try:
            self.bus.close()
        finally:
            self.inner.close()
