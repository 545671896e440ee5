"""Locky: an access-management service and plugin kit.

What plugins and embedding applications may use is re-exported here; everything
else may change between releases.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Where each public name lives. They are imported on first use (PEP 562), so that
#: ``import locky.client`` (for applications that only verify tokens) loads none of the
#: server: no Falcon, Pony or Casbin.
_EXPORTS = {
    "LockyApp": "locky.app", "create_app": "locky.app",
    "Context": "locky.context",
    "Conflict": "locky.errors", "Forbidden": "locky.errors", "Invalid": "locky.errors",
    "LockyError": "locky.errors", "Locked": "locky.errors", "NotFound": "locky.errors",
    "SchemaError": "locky.errors", "Unauthorized": "locky.errors", "Unavailable": "locky.errors",
    "Event": "locky.events",
    "load": "locky.media", "read_json": "locky.media",
    "hookimpl": "locky.plugins",
    "Authorizer": "locky.providers", "BuiltinRole": "locky.providers", "Claims": "locky.providers",
    "IssuedToken": "locky.providers", "Migration": "locky.providers", "PasswordHasher": "locky.providers",
    "SchemaState": "locky.providers", "Storage": "locky.providers", "TokenBackend": "locky.providers",
    "Authenticated": "locky.records", "Group": "locky.records", "Identity": "locky.records",
    "Member": "locky.records", "Page": "locky.records", "Permission": "locky.records",
    "Role": "locky.records", "Session": "locky.records", "User": "locky.records",
    "ProviderError": "locky.registry", "Registry": "locky.registry",
    "Operation": "locky.routes", "Route": "locky.routes",
    "Settings": "locky.settings", "SettingsError": "locky.settings",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'locky' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from locky.app import LockyApp, create_app
    from locky.context import Context
    from locky.errors import (
        Conflict, Forbidden, Invalid, LockyError, Locked, NotFound, SchemaError, Unauthorized, Unavailable,
    )
    from locky.events import Event
    from locky.media import load, read_json
    from locky.plugins import hookimpl
    from locky.providers import (
        Authorizer, BuiltinRole, Claims, IssuedToken, Migration, PasswordHasher, SchemaState, Storage, TokenBackend,
    )
    from locky.records import Authenticated, Group, Identity, Member, Page, Permission, Role, Session, User
    from locky.registry import ProviderError, Registry
    from locky.routes import Operation, Route
    from locky.settings import Settings, SettingsError

__version__ = "1.0.0"

__all__ = [
    "Authenticated",
    "Authorizer",
    "BuiltinRole",
    "Claims",
    "Conflict",
    "Context",
    "Event",
    "Forbidden",
    "Group",
    "Identity",
    "Invalid",
    "IssuedToken",
    "Locked",
    "LockyApp",
    "LockyError",
    "Member",
    "Migration",
    "NotFound",
    "Operation",
    "Page",
    "PasswordHasher",
    "Permission",
    "ProviderError",
    "Registry",
    "Role",
    "Route",
    "SchemaError",
    "SchemaState",
    "Session",
    "Settings",
    "SettingsError",
    "Storage",
    "TokenBackend",
    "Unauthorized",
    "Unavailable",
    "User",
    "create_app",
    "hookimpl",
    "load",
    "read_json",
    "__version__",
]
