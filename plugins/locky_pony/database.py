"""Binding a Pony ``Database`` from ``LOCKY_DATABASE_URL`` and mapping Locky's entities.

Binding creates no table: the schema is the business of :mod:`.schema`, which the app
runs at startup (``Storage.migrate``) and ``locky migrate`` runs on demand.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote, urlsplit

from pony.orm import Database

from locky import Settings, SettingsError

from . import compat, pool
from .deadline import WATCHDOG
from .entities import define_entities
from .guard import first_line


def bind_arguments(settings: Settings, url: str | None = None, name: str = "LOCKY_DATABASE_URL") -> dict:
    """Pony ``bind`` keyword arguments for the configured URL (or ``url``, a replica's,
    named ``name`` in errors)."""
    url = url or settings.database_url
    if url.startswith("sqlite:"):
        path = settings.sqlite_path
        if path is None:
            return {"provider": "sqlite", "filename": ":sharedmemory:"}
        path.parent.mkdir(parents=True, exist_ok=True)
        # Made here, mode 0600 (umask can only narrow it), before SQLite would make it
        # 0644: it holds every password hash, and SQLite gives its -wal and -shm files
        # the database file's mode. An existing file keeps the mode its operator chose.
        path.touch(mode=0o600, exist_ok=True)
        # Absolute path: Pony resolves relative ones against its caller's module.
        # ``timeout``: how long a write waits for another process's write lock.
        return {"provider": "sqlite", "filename": str(path), "create_db": True, "timeout": settings.db_timeout}
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise SettingsError(f"{name} has an invalid port") from None
    if not parts.hostname or not parts.path.strip("/"):
        raise SettingsError(
            f"{name} needs a host and a database name: {parts.scheme}://user:pass@host:port/db"
        )
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    database = unquote(parts.path.strip("/"))
    options = dict(parse_qsl(parts.query))
    timeout = settings.db_timeout
    if parts.scheme in ("postgres", "postgresql"):
        # Query parameters are libpq's own (sslmode=require, ...). tcp_user_timeout and
        # keepalives find a network that drops packets; a server that keeps the
        # connection open but never answers is the watchdog's (deadline.py).
        # gssencmode: libpq's default asks for Kerberos encryption on every connect, and
        # the Kerberos library inside psycopg2's wheel can crash the process when threads
        # connect at once; Locky never uses it. ``?gssencmode=prefer`` or PGGSSENCMODE
        # turns it back on.
        gss = {} if "PGGSSENCMODE" in os.environ else {"gssencmode": "disable"}
        return {
            "provider": "postgres", "host": parts.hostname, "port": port or 5432, "user": user,
            "password": password, "database": database, "connect_timeout": timeout,
            "tcp_user_timeout": timeout * 1000, "keepalives": 1, "keepalives_idle": timeout,
            "keepalives_interval": 1, "keepalives_count": 3, "application_name": "locky", **gss,
            **options,
        }
    if options:
        raise SettingsError("LOCKY_DATABASE_URL takes no query parameters for mysql://")
    return {
        "provider": "mysql", "host": parts.hostname, "port": port or 3306, "user": user,
        "password": password, "database": database, "charset": "utf8mb4", "connect_timeout": timeout,
        "read_timeout": timeout, "write_timeout": timeout,
    }


#: SQLite's ``synchronous`` setting on every connection: FULL (2), acknowledged means durable.
SQLITE_SYNCHRONOUS = "FULL"


def open_database(settings: Settings):
    """A bound ``Database`` with Locky's entities mapped (no table is created or checked)."""
    db = Database()

    @db.on_connect(provider="sqlite")
    def _sqlite_pragmas(db, connection):
        # WAL lets readers run beside the writer of another worker process. FULL syncs
        # the WAL at every commit: a write is answered only once it is on disk. NORMAL
        # would sync at checkpoints only, and a power loss or an I/O error then loses
        # commits already acknowledged (docs/operating.md, "Durability").
        cursor = connection.cursor()
        _while_locked(lambda: cursor.execute("PRAGMA journal_mode=WAL"), settings.db_timeout)
        cursor.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
        cursor.execute("PRAGMA foreign_keys=ON")

    arguments = bind_arguments(settings)
    try:
        if arguments["provider"] == "mysql":
            # Pony would take mysqlclient when installed; Locky speaks PyMySQL.
            compat.pymysql_provider()
        db.bind(**arguments)
    except SettingsError:
        raise
    except ImportError as exc:
        extra = "postgres" if arguments["provider"] == "postgres" else "mysql"
        raise SettingsError(
            f"the {arguments['provider']} driver is not installed: pip install 'locky[{extra}]' ({exc})"
        ) from None
    except Exception as exc:  # the driver's own connection errors
        raise SettingsError(f"cannot connect to the database: {type(exc).__name__}: {first_line(exc, None)}") from None
    # Pony connects once more after a broken connection; not within a call the watchdog
    # cut for taking too long (that would double it).
    compat.veto_reconnect(db, WATCHDOG.cut_here)
    dialect = db.provider.dialect
    if arguments["provider"] != "sqlite":
        # Engines with a server: one bounded pool per process, watched (pool.py).
        pool.install(db, settings.database_pool_size, settings.database_pool_timeout, settings.db_timeout)
    if dialect == "PostgreSQL":
        # Pony's PostgreSQL ids are 32-bit SERIAL; the contract's are 64-bit.
        compat.use_bigserial(db)
    entities = define_entities(db, dialect)
    db.generate_mapping(create_tables=False, check_tables=False)
    return db, entities


def _while_locked(run: Callable[[], Any], timeout: float) -> Any:
    """``run()``, tried again for up to ``timeout`` seconds while SQLite says the database
    is locked. Switching a new file to WAL needs every other connection out of the way and
    SQLite answers "database is locked" at once, without waiting its busy timeout: worker
    processes starting together on a new file met it in CI."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return run()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
