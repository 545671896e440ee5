"""Locky: an access-management service and plugin kit.

What plugins and embedding applications may use is re-exported here; everything
else may change between releases.
"""

from locky.app import LockyApp, create_app
from locky.context import Context
from locky.errors import (
    Conflict, Forbidden, Invalid, LockyError, Locked, NotFound, SchemaError, Unauthorized, Unavailable,
)
from locky.events import Event
from locky.media import load, read_json
from locky.plugins import hookimpl
from locky.providers import (
    Authorizer,
    BuiltinRole,
    Claims,
    IssuedToken,
    Migration,
    PasswordHasher,
    SchemaState,
    Storage,
    TokenBackend,
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
