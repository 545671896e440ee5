"""Transactions of the Pony backend, and database failures turned into Locky's errors.

Every storage method runs in :func:`transaction`: one ``db_session`` (one database
transaction), run again when the database says that is safe (a deadlock, a
serialization failure, a connection that broke before the commit), and never letting a
driver exception out. A broken unique key becomes the contract's ``Conflict`` (a 400);
a database that refuses writes (its disk is full, it is read-only) becomes
``WritesRefused`` (a 503 saying which) and is remembered for health
(:func:`writes_refused`); anything else is logged and becomes ``Unavailable`` (a 503
whose body carries no driver text). The plain-SQL reader (:mod:`.reader`) classifies
and reports its failures with the same :func:`classify` and :func:`unavailable`.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable

from pony.orm import (CacheIndexError, CommitException, ConnectionClosedError, DBException, IsolationError,
                      OrmError, RollbackException, TransactionIntegrityError, db_session)

from locky import Conflict, LockyError, Unavailable
from locky.storage import WritesRefused

from .compat import PartialCommitException, in_db_session, session_databases
from .deadline import WATCHDOG

log = logging.getLogger("locky.storage")

CONFLICT, TRANSIENT, LOST, BROKEN = "conflict", "transient", "lost", "broken"
#: The database answers but keeps no change: its disk (or a quota) is full, or it is
#: read-only. Not run again: the next try fails the same way until an operator acts.
FULL, READ_ONLY = "full", "read-only"

#: PostgreSQL SQLSTATEs after which the whole transaction may simply run again.
PG_TRANSIENT = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available
#: PostgreSQL SQLSTATEs of a server that went away or is not accepting connections yet.
PG_LOST = {None, "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"}
#: MySQL/MariaDB error numbers: deadlock, lock wait timeout.
MYSQL_TRANSIENT = {1213, 1205}
#: MySQL/MariaDB client errors: can't connect, server gone away, lost connection, ...
MYSQL_LOST = {2002, 2003, 2005, 2006, 2013, 2055, 1927, 1053, 1077, 1078, 1079, 1080}
#: PostgreSQL disk_full; read_only_sql_transaction (a standby, or a server set read-only).
PG_FULL = {"53100"}
PG_READ_ONLY = "25006"
#: MariaDB/MySQL: ER_DISK_FULL, ER_RECORD_FILE_FULL (table or tablespace full); an
#: error writing a file (3) or from the engine (1030) is "full" when it says errno 28.
#: ER_OPTION_PREVENTS_STATEMENT (1290, with --read-only), ER_CANT_EXECUTE_IN_READ_ONLY_
#: TRANSACTION, ER_READ_ONLY_MODE (InnoDB read-only).
MYSQL_FULL = {1021, 1114}
MYSQL_NO_SPACE = "no space left on device"
MYSQL_READ_ONLY = {1290, 1792, 1836}
#: SQLite's primary result codes SQLITE_READONLY and SQLITE_FULL (the extended codes
#: keep them in their low byte).
SQLITE_READONLY, SQLITE_FULL = 8, 13

#: Seconds after its start within which a failed call may still run again (see ``quick``).
RETRY_WINDOW = 1.0

#: The databases the current call's session used (set as the session ends).
_SESSION_DATABASES: ContextVar[tuple] = ContextVar("locky_session_databases", default=())

#: What the caller wants run at the end of every storage call's transaction, before it
#: commits (see :func:`before_commit`).
_BEFORE_COMMIT: ContextVar[tuple[Callable[[], None], ...]] = ContextVar("locky_before_commit", default=())

_WRAPPERS = (CommitException, PartialCommitException, RollbackException)


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
    if isinstance(exc, (CacheIndexError, TransactionIntegrityError)):
        return CONFLICT
    if isinstance(exc, ConnectionClosedError):
        return LOST
    root = root_cause(exc)
    if isinstance(root, IsolationError):
        # Pony's optimistic check: another transaction changed the row first (an update
        # racing a delete); nothing was written, and the retry sees the other's result.
        return TRANSIENT
    names = _names(root)
    if "IntegrityError" in names:
        return CONFLICT
    if isinstance(exc, IsolationError):  # the same check, wrapped around another cause
        return TRANSIENT
    module = type(root).__module__ or ""
    if module.startswith("psycopg2"):
        code = getattr(root, "pgcode", None)
        if code in PG_FULL:
            return FULL
        if code == PG_READ_ONLY:
            return READ_ONLY
        if code in PG_TRANSIENT:
            return TRANSIENT
        if "InterfaceError" in names or ("OperationalError" in names and code in PG_LOST):
            return LOST
        if code and code.startswith("08"):
            return LOST
        return BROKEN
    if module.startswith("pymysql"):
        number = root.args[0] if root.args and isinstance(root.args[0], int) else None
        if number in MYSQL_FULL or MYSQL_NO_SPACE in str(root).lower():
            return FULL
        if number in MYSQL_READ_ONLY and (number != 1290 or "read" in str(root).lower()):
            return READ_ONLY
        if number in MYSQL_TRANSIENT:
            return TRANSIENT
        if number in MYSQL_LOST or "InterfaceError" in names:
            return LOST
        return BROKEN
    if module.startswith("sqlite3"):
        text = str(root).lower()
        code = getattr(root, "sqlite_errorcode", None)  # Python 3.11+
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == SQLITE_FULL or "database or disk is full" in text:
            return FULL
        if primary == SQLITE_READONLY or "readonly database" in text:
            return READ_ONLY
        if "locked" in text or "busy" in text:
            return TRANSIENT
        return BROKEN
    if isinstance(root, (ConnectionError, TimeoutError)):
        return LOST
    return BROKEN


def from_database(exc: BaseException) -> bool:
    """Whether ``exc`` came from Pony or a database driver (not from code of Locky's own
    running inside a transaction)."""
    if isinstance(exc, (OrmError, DBException)):
        return True
    module = type(root_cause(exc)).__module__ or ""
    return module.startswith(("psycopg2", "pymysql", "sqlite3", "pony"))


def _may_run_again(exc: BaseException, kind: str) -> bool:
    if kind == TRANSIENT:
        return True
    # A connection lost during the commit may have committed: running a write again
    # could apply it twice. Lost anywhere before that, the server rolled it back.
    return kind == LOST and not isinstance(exc, (CommitException, PartialCommitException))


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
        try:
            result = method(*args, **kwargs)
            for hook in _BEFORE_COMMIT.get():
                hook()
            return result
        finally:
            # The databases this session used: the one a refused commit belongs to.
            _SESSION_DATABASES.set(session_databases())

    session = db_session(body)

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        # Inside a caller's db_session (a batch) this is no transaction of its own:
        # nothing to run again.
        attempts = 1 if in_db_session() else retries + 1
        started = time.monotonic()
        for attempt in range(attempts):
            _SESSION_DATABASES.set(())
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
                    databases = _SESSION_DATABASES.get()
                    raise unavailable(method.__qualname__, exc, kind,
                                      database=databases[0] if databases else None) from None
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


#: What a client is told when the database keeps no change (no driver text).
REFUSAL_DESCRIPTIONS = {
    FULL: "The database's disk is full: changes cannot be saved until an operator frees space."
          " Reading still works.",
    READ_ONLY: "The database is read-only: changes cannot be saved until an operator makes it"
               " writable again. Reading still works.",
}
#: What the operator is told, in the log.
_REFUSAL_LOG = {
    FULL: "the database's disk (or a quota or table size limit) is full: free space",
    READ_ONLY: "the database refuses writes (read-only): a read-only file, file system or server."
               " Does LOCKY_DATABASE_URL name a standby? It must name the primary; standbys go in"
               " LOCKY_DATABASE_REPLICA_URLS",
}


#: How many statements of this process failed for want of the database (each
#: :func:`unavailable`): an answer of the database kept since (health's, :mod:`.liveness`)
#: is not trusted once this moved.
_failures = 0


def failures() -> int:
    """The count of :func:`unavailable` failures in this process so far."""
    return _failures


def unavailable(where: str, exc: BaseException, kind: str, *, database=None) -> Unavailable:
    """Log the driver's failure in ``where`` (for the operator) and return the
    ``Unavailable`` to raise (for the client: no driver text). A refused write
    (``full``, ``read-only``) is :class:`WritesRefused`, saying which, and is remembered
    for ``database`` (the Pony ``Database``) so that health reports it."""
    global _failures
    _failures += 1
    root = root_cause(exc)
    if kind in REFUSAL_DESCRIPTIONS:
        log.error("storage refuses writes in %s: %s (%s: %s)", where, _REFUSAL_LOG[kind], type(root).__name__,
                  first_line(root))
        if database is not None:
            _refusal_of(database).failed(kind)
        return WritesRefused(REFUSAL_DESCRIPTIONS[kind])
    log.warning("storage unavailable in %s (%s): %s: %s", where, kind, type(root).__name__, first_line(root))
    return Unavailable()


# -- writes refused: what health reports ------------------------------------------------

#: Seconds between two probe writes of a database that refused a write (per database
#: and process): health asks whether the operator fixed it at most this often.
PROBE_INTERVAL = 5.0
#: The probe: one transaction that moves a number and puts it back. What it commits
#: changes nothing Locky reads, yet every engine must write it: SQLite skips writing a
#: row updated to the very bytes it holds (so ``SET number = number`` would not find a
#: full disk), while a row changed and changed back leaves its page to write.
PROBE_STATEMENTS = ("UPDATE locky_meta SET number = number + 1 WHERE {key} = 'policy_revision'",
                    "UPDATE locky_meta SET number = number - 1 WHERE {key} = 'policy_revision'")


@dataclass
class _Refusal:
    """Whether a database refused writes, for one process: the kind of the last refused
    write (``None``: none since the last probe that wrote) and when it was last probed."""

    kind: str | None = None
    probed: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def failed(self, kind: str) -> None:
        with self.lock:
            self.kind = kind
            self.probed = time.monotonic()  # a write just failed: no probe for a while


#: Per Pony ``Database``: each app has its own, so apps share nothing here.
_REFUSALS: "weakref.WeakKeyDictionary[object, _Refusal]" = weakref.WeakKeyDictionary()
_REFUSALS_LOCK = threading.Lock()


def _refusal_of(database) -> _Refusal:
    with _REFUSALS_LOCK:
        refusal = _REFUSALS.get(database)
        if refusal is None:
            refusal = _REFUSALS[database] = _Refusal()
        return refusal


def writes_refused(database) -> str | None:
    """``full`` or ``read-only`` while ``database`` refuses writes, else ``None``.

    Nothing is written while writes work: a write refused by the database (any storage
    call's) is remembered; from then on this runs a small probe write at most every
    :data:`PROBE_INTERVAL` seconds, and the first that succeeds forgets the refusal.
    """
    refusal = _REFUSALS.get(database)
    if refusal is None or refusal.kind is None:
        return None
    with refusal.lock:
        if refusal.kind is None or time.monotonic() - refusal.probed < PROBE_INTERVAL:
            return refusal.kind
        refusal.probed = time.monotonic()
    try:
        key = database.provider.quote_name("key")  # a reserved word on MariaDB
        with WATCHDOG.call(), db_session:
            for statement in PROBE_STATEMENTS:
                database.execute(statement.format(key=key))
    except Exception as exc:
        kind = classify(exc)
        if kind in REFUSAL_DESCRIPTIONS:
            refusal.failed(kind)
        return refusal.kind  # otherwise (a lock, a lost connection): not known to work yet
    with refusal.lock:
        refusal.kind = None
    log.warning("storage accepts writes again (a probe write succeeded)")
    return None


@contextmanager
def integrity_errors(conflict: Conflict):
    """Raise ``conflict`` when the block breaks a unique key (a flush inside it)."""
    try:
        yield
    except Exception as exc:
        if classify(exc) == CONFLICT:
            raise conflict from None
        raise


def first_line(exc: BaseException, limit: int | None = 200) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters: what a log line
    or an operator's message quotes of a driver's error."""
    return (str(exc).strip().splitlines() or [""])[0][:limit]
