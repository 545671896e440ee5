"""Fast response dumping for the record schemas on the hot read paths.

``Schema.dump`` costs ~15 µs per record (its field machinery, ``strftime``); a page of
50 records was most of a list request's time. :func:`dumper` compiles a schema made
only of plain fields (integers, strings, booleans, Locky's ``Timestamp``, lists of
nested plain schemas) into a function giving the same dict; any other schema (hooks,
``data_key``/``attribute``, other field types) keeps ``schema.dump``.
``tests/test_perf_invariants.py`` checks that both give identical output.
"""

from __future__ import annotations

from typing import Any, Callable

from marshmallow import Schema, fields

from locky.records import wire_time
from locky.schemas import Timestamp




_INLINE = {
    # field class -> expression over the attribute value ``v`` (as marshmallow dumps it)
    fields.String: "v if v.__class__ is str or v is None else str(v)",
    fields.Integer: "v if v.__class__ is int or v is None else int(v)",
    fields.Boolean: "v if v.__class__ is bool or v is None else bool(v)",
}


def _field_code(field: fields.Field, helpers: dict) -> str | None:
    """An expression over ``v`` giving the dumped value, or None when not supported."""
    kind = type(field)
    if kind is Timestamp:
        helpers["_wire_time"] = wire_time
        return "None if v is None else _wire_time(v)"
    if kind is fields.Integer and field.as_string:
        return None
    if kind in _INLINE:
        return _INLINE[kind]
    if kind is fields.List and type(field.inner) is fields.Nested and not field.inner.many:
        nested = field.inner.schema
        inner = _compile(nested) if isinstance(nested, Schema) else None
        if inner is None:
            return None
        name = f"_nested{len(helpers)}"
        helpers[name] = inner
        return f"None if v is None else [{name}(item) for item in v]"
    return None


def _compile(schema: Schema) -> Callable[[Any], dict] | None:
    if schema._hooks and any(schema._hooks.values()):
        return None
    if schema.only or schema.exclude:
        return None
    helpers: dict[str, Any] = {}
    lines = []
    for name, field in schema.dump_fields.items():
        if field.data_key not in (None, name) or field.attribute not in (None, name) or not name.isidentifier():
            return None
        code = _field_code(field, helpers)
        if code is None:
            return None
        lines.append(f"    v = obj.{name}\n    out[{name!r}] = {code}\n")
    source = "def dump(obj):\n    out = {}\n" + "".join(lines) + "    return out\n"
    namespace = dict(helpers)
    exec(compile(source, f"<locky.dump {type(schema).__name__}>", "exec"), namespace)
    return namespace["dump"]


def dumper(schema: Schema) -> Callable[[Any], dict]:
    """A function dumping one object exactly as ``schema.dump(obj)`` does."""
    return _compile(schema) or schema.dump


#: What a plain field is, for :func:`plain_fields`: ``"timestamp"``, ``"bool"`` or ``"value"``.
_PLAIN = {Timestamp: "timestamp", fields.Boolean: "bool", fields.String: "value", fields.Integer: "value"}


def plain_fields(schema: Schema) -> tuple[tuple[str, str], ...] | None:
    """``(name, kind)`` of each of ``schema``'s dumped fields, in its output order, when
    every one is a plain field (text, integer, boolean or timestamp, dumped under its own
    name) and the schema has no hooks; ``None`` otherwise. A storage that lists such
    records as JSON-ready rows (:class:`locky.providers.DocumentPages`) gives a page
    equal to dumping each record with ``schema``, without building the records."""
    if (schema._hooks and any(schema._hooks.values())) or schema.only or schema.exclude:
        return None
    found = []
    for name, field in schema.dump_fields.items():
        kind = _PLAIN.get(type(field))
        if kind is None or (type(field) is fields.Integer and field.as_string):
            return None
        if field.data_key not in (None, name) or field.attribute not in (None, name):
            return None
        found.append((name, kind))
    return tuple(found)
