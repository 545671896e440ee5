"""Binding a Pony ``Database`` from ``LOCKY_DATABASE_URL`` and preparing its schema.

The schema is created on first start and checked on every start, under a lock (an
advisory lock on PostgreSQL, a named lock on MySQL/MariaDB, SQLite's write lock) so that
several worker processes starting at once neither race nor fail. Its version is kept
in ``locky_meta``; a database written by another version of Locky stops startup with a
:class:`~locky.settings.SettingsError` before anything is changed.
"""

from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import parse_qsl, unquote, urlsplit

from pony.orm import Database, db_session

from locky.settings import Settings, SettingsError

from .entities import MYSQL_COLLATIONS, SCHEMA_VERSION, define_entities

#: Key of the PostgreSQL advisory lock held while the schema is prepared ("locky" + 1).
PG_SCHEMA_LOCK = 0x6C6F636B7901
#: Seconds a starting process waits for another one preparing the schema.
SCHEMA_LOCK_TIMEOUT = 60


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
    try:
        port = parts.port
    except ValueError:
        raise SettingsError("LOCKY_DATABASE_URL has an invalid port") from None
    if not parts.hostname or not parts.path.strip("/"):
        raise SettingsError(
            f"LOCKY_DATABASE_URL needs a host and a database name: {parts.scheme}://user:pass@host:port/db"
        )
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    database = unquote(parts.path.strip("/"))
    options = dict(parse_qsl(parts.query))
    if parts.scheme in ("postgres", "postgresql"):
        # Query parameters are libpq's own (sslmode=require, ...).
        return {
            "provider": "postgres", "host": parts.hostname, "port": port or 5432, "user": user,
            "password": password, "database": database, "connect_timeout": 10,
            "application_name": "locky", **options,
        }
    if options:
        raise SettingsError("LOCKY_DATABASE_URL takes no query parameters for mysql://")
    return {
        "provider": "mysql", "host": parts.hostname, "port": port or 3306, "user": user,
        "password": password, "database": database, "charset": "utf8mb4", "connect_timeout": 10,
    }


def open_database(settings: Settings):
    """A bound, mapped ``Database`` with its tables created and schema version checked."""
    db = Database()

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
    dialect = db.provider.dialect
    try:
        collation = _mysql_collation(db) if dialect == "MySQL" else MYSQL_COLLATIONS[-1]
        if dialect == "PostgreSQL":
            _use_bigserial(db.provider)
        entities = define_entities(db, dialect, collation)
        db.generate_mapping(create_tables=False, check_tables=False)
        prepare_schema(db)
    except SettingsError:
        db.disconnect()
        raise
    except Exception as exc:
        db.disconnect()
        raise SettingsError(
            f"cannot prepare the database schema: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    return db, entities


@db_session(ddl=True)
def prepare_schema(db: Database) -> None:
    """Create missing tables and check the stored schema version, under a lock."""
    provider = db.provider
    connection = db.get_connection()
    with _schema_lock(db, connection):
        meta = provider.quote_name("locky_meta")
        key, number = provider.quote_name("key"), provider.quote_name("number")
        stored = {}
        if provider.table_exists(connection, "locky_meta"):
            stored = dict(db.select(f"SELECT {key}, {number} FROM {meta}"))
        version = stored.get("schema_version")
        if version is not None and version > SCHEMA_VERSION:
            raise SettingsError(
                f"the database schema is version {version}, newer than this Locky understands"
                f" ({SCHEMA_VERSION}): upgrade Locky, or point LOCKY_DATABASE_URL at another database"
            )
        if version is not None and version < SCHEMA_VERSION:
            raise SettingsError(
                f"the database schema is version {version}; this Locky needs version {SCHEMA_VERSION}"
                " and has no migration from it"
            )
        db.schema.create_tables(provider, connection)
        db.schema.check_tables(provider, connection)
        if provider.dialect == "MySQL":
            _check_mysql_collations(db)
        for name, value in (("schema_version", SCHEMA_VERSION), ("policy_revision", 1)):
            if name not in stored:
                db.execute(
                    f"INSERT INTO {meta} ({key}, {number}) VALUES ($name, $value)",
                    {"name": name, "value": value},
                )


def _check_mysql_collations(db: Database) -> None:
    """Refuse tables made elsewhere with a case- or accent-insensitive collation: the
    uniqueness rules would differ from the other engines'."""
    tables = ", ".join(f"'{table.name}'" for table in db.schema.tables.values())
    rows = db.select(
        "SELECT table_name, table_collation FROM information_schema.tables"
        f" WHERE table_schema = DATABASE() AND table_name IN ({tables})"
    )
    wrong = sorted((name, collation) for name, collation in rows if not collation.endswith("_bin"))
    if wrong:
        name, collation = wrong[0]
        raise SettingsError(
            f"table {name} uses collation {collation}; Locky needs utf8mb4 with a binary collation:"
            f" ALTER TABLE {name} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
        )


@contextmanager
def _schema_lock(db: Database, connection):
    dialect = db.provider.dialect
    if dialect == "PostgreSQL":
        # Released by the commit or rollback that ends the session.
        db.execute(f"SELECT pg_advisory_xact_lock({PG_SCHEMA_LOCK})")
        yield
    elif dialect == "MySQL":
        # Named locks are server-wide: name it after the database.
        name = "MD5(CONCAT('locky-schema:', DATABASE()))"
        got = db.select(f"SELECT GET_LOCK({name}, {SCHEMA_LOCK_TIMEOUT})")[0]
        if got != 1:
            raise SettingsError(
                f"another process held the schema lock for {SCHEMA_LOCK_TIMEOUT}s; try again"
            )
        try:
            yield
        finally:
            db.select(f"SELECT RELEASE_LOCK({name})")
    else:  # SQLite: the DDL session already holds the write lock (BEGIN IMMEDIATE)
        yield


@db_session
def _mysql_collation(db: Database) -> str:
    """The best of :data:`MYSQL_COLLATIONS` the server has."""
    names = ", ".join(f"'{name}'" for name in MYSQL_COLLATIONS)
    found = set(db.select(f"SELECT collation_name FROM information_schema.collations WHERE collation_name IN ({names})"))
    return next(name for name in MYSQL_COLLATIONS if name in found or name == MYSQL_COLLATIONS[-1])


def _use_bigserial(provider) -> None:
    """Make auto-increment ids 64-bit on PostgreSQL, as on the other engines.

    Pony 0.7 writes ``SERIAL`` (32-bit) for every auto primary key on PostgreSQL, even
    with ``size=64``; the contract's ids are 64-bit. Set on this provider instance only.
    """
    from pony.orm.dbproviders.postgres import PGColumn, PGSchema

    class BigSerialColumn(PGColumn):
        @property
        def auto_template(self) -> str:
            return "BIGSERIAL PRIMARY KEY" if self.sql_type.upper() == "BIGINT" else "SERIAL PRIMARY KEY"

    class BigSerialSchema(PGSchema):
        column_class = BigSerialColumn

    provider.dbschema_cls = BigSerialSchema


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
