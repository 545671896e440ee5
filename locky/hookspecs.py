"""Hook specifications: every seam a Locky plugin can plug into.

A plugin is any module or object with functions marked ``@locky.hookimpl`` and named
after a spec below. Bundled behaviour (Pony storage, JWT tokens, bcrypt, Casbin) is
itself made of plugins that use only these hooks.

Providers of the security-critical slots (storage, tokens, password hashing,
authorization) are *registered* by name and *chosen* by name in the settings; a
plugin can never replace one silently by being installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import pluggy

if TYPE_CHECKING:
    import argparse

    import falcon
    from apispec import APISpec

    from locky.context import Context
    from locky.events import Event
    from locky.records import Identity
    from locky.registry import Registry
    from locky.routes import Route
    from locky.settings import PluginSettings

hookspec = pluggy.HookspecMarker("locky")


# ---------------------------------------------------------------------------
# Plugin manager set-up
# ---------------------------------------------------------------------------


@hookspec(historic=True)
def locky_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Publish hook specifications of your own plugin.

    Called when the plugin is registered, before any other hook. Call
    ``pluginmanager.add_hookspecs(module)`` so other plugins can implement your hooks.
    Returns nothing.
    """


@hookspec
def locky_add_settings(settings: PluginSettings) -> None:
    """Declare your plugin's own settings, as pytest's ``pytest_addoption`` does.

    A plugin's options live in a ``[plugins.NAME]`` table of the TOML settings file and
    reach it as ``context.settings.extra[NAME]`` (a dict; ``{}`` when the table is absent).
    Call ``settings.add_table("NAME", options={"url": "where ...", ...})`` for each table
    your plugin reads, naming the options it may hold with a line of help each (``options=None``
    accepts any). Startup stops, listing the known names, on a ``[plugins.NAME]`` table no
    loaded plugin declares (a misspelt name, or the table of a plugin that is not loaded) and
    on an option its table does not declare. A table named after a loaded plugin (its
    module's name, with or without the ``locky_`` prefix: ``[plugins.redis]`` for
    ``locky_redis``) is accepted without a declaration, its options unchecked.

    ``settings.add_check(check)`` adds ``check(settings)``, which raises
    :class:`locky.SettingsError` with a message that says what to fix; ``locky check``
    runs every check, in the order the plugins were registered, after the secret and
    before the database (the bundled Casbin authorizer checks its policy files so).

    The plugins bundled with Locky also declare their ``LOCKY_*`` settings here, with
    ``settings.add(name, default, type=..., bounds=..., check=..., help=...)``
    (``LOCKY_POLICY_DIR``, ``LOCKY_SMTP_URL``, ``LOCKY_BCRYPT_ROUNDS``, the storage's
    ``LOCKY_DATABASE_POOL_SIZE``, ...): read like Locky's own and as
    ``context.settings.name``; ``settings.add_rule(rule)`` adds ``rule(settings)`` for
    settings that must go together (``LOCKY_AUTH_CACHE=notify`` needs PostgreSQL), checked
    wherever settings are built. Those are collected from the bundled plugins once per
    process, before any app's plugin manager exists.

    Called once per plugin manager (every app, ``locky check``, ``locky plugins``), after
    every plugin is registered and before any provider is built. Returns nothing.
    """


@hookspec
def locky_add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add subcommands to the ``locky`` command, as tox's ``tox_add_option`` does.

    ``subparsers`` is the ``argparse`` sub-parser action of ``locky``: add yours with
    ``command = subparsers.add_parser("NAME", help="...")`` and its arguments, and say
    what runs it with ``command.set_defaults(run=function)``. Locky calls
    ``function(args, settings)`` with the parsed arguments and the loaded settings and
    exits with the number it returns; ``command.set_defaults(run=function,
    offline=True)`` calls ``function(args, None)`` without reading settings (a command
    that needs no database or configuration, such as ``locky policy``, then works on a
    machine whose settings are broken). Raise :class:`locky.SettingsError` to stop
    with its message and status 2. A name Locky or another plugin uses stops the command
    with argparse's own error.

    Called once when ``locky`` starts, with the plugins the settings load (the bundled
    ones and the defaults when the settings cannot be read). Returns nothing.
    """


# ---------------------------------------------------------------------------
# Providers, registered by name (called once per app, at startup)
# ---------------------------------------------------------------------------


@hookspec
def locky_register_storage(registry: Registry) -> None:
    """Register storage backends: ``registry.add("name", factory)``.

    ``factory(context)`` returns an object that implements
    :class:`locky.providers.Storage`. The backend used is the one named by the
    ``storage`` setting (``LOCKY_STORAGE``, default ``pony``). Called once per app,
    before any other provider is built. Returns nothing.
    """


@hookspec
def locky_register_password_hashers(registry: Registry) -> None:
    """Register password hashers: ``registry.add("name", factory)``.

    ``factory(context)`` returns a :class:`locky.providers.PasswordHasher`; the one
    used is named by ``password_hasher`` (default ``bcrypt``). Returns nothing.
    """


@hookspec
def locky_register_tokens(registry: Registry) -> None:
    """Register token backends: ``registry.add("name", factory)``.

    ``factory(context)`` returns a :class:`locky.providers.TokenBackend`; the one used
    is named by ``tokens`` (default ``jwt``). Built after storage and the password
    hasher, so ``context.storage`` is available. Returns nothing.
    """


@hookspec
def locky_register_authorizers(registry: Registry) -> None:
    """Register authorizers: ``registry.add("name", factory)``.

    ``factory(context)`` returns a :class:`locky.providers.Authorizer`; the one used
    is named by ``authorizer`` (default ``casbin``). Built last, so every other
    provider is on the context. Returns nothing.
    """


@hookspec
def locky_register_mailers(registry: Registry) -> None:
    """Register mailers: ``registry.add("name", factory)``.

    ``factory(context)`` returns a :class:`locky.providers.Mailer`; the one used is
    named by ``mailer`` (``LOCKY_MAILER``, default ``file``; ``smtp`` is bundled too).
    Locky never calls a mailer from a request: messages wait in storage's outbox and a
    background sender hands them over, retrying while ``send`` raises. Built after the
    authorizer. Returns nothing.
    """


# ---------------------------------------------------------------------------
# HTTP surface
# ---------------------------------------------------------------------------


@hookspec
def locky_routes(context: Context) -> list[Route] | None:
    """Return :class:`locky.routes.Route` objects to mount on the app.

    Called once at startup after the providers are built. Each route carries its
    resource and the Swagger description of its operations, so routes added here
    appear in ``/swagger/doc.json`` too. Results of all plugins are combined; a path
    registered twice stops startup.
    """


@hookspec
def locky_swagger(spec: APISpec, context: Context) -> None:
    """Add schemas, parameters or security definitions to the Swagger document.

    Called once when the document is built, after every route's paths are in it.
    Returns nothing.
    """


@hookspec
def locky_middleware(context: Context) -> list[Any] | None:
    """Return extra Falcon middleware objects, added after Locky's own.

    Called once at startup. Results of all plugins are combined in registration order.
    """


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def locky_authenticate(req: falcon.Request, context: Context) -> Identity | None:
    """Authenticate a request with a credential the plugin owns.

    Called for every request to a protected endpoint, before the configured token
    backend looks at it. Return an :class:`locky.records.Identity` for a credential
    that is yours and valid; ``None`` when the credential is not yours (the next
    implementation, and finally the token backend, gets it); raise
    :class:`locky.errors.Unauthorized` when it is yours but bad. ``firstresult``.
    """


@hookspec
def locky_check_access(
    context: Context, identity: Identity, resource: str, action: str, scope: dict[str, Any]
) -> bool | None:
    """Veto an operation the authorizer allowed.

    Called after the configured authorizer said yes. ``scope`` holds ``group_uuid``
    (or ``None``) and ``own`` (the record belongs to the caller). Return ``False`` to
    deny (403); ``True`` or ``None`` changes nothing. Plugins may deny, never grant.
    """


@hookspec
def locky_decision(
    context: Context, identity: Identity, resource: str, action: str, scope: dict[str, Any], allowed: bool
) -> None:
    """Observe a final access decision (for metrics and audit); it cannot be changed here.

    Called by :meth:`locky.Context.allowed` for every decision, allowed or denied, after
    the authorizer and every ``locky_check_access`` veto. ``scope`` is as in
    ``locky_check_access``. An exception in an implementation is logged and does not
    change the decision. Returns nothing.
    """


# ---------------------------------------------------------------------------
# Life cycle and events
# ---------------------------------------------------------------------------


@hookspec
def locky_startup(context: Context) -> None:
    """The app is built and about to serve: open connections, start threads.

    Called once per app (once per worker process), after routes are mounted.
    Returns nothing.
    """


@hookspec
def locky_shutdown(context: Context) -> None:
    """The app is closing: release what ``locky_startup`` took.

    Called once from ``context.close()``; storage is closed after it. Returns nothing.
    """


@hookspec
def locky_audit_events(context: Context) -> Iterable[str] | None:
    """Declare the names of the events this plugin records.

    Return the names (``["api_keys.created", "api_keys.revoked"]``) the plugin will
    record with ``context.audit.record(name, target_type=..., target_uuid=...,
    details=...)``, the one call that writes the audit trail. Each name is a prefix of
    the plugin's own and more parts, lowercase letters and ``_`` joined by dots, at most
    64 characters. Startup stops on a name that is malformed, that starts with one of
    Locky's own prefixes (``user.``, ``login.``, ``token.``, ... and ``locky.``: see
    ``locky.events.RESERVED_PREFIXES``), or whose prefix another plugin declares too.
    Declared events are stored in the trail, selected by ``GET /v1/internal/audit``'s
    ``event`` filter (``api_keys.created``, ``api_keys.*``) and by webhook patterns,
    and announced through ``locky_event`` like Locky's own. Recording a name nobody
    declared raises ``ValueError``.

    Called once per app, right after the providers are built. Returns the names, or
    ``None``.
    """


@hookspec
def locky_event(event: Event, context: Context) -> None:
    """An event of the audit trail has been recorded and its transaction has committed.

    ``event.name`` is one of Locky's (the names ``GET /v1/internal/audit`` shows:
    ``user.registered``, ``login.failed``, ``member.added``, ... in
    ``locky.events.NAMES``) or one a plugin declared with ``locky_audit_events``;
    ``event`` carries the trail's ``uuid``, ``actor_uuid``, ``target_type``,
    ``target_uuid``, ``client_address`` (the trail's ``ip``), ``request_id``,
    ``details`` and ``created_at``, and the ``record`` after the change where there is
    one. [The event table](events.md) (from ``locky.events.SPECS``) says which action
    records each, and its target, record and details.

    Called once per event, after the outermost ``storage.atomic()`` block that wrote it
    has committed (a plugin that reads storage sees the change; an undone block
    announces nothing), in the process that made the change: the HTTP API's and the
    console's requests, and the operator's commands (``locky grant-admin``, ``locky
    keys rotate``: ``actor_uuid``, ``request_id`` and ``client_address`` are ``None``).
    An exception in an implementation is logged and changes nothing. Returns nothing.
    """
