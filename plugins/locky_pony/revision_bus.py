"""The cache revision as the change bus of the storage cache (``LOCKY_AUTH_CACHE=revision``,
the default on PostgreSQL and MySQL/MariaDB): each worker serves user records (the reads
by id and by uuid), pages and counts of users (``list``, ``list_documents``, ``count``)
and the roles users hold in groups (``role_of``, ``roles_in``) from memory, and every
host sees a change to one on its very next request, with no connection, thread or
message of its own.

The statement that authenticates a request (the session with its user and the policy
revision: one round trip, as without a cache) reads one more number with them: the
*cache revision* in ``locky_meta``, which every change to a user's record or to a
membership, and every new user, moves inside its own transaction
(:func:`.stores.move_cache_revision`): the writes that :mod:`locky.cache.declared`
declares with a user's topic, sessions aside, with the memberships' or with the pages
of users' (``tests/test_cache_declarations.py`` holds the stores to it). Sessions and
the policy revision are still read on every request; what the cache saves is the read
of the record an item read then asks for, of the page or count a list of users asks
for, and of the membership a group-scoped check asks for: each costs one round trip
instead of two.

Why a cached record is never served after a change that replaced it was answered:

- *Read with the session.* A request may use the cache only after its authentication
  read the number (:meth:`RevisionBus.observe`), and only while the number it read is
  the one the cache holds values for. A change commits before it is answered, so a
  request that starts after the answer reads the moved number.
- *A moved number empties the cache first.* The first request to read a new number
  empties the cache before the number is taken as the cache's: no request that read the
  new number can be served a value kept under the old one, and a request that read the
  old one (it began before the change) no longer uses the cache once the new one is in.
- *Nothing read before a change is kept after it.* A value read from storage is kept
  only if no emptying happened since the read began (:meth:`locky.cache.storage.Cache.put`).
- *A request's own writes.* After a write through the cache the request reads through.
- *Nothing uncommitted.* Inside a transaction the cache is neither used nor told.

Writes made by hand in SQL do not move the number: a record changed that way (or a page
or count of users) is served from a worker's memory for at most ``max_age`` seconds (10
by default). Sessions and
policy changes made by hand are seen at once: they are read on every request.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable

from locky.storage import Freshness, Keeps, current_request

from .compat import in_db_session


class RevisionBus:
    """The change bus of :mod:`locky.cache` over the cache revision that every
    authentication reads (see the module docstring)."""

    #: Only user records come from the cache: the session and the policy revision are
    #: what every request reads to learn the number.
    keeps = Keeps.USER_RECORDS
    #: The number is read with every request's session.
    freshness = Freshness.NEXT_REQUEST

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        #: The number the cached values were read under (``None``: none read yet).
        self._current: int | None = None
        self._reset: Callable[[], None] = lambda: None

    def start(self, on_change: Callable[[str], None], on_reset: Callable[[], None]) -> None:
        self._reset = on_reset

    def observe(self, revision: int) -> None:
        """This request's authentication read ``revision``."""
        if in_db_session():
            return  # read inside a transaction: it may see the transaction's own change
        request = current_request()
        if request is None:
            return  # outside requests the cache is not used
        if revision != self._current:
            with self._lock:
                if revision != self._current:
                    self._reset()  # before the number is the cache's: see the module docstring
                    self._current = revision
        local = self._local
        local.request, local.revision = request, revision

    def fresh(self) -> bool:
        if in_db_session():
            return False
        local = self._local
        request = current_request()
        return (request is not None and getattr(local, "request", None) is request
                and local.revision == self._current)

    fresh_to_store = fresh

    @contextmanager
    def changing(self, what: str, drop_here: Callable[[str], None]):
        # The write moves the number in its own transaction (the stores do it); this
        # process drops what it names at once. The request has a new marker after it
        # (locky.cache.storage.CachingStorage.changing): it reads through from now on.
        try:
            yield
        finally:
            drop_here(what)

    @contextmanager
    def batch(self, drop_here: Callable[[str], None]):
        yield

    def close(self) -> None:
        pass
