"""Throwaway databases on real PostgreSQL and MariaDB/MySQL servers, for test runs.

A test run never touches the database its URL names: :func:`scratch_database` creates
``locky_t_<random>`` beside it (the named database serves only to log in), hands out
its URL, and drops it at the end. Between tests :meth:`ScratchDatabase.wipe` empties
every table and resets ids, which is much faster than a new database per test and
leaves each test an empty database all the same.

Only the drivers are used (``psycopg2``, ``PyMySQL``), imported when needed; nothing
here knows about a particular storage plugin's tables.
"""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit, urlunsplit

#: Engines a URL may name, by scheme.
ENGINES = {"sqlite": "sqlite", "postgres": "postgres", "postgresql": "postgres", "mysql": "mysql"}
PREFIX = "locky_t_"


def engine(url: str) -> str:
    """``sqlite``, ``postgres`` or ``mysql``."""
    scheme = url.split(":", 1)[0]
    try:
        return ENGINES[scheme]
    except KeyError:
        raise ValueError(f"not a database URL Locky knows: {url!r}") from None


def with_database(url: str, database: str) -> str:
    """``url`` naming ``database`` instead."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


def connect(url: str, *, autocommit: bool = True, timeout: int = 5):
    """A plain driver connection to the PostgreSQL or MySQL database of ``url``."""
    parts = urlsplit(url)
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    database = unquote(parts.path.strip("/"))
    kind = engine(url)
    if kind == "postgres":
        import psycopg2

        connection = psycopg2.connect(
            host=parts.hostname, port=parts.port or 5432, user=user, password=password,
            dbname=database, connect_timeout=timeout, application_name="locky-tests",
            # as the service's own connections (plugins/locky_pony/database.py)
            **({} if "PGGSSENCMODE" in os.environ else {"gssencmode": "disable"}),
        )
        connection.autocommit = autocommit
        return connection
    if kind == "mysql":
        import pymysql

        return pymysql.connect(
            host=parts.hostname, port=parts.port or 3306, user=user, password=password,
            database=database or None, autocommit=autocommit, connect_timeout=timeout,
            charset="utf8mb4",
        )
    raise ValueError("connect() is for PostgreSQL and MySQL URLs")


def run_sql(url: str, sql: str, *params: Any) -> list[tuple]:
    """Run one statement (``%s`` placeholders) on the database of ``url``, SQLite
    included, with the plain driver and committed; its rows, or ``[]`` when it has none.
    For tests that look at storage, or change it, under the service's feet."""
    if engine(url) == "sqlite":
        import sqlite3

        connection = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        try:
            rows = connection.execute(sql.replace("%s", "?"), params).fetchall()
            connection.commit()
            return rows
        finally:
            connection.close()
    connection = connect(url)
    try:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []
    finally:
        connection.close()


def unreachable(url: str) -> str | None:
    """Why the server of ``url`` cannot be used, or ``None`` when it answers."""
    try:
        connection = connect(url, timeout=3)
    except ImportError as exc:
        return f"the driver for {engine(url)} is not installed ({exc.name}): pip install 'locky[{engine(url)}]'"
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"cannot connect to {_safe(url)}: {type(exc).__name__}: {first}"
    connection.close()
    return None


#: The schema's own bookkeeping, kept by :meth:`ScratchDatabase.wipe`: its version (and
#: the policy revision beside it, which only has to grow) and the history of its steps.
SCHEMA_TABLES = ("locky_meta", "locky_schema_history")


@dataclass
class ScratchDatabase:
    """A database made for one test run; ``url`` is what the code under test uses."""

    url: str
    admin_url: str
    name: str
    #: Set to keep the database after the run (for a look at what a test left).
    keep: bool = False
    _connection: Any = field(default=None, repr=False)

    def _cursor(self):
        if self._connection is None:
            self._connection = connect(self.url)
        return self._connection.cursor()

    def tables(self) -> list[str]:
        """The tables of the scratch database."""
        cursor = self._cursor()
        if engine(self.url) == "postgres":
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        else:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'"
            )
        return sorted(row[0] for row in cursor.fetchall())

    def wipe(self) -> None:
        """Empty every table and restart ids at 1. The schema stays, and so do the rows
        that say which version it is (:data:`SCHEMA_TABLES`): the next app finds its
        schema current instead of an empty version over existing tables."""
        try:
            self._wipe()
        except Exception:
            # A test may have ended our connection too (killing sessions): once more
            # on a new one.
            self.close()
            self._wipe()

    def _wipe(self) -> None:
        if engine(self.url) != "postgres":
            self._wipe_mysql()
            return
        tables = [table for table in self.tables() if table not in SCHEMA_TABLES]
        if not tables:
            return
        cursor = self._cursor()
        # DELETE, children first, and sequences reset: on a few rows much faster
        # than TRUNCATE, which makes new files for every table.
        # lock_timeout fails fast instead of waiting behind a connection some
        # test leaked in the middle of a transaction.
        cursor.execute("SET lock_timeout = '10s'")
        cursor.execute("BEGIN")
        try:
            for table in self._children_first(cursor, tables):
                cursor.execute(f'DELETE FROM "{table}"')
            cursor.execute(
                "SELECT setval(c.oid::regclass, 1, false) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'S' AND n.nspname = current_schema()"
            )
            cursor.execute("COMMIT")
        except BaseException:
            cursor.execute("ROLLBACK")
            raise

    def _wipe_mysql(self) -> None:
        # TRUNCATE drops and makes again every table's file (a test's wipe took about
        # 160 ms). Only the tables holding rows are emptied, with DELETE, and only the
        # counters that handed out ids are reset, in place. One read of the catalogue
        # gives the tables and their counters, one query the tables holding rows.
        cursor = self._cursor()
        cursor.execute(
            "SELECT table_name, auto_increment FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'"
        )
        counters = {name: counter for name, counter in cursor.fetchall() if name not in SCHEMA_TABLES}
        tables = sorted(counters)
        if not tables:
            return
        cursor.execute("SET SESSION lock_wait_timeout = 10, SESSION innodb_lock_wait_timeout = 10,"
                       " SESSION foreign_key_checks = 0")
        try:
            cursor.execute(" UNION ALL ".join(f"(SELECT '{table}' FROM `{table}` LIMIT 1)" for table in tables))
            filled = {row[0] for row in cursor.fetchall()}
            if filled:
                cursor.execute("START TRANSACTION")
                for table in sorted(filled):
                    cursor.execute(f"DELETE FROM `{table}`")
                cursor.execute("COMMIT")
            for table in tables:
                if table in filled or (counters.get(table) or 1) > 1:
                    cursor.execute(f"ALTER TABLE `{table}` AUTO_INCREMENT = 1")
        finally:
            cursor.execute("SET SESSION foreign_key_checks = 1")

    @staticmethod
    def _children_first(cursor, tables: list[str]) -> list[str]:
        """``tables`` ordered so that no row is deleted before the rows referring to it."""
        cursor.execute(
            "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c"
            " JOIN pg_namespace n ON n.oid = c.connamespace"
            " WHERE c.contype = 'f' AND n.nspname = current_schema()"
        )
        parents: dict[str, set[str]] = {t: set() for t in tables}
        for child, parent in cursor.fetchall():
            child, parent = child.strip('"'), parent.strip('"')
            if child in parents and parent != child:
                parents[child].add(parent)
        ordered: list[str] = []
        remaining = set(tables)
        while remaining:
            # A table goes once no remaining table refers to it.
            ready = sorted(t for t in remaining if not any(t in parents[o] for o in remaining if o != t))
            if not ready:  # a reference cycle: let the database sort it out
                ready = sorted(remaining)
            ordered.extend(ready)
            remaining.difference_update(ready)
        return ordered

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass


@contextmanager
def scratch_database(url: str, prefix: str = PREFIX) -> Iterator[ScratchDatabase]:
    """Create a fresh, empty database on the server of ``url``; drop it afterwards.

    The database ``url`` names is used only to log in (``postgres``/``test`` on
    PostgreSQL; any on MySQL). Raises the driver's error when the server does not answer.
    """
    kind = engine(url)
    name = prefix + secrets.token_hex(6)
    admin = connect(url)
    try:
        cursor = admin.cursor()
        if kind == "postgres":
            cursor.execute(f'CREATE DATABASE "{name}" ENCODING \'UTF8\' TEMPLATE template0')
            # A throwaway database need not wait for its commits to reach the disk.
            cursor.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        else:
            # The server's default collation on purpose: the code must not rely on
            # the database's defaults for its tables.
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        scratch = ScratchDatabase(url=with_database(url, name), admin_url=url, name=name)
        try:
            yield scratch
        finally:
            scratch.close()
            if not scratch.keep:
                _drop(admin, kind, name)
    finally:
        admin.close()


def _drop(admin, kind: str, name: str) -> None:
    cursor = admin.cursor()
    if kind == "mysql":
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        return
    try:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # PostgreSQL 13+
    except Exception:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _safe(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
