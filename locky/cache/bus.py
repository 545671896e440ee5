"""The change bus: how the processes sharing a database tell each other what changed,
and what each bus lets the storage cache keep (its declared capabilities).

A bus states what it is able to promise as two class-level constants, read by
:class:`locky.cache.storage.CachingStorage` (never probed): :attr:`ChangeBus.keeps`,
which reads the cache may serve under it, and :attr:`ChangeBus.freshness`, how soon a
write answered on one host stops being served from memory on every other.
"""

from __future__ import annotations

import enum
import threading
from contextlib import AbstractContextManager
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

__all__ = ["ChangeBus", "Freshness", "Keeps", "keep_listening"]


class Keeps(enum.Enum):
    """Which reads the storage cache may serve from memory under a bus."""

    #: The caller's session with its user, the policy revision, and user records by id
    #: and uuid: the bus hears every announced write (``LISTEN/NOTIFY``, Redis).
    SESSIONS = "sessions, the policy revision and user records"
    #: User records, and the pages and counts of users (and, as under every bus, the
    #: roles users hold in groups): the bus learns whether the cache may be used from
    #: the session read itself, so sessions and the policy revision are always read (the
    #: revision bus, which every write of a user, a new one included, moves).
    USER_RECORDS = "user records, their pages and counts"
    #: Everything :attr:`SESSIONS` keeps and every record read (by id and uuid, pages,
    #: counts): the bus sees every commit, whatever it changed and whoever made it
    #: (SQLite's data version).
    EVERY_READ = "every record read, lists and counts included"


class Freshness(enum.Enum):
    """How soon, after a write was answered, no host serves what it replaced."""

    #: The write returns once every host has dropped it, or could no longer serve it.
    AT_ONCE = "at once across hosts"
    #: Every request checks before it uses the cache: the next request sees the write.
    NEXT_REQUEST = "checked in every request"
    #: Every host drops it within the bus's ``max_staleness``.
    BOUNDED = "within a bounded staleness"


@runtime_checkable
class ChangeBus(Protocol):
    """How the processes sharing a database tell each other what changed.

    What is announced is one of the topics of :mod:`locky.cache.declared` (a name, never
    a new value): the writes that announce which are declared there, once."""

    #: Which reads the cache may keep under this bus.
    keeps: ClassVar[Keeps]
    #: What the bus promises about a write answered on another host.
    freshness: ClassVar[Freshness]

    def start(self, on_change: Callable[[str], None], on_reset: Callable[[], None]) -> None:
        """Begin listening: ``on_change(what)`` for every announcement (this process's
        own included), ``on_reset()`` whenever announcements may have been missed."""

    def fresh(self) -> bool:
        """Whether cached values may be served now (the bus is caught up). It may call
        ``on_reset`` first; it is never called with the cache's lock held. Within one
        request (:func:`locky.cache.context.current_request`) it may answer from its
        first check: after a write through :meth:`changing` or :meth:`batch` the request
        has a new marker."""

    def fresh_to_store(self) -> bool:
        """:meth:`fresh`, asked before a value read from storage is kept; it always
        checks (a bus that does not answer :meth:`fresh` from a request's first check
        makes it :meth:`fresh` itself)."""

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
