"""Step 6: the audit trail and webhooks (docs/http/audit.md).

- ``locky_audit``: security events, appended in the transaction of the change each
  records and never updated; indexed for the audit list's filters (event, actor,
  target, each with ``id`` for keyset paging) and for retention by ``created_at``;
- ``locky_webhooks``: subscriptions, each secret sealed by the core;
- ``locky_webhook_deliveries``: the delivery outbox and its history: one row per event
  and subscription, queued with the event; ``next_attempt_at`` is NULL once a delivery
  succeeded or failed, so the senders' index holds only what is still to send.
"""

from .ddl import Ddl

DESCRIPTION = "audit trail and webhooks: locky_audit, locky_webhooks, locky_webhook_deliveries"


def statements(dialect: str, collation: str) -> list[str]:
    sql = Ddl(dialect, collation)
    stamp = sql.timestamp
    return [
        sql.table("locky_audit",
                  f"id {sql.identity}",
                  "uuid VARCHAR(36) UNIQUE NOT NULL",
                  f"created_at {stamp} NOT NULL",
                  "event VARCHAR(64) NOT NULL",
                  "actor_uuid VARCHAR(36)",
                  "target_type VARCHAR(32)",
                  "target_uuid VARCHAR(64)",
                  "ip VARCHAR(64) NOT NULL",
                  "request_id VARCHAR(128) NOT NULL",
                  f"details {sql.json} NOT NULL"),
        sql.index("locky_audit", "created_at"),
        sql.index("locky_audit", "event", "id"),
        sql.index("locky_audit", "actor_uuid", "id"),
        sql.index("locky_audit", "target_uuid", "id"),
        sql.table("locky_webhooks",
                  f"id {sql.identity}",
                  "uuid VARCHAR(36) UNIQUE NOT NULL",
                  "url VARCHAR(2048) NOT NULL",
                  f"events {sql.json} NOT NULL",
                  "description VARCHAR(1024) NOT NULL",
                  "secret VARCHAR(255) NOT NULL",
                  f"created_at {stamp} NOT NULL"),
        sql.table("locky_webhook_deliveries",
                  f"id {sql.identity}",
                  "webhook_id BIGINT NOT NULL",
                  "event_uuid VARCHAR(36) NOT NULL",
                  "event VARCHAR(64) NOT NULL",
                  f"payload {sql.text} NOT NULL",
                  "status VARCHAR(16) NOT NULL",
                  "attempts INTEGER NOT NULL",
                  "last_status_code INTEGER",
                  "last_error VARCHAR(255) NOT NULL",
                  f"created_at {stamp} NOT NULL",
                  f"next_attempt_at {stamp}",
                  f"held_until {stamp}",
                  f"last_attempt_at {stamp}"),
        sql.index("locky_webhook_deliveries", "next_attempt_at"),
        sql.index("locky_webhook_deliveries", "webhook_id", "id"),
    ]
