"""User resources: register, login, refresh, logout, me, update and delete."""

from __future__ import annotations

import falcon

from locky import audit
from locky.accounts import password_rules
from locky.mail import letters
from locky.accounts.logins import Accounts
from locky.dump import dumper
from locky.errors import Invalid, NotFound, StateConflict
from locky.http.media import load, read_json
from locky.routes import Operation, Route
from locky.schemas import (
    LoginRequestSchema,
    RefreshRequestSchema,
    TokenSchema,
    UserRequestSchema,
    UserSchema,
    UserUpdateSchema,
)

from . import lifecycle, passkeys
from .records import location
from .writes import audited, body, deleted, live, updated

USER = UserSchema()
#: ``USER.dump`` compiled (:mod:`locky.dump`): the same dict in a fraction of the time.
DUMP_USER = dumper(USER)
TOKEN = TokenSchema()


class Registration:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = body(self.context, req, UserRequestSchema())
        user = self.accounts.register(**data, client_address=req.context.client_address)
        resp.status = falcon.HTTP_201
        resp.location = location("users", user.id)
        resp.media = USER.dump(user)


class Login:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = load(LoginRequestSchema(), read_json(req, self.context.settings.max_body_bytes))
        result = self.accounts.login(data["email"], data["password"], client_address=req.context.client_address)
        # A second factor is due: the challenge, not tokens (docs/http/accounts.md).
        resp.media = result if result.get("mfa_required") else TOKEN.dump(result)


class Refresh:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = body(self.context, req, RefreshRequestSchema())
        resp.media = TOKEN.dump(self.accounts.refresh(data["refresh_token"]))


class Logout:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "sessions", "delete", own=True)
        self.accounts.logout(identity)
        resp.status = falcon.HTTP_204


class Me:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "users", "read", own=True)
        resp.media = DUMP_USER(identity.user)


class UserWrites:
    """``PUT`` and ``DELETE /v1/private/users/{id}``: the user themself or an admin.

    Users changing their own password or email prove they know the password
    (``current_password``, checked like a login attempt and counted by the same login
    throttle), so a stolen access token cannot take the account over. A new password
    ends every other login of the user; a password or email set by someone else (an
    admin) ends all of them. A new email is unverified until the code sent to it comes
    back (docs/http/accounts.md), so it never carries admin status by address (docs/http/authorization.md). ``disabled``
    is for admins (``users`` × ``disable``), never on oneself; turning an account off
    ends its logins in the same transaction.
    """

    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts
        self.store = context.storage.users

    def _target(self, req, id: int, action: str):
        user = live(self.store, id)
        identity = req.context.identity
        self.context.require(identity, "users", action, own=user.uuid == identity.user.uuid)
        return user

    def on_put(self, req, resp, id: int):
        user = self._target(req, id, "update")
        changes = body(self.context, req, UserUpdateSchema())
        current_password = changes.pop("current_password", None)
        password = changes.pop("password", None)
        identity = req.context.identity
        own = user.uuid == identity.user.uuid
        new_email = changes.get("email") not in (None, user.email)
        if "disabled" in changes:
            self.context.require(identity, "users", "disable", own=own)
            if own and changes["disabled"]:
                raise Invalid.one("disabled", "You cannot disable your own account.")
        if own and (password is not None or new_email):
            self.accounts.confirm_password(user, current_password, client_address=req.context.client_address)
        record = update_user(self.context, user, changes, password, own=own,
                             session_uuid=identity.session_uuid)
        updated(resp, USER, record)

    def on_delete(self, req, resp, id: int):
        self._target(req, id, "delete")
        audited(self.context, audit.USER_DELETED, "user", lambda: self.store.delete(id), user_deleted)
        deleted(resp)


def update_user(context, user, changes: dict, password: str | None, *, own: bool, session_uuid: str | None = None,
                via: str | None = None):
    """Write an update of ``user`` whose caller's rights and ``current_password`` are
    checked already: ``changes`` holds the stored fields (``name``, ``email``,
    ``disabled``, ``external_id``), ``password`` a new password or ``None``. The one
    path of ``PUT /v1/private/users/{id}`` and of SCIM (``via="scim"``, added to every
    event's details), so both make the same change.

    The password rules apply. One's own (``own``) new password keeps the login that
    made it (``session_uuid``); anyone else's change of credentials, and turning an
    account off, end them all. A new email is unverified and gets a verification
    message. 409 (:class:`StateConflict`) when the account's email, password or status
    changed since ``user`` was read."""
    new_email = changes.get("email") not in (None, user.email)
    disabling = changes.get("disabled") is True and not user.disabled
    if password is not None:
        password_rules.check(password, email=changes.get("email", user.email), name=changes.get("name", user.name))
        changes["password_hash"] = context.password_hasher.hash(password)
    # One's own new password keeps the login that made it; anyone else's change of
    # credentials, and turning an account off, end them all.
    end_logins = password is not None or (new_email and not own) or disabling
    storage = context.storage
    store = storage.users
    with storage.atomic():
        # What was decided above (the current password, whether the email is new,
        # whether this disables) holds only for the row as read then: it is locked
        # now and must still be that row, or nothing is written.
        current = store.for_update(user.uuid)
        if current is None:
            raise NotFound()
        if (current.email, current.password_hash, current.disabled) != (user.email, user.password_hash, user.disabled):
            raise StateConflict("The account's email, password or status changed while this request was"
                                " handled: read it again and retry.")
        record = store.update(user.id, **changes)
        if new_email:
            storage.outbox.put(purpose=letters.VERIFY, email=record.email, user_uuid=record.uuid)
        revoked = storage.sessions.revoke_all(user.uuid, keep=session_uuid if own else None) \
            if end_logins else 0
        record_update(context, user, record, changes, password is not None, revoked, via=via)
    if new_email:
        context.mail_sender.wake()
    return record


def record_update(context, before, after, changes: dict, password_changed: bool, sessions_ended: int,
                  via: str | None = None) -> None:
    """The events of one update: ``user.updated`` naming the fields that changed,
    then ``password.changed``, ``user.disabled``/``user.enabled`` where they apply;
    with ``via`` (``"scim"``) in each one's details."""
    record = context.audit.record
    extra = {"via": via} if via else {}
    changed = sorted(name for name in changes if name != "password_hash"
                     and getattr(before, name, None) != getattr(after, name, None))
    if password_changed:
        changed = sorted({*changed, "password"})
    details = {"changed": changed}
    if "email" in changed:
        details.update(email=after.email, previous_email=before.email)
    if sessions_ended:
        details["sessions_ended"] = sessions_ended
    record(audit.USER_UPDATED, target_type="user", target_uuid=after.uuid, details={**details, **extra},
           record=after)
    if password_changed:
        record(audit.PASSWORD_CHANGED, target_type="user", target_uuid=after.uuid, details=extra or None,
               record=after)
    if after.disabled != before.disabled:
        record(audit.USER_DISABLED if after.disabled else audit.USER_ENABLED, target_type="user",
               target_uuid=after.uuid, details={"email": after.email, **extra}, record=after)


def user_deleted(user) -> dict:
    """What ``user.deleted`` tells."""
    return {"email": user.email, "name": user.name}


def routes(context) -> list[Route]:
    accounts = Accounts(context)
    account_routes = lifecycle.routes(context, accounts)
    tag = "users"
    token_errors = (400, 401, 413, 415, 503)
    return [
        Route("/v1/public/users/register", Registration(context, accounts), (
            Operation("post", "Register a user", tag, status=201, body="UserRequest", response="User",
                      public=True, errors=(400, 413, 415, 429, 503), headers={"Location": "The new user's URL."},
                      description="Sends a verification message to the address (at most 3 verification"
                                  " messages per address per hour, whatever sends them). One client address"
                                  " (X-Forwarded-For only from LOCKY_TRUSTED_PROXIES) may register"
                                  " LOCKY_SIGNUP_MAX_PER_IP (30) times per hour, counted from its first"
                                  " registration; past it 429 with Retry-After (the seconds until its hour"
                                  " ends), before any password is hashed."),
        )),
        Route("/v1/public/users/login", Login(context, accounts), (
            Operation("post", "Log in: get an access and a refresh token", tag, body=LoginRequestSchema,
                      response="Token", public=True, errors=(*token_errors, 403, 429),
                      description="An account with a second factor gets no tokens here but"
                                  " {\"mfa_required\": true, \"mfa_token\", \"methods\": [\"totp\","
                                  " \"recovery_code\"]} (the MfaChallenge definition): send the mfa_token"
                                  " and a code to /public/users/login/mfa. After the password is checked,"
                                  " a disabled account is 403 \"Account disabled\", and with"
                                  " LOCKY_REQUIRE_VERIFIED_EMAIL an unverified one is 403 \"Email not"
                                  " verified\". Unknown emails and wrong passwords answer alike. After"
                                  " LOCKY_LOGIN_MAX_FAILURES (5) failures for one email within"
                                  " LOCKY_LOGIN_WINDOW (15 minutes), 429 with Retry-After, the right"
                                  " password included: the email is locked for 1/16 of the window,"
                                  " doubling with each further failure up to the window; attempts while"
                                  " locked are not counted and do not extend it. One client address"
                                  " (X-Forwarded-For only from LOCKY_TRUSTED_PROXIES) gets"
                                  " LOCKY_LOGIN_MAX_FAILURES_PER_IP (50) failures per window over all"
                                  " emails, then 429 alike. `locky unlock EMAIL` ends a lock."),
        )),
        Route("/v1/public/users/refresh", Refresh(context, accounts), (
            Operation("post", "Trade a refresh token for new tokens", tag, body=RefreshRequestSchema,
                      response="Token", public=True, errors=token_errors,
                      description="Each refresh token works once; reusing one revokes its whole login."),
        )),
        Route("/v1/private/users/logout", Logout(context, accounts), (
            Operation("post", "Log out: revoke this login's tokens", tag, status=204, errors=(401, 403, 503)),
        )),
        Route("/v1/internal/users/me", Me(context), (
            Operation("get", "The calling user", tag, response="User", errors=(401, 403, 503)),
        )),
        Route("/v1/private/users/{id:id}", UserWrites(context, accounts), (
            Operation("put", "Update a user (themself, or any as admin)", tag, body="UserUpdateRequest",
                      response="User", errors=(400, 401, 403, 404, 409, 413, 415, 429, 503),
                      description="Only the fields present change. Changing your own password or email needs"
                                  " current_password (checked and counted like a login: 429 when the login"
                                  " throttle is spent). A new password ends every other login of the user;"
                                  " a password or email set by an admin ends all of them. A new email is"
                                  " unverified (email_verified false) and gets a verification message."
                                  " 409 when the account's email, password or status changed while the"
                                  " request was handled (nothing is written; read it again and retry)."
                                  " disabled: admins only (403 otherwise), never on oneself (400); true"
                                  " ends every login of the user."),
            Operation("delete", "Delete a user (soft): memberships and tokens end too", tag, status=204,
                      errors=(401, 403, 404, 503)),
        )),
    ] + account_routes + passkeys.routes(context, accounts)
