"""``locky``: the operator's command (serve, migrate, spec, grant-admin, revoke-admin, grant-role, revoke-role,
unlock, keys, plugins, check), and the commands plugins add through ``locky_add_commands`` (the bundled Casbin
authorizer's ``locky policy``)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import pluggy

from locky.cli import check as checks
from locky.cli import clients_command
from locky.cli.clients.commands import version
from locky.accounts.login_limits import LoginLimits
from locky.settings import Settings, SettingsError

#: Commands that read or change an existing database: on a SQLite file that does not
#: exist they stop instead of creating one (``serve`` and ``migrate`` create it).
NEEDS_DATABASE = frozenset({"grant-admin", "revoke-admin", "grant-role", "revoke-role", "unlock", "keys", "audit"})
CONFIG_HELP = "a TOML settings file ([locky] and [plugins.NAME] tables; also LOCKY_CONFIG)"
#: In the details of every event an operator command records (its ``actor_uuid`` is
#: null: no request, no caller).
CLI_DETAILS = {"actor": "cli"}


def _config_option() -> argparse.ArgumentParser:
    """``--config`` for each command that reads settings, so it may follow the command
    (``locky serve --config locky.toml``); given before the command, it works too."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=CONFIG_HELP)
    return parent


def _version_line(pm: pluggy.PluginManager) -> str:
    """``locky --version``: the package's version and the schema version the bundled storage
    writes (``locky migrate`` brings an older database to it), read from the code alone."""
    storage = pm.get_plugin("locky_pony")  # the bundled storage, unless blocked
    latest = getattr(getattr(storage, "migrations", None), "LATEST", None)
    return f"locky {version()}" + (f" (database schema version {latest})" if latest is not None else "")


def _command_plugins(argv: list[str]) -> pluggy.PluginManager:
    """The plugins whose ``locky_add_commands`` add to the command line: those the settings
    (``--config``, ``LOCKY_CONFIG``, ``LOCKY_*``) load, or the bundled ones and the
    defaults when the settings cannot be read; the command itself then reports why."""
    from locky.plugins import build_plugin_manager

    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config")
    config = early.parse_known_args(argv)[0].config
    quiet = logging.getLogger("locky")
    was, quiet.disabled = quiet.disabled, True  # the command's own load says what it finds, once
    try:
        return build_plugin_manager(Settings.load(config=config))
    except (SettingsError, OSError):
        return build_plugin_manager(Settings())
    finally:
        quiet.disabled = was


def _parser(pm: pluggy.PluginManager | None = None) -> argparse.ArgumentParser:
    """``locky``'s arguments: its own commands, then those of the plugins in ``pm``."""
    pm = pm if pm is not None else _command_plugins([])
    parser = argparse.ArgumentParser(prog="locky", description="Locky access-management service.")
    parser.add_argument("--version", action="version", version=_version_line(pm),
                        help="print the version and the database schema it writes, and exit")
    parser.add_argument("--config", metavar="PATH", help=CONFIG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do")
    config = [_config_option()]

    serve = sub.add_parser("serve", help="run the service (multi-process)", parents=config)
    serve.add_argument("--host", help="address to listen on (LOCKY_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (LOCKY_PORT, default 8080)")
    serve.add_argument("--workers", type=int, help="worker processes (default 2)")

    sub.add_parser("spec", help="print the Swagger 2.0 document (reads no database)", parents=config)

    for name, text in (("grant-admin", "make a registered user an admin"),
                       ("revoke-admin", "take the admin grant back")):
        command = sub.add_parser(name, help=text, parents=config)
        command.add_argument("email", help="the user's email address")

    for name, text in (("grant-role", "give a user or a machine client a role everywhere"),
                       ("revoke-role", "take a role grant back from a user or a machine client")):
        command = sub.add_parser(name, help=text, parents=config)
        command.add_argument("subject", help="a user's email address, or client:CLIENT_ID for a machine client")
        command.add_argument("role", help="a role that exists (built-in or made through the API)")
        command.add_argument("--json", action="store_true", help="print the outcome as one JSON object")

    unlock = sub.add_parser("unlock", help="clear an account's failed logins (ends its login lockout)",
                            parents=config)
    unlock.add_argument("email", help="the user's email address")

    migrate = sub.add_parser("migrate", help="bring the database schema to this version of Locky", parents=config)
    migrate.add_argument("--dry-run", action="store_true",
                         help="print the steps and their SQL without changing anything")

    keys = sub.add_parser("keys", help="the token-signing keys (ES256, EdDSA, RS256)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION", help="what to do")
    keys_sub.add_parser("rotate", help="make a new active signing key in every key family (tokens signed before"
                        " stay valid)", parents=config)
    keys_sub.add_parser("list", help="list the stored keys: kid, algorithm, made, retired", parents=config)

    trail = sub.add_parser("audit", help="the audit trail")
    trail_sub = trail.add_subparsers(dest="audit_command", required=True, metavar="ACTION", help="what to do")
    prune = trail_sub.add_parser("prune", help="delete audit events older than some days (the only way one goes)",
                                 parents=config)
    prune.add_argument("--older-than", type=_days, metavar="DAYS",
                       help="age in days (default: LOCKY_AUDIT_RETENTION_DAYS, 365)")

    sub.add_parser("plugins", help="list the loaded plugins and where they come from (reads no database)",
                   parents=config)
    sub.add_parser("check", help="check settings, plugins, policy files and database, say what was checked,"
                   " then exit", parents=config)
    clients_command.add_parser(sub, config)
    pm.hook.locky_add_commands(subparsers=sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(_command_plugins(argv)).parse_args(argv)
    run = getattr(args, "run", None)  # a plugin's command (locky_add_commands)
    if run is not None and getattr(args, "offline", False):  # no settings, no database
        try:
            return run(args, None)
        except SettingsError as exc:
            print(f"locky: {exc}", file=sys.stderr)
            return 2
    from locky.cli.logs import configure_logging

    configure_logging()
    try:
        overrides = {k: getattr(args, k, None) for k in ("host", "port", "workers")}
        settings = Settings.load(config=args.config, **{k: v for k, v in overrides.items() if v is not None})
        if args.command in NEEDS_DATABASE:
            checks.require_database(settings)  # a mistyped path is an error, not a new database
        if run is not None:
            return run(args, settings)
        return COMMANDS[args.command](settings, args)
    except SettingsError as exc:
        print(f"locky: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `locky spec | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _serve(settings, args) -> int:
    from locky.cli.server import serve

    serve(settings)
    return 0


def _with_app(settings, work) -> int:
    from locky.app import create_app

    app = create_app(settings.replace(log_requests=False), background=False)
    try:
        return work(app)
    finally:
        app.close()


def _spec(settings, args) -> int:
    """Print the Swagger document of an app built on an in-memory database: the routes
    come from the plugins, not from the data, and nothing is written to disk. The whole
    app is built there, plugins' ``locky_startup`` included (docs/plugins.md says so)."""
    def work(app):
        print(json.dumps(app.swagger, indent=2))
        return 0

    logging.getLogger("locky").setLevel(logging.WARNING)  # the in-memory schema and key are no news
    return _with_app(checks.in_memory(settings), work)


def _live_user(storage, email: str):
    """The live user with ``email``, or ``None`` after saying so on stderr."""
    user = storage.users.get_by_email(email.strip().lower())
    if user is None:
        print(f"locky: no live user with email {email}", file=sys.stderr)
    return user


def _admin(grant: bool):
    def command(settings, args) -> int:
        def work(app):
            storage = app.context.storage
            user = _live_user(storage, args.email)
            if user is None:
                return 1
            from locky import audit

            with storage.atomic():
                changed = storage.grants.grant(user.uuid, "admin") if grant else storage.grants.revoke(user.uuid, "admin")
                if changed:
                    app.context.audit.record(audit.ADMIN_GRANTED if grant else audit.ADMIN_REVOKED, target_type="user",
                                             target_uuid=user.uuid, record=user,
                                             details={"email": user.email, "via": "command line", **CLI_DETAILS})
            if not grant and _admin_by_setting(settings, user):
                if changed:
                    print(f"{user.email}: the admin grant stored in the database is taken back")
                return 1
            verb = "is now an admin" if grant else "is no longer an admin"
            print(f"{user.email} {verb}" if changed else f"{user.email}: nothing to change")
            return 0

        return _with_app(settings, work)

    return command


def _role(grant: bool):
    """``locky grant-role SUBJECT ROLE`` / ``revoke-role``: a global grant in
    ``storage.grants`` for a user (SUBJECT their email) or a machine client (SUBJECT
    ``client:<client_id>``, its policy subject), audited as ``role.granted`` /
    ``role.revoked``."""
    def command(settings, args) -> int:
        def work(app):
            from locky import events
            from locky.records import CLIENT_SUBJECT_PREFIX, is_client_subject

            storage = app.context.storage
            if is_client_subject(args.subject):
                client_id = args.subject[len(CLIENT_SUBJECT_PREFIX):]
                target = storage.oauth_clients.get_by_client_id(client_id)
                if target is None:
                    print(f"locky: no live OAuth client with client_id {client_id}", file=sys.stderr)
                    return 1
                subject, shown, target_type = args.subject, args.subject, "oauth_client"
                about = {"client_id": client_id}
            else:
                target = _live_user(storage, args.subject)
                if target is None:
                    return 1
                subject, shown, target_type = target.uuid, target.email, "user"
                about = {"email": target.email}
            if not storage.roles.list(name=args.role, limit=1).items:
                print(f"locky: no role named {args.role!r} (locky policy check and GET /v1/internal/roles"
                      " list them)", file=sys.stderr)
                return 1
            with storage.atomic():
                changed = storage.grants.grant(subject, args.role) if grant else storage.grants.revoke(subject, args.role)
                if changed:
                    app.context.audit.record(events.ROLE_GRANTED if grant else events.ROLE_REVOKED,
                                             target_type=target_type, target_uuid=target.uuid, record=target,
                                             details={"subject": subject, "role": args.role, **about, **CLI_DETAILS})
            if args.json:
                print(json.dumps({"subject": subject, "role": args.role, "granted": grant, "changed": changed}))
            elif changed:
                print(f"{shown} {'now holds' if grant else 'no longer holds'} role {args.role}")
            else:
                print(f"{shown}: nothing to change")
            return 0

        return _with_app(settings, work)

    return command


def _admin_by_setting(settings, user) -> bool:
    """Whether LOCKY_ADMIN_EMAILS names ``user``'s email, after saying so on stderr: that
    setting, not a grant in the database, makes the account an admin, so revoking cannot."""
    if user.email.lower() not in {e.strip().lower() for e in settings.admin_emails}:
        return False
    when = "" if user.email_verified else " once it verifies its address"
    print(f"locky: {user.email} stays an admin{when}: the admin is held by the LOCKY_ADMIN_EMAILS setting,"
          " not by a grant revoke-admin can take back; remove the email from LOCKY_ADMIN_EMAILS and"
          " restart Locky", file=sys.stderr)
    return True


def _unlock(settings, args) -> int:
    """Forget the failed logins of a live user's email: the lock ends at once."""
    def work(app):
        storage = app.context.storage
        user = _live_user(storage, args.email)
        if user is None:
            return 1
        cleared = LoginLimits(app.context).clear(user.email)  # from every client address
        print(f"{user.email}: failed logins cleared, the account is unlocked" if cleared
              else f"{user.email}: no failed logins to clear")
        return 0

    return _with_app(settings, work)


def _migrate(settings, args) -> int:
    """Run (or with ``--dry-run`` show) the storage's pending schema steps. Builds the
    storage provider only: no policy, tokens or startup of the whole app."""
    from locky.context import Context
    from locky.plugins import build_plugin_manager
    from locky.registry import ProviderError, Registry

    path = settings.sqlite_path
    if args.dry_run and path is not None and not path.exists():
        # A dry run writes nothing: the steps of a new database, shown on one in memory.
        print(f"locky: no database at {path} yet; `locky migrate` would create it")
        settings = checks.in_memory(settings)
    context = Context(settings, build_plugin_manager(settings))
    registry = Registry("storage")
    context.hook.locky_register_storage(registry=registry)
    try:
        context.storage = registry.create(settings.storage, context)
    except ProviderError as exc:
        raise SettingsError(str(exc)) from None
    try:
        state = context.storage.schema()
        if not args.dry_run:
            applied = context.storage.migrate()
            for step in applied:
                print(f"applied step {step.version}: {step.description}")
            if applied:
                print(f"locky: the database schema is now at version {applied[-1].version}")
            else:
                print(f"locky: the database schema is up to date (version {state.current}); nothing to do")
            return 0
        pending = context.storage.migrate(dry_run=True)
        if not pending:
            print(f"locky: the database schema is up to date (version {state.current}); nothing to do")
            return 0
        print(f"locky: the database schema is at version {state.current}; `locky migrate` would apply"
              f" {len(pending)} step(s) to reach version {pending[-1].version}:")
        for step in pending:
            print(f"step {step.version}: {step.description}")
            for statement in step.statements:
                print("    " + statement.replace("\n", "\n    ") + ";")
        return 0
    finally:
        context.storage.close()


def _keys(settings, args) -> int:
    """``locky keys rotate`` (every host signs with the new key within half a minute)
    and ``locky keys list``."""
    def work(app):
        from locky.resources.tokens import rotate_keys, signing_keys

        keyring = signing_keys(app.context)
        if keyring is None:
            print(f"locky: the {settings.tokens} token backend keeps no signing keys", file=sys.stderr)
            return 1
        if args.keys_command == "rotate":
            # Every family at once, each recorded and announced as key.rotated.
            for record in rotate_keys(app.context, keyring, details=CLI_DETAILS):
                print(f"locky: {record.kid} ({record.alg}) is the new {record.alg} signing key; tokens signed"
                      " before stay valid until they expire")
            return 0
        for record in keyring.listing():
            state = "active" if record.retired_at is None else f"retired {record.retired_at.isoformat()}Z"
            print(f"{record.kid}  {record.alg:<6} made {record.created_at.isoformat()}Z  {state}")
        return 0

    return _with_app(settings, work)


def _plugins(settings, args) -> int:
    """List the plugins and each slot's providers from the plugin manager alone: no
    provider is built, so no database or secret file is opened or made."""
    from locky.plugins import build_plugin_manager, describe

    pm = build_plugin_manager(settings)
    for row in describe(pm):
        origin = row["distribution"] or row["file"] or "(object)"
        print(f"{row['name']:<28} {origin}")
        if row["hooks"]:
            print(f"{'':<28}   hooks: {', '.join(row['hooks'])}")
    for slot, registry in checks.registries(settings, pm).items():
        chosen = getattr(settings, slot)
        names = ", ".join(f"{n}{'*' if n == chosen else ''}" for n in registry.names())
        print(f"{slot:<28} {names}   (* = in use)")
    return 0


def _check(settings, args) -> int:
    """Check plugins, secret, policy and database in that order (a missing SQLite file
    is an error, not a new database; an older schema is reported, not upgraded); print
    what was checked."""
    from locky.plugins import build_plugin_manager

    pm = build_plugin_manager(settings)
    checks.registries(settings, pm)
    checks.check_secret(settings)
    checks.check_plugins(settings, pm)
    checks.require_database(settings)

    def work(app):
        for line in checks.report(app, settings):
            print(line)
        print(f"locky: settings, database, policy files and {len(app.routes)} routes are in order")
        return 0

    # A check reads: a schema behind this release is reported (run `locky migrate`), not upgraded.
    return _with_app(settings.replace(auto_migrate=False), work)


def _days(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100 * 366:
        raise argparse.ArgumentTypeError("a whole number of days, at least 1")
    return int(text)


def _audit(settings, args) -> int:
    """``locky audit prune --older-than DAYS``."""
    from locky.audit.retention import prune

    days = args.older_than or settings.audit_retention_days
    if not days:
        print("locky: LOCKY_AUDIT_RETENTION_DAYS is 0 (keep for ever): give --older-than DAYS", file=sys.stderr)
        return 2

    def work(app):
        gone = prune(app.context.storage, days)
        print(f"locky: {gone} audit event{'' if gone == 1 else 's'} older than {days} days deleted")
        return 0

    return _with_app(settings, work)


COMMANDS = {
    "audit": _audit,
    "serve": _serve,
    "spec": _spec,
    "grant-admin": _admin(True),
    "revoke-admin": _admin(False),
    "grant-role": _role(True),
    "revoke-role": _role(False),
    "unlock": _unlock,
    "keys": _keys,
    "plugins": _plugins,
    "check": _check,
    "migrate": _migrate,
}

if __name__ == "__main__":
    sys.exit(main())
