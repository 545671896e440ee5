"""User resources: register, login, refresh, logout, me, update and delete."""

from __future__ import annotations

import falcon

from locky.accounts import Accounts
from locky.media import load, read_json
from locky.routes import Operation, Route
from locky.schemas import (
    LoginRequestSchema,
    RefreshRequestSchema,
    TokenSchema,
    UserRequestSchema,
    UserSchema,
    UserUpdateSchema,
)

from .writes import body, created, deleted, live, updated

USER = UserSchema()
TOKEN = TokenSchema()


class Registration:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = body(self.context, req, UserRequestSchema())
        user = self.accounts.register(**data, request_id=req.context.request_id)
        resp.status = falcon.HTTP_201
        resp.location = f"/v1/internal/users/{user.id}"
        resp.media = USER.dump(user)


class Login:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = load(LoginRequestSchema(), read_json(req, self.context.settings.max_body_bytes))
        resp.media = TOKEN.dump(self.accounts.login(data["email"], data["password"], req.context.request_id))


class Refresh:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        data = body(self.context, req, RefreshRequestSchema())
        resp.media = TOKEN.dump(self.accounts.refresh(data["refresh_token"], req.context.request_id))


class Logout:
    def __init__(self, context, accounts: Accounts):
        self.context, self.accounts = context, accounts

    def on_post(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "sessions", "delete", own=True)
        self.accounts.logout(identity, req.context.request_id)
        resp.status = falcon.HTTP_204


class Me:
    def __init__(self, context):
        self.context = context

    def on_get(self, req, resp):
        identity = req.context.identity
        self.context.require(identity, "users", "read", own=True)
        resp.media = USER.dump(identity.user)


class UserWrites:
    """``PUT`` and ``DELETE /v1/private/users/{id}``: the user themself or an admin."""

    def __init__(self, context):
        self.context = context
        self.store = context.storage.users

    def _target(self, req, id: int, action: str):
        user = live(self.store, id)
        identity = req.context.identity
        self.context.require(identity, "users", action, own=user.uuid == identity.user.uuid)
        return user

    def on_put(self, req, resp, id: int):
        self._target(req, id, "update")
        changes = body(self.context, req, UserUpdateSchema())
        password = changes.pop("password", None)
        if password is not None:
            changes["password_hash"] = self.context.password_hasher.hash(password)
        updated(self.context, req, resp, "users", USER, self.store.update(id, **changes))

    def on_delete(self, req, resp, id: int):
        self._target(req, id, "delete")
        deleted(self.context, req, resp, "users", self.store.delete(id))


def routes(context) -> list[Route]:
    accounts = Accounts(context)
    tag = "users"
    token_errors = (400, 401, 413, 415, 503)
    return [
        Route("/v1/public/users/register", Registration(context, accounts), (
            Operation("post", "Register a user", tag, status=201, body="UserRequest", response="User",
                      public=True, errors=(400, 413, 415, 503), headers={"Location": "The new user's URL."}),
        )),
        Route("/v1/public/users/login", Login(context, accounts), (
            Operation("post", "Log in: get an access and a refresh token", tag, body=LoginRequestSchema,
                      response="Token", public=True, errors=(*token_errors, 429),
                      description="Unknown emails and wrong passwords answer alike. After too many"
                                  " failures for one email, 429 with Retry-After."),
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
        Route("/v1/private/users/{id:id}", UserWrites(context), (
            Operation("put", "Update a user (themself, or any as admin)", tag, body="UserUpdateRequest",
                      response="User", errors=(400, 401, 403, 404, 413, 415, 503),
                      description="Only the fields present change."),
            Operation("delete", "Delete a user (soft): memberships and tokens end too", tag, status=204,
                      errors=(401, 403, 404, 503)),
        )),
    ]
