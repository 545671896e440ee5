"""Bodies and queries of the audit trail and webhooks (docs/http/audit.md)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates

from locky.events import NAMES as EVENTS
from locky.events import RESERVED_PREFIXES
from locky.records import CLIENT_SUBJECT_PREFIX
from locky.schemas import (
    DESCRIPTION_TEXT,
    TEXT_PATTERN,
    UUID,
    UUID4_PATTERN,
    UUID_PATTERN,
    ListQuerySchema,
    RequestSchema,
    Timestamp,
    d,
    list_schema,
    plain_text,
)

EVENT_PATTERN = re.compile(r"^(\*|[a-z_]+(\.[a-z_]+)*(\.\*)?)$")
MAX_PATTERNS = 50


def event_pattern(value: str) -> None:
    """An event name Locky records, a prefix of some (``user.*``), ``*``, or what may be
    a plugin's (a prefix none of Locky's names has: :class:`KnownEvents` decides)."""
    if not EVENT_PATTERN.fullmatch(value):
        raise ValidationError("Not an event name, a prefix ending in .*, or *.")
    if value == "*" or value in EVENTS:
        return
    if value.endswith(".*") and any(name.startswith(value[:-1]) for name in EVENTS):
        return
    if value.split(".")[0] not in RESERVED_PREFIXES:
        return  # a plugin's, perhaps
    raise unknown(value)


def unknown(value: str) -> ValidationError:
    return ValidationError(f"No event is called {value}: see GET /v1/internal/audit for the names.")


class KnownEvents:
    """Refuses patterns that select no event of this app: Locky's names and those its
    plugins declared (``AuditTrail.names``, given as ``names`` when the schema is made;
    Locky's alone by default)."""

    def __init__(self, *args, names=EVENTS, **kwargs):
        super().__init__(*args, **kwargs)
        self.names = names

    def _check(self, value: str) -> None:
        if value == "*" or value in self.names:
            return
        if value.endswith(".*") and any(name.startswith(value[:-1]) for name in self.names):
            return
        raise unknown(value)


class Rfc3339(fields.Field):
    """An RFC 3339 time in a query (``2026-11-24T08:00:00Z``), as naive UTC."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or len(value) > 40 or "T" not in value.upper():
            raise ValidationError("Not an RFC 3339 time such as 2026-11-24T08:00:00Z.")
        try:
            moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
            if moment.tzinfo is not None:
                moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
        except (ValueError, OverflowError):  # OverflowError: an offset moving it past year 1 or 9999
            raise ValidationError("Not an RFC 3339 time such as 2026-11-24T08:00:00Z.") from None
        return moment

    def _jsonschema_type_mapping(self):
        return {"type": "string", "format": "date-time"}


class Target(fields.String):
    """The ``target_uuid`` filter: a uuid (any case, lowercased as :class:`~locky.schemas.Uuid`
    does, so it matches what the trail stores) or a key's kid (compared exactly: a kid is
    case-sensitive, and never has the 8-4-4-4-12 shape of a uuid)."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        return value.lower() if UUID.fullmatch(value) else value


#: A user's uuid, or a machine client's subject (``client:`` and its client_id).
ACTOR_PATTERN = "^(?:" + UUID_PATTERN.strip("^$") + "|client:[^\\x00-\\x1f\\x7f]+)$"


class Actor(fields.String):
    """The ``actor_uuid`` filter: a user's uuid (any case, lowercased as the trail stores
    it) or a machine client's subject, ``client:`` and its client_id (compared exactly:
    the actor of what a client_credentials token did, SCIM's provisioning for one)."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if UUID.fullmatch(value):
            return value.lower()
        if value.startswith(CLIENT_SUBJECT_PREFIX) and len(value) > len(CLIENT_SUBJECT_PREFIX):
            return value
        raise ValidationError("Not a valid UUID.")  # as every uuid field says it


class AuditQuerySchema(KnownEvents, ListQuerySchema):
    event = fields.String(validate=event_pattern, **d("An event name, or a prefix ending in .* (user.*).",
                                                      pattern=EVENT_PATTERN.pattern))
    actor_uuid = Actor(validate=[validate.Length(1, 200), plain_text],
                       **d("Who acted: a user's uuid (in any case), or client:CLIENT_ID for a machine client.",
                           pattern=ACTOR_PATTERN))
    target_uuid = Target(validate=[validate.Length(1, 64), plain_text],
                         **d("What was acted on (a user, group, membership, role, session uuid, in any case;"
                             " a key's kid, exactly).", pattern=TEXT_PATTERN))
    since = Rfc3339(**d("Events at or after this time (RFC 3339)."))
    until = Rfc3339(**d("Events before this time (RFC 3339)."))

    @validates("event")
    def _known(self, value: str, **kwargs) -> None:
        self._check(value)


class AuditEventSchema(Schema):
    id = fields.Integer(**d("Position in the trail (keyset paging)."))
    uuid = fields.String(**d("The event's id; a webhook delivery's Locky-Event-Id.", pattern=UUID4_PATTERN))
    created_at = Timestamp(**d("When it happened, RFC 3339 UTC."))
    event = fields.String(**d("What happened: " + ", ".join(EVENTS) + ", or a plugin's own (under its prefix)."))
    actor_uuid = fields.String(allow_none=True, **d("Who did it; null when nobody was logged in."))
    target_type = fields.String(allow_none=True, **d("user, group, member, role, session, key or webhook."))
    target_uuid = fields.String(allow_none=True, **d("What it was done to."))
    ip = fields.String(**d("The client address (X-Forwarded-For only from LOCKY_TRUSTED_PROXIES)."))
    request_id = fields.String(**d("The request's X-Request-ID."))
    details = fields.Dict(**d("Facts of the event; never a password, hash, token, code or secret."))


class WebhookRequestSchema(KnownEvents, RequestSchema):
    url = fields.String(required=True, **d(
        "Where events are POSTed: https://, or http:// to a public address (a private, loopback or link-local"
        " one is refused unless LOCKY_WEBHOOK_ALLOW_PRIVATE). No user name or password in it.",
        maxLength=2048, pattern=r"^https?://[^\s/?#@\x00]+([/?#][^\s\x00]*)?$"))
    events = fields.List(fields.String(validate=event_pattern, **d("A pattern.", pattern=EVENT_PATTERN.pattern)),
                         required=True,
                         validate=validate.Length(1, MAX_PATTERNS),
                         **d("Event names, prefixes ending in .* (user.*), or * for every event."))
    description = fields.String(load_default="", validate=[validate.Length(0, 1024), plain_text],
                                **d(DESCRIPTION_TEXT, pattern=TEXT_PATTERN))

    @validates("events")
    def _known(self, value: list, **kwargs) -> None:
        for pattern in value:
            self._check(pattern)


class WebhookSchema(Schema):
    id = fields.Integer(**d("Unique identifier."))
    uuid = fields.String(**d("UUID4.", pattern=UUID4_PATTERN))
    url = fields.String(**d("Where events are POSTed."))
    events = fields.List(fields.String(), **d("The patterns of the events sent."))
    description = fields.String(**d("Free text."))
    created_at = Timestamp(**d("Creation time, RFC 3339 UTC."))


class WebhookCreatedSchema(WebhookSchema):
    secret = fields.String(**d("Signs every delivery (Locky-Signature). Shown only in this answer: keep it."))


class DeliverySchema(Schema):
    id = fields.Integer(**d("Unique identifier."))
    webhook_id = fields.Integer(**d("The subscription."))
    event_uuid = fields.String(**d("The event delivered (its Locky-Event-Id)."))
    event = fields.String(**d("The event's name."))
    status = fields.String(**d("pending, succeeded or failed."))
    attempts = fields.Integer(**d("POSTs made so far."))
    last_status_code = fields.Integer(allow_none=True, **d("The receiver's last HTTP status; null without one."))
    last_error = fields.String(**d("Why the last attempt failed; empty after a success."))
    next_attempt_at = Timestamp(allow_none=True, **d("When the next attempt is due; null once done."))
    last_attempt_at = Timestamp(allow_none=True, **d("When the last attempt was made."))
    created_at = Timestamp(**d("When the delivery was queued."))


class PageQuerySchema(ListQuerySchema):
    """``limit`` and ``after_id`` only."""

    class Meta:
        unknown = RAISE


AuditListSchema = list_schema("events", AuditEventSchema)
WebhookListSchema = list_schema("webhooks", WebhookSchema)
DeliveryListSchema = list_schema("deliveries", DeliverySchema)

#: Swagger definitions, by name.
DEFINITIONS = {
    "AuditEvent": AuditEventSchema,
    "AuditList": AuditListSchema,
    "WebhookRequest": WebhookRequestSchema,
    "Webhook": WebhookSchema,
    "WebhookCreated": WebhookCreatedSchema,
    "WebhookList": WebhookListSchema,
    "Delivery": DeliverySchema,
    "DeliveryList": DeliveryListSchema,
}
