"""The plugin manager: one per app, holding the bundled plugins, installed ones and extras.

Everything comes from the app's :class:`~locky.settings.Settings`, never from the
environment directly. Bundled plugins are registered first, then packages found through
the ``locky`` entry-point group (``autoload_plugins``), then modules named in ``plugins``
(``LOCKY_PLUGINS``), then plugin objects passed to :func:`locky.create_app`.
``block_plugins`` keeps named plugins out, ``trace_plugins`` logs every hook call.

An installed entry point that implements ``locky_authenticate`` adds a way into the API,
so it is loaded only when ``plugins`` names it: installing a package must not open a door.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from typing import Any, Iterable

import pluggy

from locky import hookspecs
from locky.settings import PluginSettings, Settings, SettingsError

ENTRY_POINT_GROUP = "locky"
hookimpl = pluggy.HookimplMarker("locky")

#: The plugins that make up the reference service; each is an importable module.
DEFAULT_PLUGINS = (
    "locky.resources.plugin",
    # The OpenID provider's routes (docs/http/oauth.md); LOCKY_BLOCK_PLUGINS turns it off.
    "locky.oauth.routes",
    # SCIM 2.0 provisioning at /scim/v2 (docs/http/scim.md); LOCKY_BLOCK_PLUGINS turns it off.
    "locky.scim.routes",
    "locky_pony",
    "locky_jwt",
    "locky_bcrypt",
    "locky_casbin",
    "locky_mail",
)

#: Hooks that let a caller in: an installed entry point implementing one is loaded only
#: when the ``plugins`` setting names it.
WAYS_IN = ("locky_authenticate",)

log = logging.getLogger("locky.plugins")


def build_plugin_manager(settings: Settings | None = None, plugins: Iterable[Any] = ()) -> pluggy.PluginManager:
    """A fresh plugin manager with every plugin ``settings`` asks for, checked.

    ``settings`` defaults to ``Settings()`` (the defaults, not the environment).
    """
    if settings is None:
        settings = Settings()
    elif not isinstance(settings, Settings):
        raise TypeError(f"build_plugin_manager takes the app's Settings, not {type(settings).__name__}")
    pm = pluggy.PluginManager("locky")
    pm.add_hookspecs(hookspecs)
    # Historic: plugins registered later still get the call and can add their hookspecs.
    pm.hook.locky_addhooks.call_historic(kwargs={"pluginmanager": pm})
    for name in settings.block_plugins:
        pm.set_blocked(name)
    for name in DEFAULT_PLUGINS:
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(name), name=name)
    _load_entry_points(pm, named=settings.plugins, autoload=settings.autoload_plugins)
    for name in settings.plugins:
        if pm.is_blocked(name) or pm.get_plugin(name) is not None:
            continue  # blocked, or an entry point of that name loaded above
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise SettingsError(f"LOCKY_PLUGINS names {name!r}, which is neither an installed `locky`"
                                f" entry point nor importable: {exc}") from None
        pm.register(module, name=name)
    for plugin in plugins:
        _register_object(pm, plugin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise SettingsError(f"a plugin implements an unknown hook: {exc}") from None
    declared_settings(pm).refuse_unknown(settings.extra, [name for name, plugin in pm.list_name_plugin()
                                                          if plugin is not None])
    if settings.trace_plugins:
        pm.trace.root.setwriter(log.debug)
        pm.enable_tracing()
    return pm


def _register_object(pm: pluggy.PluginManager, plugin: Any) -> None:
    """Register a plugin object given to :func:`locky.create_app`, once: a module that
    ``LOCKY_PLUGINS`` or an entry point loaded already, or one listed twice, is in use
    as it is; another object under a name in use stops startup with both named."""
    if pm.is_registered(plugin):
        return
    name = pm.get_canonical_name(plugin)
    if pm.is_blocked(name):
        return
    taken = pm.get_plugin(name)
    if taken is not None:
        raise SettingsError(f"two different plugins are named {name!r}: {taken!r} is loaded, and the plugin"
                            f" object {plugin!r} passed to create_app has that name too; give one another"
                            " name (a module's is its import path)")
    pm.register(plugin)


def bundled_settings() -> PluginSettings:
    """What the bundled plugins declare with ``locky_add_settings``, all of them (blocked
    or not: a blocked plugin's settings are still read, unused, as they always were):
    their ``LOCKY_*`` settings come from here, before any plugin manager of an app exists."""
    pm = pluggy.PluginManager("locky")
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    return declared_settings(pm)


def declared_settings(pm: pluggy.PluginManager) -> PluginSettings:
    """What the loaded plugins declare with ``locky_add_settings``: their ``[plugins.NAME]``
    tables and their checks."""
    declared = PluginSettings()
    pm.hook.locky_add_settings(settings=declared)
    return declared


def _load_entry_points(pm: pluggy.PluginManager, *, named: Iterable[str], autoload: bool) -> None:
    """Register the ``locky`` entry points of installed distributions.

    With ``autoload`` off only those whose name is in ``named`` (``LOCKY_PLUGINS``); with
    it on every one, except that one implementing a hook of :data:`WAYS_IN` needs its
    name in ``named`` too (it is imported to be inspected, never registered, otherwise).
    """
    named = frozenset(named)
    for dist in list(importlib.metadata.distributions()):
        for entry_point in dist.entry_points:
            name = entry_point.name
            if entry_point.group != ENTRY_POINT_GROUP or pm.is_blocked(name) or pm.get_plugin(name) is not None:
                continue
            if name not in named:
                if not autoload:
                    continue
                ways_in = _ways_in(pm, entry_point.load())
                if ways_in:
                    log.warning(
                        "not loading the installed plugin %r (distribution %s): it implements %s, a way"
                        " into the API; to enable it, add %r to LOCKY_PLUGINS (the `plugins` setting)",
                        name, dist.metadata["Name"], ", ".join(ways_in), name,
                    )
                    continue
            # pluggy's own loader, for this one name: it records the distribution too.
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)


def _ways_in(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    """The hooks of :data:`WAYS_IN` that ``plugin`` implements (under any attribute name)."""
    found = []
    for attribute in dir(plugin):
        options = pm.parse_hookimpl_opts(plugin, attribute)
        if options is not None and (options.get("specname") or attribute) in WAYS_IN:
            found.append(options.get("specname") or attribute)
    return sorted(set(found))


def describe(pm: pluggy.PluginManager) -> list[dict[str, Any]]:
    """What is loaded and from where, for ``locky plugins``."""
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        dist = dists.get(id(plugin))
        rows.append(
            {
                "name": name,
                "module": getattr(plugin, "__name__", type(plugin).__name__),
                "file": getattr(plugin, "__file__", None),
                "distribution": f"{dist.project_name} {dist.version}" if dist else None,
                "hooks": sorted(h.name for h in pm.get_hookcallers(plugin) or ()),
            }
        )
    return rows

