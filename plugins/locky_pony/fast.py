"""The hot read paths of the Pony backend in plain SQL.

Per-request reads (authenticating a bearer token, reading one record, reading a page)
through Pony's entity layer cost ~100-300 µs per row, mostly in its value validation and
``strptime`` date parsing, plus ~100 µs per ``db_session`` and raw-SQL parsing. The
readers here run the same reads as single SQL statements and build the same
:mod:`locky.records` dataclasses directly:

- on SQLite and PostgreSQL, on a read-only autocommit connection of their own (one per
  process and thread, opened lazily after the fork): each read is one statement, which
  sees every committed write, with no transaction around it to begin or end;
- elsewhere (MySQL/MariaDB, SQLite in memory), through ``db.select`` in a
  :func:`~.guard.transaction`.

Failures map to Locky's errors as :mod:`.guard` does (``Unavailable``, no driver text).
Table and column names come from the entities' mapping, so they follow its changes;
``tests/test_perf_invariants.py`` checks that both paths return identical records.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from datetime import datetime
from typing import Any, Callable

from locky.errors import Unavailable
from locky.records import Group, Member, Page, Permission, Role, Session, User

from .guard import LOST, TRANSIENT, classify, root_cause, transaction
from .stores import MAX_ID

log = logging.getLogger("locky.storage")
RECORDS = {"User": User, "Group": Group, "Member": Member, "Role": Role}


def _datetime(value):
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)  # SQLite: Pony's "YYYY-MM-DD HH:MM:SS[.ffffff]"


def _permissions(value) -> tuple[Permission, ...]:
    if isinstance(value, (str, bytes)):
        value = json.loads(value)
    return tuple(Permission(p["resource"], p["action"]) for p in value)


def _converter(record_field: dataclasses.Field) -> Callable[[Any], Any] | None:
    if record_field.name in ("created_at", "updated_at", "deleted_at", "revoked_at"):
        return _datetime
    if record_field.name == "permissions":
        return _permissions
    if record_field.name == "builtin":
        return bool
    return None


class Reads:
    """Runs one SELECT and returns its rows. SQL is written with ``{}`` for each
    positional parameter."""

    def __init__(self, db, bind: dict | None):
        self.db = db
        self.dialect = db.provider.dialect
        self.direct = None
        bind = dict(bind or {})
        provider = bind.pop("provider", None)
        if provider == "sqlite" and bind.get("filename") not in (None, ":memory:", ":sharedmemory:"):
            self.direct = "sqlite"
            self.connect_args = {"database": bind["filename"], "timeout": bind.get("timeout", 30)}
        elif provider == "postgres":
            self.direct = "postgres"
            self.connect_args = bind
        self.placeholder = "?" if self.direct == "sqlite" else "%s"
        self.local = threading.local()
        self._statements: list[str] = []
        self._pony = transaction(self._pony_select)

    def prepare(self, sql: str) -> tuple[Any, str]:
        """(what the direct connection runs, the SQL for ``db.select``).

        On PostgreSQL the direct form is a server-side prepared statement, ``(name,
        PREPARE text, EXECUTE text)``: parsed and planned once per connection instead of
        on every request (the read path's statements are few and fixed).
        """
        count = sql.count("{}")
        pony = sql.format(*[f"$p{i}" for i in range(count)])
        if self.direct == "postgres":
            name = f"locky_read_{len(self._statements)}"
            self._statements.append(name)
            text = sql.format(*[f"${i + 1}" for i in range(count)])
            execute = f"EXECUTE {name}" + (f" ({', '.join(['%s'] * count)})" if count else "")
            return (name, f"PREPARE {name} AS {text}", execute), pony
        return sql.format(*[self.placeholder] * count), pony

    def select(self, prepared: tuple[str, str], params: tuple) -> list:
        if self.direct is None:
            return self._pony(prepared[1], params)
        for attempt in range(3):
            try:
                cursor = self._connection().cursor()
                try:
                    if self.direct == "postgres":
                        name, prepare, execute = prepared[0]
                        if name not in self.local.prepared:
                            cursor.execute(prepare)
                            self.local.prepared.add(name)
                        cursor.execute(execute, params)
                    else:
                        cursor.execute(prepared[0], params)
                    return cursor.fetchall()
                finally:
                    cursor.close()
            except Exception as exc:
                kind = classify(exc)
                if kind == LOST or self.direct == "postgres":
                    self._drop()  # a broken or aborted connection: a new one next time
                if attempt < 2 and kind in (LOST, TRANSIENT):
                    continue
                root = root_cause(exc)
                log.warning("storage unavailable in a read (%s): %s: %s", kind, type(root).__name__,
                            (str(root).strip().splitlines() or [""])[0][:200])
                raise Unavailable() from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _pony_select(self, sql: str, params: tuple) -> list:
        return self.db.select(sql, {f"p{i}": value for i, value in enumerate(params)})

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
            connection.set_session(readonly=True, autocommit=True)
        local.connection, local.pid = connection, os.getpid()
        local.prepared = set()  # statements prepared on this connection
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


class _Columns:
    """The columns of ``entity`` that make a ``record`` dataclass, in its field order."""

    def __init__(self, provider, entity, record, alias: str = ""):
        self.record = record
        fields = list(dataclasses.fields(record))
        prefix = f"{alias}." if alias else ""
        self.sql = ", ".join(prefix + column(provider, entity, f.name) for f in fields)
        self.converters = [(i, c) for i, c in enumerate(map(_converter, fields)) if c is not None]
        self.table = provider.quote_name(entity._table_)
        self.width = len(fields)

    def build(self, row, start: int = 0):
        values = list(row[start:start + self.width])
        for i, convert in self.converters:
            values[i] = convert(values[i])
        return self.record(*values)


def column(provider, entity, name: str) -> str:
    return provider.quote_name(entity._adict_[name].columns[0])


class FastCollection:
    """``get`` and ``list`` of one record kind, with the semantics of
    :class:`~.stores.Collection`: live rows only, keyset pages by id, exact filters."""

    def __init__(self, reads: Reads, entity, store):
        provider = reads.db.provider
        self.reads = reads
        self.store = store
        record = RECORDS[type(store).__name__.removesuffix("Store")]
        self.columns = c = _Columns(provider, entity, record)
        self.id_col = column(provider, entity, "id")
        self.del_col = column(provider, entity, "del_token")
        self.filter_cols = {name: column(provider, entity, name) for name in store.filters}
        self.get_sql = reads.prepare(f"SELECT {c.sql} FROM {c.table} WHERE {self.id_col} = {{}} AND {self.del_col} = 0")
        self._list_sql: dict[tuple[str, ...], tuple[str, str]] = {}
        self.list_from = c.table
        if reads.dialect == "MySQL":
            # MariaDB reads a page through (del_token, id) as "ref" access on del_token
            # alone: from the first live row up to after_id, slower the deeper the page.
            # Without that index it takes the primary key range (id > after_id) or a
            # filter's own index: the same cost on every page. Counts still use it.
            live = provider.quote_name(f"idx_{entity._table_}__del_token_id")
            self.list_from = f"{c.table} IGNORE INDEX ({live})"

    def get(self, id: int):
        if not isinstance(id, int) or not 0 < id <= MAX_ID:  # as Collection._live
            return None
        rows = self.reads.select(self.get_sql, (int(id),))
        return self.columns.build(rows[0]) if rows else None

    def list(self, *, after_id: int = 0, limit: int = 50, **filters: Any) -> Page:
        given = self.store.given_filters(filters)
        names = tuple(sorted(given))
        sql = self._list_sql.get(names)
        if sql is None:
            where = " AND ".join(
                [f"{self.del_col} = 0"] + [f"{self.filter_cols[n]} = {{}}" for n in names] + [f"{self.id_col} > {{}}"]
            )
            sql = self._list_sql[names] = self.reads.prepare(
                f"SELECT {self.columns.sql} FROM {self.list_from} WHERE {where}"
                f" ORDER BY {self.id_col} LIMIT {{}}"
            )
        params = tuple(given[n] for n in names) + (int(after_id), int(limit) + 1)
        rows = self.reads.select(sql, params)
        more = len(rows) > limit
        build = self.columns.build
        items = [build(row) for row in rows[:limit]]
        return Page(items=items, next_after_id=items[-1].id if more else None)


class FastAuthentication:
    """A live session, its live user and the policy revision in one statement."""

    def __init__(self, reads: Reads, entities):
        provider = reads.db.provider
        q = provider.quote_name
        self.reads = reads
        self.session_cols = _Columns(provider, entities.Session, Session, "s")
        self.user_cols = _Columns(provider, entities.User, User, "u")
        S, U, M = entities.Session, entities.User, entities.Meta
        self.sql = reads.prepare(
            f"SELECT {self.session_cols.sql}, {self.user_cols.sql},"
            f" (SELECT m.{column(provider, M, 'number')} FROM {q(M._table_)} m"
            f" WHERE m.{column(provider, M, 'key')} = 'policy_revision')"
            f" FROM {q(S._table_)} s JOIN {q(U._table_)} u"
            f" ON u.{column(provider, U, 'uuid')} = s.{column(provider, S, 'user_uuid')}"
            f" WHERE s.{column(provider, S, 'uuid')} = {{}} AND s.{column(provider, S, 'revoked_at')} IS NULL"
            f" AND u.{column(provider, U, 'del_token')} = 0"
        )

    def authenticate(self, session_uuid: str):
        """``(Session, User, policy revision)``, or ``None`` when the session is unknown or
        revoked or its user deleted."""
        if not isinstance(session_uuid, str):
            return None
        rows = self.reads.select(self.sql, (session_uuid,))
        if not rows:
            return None
        row = rows[0]
        session = self.session_cols.build(row)
        user = self.user_cols.build(row, self.session_cols.width)
        return session, user, int(row[-1])
