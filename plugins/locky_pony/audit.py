"""The audit trail and webhook stores of the Pony backend (docs/http/audit.md).

Audit events and deliveries are written inside the caller's ``atomic()`` block, with the
change they record; each method here is otherwise its own :func:`~.guard.transaction`.
Deliveries are claimed as the mail outbox's letters are: ``FOR UPDATE SKIP LOCKED``
where the engine has row locks, SQLite's write lock elsewhere. Webhooks and deliveries
are read through the read layer (:mod:`.reads`), as users are; the audit trail's list,
whose filters are ranges and a prefix, through Pony's query builder (see :mod:`.reads`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable

from locky import AuditEvent, Delivery, Page, Webhook
from locky.storage import FAILED, PENDING, SUCCEEDED, selects

from .guard import transaction
from .inserts import insert
from .lifecycle import skip_locked
from .reader import Reader
from .reads import RecordReads, is_id, record_builder


#: The records the writes answer, built from the row (or the values written).
audit_record = record_builder(AuditEvent)
webhook_record = record_builder(Webhook)
delivery_record = record_builder(Delivery)


def _page(rows: list, limit: int, record) -> Page:
    more = len(rows) > limit
    items = [record(row) for row in rows[:limit]]
    return Page(items, items[-1].id if more else None)


class AuditStore:
    def __init__(self, entities):
        self.e = entities

    @transaction
    def add(self, *, uuid: str, event: str, actor_uuid: str | None, target_type: str | None,
            target_uuid: str | None, ip: str, request_id: str, details: dict, created_at: datetime) -> AuditEvent:
        row = insert(self.e.Audit, uuid=uuid, event=event, actor_uuid=actor_uuid, target_type=target_type,
                     target_uuid=target_uuid, ip=ip or "", request_id=request_id or "",
                     details=details or {}, created_at=created_at)
        return audit_record(row)

    @transaction
    def list(self, *, after_id: int = 0, limit: int = 50, event: str | None = None, event_prefix: str | None = None,
             actor_uuid: str | None = None, target_uuid: str | None = None, since: datetime | None = None,
             until: datetime | None = None, ip: str | None = None) -> Page[AuditEvent]:
        Audit = self.e.Audit
        query = Audit.select(lambda a: a.id > after_id)
        if event is not None:
            query = query.filter(lambda a: a.event == event)
        if event_prefix is not None:
            query = query.filter(lambda a: a.event.startswith(event_prefix))
        if actor_uuid is not None:
            query = query.filter(lambda a: a.actor_uuid == actor_uuid)
        if target_uuid is not None:
            query = query.filter(lambda a: a.target_uuid == target_uuid)
        if since is not None:
            query = query.filter(lambda a: a.created_at >= since)
        if until is not None:
            query = query.filter(lambda a: a.created_at < until)
        if ip is not None:
            query = query.filter(lambda a: a.ip == ip)
        rows = list(query.order_by(Audit.id).limit(limit + 1))
        return _page(rows, limit, audit_record)

    @transaction
    def prune(self, older_than: datetime, *, batch: int = 1000) -> int:
        Audit = self.e.Audit
        ids = Audit.select(lambda a: a.created_at < older_than).order_by(Audit.id).limit(batch)[:]
        if not ids:
            return 0
        top = ids[-1].id
        return Audit.select(lambda a: a.id <= top and a.created_at < older_than).delete(bulk=True)


class WebhookStore:
    #: Webhooks read through the read layer (:mod:`.reads`), a page at a time.
    PAGE = 500

    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.Webhook, Webhook)

    @transaction
    def create(self, *, uuid: str, url: str, events: Iterable[str], description: str, secret: str,
               created_at: datetime) -> Webhook:
        row = insert(self.e.Webhook, uuid=uuid, url=url, events=list(events), description=description or "",
                     secret=secret, created_at=created_at)
        return webhook_record(row)

    def get(self, id: int) -> Webhook | None:
        return self.reads.get(id)

    def list(self, *, after_id: int = 0, limit: int = 50) -> Page[Webhook]:
        return self.reads.page(after_id, limit, {})

    def matching(self, event: str) -> list[Webhook]:
        found: list[Webhook] = []
        after_id: int | None = 0
        while after_id is not None:
            page = self.reads.page(after_id, self.PAGE, {})
            found += [hook for hook in page.items if selects(hook.events, event)]
            after_id = page.next_after_id
        return found

    @transaction
    def delete(self, id: int) -> Webhook | None:
        row = self.e.Webhook.get_for_update(id=id) if is_id(id) else None
        if row is None:
            return None
        record = webhook_record(row)
        self.e.Delivery.select(lambda d: d.webhook_id == id and d.status == PENDING).delete(bulk=True)
        row.delete()
        return record


class DeliveryStore:
    def __init__(self, entities, reader: Reader):
        self.e = entities
        self.reads = RecordReads(reader, entities.Delivery, Delivery)

    @transaction
    def queue(self, *, webhook_id: int, event_uuid: str, event: str, payload: str,
              created_at: datetime) -> Delivery:
        row = insert(self.e.Delivery, webhook_id=webhook_id, event_uuid=event_uuid, event=event, payload=payload,
                     status=PENDING, created_at=created_at, next_attempt_at=created_at)
        return delivery_record(row)

    @transaction
    def claim(self, *, now: datetime, lease: int, limit: int = 10) -> list[Delivery]:
        Delivery = self.e.Delivery
        due = Delivery.select(lambda d: d.next_attempt_at <= now and (d.held_until is None or d.held_until <= now))
        if not due.exists():  # the usual answer, read without taking a lock
            return []
        rows = skip_locked(due.order_by(Delivery.next_attempt_at, Delivery.id), Delivery).limit(limit)
        held = now + timedelta(seconds=lease)
        for row in rows:
            row.held_until = held
            row.attempts += 1
        return [delivery_record(row) for row in rows]

    def _finish(self, id: int, **changes) -> None:
        row = self.e.Delivery.get_for_update(id=id)
        if row is not None:
            row.set(held_until=None, **changes)

    @transaction
    def succeeded(self, id: int, *, status_code: int, at: datetime) -> None:
        self._finish(id, status=SUCCEEDED, last_status_code=status_code, last_error="", last_attempt_at=at,
                     next_attempt_at=None)

    @transaction
    def retry(self, id: int, *, status_code: int | None, error: str, at: datetime, due_at: datetime) -> None:
        self._finish(id, last_status_code=status_code, last_error=error[:255], last_attempt_at=at,
                     next_attempt_at=due_at)

    @transaction
    def failed(self, id: int, *, status_code: int | None, error: str, at: datetime) -> None:
        self._finish(id, status=FAILED, last_status_code=status_code, last_error=error[:255], last_attempt_at=at,
                     next_attempt_at=None)

    def get(self, id: int) -> Delivery | None:
        return self.reads.get(id)

    def list(self, webhook_id: int, *, after_id: int = 0, limit: int = 50) -> Page[Delivery]:
        return self.reads.page(after_id, limit, {"webhook_id": webhook_id})

    def pending(self) -> int:
        return self.reads.count({"status": PENDING})
