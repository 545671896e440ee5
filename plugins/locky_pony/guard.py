"""Transactions of the Pony backend, and database failures turned into Locky's errors.

Every storage method runs in :func:`transaction`: one ``db_session`` (one database
transaction), run again when the database says that is safe (a deadlock, a
serialization failure, a connection that broke before the commit), and never letting a
driver exception out. A broken unique key becomes the contract's ``Conflict`` (a 400);
anything else is logged and becomes ``Unavailable`` (a 503 whose body carries no driver
text). The plain-SQL reader (:mod:`.reader`) classifies and reports its failures with
the same :func:`classify` and :func:`unavailable`.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable

from pony.orm import core, db_session

from locky.errors import Conflict, LockyError, Unavailable

from .deadline import WATCHDOG

log = logging.getLogger("locky.storage")

CONFLICT, TRANSIENT, LOST, BROKEN = "conflict", "transient", "lost", "broken"

#: PostgreSQL SQLSTATEs after which the whole transaction may simply run again.
PG_TRANSIENT = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available
#: PostgreSQL SQLSTATEs of a server that went away or is not accepting connections yet.
PG_LOST = {None, "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"}
#: MySQL/MariaDB error numbers: deadlock, lock wait timeout.
MYSQL_TRANSIENT = {1213, 1205}
#: MySQL/MariaDB client errors: can't connect, server gone away, lost connection, ...
MYSQL_LOST = {2002, 2003, 2005, 2006, 2013, 2055, 1927, 1053, 1077, 1078, 1079, 1080}

#: Seconds after its start within which a failed call may still run again (see ``quick``).
RETRY_WINDOW = 1.0

#: What the caller wants run at the end of every storage call's transaction, before it
#: commits (see :func:`before_commit`).
_BEFORE_COMMIT: ContextVar[tuple[Callable[[], None], ...]] = ContextVar("locky_before_commit", default=())

_WRAPPERS = (core.CommitException, core.PartialCommitException, core.RollbackException)


def root_cause(exc: BaseException) -> BaseException:
    """The driver's exception under Pony's wrappers."""
    for _ in range(5):
        if isinstance(exc, _WRAPPERS) and exc.exceptions:
            exc = exc.exceptions[0][1]
        elif getattr(exc, "original_exc", None) is not None:
            exc = exc.original_exc
        else:
            break
    return exc


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def classify(exc: BaseException) -> str:
    """``conflict``, ``transient`` (run the transaction again), ``lost`` (the connection
    broke) or ``broken`` (anything else)."""
    if isinstance(exc, (core.CacheIndexError, core.TransactionIntegrityError)):
        return CONFLICT
    if isinstance(exc, core.ConnectionClosedError):
        return LOST
    root = root_cause(exc)
    if isinstance(root, core.IsolationError):
        # Pony's optimistic check: another transaction changed the row first (an update
        # racing a delete); nothing was written, and the retry sees the other's result.
        return TRANSIENT
    names = _names(root)
    if "IntegrityError" in names:
        return CONFLICT
    if isinstance(exc, core.IsolationError):  # the same check, wrapped around another cause
        return TRANSIENT
    module = type(root).__module__ or ""
    if module.startswith("psycopg2"):
        code = getattr(root, "pgcode", None)
        if code in PG_TRANSIENT:
            return TRANSIENT
        if "InterfaceError" in names or ("OperationalError" in names and code in PG_LOST):
            return LOST
        if code and code.startswith("08"):
            return LOST
        return BROKEN
    if module.startswith("pymysql"):
        number = root.args[0] if root.args and isinstance(root.args[0], int) else None
        if number in MYSQL_TRANSIENT:
            return TRANSIENT
        if number in MYSQL_LOST or "InterfaceError" in names:
            return LOST
        return BROKEN
    if module.startswith("sqlite3"):
        text = str(root).lower()
        if "locked" in text or "busy" in text:
            return TRANSIENT
        return BROKEN
    if isinstance(root, (ConnectionError, TimeoutError)):
        return LOST
    return BROKEN


def from_database(exc: BaseException) -> bool:
    """Whether ``exc`` came from Pony or a database driver (not from code of Locky's own
    running inside a transaction)."""
    if isinstance(exc, (core.OrmError, core.DBException)):
        return True
    module = type(root_cause(exc)).__module__ or ""
    return module.startswith(("psycopg2", "pymysql", "sqlite3", "pony"))


def _may_run_again(exc: BaseException, kind: str) -> bool:
    if kind == TRANSIENT:
        return True
    # A connection lost during the commit may have committed: running a write again
    # could apply it twice. Lost anywhere before that, the server rolled it back.
    return kind == LOST and not isinstance(exc, (core.CommitException, core.PartialCommitException))


def transaction(method: Callable | None = None, *, retries: int = 3, conflict: Conflict | None = None,
                retry_conflicts: bool = False):
    """Run ``method`` as one ``db_session``, mapping failures to Locky's errors.

    ``conflict`` is raised for a broken unique key that the method did not map itself
    (default: a generic ``Conflict("request")``); ``retry_conflicts`` runs the method
    again instead (for insert-or-update methods whose retry finds the other row).
    """
    if method is None:
        return functools.partial(transaction, retries=retries, conflict=conflict,
                                 retry_conflicts=retry_conflicts)
    @functools.wraps(method)
    def body(*args, **kwargs):
        result = method(*args, **kwargs)
        for hook in _BEFORE_COMMIT.get():
            hook()
        return result

    session = db_session(body)

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        # Inside a caller's db_session (a batch) this is no transaction of its own:
        # nothing to run again.
        attempts = 1 if core.local.db_session is not None else retries + 1
        started = time.monotonic()
        for attempt in range(attempts):
            try:
                with WATCHDOG.call():
                    return session(*args, **kwargs)
            except (LockyError, ValueError, TypeError):
                raise
            except Exception as exc:
                kind = classify(exc)
                last = attempt == attempts - 1
                if kind == CONFLICT and not (retry_conflicts and not last):
                    log.info("unique key conflict in %s", method.__qualname__)
                    raise (conflict or Conflict("request", "Conflicts with a concurrent change; try again.")) from None
                if last or not quick(started) or not (kind == CONFLICT or _may_run_again(exc, kind)):
                    raise unavailable(method.__qualname__, exc, kind) from None
                log.info("running %s again after a %s error (%s)", method.__qualname__, kind,
                         type(root_cause(exc)).__name__)
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    wrapper.retries = retries
    return wrapper


@contextmanager
def before_commit(hook: Callable[[], None]):
    """Within the block, every storage call of this thread (or task) runs ``hook()``
    inside its transaction, after the call's own statements and before the commit,
    and again on each retry: what it writes commits with the call or not at all. The
    change bus (:mod:`.notify`) announces a write this way."""
    token = _BEFORE_COMMIT.set(_BEFORE_COMMIT.get() + (hook,))
    try:
        yield
    finally:
        _BEFORE_COMMIT.reset(token)


def quick(started: float) -> bool:
    """Whether a failed call may run again: only a failure that came quickly (a deadlock,
    a connection found broken). One that came after waiting out a timeout answers 503
    now rather than waiting again, so a call never takes much over ``LOCKY_DB_TIMEOUT``."""
    return time.monotonic() - started < RETRY_WINDOW


#: PostgreSQL's "cannot execute ... in a read-only transaction": a standby (or a server
#: set read-only) where the primary was expected.
PG_READ_ONLY = "25006"


def unavailable(where: str, exc: BaseException, kind: str) -> Unavailable:
    """Log the driver's failure in ``where`` (for the operator) and return the
    ``Unavailable`` to raise (for the client: no driver text)."""
    root = root_cause(exc)
    if getattr(root, "pgcode", None) == PG_READ_ONLY:
        log.error("storage unavailable in %s: the database refuses writes (read-only). Does"
                  " LOCKY_DATABASE_URL name a standby? It must name the primary; standbys go in"
                  " LOCKY_DATABASE_REPLICA_URLS", where)
        return Unavailable()
    log.warning("storage unavailable in %s (%s): %s: %s", where, kind, type(root).__name__, _first_line(root))
    return Unavailable()


@contextmanager
def integrity_errors(conflict: Conflict):
    """Raise ``conflict`` when the block breaks a unique key (a flush inside it)."""
    try:
        yield
    except Exception as exc:
        if classify(exc) == CONFLICT:
            raise conflict from None
        raise


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]
