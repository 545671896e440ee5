"""The audit trail and webhooks under ``/v1`` (docs/http/audit.md).

- ``GET /v1/internal/audit``: the trail, keyset paged, filtered (``audit`` × ``read``).
  No route changes or deletes an event: ``locky audit prune`` is the operator's only way.
- Webhooks (``webhooks`` × ``create``/``read``/``delete``/``replay``; admins in the
  shipped policy): subscribe, list, unsubscribe, read a subscription's deliveries and
  replay one.
"""

from __future__ import annotations

import secrets
import uuid
from urllib.parse import urlsplit, urlunsplit

import falcon

from locky import audit
from locky.audit.schemas import (
    AuditEventSchema,
    AuditQuerySchema,
    DeliverySchema,
    PageQuerySchema,
    WebhookRequestSchema,
    WebhookSchema,
)
from locky.dump import dumper
from locky.errors import Invalid, NotFound
from locky.http.media import load_query
from locky.records import utcnow
from locky.routes import Operation, Route
from locky.webhooks.sender import webhook_sealer
from locky.webhooks.targets import TargetRefused, check

from .records import location
from .writes import body

AUDIT, WEBHOOK, DELIVERY = AuditEventSchema(), WebhookSchema(), DeliverySchema()
READ_ERRORS = (400, 401, 403, 503)


def shown_url(url: str) -> str:
    """``url`` without its query and fragment, for the trail (a query may hold a token)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class AuditTrail:
    def __init__(self, context):
        self.context = context
        self.dump = dumper(AUDIT)

    def on_get(self, req, resp):
        self.context.require(req.context.identity, "audit", "read")
        query = load_query(AuditQuerySchema(names=self.context.audit.names), req)
        pattern = query.pop("event", None)
        if pattern == "*":
            pattern = None
        elif pattern is not None and pattern.endswith(".*"):
            query["event_prefix"] = pattern[:-1]
        elif pattern is not None:
            query["event"] = pattern
        page = self.context.storage.audit.list(**query)
        resp.media = {"events": [self.dump(item) for item in page.items], "next_after_id": page.next_after_id}


class WebhookResource:
    def __init__(self, context):
        self.context = context
        self.store = context.storage.webhooks
        self.dump = dumper(WEBHOOK)


class WebhookReads(WebhookResource):
    """``GET /v1/internal/webhooks[/{id}]``."""

    def on_get(self, req, resp):
        self.context.require(req.context.identity, "webhooks", "read")
        page = self.store.list(**load_query(PageQuerySchema(), req))
        resp.media = {"webhooks": [self.dump(item) for item in page.items], "next_after_id": page.next_after_id}

    def on_get_item(self, req, resp, id: int):
        self.context.require(req.context.identity, "webhooks", "read")
        webhook = self.store.get(id)
        if webhook is None:
            raise NotFound()
        resp.media = self.dump(webhook)


class WebhookWrites(WebhookResource):
    """``POST /v1/private/webhooks``; ``DELETE /v1/private/webhooks/{id}``."""

    def on_post(self, req, resp):
        self.context.require(req.context.identity, "webhooks", "create")
        data = body(self.context, req, WebhookRequestSchema(names=self.context.audit.names))
        try:
            url = check(data["url"], allow_private=self.context.settings.webhook_allow_private)
        except TargetRefused as exc:
            raise Invalid.one("url", str(exc)) from None
        secret = "whsec_" + secrets.token_urlsafe(32)
        webhook_uuid = str(uuid.uuid4())
        sealed = webhook_sealer(self.context).seal(secret, webhook_uuid)
        storage = self.context.storage
        with storage.atomic():
            webhook = self.store.create(uuid=webhook_uuid, url=url, events=data["events"],
                                        description=data["description"], secret=sealed, created_at=utcnow())
            self.context.audit.record(audit.WEBHOOK_CREATED, target_type="webhook", target_uuid=webhook.uuid,
                                      details={"id": webhook.id, "url": shown_url(url),
                                               "events": list(webhook.events)})
        resp.status = falcon.HTTP_201
        resp.location = location("webhooks", webhook.id)
        resp.media = {**self.dump(webhook), "secret": secret}

    def on_delete_item(self, req, resp, id: int):
        self.context.require(req.context.identity, "webhooks", "delete")
        with self.context.storage.atomic():
            webhook = self.store.delete(id)
            if webhook is None:
                raise NotFound()
            self.context.audit.record(audit.WEBHOOK_DELETED, target_type="webhook", target_uuid=webhook.uuid,
                                      details={"id": webhook.id, "url": shown_url(webhook.url)})
        resp.status = falcon.HTTP_204


class Deliveries:
    """A subscription's deliveries, and replaying one."""

    def __init__(self, context):
        self.context = context
        self.dump = dumper(DELIVERY)

    def _webhook(self, id: int):
        webhook = self.context.storage.webhooks.get(id)
        if webhook is None:
            raise NotFound()
        return webhook

    def on_get(self, req, resp, id: int):
        self.context.require(req.context.identity, "webhooks", "read")
        query = load_query(PageQuerySchema(), req)
        self._webhook(id)
        page = self.context.storage.deliveries.list(id, **query)
        resp.media = {"deliveries": [self.dump(item) for item in page.items], "next_after_id": page.next_after_id}

    def on_post_replay(self, req, resp, id: int, delivery_id: int):
        self.context.require(req.context.identity, "webhooks", "replay")
        self._webhook(id)
        storage = self.context.storage
        original = storage.deliveries.get(delivery_id)
        if original is None or original.webhook_id != id:
            raise NotFound()
        again = storage.deliveries.queue(webhook_id=id, event_uuid=original.event_uuid, event=original.event,
                                         payload=original.payload, created_at=utcnow())
        self.context.webhook_sender.wake()
        resp.status = falcon.HTTP_202
        resp.media = self.dump(again)


def routes(context) -> list[Route]:
    reads, writes, deliveries = WebhookReads(context), WebhookWrites(context), Deliveries(context)
    return [
        Route("/v1/internal/audit", AuditTrail(context), (
            Operation("get", "The audit trail", "audit", response="AuditList", query=AuditQuerySchema,
                      errors=READ_ERRORS,
                      description="Security events, oldest first, keyset paged by id. Filters: event (a name,"
                                  " or a prefix ending in .*), actor_uuid, target_uuid, since, until"
                                  " (RFC 3339). Nothing changes or deletes an event through the API."),
        )),
        Route("/v1/private/webhooks", writes, (
            Operation("post", "Subscribe a URL to events", "webhooks", status=201, body="WebhookRequest",
                      response="WebhookCreated", errors=(400, 401, 403, 413, 415, 503),
                      headers={"Location": "The new webhook's URL."},
                      description="Answers the secret that signs every delivery, this once. The URL must be"
                                  " https:// or http://, and not a private, loopback or link-local address"
                                  " (unless LOCKY_WEBHOOK_ALLOW_PRIVATE)."),
        )),
        Route("/v1/internal/webhooks", reads, (
            Operation("get", "List webhooks", "webhooks", response="WebhookList", query=PageQuerySchema,
                      errors=READ_ERRORS),
        )),
        Route("/v1/internal/webhooks/{id:id}", reads, (
            Operation("get", "Get one webhook", "webhooks", response="Webhook", errors=(401, 403, 404, 503)),
        ), suffix="item"),
        Route("/v1/private/webhooks/{id:id}", writes, (
            Operation("delete", "Delete a webhook", "webhooks", status=204, errors=(401, 403, 404, 503),
                      description="Its pending deliveries are dropped."),
        ), suffix="item"),
        Route("/v1/internal/webhooks/{id:id}/deliveries", deliveries, (
            Operation("get", "A webhook's deliveries", "webhooks", response="DeliveryList", query=PageQuerySchema,
                      errors=(400, 401, 403, 404, 503),
                      description="Oldest first, keyset paged: status pending, succeeded or failed."),
        )),
        Route("/v1/private/webhooks/{id:id}/deliveries/{delivery_id:id}/replay", deliveries, (
            Operation("post", "Send a delivery again", "webhooks", status=202, response="Delivery",
                      errors=(401, 403, 404, 503),
                      description="Queues the same event (same Locky-Event-Id and body) as a new delivery."),
        ), suffix="replay"),
    ]
