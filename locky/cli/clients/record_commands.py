"""Commands on records: users, groups, members and roles, plus the authorization API
(docs/http/authorization.md): ``authz check``, ``explain``, ``batch``, ``permissions`` and ``subjects``.

:func:`add_record_commands` builds the same tree for ``locky-app`` and ``locky-admin``;
``admin=True`` adds role writes, updates/deletes of any user and disabling or enabling
accounts, where ``locky-app`` only updates or deletes the caller's own account. The
server's policy has the last word either way: a command the caller may not run ends
with the server's 403.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
from typing import Any

from .commands import EXIT_DENIED, Context, UsageError, add_command, add_group, add_password_stdin
from .http import ApiError, ClientError
from .output import cell, record_table, table

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


def _all_pages(ctx: Context, path: str, query: dict[str, Any], key: str, limit: int | None,
               after: int | None) -> tuple[list[Any], dict[str, Any]]:
    """Every item under ``key`` from ``after`` on, following ``next_after_id``; also the
    first page's body (for fields beside the list, such as ``all_users``)."""
    items: list[Any] = []
    first: dict[str, Any] | None = None
    while True:
        body = ctx.session.request("GET", path, query={**query, "limit": limit or PAGE_ALL, "after_id": after})
        first = body if first is None else first
        items.extend(body.get(key) or [])
        following = body.get("next_after_id")
        if following is None:
            return items, first
        if after is not None and following <= after:
            raise ClientError(f"the server's paging did not advance (next_after_id {following} after {after})")
        after = following


def _more(ctx: Context, body: dict[str, Any]) -> None:
    if body.get("next_after_id") is not None and not ctx.printer.as_json:
        ctx.note(f"(more: add --after-id {body['next_after_id']}, or --all)")


def paged(ctx: Context, args: argparse.Namespace, path: str, key: str, query: dict[str, Any]) -> None:
    """One page (``--limit``, ``--after-id``), or every page with ``--all``, as a table or JSON."""
    if not args.all:
        body = ctx.session.request("GET", path, query={**query, "limit": args.limit, "after_id": args.after_id})
        ctx.printer.records(key, body)
        _more(ctx, body)
        return
    items, _ = _all_pages(ctx, path, query, key, args.limit, args.after_id)
    ctx.printer.records(key, {key: items, "next_after_id": None})


def list_records(ctx: Context, args: argparse.Namespace) -> None:
    paged(ctx, args, f"{INTERNAL}/{args.kind}", args.kind, _filters(args.kind, args))


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


def set_disabled(ctx: Context, args: argparse.Namespace) -> None:
    """``users disable`` / ``users enable``: an admin's ``PUT {"disabled": ...}``."""
    user = ctx.session.request("PUT", f"{PRIVATE}/users/{args.id}", {"disabled": args.disabled})
    who = f"user {args.id} ({user.get('email', '?')})"
    text = f"Disabled {who}; every login of the account has ended." if args.disabled else f"Enabled {who}."
    ctx.printer.message(text, user)


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


AUTHZ = f"{INTERNAL}/authz"
BATCH_SIZE = 100  # the most checks the server answers in one POST (docs/http/authorization.md)
CSV_FIELDS = ("user_uuid", "resource", "action", "group_uuid")


def _check_query(args: argparse.Namespace) -> dict[str, Any]:
    return {"user_uuid": args.user_uuid, "resource": args.resource, "action": args.action,
            "group_uuid": args.group_uuid}


def _answer(allowed: Any) -> str:
    return "allowed" if allowed is True else "denied"


def authz_check(ctx: Context, args: argparse.Namespace) -> int | None:
    body = ctx.session.request("GET", f"{AUTHZ}/check", query=_check_query(args))
    allowed = body.get("allowed") is True
    ctx.printer.message(_answer(allowed), body)
    return EXIT_DENIED if args.exit_status and not allowed else None


def authz_explain(ctx: Context, args: argparse.Namespace) -> int | None:
    """The decision, the roles the user held for it and the rules that allowed it."""
    body = ctx.session.request("GET", f"{AUTHZ}/check", query={**_check_query(args), "explain": True})
    allowed = body.get("allowed") is True
    if ctx.printer.as_json:
        ctx.printer.json(body)
    else:
        sections = [_answer(allowed)]
        for title, key, kind in (("roles held", "roles", "held_roles"), ("matched rules", "matched", "matched")):
            rows = body.get(key) or []
            sections.append(f"{title}:\n{record_table(kind, rows)}" if rows else f"{title}: none")
        ctx.printer.line("\n\n".join(sections))
    return EXIT_DENIED if args.exit_status and not allowed else None


def _source_name(source: str) -> str:
    return "standard input" if source == "-" else source


def read_checks(ctx: Context, source: str) -> list[dict[str, Any]]:
    """The checks in FILE (``-``: standard input): JSON when the text starts with ``[`` or
    ``{`` (a list of check objects, ``{"checks": [...]}``, or one object per line), else
    CSV lines ``user_uuid,resource,action[,group_uuid]``."""
    name = _source_name(source)
    if source == "-":
        if ctx.interactive():
            ctx.note("Reading checks from standard input; end with Ctrl-D.")
        text = ctx.stdin.read()
    else:
        try:
            with open(source, encoding="utf-8-sig") as handle:
                text = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsageError(f"cannot read {source}: not UTF-8 text") from None
    text = text.lstrip("\ufeff")
    stripped = text.strip()
    checks = _json_checks(stripped, name) if stripped[:1] in ("[", "{") else _csv_checks(text, name)
    if not checks:
        raise UsageError(f"no checks in {name}")
    return checks


def _json_checks(text: str, name: str) -> list[dict[str, Any]]:
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        if not (text.startswith("{") and exc.msg == "Extra data"):
            raise UsageError(f"{name}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
        document = []  # JSON lines: one check object per line
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    document.append(json.loads(line))
                except json.JSONDecodeError as line_exc:
                    raise UsageError(f"{name}, line {number}: not valid JSON ({line_exc.msg})") from None
    if isinstance(document, dict):
        if "checks" in document:
            if set(document) != {"checks"}:
                raise UsageError(f"{name}: expected only \"checks\" in the object, got "
                                 f"{', '.join(sorted(set(document) - {'checks'}))}")
            document = document["checks"]
        else:
            document = [document]
    if not isinstance(document, list):
        raise UsageError(f"{name}: expected a list of checks or {{\"checks\": [...]}}")
    for index, item in enumerate(document):
        if not isinstance(item, dict):
            raise UsageError(f"{name}: check {index} is not an object")
    return document


def _csv_checks(text: str, name: str) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    reader = csv.reader(io.StringIO(text))
    first = True
    for row in reader:
        cells = [value.strip() for value in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if first and [value.lower() for value in cells[:3]] == list(CSV_FIELDS[:3]):
            first = False  # a header line
            continue
        first = False
        if len(cells) not in (3, 4):
            raise UsageError(f"{name}, line {reader.line_num}: expected user_uuid,resource,action[,group_uuid], "
                             f"got {len(cells)} field{'s' if len(cells) != 1 else ''}")
        check = dict(zip(CSV_FIELDS, cells))
        if not check.get("group_uuid"):
            check.pop("group_uuid", None)
        checks.append(check)
    return checks


def _renumbered(exc: ApiError, offset: int) -> ApiError:
    """A 400 on one chunk, its ``checks.<index>`` keys counted over the whole input."""
    if exc.status != 400 or not offset or not isinstance(exc.body, dict):
        return exc

    def key(name: str) -> str:
        return re.sub(r"^checks\.(\d+)", lambda m: f"checks.{int(m.group(1)) + offset}", name)

    return ApiError(exc.status, {key(k): v for k, v in exc.body.items()}, headers=exc.headers)


def authz_batch(ctx: Context, args: argparse.Namespace) -> int | None:
    """Every check of FILE, sent in chunks of up to 100, answered one line each in order."""
    checks = read_checks(ctx, args.file)
    answers: list[Any] = []
    for offset in range(0, len(checks), BATCH_SIZE):
        chunk = checks[offset:offset + BATCH_SIZE]
        try:
            body = ctx.session.request("POST", f"{AUTHZ}/check", {"checks": chunk})
        except ApiError as exc:
            raise _renumbered(exc, offset) from None
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or len(results) != len(chunk):
            raise ClientError(f"the server answered {len(results) if isinstance(results, list) else 'no'} "
                              f"results for {len(chunk)} checks")
        answers.extend(results)
    results = [{"group_uuid": None, **check, "allowed": answer.get("allowed") is True}
               for check, answer in zip(checks, answers)]
    if ctx.printer.as_json:
        ctx.printer.json({"results": results})
    else:
        ctx.printer.line(table([[_answer(r["allowed"]), cell(r.get("user_uuid")), cell(r.get("resource")),
                                 cell(r.get("action")), cell(r.get("group_uuid"))] for r in results]))
    denied = any(not r["allowed"] for r in results)
    return EXIT_DENIED if args.exit_status and denied else None


def authz_permissions(ctx: Context, args: argparse.Namespace) -> None:
    query = {"user_uuid": args.user_uuid, "group_uuid": args.group_uuid}
    ctx.printer.records("permissions", ctx.session.request("GET", f"{AUTHZ}/permissions", query=query))


def authz_subjects(ctx: Context, args: argparse.Namespace) -> None:
    path = f"{AUTHZ}/subjects"
    query = {"resource": args.resource, "action": args.action, "group_uuid": args.group_uuid}
    if args.all:
        users, first = _all_pages(ctx, path, query, "users", args.limit, args.after_id)
        body = {"users": users, "next_after_id": None, "all_users": first.get("all_users")}
    else:
        body = ctx.session.request("GET", path, query={**query, "limit": args.limit, "after_id": args.after_id})
    ctx.printer.records("users", body)
    if ctx.printer.as_json:
        return
    if body.get("all_users") is True:
        ctx.printer.line(f"every authenticated user may {args.action} {args.resource} (all_users);"
                         " the users listed hold an explicit grant")
    _more(ctx, body)


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
        _id_command(users, "disable", "users", "disable an account: its logins end and it cannot log in "
                    "(PUT /v1/private/users/{id} {\"disabled\": true})", set_disabled).set_defaults(disabled=True)
        _id_command(users, "enable", "users", "enable a disabled account again "
                    "(PUT /v1/private/users/{id} {\"disabled\": false})", set_disabled).set_defaults(disabled=False)
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


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user-uuid", required=True, help="whose permission to check")
    parser.add_argument("--resource", required=True, help="e.g. groups, or any string of your application")
    parser.add_argument("--action", required=True, help="e.g. read, write")
    parser.add_argument("--group-uuid", help="decide within this group (memberships count)")


def _authz(commands: Any) -> None:
    authz = add_group(commands, "authz", "ask the policy: check, explain, batch, permissions, subjects")
    parser = add_command(authz, "check", f"may USER do ACTION on RESOURCE? (GET {AUTHZ}/check)", authz_check,
                         description="Print 'allowed' or 'denied'. Exit 0 either way, unless --exit-status.")
    _check_arguments(parser)
    parser.add_argument("--exit-status", action="store_true", help="exit 3 when denied (for shell conditions)")

    parser = add_command(authz, "explain", f"why may USER (not) do ACTION on RESOURCE? (GET {AUTHZ}/check"
                         "?explain=true)", authz_explain,
                         description="Print 'allowed' or 'denied', the roles the user held for the decision and"
                                     " the policy lines or stored permissions that allowed it (none when denied)."
                                     " Exit 0 either way, unless --exit-status.")
    _check_arguments(parser)
    parser.add_argument("--exit-status", action="store_true", help="exit 3 when denied (for shell conditions)")

    parser = add_command(authz, "batch", f"answer many checks from a file (POST {AUTHZ}/check)", authz_batch,
                         description="Read checks from FILE, or standard input with -, and print one line per"
                                     " check, in order: 'allowed' or 'denied', user_uuid, resource, action and"
                                     " group_uuid ('-' for none). With --json: {\"results\": [...]}, each the"
                                     " check with its \"allowed\". FILE is JSON when it starts with [ or {"
                                     " (a list of {\"user_uuid\", \"resource\", \"action\", \"group_uuid\"?}"
                                     " objects, {\"checks\": [...]}, or one object per line), otherwise CSV"
                                     " lines user_uuid,resource,action[,group_uuid] (an optional header line,"
                                     " blank lines and lines starting with # are skipped). More than 100 checks"
                                     " are sent 100 at a time; a bad check stops the run with the server's 400,"
                                     " checks.<index> counting from 0 over the whole input.")
    parser.add_argument("file", metavar="FILE", help="JSON or CSV checks; - for standard input")
    parser.add_argument("--exit-status", action="store_true", help="exit 3 when any check is denied")

    parser = add_command(authz, "permissions", f"what may USER do? (GET {AUTHZ}/permissions)", authz_permissions,
                         description="A table of resource, action, scope (global, group or self), group and the"
                                     " role that grants it (via), wildcards (*) as written in the policy.")
    parser.add_argument("--user-uuid", required=True, help="the user")
    parser.add_argument("--group-uuid", help="only what holds in this group (global rules included)")

    parser = add_command(authz, "subjects", f"who may do ACTION on RESOURCE? (GET {AUTHZ}/subjects)",
                         authz_subjects,
                         description="A table of the users with an explicit grant, and a line saying so when every"
                                     " authenticated user may (all_users).")
    parser.add_argument("--resource", required=True, help="e.g. groups, or any string of your application")
    parser.add_argument("--action", required=True, help="e.g. read, write")
    parser.add_argument("--group-uuid", help="decide within this group (its members' roles count)")
    parser.add_argument("--limit", type=int, metavar="N", help="page size, 1-500 (server default 50)")
    parser.add_argument("--after-id", type=int, metavar="ID", help="start after this user id (keyset paging)")
    parser.add_argument("--all", action="store_true", help="follow next_after_id and print every page as one list")


def add_record_commands(commands: Any, admin: bool) -> None:
    """users, groups, members, roles and authz, for ``locky-app`` or ``locky-admin``."""
    _users(commands, admin)
    _groups(commands)
    _members(commands)
    _roles(commands, admin)
    _authz(commands)
