"""``locky clients``: the operator registers, lists, deletes OAuth clients and gives one a
new secret, on the database directly (docs/http/oauth.md), like ``locky grant-admin``.

The same rules as ``POST /v1/private/oauth/clients`` (the request schema and
:class:`locky.oauth.clients.Clients`); the events are recorded with a null actor and
``details.actor = "cli"``. Each action prints lines for a person, or with ``--json``
one JSON document for a script; a secret is printed once, when it is made.
"""

from __future__ import annotations

import argparse
import json
import sys

from locky.oauth.clients import GRANT_TYPES, ID_TOKEN_ALGS, SCOPES

ACTOR = "cli"


def add_parser(sub, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``clients`` and its actions to ``locky``'s sub-commands."""
    clients = sub.add_parser("clients", help="OAuth clients: create, list, delete, rotate-secret")
    actions = clients.add_subparsers(dest="clients_command", required=True, metavar="ACTION", help="what to do")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=text, parents=parents)
        parser.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
        parser.set_defaults(run=run)
        return parser

    create = action("create", "register a client; a confidential client's secret is printed this once")
    create.add_argument("name", help="the application's name (shown on the consent page)")
    create.add_argument("--redirect-uri", dest="redirect_uris", metavar="URI", nargs="+", action="extend",
                        default=[], help="where users are sent back: https://, or http:// to a loopback host")
    create.add_argument("--post-logout-redirect-uri", dest="post_logout_redirect_uris", metavar="URI", nargs="+",
                        action="extend", default=[], help="where users may be sent after signing out")
    create.add_argument("--public", action="store_true",
                        help="a public client (browser or native app): no secret, PKCE only")
    create.add_argument("--grant", dest="grant_types", metavar="TYPE", nargs="+", action="extend",
                        choices=GRANT_TYPES, help="a grant it may use (default authorization_code refresh_token)")
    create.add_argument("--scope", dest="scopes", metavar="SCOPE", nargs="+", action="extend", choices=SCOPES,
                        help=f"a scope it may ask for (default all: {' '.join(SCOPES)})")
    create.add_argument("--id-token-alg", dest="id_token_signed_response_alg", choices=ID_TOKEN_ALGS,
                        help="the algorithm of its ID tokens (default RS256)")
    create.add_argument("--first-party", action="store_true", help="users are not asked to consent")
    action("list", "list the live clients (never a secret)")
    for name, text in (("delete", "delete a client: every login it was given ends"),
                       ("rotate-secret", "give a confidential client a new secret (printed once); the old one stops")):
        action(name, text).add_argument("client_id", help="the client's client_id (or its id or uuid)")


def run(args, settings) -> int:
    """Run ``locky clients ACTION`` on the database of ``settings``."""
    from locky.app import create_app
    from locky.cli import check
    from locky.errors import Invalid, NotFound
    from locky.oauth.clients import Clients
    from locky.oauth.schemas import OAuthClientSchema

    check.require_database(settings)  # a mistyped path is an error, not a new database
    app = create_app(settings.replace(log_requests=False), background=False)
    try:
        clients = Clients(app.context, actor=ACTOR)
        record = OAuthClientSchema()
        try:
            return ACTIONS[args.clients_command](clients, record, args)
        except Invalid as exc:
            for field, message in exc.fields.items():
                print(f"locky: {field}: {message}", file=sys.stderr)
            return 2
        except NotFound:
            print(f"locky: no live client {args.client_id}", file=sys.stderr)
            return 1
    finally:
        app.close()


def _create(clients, record, args) -> int:
    from locky.http.media import load
    from locky.oauth.schemas import OAuthClientRequestSchema

    body = {"name": args.name, "type": "public" if args.public else "confidential",
            "redirect_uris": args.redirect_uris, "post_logout_redirect_uris": args.post_logout_redirect_uris,
            "first_party": args.first_party}
    for name in ("grant_types", "scopes", "id_token_signed_response_alg"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    made = clients.create(load(OAuthClientRequestSchema(), body))
    if args.json:
        shown = record.dump(made.client)
        if made.secret is not None:
            shown["client_secret"] = made.secret
        print(json.dumps(shown, indent=2))
        return 0
    print(f"client_id: {made.client.client_id}")
    if made.secret is not None:
        print(f"client_secret: {made.secret}")
        print("locky: the secret is shown only now; Locky keeps only its hash", file=sys.stderr)
    return 0


def _list(clients, record, args) -> int:
    from locky.paging import every

    found = list(every(clients.store))
    if args.json:
        print(json.dumps([record.dump(client) for client in found], indent=2))
        return 0
    for client in found:
        print(f"{client.client_id}  {client.type:<12}  {','.join(client.grant_types)}  {client.name}")
    return 0


def _delete(clients, record, args) -> int:
    gone = clients.delete(args.client_id)
    if args.json:
        print(json.dumps(record.dump(gone), indent=2))
    else:
        print(f"locky: client {gone.client_id} ({gone.name}) is deleted; its logins ended")
    return 0


def _rotate(clients, record, args) -> int:
    made = clients.rotate_secret(args.client_id)
    if args.json:
        print(json.dumps({"client_id": made.client.client_id, "client_secret": made.secret}, indent=2))
    else:
        print(f"client_secret: {made.secret}")
        print(f"locky: the old secret of {made.client.client_id} no longer works", file=sys.stderr)
    return 0


ACTIONS = {"create": _create, "list": _list, "delete": _delete, "rotate-secret": _rotate}
