"""The read layer of the Pony backend: every read of a record, in plain SQL, and the
records built from their rows.

A read (one record by id or by unique values, a keyset page, a count, the
authentication read) is one SELECT, written here from the entities' mapping (table and
column names, and how each column's value becomes a record field, follow it) and run by
:class:`~.reader.Reader`. Rows become :mod:`locky.records` dataclasses directly:
Pony's entity layer would cost ~100-300 µs per row in value checks and date parsing (an
item read by id on an SQLite file: ~11 µs here, ~100 µs through ``Entity.get``). Of
the kinds that are soft-deleted (a ``del_token`` column) only live rows
(``del_token = 0``) are read.

Users, groups, members, roles, sessions, webhooks, webhook deliveries, TOTP states,
single-use codes (by hash), the active signing key of each algorithm, OAuth clients,
consents and authorization codes (by hash) read here. What still reads
through Pony's entities, and why: a write's own reads (it locks the row first and
decides on what the lock found, :mod:`.stores`); the audit trail's list (ranges and a
prefix, which this module's equality filters do not express; an operator's page, not
a hot path); the signing keys' full list, the grants' role names and the codes' count
in a window (read on a key rotation, a policy reload and a code request: no record
page, and rare).
Which filters a kind has, and how their values are normalised, is the stores' business
(:mod:`.stores`); this module takes them as given. Reads by id, pages and counts may be
answered by a read replica (``stale_ok``, :mod:`.replicas`) when their caller asked for
a read that can be a little stale and no cache will keep it
(:func:`locky.cache.stale_ok`): only the read API's lists, counts and reads by
id do. Reads by unique values (logins find users by email) and the authentication read
never are.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any, Callable

from pony.orm import Json

from locky import Authenticated, MAX_ID, Page, Permission, Session, User

from . import compat
from .reader import Reader, Statement

#: The ``locky_meta`` key of the number every change to a user's record moves (schema
#: step 7; :func:`.stores.move_cache_revision`), read with every authentication.
CACHE_REVISION = "cache_revision"

def is_id(value: Any) -> bool:
    """Whether ``value`` can name a row: an ``int`` (not a ``bool``) from 1 to MAX_ID."""
    return type(value) is int and 0 < value <= MAX_ID


def _datetime(value):
    if value is None or isinstance(value, datetime):
        return value
    # SQLite: Pony's "YYYY-MM-DD HH:MM:SS[.ffffff]"; MySQL/MariaDB packed rows: the same;
    # PostgreSQL packed rows: JSON's "YYYY-MM-DDTHH:MM:SS[.f...]".
    return datetime.fromisoformat(value)


def _permissions(value) -> tuple[Permission, ...]:
    # Text on SQLite; in a packed row the JSON itself (MariaDB, PostgreSQL) or its text.
    if isinstance(value, (str, bytes)):
        value = json.loads(value)
    return tuple(Permission(p["resource"], p["action"]) for p in value)


def _json(value):
    # Text on SQLite; in a packed row (MySQL/MariaDB, PostgreSQL) the JSON itself or its text.
    return json.loads(value) if isinstance(value, (str, bytes)) else value


#: Record fields whose stored form is not the record's: by field name.
SHAPES: dict[str, Callable[[Any], Any]] = {
    "permissions": _permissions,
    "events": lambda value: tuple(_json(value)),
    "details": lambda value: dict(_json(value) or {}),
    "recovery_hashes": lambda value: tuple((value or "").split()),
    # How a user authenticated (a session's, an authorization code's): space-separated.
    "amr": lambda value: tuple((value or "").split()),
    # An OAuth client's lists and a consent's scopes: JSON arrays.
    "redirect_uris": lambda value: tuple(_json(value)),
    "post_logout_redirect_uris": lambda value: tuple(_json(value)),
    "grant_types": lambda value: tuple(_json(value)),
    "scopes": lambda value: tuple(_json(value)),
    # A passkey's transport hints: a JSON array.
    "transports": lambda value: tuple(_json(value)),
}


def record_builder(record) -> Callable[[Any], Any]:
    """The builder of ``record`` (a :mod:`locky.records` dataclass) from an entity row,
    or from the values a write wrote (:class:`.inserts.Written`): each field is the
    column of its name, in the form the record holds (:data:`SHAPES`; Pony already gives
    timestamps and booleans as such). What the writes answer; the reads build theirs
    from rows with :class:`Columns`."""
    fields = [(f.name, SHAPES.get(f.name)) for f in dataclasses.fields(record)]

    def build(row):
        return record(*[getattr(row, name) if shape is None else shape(getattr(row, name))
                        for name, shape in fields])

    build.__name__ = f"{record.__name__.lower()}_record"
    return build


def _converter(entity, record_field: dataclasses.Field) -> Callable[[Any], Any] | None:
    """How the column of ``record_field`` becomes the field: by its name for the shapes
    above, else by the entity attribute's type (timestamps, booleans); ``None``: as is."""
    shape = SHAPES.get(record_field.name)
    if shape is not None:
        return shape
    kind = compat.attribute_type(entity, record_field.name)
    if kind is datetime:
        return _datetime
    if kind is bool:
        return bool
    return None


def column(provider, entity, name: str) -> str:
    return provider.quote_name(compat.column(entity, name))


def selected(reader: Reader, entity, name: str, sql: str) -> str:
    """``sql`` (the column ``name`` of ``entity``, or an expression of it) as a select
    list of ``reader`` names it. In a packed row on MySQL/MariaDB text is given one
    collation: ``JSON_ARRAY`` refuses to mix the tables' binary collation with the JSON
    columns' ``utf8mb4_bin`` ("Illegal mix of collations")."""
    if reader.dialect == "MySQL" and reader.packs_rows and issubclass(compat.attribute_type(entity, name), (str, Json)):
        return f"CONVERT({sql} USING utf8mb4)"
    return sql


class Columns:
    """The columns of ``entity`` that make a ``record`` dataclass, in its field order."""

    def __init__(self, reader: Reader, entity, record, alias: str = ""):
        provider = reader.db.provider
        self.record = record
        fields = list(dataclasses.fields(record))
        prefix = f"{alias}." if alias else ""
        self.sql = ", ".join(selected(reader, entity, f.name, prefix + column(provider, entity, f.name))
                             for f in fields)
        self.converters = [(i, c) for i, c in enumerate(_converter(entity, f) for f in fields) if c is not None]
        self.table = provider.quote_name(compat.table(entity))
        self.width = len(fields)
        #: ``build(row, start=0)``: the record from the row's columns from ``start`` on,
        #: each converted as :attr:`converters` say; compiled once (one call building the
        #: record, no list of values and no loop: every record read builds through it).
        self.build = self._compile()

    def _compile(self) -> Callable[..., Any]:
        namespace: dict[str, Any] = {"_record": self.record}
        converted = dict(self.converters)
        values = []
        for i in range(self.width):
            if i in converted:
                namespace[f"_convert{i}"] = converted[i]
                values.append(f"_convert{i}(row[start + {i}])")
            else:
                values.append(f"row[start + {i}]")
        source = f"def build(row, start=0):\n    return _record({', '.join(values)})\n"
        exec(compile(source, f"<locky_pony build {self.record.__name__}>", "exec"), namespace)
        return namespace["build"]


#: The most values one ``IN`` list of a read holds; more take more statements.
IN_CHUNK = 128


def padded(values: list) -> list:
    """``values`` (not empty) with the last repeated up to the next power of two, so that
    a handful of statement texts serve every number of values: each is prepared once per
    connection on PostgreSQL (:mod:`.reader`), not once per size."""
    size = 1
    while size < len(values):
        size *= 2
    return values + [values[-1]] * (size - len(values))


def chunks(values: list) -> list[list]:
    """``values`` cut into lists of at most :data:`IN_CHUNK`."""
    return [values[i:i + IN_CHUNK] for i in range(0, len(values), IN_CHUNK)]


def in_list(sql_column: str, size: int) -> str:
    """``column IN (...)`` with ``size`` parameters."""
    return f"{sql_column} IN ({', '.join(['{}'] * size)})"


class RecordReads:
    """The reads of one record kind: by id, by unique values, pages and counts."""

    def __init__(self, reader: Reader, entity, record):
        provider = reader.db.provider
        self.reader = reader
        self.provider = provider
        self.entity = entity
        self.columns = Columns(reader, entity, record)
        attributes = compat.plain_attributes(entity)
        #: Pages and reads by id need an ``id`` column (TOTP states have none).
        self.id_col = column(provider, entity, "id") if "id" in attributes else None
        #: The condition of a live row, for the kinds that are soft-deleted.
        self.live = f"{column(provider, entity, 'del_token')} = 0" if "del_token" in attributes else None
        self.page_from = self.columns.table
        if reader.dialect == "MySQL" and self.live is not None:
            # MariaDB reads a page through (del_token, id) as "ref" access on del_token
            # alone: from the first live row up to after_id, slower the deeper the page.
            # Without that index it takes the primary key range (id > after_id) or a
            # filter's own index: the same cost on every page. Counts still use it.
            index = provider.quote_name(f"idx_{compat.table(entity)}__del_token_id")
            self.page_from = f"{self.columns.table} IGNORE INDEX ({index})"
        #: The record's columns as a statement selects them (packed on MySQL/MariaDB).
        self.select_list = reader.select_list(self.columns.sql)
        self.by_id = None if self.id_col is None else reader.statement(
            f"SELECT {self.select_list} FROM {self.columns.table} WHERE {self.id_col} = {{}}"
            + (f" AND {self.live}" if self.live else ""), packed=True)
        # Built on first use, one per set of filter names; two threads building one at
        # once build the same statement, so no lock is needed.
        self._statements: dict[tuple, Statement] = {}
        self._shapes: dict[tuple, DocumentShape] = {}

    def _where(self, names: tuple[str, ...], *more: str) -> str:
        """The conditions of a live row whose columns ``names`` equal the statement's
        parameters, in that order, and ``more``."""
        conditions = [self.live] if self.live else []
        conditions += [f"{column(self.provider, self.entity, n)} = {{}}" for n in names]
        return " AND ".join(conditions + list(more)) or "1 = 1"

    def _statement(self, key: tuple, sql: Callable[[], str], packed: bool = False) -> Statement:
        found = self._statements.get(key)
        if found is None:
            found = self._statements[key] = self.reader.statement(sql(), packed=packed)
        return found

    def get(self, id: int):
        """The live record with this id, or ``None``."""
        if not is_id(id):
            return None
        rows = self.reader.select(self.by_id, (int(id),), stale_ok=True)
        return self.columns.build(rows[0]) if rows else None

    def find(self, **values: Any):
        """The live record with these column values (unique among live rows), or ``None``."""
        names = tuple(sorted(values))
        statement = self._statement(("find", names), lambda: (
            f"SELECT {self.select_list} FROM {self.columns.table} WHERE {self._where(names)}"), packed=True)
        rows = self.reader.select(statement, tuple(values[n] for n in names))
        return self.columns.build(rows[0]) if rows else None

    def find_many(self, name: str, values: list, *, unique: bool = False) -> list:
        """The live records whose column ``name`` is one of ``values`` (several for a
        value where the column is not unique), in no order: one statement per
        :data:`IN_CHUNK` values, its ``IN`` list padded (:func:`padded`) so that a few
        statement texts serve every size.

        On PostgreSQL, when the column is ``unique`` (a uuid), the values come as one
        array instead, and a ``LATERAL`` subquery reads each value's row from the unique
        index, live or not: the plan is that whatever the planner knows. With the ``IN``
        list, before the table's first ``ANALYZE``, the prepared statement's generic plan
        read 128 users of 20,000 through the ``(del_token, id)`` index, or the whole
        table, comparing every row with the list: 87 ms instead of 0.7."""
        if unique and self.reader.dialect == "PostgreSQL" and self.reader.packs_rows:
            target = column(self.provider, self.entity, name)
            live = self.live is not None
            # Whether a row is live is read, not filtered on (as AuthenticationRead does):
            # with del_token = 0 in the subquery, the plan before ANALYZE walked the live
            # rows through the (del_token, id) index for each value.
            listed = self.columns.sql + (f", {column(self.provider, self.entity, 'del_token')}" if live else "")
            statement = self._statement(("find_each", name), lambda: (
                f"SELECT found.r FROM unnest({{}}::text[]) AS asked (v) CROSS JOIN LATERAL"
                f" (SELECT {self.reader.select_list(listed)} AS r FROM {self.columns.table}"
                f" WHERE {target} = asked.v LIMIT 1) found"), packed=True)
            rows = self.reader.select(statement, (list(values),))
            return [self.columns.build(row) for row in rows if not live or int(row[-1]) == 0]
        found = []
        for chunk in chunks(values):
            chunk = padded(chunk)
            statement = self._statement(("find_many", name, len(chunk)), lambda: (
                f"SELECT {self.select_list} FROM {self.columns.table}"
                f" WHERE {self._where((), in_list(column(self.provider, self.entity, name), len(chunk)))}"),
                packed=True)
            found.extend(self.columns.build(row) for row in self.reader.select(statement, tuple(chunk)))
        return found

    def every(self, **values: Any) -> list:
        """Every live record with these column values, in id order (a few: a user's
        consents)."""
        names = tuple(sorted(values))
        statement = self._statement(("every", names), lambda: (
            f"SELECT {self.select_list} FROM {self.columns.table} WHERE {self._where(names)}"
            f" ORDER BY {self.id_col}"), packed=True)
        return [self.columns.build(row) for row in self.reader.select(statement, tuple(values[n] for n in names))]

    def page(self, after_id: int, limit: int, given: dict[str, Any]) -> Page:
        """Live records matching ``given`` with ``id > after_id``, in id order."""
        items, more = self._page("page", self.select_list, self.columns.build, after_id, limit, given)
        return Page(items=items, next_after_id=items[-1].id if more else None)

    def page_documents(self, fields: tuple[tuple[str, str], ...], after_id: int, limit: int,
                       given: dict[str, Any]) -> Page:
        """:meth:`page` with each record as a dict of ``fields``, shaped by the query
        itself (:class:`locky.providers.DocumentPages`): no record is built."""
        shape = self._shapes.get(fields)
        if shape is None:
            shape = self._shapes[fields] = DocumentShape(self, fields)
        items, more = self._page(("documents", fields), shape.sql, shape.document, after_id, limit, given)
        return Page(items=items, next_after_id=items[-1]["id"] if more else None)

    def _page(self, key, select_list: str, build: Callable[[tuple], Any], after_id: int, limit: int,
              given: dict[str, Any]) -> tuple[list, bool]:
        """The rows of one keyset page, selecting ``select_list`` (from
        :meth:`Reader.select_list`), each made by ``build``; and whether more follow."""
        names = tuple(sorted(given))
        statement = self._statement((key, names), lambda: (
            f"SELECT {select_list} FROM {self.page_from}"
            f" WHERE {self._where(names, f'{self.id_col} > {{}}')} ORDER BY {self.id_col} LIMIT {{}}"), packed=True)
        rows = self.reader.select(statement, tuple(given[n] for n in names) + (int(after_id), int(limit) + 1),
                                  stale_ok=True)
        return list(map(build, rows[:limit])), len(rows) > limit

    def count(self, given: dict[str, Any]) -> int:
        """How many live records match ``given``."""
        names = tuple(sorted(given))
        statement = self._statement(("count", names), lambda: (
            f"SELECT COUNT(*) FROM {self.columns.table} WHERE {self._where(names)}"))
        return int(self.reader.select(statement, tuple(given[n] for n in names), stale_ok=True)[0][0])


#: A stored timestamp as the API shows it ("YYYY-MM-DDTHH:MM:SS.ffffffZ"), in SQL, per
#: dialect; ``{}`` is the column. A NULL stays NULL. Pony keeps timestamps as naive UTC:
#: on PostgreSQL as ``timestamp``, on MySQL/MariaDB as ``DATETIME(6)``.
TIMESTAMP_SQL = {
    "PostgreSQL": """to_char({0}, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""",
    "MySQL": "CONCAT(REPLACE(CAST({0} AS CHAR), ' ', 'T'), 'Z')",
}
#: The same on SQLite, in Python: Pony keeps the text "YYYY-MM-DD HH:MM:SS.ffffff"
#: there, and a row written another way may hold a whole second without the fraction
#: (19 characters); ``{0}`` is the value. The same in SQL (``CASE length(...)``,
#: ``replace`` and ``||``) made the statement for a page of 50 users cost ~96 µs with its
#: dicts, against ~77 µs here: SQLite runs each of those calls in its VM.
TIMESTAMP_PYTHON = ("(None if {0} is None else {0}.replace(' ', 'T')"
                    " + ('.000000Z' if len({0}) == 19 else 'Z'))")


#: The kind (:func:`locky.dump.plain_fields`) of a record field, by its converter here.
PLAIN_KINDS = {None: "value", _datetime: "timestamp", bool: "bool"}


class DocumentShape:
    """The select list giving ``fields`` of a record kind ready for JSON, and the
    function turning one of its rows into the dict (booleans need Python: SQLite and
    MySQL give them as 0 and 1; and on SQLite, timestamps: see ``TIMESTAMP_PYTHON``)."""

    def __init__(self, reads: RecordReads, fields: tuple[tuple[str, str], ...]):
        # The kind each plain field of the record has; other fields (permissions) have none.
        kinds = {f.name: PLAIN_KINDS.get(_converter(reads.entity, f))
                 for f in dataclasses.fields(reads.columns.record)}
        wrong = [f"{name} ({kind})" for name, kind in fields if kinds.get(name) is None or kinds[name] != kind]
        if wrong or not fields:
            raise ValueError(f"not a plain field of the record: {', '.join(wrong) or '(none given)'}")
        timestamp = TIMESTAMP_SQL.get(reads.reader.dialect)  # None: SQLite, in Python
        columns, values = [], []
        for i, (name, kind) in enumerate(fields):
            col = column(reads.provider, reads.entity, name)
            value = f"row[{i}]"
            if kind == "timestamp" and timestamp is None:
                value = TIMESTAMP_PYTHON.format(value)
            elif kind == "timestamp":
                col = timestamp.format(col)
            elif kind == "bool":
                value = f"{value} == 1"
            columns.append(selected(reads.reader, reads.entity, name, col))
            values.append(f"{name!r}: {value}")
        self.sql = reads.reader.select_list(", ".join(columns))
        source = "def document(row):\n    return {" + ", ".join(values) + "}\n"
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<locky_pony document {reads.columns.record.__name__}>", "exec"), namespace)
        self.document = namespace["document"]


class AuthenticationRead:
    """A live session, its live user and the policy revision, in one statement.

    Whether the user is live is read (its ``del_token``), not filtered on: the join by
    the user's unique uuid finds one row either way, and a filter on ``del_token`` let
    PostgreSQL, before its first ``ANALYZE`` of a new database, drive the join through
    the ``(del_token, id)`` index and filter every live user on the uuid."""

    def __init__(self, reader: Reader, entities):
        provider = reader.db.provider
        q = provider.quote_name
        self.reader = reader
        self.session_cols = Columns(reader, entities.Session, Session, "s")
        self.user_cols = Columns(reader, entities.User, User, "u")
        S, U, M = entities.Session, entities.User, entities.Meta

        def meta(key: str) -> str:
            return (f"(SELECT m.{column(provider, M, 'number')} FROM {q(compat.table(M))} m"
                    f" WHERE m.{column(provider, M, 'key')} = '{key}')")

        #: Called with the cache revision each authentication read (:mod:`.revision_bus`).
        self.on_cache_revision: Callable[[int], None] | None = None
        select_list = reader.select_list(f"{self.session_cols.sql}, {self.user_cols.sql},"
                                         f" {meta('policy_revision')}, {meta(CACHE_REVISION)},"
                                         f" u.{column(provider, U, 'del_token')}")
        self.statement = reader.statement(
            f"SELECT {select_list}"
            f" FROM {q(compat.table(S))} s JOIN {q(compat.table(U))} u"
            f" ON u.{column(provider, U, 'uuid')} = s.{column(provider, S, 'user_uuid')}"
            f" WHERE s.{column(provider, S, 'uuid')} = {{}} AND s.{column(provider, S, 'revoked_at')} IS NULL",
            packed=True)

    def authenticate(self, session_uuid: str) -> Authenticated | None:
        if not isinstance(session_uuid, str):
            return None
        rows = self.reader.select(self.statement, (session_uuid,))
        if not rows:
            return None
        *row, policy_revision, cache_revision, del_token = rows[0]
        if self.on_cache_revision is not None and cache_revision is not None:
            self.on_cache_revision(int(cache_revision))
        if int(del_token) != 0:
            return None  # the user is deleted
        return Authenticated(
            session=self.session_cols.build(row),
            user=self.user_cols.build(row, self.session_cols.width),
            policy_revision=int(policy_revision),
        )
