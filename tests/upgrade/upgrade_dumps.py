"""The released databases of ``fixtures/``: loading a dump into an empty database,
emptying a scratch database completely, and a snapshot of a database's tables and rows
(to show that a command left it as it was).

Only the drivers are used, never Locky's storage: these are the database as an operator's
tools see it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from locky.testing.databases import connect, engine, run_sql

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def empty(url: str) -> None:
    """Drop everything in the database of ``url`` (tables, sequences, indexes)."""
    kind = engine(url)
    if kind == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(sqlite_path(url) + suffix).unlink(missing_ok=True)
        return
    connection = connect(url)
    try:
        cursor = connection.cursor()
        if kind == "postgres":
            cursor.execute("SET lock_timeout = '10s'")
            cursor.execute("DROP SCHEMA IF EXISTS public CASCADE")
            cursor.execute("CREATE SCHEMA public")
            return
        cursor.execute("SET SESSION foreign_key_checks = 0")
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        for (table,) in cursor.fetchall():
            cursor.execute(f"DROP TABLE IF EXISTS `{table}`")
    finally:
        connection.close()


def load(url: str, release: str) -> None:
    """Load the ``release`` dump of this engine into the empty database of ``url``."""
    kind = engine(url)
    text = (FIXTURES / release / f"{kind}.sql").read_text(encoding="utf-8")
    if kind == "sqlite":
        connection = sqlite3.connect(sqlite_path(url))
        try:
            connection.executescript(text)
        finally:
            connection.close()
        return
    # A connection of its own: the PostgreSQL dump empties search_path for its session.
    connection = connect(url)
    try:
        cursor = connection.cursor()
        if kind == "postgres":
            cursor.execute(text)
            return
        for statement in mysql_statements(text):
            cursor.execute(statement)
    finally:
        connection.close()


def mysql_statements(text: str) -> list[str]:
    """The statements of a mariadb-dump file. Each ends with ``;`` at the end of a line,
    and a dump never has a raw line break inside a string (it writes ``\\n``)."""
    statements, lines = [], []
    for line in text.splitlines():
        if not lines and not line.strip():
            continue
        lines.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(lines))
            lines = []
    assert not lines, f"unterminated statement at the end of the dump: {lines[:3]}"
    return statements


def snapshot(url: str) -> dict[str, object]:
    """Every table's definition and rows (sorted), and the sequences' positions."""
    kind = engine(url)
    if kind == "sqlite":
        connection = sqlite3.connect(sqlite_path(url))
        try:
            objects = connection.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex%' ORDER BY name"
            ).fetchall()
            tables = [name for type_, name, _ in objects if type_ == "table"]
            result: dict[str, object] = {"schema": objects}
            for table in tables:
                result[table] = sorted(connection.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
            return result
        finally:
            connection.close()
    connection = connect(url)
    try:
        cursor = connection.cursor()
        result = {}
        if kind == "postgres":
            cursor.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default, ordinal_position"
                " FROM information_schema.columns WHERE table_schema = current_schema()"
                " ORDER BY table_name, ordinal_position")
            result["columns"] = cursor.fetchall()
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1")
            result["indexes"] = cursor.fetchall()
            cursor.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                           " WHERE connamespace = current_schema()::regnamespace ORDER BY 1")
            result["constraints"] = cursor.fetchall()
            cursor.execute("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = current_schema() ORDER BY 1")
            result["sequences"] = cursor.fetchall()
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
            tables = [row[0] for row in cursor.fetchall()]
            quote = '"{}"'.format
        else:
            cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1")
            tables = [row[0] for row in cursor.fetchall()]
            quote = "`{}`".format
            for table in tables:
                cursor.execute(f"SHOW CREATE TABLE `{table}`")
                result[f"create {table}"] = cursor.fetchall()
        for table in tables:
            cursor.execute(f"SELECT * FROM {quote(table)}")
            result[table] = sorted(cursor.fetchall(), key=repr)
        return result
    finally:
        connection.close()


def _meta_key(url: str) -> str:
    return "`key`" if engine(url) == "mysql" else '"key"'


def set_schema_version(url: str, version: int) -> None:
    """Write ``version`` as the stored schema version (``locky_meta``)."""
    run_sql(url, f"UPDATE locky_meta SET number = %s WHERE {_meta_key(url)} = 'schema_version'", version)
    assert schema_version(url) == version


def schema_version(url: str) -> int:
    """The schema version stored in ``locky_meta``."""
    rows = run_sql(url, f"SELECT number FROM locky_meta WHERE {_meta_key(url)} = 'schema_version'")
    assert len(rows) == 1, rows
    return int(rows[0][0])
