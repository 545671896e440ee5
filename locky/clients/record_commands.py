"""Commands on records: users, groups, members and roles, plus ``authz check``.

:func:`add_record_commands` builds the same tree for ``locky-app`` and ``locky-admin``;
``admin=True`` adds role writes and updates/deletes of any user, where ``locky-app``
only updates or deletes the caller's own account. The server's policy has the last
word either way: a command the caller may not run ends with the server's 403.
"""

from __future__ import annotations

import argparse
from typing import Any

from .commands import EXIT_DENIED, Context, UsageError, add_command, add_group, add_password_stdin
from .http import ClientError

INTERNAL, PRIVATE = "/v1/internal", "/v1/private"
PAGE_ALL = 500  # page size used by --all when --limit is not given

# Exact-match list filters: (option, query parameter), per the contract.
FILTERS: dict[str, tuple[tuple[str, str], ...]] = {
    "users": (("--email", "email"),),
    "groups": (("--name", "name"),),
    "members": (("--group-uuid", "group_uuid"), ("--user-uuid", "user_uuid"), ("--role", "role")),
    "roles": (("--name", "name"),),
}
SINGULAR = {"users": "user", "groups": "group", "members": "member", "roles": "role"}


# --- reads ---------------------------------------------------------------------------

def _filters(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    return {param: getattr(args, param) for _, param in FILTERS[kind] if getattr(args, param) is not None}


def list_records(ctx: Context, args: argparse.Namespace) -> None:
    kind, path = args.kind, f"{INTERNAL}/{args.kind}"
    query = _filters(kind, args)
    if not args.all:
        body = ctx.session.request("GET", path, query={**query, "limit": args.limit, "after_id": args.after_id})
        ctx.printer.records(kind, body)
        if body.get("next_after_id") is not None and not ctx.printer.as_json:
            ctx.note(f"(more: add --after-id {body['next_after_id']}, or --all)")
        return
    items: list[Any] = []
    after = args.after_id
    while True:
        body = ctx.session.request("GET", path, query={**query, "limit": args.limit or PAGE_ALL, "after_id": after})
        items.extend(body.get(kind) or [])
        following = body.get("next_after_id")
        if following is None:
            break
        if after is not None and following <= after:
            raise ClientError(f"the server's paging did not advance (next_after_id {following} after {after})")
        after = following
    ctx.printer.records(kind, {kind: items, "next_after_id": None})


def count_records(ctx: Context, args: argparse.Namespace) -> None:
    body = ctx.session.request("GET", f"{INTERNAL}/{args.kind}/count", query=_filters(args.kind, args))
    ctx.printer.message(str(body.get("count")), body)


def get_record(ctx: Context, args: argparse.Namespace) -> None:
    ctx.printer.record(ctx.session.request("GET", f"{INTERNAL}/{args.kind}/{args.id}"))


# --- writes --------------------------------------------------------------------------

def _changes(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def _put(ctx: Context, kind: str, record_id: int, body: dict[str, Any], hint: str) -> None:
    if not body:
        raise UsageError(f"nothing to update: give {hint}")
    ctx.printer.record(ctx.session.request("PUT", f"{PRIVATE}/{kind}/{record_id}", body))


def _delete(ctx: Context, kind: str, record_id: int) -> None:
    ctx.session.request("DELETE", f"{PRIVATE}/{kind}/{record_id}")
    ctx.printer.message(f"Deleted {SINGULAR[kind]} {record_id}.", {"deleted": SINGULAR[kind], "id": record_id})


def create_record(ctx: Context, args: argparse.Namespace) -> None:
    ctx.printer.record(ctx.session.request("POST", f"{PRIVATE}/{args.kind}", args.build(args)))


def delete_record(ctx: Context, args: argparse.Namespace) -> None:
    _delete(ctx, args.kind, args.id)


def _new_password_wanted(args: argparse.Namespace) -> bool:
    """``--new-password``, or ``--password-stdin`` alone (no other field to change)."""
    return bool(args.new_password or (args.password_stdin and args.name is None and args.email is None))


def _user_changes(ctx: Context, args: argparse.Namespace) -> dict[str, Any]:
    body = _changes(args, "name", "email")
    if _new_password_wanted(args):
        body["password"] = ctx.read_password(args, "New password: ", confirm=True)
    return body


USER_HINT = "--name, --email, --new-password or --password-stdin"


def update_user(ctx: Context, args: argparse.Namespace) -> None:
    _put(ctx, "users", args.id, _user_changes(ctx, args), USER_HINT)


def update_me(ctx: Context, args: argparse.Namespace) -> None:
    # Your own password or email changes only with your current password (asked first:
    # with --password-stdin it is the first line, the new password the second).
    current = None
    if args.email is not None or _new_password_wanted(args):
        current = ctx.read_password(args, "Current password: ")
    body = _user_changes(ctx, args)
    if not body:
        raise UsageError(f"nothing to update: give {USER_HINT}")
    if current is not None:
        body["current_password"] = current
    me = ctx.session.request("GET", f"{INTERNAL}/users/me")
    _put(ctx, "users", me["id"], body, USER_HINT)


def delete_me(ctx: Context, args: argparse.Namespace) -> None:
    if not args.yes:
        raise UsageError("deleting your own account cannot be undone: add --yes to confirm")
    me = ctx.session.request("GET", f"{INTERNAL}/users/me")
    ctx.session.request("DELETE", f"{PRIVATE}/users/{me['id']}")
    ctx.store.clear()  # its tokens no longer work
    ctx.printer.message(f"Deleted your account {me.get('email')} (user {me['id']}); logged out.",
                        {"deleted": "user", "id": me["id"]})


def update_group(ctx: Context, args: argparse.Namespace) -> None:
    _put(ctx, "groups", args.id, _changes(args, "name", "description"), "--name or --description")


def permission(text: str) -> dict[str, str]:
    """``resource:action`` (split at the last colon) as the API's permission object."""
    resource, sep, action = text.rpartition(":")
    if not sep or not resource or not action:
        raise argparse.ArgumentTypeError(f"expected RESOURCE:ACTION, got {text!r}")
    return {"resource": resource, "action": action}


def update_role(ctx: Context, args: argparse.Namespace) -> None:
    body = _changes(args, "name", "description")
    if args.permissions is not None or args.no_permissions:
        body["permissions"] = [] if args.no_permissions else args.permissions
    _put(ctx, "roles", args.id, body, "--name, --description, --permission or --no-permissions")


def authz_check(ctx: Context, args: argparse.Namespace) -> int | None:
    query = {"user_uuid": args.user_uuid, "resource": args.resource, "action": args.action,
             "group_uuid": args.group_uuid}
    body = ctx.session.request("GET", f"{INTERNAL}/authz/check", query=query)
    allowed = body.get("allowed") is True
    ctx.printer.message("allowed" if allowed else "denied", body)
    return EXIT_DENIED if args.exit_status and not allowed else None


# --- the command tree ----------------------------------------------------------------

def _read_commands(commands: Any, kind: str) -> None:
    parser = add_command(commands, "list", f"list {kind} (GET {INTERNAL}/{kind})", list_records)
    _add_filters(parser, kind)
    parser.add_argument("--limit", type=int, metavar="N", help="page size, 1-500 (server default 50)")
    parser.add_argument("--after-id", type=int, metavar="ID", help="start after this id (keyset paging)")
    parser.add_argument("--all", action="store_true", help="follow next_after_id and print every page as one list")
    parser.set_defaults(kind=kind)
    parser = add_command(commands, "count", f"count {kind} (GET {INTERNAL}/{kind}/count)", count_records)
    _add_filters(parser, kind)
    parser.set_defaults(kind=kind)
    parser = add_command(commands, "get", f"show one {SINGULAR[kind]} by id", get_record)
    parser.add_argument("id", type=int, help=f"the {SINGULAR[kind]}'s id")
    parser.set_defaults(kind=kind)


def _add_filters(parser: argparse.ArgumentParser, kind: str) -> None:
    for option, param in FILTERS[kind]:
        parser.add_argument(option, dest=param, metavar=param.upper(), help=f"only {kind} with this exact {param}")


def _id_command(commands: Any, name: str, kind: str, help: str, handler: Any, **kwargs: Any) -> argparse.ArgumentParser:
    parser = add_command(commands, name, help, handler, **kwargs)
    parser.add_argument("id", type=int, help=f"the {SINGULAR[kind]}'s id")
    parser.set_defaults(kind=kind)
    return parser


def _user_fields(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="new display name")
    parser.add_argument("--email", help="new email address")
    parser.add_argument("--new-password", action="store_true", help="set a new password (prompted for, without echo)")
    add_password_stdin(parser, "the new password")


def _users(commands: Any, admin: bool) -> None:
    users = add_group(commands, "users", "list, show, count, update and delete users")
    _read_commands(users, "users")
    if admin:
        _user_fields(_id_command(users, "update", "users", "update any user (PUT /v1/private/users/{id})", update_user))
        _id_command(users, "delete", "users", "delete any user (DELETE /v1/private/users/{id})", delete_record)
        return
    _user_fields(add_command(users, "update", "update your own account (a new password or email needs your current one: asked for, or with --password-stdin the first line, the new password the second)", update_me))
    parser = add_command(users, "delete", "delete your own account (and log out)", delete_me)
    parser.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")


def _groups(commands: Any) -> None:
    groups = add_group(commands, "groups", "list, show, count, create, update and delete groups")
    _read_commands(groups, "groups")
    parser = add_command(groups, "create", "create a group; you become its owner", create_record)
    parser.add_argument("--name", required=True, help="unique group name")
    parser.add_argument("--description", default="", help="free text")
    parser.set_defaults(kind="groups", build=lambda a: {"name": a.name, "description": a.description})
    parser = _id_command(groups, "update", "groups", "rename or redescribe a group", update_group)
    parser.add_argument("--name", help="new name")
    parser.add_argument("--description", help="new description")
    _id_command(groups, "delete", "groups", "delete a group and its memberships", delete_record)


def _members(commands: Any) -> None:
    members = add_group(commands, "members", "list, show, count, add and remove group members")
    _read_commands(members, "members")
    parser = add_command(members, "add", "add a user to a group", create_record, aliases=["create"])
    parser.add_argument("--group-uuid", required=True, help="the group's uuid")
    parser.add_argument("--user-uuid", required=True, help="the user's uuid")
    parser.add_argument("--role", help="role name within the group (server default: member)")
    parser.set_defaults(kind="members", build=lambda a: _changes(a, "group_uuid", "user_uuid", "role"))
    _id_command(members, "remove", "members", "remove a membership by its id", delete_record, aliases=["delete"])


def _roles(commands: Any, admin: bool) -> None:
    roles = add_group(commands, "roles", "list, show, count, create, update and delete roles" if admin else "list, show and count roles")
    _read_commands(roles, "roles")
    if not admin:
        return
    perm_help = "RESOURCE:ACTION, repeatable (split at the last colon), e.g. --permission docs:read"
    parser = add_command(roles, "create", "create a role", create_record)
    parser.add_argument("--name", required=True, help="role name: lowercase letters, digits, _ and -")
    parser.add_argument("--description", default="", help="free text")
    parser.add_argument("--permission", dest="permissions", action="append", type=permission, default=[],
                        metavar="RESOURCE:ACTION", help=perm_help)
    parser.set_defaults(kind="roles", build=lambda a: {"name": a.name, "description": a.description,
                                                        "permissions": a.permissions})
    parser = _id_command(roles, "update", "roles", "update a role (given permissions replace the old list)", update_role)
    parser.add_argument("--name", help="new name")
    parser.add_argument("--description", help="new description")
    parser.add_argument("--permission", dest="permissions", action="append", type=permission,
                        metavar="RESOURCE:ACTION", help=perm_help + "; replaces the whole list")
    parser.add_argument("--no-permissions", action="store_true", help="set an empty permission list")
    _id_command(roles, "delete", "roles", "delete a role no live membership holds", delete_record)


def _authz(commands: Any) -> None:
    authz = add_group(commands, "authz", "ask the policy for a decision")
    parser = add_command(authz, "check", "may USER do ACTION on RESOURCE? (GET /v1/internal/authz/check)", authz_check,
                         description="Print 'allowed' or 'denied'. Exit 0 either way, unless --exit-status.")
    parser.add_argument("--user-uuid", required=True, help="whose permission to check")
    parser.add_argument("--resource", required=True, help="e.g. groups, or any string of your application")
    parser.add_argument("--action", required=True, help="e.g. read, write")
    parser.add_argument("--group-uuid", help="decide within this group (memberships count)")
    parser.add_argument("--exit-status", action="store_true", help="exit 3 when denied (for shell conditions)")


def add_record_commands(commands: Any, admin: bool) -> None:
    """users, groups, members, roles and authz, for ``locky-app`` or ``locky-admin``."""
    _users(commands, admin)
    _groups(commands)
    _members(commands)
    _roles(commands, admin)
    _authz(commands)
