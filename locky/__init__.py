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
    "AuditTrail": "locky.audit",
    "Context": "locky.context",
    "Conflict": "locky.errors", "Forbidden": "locky.errors", "Invalid": "locky.errors",
    "LockyError": "locky.errors", "Locked": "locky.errors", "NotFound": "locky.errors",
    "SchemaError": "locky.errors", "Unauthorized": "locky.errors", "Unavailable": "locky.errors",
    "Event": "locky.events",
    "load": "locky.http.media", "read_json": "locky.http.media",
    "hookimpl": "locky.plugins",
    "Authorizer": "locky.providers", "BuiltinRole": "locky.providers", "Claims": "locky.providers",
    "IssuedToken": "locky.providers", "Migration": "locky.providers", "PasswordHasher": "locky.providers",
    "SchemaState": "locky.providers", "Storage": "locky.providers", "TokenBackend": "locky.providers",
    # The stores a Storage holds: their docstrings are the storage specification.
    "AuditStore": "locky.providers", "CodeStore": "locky.providers", "DeliveryStore": "locky.providers",
    "DocumentPages": "locky.providers",
    "ExplainingAuthorizer": "locky.providers", "GrantStore": "locky.providers", "GroupStore": "locky.providers",
    "HolderSources": "locky.providers", "KeyStore": "locky.providers", "LoginThrottle": "locky.providers",
    "Mailer": "locky.providers",
    "MemberStore": "locky.providers", "Outbox": "locky.providers", "RecordStore": "locky.providers",
    "RoleStore": "locky.providers", "SessionStore": "locky.providers", "TotpStore": "locky.providers",
    "UserStore": "locky.providers", "WebhookStore": "locky.providers",
    "AuthorizationCodeStore": "locky.providers", "ConsentStore": "locky.providers",
    "OAuthClientStore": "locky.providers", "PasskeyStore": "locky.providers",
    "Authenticated": "locky.records", "Group": "locky.records", "Identity": "locky.records",
    "Member": "locky.records", "Page": "locky.records", "Permission": "locky.records",
    "Role": "locky.records", "Session": "locky.records", "User": "locky.records",
    "AuditEvent": "locky.records", "Code": "locky.records", "Delivery": "locky.records",
    "Letter": "locky.records", "SigningKey": "locky.records", "TotpState": "locky.records",
    "Webhook": "locky.records",
    "AuthorizationCode": "locky.records", "Consent": "locky.records", "OAuthClient": "locky.records", "Passkey": "locky.records",
    "CLIENT_SUBJECT_PREFIX": "locky.records", "client_principal": "locky.records",
    "is_client_subject": "locky.records", "wire_time": "locky.records",
    # The rules of a record's values: use these rather than a copy.
    "MAX_ID": "locky.records", "ROLE_NAME": "locky.records", "UUID4": "locky.records", "utcnow": "locky.records",
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
    from locky.audit import AuditTrail
    from locky.context import Context
    from locky.errors import (
        Conflict, Forbidden, Invalid, LockyError, Locked, NotFound, SchemaError, Unauthorized, Unavailable,
    )
    from locky.events import Event
    from locky.http.media import load, read_json
    from locky.plugins import hookimpl
    from locky.providers import (
        AuditStore, Authorizer, BuiltinRole, Claims, CodeStore, DeliveryStore, DocumentPages, ExplainingAuthorizer,
        GrantStore, GroupStore, HolderSources, IssuedToken, KeyStore, LoginThrottle, Mailer, MemberStore, Migration,
        Outbox, PasswordHasher, RecordStore, RoleStore, SchemaState, SessionStore, Storage, TokenBackend, TotpStore,
        UserStore, WebhookStore, AuthorizationCodeStore, ConsentStore, OAuthClientStore, PasskeyStore,
    )
    from locky.records import (
        MAX_ID, ROLE_NAME, UUID4, AuditEvent, Authenticated, Code, Delivery, Group, Identity, Letter, Member, Page,
        Permission, Role, Session, SigningKey, TotpState, User, Webhook, utcnow,
        AuthorizationCode, Consent, OAuthClient, Passkey, CLIENT_SUBJECT_PREFIX, client_principal, is_client_subject,
        wire_time,
    )
    from locky.registry import ProviderError, Registry
    from locky.routes import Operation, Route
    from locky.settings import Settings, SettingsError

#: The package's version (semantic versioning; CHANGELOG.md says what each one changed). The
#: Swagger document keeps its own, "1.0.0" (locky.spec.VERSION), as the contract says.
__version__ = "2.0.0"

__all__ = [
    "AuditEvent",
    "AuditStore",
    "AuditTrail",
    "Authenticated",
    "AuthorizationCode",
    "AuthorizationCodeStore",
    "Authorizer",
    "BuiltinRole",
    "CLIENT_SUBJECT_PREFIX",
    "Claims",
    "Code",
    "CodeStore",
    "Conflict",
    "Consent",
    "ConsentStore",
    "Context",
    "Delivery",
    "DeliveryStore",
    "DocumentPages",
    "Event",
    "ExplainingAuthorizer",
    "Forbidden",
    "GrantStore",
    "Group",
    "GroupStore",
    "HolderSources",
    "Identity",
    "Invalid",
    "IssuedToken",
    "KeyStore",
    "Letter",
    "Locked",
    "LockyApp",
    "LockyError",
    "LoginThrottle",
    "MAX_ID",
    "Mailer",
    "Member",
    "MemberStore",
    "Migration",
    "NotFound",
    "OAuthClient",
    "OAuthClientStore",
    "Operation",
    "Outbox",
    "Page",
    "Passkey",
    "PasskeyStore",
    "PasswordHasher",
    "Permission",
    "ProviderError",
    "ROLE_NAME",
    "RecordStore",
    "Registry",
    "Role",
    "RoleStore",
    "Route",
    "SchemaError",
    "SchemaState",
    "Session",
    "SessionStore",
    "Settings",
    "SettingsError",
    "SigningKey",
    "Storage",
    "TokenBackend",
    "TotpState",
    "TotpStore",
    "UUID4",
    "Unauthorized",
    "Unavailable",
    "User",
    "UserStore",
    "Webhook",
    "WebhookStore",
    "client_principal",
    "create_app",
    "hookimpl",
    "is_client_subject",
    "load",
    "read_json",
    "utcnow",
    "wire_time",
    "__version__",
]
