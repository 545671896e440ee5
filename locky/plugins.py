"""The plugin manager: one per app, holding the bundled plugins, installed ones and extras.

Bundled plugins are registered first, then packages found through the ``locky``
entry-point group, then modules named in ``LOCKY_PLUGINS``, then plugin objects
passed to :func:`locky.create_app`. ``LOCKY_BLOCK_PLUGINS`` (comma-separated names)
keeps named plugins out, ``LOCKY_TRACE_PLUGINS=1`` logs every hook call.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any, Iterable

import pluggy

from locky import hookspecs
from locky.settings import SettingsError

ENTRY_POINT_GROUP = "locky"
hookimpl = pluggy.HookimplMarker("locky")

#: The plugins that make up the reference service; each is an importable module.
DEFAULT_PLUGINS = (
    "locky.resources.plugin",
    "locky_pony",
    "locky_jwt",
    "locky_bcrypt",
    "locky_casbin",
)

log = logging.getLogger("locky.plugins")


def build_plugin_manager(
    module_names: Iterable[str] = (), plugins: Iterable[Any] = (), environ=None
) -> pluggy.PluginManager:
    """A fresh plugin manager with every plugin this app should have, checked."""
    environ = os.environ if environ is None else environ
    pm = pluggy.PluginManager("locky")
    pm.add_hookspecs(hookspecs)
    # Historic: plugins registered later still get the call and can add their hookspecs.
    pm.hook.locky_addhooks.call_historic(kwargs={"pluginmanager": pm})
    for name in _split(environ.get("LOCKY_BLOCK_PLUGINS", "")):
        pm.set_blocked(name)
    for name in DEFAULT_PLUGINS:
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(name), name=name)
    pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for name in module_names:
        if pm.is_blocked(name) or pm.get_plugin(name) is not None:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise SettingsError(f"LOCKY_PLUGINS names {name!r}, which cannot be imported: {exc}") from None
        pm.register(module, name=name)
    for plugin in plugins:
        pm.register(plugin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise SettingsError(f"a plugin implements an unknown hook: {exc}") from None
    if environ.get("LOCKY_TRACE_PLUGINS"):
        pm.trace.root.setwriter(log.debug)
        pm.enable_tracing()
    return pm


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


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
