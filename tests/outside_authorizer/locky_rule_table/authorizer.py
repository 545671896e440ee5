"""The ``rule-table`` authorizer (see ``docs/authorizers.md`` of Locky).

Who holds what comes from Locky's storage and settings: every user holds ``user``
(a machine client, ``client:<client_id>``, holds ``client`` instead); a
membership's role holds in its group only; global grants (``locky grant-admin``) and
verified admin emails give ``admin``. What a role may do comes from the rule table
(:mod:`.rules`) and, for roles made through the API, ``storage.roles.custom_permissions()``,
reloaded whenever ``storage.revision()`` moves.
"""

from __future__ import annotations

import threading
from pathlib import Path

from locky import BuiltinRole, Permission, SettingsError, User, is_client_subject

from . import rules as rule_table

SETTINGS_KEY = "rule_table"
WRITE_KINDS = frozenset({"create", "update", "delete"})
#: Held everywhere, never through a membership.
GLOBAL_ROLES = frozenset({"admin", "user", "client"})
CUSTOM = "assign:custom"


def rules_path(settings) -> str:
    """``[plugins.rule_table] path``, else beside Locky's SQLite database, else in memory."""
    options = settings.extra.get(SETTINGS_KEY, {})
    unknown = sorted(set(options) - {"path"})
    if unknown:
        raise SettingsError(f"[plugins.{SETTINGS_KEY}] has unknown key(s): {', '.join(unknown)}; known: path")
    if options.get("path"):
        return str(Path(options["path"]).expanduser().resolve())
    if settings.sqlite_path is not None:
        return str(settings.sqlite_path.parent / "authorizer-rules.sqlite")
    return ":memory:"


class RuleTableAuthorizer:
    def __init__(self, context):
        self.storage = context.storage
        self.table = rule_table.load(rules_path(context.settings))
        self.admin_emails = frozenset(e.strip().lower() for e in context.settings.admin_emails)
        self._lock = threading.Lock()
        self._revision: int | None = None
        self._custom: dict[str, tuple[rule_table.Rule, ...]] = {}
        self._grants: dict[str, frozenset[str]] = {}

    # -- what the user holds ------------------------------------------------------------

    def _policy(self, revision: int | None) -> tuple[dict, dict]:
        """Custom roles' rules and the grants read so far, for this revision."""
        if revision is None:
            revision = self.storage.revision()
        if revision != self._revision:
            with self._lock:
                if revision != self._revision:
                    custom = self.storage.roles.custom_permissions()
                    self._custom = {name: tuple(rule_table.Rule("*", p.resource, p.action) for p in permissions)
                                    for name, permissions in custom.items()}
                    self._grants = {}
                    self._revision = revision
        return self._custom, self._grants

    def _held(self, user: User, group_uuid: str | None, grants: dict) -> list[str]:
        held = ["client" if is_client_subject(user.uuid) else "user"]
        if user.email_verified and user.email in self.admin_emails:
            held.append("admin")
        granted = grants.get(user.uuid)
        if granted is None:
            granted = grants[user.uuid] = frozenset(self.storage.grants.roles_of(user.uuid))
        held.extend(granted)
        if group_uuid is not None:
            role = self.storage.members.role_of(user.uuid, group_uuid)
            if role is not None and role not in GLOBAL_ROLES:
                held.append(role)
        return held

    def _closure(self, roles: list[str]) -> list[str]:
        found: list[str] = []
        todo = list(roles)
        while todo:
            role = todo.pop(0)
            if role not in found:
                found.append(role)
                todo.extend(self.table.parents.get(role, ()))
        return found

    # -- deciding -------------------------------------------------------------------------

    @staticmethod
    def _action_matches(rule_action: str, action: str, custom: dict) -> bool:
        if rule_action in ("*", action):
            return True
        if rule_action == "write" and action in WRITE_KINDS:
            return True
        return rule_action == CUSTOM and action.startswith("assign:") and action[len("assign:"):] in custom

    def is_allowed(self, user: User, resource: str, action: str, *, group_uuid: str | None = None,
                   own: bool = False, policy_revision: int | None = None) -> bool:
        custom, grants = self._policy(policy_revision)
        for role in self._closure(self._held(user, group_uuid, grants)):
            for rule in self.table.rules.get(role, ()) + custom.get(role, ()):
                if rule.scope == "self" and not own:
                    continue
                if rule.resource in ("*", resource) and self._action_matches(rule.action, action, custom):
                    return True
        return False

    def builtin_roles(self) -> list[BuiltinRole]:
        return [
            BuiltinRole(
                name=name,
                description=description,
                permissions=tuple(dict.fromkeys(Permission(r.resource, r.action)
                                                for r in self.table.rules.get(name, ()) if r.scope == "*")),
            )
            for name, description in self.table.descriptions.items()
        ]
