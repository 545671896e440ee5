"""Where and how a plain-SQL read of the Pony backend runs: the connection it uses.

A read is one SELECT (written by :mod:`.reads`). It runs:

- inside a caller's ``db_session`` (a batch of storage calls): on that session's own
  connection through ``db.select``, after flushing the session's pending changes, so it
  sees the batch's uncommitted writes;
- otherwise, on PostgreSQL and MySQL/MariaDB: on a connection borrowed from the
  process's bounded pool (:mod:`.pool`, shared with Pony's transactions) for one
  statement. PostgreSQL runs it in autocommit (psycopg2 switches that on the client, with
  no round trip): one round trip, no transaction to begin or end. MySQL/MariaDB runs it
  in autocommit too: PyMySQL sends ``SET AUTOCOMMIT`` only when a connection's mode
  differs, so reads on a connection that last served a read cost one round trip (in
  transaction mode each SELECT opened a transaction that a ROLLBACK had to end); the pool
  puts a connection back in transaction mode before Pony's transactions get it;
- otherwise, on SQLite files: on a private autocommit connection (one per process and
  thread, opened lazily, so after a fork): no server to exhaust;
- otherwise (SQLite in memory): through ``db.select`` in a :func:`~.guard.transaction`.

Nothing else session-level is ever set on a connection (no other ``SET``, no read-only
session).

On MySQL/MariaDB and PostgreSQL a statement that selects a record's columns selects
them packed into one JSON array instead (``JSON_ARRAY(...)``; ``json_build_array(...)``
as text), :meth:`Reader.statement` with ``packed``; the rows come back as lists. The
drivers turn every column of an answer into Python in Python: PyMySQL reads each
column's description and each value, ~4 µs a column of a row; psycopg2 decodes each
column's name through the codec's Python function and builds its description, ~110,000
instructions for the 24 columns of the authentication read against ~37,000 packed. One
JSON text per row, decoded by orjson, costs a fraction of that (docs/benchmarks.md).
Straight to PostgreSQL (``LOCKY_DATABASE_POOLER=none``, the default, or ``session``) each pooled
connection prepares a statement on the server the first time it runs it (SQL
``PREPARE``/``EXECUTE``: parsed and planned once per connection, ~20 % more reads per
second than planning each time). A statement's name is derived from its text, so one
name means one SQL text everywhere. Behind a transaction-pooling PgBouncer
(``LOCKY_DATABASE_POOLER=transaction``) one server connection serves many clients in
turn: a prepared statement would vanish under us or meet its twin, so statements run
plain. A transaction pooler nobody told Locky about is found the first time a statement
this connection prepared is missing from the server session that runs the ``EXECUTE``
(nothing else drops one: Locky never sends ``DEALLOCATE`` or ``DISCARD``): the process
then stops preparing, runs that statement plain, and logs a warning once.

Failures map to Locky's errors as :mod:`.guard` does: a lost connection or a transient
error is tried again on a new connection; the rest is ``Unavailable`` with no driver text.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import weakref
from typing import NamedTuple

import orjson
from locky.storage import stale_ok as caller_takes_stale

from . import compat
from .deadline import WATCHDOG
from .guard import LOST, TRANSIENT, classify, quick, root_cause, transaction, unavailable
from .pool import BoundedPool, PoolTimeout
from .replicas import PRIMARY_POSITION_SQL, Replicas

#: PostgreSQL SQLSTATEs meaning the connection's prepared statements are not what this
#: reader recorded: "does not exist" (dropped by ``DISCARD ALL`` or ``DEALLOCATE``) and
#: "already exists" (prepared on this server session by someone else, with the same
#: text since the name is derived from it).
PG_NOT_PREPARED, PG_ALREADY_PREPARED = "26000", "42P05"
ATTEMPTS = 3
#: A row's columns as one JSON array, per dialect whose reads pack them; on PostgreSQL as
#: text, whatever JSON typecaster psycopg2 has been given.
PACKED_SELECT_LIST = {"MySQL": "JSON_ARRAY({})", "PostgreSQL": "json_build_array({})::text"}
#: Every row's packed columns in one JSON array, the answer's one value (``NULL`` for no
#: row), for the reads of many narrow rows (:meth:`Reader.many_rows`). PyMySQL handles
#: each row of an answer in Python (~2.4 µs a row, packed or not); psycopg2 in C, where
#: one value saves nothing (measured: docs/benchmarks.md).
AGGREGATED_SELECT_LIST = {"MySQL": "JSON_ARRAYAGG(JSON_ARRAY({}))"}

log = logging.getLogger("locky.storage")


class Statement(NamedTuple):
    """One SELECT in the forms the connections run."""

    #: For ``db.select``: parameters written ``$p0``, ``$p1``, ...
    pony: str
    #: For a driver connection: the SQL with the driver's placeholders.
    direct: str
    #: PostgreSQL with prepared statements: the name, ``PREPARE`` and ``EXECUTE`` texts.
    name: str = ""
    prepare: str = ""
    execute: str = ""
    #: The select list is one JSON array of the columns (MySQL/MariaDB, PostgreSQL): each row
    #: is decoded into the list of their values.
    packed: bool = False
    #: The answer is one value, a JSON array of every row's packed columns (``NULL``: no
    #: row); ``plain`` is the same statement with a row per row, run when MariaDB cut the
    #: array short (``group_concat_max_len``).
    aggregated: bool = False
    plain: "Statement | None" = None


class Reader:
    """Runs one SELECT and returns its rows as tuples."""

    def __init__(self, db, bind: dict | None, *, prepare: bool = True, replicas: Replicas | None = None):
        self.db = db
        #: Read replicas for the reads that may be a little stale (``stale_ok``).
        self.replicas = replicas
        self.dialect = db.provider.dialect
        pool = compat.pool_of(db)
        self.pool = pool if isinstance(pool, BoundedPool) else None
        self.direct = None
        bind = dict(bind or {})
        if self.pool is not None:
            self.direct = "postgres" if self.dialect == "PostgreSQL" else "mysql"
        elif bind.get("provider") == "sqlite" and bind.get("filename") not in (None, ":memory:", ":sharedmemory:"):
            self.direct = "sqlite"
            self.connect_args = {"database": bind["filename"], "timeout": bind.get("timeout", 5)}
        #: Whether PostgreSQL reads use server-side prepared statements.
        self.prepare = prepare and self.direct == "postgres"
        #: Whether statements selecting many columns select them as one JSON array.
        self.packs_rows = self.dialect in PACKED_SELECT_LIST
        #: The statement names prepared on each pooled connection.
        self._prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.local = threading.local()
        self._in_transaction = transaction(self._pony_select)
        #: The primary's WAL position, read to measure a replica's lag (:mod:`.replicas`).
        self._primary_position = self.statement(PRIMARY_POSITION_SQL) if replicas is not None else None

    def select_list(self, columns: str) -> str:
        """A statement's select list of ``columns`` (SQL, comma-separated), packed when
        this reader packs rows; the statement is then made with ``packed=True``."""
        packed = PACKED_SELECT_LIST.get(self.dialect)
        return columns if packed is None else packed.format(columns)

    def many_rows(self, columns: str, sql: str) -> Statement:
        """A statement that selects a few narrow ``columns`` of many rows: ``sql`` written
        with ``{}`` for the select list and then for each parameter. On MySQL/MariaDB every
        row comes in the answer's one value (:data:`AGGREGATED_SELECT_LIST`): PyMySQL reads
        one row, not hundreds. (Wide rows cost the server more to aggregate than the
        client saves: a page of records keeps a row per record.) :meth:`select` returns
        the rows either way."""
        plain = self.statement(sql.replace("{}", self.select_list(columns), 1), packed=True)
        aggregated = AGGREGATED_SELECT_LIST.get(self.dialect)
        if aggregated is None:
            return plain
        whole = self.statement(sql.replace("{}", aggregated.format(columns), 1))
        return whole._replace(aggregated=True, plain=plain)

    def statement(self, sql: str, *, packed: bool = False) -> Statement:
        """``sql``, written with ``{}`` for each positional parameter, in every form;
        ``packed`` when its select list came from :meth:`select_list`."""
        packed = packed and self.packs_rows
        count = sql.count("{}")
        placeholder = "?" if self.direct == "sqlite" else "%s"
        # Pony reads ``$`` as a parameter's start: a ``$`` of the statement itself (a
        # JSON path) is written ``$$`` in its form.
        pony = sql.replace("$", "$$").format(*[f"$p{i}" for i in range(count)])
        direct = sql.format(*[placeholder] * count)
        if not self.prepare:
            return Statement(pony, direct, packed=packed)
        text = sql.format(*[f"${i + 1}" for i in range(count)])
        name = "locky_" + hashlib.sha256(text.encode()).hexdigest()[:24]
        execute = f"EXECUTE {name}" + (f" ({', '.join(['%s'] * count)})" if count else "")
        return Statement(pony, direct, name, f"PREPARE {name} AS {text}", execute, packed)

    def select(self, statement: Statement, params: tuple, *, stale_ok: bool = False) -> list:
        """The rows of ``statement`` (tuples; lists when it is packed). With ``stale_ok``
        (the statement may be answered by a replica), outside a transaction and when the
        caller can take a stale answer (:func:`locky.cache.stale_ok`: the read
        API's lists, counts and reads by id), from a read replica when one is configured
        and close enough (:mod:`.replicas`); otherwise from the primary."""
        rows = self._select(statement, params, stale_ok)
        if statement.aggregated:
            whole = rows[0][0] if rows else None
            if whole is None:
                return []
            try:
                return orjson.loads(whole)
            except orjson.JSONDecodeError:  # MariaDB cut it at group_concat_max_len
                return self.select(statement.plain, params, stale_ok=stale_ok)
        if statement.packed:
            loads = orjson.loads
            return [loads(row[0]) for row in rows]
        return rows

    def _select(self, statement: Statement, params: tuple, stale_ok: bool) -> list[tuple]:
        if compat.in_db_session() or self.direct is None:
            return self._in_transaction(statement.pony, params)
        if stale_ok and self.replicas is not None and caller_takes_stale():
            rows = self._on_replica(statement, params)
            if rows is not None:
                return rows
        run = self._on_sqlite if self.direct == "sqlite" else self._on_pool
        started = time.monotonic()
        with WATCHDOG.call():
            for attempt in range(ATTEMPTS):
                try:
                    return run(statement, params)
                except Exception as exc:
                    kind = classify(exc)
                    if attempt < ATTEMPTS - 1 and kind in (LOST, TRANSIENT) and quick(started):
                        continue
                    raise unavailable("a read", exc, kind) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _on_pool(self, statement: Statement, params: tuple) -> list[tuple]:
        pool = self.pool
        connection, new = pool.connect(transactional=False)
        try:
            if new:
                compat.call_on_connect(self.db, connection)
            postgres = self.direct == "postgres"
            if postgres:
                connection.autocommit = True
            else:
                # PyMySQL: a round trip only when the connection last served a transaction;
                # the pool switches it back before Pony gets it (pool.for_transactions).
                connection.autocommit(True)
            rows = self._fetch(connection, statement, params)
            if postgres:
                connection.autocommit = False
        except BaseException:
            pool.drop(connection)  # broken, or in a state not worth finding out
            raise
        pool.put_back(connection)
        return rows

    def _on_replica(self, statement: Statement, params: tuple) -> list[tuple] | None:
        """The rows from a replica, or ``None`` when none is fit to answer (none chosen, too
        far behind, busy or failing): the caller then reads from the primary."""
        replicas = self.replicas
        replica = replicas.choose()
        if replica is None:
            return None
        try:
            with WATCHDOG.call():
                connection, new = replica.pool.connect()
                try:
                    if new:
                        connection.autocommit = True  # a replica's connections only read
                    fit = replicas.lag_checked(replica, connection, self._read_primary_position)
                    rows = self._fetch(connection, statement, params) if fit else None
                except BaseException:
                    replica.pool.drop(connection)
                    raise
                replica.pool.put_back(connection)
                return rows
        except PoolTimeout:
            return None  # busy: the primary answers this one
        except Exception as exc:
            cause = root_cause(exc)
            replicas.pause(replica, f"{type(cause).__name__}: {(str(cause).strip().splitlines() or [''])[0][:200]}")
            return None

    def _read_primary_position(self) -> str:
        """The primary's WAL position (``pg_lsn`` text), read on a pooled connection."""
        return self._on_pool(self._primary_position, ())[0][0]

    def _fetch(self, connection, statement: Statement, params: tuple) -> list[tuple]:
        """The rows of ``statement`` on a server connection, prepared on it when reads are."""
        cursor = connection.cursor()
        try:
            if self.prepare:
                self._execute_prepared(connection, cursor, statement, params)
            else:
                cursor.execute(statement.direct, params)
            return cursor.fetchall()
        finally:
            cursor.close()

    def _execute_prepared(self, connection, cursor, statement: Statement, params: tuple) -> None:
        prepared = self._prepared.setdefault(connection, set())
        if statement.name not in prepared:
            self._prepare(cursor, statement, prepared)
        try:
            cursor.execute(statement.execute, params)
        except Exception as exc:
            if getattr(root_cause(exc), "pgcode", None) != PG_NOT_PREPARED:
                raise
            # The server session running this EXECUTE does not have what this connection
            # prepared: a transaction pooler hands each statement to any server session.
            # Run it plain (autocommit: the failed EXECUTE left no transaction to abort).
            self._stop_preparing()
            cursor.execute(statement.direct, params)

    def _stop_preparing(self) -> None:
        if not self.prepare:
            return
        self.prepare = False
        log.warning("a prepared statement vanished between two statements of one connection: a"
                    " transaction-pooling proxy is in between; reads run unprepared from now on"
                    " (say so with LOCKY_DATABASE_POOLER=transaction)")

    @staticmethod
    def _prepare(cursor, statement: Statement, prepared: set) -> None:
        try:
            cursor.execute(statement.prepare)
        except Exception as exc:
            if getattr(root_cause(exc), "pgcode", None) != PG_ALREADY_PREPARED:
                raise
        prepared.add(statement.name)

    def _on_sqlite(self, statement: Statement, params: tuple) -> list[tuple]:
        cursor = self._connection().cursor()
        try:
            cursor.execute(statement.direct, params)
            return cursor.fetchall()
        except Exception:
            self._drop()
            raise
        finally:
            cursor.close()

    def _pony_select(self, sql: str, params: tuple) -> list[tuple]:
        # In a caller's session, its pending changes first (a no-op in our own).
        self.db.flush()
        rows = self.db.select(sql, {f"p{i}": value for i, value in enumerate(params)})
        # db.select gives bare values for a single column; tuples like the drivers.
        return [row if isinstance(row, tuple) else (row,) for row in rows]

    def _connection(self):
        local = self.local
        connection = getattr(local, "connection", None)
        if connection is not None and local.pid == os.getpid():
            return connection
        # Never close a connection inherited through fork: it is the parent's.
        local.connection = None
        import sqlite3

        # Text comes back as str (strict UTF-8: everything stored came from Python str).
        connection = sqlite3.connect(**self.connect_args, isolation_level=None, check_same_thread=False)
        local.connection, local.pid = connection, os.getpid()
        return connection

    def _drop(self) -> None:
        connection = getattr(self.local, "connection", None)
        self.local.connection = None
        if connection is not None and self.local.pid == os.getpid():
            try:
                connection.close()
            except Exception:
                pass

    def close(self) -> None:
        self._drop()
