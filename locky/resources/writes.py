"""Helpers shared by the write resources under ``/v1/private``."""

from __future__ import annotations

import falcon

from locky.errors import NotFound
from locky.http.media import load, read_json

from .records import location


def body(context, req, schema) -> dict:
    """The validated JSON body (400/413/415 otherwise)."""
    return load(schema, read_json(req, context.settings.max_body_bytes))


def live(store, id: int):
    """The live record ``id`` of ``store`` or a 404, as stored now: never a read replica's
    answer (not inside :func:`locky.cache.stale_reads`), which would 404 a record
    created a moment ago."""
    record = store.get(id)
    if record is None:
        raise NotFound()
    return record


def audited(context, event: str, target_type: str, write, details=None):
    """Run ``write()`` (a store call returning a record) and record ``event`` about the
    record it returns, in one transaction (docs/http/audit.md: no change without its event);
    plugins hear of it, with the record, once that transaction committed (docs/events.md).
    ``details`` is a dict, or a function of the record giving one."""
    with context.storage.atomic():
        record = write()
        context.audit.record(event, target_type=target_type, target_uuid=record.uuid,
                             details=details(record) if callable(details) else details, record=record)
    return record


def created(resp, kind: str, schema, record) -> None:
    """201 with the record and its ``Location``."""
    resp.status = falcon.HTTP_201
    resp.location = location(kind, record.id)
    resp.media = schema.dump(record)


def updated(resp, schema, record) -> None:
    resp.media = schema.dump(record)


def deleted(resp) -> None:
    resp.status = falcon.HTTP_204
