"""Account-lifecycle resources (docs/http/accounts.md): verify, resend, forgot, reset, the second
login step, and the caller's TOTP."""

from __future__ import annotations

import falcon

from locky.accounts import reauth
from locky.accounts.logins import Accounts
from locky.errors import StateConflict
from locky.accounts.lifecycle import Lifecycle
from locky.routes import Operation, Route
from locky.schemas import (
    EmailRequestSchema,
    MfaLoginRequestSchema,
    ReauthRequestSchema,
    ResetRequestSchema,
    TokenSchema,
    TotpCodeRequestSchema,
    VerifyRequestSchema,
)

from .writes import body, live

#: The Swagger words for the recent authentication the second factor's changes need.
RECENT_TEXT = ("Needs a recent authentication of this login (its password or a code checked within"
               " five minutes: the login itself, or POST /v1/private/users/me/reauth): otherwise 403"
               " {\"title\": \"Recent authentication required\"} with"
               " WWW-Authenticate: Bearer error=\"insufficient_user_authentication\" (RFC 9470).")

TOKEN = TokenSchema()
ACCEPTED = {"status": "accepted"}
#: The Swagger words for the abuse limit (docs/http/accounts.md) on password-forgot and verification-resend.
RECOVERY_LIMIT = ("One client address (X-Forwarded-For only from LOCKY_TRUSTED_PROXIES) may make"
                  " LOCKY_RECOVERY_MAX_PER_IP (30) password-forgot and verification-resend requests"
                  " together per hour, counted from its first; past it 429 with Retry-After (the seconds"
                  " until its hour ends), whatever the email.")


class Verify:
    def __init__(self, context, lifecycle: Lifecycle):
        self.context, self.lifecycle = context, lifecycle

    def on_post(self, req, resp):
        data = body(self.context, req, VerifyRequestSchema())
        self.lifecycle.verify(data["token"])
        resp.status = falcon.HTTP_204


class Accepted:
    """``POST {"email"}`` answered 202 with one body whatever the address: ``queue``
    (resend a verification code, send a reset code) decides later, in the sender. Only
    the client address's hourly count of these requests can refuse one (429)."""

    def __init__(self, context, queue):
        self.context, self.queue = context, queue

    def on_post(self, req, resp):
        data = body(self.context, req, EmailRequestSchema())
        self.queue(data["email"], client_address=req.context.client_address)
        resp.status = falcon.HTTP_202
        resp.media = ACCEPTED


class Reset:
    def __init__(self, context, lifecycle: Lifecycle):
        self.context, self.lifecycle = context, lifecycle

    def on_post(self, req, resp):
        data = body(self.context, req, ResetRequestSchema())
        self.lifecycle.reset(data["token"], data["password"])
        resp.status = falcon.HTTP_204


class MfaLogin:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = body(self.context, req, MfaLoginRequestSchema())
        resp.media = TOKEN.dump(self.accounts.login_mfa(data["mfa_token"], data["code"],
                                                        client_address=req.context.client_address))


class Totp:
    """The caller's own TOTP: set up (POST), turn off (DELETE). Each needs a recent
    authentication of the login (:mod:`locky.accounts.reauth`), so a stolen access token alone
    can neither enrol the thief's authenticator nor strip the owner's."""

    def __init__(self, context, lifecycle: Lifecycle):
        self.context, self.lifecycle = context, lifecycle

    def _caller(self, req):
        identity = req.context.identity
        self.context.require(identity, "users", "update", own=True)
        reauth.require(self.context, identity)
        return identity.user

    def on_post(self, req, resp):
        user = self._caller(req)
        resp.media = self.lifecycle.totp_begin(user)

    def on_post_confirm(self, req, resp):
        user = self._caller(req)
        data = body(self.context, req, TotpCodeRequestSchema())
        resp.media = self.lifecycle.totp_confirm(user, data["code"])

    def on_delete(self, req, resp):
        user = self._caller(req)
        data = body(self.context, req, TotpCodeRequestSchema())
        self.lifecycle.totp_remove(user, data["code"], client_address=req.context.client_address)
        resp.status = falcon.HTTP_204


class Reauth:
    """``POST /v1/private/users/me/reauth``: the caller's password, checked and counted
    like a login's, makes this login's authentication recent again."""

    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "users", "update", own=True)
        data = body(self.context, req, ReauthRequestSchema())
        user = self.context.storage.users.get_by_uuid(identity.user.uuid) or identity.user  # its stored hash
        self.accounts.confirm_password(user, data["password"], client_address=req.context.client_address,
                                       field="password")
        reauth.record(self.context, identity)
        resp.status = falcon.HTTP_204


class SecondFactors:
    """``DELETE /v1/private/users/{id}/mfa``: an admin removes a user's second factors
    (an owner who lost them, or whose account got a thief's), audited as
    ``mfa.disabled`` with the admin as actor."""

    def __init__(self, context, lifecycle: Lifecycle):
        self.context, self.lifecycle = context, lifecycle

    def on_delete(self, req, resp, id: int):
        user = live(self.context.storage.users, id)
        identity = req.context.identity
        self.context.require(identity, "users", "reset_mfa")
        if not self.lifecycle.remove_second_factors(user, actor_uuid=identity.user.uuid):
            raise StateConflict("The user has no second factor.")
        resp.status = falcon.HTTP_204


def routes(context, accounts: Accounts) -> list[Route]:
    lifecycle = Lifecycle(context, accounts)
    tag = "account"
    public_errors = (400, 413, 415, 503)
    totp = Totp(context, lifecycle)
    mine = (401, 403, 413, 415, 503)
    return [
        Route("/v1/public/users/verify", Verify(context, lifecycle), (
            Operation("post", "Prove an email address with the code sent to it", tag, status=204,
                      body="VerifyRequest", public=True, errors=public_errors,
                      description="Spends the code (single use, LOCKY_VERIFY_TTL seconds, default a day)"
                                  " and sets the account's email_verified. A bad, used or expired code, or"
                                  " one sent to an address the account no longer has, is a 400 on token."),
        )),
        Route("/v1/public/users/verify/resend", Accepted(context, lifecycle.resend), (
            Operation("post", "Send a new verification code", tag, status=202, body="EmailRequest",
                      response="Accepted", public=True, errors=(*public_errors, 429),
                      description="202 with the same body whatever the address: a message goes only to"
                                  " a live, unverified account, at most 3 an hour, and at most 3"
                                  " verification messages per address per hour whatever sends them"
                                  " (registration, email change, resend). Earlier codes stay valid. "
                                  + RECOVERY_LIMIT),
        )),
        Route("/v1/public/users/password/forgot", Accepted(context, lifecycle.forgot), (
            Operation("post", "Ask for a password-reset code by email", tag, status=202, body="EmailRequest",
                      response="Accepted", public=True, errors=(*public_errors, 429),
                      description="202 with the same body, in the same time, whether or not the"
                                  " address has an account: a message goes only to a live account, at"
                                  " most 3 per account per hour. The code lives LOCKY_RESET_TTL seconds"
                                  " (default 30 minutes). " + RECOVERY_LIMIT),
        )),
        Route("/v1/public/users/password/reset", Reset(context, lifecycle), (
            Operation("post", "Set a new password with a reset code", tag, status=204, body="ResetRequest",
                      public=True, errors=public_errors,
                      description="Sets the password (the password rules apply), ends every login of the"
                                  " account, lifts its login lockout, marks its email verified and sends a"
                                  " notice of the reset to the account's address. The"
                                  " code is spent only when the password is accepted."),
        )),
        Route("/v1/public/users/login/mfa", MfaLogin(context, accounts), (
            Operation("post", "Log in, second step: a TOTP or recovery code", "users", body="MfaLoginRequest",
                      response="Token", public=True, errors=(400, 401, 403, 413, 415, 429, 503),
                      description="For a login whose first step answered mfa_required. A TOTP code works"
                                  " once (±30 s); a recovery code works once. Wrong codes are failed"
                                  " logins: they count toward the lockout (429). The mfa_token is spent by"
                                  " the right code; an unknown, used or expired one is a 401."),
        )),
        Route("/v1/private/users/me/mfa/totp", totp, (
            Operation("post", "Set up TOTP: a new secret, pending until confirmed", tag,
                      response="TotpSetup", errors=(401, 403, 409, 503),
                      description="Replaces a pending secret; 409 while TOTP is on. The secret is kept"
                                  " encrypted at rest. " + RECENT_TEXT),
            Operation("delete", "Turn TOTP off, proved by a TOTP or recovery code", tag, status=204,
                      body="TotpCodeRequest", errors=(400, 409, 429, *mine),
                      description="Each code is counted like a login's password: a wrong one is a failed"
                                  " login, and past the login limits the answer is 429. " + RECENT_TEXT),
        )),
        Route("/v1/private/users/me/mfa/totp/confirm", totp, (
            Operation("post", "Turn TOTP on with a first code; get recovery codes", tag,
                      body="TotpCodeRequest", response="RecoveryCodes", errors=(400, *mine),
                      description="The ten recovery codes are shown only in this answer. " + RECENT_TEXT),
        ), suffix="confirm"),
        Route("/v1/private/users/me/reauth", Reauth(context, accounts), (
            Operation("post", "Confirm your password: this login's authentication is recent again", tag,
                      status=204, body=ReauthRequestSchema, errors=(400, 429, *mine),
                      description="The password is checked and counted like a login's (a wrong one is a"
                                  " 400 on password and a failed login; 429 while the login limits hold)."
                                  " For five minutes after, this login may change its second factor."),
        )),
        Route("/v1/private/users/{id:id}/mfa", SecondFactors(context, lifecycle), (
            Operation("delete", "Remove a user's second factors (admins)", "users", status=204,
                      errors=(401, 403, 404, 409, 503),
                      description="Turns the user's TOTP off, recovery codes included, audited as"
                                  " mfa.disabled with the admin as actor (details.by: admin). 409 when the"
                                  " user has none. The user's logins stay; disable the account to end them."),
        )),
    ]
