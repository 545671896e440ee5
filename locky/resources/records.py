"""Reads shared by every record kind: list, count and get, under ``/v1/internal``.

These are the only reads that say they can take an answer a little behind the latest
writes (:func:`locky.cache.stale_reads`): a storage with read replicas may
answer them from one within its lag bound. The policy check before each stays fresh, as
does every read of the writes, authentication and the authorization API."""

from __future__ import annotations

from dataclasses import dataclass

from marshmallow import Schema

from locky.dump import dumper, plain_fields
from locky.errors import NotFound
from locky.http.media import QueryLoader
from locky.providers import DocumentPages
from locky.routes import ID_PARAMETER, Operation, Route
from locky.cache import stale_reads


@dataclass(frozen=True)
class Kind:
    """How one record kind is read and shown."""

    name: str  # "users": the storage attribute, list key and policy resource
    title: str  # "User": the Swagger definition name
    schema: Schema
    filters: Schema
    list_schema: type[Schema]

    @property
    def filter_names(self) -> tuple[str, ...]:
        return tuple(k for k in self.filters.fields if k not in ("limit", "after_id"))


class RecordReads:
    """``GET /v1/internal/{kind}``, ``/count`` and ``/{id}`` for one kind."""

    def __init__(self, context, kind: Kind):
        self.context = context
        self.kind = kind
        self.store = getattr(context.storage, kind.name)
        self.dump = dumper(kind.schema)  # same output as kind.schema.dump, compiled
        self.load_query = QueryLoader(kind.filters)
        # The fields a store that shapes its rows for JSON itself (DocumentPages) lists
        # without records; None when the store cannot or the schema is not plain.
        self.document_fields = plain_fields(kind.schema) if isinstance(self.store, DocumentPages) else None

    def _query(self, req) -> dict:
        self.context.require(req.context.identity, self.kind.name, "read")
        return self.load_query(req)

    def on_get(self, req, resp) -> None:
        query = self._query(req)
        if self.document_fields is not None:
            with stale_reads():
                page = self.store.list_documents(self.document_fields, **query)
            items = page.items
        else:
            with stale_reads():
                page = self.store.list(**query)
            items = list(map(self.dump, page.items))
        resp.media = {self.kind.name: items, "next_after_id": page.next_after_id}

    def on_get_count(self, req, resp) -> None:
        query = self._query(req)
        query.pop("limit"), query.pop("after_id")
        with stale_reads():
            count = self.store.count(**query)
        resp.media = {"count": count}

    def on_get_item(self, req, resp, id: int) -> None:
        self.context.require(req.context.identity, self.kind.name, "read")
        with stale_reads():
            record = self.store.get(id)
        if record is None:
            raise NotFound()
        resp.media = self.dump(record)


def read_routes(context, kind: Kind) -> list[Route]:
    """The three read routes of ``kind``, described for Swagger."""
    resource = RecordReads(context, kind)
    base = f"/v1/internal/{kind.name}"
    tag = kind.name
    return [
        Route(base, resource, (
            Operation("get", f"List {kind.name}", tag, response=kind.list_schema, query=kind.filters,
                      errors=(400, 401, 403, 503),
                      description=f"Keyset paging by id; exact filters: {', '.join(kind.filter_names)}."),
        )),
        Route(f"{base}/count", resource, (
            Operation("get", f"Count {kind.name}", tag, response="Count", query=kind.filters,
                      errors=(400, 401, 403, 503)),
        ), suffix="count"),
        Route(f"{base}/{{id:id}}", resource, (
            Operation("get", f"Get one {kind.title.lower()}", tag, response=kind.title,
                      errors=(401, 403, 404, 503)),
        ), suffix="item"),
    ]


def location(kind: str, record_id: int) -> str:
    """Where record ``record_id`` of ``kind`` is read (the item route of
    :func:`read_routes`): the ``Location`` of the 201 that created it."""
    return f"/v1/internal/{kind}/{record_id}"


__all__ = ["ID_PARAMETER", "Kind", "RecordReads", "location", "read_routes"]
