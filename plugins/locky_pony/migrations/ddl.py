"""Column types and names of each engine, for the steps from 6 on.

Steps 1-5 spell their SQL out in full and stay as released; later steps build theirs
from :class:`Ddl`, so a type is written once per engine.
"""

from __future__ import annotations


class Ddl:
    """The SQL vocabulary of one engine (Pony's dialect name) and MySQL collation."""

    IDENTITY = {
        "SQLite": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "PostgreSQL": "BIGSERIAL PRIMARY KEY",
        "MySQL": "BIGINT PRIMARY KEY AUTO_INCREMENT",
    }
    TIMESTAMP = {"SQLite": "DATETIME", "PostgreSQL": "TIMESTAMP", "MySQL": "DATETIME(6)"}
    JSON = {"SQLite": "JSON", "PostgreSQL": "JSONB", "MySQL": "JSON"}
    TEXT = {"SQLite": "TEXT", "PostgreSQL": "TEXT", "MySQL": "LONGTEXT"}

    def __init__(self, dialect: str, collation: str):
        self.quote = "`" if dialect == "MySQL" else '"'
        self.identity = self.IDENTITY[dialect]
        self.timestamp = self.TIMESTAMP[dialect]
        self.json = self.JSON[dialect]
        self.text = self.TEXT[dialect]
        self.table_options = f"\nCOLLATE {collation}\nDEFAULT CHARSET utf8mb4\nENGINE InnoDB" if dialect == "MySQL" else ""

    def name(self, name: str) -> str:
        """``name`` quoted as an identifier."""
        return f"{self.quote}{name}{self.quote}"

    def table(self, name: str, *columns: str) -> str:
        """``CREATE TABLE`` with ``columns`` (each ``"<name> <type and constraints>"``)."""
        body = ",\n".join(f"  {self.name(column.split(' ', 1)[0])} {column.split(' ', 1)[1]}" for column in columns)
        return f"CREATE TABLE {self.name(name)} (\n{body}\n){self.table_options}"

    def unique(self, table: str, *columns: str) -> str:
        """The unique key Pony names ``unq_<table>__<columns>`` (``composite_key``), as a
        unique index: the same on every engine, and a statement of its own."""
        return (f"CREATE UNIQUE INDEX {self.name(f'unq_{table}__' + '_'.join(columns))} ON {self.name(table)}"
                f" ({', '.join(self.name(c) for c in columns)})")

    def index(self, table: str, *columns: str) -> str:
        """The index Pony names ``idx_<table>__<columns>``."""
        return (f"CREATE INDEX {self.name(f'idx_{table}__' + '_'.join(columns))} ON {self.name(table)}"
                f" ({', '.join(self.name(c) for c in columns)})")
