"""Locky: an access-management service and plugin kit.

What plugins and embedding applications may use is re-exported here; everything
else may change between releases.
"""

from locky.app import LockyApp, create_app
from locky.context import Context
from locky.errors import Conflict, Forbidden, Invalid, LockyError, Locked, NotFound, Unauthorized, Unavailable
from locky.events import Event
from locky.media import load, read_json
from locky.plugins import hookimpl
from locky.providers import (
    Authorizer,
    BuiltinRole,
    Claims,
    IssuedToken,
    PasswordHasher,
    Storage,
    TokenBackend,
)
from locky.records import Group, Identity, Member, Page, Permission, Role, Session, User
from locky.registry import ProviderError, Registry
from locky.routes import Operation, Route
from locky.settings import Settings, SettingsError

__version__ = "1.0.0"

__all__ = [
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
    "NotFound",
    "Operation",
    "Page",
    "PasswordHasher",
    "Permission",
    "ProviderError",
    "Registry",
    "Role",
    "Route",
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
