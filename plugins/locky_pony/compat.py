"""Every use of Pony's private API in the storage plugin, in one place.

Pony ORM documents its entities, queries, ``db_session`` and ``Database.select``/
``execute``; the storage needs a few things beyond that. Each is a function here, so the
rest of the plugin never names a Pony internal, and ``tests/test_pony_compat.py`` runs
every one of them against the installed Pony: an upgrade that moves one fails that test,
not a request in production. Checked against Pony **0.7.20** (``PONY_CHECKED`` below); on
a Pony upgrade, run that test first and read this list.

What each touch is for (and the Pony internal it rests on):

- :func:`in_db_session`: whether the calling thread is inside a ``db_session`` (a
  caller's ``atomic()`` batch): a storage call then joins it instead of opening its own
  transaction and retrying; the reader runs its SELECT on the session's connection.
  (``pony.orm.core.local.db_session``)
- :func:`session_databases`: the databases the current session touched, so a refused
  commit is reported against the right one. (``core.local.db2cache``)
- :data:`PartialCommitException`: one of the wrappers a commit failure comes in; not
  exported by ``pony.orm``. (``core.PartialCommitException``)
- :func:`column`, :func:`attribute_type`, :func:`table`, :func:`plain_attributes`,
  :func:`column_defaults`, :func:`sql_value`, :func:`database_of`, :func:`dialect_of`: an entity's
  mapping (table, column names, Python types, plain columns and their defaults, the
  dialect of its database), from which the plain-SQL reads, the updatable fields and
  the records of inserted rows (:mod:`.inserts`) are written, so a renamed or added
  column follows the entity declaration.
  (``Entity._adict_``, ``_table_``, ``_attrs_``, ``_database_``; ``Attribute.columns``,
  ``py_type``, ``default``, ``is_collection``, ``is_relation``, ``is_pk``,
  ``converters``)
- :func:`session_connection`: the current session's connection without making the
  session immediate (``db.get_connection()`` does, which is SQLite's write lock), for
  the schema runner's catalog reads. (``Database._get_cache()``,
  ``SessionCache.prepare_connection_for_query_execution``)
- :func:`table_exists`, :func:`check_tables`, :func:`mapped_tables`: the schema runner
  asks whether a table exists and whether the tables match the entities, with Pony's
  own catalog queries. (``provider.table_exists``, ``db.schema.check_tables``,
  ``db.schema.tables``)
- :func:`call_on_connect`: a connection the reader opened itself gets the same
  ``on_connect`` setup Pony gives its own. (``Database.call_on_connect``)
- :func:`replace_pool`: the server engines get one bounded pool per process
  (:mod:`.pool`) in place of Pony's unbounded thread-local one; connections are still
  opened by Pony's pool object, the way its provider means to. (``provider.pool``,
  ``Pool.con``, ``Pool._connect``)
- :func:`veto_reconnect`: Pony reconnects once after a broken connection; not within a
  call the watchdog cut for taking too long (that would double it).
  (``provider.should_reconnect``)
- :func:`use_bigserial`: Pony writes ``SERIAL`` (32-bit) for auto ids on PostgreSQL
  even with ``size=64``; the contract's ids are 64-bit. Matters to
  :func:`check_tables`, which compares against Pony's idea of the schema.
  (``provider.dbschema_cls``, ``PGSchema.column_class``, ``PGColumn.auto_template``)
- :func:`pymysql_provider`: Pony's MySQL provider takes mysqlclient whenever it is
  importable, deciding at its first import; Locky's pool, reader and error rules are
  written for PyMySQL, so the module is imported with ``MySQLdb`` hidden.
  (``sys.modules["MySQLdb"] = None``; the module's ``mysql_module_name``)
"""

from __future__ import annotations

import importlib
import sys
import weakref
from typing import Any, Callable

from pony.orm import core

from locky import SettingsError

#: The Pony release these shims were last checked against (tests/test_pony_compat.py).
PONY_CHECKED = "0.7.20"

#: A commit that failed part way (several databases); ``pony.orm`` does not export it.
PartialCommitException = core.PartialCommitException


# -- sessions ---------------------------------------------------------------------------

def in_db_session() -> bool:
    """Whether this thread runs inside a ``db_session``."""
    return core.local.db_session is not None


def session_databases() -> tuple:
    """The ``Database`` objects the current ``db_session`` used so far."""
    return tuple(core.local.db2cache)


def session_connection(db):
    """The current session's connection, in its transaction if one began, without
    making the session immediate (no ``BEGIN IMMEDIATE`` on SQLite)."""
    return db._get_cache().prepare_connection_for_query_execution()


# -- an entity's mapping ----------------------------------------------------------------

def column(entity, name: str) -> str:
    """The (unquoted) column of the attribute ``name`` of ``entity``."""
    return entity._adict_[name].columns[0]


def attribute_type(entity, name: str) -> type:
    """The Python type of the attribute ``name`` of ``entity``."""
    return entity._adict_[name].py_type


def table(entity) -> str:
    """The (unquoted) table of ``entity``."""
    return entity._table_


def plain_attributes(entity) -> frozenset[str]:
    """The names of ``entity``'s own columns: no collection, no relation."""
    return frozenset(a.name for a in entity._attrs_ if not a.is_collection and not a.is_relation)


#: Per entity class (weakly: each app's entities go with its ``Database``).
_DEFAULTS: "weakref.WeakKeyDictionary[type, dict[str, Any]]" = weakref.WeakKeyDictionary()


def column_defaults(entity) -> dict[str, Any]:
    """Each plain column of ``entity`` (not the primary key) and its declared default
    (``None`` when it has none)."""
    found = _DEFAULTS.get(entity)
    if found is None:
        found = _DEFAULTS[entity] = {a.name: a.default for a in entity._attrs_
                                     if not a.is_collection and not a.is_relation and not a.is_pk}
    return found


def sql_value(entity, name: str, value: Any) -> Any:
    """``value`` of the attribute ``name`` as Pony hands it to the driver (a timestamp
    on SQLite: Pony's text, always with microseconds), for a plain-SQL write."""
    return entity._adict_[name].converters[0].py2sql(value)


def database_of(entity):
    """The ``Database`` ``entity`` is mapped on."""
    return entity._database_


def dialect_of(entity) -> str:
    """Pony's dialect name (``SQLite``, ``PostgreSQL``, ``MySQL``) of ``entity``'s database."""
    return database_of(entity).provider.dialect


# -- the schema runner's catalog ----------------------------------------------------------

def table_exists(db, connection, name: str) -> bool:
    """Whether the table ``name`` exists, read on ``connection``."""
    return bool(db.provider.table_exists(connection, name))


def check_tables(db, connection) -> None:
    """Raise Pony's error when a mapped table or column is missing from the database."""
    db.schema.check_tables(db.provider, connection)


def mapped_tables(db) -> list[str]:
    """The names of the tables the entities map."""
    return [t.name for t in db.schema.tables.values()]


# -- connections ----------------------------------------------------------------------------

def call_on_connect(db, connection) -> None:
    """Run ``db``'s ``on_connect`` hooks on a connection opened outside Pony's session."""
    db.call_on_connect(connection)


def replace_pool(db, make_pool: Callable[[Callable[[], Any]], Any]):
    """Give ``db`` the pool ``make_pool(open_connection)`` returns in place of Pony's;
    ``open_connection()`` opens a new connection as Pony's own pool would (its driver
    arguments and converters). The pool must offer Pony's pool interface (``connect``
    returning ``(connection, is_new)``, ``release``, ``drop``, ``disconnect``). Returns
    the new pool."""
    provider = db.provider
    old = provider.pool
    old.disconnect()  # the connection Pony opened at bind to read the server's version

    def open_connection():
        old.con = None
        old._connect()
        connection, old.con = old.con, None
        return connection

    pool = make_pool(open_connection)
    provider.pool = pool
    return pool


def pool_of(db):
    """The pool ``db``'s sessions take connections from."""
    return db.provider.pool


def veto_reconnect(db, vetoed: Callable[[], bool]) -> None:
    """Let Pony reconnect after a broken connection only while ``vetoed()`` is false."""
    should_reconnect = db.provider.should_reconnect
    db.provider.should_reconnect = lambda exc: not vetoed() and should_reconnect(exc)


def use_bigserial(db) -> None:
    """Make auto-increment 64-bit ids ``BIGSERIAL`` in Pony's idea of a PostgreSQL
    schema (this provider instance only). Call before ``generate_mapping``."""
    from pony.orm.dbproviders.postgres import PGColumn, PGSchema

    class BigSerialColumn(PGColumn):
        @property
        def auto_template(self) -> str:
            return "BIGSERIAL PRIMARY KEY" if self.sql_type.upper() == "BIGINT" else "SERIAL PRIMARY KEY"

    class BigSerialSchema(PGSchema):
        column_class = BigSerialColumn

    db.provider.dbschema_cls = BigSerialSchema


MYSQL_PROVIDER = "pony.orm.dbproviders.mysql"


def pymysql_provider():
    """Pony's MySQL provider module, speaking PyMySQL (``locky[mysql]``), imported with
    ``MySQLdb`` hidden; a host that has mysqlclient for other programs keeps it.
    Raises :class:`SettingsError` if the module was already imported with mysqlclient
    (by the embedding program's own Pony database), which cannot be undone in-process.
    """
    module = sys.modules.get(MYSQL_PROVIDER)
    if module is None:
        absent = object()
        hidden = sys.modules.get("MySQLdb", absent)
        sys.modules["MySQLdb"] = None  # type: ignore[assignment]  # "import MySQLdb" fails
        try:
            module = importlib.import_module(MYSQL_PROVIDER)
        finally:
            if hidden is absent:
                del sys.modules["MySQLdb"]
            else:
                sys.modules["MySQLdb"] = hidden
    if module.mysql_module_name != "pymysql":
        raise SettingsError("Pony's MySQL provider was imported with mysqlclient (MySQLdb) before Locky"
                            " bound its database; Locky speaks PyMySQL: create Locky's app first, or"
                            " uninstall mysqlclient")
    return module
