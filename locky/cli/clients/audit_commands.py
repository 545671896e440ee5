"""The audit trail and webhooks (docs/http/audit.md), for ``locky-admin``.

- ``audit list``: the security events, oldest first, filtered by event name (or a
  prefix ending in ``.*``), actor, target and time, paged like the record lists.
- ``webhooks create``, ``list``, ``get``, ``delete``: subscriptions of URLs to events.
  ``create`` prints the signing secret, which the server shows only in that answer.
- ``webhooks deliveries ID``: a subscription's deliveries; ``webhooks replay ID
  DELIVERY_ID`` queues one again.

The shipped policy lets admins only; anyone else gets the server's 403.
"""

from __future__ import annotations

import argparse
from typing import Any

from .commands import Context, add_command, add_group, add_version
from .record_commands import INTERNAL, PRIVATE, paged

AUDIT = f"{INTERNAL}/audit"
WEBHOOKS_READ = f"{INTERNAL}/webhooks"
WEBHOOKS_WRITE = f"{PRIVATE}/webhooks"

SECRET_NOTE = ("The secret is shown only this once: store it with the receiver, which checks every delivery's"
               " Locky-Signature header with it.")


# --- the audit trail -----------------------------------------------------------------

def audit_list(ctx: Context, args: argparse.Namespace) -> None:
    query = {"event": args.event, "actor_uuid": args.actor_uuid, "target_uuid": args.target_uuid,
             "since": args.since, "until": args.until}
    paged(ctx, args, AUDIT, "events", query)


# --- webhooks --------------------------------------------------------------------------

def webhooks_create(ctx: Context, args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"url": args.webhook_url, "events": args.events}
    if args.description is not None:
        body["description"] = args.description
    ctx.printer.record(ctx.session.request("POST", WEBHOOKS_WRITE, body))
    ctx.printer.out.flush()  # the secret first, then the remark about it
    ctx.note(SECRET_NOTE)


def webhooks_list(ctx: Context, args: argparse.Namespace) -> None:
    paged(ctx, args, WEBHOOKS_READ, "webhooks", {})


def webhooks_get(ctx: Context, args: argparse.Namespace) -> None:
    ctx.printer.record(ctx.session.request("GET", f"{WEBHOOKS_READ}/{args.id}"))


def webhooks_delete(ctx: Context, args: argparse.Namespace) -> None:
    ctx.session.request("DELETE", f"{WEBHOOKS_WRITE}/{args.id}")
    ctx.printer.message(f"Deleted webhook {args.id}.", {"deleted": "webhook", "id": args.id})


def webhooks_deliveries(ctx: Context, args: argparse.Namespace) -> None:
    paged(ctx, args, f"{WEBHOOKS_READ}/{args.id}/deliveries", "deliveries", {})


def webhooks_replay(ctx: Context, args: argparse.Namespace) -> None:
    delivery = ctx.session.request("POST", f"{WEBHOOKS_WRITE}/{args.id}/deliveries/{args.delivery_id}/replay")
    if not ctx.printer.as_json:
        ctx.note(f"Delivery {args.delivery_id} queued again as delivery {delivery.get('id', '?')}. Follow it with: "
                 f"{ctx.prog} webhooks deliveries {args.id}")
    ctx.printer.record(delivery)


# --- the command trees ---------------------------------------------------------------

# ``webhooks create --url`` is the receiver's address (the API's field), so that command
# takes only ``--json`` after the command words; the server's address comes before them
# or from $LOCKY_URL. Its own parent, so the shared ``--url`` option is left alone.
_CREATE_COMMON = argparse.ArgumentParser(add_help=False)
_CREATE_COMMON.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                            help="print the server's JSON (sorted keys) instead of tables")
add_version(_CREATE_COMMON)


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, metavar="N", help="page size, 1-500 (server default 50)")
    parser.add_argument("--after-id", type=int, metavar="ID", help="start after this id (keyset paging)")
    parser.add_argument("--all", action="store_true", help="follow next_after_id and print every page as one list")


def _webhook_id(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("id", type=int, help="the webhook's id")
    return parser


def add_audit_commands(commands: Any) -> None:
    """audit list, and webhooks create/list/get/delete/deliveries/replay, for ``locky-admin``."""
    audit = add_group(commands, "audit", "read the audit trail of security events")
    parser = add_command(
        audit, "list", f"list security events, oldest first (GET {AUDIT})", audit_list,
        description="List the security events Locky recorded (logins, account, group, role, key and webhook "
        "changes), oldest first: a table of id, time, event, actor, target, client address and details "
        "(--json: every field, uuid and request_id included). Filters combine. The trail cannot be changed "
        "or deleted through the API.",
    )
    parser.add_argument("--event", metavar="EVENT",
                        help="only this event (e.g. group.created), or a prefix ending in .* (e.g. login.*)")
    parser.add_argument("--actor", dest="actor_uuid", metavar="UUID", help="only events of this acting user")
    parser.add_argument("--target", dest="target_uuid", metavar="UUID",
                        help="only events on this record (a user, group, membership, role, session, webhook "
                        "uuid, or a signing key's kid)")
    parser.add_argument("--since", metavar="TIME", help="only events at or after TIME (RFC 3339, e.g. "
                        "2026-11-24T08:00:00Z)")
    parser.add_argument("--until", metavar="TIME", help="only events before TIME (RFC 3339)")
    _paging(parser)

    hooks = add_group(commands, "webhooks", "subscribe URLs to security events, and follow their deliveries")
    parser = hooks.add_parser(
        "create", help=f"subscribe a URL to events (POST {WEBHOOKS_WRITE})", parents=[_CREATE_COMMON],
        description="Subscribe the URL given with --url to the events matching the patterns. Prints the "
        "webhook with the secret that signs its deliveries, shown only this once. The URL must be https://, "
        "or http:// to a public address: private, loopback and link-local addresses are refused unless the "
        "server allows them (LOCKY_WEBHOOK_ALLOW_PRIVATE). Here --url is the receiver's address: give the "
        "server's before the command words (locky-admin --url SERVER webhooks create ...) or in $LOCKY_URL.",
    )
    parser.set_defaults(handler=webhooks_create)
    parser.add_argument("--url", dest="webhook_url", required=True, metavar="URL",
                        help="the receiver: where deliveries are POSTed (not the server's address here)")
    parser.add_argument("--event", dest="events", action="append", required=True, metavar="PATTERN",
                        help="an event name (user.disabled), a prefix ending in .* (login.*), or * for every "
                        "event; repeatable")
    parser.add_argument("--description", metavar="TEXT", help="free text")

    _paging(add_command(hooks, "list", f"list webhooks (GET {WEBHOOKS_READ})", webhooks_list))
    _webhook_id(add_command(hooks, "get", f"show one webhook (GET {WEBHOOKS_READ}/{{id}})", webhooks_get))
    _webhook_id(add_command(hooks, "delete", f"unsubscribe: delete a webhook and its pending deliveries "
                            f"(DELETE {WEBHOOKS_WRITE}/{{id}})", webhooks_delete))
    parser = _webhook_id(add_command(
        hooks, "deliveries", f"list a webhook's deliveries (GET {WEBHOOKS_READ}/{{id}}/deliveries)",
        webhooks_deliveries,
        description="A webhook's deliveries, oldest first: the event, its status (pending, succeeded or "
        "failed), the attempts made, the receiver's last HTTP status, when the next attempt is due and the "
        "last error.",
    ))
    _paging(parser)
    parser = _webhook_id(add_command(
        hooks, "replay", f"send a delivery again (POST {WEBHOOKS_WRITE}/{{id}}/deliveries/{{delivery_id}}/replay)",
        webhooks_replay,
        description="Queue the delivery's event again, as a new delivery with the same Locky-Event-Id and body. "
        "Prints the new delivery.",
    ))
    parser.add_argument("delivery_id", type=int, metavar="DELIVERY_ID", help="the delivery's id (see deliveries)")
