"""Passkey resources (docs/http/accounts.md#passkeys): the caller's passkeys (options,
register, list, rename, remove) and signing in with one.

Adding and removing a passkey need a recent authentication of the login
(:mod:`locky.accounts.reauth`), as TOTP's changes do, so a stolen access token alone
can neither enrol the thief's authenticator nor take the owner's away. A passkey
sign-in is itself such an authentication: it makes a new login.
"""

from __future__ import annotations

import falcon

from locky.accounts import reauth
from locky.accounts.logins import Accounts
from locky.accounts.passkeys import MAX_PER_USER, Passkeys
from locky.routes import Operation, Route
from locky.schemas import (
    PasskeyCreationOptionsSchema,
    PasskeyListSchema,
    PasskeyLoginOptionsRequestSchema,
    PasskeyLoginRequestSchema,
    PasskeyRenameSchema,
    PasskeyRequestOptionsSchema,
    PasskeyRequestSchema,
    PasskeySchema,
    TokenSchema,
)

from .lifecycle import RECENT_TEXT
from .writes import body

PASSKEY = PasskeySchema()
PASSKEYS = PasskeyListSchema()
TOKEN = TokenSchema()


class _Mine:
    """The caller's own passkeys: the caller, allowed to change their own account."""

    def __init__(self, context, service: Passkeys):
        self.context, self.service = context, service

    def _caller(self, req, recent: bool = False):
        identity = req.context.identity
        self.context.require(identity, "users", "update", own=True)
        if recent:
            reauth.require(self.context, identity)
        return identity.user


class CreationOptions(_Mine):
    def on_post(self, req, resp):
        resp.media = self.service.creation_options(self._caller(req, recent=True))


class MyPasskeys(_Mine):
    def on_post(self, req, resp):
        user = self._caller(req, recent=True)
        data = body(self.context, req, PasskeyRequestSchema())
        passkey = self.service.register(user, data["credential"], data.get("name"))
        resp.status = falcon.HTTP_201
        resp.media = PASSKEY.dump(passkey)


class MyPasskeyList(_Mine):
    def on_get(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "users", "read", own=True)
        resp.media = PASSKEYS.dump({"passkeys": self.service.of_user(identity.user)})


class MyPasskey(_Mine):
    def on_patch(self, req, resp, id: int):
        user = self._caller(req)
        data = body(self.context, req, PasskeyRenameSchema())
        resp.media = PASSKEY.dump(self.service.rename(user, id, data["name"]))

    def on_delete(self, req, resp, id: int):
        self.service.remove(self._caller(req, recent=True), id)
        resp.status = falcon.HTTP_204


class LoginOptions:
    def __init__(self, context, service: Passkeys):
        self.context, self.service = context, service

    def on_post(self, req, resp):
        # No body at all is the discoverable case, like {}.
        data = {} if not req.content_length and not req.content_type else body(
            self.context, req, PasskeyLoginOptionsRequestSchema())
        resp.media = self.service.request_options(data.get("email"))


class PasskeyLogin:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = body(self.context, req, PasskeyLoginRequestSchema())
        result = self.accounts.sign_in_with_passkey(data["credential"], client_address=req.context.client_address)
        # A passkey without user verification on an account with TOTP: the second step.
        resp.media = result if result.get("mfa_required") else TOKEN.dump(result)


def routes(context, accounts: Accounts) -> list[Route]:
    service = Passkeys(context)
    tag = "account"
    mine = (401, 403, 413, 415, 503)
    bad = "A credential that does not verify (or is malformed, or answers a used, expired or foreign challenge): 400 {\"credential\": ...}."
    return [
        Route("/v1/private/users/me/passkeys/options", CreationOptions(context, service), (
            Operation("post", "Options to register a passkey (navigator.credentials.create)", tag,
                      response=PasskeyCreationOptionsSchema, errors=(409, *mine),
                      description="The JSON form PublicKeyCredential.parseCreationOptionsFromJSON takes: a"
                                  " resident key required, user verification preferred, the caller's passkeys"
                                  " excluded, no attestation, ES256/EdDSA/RS256. The challenge is single-use"
                                  f" and lives 5 minutes. 409 when the caller has {MAX_PER_USER} passkeys. "
                                  + RECENT_TEXT),
        )),
        Route("/v1/private/users/me/passkeys", MyPasskeys(context, service), (
            Operation("post", "Register a passkey", tag, status=201, body=PasskeyRequestSchema,
                      response=PasskeySchema, errors=(400, 409, *mine),
                      description="Audited as passkey.registered. " + bad + " A passkey any account has"
                                  " already: 400 {\"credential\": \"Already registered.\"}. 409 past"
                                  f" {MAX_PER_USER} passkeys. " + RECENT_TEXT),
        )),
        Route("/v1/internal/users/me/passkeys", MyPasskeyList(context, service), (
            Operation("get", "The caller's passkeys", tag, response=PasskeyListSchema, errors=(401, 403, 503)),
        )),
        Route("/v1/private/users/me/passkeys/{id:id}", MyPasskey(context, service), (
            Operation("patch", "Rename one of the caller's passkeys", tag, body=PasskeyRenameSchema,
                      response=PasskeySchema, errors=(400, 404, *mine),
                      description="404 when the caller has no passkey of that id (another user's included)."),
            Operation("delete", "Remove one of the caller's passkeys", tag, status=204, errors=(404, *mine),
                      description="Nothing can sign in with it again; audited as passkey.removed. 404 when the"
                                  " caller has no passkey of that id (another user's included). " + RECENT_TEXT),
        )),
        Route("/v1/public/users/login/passkey/options", LoginOptions(context, service), (
            Operation("post", "Options to sign in with a passkey (navigator.credentials.get)", "users",
                      body=PasskeyLoginOptionsRequestSchema, body_required=False,
                      response=PasskeyRequestOptionsSchema, public=True,
                      errors=(400, 413, 415, 503),
                      description="The JSON form PublicKeyCredential.parseRequestOptionsFromJSON takes; the"
                                  " body may be empty or {}. Without an email, allowCredentials is empty (a"
                                  " discoverable passkey); with one, that account's passkeys. An address with"
                                  " no passkeys, or no account, gets one credential id of the same shape, the"
                                  " same every time: the answer tells no one whether it has an account. The"
                                  " challenge is single-use and lives 5 minutes."),
        )),
        Route("/v1/public/users/login/passkey", PasskeyLogin(context, accounts), (
            Operation("post", "Sign in with a passkey: get an access and a refresh token", "users",
                      body=PasskeyLoginRequestSchema, response="Token", public=True,
                      errors=(400, 403, 413, 415, 429, 503),
                      description="A passkey that verified its user is a full sign-in (amr hwk, user, mfa),"
                                  " whatever second factor the account has. One that did not is a first factor"
                                  " like a password: an account with TOTP gets {\"mfa_required\": true,"
                                  " \"mfa_token\", \"methods\"} for /public/users/login/mfa. " + bad + " A"
                                  " signature counter that does not move on is refused the same way and"
                                  " audited as passkey.counter_mismatch. A disabled account is 403 \"Account"
                                  " disabled\" (unverified with LOCKY_REQUIRE_VERIFIED_EMAIL: 403 \"Email not"
                                  " verified\"). Each answer naming a passkey counts toward its account's"
                                  " login limits from the client address: past them 429 with Retry-After."),
        )),
    ]
