"""The context of one app: its settings, plugin manager and providers.

Built by :func:`locky.create_app` and passed to every hook and resource; nothing in
Locky is global, so two apps in one process share nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import pluggy

from locky.audit import AuditTrail
from locky.errors import Forbidden
from locky.mail.sender import MailSender
from locky.providers import Authorizer, Mailer, PasswordHasher, Storage, TokenBackend
from locky.records import Identity
from locky.registry import Registry
from locky.settings import Settings
from locky.webhooks.sender import WebhookSender

log = logging.getLogger("locky")

#: The provider slots, in the order they are built, with the setting naming each.
SLOTS = (
    ("storage", "locky_register_storage"),
    ("password_hasher", "locky_register_password_hashers"),
    ("tokens", "locky_register_tokens"),
    ("authorizer", "locky_register_authorizers"),
    ("mailer", "locky_register_mailers"),
)


def fill_registries(hook) -> dict[str, Registry]:
    """A registry per provider slot, filled by the plugins' ``locky_register_*`` hooks."""
    registries: dict[str, Registry] = {}
    for slot, hook_name in SLOTS:
        registries[slot] = Registry(slot.replace("_", " "))
        getattr(hook, hook_name)(registry=registries[slot])
    return registries


class Context:
    """Everything an app's resources and plugins share."""

    storage: Storage
    password_hasher: PasswordHasher
    tokens: TokenBackend
    authorizer: Authorizer
    mailer: Mailer

    def __init__(self, settings: Settings, pm: pluggy.PluginManager):
        self.settings = settings
        self.pm = pm
        self.hook = pm.hook
        self.registries: dict[str, Registry] = {}
        self.state: dict[str, Any] = {}  # room for plugins' own per-app state
        # Sends the outbox's letters from a thread of each process (started by create_app).
        self.mail_sender = MailSender(self)
        # The audit trail (docs/http/audit.md), whose events plugins hear (docs/events.md), and the thread
        # that sends its webhook deliveries.
        self.audit = AuditTrail(self)
        self.webhook_sender = WebhookSender(self)
        self._closed = False

    def build_providers(self) -> None:
        """Build each provider slot from the implementation named in settings."""
        self.registries = fill_registries(self.hook)
        for slot, _ in SLOTS:
            setattr(self, slot, self.registries[slot].create(getattr(self.settings, slot), self))
        # Events recorded in a block are announced to plugins once it committed.
        self.audit.watch(self.storage)

    def allowed(
        self,
        identity: Identity,
        resource: str,
        action: str,
        *,
        group_uuid: str | None = None,
        own: bool = False,
    ) -> bool:
        """The authorizer's decision, vetoable by ``locky_check_access`` plugins and
        announced to ``locky_decision`` observers.

        The authorizer gets ``identity.policy_revision`` (the revision read with the
        caller's session at authentication), so the decision needs no second read of it.
        """
        allowed = self.authorizer.is_allowed(identity.user, resource, action, group_uuid=group_uuid, own=own,
                                             policy_revision=identity.policy_revision)
        # Both hooks are skipped when no plugin implements them (the default): a call
        # with no implementation still costs pluggy's dispatch, twice per request.
        hook = self.hook
        check, decision = hook.locky_check_access, hook.locky_decision
        vetoable, observed = allowed and check.get_hookimpls(), decision.get_hookimpls()
        if not (vetoable or observed):
            return allowed
        scope = {"group_uuid": group_uuid, "own": own}
        if vetoable:
            vetoes = check(context=self, identity=identity, resource=resource, action=action, scope=scope)
            allowed = not any(v is False for v in vetoes)
        if observed:
            try:
                decision(context=self, identity=identity, resource=resource, action=action, scope=scope,
                         allowed=allowed)
            except Exception:
                log.exception("a locky_decision implementation failed")
        return allowed

    def require(self, identity: Identity, resource: str, action: str, **scope: Any) -> None:
        """Raise :class:`~locky.errors.Forbidden` unless :meth:`allowed`."""
        if not self.allowed(identity, resource, action, **scope):
            raise Forbidden()

    def close(self) -> None:
        """Run ``locky_shutdown`` and close storage; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.mail_sender.stop()
        self.webhook_sender.stop()
        try:
            self.hook.locky_shutdown(context=self)
        finally:
            storage = getattr(self, "storage", None)
            if storage is not None:
                storage.close()
