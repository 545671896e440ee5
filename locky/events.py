"""Locky's one vocabulary of events (docs/events.md): their names, the :class:`Event` a
``locky_event`` plugin hears, and :data:`SPECS`, the one description of which action
records each and what it carries (``docs/events.md`` is generated from it by
``docs/gen_events.py``; ``tests/test_docs_events.py`` drives every row through the API
and the command line).

Every event is written to the audit trail (:mod:`locky.audit`, ``GET
/v1/internal/audit``, webhooks) in the transaction of the change it tells of, and
announced to plugins under the same name, with the same fields, once that transaction
has committed. Plugins add names of their own under a prefix of their own (the
``locky_audit_events`` hook) and record them with ``context.audit.record``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

USER_REGISTERED = "user.registered"
USER_UPDATED = "user.updated"
USER_DELETED = "user.deleted"
USER_DISABLED = "user.disabled"
USER_ENABLED = "user.enabled"
EMAIL_VERIFIED = "email.verified"
PASSWORD_CHANGED = "password.changed"
PASSWORD_RESET_REQUESTED = "password.reset_requested"
PASSWORD_RESET = "password.reset"
MFA_ENABLED = "mfa.enabled"
MFA_DISABLED = "mfa.disabled"
LOGIN_SUCCEEDED = "login.succeeded"
LOGIN_FAILED = "login.failed"
LOGIN_LOCKED = "login.locked"
TOKEN_REFRESHED = "token.refreshed"
TOKEN_REUSE_DETECTED = "token.reuse_detected"
TOKEN_REVOKED = "token.revoked"
GROUP_CREATED = "group.created"
GROUP_UPDATED = "group.updated"
GROUP_DELETED = "group.deleted"
MEMBER_ADDED = "member.added"
MEMBER_REMOVED = "member.removed"
ROLE_CREATED = "role.created"
ROLE_UPDATED = "role.updated"
ROLE_DELETED = "role.deleted"
ADMIN_GRANTED = "admin.granted"
ADMIN_REVOKED = "admin.revoked"
ROLE_GRANTED = "role.granted"
ROLE_REVOKED = "role.revoked"
KEY_ROTATED = "key.rotated"
WEBHOOK_CREATED = "webhook.created"
WEBHOOK_DELETED = "webhook.deleted"
# The OpenID provider and its clients (docs/http/oauth.md).
OAUTH_CLIENT_CREATED = "oauth.client.created"
OAUTH_CLIENT_UPDATED = "oauth.client.updated"
OAUTH_CLIENT_DELETED = "oauth.client.deleted"
OAUTH_CLIENT_SECRET_ROTATED = "oauth.client.secret_rotated"
OAUTH_CONSENT_GRANTED = "oauth.consent.granted"
OAUTH_CONSENT_REVOKED = "oauth.consent.revoked"
OAUTH_AUTHORIZED = "oauth.authorized"
OAUTH_TOKEN_ISSUED = "oauth.token.issued"
OAUTH_CODE_REUSE_DETECTED = "oauth.code.reuse_detected"
OAUTH_LOGOUT = "oauth.logout"
# Passkeys (docs/http/accounts.md#passkeys).
PASSKEY_REGISTERED = "passkey.registered"
PASSKEY_REMOVED = "passkey.removed"
PASSKEY_COUNTER_MISMATCH = "passkey.counter_mismatch"

#: Every event Locky records and announces, in the order docs/http/audit.md lists them.
NAMES = (
    USER_REGISTERED, USER_UPDATED, USER_DELETED, USER_DISABLED, USER_ENABLED, EMAIL_VERIFIED,
    PASSWORD_CHANGED, PASSWORD_RESET_REQUESTED, PASSWORD_RESET, MFA_ENABLED, MFA_DISABLED,
    LOGIN_SUCCEEDED, LOGIN_FAILED, LOGIN_LOCKED, TOKEN_REFRESHED, TOKEN_REUSE_DETECTED, TOKEN_REVOKED,
    GROUP_CREATED, GROUP_UPDATED, GROUP_DELETED, MEMBER_ADDED, MEMBER_REMOVED,
    ROLE_CREATED, ROLE_UPDATED, ROLE_DELETED, ADMIN_GRANTED, ADMIN_REVOKED, ROLE_GRANTED, ROLE_REVOKED, KEY_ROTATED,
    WEBHOOK_CREATED, WEBHOOK_DELETED,
    OAUTH_CLIENT_CREATED, OAUTH_CLIENT_UPDATED, OAUTH_CLIENT_DELETED, OAUTH_CLIENT_SECRET_ROTATED,
    OAUTH_CONSENT_GRANTED, OAUTH_CONSENT_REVOKED, OAUTH_AUTHORIZED, OAUTH_TOKEN_ISSUED, OAUTH_CODE_REUSE_DETECTED,
    OAUTH_LOGOUT, PASSKEY_REGISTERED, PASSKEY_REMOVED, PASSKEY_COUNTER_MISMATCH,
)

#: The first parts of Locky's own names (``user``, ``login``, ...) and ``locky``: no
#: plugin's event may start with one of them.
RESERVED_PREFIXES = frozenset({name.split(".")[0] for name in NAMES} | {"locky"})


@dataclass(frozen=True)
class Event:
    """One event of the audit trail, as a ``locky_event`` plugin hears it.

    The fields are the trail's (``GET /v1/internal/audit``): ``uuid`` (the event's, a
    webhook delivery's ``Locky-Event-Id``), ``actor_uuid`` (the caller; ``None`` when
    anonymous or on the command line), ``target_type`` and ``target_uuid``,
    ``client_address`` (the trail's ``ip``: the caller's address by the
    ``LOCKY_TRUSTED_PROXIES`` rule), ``request_id`` (the response's ``X-Request-ID``),
    both ``None`` outside a request (an operator's command), ``details`` and
    ``created_at`` (UTC). ``record`` is not stored in the trail: the record as it is
    after the change, where :data:`SPECS` names one (a ``User`` goes out with an empty
    ``password_hash``). Never holds a password, hash, token, code or secret.
    """

    name: str
    actor_uuid: str | None = None
    target_type: str | None = None
    target_uuid: str | None = None
    client_address: str | None = None
    request_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    record: Any = None
    uuid: str | None = None


@dataclass(frozen=True)
class EventSpec:
    """One way an event is recorded: a row of ``docs/events.md``.

    ``action`` is the request that records it (``"POST /v1/public/users/login"``), or the
    operator's command; ``fires_when`` says when in words; ``target_type``, ``record``
    (the name of the :mod:`locky.records` class the :class:`Event` carries, or ``None``)
    and ``details`` (its keys; one ending in ``?`` only where it applies) are what the
    event holds. An event recorded by several actions, or in several shapes, has a row
    for each.
    """

    name: str
    action: str
    fires_when: str
    target_type: str | None
    record: str | None
    details: tuple[str, ...] = ()


_REGISTER = "POST /v1/public/users/register"
_LOGIN = "POST /v1/public/users/login"
_MFA_LOGIN = "POST /v1/public/users/login/mfa"
_REFRESH = "POST /v1/public/users/refresh"
_OAUTH_TOKEN = "POST /oauth/token"
_FORGOT = "POST /v1/public/users/password/forgot"
_USER = "PUT /v1/private/users/{id}"
_TOTP = "DELETE /v1/private/users/me/mfa/totp"
_LOGIN_FAILED = ("email", "reason")
# The OpenID provider's pages (docs/http/oauth.md): their logins are the API's, made for a client.
_AUTHORIZE = "GET /oauth/authorize"
_PAGE_LOGIN = "POST /oauth/authorize/login"
_PAGE_CODE = "POST /oauth/authorize/code"
_PAGE_CONSENT = "POST /oauth/authorize/consent"
_LOGGED_IN = ("email", "session_uuid", "mfa", "method")
_PAGE_FAILED = ("email", "reason", "method", "client_id")
_AUTHORIZED = ("client_id", "scope", "op_session_uuid")
_CLIENT = ("client_id", "name", "type")
# Passkeys (docs/http/accounts.md#passkeys).
_PASSKEYS = "/v1/private/users/me/passkeys"
_PASSKEY_LOGIN = "POST /v1/public/users/login/passkey"
_PASSKEY = ("user_uuid", "name")

#: Every event, every action that records it, and what it carries: the single source of
#: ``docs/events.md``.
SPECS: tuple[EventSpec, ...] = (
    EventSpec(USER_REGISTERED, _REGISTER, "An account is registered (by nobody logged in: `actor_uuid` is null).",
              "user", "User", ("email", "name")),
    EventSpec(USER_UPDATED, _USER, "A user is changed: `changed` names the fields (`password` included);"
              " `email` and `previous_email` when the address changed, `sessions_ended` when logins ended.",
              "user", "User", ("changed", "email?", "previous_email?", "sessions_ended?")),
    EventSpec(USER_DELETED, "DELETE /v1/private/users/{id}", "A user is soft-deleted.", "user", "User",
              ("email", "name")),
    EventSpec(USER_DISABLED, _USER, "An admin turns an account off (`disabled: true`), after `user.updated`.",
              "user", "User", ("email",)),
    EventSpec(USER_ENABLED, _USER, "An admin turns an account back on (`disabled: false`), after `user.updated`.",
              "user", "User", ("email",)),
    EventSpec(EMAIL_VERIFIED, "POST /v1/public/users/verify", "A verification code proves the account's address.",
              "user", "User", ("email",)),
    EventSpec(PASSWORD_CHANGED, _USER, "A user's password is changed (by its owner with `current_password`, or by"
              " an admin), after `user.updated`.", "user", "User"),
    EventSpec(PASSWORD_RESET_REQUESTED, _FORGOT, "A reset code is asked for a live account's address"
              " (`account`: true).", "user", None, ("email", "account")),
    EventSpec(PASSWORD_RESET_REQUESTED, _FORGOT, "A reset code is asked for an address no live account has"
              " (`account`: false; no target).", None, None, ("email", "account")),
    EventSpec(PASSWORD_RESET, "POST /v1/public/users/password/reset", "A reset code sets a new password; every"
              " login of the account ends (`sessions_ended`: how many).", "user", "User", ("email", "sessions_ended")),
    EventSpec(MFA_ENABLED, "POST /v1/private/users/me/mfa/totp/confirm", "A first code confirms TOTP: the"
              " account now needs a second factor.", "user", "User", ("method",)),
    EventSpec(MFA_DISABLED, _TOTP, "The owner turns TOTP off, proved by a code.", "user", "User", ("method",)),
    EventSpec(MFA_DISABLED, "DELETE /v1/private/users/{id}/mfa", "An admin removes a user's second factors"
              " (`by`: `admin`; `actor_uuid` is the admin).", "user", "User", ("method", "by")),
    EventSpec(LOGIN_SUCCEEDED, _LOGIN, "A password login issues tokens (an account without a second factor);"
              " `actor_uuid` is the account, `method` is `password`.", "user", "User", _LOGGED_IN),
    EventSpec(LOGIN_SUCCEEDED, _MFA_LOGIN, "The second step of a login issues tokens (`method`: `totp` or"
              " `recovery_code`).", "user", "User", _LOGGED_IN),
    EventSpec(LOGIN_SUCCEEDED, _PAGE_LOGIN, "The sign-in page signs an account without a second factor in: its OP"
              " session (`session_uuid`) starts, for the client `client_id`.", "user", "User",
              (*_LOGGED_IN, "client_id")),
    EventSpec(LOGIN_SUCCEEDED, _PAGE_CODE, "The sign-in page's second step (TOTP or recovery code) signs the"
              " account in: its OP session starts.", "user", "User", (*_LOGGED_IN, "client_id")),
    EventSpec(LOGIN_FAILED, _LOGIN, "A wrong password for a live account (401), or the right one for an account"
              " disabled, or unverified while `LOCKY_REQUIRE_VERIFIED_EMAIL` is on (403); `method` is `password`.",
              "user", None, (*_LOGIN_FAILED, "method")),
    EventSpec(LOGIN_FAILED, _LOGIN, "No live account has the email (401; no target).", None, None,
              (*_LOGIN_FAILED, "method")),
    EventSpec(LOGIN_FAILED, _MFA_LOGIN, "A wrong TOTP or recovery code (401; `method`: the kind of code given).",
              "user", None, (*_LOGIN_FAILED, "method")),
    EventSpec(LOGIN_FAILED, _PAGE_LOGIN, "The sign-in page refuses a password as `POST /v1/public/users/login`"
              " does (401, 403), for the client `client_id`.", "user", None, _PAGE_FAILED),
    EventSpec(LOGIN_FAILED, _PAGE_LOGIN, "The sign-in page is given an email no live account has (401; no"
              " target).", None, None, _PAGE_FAILED),
    EventSpec(LOGIN_FAILED, _PAGE_CODE, "A wrong TOTP or recovery code on the sign-in page (401).", "user", None,
              _PAGE_FAILED),
    EventSpec(LOGIN_FAILED, _USER, "A user changing their own password or email gives no `current_password`,"
              " or a wrong one (400).", "user", None, _LOGIN_FAILED),
    EventSpec(LOGIN_FAILED, "POST /v1/private/users/me/reauth", "A wrong password to renew a login's"
              " authentication (400).", "user", None, _LOGIN_FAILED),
    EventSpec(LOGIN_FAILED, _TOTP, "A wrong code to turn TOTP off (400).", "user", None, _LOGIN_FAILED),
    EventSpec(LOGIN_LOCKED, _LOGIN, "The email or the client address is locked after too many failures (429);"
              " likewise on `/login/mfa` and wherever a password or code is checked. No target.",
              None, None, ("email", "reason", "retry_after")),
    EventSpec(TOKEN_REFRESHED, _REFRESH, "A refresh token is exchanged for new tokens (`actor_uuid`: the"
              " account).", "session", None, ("user_uuid",)),
    EventSpec(TOKEN_REUSE_DETECTED, _REFRESH, "A refresh token already used, or of a login that ended, is"
              " presented again (401); its login ends.", "session", None, ("user_uuid",)),
    EventSpec(TOKEN_REVOKED, "POST /v1/private/users/logout", "The caller logs out: their login ends.",
              "session", None, ("reason", "user_uuid")),
    EventSpec(TOKEN_REVOKED, "POST /v1/public/tokens/revoke", "A live token is revoked: its login ends"
              " (public route: `actor_uuid` is null).", "session", None, ("reason", "user_uuid")),
    EventSpec(TOKEN_REVOKED, "POST /v1/public/tokens/revoke", "A client revokes a `client_credentials` token of"
              " its own: every token of the client ends (its token generation moves on).", "oauth_client", None,
              ("reason", "client_id")),
    EventSpec(TOKEN_REFRESHED, _OAUTH_TOKEN, "A client exchanges a refresh token at the OpenID provider's token"
              " endpoint (`actor_uuid`: the user).", "session", None, ("user_uuid", "client_id")),
    EventSpec(TOKEN_REUSE_DETECTED, _OAUTH_TOKEN, "A client presents a refresh token already used, or of a login"
              " that ended (400 `invalid_grant`); its login ends.", "session", None, ("user_uuid", "client_id")),
    EventSpec(GROUP_CREATED, "POST /v1/private/groups", "A group is created; its creator owns it.", "group",
              "Group", ("name", "owner_uuid")),
    EventSpec(GROUP_UPDATED, "PUT /v1/private/groups/{id}", "A group is changed (`changed`: the fields sent).",
              "group", "Group", ("name", "changed")),
    EventSpec(GROUP_DELETED, "DELETE /v1/private/groups/{id}", "A group is soft-deleted.", "group", "Group",
              ("name",)),
    EventSpec(MEMBER_ADDED, "POST /v1/private/members", "A user joins a group with a role.", "member", "Member",
              ("group_uuid", "user_uuid", "role")),
    EventSpec(MEMBER_REMOVED, "DELETE /v1/private/members/{id}", "A membership ends (removed, or left).",
              "member", "Member", ("group_uuid", "user_uuid", "role")),
    EventSpec(ROLE_CREATED, "POST /v1/private/roles", "A custom role is created.", "role", "Role",
              ("name", "permissions")),
    EventSpec(ROLE_UPDATED, "PUT /v1/private/roles/{id}", "A custom role is changed (`changed`: the fields sent).",
              "role", "Role", ("name", "permissions", "changed")),
    EventSpec(ROLE_DELETED, "DELETE /v1/private/roles/{id}", "A custom role is soft-deleted.", "role", "Role",
              ("name", "permissions")),
    EventSpec(ADMIN_GRANTED, "locky grant-admin EMAIL", "The operator makes a user an admin from the command"
              " line (no request: `actor_uuid`, `request_id` and `client_address` are null; `actor` is"
              " `cli`).", "user", "User", ("email", "via", "actor")),
    EventSpec(ADMIN_REVOKED, "locky revoke-admin EMAIL", "The operator takes a stored admin grant back from the"
              " command line.", "user", "User", ("email", "via", "actor")),
    EventSpec(ROLE_GRANTED, "locky grant-role SUBJECT ROLE", "The operator grants a user (SUBJECT an email) a"
              " role everywhere, from the command line (`subject`: the user's uuid).", "user", "User",
              ("subject", "role", "email", "actor")),
    EventSpec(ROLE_GRANTED, "locky grant-role client:CLIENT_ID ROLE", "The operator grants a machine client a"
              " role everywhere (`subject`: `client:<client_id>`).", "oauth_client", "OAuthClient",
              ("subject", "role", "client_id", "actor")),
    EventSpec(ROLE_REVOKED, "locky revoke-role SUBJECT ROLE", "The operator takes a user's role grant back.",
              "user", "User", ("subject", "role", "email", "actor")),
    EventSpec(ROLE_REVOKED, "locky revoke-role client:CLIENT_ID ROLE", "The operator takes a machine client's"
              " role grant back.", "oauth_client", "OAuthClient", ("subject", "role", "client_id", "actor")),
    EventSpec(KEY_ROTATED, "POST /v1/private/keys/rotate", "An admin rotates the signing keys: one event per"
              " key family (the configured algorithm's, RS256's for ID tokens, ...).", "key", None, ("kid", "alg")),
    EventSpec(KEY_ROTATED, "locky keys rotate", "The operator rotates the signing keys from the command line, one"
              " event per key family (no request: `actor_uuid`, `request_id` and `client_address` are null).",
              "key", None, ("kid", "alg", "actor")),
    EventSpec(WEBHOOK_CREATED, "POST /v1/private/webhooks", "An admin subscribes a URL to events (`url` without"
              " its query).", "webhook", None, ("id", "url", "events")),
    EventSpec(WEBHOOK_DELETED, "DELETE /v1/private/webhooks/{id}", "An admin ends a subscription.", "webhook",
              None, ("id", "url")),
    EventSpec(OAUTH_AUTHORIZED, _AUTHORIZE, "A browser signed in at Locky, whose consent covers the scopes (or"
              " whose client is first-party), gets an authorization code for the client (`actor_uuid` and target:"
              " the user; `op_session_uuid`: the OP session).", "user", None, _AUTHORIZED),
    EventSpec(OAUTH_AUTHORIZED, _PAGE_LOGIN, "Signing in on the page gives the code at once (a first-party client,"
              " or scopes consented to before), after `login.succeeded`.", "user", None, _AUTHORIZED),
    EventSpec(OAUTH_AUTHORIZED, _PAGE_CODE, "Likewise after the second step of signing in.", "user", None,
              _AUTHORIZED),
    EventSpec(OAUTH_AUTHORIZED, _PAGE_CONSENT, "The user allows the client: the code follows"
              " `oauth.consent.granted`.", "user", None, _AUTHORIZED),
    EventSpec(OAUTH_CONSENT_GRANTED, _PAGE_CONSENT, "The user answers *Allow* on the consent page: the client's"
              " scopes join the user's consent to it (`scopes`: all of them now).", "user", "Consent",
              ("client_id", "scopes")),
    EventSpec(OAUTH_LOGOUT, "GET /oauth/logout", "A browser signs out at Locky (RP-initiated logout): its OP session"
              " (the target) and the `sessions_ended` logins it gave clients end; `client_id` when a client asked.",
              "session", None, ("user_uuid", "sessions_ended", "client_id?")),
    EventSpec(OAUTH_TOKEN_ISSUED, _OAUTH_TOKEN, "A client exchanges an authorization code: the user's login at"
              " the client (a session) begins (`actor_uuid`: the user).", "session", None,
              ("client_id", "grant_type", "scope", "user_uuid")),
    EventSpec(OAUTH_TOKEN_ISSUED, _OAUTH_TOKEN, "A machine client gets a token of its own (`client_credentials`:"
              " no session; `actor_uuid` is null).", "oauth_client", None, ("client_id", "grant_type", "scope")),
    EventSpec(OAUTH_CODE_REUSE_DETECTED, _OAUTH_TOKEN, "An authorization code is presented again (400"
              " `invalid_grant`): the login its first use made ends (`actor_uuid` is null).", "session", None,
              ("client_id", "user_uuid")),
    EventSpec(OAUTH_CLIENT_CREATED, "POST /v1/private/oauth/clients", "An admin registers an OAuth client (never"
              " its secret).", "oauth_client", "OAuthClient", _CLIENT + ("grant_types", "redirect_uris")),
    EventSpec(OAUTH_CLIENT_CREATED, "locky clients create NAME", "The operator registers an OAuth client from the"
              " command line (`actor_uuid` null, `actor` is `cli`).", "oauth_client", "OAuthClient",
              _CLIENT + ("grant_types", "redirect_uris", "actor")),
    EventSpec(OAUTH_CLIENT_UPDATED, "PUT /v1/private/oauth/clients/{id}", "An admin changes a client (`changed`:"
              " the fields sent).", "oauth_client", "OAuthClient", _CLIENT + ("changed",)),
    EventSpec(OAUTH_CLIENT_DELETED, "DELETE /v1/private/oauth/clients/{id}", "An admin deletes a client (soft);"
              " `sessions_ended` logins it was given end with it.", "oauth_client", "OAuthClient",
              _CLIENT + ("sessions_ended",)),
    EventSpec(OAUTH_CLIENT_DELETED, "locky clients delete CLIENT_ID", "The operator deletes a client from the"
              " command line.", "oauth_client", "OAuthClient", _CLIENT + ("sessions_ended", "actor")),
    EventSpec(OAUTH_CLIENT_SECRET_ROTATED, "POST /v1/private/oauth/clients/{id}/secret", "An admin gives a"
              " confidential client a new secret; the old one stops working.", "oauth_client", "OAuthClient",
              _CLIENT),
    EventSpec(OAUTH_CLIENT_SECRET_ROTATED, "locky clients rotate-secret CLIENT_ID", "The operator gives a client a"
              " new secret from the command line.", "oauth_client", "OAuthClient", _CLIENT + ("actor",)),
    EventSpec(OAUTH_CONSENT_REVOKED, "DELETE /v1/private/users/me/consents/{client_id}", "A user withdraws their"
              " consent to a client; `sessions_ended` logins of theirs by that client end.", "user", "Consent",
              ("client_id", "scopes", "sessions_ended")),
    EventSpec(PASSKEY_REGISTERED, f"POST {_PASSKEYS}", "A user registers a passkey (`actor_uuid`: the user; the"
              " target is the passkey).", "passkey", "Passkey", _PASSKEY),
    EventSpec(PASSKEY_REMOVED, f"DELETE {_PASSKEYS}/{{id}}", "A user removes one of their passkeys: nothing signs"
              " in with it again.", "passkey", "Passkey", _PASSKEY),
    EventSpec(PASSKEY_COUNTER_MISMATCH, _PASSKEY_LOGIN, "A passkey's answer verified, but its signature counter"
              " (`sign_count`) did not move on from the stored one (`stored_sign_count`): a copied authenticator,"
              " or a replay. The sign-in is refused (400), after this event `login.failed`.", "passkey", "Passkey",
              (*_PASSKEY, "sign_count", "stored_sign_count")),
    EventSpec(LOGIN_SUCCEEDED, _PASSKEY_LOGIN, "A passkey signs an account in (`method`: `passkey`): one that"
              " verified its user, or any passkey of an account without a second factor.", "user", "User",
              _LOGGED_IN),
    EventSpec(LOGIN_FAILED, _PASSKEY_LOGIN, "A passkey of a live account does not verify, or its counter did not"
              " move on (400), or its account is disabled or unverified (403); `method` is `passkey`.", "user",
              None, (*_LOGIN_FAILED, "method")),
    EventSpec(LOGIN_FAILED, _PASSKEY_LOGIN, "No live account has the passkey (400; no target).", None, None,
              ("reason", "method")),
)
