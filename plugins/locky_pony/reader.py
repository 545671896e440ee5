"""Where and how a plain-SQL read of the Pony backend runs: the connection it uses, and
its statement prepared on the PostgreSQL server.

A read is one SELECT (written by :mod:`.reads`). It runs:

- inside a caller's ``db_session`` (a batch of storage calls): on that session's own
  connection through ``db.select``, after flushing the session's pending changes, so it
  sees the batch's uncommitted writes;
- otherwise, on SQLite files and PostgreSQL: on a private autocommit connection (one per
  process and thread, opened lazily, so after a fork): one statement, which sees every
  committed write, with no transaction to begin or end. Nothing session-level is set on
  it (no ``SET``, no read-only session): behind a transaction-pooling PgBouncer such
  settings leak into other clients' server connections;
- otherwise (MySQL/MariaDB, SQLite in memory): through ``db.select`` in a
  :func:`~.guard.transaction` of its own.

On PostgreSQL the private connection runs server-side prepared statements, parsed and
planned once per connection. A statement's name is derived from its text, so one name
means one SQL text in every thread, process and app (a name handed out by a counter
meant different statements in readers that prepared them in different orders).

Failures map to Locky's errors as :mod:`.guard` does: a lost connection or a transient
error is tried again on a new connection; the rest is ``Unavailable`` with no driver text.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import NamedTuple

from pony.orm import core

from .deadline import WATCHDOG
from .guard import LOST, TRANSIENT, classify, quick, root_cause, transaction, unavailable

#: PostgreSQL SQLSTATEs meaning the connection's prepared statements are not what this
#: reader recorded: "does not exist" (dropped by ``DISCARD ALL`` or ``DEALLOCATE``) and
#: "already exists" (prepared on this server session by someone else, with the same
#: text since the name is derived from it).
PG_NOT_PREPARED, PG_ALREADY_PREPARED = "26000", "42P05"
ATTEMPTS = 3


class Statement(NamedTuple):
    """One SELECT in the forms the connections run."""

    #: For ``db.select``: parameters written ``$p0``, ``$p1``, ...
    pony: str
    #: For the private connection: ``EXECUTE name (%s, ...)`` on PostgreSQL, else the
    #: SQL with the driver's placeholders.
    direct: str
    #: PostgreSQL: the prepared statement's name and its ``PREPARE`` text.
    name: str = ""
    prepare: str = ""


class Reader:
    """Runs one SELECT and returns its rows as tuples."""

    def __init__(self, db, bind: dict | None):
        self.db = db
        self.dialect = db.provider.dialect
        self.direct = None
        bind = dict(bind or {})
        provider = bind.pop("provider", None)
        # The same bound as every other database call (LOCKY_DB_TIMEOUT).
        self.timeout = bind.get("connect_timeout") or bind.get("timeout") or 5
        if provider == "sqlite" and bind.get("filename") not in (None, ":memory:", ":sharedmemory:"):
            self.direct = "sqlite"
            self.connect_args = {"database": bind["filename"], "timeout": bind.get("timeout", 5)}
        elif provider == "postgres":
            self.direct = "postgres"
            self.connect_args = bind
        self.local = threading.local()
        self._in_transaction = transaction(self._pony_select)

    def statement(self, sql: str) -> Statement:
        """``sql``, written with ``{}`` for each positional parameter, in every form."""
        count = sql.count("{}")
        pony = sql.format(*[f"$p{i}" for i in range(count)])
        if self.direct != "postgres":
            placeholder = "?" if self.direct == "sqlite" else "%s"
            return Statement(pony, sql.format(*[placeholder] * count))
        text = sql.format(*[f"${i + 1}" for i in range(count)])
        name = "locky_" + hashlib.sha256(text.encode()).hexdigest()[:24]
        execute = f"EXECUTE {name}" + (f" ({', '.join(['%s'] * count)})" if count else "")
        return Statement(pony, execute, name, f"PREPARE {name} AS {text}")

    def select(self, statement: Statement, params: tuple) -> list[tuple]:
        if core.local.db_session is not None or self.direct is None:
            return self._in_transaction(statement.pony, params)
        started = time.monotonic()
        with WATCHDOG.call():
            for attempt in range(ATTEMPTS):
                try:
                    cursor = self._connection().cursor()
                    try:
                        if self.direct == "postgres":
                            self._execute_prepared(cursor, statement, params)
                        else:
                            cursor.execute(statement.direct, params)
                        return cursor.fetchall()
                    finally:
                        cursor.close()
                except Exception as exc:
                    kind = classify(exc)
                    if kind == LOST or self.direct == "postgres":
                        self._drop()  # a broken or aborted connection: a new one next time
                    if attempt < ATTEMPTS - 1 and kind in (LOST, TRANSIENT) and quick(started):
                        continue
                    raise unavailable("a read", exc, kind) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _execute_prepared(self, cursor, statement: Statement, params: tuple) -> None:
        prepared = self.local.prepared
        if statement.name not in prepared:
            self._prepare(cursor, statement)
        try:
            cursor.execute(statement.direct, params)
        except Exception as exc:
            if getattr(root_cause(exc), "pgcode", None) != PG_NOT_PREPARED:
                raise
            # Dropped on the server behind our back: prepare it once more (autocommit,
            # so the failed EXECUTE left no transaction to abort).
            prepared.discard(statement.name)
            self._prepare(cursor, statement)
            cursor.execute(statement.direct, params)

    def _prepare(self, cursor, statement: Statement) -> None:
        try:
            cursor.execute(statement.prepare)
        except Exception as exc:
            if getattr(root_cause(exc), "pgcode", None) != PG_ALREADY_PREPARED:
                raise
        self.local.prepared.add(statement.name)

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
        # Never close a connection inherited through fork: its socket is the parent's.
        local.connection = None
        if self.direct == "sqlite":
            import sqlite3

            # Text comes back as str (strict UTF-8: everything stored came from Python str).
            connection = sqlite3.connect(**self.connect_args, isolation_level=None, check_same_thread=False)
        else:
            import psycopg2

            connection = psycopg2.connect(**self.connect_args)
            connection.autocommit = True
            WATCHDOG.track(connection, self.timeout)
        local.connection, local.pid = connection, os.getpid()
        local.prepared = set()  # names of the statements prepared on this connection
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
