"""The Pony storage's schema version and the runner that applies its steps.

The version lives in ``locky_meta`` (key ``schema_version``), where 1.0.0 already kept
it; the steps are :mod:`.migrations`. :func:`migrate` applies one step per transaction,
each under a database-wide lock taken again for every step and released by its commit:

- PostgreSQL: ``pg_advisory_xact_lock`` (DDL is transactional: a failed step leaves
  nothing behind);
- SQLite: the write lock of a ``BEGIN IMMEDIATE`` transaction (transactional too);
- MySQL/MariaDB: ``GET_LOCK`` held for the whole run. Their DDL commits itself, so a
  step that fails halfway leaves what it did; the version stays at the last whole step
  and the error says so.

Inside the lock the stored version is read again, so processes and hosts that start
together apply each step once: the others wait, then find it done.

Why not a migration library: yoyo-migrations (the one that fits, plain SQL per dialect)
keeps its own tables and takes its lock by inserting a row into ``yoyo_lock``, which a
killed process leaves behind, and it opens its own connections from its own URL
syntax. Here the 1.0.0 databases already carry their version in ``locky_meta``, the
lock must be the database's own, and the steps run on the connection Pony already
configured (drivers, pragmas, 64-bit ids); the runner is the hundred lines below.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pony.orm import commit, db_session

from locky import Migration, SchemaError, SchemaState, utcnow

from . import compat
from .entities import MYSQL_COLLATIONS
from .guard import first_line
from .migrations import LATEST, steps

log = logging.getLogger("locky.storage")

#: Key of the PostgreSQL advisory lock taken by every schema step ("locky" + 1).
PG_SCHEMA_LOCK = 0x6C6F636B7901
#: Seconds a starting process waits for another one that holds the schema lock.
SCHEMA_LOCK_TIMEOUT = 60
META, HISTORY = "locky_meta", "locky_schema_history"


def schema_state(db) -> SchemaState:
    """The stored version, :data:`LATEST`, and the steps between them (reads only).

    A database at the latest version must also have the tables the entities describe
    (and on MySQL/MariaDB binary collations), or :class:`SchemaError` says what differs.
    """
    with db_session:
        current = _stored_version(db)
        collation = _mysql_collation(db) if db.provider.dialect == "MySQL" else ""
        if current == LATEST:
            _check_tables(db)
    return SchemaState(current=current, latest=LATEST, pending=tuple(steps(db.provider.dialect, collation, current)))


def migrate(db, *, dry_run: bool = False) -> list[Migration]:
    """Apply every pending step (see the module docstring); return the steps applied,
    or with ``dry_run`` the steps that would be, changing nothing."""
    dialect = db.provider.dialect
    applied: dict[int, datetime] = {}
    done: list[Migration] = []
    with db_session(ddl=True):
        collation = _mysql_collation(db) if dialect == "MySQL" else ""
        release = _hold_mysql_lock(db) if dialect == "MySQL" else None
        try:
            while True:
                if dialect == "PostgreSQL":
                    db.execute(f"SELECT pg_advisory_xact_lock({PG_SCHEMA_LOCK})")
                current = _stored_version(db)
                _refuse_ahead(current)
                pending = steps(dialect, collation, current)
                if dry_run:
                    return pending
                if not pending:
                    break
                step = pending[0]
                _apply(db, step, current)
                applied[step.version] = utcnow()
                _record_history(db, step.version, applied)
                commit()
                log.debug("schema step %s applied: %s", step.version, step.description)
                done.append(step)
            _check_tables(db)
        finally:
            if release is not None:
                release()
    return done


def _apply(db, step: Migration, current: int) -> None:
    cursor = db.get_connection().cursor()
    try:
        for statement in step.statements:
            cursor.execute(statement)
        _write_version(db, step.version, insert=current == 0)
    except Exception as exc:
        partial = (" MySQL/MariaDB commit DDL one statement at a time: check what the step left"
                   " behind before running `locky migrate` again." if db.provider.dialect == "MySQL" else "")
        raise SchemaError(
            f"schema step {step.version} ({step.description}) failed: {type(exc).__name__}:"
            f" {first_line(exc, 300)}; the database stays at version {current}.{partial}"
        ) from None


def _connection(db):
    """The session's connection, for catalog reads. Not ``db.get_connection()``: that
    makes the session immediate, which on SQLite is ``BEGIN IMMEDIATE`` (the write lock),
    so a worker starting while another process writes would wait for it and fail; a
    read needs no lock in WAL mode. Inside :func:`migrate`'s DDL session the connection
    is already in its transaction."""
    return compat.session_connection(db)


def _stored_version(db) -> int:
    provider = db.provider
    if not compat.table_exists(db, _connection(db), META):
        return 0
    q = provider.quote_name
    rows = db.select(f"SELECT {q('number')} FROM {q(META)} WHERE {q('key')} = 'schema_version'")
    return int(rows[0]) if rows else 0


def _refuse_ahead(current: int) -> None:
    if current > LATEST:
        raise SchemaError(
            f"the database schema is version {current}, newer than this Locky understands ({LATEST}):"
            " upgrade Locky, or point LOCKY_DATABASE_URL at another database"
        )


def _write_version(db, version: int, *, insert: bool) -> None:
    q = db.provider.quote_name
    if insert:
        db.execute(f"INSERT INTO {q(META)} ({q('key')}, {q('number')}) VALUES ('schema_version', $version)",
                   {"version": version})
    else:
        db.execute(f"UPDATE {q(META)} SET {q('number')} = $version WHERE {q('key')} = 'schema_version'",
                   {"version": version})


def _record_history(db, version: int, applied: dict[int, datetime]) -> None:
    """Give every version up to ``version`` its history row once the table exists:
    with the time it ran in this process, or none for steps run before history was kept."""
    provider = db.provider
    if not compat.table_exists(db, _connection(db), HISTORY):
        return
    q = provider.quote_name
    known = {int(v) for v in db.select(f"SELECT {q('version')} FROM {q(HISTORY)}")}
    for number, step in enumerate(steps(provider.dialect, "", 0)[:version], start=1):
        if number in known:
            continue
        db.execute(
            f"INSERT INTO {q(HISTORY)} ({q('version')}, {q('description')}, {q('applied_at')})"
            " VALUES ($number, $description, $applied_at)",
            {"number": number, "description": step.description, "applied_at": applied.get(number)},
        )


def _check_tables(db) -> None:
    """The tables are what the entities expect (every column there), and on MySQL/MariaDB
    their collation is a binary one."""
    provider = db.provider
    try:
        compat.check_tables(db, _connection(db))
    except Exception as exc:
        raise SchemaError(f"the database tables do not match this Locky: {first_line(exc, 300)}") from None
    if provider.dialect == "MySQL":
        _check_mysql_collations(db)


def _check_mysql_collations(db) -> None:
    """Refuse tables made elsewhere with a case- or accent-insensitive collation: the
    uniqueness rules would differ from the other engines'."""
    tables = ", ".join(f"'{name}'" for name in compat.mapped_tables(db))
    rows = db.select(
        "SELECT table_name, table_collation FROM information_schema.tables"
        f" WHERE table_schema = DATABASE() AND table_name IN ({tables})"
    )
    wrong = sorted((name, collation) for name, collation in rows if not collation.endswith("_bin"))
    if wrong:
        name, collation = wrong[0]
        raise SchemaError(
            f"table {name} uses collation {collation}; Locky needs utf8mb4 with a binary collation:"
            f" ALTER TABLE {name} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
        )


def _hold_mysql_lock(db):
    """Take the server-wide named lock of this database; return its release."""
    name = "MD5(CONCAT('locky-schema:', DATABASE()))"
    got = db.select(f"SELECT GET_LOCK({name}, {SCHEMA_LOCK_TIMEOUT})")[0]
    if got != 1:
        raise SchemaError(f"another process held the schema lock for {SCHEMA_LOCK_TIMEOUT}s; try again")
    return lambda: db.select(f"SELECT RELEASE_LOCK({name})")


def _mysql_collation(db) -> str:
    """The best of :data:`MYSQL_COLLATIONS` the server has."""
    names = ", ".join(f"'{name}'" for name in MYSQL_COLLATIONS)
    found = set(db.select(
        f"SELECT collation_name FROM information_schema.collations WHERE collation_name IN ({names})"
    ))
    return next(name for name in MYSQL_COLLATIONS if name in found or name == MYSQL_COLLATIONS[-1])
