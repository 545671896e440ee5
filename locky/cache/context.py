"""What the storage cache and a storage learn from the request being served: its marker
(a bus may check freshness once per request), whether a read fills a cache, and whether
its caller can take an answer from a read replica."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["FILLING", "current_request", "filling", "request_ended", "request_started", "request_wrote", "stale_ok",
           "stale_reads"]

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


def request_wrote() -> None:
    """The request being served wrote through a cache: it gets a new marker, so that a
    bus answering from the request's first check checks again."""
    if _request.get() is not None:
        _request.set(object())


#: Whether the read being made in this context fills a cache (:func:`filling`): set
#: around such a read by the storage cache (:func:`locky.cache.storage.kept`).
FILLING: ContextVar[bool] = ContextVar("locky_cache_filling", default=False)


def filling() -> bool:
    """Whether the read being made will be kept by a cache: a storage must then answer
    it from the primary, never from a read replica, whose lag the cache would keep past
    the replica's own bound (:mod:`locky_pony.reader`)."""
    return FILLING.get()


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
    return _stale_ok.get() and not FILLING.get()
