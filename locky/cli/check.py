"""``locky check`` and the offline parts of ``locky plugins`` and ``locky spec``.

``check`` verifies, in the order an operator fixes them: the plugins and the provider
named for each slot, the stored secret, the plugins' own checks (``locky_add_settings``:
the Casbin plugin's policy files), that the database exists, and finally the whole app,
built as ``locky serve`` builds it (schema version included). It
prints what it checked: the database URL with any password masked, the schema version,
the policy directory and the provider chosen for each slot.

A mistyped SQLite path is an error here, not a new empty database: ``locky migrate``
(or ``locky serve``) is what creates one.

Not read-only on a database no server has started on: building the app writes what a
first start writes (a SQLite database's secret file, the built-in roles, the first
signing key), as docs/operating.md says. On a database already served it changes nothing.
"""

from __future__ import annotations

import urllib.parse

import pluggy

from locky.context import SLOTS, fill_registries
from locky.registry import ProviderError, Registry
from locky.settings import Settings, SettingsError

#: A SQLite URL that names no file: an in-memory database, made on demand.
IN_MEMORY = "sqlite:///:memory:"


def in_memory(settings: Settings) -> Settings:
    """``settings`` on an in-memory database: what needs a server engine is left out."""
    return settings.in_memory(IN_MEMORY)


def masked_url(url: str) -> str:
    """``url`` with its password (if any) shown as ``***``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def registries(settings: Settings, pm: pluggy.PluginManager) -> dict[str, Registry]:
    """Every provider slot's registry, filled by the plugins; raises
    :class:`SettingsError` when the name a setting chooses is not registered."""
    try:
        found = fill_registries(pm.hook)
        for slot, registry in found.items():
            registry.require(getattr(settings, slot))
    except ProviderError as exc:
        raise SettingsError(str(exc)) from None
    return found


def require_database(settings: Settings) -> None:
    """Raise :class:`SettingsError` when a SQLite URL names a file that does not exist."""
    path = settings.sqlite_path
    if path is None or path.exists():
        return
    raise SettingsError(
        f"no database at {path} (LOCKY_DATABASE_URL={masked_url(settings.database_url)}): check the"
        " path; `locky migrate` creates a new database there"
    )


def check_secret(settings: Settings) -> None:
    """Check the secret without making one: a given secret was checked with the
    settings; a SQLite database's secret file is read only when it exists."""
    if settings.jwt_secret:
        return
    path = settings.sqlite_path
    if path is None or path.with_name(path.name + ".secret").exists():
        settings.with_secret()  # reads and checks the file; refuses other engines


def check_plugins(settings: Settings, pm: pluggy.PluginManager) -> None:
    """Run the checks the plugins declare with ``locky_add_settings`` (the bundled
    ``casbin`` authorizer loads its policy files when it is the one chosen)."""
    from locky.plugins import declared_settings

    for check in declared_settings(pm).checks:
        check(settings)


def report(app, settings: Settings) -> list[str]:
    """What ``locky check`` found, one line each."""
    context = app.context
    where = f" (file {settings.sqlite_path})" if settings.sqlite_path else ""
    lines = [f"database:        {masked_url(settings.database_url)}{where}"]
    schema = context.storage.schema()
    lines.append(f"schema version:  {schema.current} (this Locky writes {schema.latest})")
    lines.append(f"policy:          {_policy_source(context, settings)}")
    for slot, _ in SLOTS:
        lines.append(f"{slot + ':':<16} {getattr(settings, slot)}")
    lines.append(f"plugins loaded:  {len(context.pm.get_plugins())}")
    return lines


def _policy_source(context, settings: Settings) -> str:
    files = getattr(context.authorizer, "files", None)
    source = getattr(files, "source", None)
    if source:
        return source + ("" if settings.policy_dir else " (shipped)")
    return settings.policy_dir or "(the authorizer's own)"
