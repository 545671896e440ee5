"""Binding a Pony ``Database`` from ``LOCKY_DATABASE_URL`` and preparing its schema."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from pony.orm import Database, db_session

from locky.settings import Settings, SettingsError

from .entities import SCHEMA_VERSION, define_entities


def bind_arguments(settings: Settings) -> dict:
    """Pony ``bind`` keyword arguments for the configured URL."""
    url = settings.database_url
    if url.startswith("sqlite:"):
        path = settings.sqlite_path
        if path is None:
            return {"provider": "sqlite", "filename": ":sharedmemory:"}
        path.parent.mkdir(parents=True, exist_ok=True)
        # Absolute path: Pony resolves relative ones against its caller's module.
        return {"provider": "sqlite", "filename": str(path), "create_db": True, "timeout": 30}
    parts = urlsplit(url)
    if not parts.hostname or not parts.path.strip("/"):
        raise SettingsError(f"LOCKY_DATABASE_URL needs a host and a database name: {parts.scheme}://user:pass@host:port/db")
    common = {
        "host": parts.hostname,
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
        "database": parts.path.strip("/"),
    }
    if parts.scheme in ("postgres", "postgresql"):
        return {"provider": "postgres", "port": parts.port or 5432, "connect_timeout": 10, **common}
    return {
        "provider": "mysql",
        "port": parts.port or 3306,
        "host": common["host"],
        "user": common["user"],
        "passwd": common["password"],
        "db": common["database"],
        "charset": "utf8mb4",
        "connect_timeout": 10,
    }


def open_database(settings: Settings):
    """A bound, mapped ``Database`` with its tables created and schema version checked."""
    db = Database()
    entities = define_entities(db)

    @db.on_connect(provider="sqlite")
    def _sqlite_pragmas(db, connection):
        # WAL lets readers run beside the writer of another worker process; NORMAL
        # sync in WAL mode still survives a killed process (only power loss may
        # lose the last commits).
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")

    arguments = bind_arguments(settings)
    try:
        db.bind(**arguments)
    except ImportError as exc:
        extra = "postgres" if arguments["provider"] == "postgres" else "mysql"
        raise SettingsError(
            f"the {arguments['provider']} driver is not installed: pip install 'locky[{extra}]' ({exc})"
        ) from None
    except Exception as exc:  # the driver's own connection errors
        raise SettingsError(f"cannot connect to the database: {type(exc).__name__}: {_first_line(exc)}") from None
    db.generate_mapping(create_tables=True)
    _check_schema_version(db, entities)
    return db, entities


@db_session(retry=3)
def _check_schema_version(db, entities) -> None:
    row = entities.Meta.get(key="schema_version")
    if row is None:
        entities.Meta(key="schema_version", number=SCHEMA_VERSION)
        entities.Meta(key="policy_revision", number=1)
    elif row.number > SCHEMA_VERSION:
        raise SettingsError(
            f"the database schema is version {row.number}, newer than this Locky"
            f" understands ({SCHEMA_VERSION}): upgrade Locky"
        )
    elif row.number < SCHEMA_VERSION:
        raise SettingsError(
            f"the database schema is version {row.number}; this Locky needs"
            f" {SCHEMA_VERSION} and has no migration from it"
        )


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
