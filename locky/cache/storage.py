"""The storage cache: a storage with its per-request reads served from process memory
(a :class:`Cache` of values kept for a while), kept honest by a change bus
(:mod:`locky.cache.bus`).

Which store methods it serves from memory and which writes it announces come from one
declaration (:data:`locky.cache.declared.STORES`); what the bus lets it keep comes from
the bus's declared :attr:`~locky.cache.bus.ChangeBus.keeps`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, Callable, Hashable

from locky.cache.bus import ChangeBus, Keeps
from locky.cache.context import FILLING, request_wrote
from locky.cache.declared import (
    MEMBERS, REVISION, SESSION, STORAGE_CACHE, STORES, USER_ID, USER_PAGES, USER_UUID, write_topic,
)
from locky.records import Authenticated, Page

__all__ = ["MAX_AGE", "MISSING", "Cache", "CachingStorage", "kept", "user_tags"]

#: What :meth:`Cache.get` answers for a key it does not hold.
MISSING = object()
#: Seconds a :class:`CachingStorage` keeps an entry at most, unless told otherwise: what a
#: bus cannot see (a change made by hand in SQL) is seen after it.
MAX_AGE = 10.0
#: How the cache keeps "no live membership" (``role_of`` is ``None``): no role is named "".
NO_ROLE = ""
#: Whether this thread is inside an atomic block of a :class:`CachingStorage`: what a
#: block reads decides what it writes, so memberships are read live there.
_IN_BLOCK: ContextVar[bool] = ContextVar("locky_cache_in_block", default=False)


class Cache:
    """Values by key, each kept at most ``max_age`` seconds, usable while ``fresh()``.
    An entry may carry tags: :meth:`drop_tag` drops every entry with that tag. An entry
    weighs 1 unless :meth:`put` says more (a page weighs its records); the entries weigh
    at most ``max_entries`` together: a new one makes room by dropping the oldest kept
    (they expire first, and a working set a little larger than the bound keeps most of
    its entries, where emptying a full cache lost them all at once, every time it
    filled)."""

    def __init__(self, max_age: float, fresh: Callable[[], bool], max_entries: int = 100_000,
                 fresh_to_store: Callable[[], bool] | None = None):
        self.max_age = max_age
        self.fresh = fresh
        self.fresh_to_store = fresh_to_store or fresh
        self.max_entries = max_entries
        self._lock = threading.Lock()
        # value, when kept, weight, tags; oldest first (a key kept again moves to the end).
        # An OrderedDict, whose oldest entry is dropped in constant time: a plain dict's
        # first key, after many dropped before it, is found by walking past their empty
        # slots (7 µs a new entry in a full cache of 100,000, against 0.2).
        self._entries: OrderedDict[Hashable, tuple[Any, float, int, tuple[str, ...]]] = OrderedDict()
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

    def get_many(self, keys: list[Hashable]) -> list[Any]:
        """The cached value (or :data:`MISSING`) of each of ``keys``, in order, for one
        freshness check."""
        if not self.fresh():
            self.misses += len(keys)
            return [MISSING] * len(keys)
        now = time.monotonic()
        with self._lock:
            found = [self._live(key, now) for key in keys]
        # By identity: list.count compares with ==, which calls every record's __eq__.
        missing = sum(1 for value in found if value is MISSING)
        self.hits += len(found) - missing
        self.misses += missing
        return found

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
            entries = self._entries
            while self._weight + weight > self.max_entries:
                self._forget(*entries.popitem(last=False))  # the oldest
            entries[key] = (value, time.monotonic(), weight, tags)
            self._weight += weight
            for tag in tags:
                self._tagged.setdefault(tag, set()).add(key)

    def _pop(self, key: Hashable) -> None:
        """Forget ``key``'s entry, and it from its tags (the lock held)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._forget(key, entry)

    def _forget(self, key: Hashable, entry: tuple[Any, float, int, tuple[str, ...]]) -> None:
        """Take ``key``'s entry, already out of the entries, from the weight and its tags
        (the lock held)."""
        self._weight -= entry[2]
        tagged = self._tagged
        for tag in entry[3]:
            keys = tagged.get(tag)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del tagged[tag]

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


def kept(cache: Cache, key: Hashable, read: Callable[[], Any], how: Callable[[Any], dict]) -> Any:
    """``cache``'s value of ``key``, else ``read()``, kept (unless ``None``) with the
    :meth:`Cache.put` arguments ``how(value)`` gives. The read is marked as one a cache
    keeps (:func:`locky.cache.context.filling`)."""
    found = cache.get(key)
    if found is not MISSING:
        return found
    token = cache.token()
    marked = FILLING.set(True)
    try:
        found = read()
    finally:
        FILLING.reset(marked)
    if found is not None:
        cache.put(key, found, token, **how(found))
    return found



#: The share of a cache's room one read of many keys may fill: what a larger read misses
#: is read and answered, not kept. The users of a role everybody holds, listed by
#: ``/v1/internal/authz/subjects`` through an authorizer or a storage that cannot page
#: them (``holder_sources``, ``holders_by_id``), would otherwise push out every other
#: request's entries (the caller's session, the roles it checks), each then read from
#: storage again.
MANY_KEEPS_AT_MOST = 0.5


def kept_many(cache: Cache, keys: dict[Hashable, Any], read: Callable[[list], dict], how: Callable[[Any], dict],
              ) -> dict[Any, Any]:
    """:func:`kept` of many: ``keys`` maps each cache key to what ``read`` is given for
    it; the values found, by that argument. What the cache misses is read at once
    (``read(arguments) -> {argument: value}``) and kept, unless it would fill more than
    :data:`MANY_KEEPS_AT_MOST` of the cache's room."""
    found: dict[Any, Any] = {}
    missing = []
    for (key, argument), value in zip(keys.items(), cache.get_many(list(keys))):
        if value is MISSING:
            missing.append((key, argument))
        else:
            found[argument] = value
    if missing:
        keep = len(missing) <= cache.max_entries * MANY_KEEPS_AT_MOST
        token = cache.token()
        marked = FILLING.set(keep)
        try:
            read_now = read([argument for _, argument in missing])
        finally:
            FILLING.reset(marked)
        for key, argument in missing:
            value = read_now.get(argument)
            if value is not None:
                if keep:
                    cache.put(key, value, token, **how(value))
                found[argument] = value
    return found


def user_tags(user) -> tuple[str, str]:
    """The tags of what is cached for ``user``: its record and its sessions."""
    return USER_ID + str(user.id), USER_UUID + user.uuid


def _announcing(owner: "CachingStorage", inner, store: str, method: str) -> Callable[..., Any]:
    """``inner.method`` announcing, around each call, what :data:`STORES` says it makes stale."""
    named = write_topic(store, method)
    if named is None:
        what = STORES[store][method].topic

        def write(*args, **kwargs):
            with owner.changing(what):
                return getattr(inner, method)(*args, **kwargs)
    else:
        prefix, position, argument = named

        def write(*args, **kwargs):
            one = args[position] if len(args) > position else kwargs[argument]
            with owner.changing(prefix + str(one)):
                return getattr(inner, method)(*args, **kwargs)
    write.__name__ = method
    return write


class _Through:
    """One store of the wrapped storage: its writes whose topic the storage cache follows
    are announced (:data:`STORES`); the reads its bus lets it keep
    (:meth:`CachingStorage.keeps`: every :data:`KEPT` read, or the pages and counts of
    users) come from :meth:`CachingStorage.read`; everything else goes to the wrapped
    store unchanged."""

    def __init__(self, inner, owner: "CachingStorage", store: str):
        self._inner = inner
        for method, effect in STORES[store].items():
            if hasattr(type(self), method):
                continue  # served by hand below
            if effect.writes and owner.follows(effect.topic):
                setattr(self, method, _announcing(owner, inner, store, method))
            elif owner.keeps(effect) and hasattr(inner, method):
                setattr(self, method, partial(owner.read, (store, method), getattr(inner, method)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _wrapped(inner, owner: "CachingStorage", store: str, through: type = _Through):
    """``inner`` itself when the cache has nothing to do with the store, else its wrapper."""
    declared = STORES[store].values()
    if through is _Through and not any(
            (effect.writes and owner.follows(effect.topic)) or owner.keeps(effect) for effect in declared):
        return inner
    return through(inner, owner, store)


class _Users(_Through):
    """Reads by id and uuid come from the cache: the records are announced whenever
    they change, and a read by id may be a little stale only as the bus allows."""

    def __init__(self, inner, owner: "CachingStorage", store: str):
        self._owner = owner
        super().__init__(inner, owner, store)

    def get(self, id):
        return self._owner.cached(("user", id), self._inner.get, id)

    def get_by_uuid(self, uuid):
        if not isinstance(uuid, str):
            return None
        return self._owner.cached(_user_key(uuid), self._inner.get_by_uuid, uuid)

    def get_many_by_uuid(self, uuids):
        """The users the cache holds, and the others in one read of ``inner`` (one by
        one from a storage without ``get_many_by_uuid``)."""
        inner = self._inner
        many = getattr(inner, "get_many_by_uuid", None)
        read = many if many is not None else (
            lambda missing: {u: found for u in missing if (found := inner.get_by_uuid(u)) is not None})
        keys = {_user_key(uuid): uuid for uuid in uuids if isinstance(uuid, str)}
        return kept_many(self._owner.cache, keys, read, lambda found: {"tags": user_tags(found)})


class _Members(_Through):
    """The role of a user in a group (``role_of``, from the user's roles in every group
    kept whole; ``roles_in`` for a batch of checks) comes from the cache: every
    group-scoped decision asks for it, and each of its writes is announced
    (:data:`~locky.cache.declared.MEMBERS`). Inside an atomic block it is read live, as
    it was: a block decides on what it reads and writes after (adding a member asks the
    adder's role, under the group's lock)."""

    def __init__(self, inner, owner: "CachingStorage", store: str):
        self._owner = owner
        super().__init__(inner, owner, store)

    def role_of(self, user_uuid, group_uuid):
        """From the user's roles in every group (:meth:`roles_by_group`, kept whole), or
        for a user with more than :data:`ROLES_BY_GROUP_AT_MOST` memberships (or from a
        storage without it) pair by pair: a user's decisions in their other groups then
        cost no read."""
        if _IN_BLOCK.get() or not (isinstance(user_uuid, str) and isinstance(group_uuid, str)):
            return self._inner.role_of(user_uuid, group_uuid)
        by_group = self._kept_roles_by_group(user_uuid, ROLES_BY_GROUP_AT_MOST)
        if by_group is not None:
            return by_group.get(group_uuid)
        found = kept(self._owner.cache, ("role", user_uuid, group_uuid),
                     lambda: self._inner.role_of(user_uuid, group_uuid) or NO_ROLE, _membership_tags)
        return found or None

    def roles_by_group(self, user_uuid, at_most):
        read = self._inner.roles_by_group  # a storage without it has none here either
        if _IN_BLOCK.get() or not isinstance(user_uuid, str):
            return read(user_uuid, at_most)
        found = self._kept_roles_by_group(user_uuid, at_most)
        return None if found is None else dict(found)  # the kept one is shared

    def user_with_roles_by_group(self, user_uuid, at_most):
        """The user (as ``users.get_by_uuid`` keeps them) and their roles by group (as
        :meth:`roles_by_group`), from the cache; when it holds neither, both in one read
        of the wrapped store, each then kept as its own read keeps it."""
        read = self._inner.user_with_roles_by_group  # a storage without it has none here either
        if _IN_BLOCK.get() or not isinstance(user_uuid, str):
            return read(user_uuid, at_most)
        owner = self._owner
        cache = owner.cache
        user_key, roles_key = _user_key(user_uuid), _roles_key(user_uuid, at_most)
        user, roles = cache.get(user_key), cache.get(roles_key)
        if user is MISSING and roles is MISSING:
            token = cache.token()
            marked = FILLING.set(True)
            try:
                user, roles = read(user_uuid, at_most)
            finally:
                FILLING.reset(marked)
            if user is None:
                return None, {}
            cache.put(user_key, user, token, tags=user_tags(user))
            roles = _or_many(roles)
            cache.put(roles_key, roles, token, **_roles_kept(roles))
        else:
            if user is MISSING:
                user = owner.users.get_by_uuid(user_uuid)
                if user is None:
                    return None, {}
            if roles is MISSING:
                roles = self._kept_roles_by_group(user_uuid, at_most)
        return user, (None if roles is None or roles is MANY else dict(roles))  # the kept one is shared

    def _kept_roles_by_group(self, user_uuid: str, at_most: int) -> dict[str, str] | None:
        """The inner store's ``roles_by_group``, kept (weighing its memberships) until a
        membership changes; ``None`` also from a storage without it."""
        inner = self._inner
        if not hasattr(inner, "roles_by_group"):
            return None
        found = kept(self._owner.cache, _roles_key(user_uuid, at_most),
                     lambda: _or_many(inner.roles_by_group(user_uuid, at_most)), _roles_kept)
        return None if found is MANY else found

    def roles_in(self, pairs):
        """The roles the cache holds (a pair's own, or from its user's roles in every
        group, kept whole as :meth:`role_of` keeps them), and the others in one read of
        ``inner`` (``role_of`` pair by pair from a storage without ``roles_in``)."""
        inner = self._inner
        many = getattr(inner, "roles_in", None)

        def read(missing):
            found = many(missing) if many is not None else {
                pair: role for pair in missing if (role := inner.role_of(*pair)) is not None}
            return {pair: found.get(pair) or NO_ROLE for pair in missing}

        pairs = list(pairs)
        if _IN_BLOCK.get():
            return {pair: role for pair, role in read(pairs).items() if role}
        pairs = [pair for pair in pairs
                 if isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str)]
        found = self._from_roles_kept_whole(pairs)
        keys = {("role", *pair): pair for pair in pairs if pair not in found}
        if keys:
            found.update(kept_many(self._owner.cache, keys, read, _membership_tags))
        return {pair: role for pair, role in found.items() if role}

    def _from_roles_kept_whole(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The role (or :data:`NO_ROLE`) of each pair whose user's roles in every group the
        cache holds whole, in one look at it."""
        users = list({user_uuid for user_uuid, _ in pairs})
        held = dict(zip(users, self._owner.cache.get_many([_roles_key(u, ROLES_BY_GROUP_AT_MOST) for u in users])))
        return {(user_uuid, group_uuid): roles.get(group_uuid, NO_ROLE) for user_uuid, group_uuid in pairs
                if (roles := held[user_uuid]) is not MISSING and roles is not MANY}


#: The most memberships of one user the storage cache keeps whole (one entry weighing
#: them all); a user with more has their roles kept pair by pair.
ROLES_BY_GROUP_AT_MOST = 64
#: How the cache keeps "more than that" (``roles_by_group`` is ``None``).
MANY = ("many",)


def _or_many(found: dict[str, str] | None):
    return MANY if found is None else found


def _user_key(uuid: str) -> tuple[str, str]:
    """The key a user's record is kept under, read by uuid."""
    return ("user-uuid", uuid)


def _roles_key(user_uuid: str, at_most: int) -> tuple[str, str, int]:
    """The key a user's roles by group (``roles_by_group``) are kept under."""
    return ("roles-by-group", user_uuid, at_most)


def _roles_kept(found) -> dict:
    """How a user's roles by group are kept: dropped when any membership changes,
    weighing what they take."""
    return {"tags": (MEMBERS,), "weight": _roles_weight(found)}


def _roles_weight(found) -> int:
    """What a user's roles by group weigh in the cache, as the memory they take against
    an entry's (about 1.4 KB, a user's record): a group's uuid and its slot take about
    110 bytes (10 groups 1.1 KB, 64 groups 7 KB)."""
    return 1 if found is MANY else 1 + len(found) // 12


def _membership_tags(role: str) -> dict:
    """How a role in a group is kept: every one is dropped when any membership changes."""
    return {"tags": (MEMBERS,)}


class _Sessions(_Through):
    """The session with its user, and the policy revision, come from the cache unless
    the bus keeps only user records."""

    def __init__(self, inner, owner: "CachingStorage", store: str):
        self._owner = owner
        super().__init__(inner, owner, store)

    def identity(self, uuid):
        if not isinstance(uuid, str):
            return None
        if self._owner.caches_only_records:
            return self._inner.identity(uuid)
        return self._owner.cached(SESSION + uuid, self._inner.identity, uuid)

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


class CachingStorage:
    """``inner`` with its per-request reads cached, kept honest by ``bus``.

    ``max_age`` bounds how long an entry is kept at all: what changes the database
    without going through a wrapper (a hand-written ``UPDATE``) is seen after it.
    ``max_entries`` bounds the memory it takes: a full cache drops its oldest entries.
    What the cache keeps is what the bus declares (:class:`~locky.cache.bus.Keeps`), and under every bus
    the roles users hold in groups (outside atomic blocks: :class:`_Members`): under a bus that
    keeps only user records (:mod:`locky_pony.revision_bus`) sessions and the policy
    revision always come from the wrapped storage, and pages and counts of users
    (:data:`locky.cache.declared.USER_PAGE`) are kept with the records, in :meth:`read`'s
    cache, which every write of a user or a new one empties; under one that keeps every read
    (:mod:`locky_pony.data_version`, which sees every commit whatever it changed and
    whoever made it) the reads of every record kind, lists and counts included
    (:data:`locky.cache.declared.KEPT`), are kept too, in a cache of their own
    (:meth:`read`) that asks the bus before every use, so that a request that wrote
    anything (through this wrapper or not) reads its own writes.
    """

    def __init__(self, inner, bus: ChangeBus, *, max_age: float = MAX_AGE, max_entries: int = 100_000):
        if not isinstance(bus, ChangeBus) or not isinstance(bus.keeps, Keeps):
            raise TypeError(f"{type(bus).__name__} is no ChangeBus: it declares keeps (a Keeps) and freshness,"
                            " and has every method of locky.cache.bus.ChangeBus")
        self.inner = inner
        self.bus = bus
        self.caches_only_records = bus.keeps is Keeps.USER_RECORDS
        self.caches_everything = bus.keeps is Keeps.EVERY_READ
        #: Pages and counts of users (:data:`~locky.cache.declared.USER_PAGE`) are kept,
        #: in :attr:`reads`, under a bus that keeps user records or every read.
        self.keeps_user_pages = self.caches_only_records or self.caches_everything
        self.cache = Cache(max_age, bus.fresh, max_entries, bus.fresh_to_store)
        # Pages weigh their records: ``max_entries`` records in all.
        self.reads = Cache(max_age, bus.fresh_to_store, max_entries)
        self.users = _wrapped(inner.users, self, "users", _Users)
        self.sessions = _wrapped(inner.sessions, self, "sessions", _Sessions)
        self.members = _wrapped(inner.members, self, "members", _Members)
        for store in STORES.keys() - {"users", "sessions", "members"}:
            setattr(self, store, _wrapped(getattr(inner, store), self, store))
        bus.start(self._heard, self._reset)

    def __getattr__(self, name: str) -> Any:
        # What the wrapped storage offers beyond the Storage interface (its reader, its
        # pool statistics) stays reachable.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def keeps(self, effect) -> bool:
        """Whether a read declared ``effect`` is kept (in :attr:`reads`) under this bus."""
        return effect.kept and (self.caches_everything or (effect.with_user_records and self.keeps_user_pages))

    def follows(self, topic: str | None) -> bool:
        """Whether a write of ``topic`` is announced: the storage cache's topics, but
        :data:`~locky.cache.declared.USER_PAGES` only where pages of users are kept (a
        bus that keeps sessions would wait on every host for a registration otherwise)."""
        return topic in STORAGE_CACHE.topics and (topic != USER_PAGES or self.keeps_user_pages)

    # -- invalidation ------------------------------------------------------------

    @contextmanager
    def changing(self, what: str):
        """Around a write of ``inner`` that changes ``what``."""
        try:
            with self.bus.changing(what, self._heard):
                yield
        finally:
            request_wrote()

    def cached(self, key, read: Callable[[Any], Any], argument):
        """``read(argument)`` from the cache under ``key``, else from storage (kept when
        found: what is missing now may be created later). A session is kept as
        ``(session, user)``; records and sessions carry their user's tags."""
        return kept(self.cache, key, lambda: read(argument),
                    lambda found: {"tags": user_tags(found[1] if isinstance(found, tuple) else found)})

    def read(self, what: tuple[str, str], read: Callable[..., Any], *args, **kwargs):
        """``read(*args, **kwargs)`` (the record store read ``what``: its store and method)
        from :attr:`reads`, else from storage (kept unless ``None``). A page comes with a
        list of its own; its records (and documents) are shared with the cache, for
        reading only."""
        key = (what, args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:  # an argument that cannot be a key (a list of values, say)
            return read(*args, **kwargs)
        found = kept(self.reads, key, lambda: read(*args, **kwargs),
                     lambda found: {"weight": len(found.items) + 1 if isinstance(found, Page) else 1})
        return Page(list(found.items), found.next_after_id) if isinstance(found, Page) else found

    def _heard(self, what: str) -> None:
        if self.caches_everything:  # any announcement: a page or count may hold what it names
            self.reads.clear()
        elif self.keeps_user_pages and not what.startswith((SESSION, REVISION, MEMBERS)):
            self.reads.clear()  # a user, every user, or a new one: what pages of users hold
        if what == USER_PAGES:
            return  # a new user: no record, session or role kept names it yet
        if what.startswith(SESSION):
            self.cache.drop(what)
        elif what.startswith((USER_ID, USER_UUID)):
            self.cache.drop_tag(what)
            self.cache.drop_tag(MEMBERS)  # a user's delete ends its memberships
        elif what == MEMBERS:
            self.cache.drop_tag(MEMBERS)
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
        in_block = _IN_BLOCK.set(True)
        try:
            with self.bus.batch(self._heard), self.inner.atomic():
                yield
        finally:
            _IN_BLOCK.reset(in_block)
            request_wrote()

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
