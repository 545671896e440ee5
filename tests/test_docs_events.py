"""One vocabulary of events (docs/events.md), and a table that cannot drift from the code.

``docs/events.md`` is what ``docs/gen_events.py`` writes from ``locky.events.SPECS``;
every name Locky records (``events.NAMES``, the audit trail's) has a row and every row
a known name. Every row is acted out, through the API (Falcon's test client) or the
operator's command line, with a ``locky_event`` plugin recording what it hears: every
event the action wrote to the trail reaches the plugin with the same name, uuid,
actor, target, client address, request id, details and time, and the row's event has
the documented target, record and details. Then: announcements come after the commit
(a plugin reading from another connection sees the change) and never for an undone
block; a plugin records events of its own under its prefix, lists them through ``GET
/v1/internal/audit`` and its filter, and cannot take Locky's names.
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlencode, urlsplit
from urllib.parse import urlencode

import pyotp
import pytest

import locky.app
from locky import SettingsError, hookimpl
from locky import events
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, Account, LockyClient, make_settings
from docs_generators import DOCS, load_generator
from support.webauthn_authenticator import Authenticator

REGISTER = "/v1/public/users/register"
LOGIN = "/v1/public/users/login"
LOGIN_MFA = "/v1/public/users/login/mfa"
REFRESH = "/v1/public/users/refresh"
VERIFY = "/v1/public/users/verify"
FORGOT = "/v1/public/users/password/forgot"
RESET = "/v1/public/users/password/reset"
LOGOUT = "/v1/private/users/logout"
REAUTH = "/v1/private/users/me/reauth"
REVOKE = "/v1/public/tokens/revoke"
USERS = "/v1/private/users"
TOTP = "/v1/private/users/me/mfa/totp"
TOTP_CONFIRM = "/v1/private/users/me/mfa/totp/confirm"
GROUPS = "/v1/private/groups"
MEMBERS = "/v1/private/members"
ROLES = "/v1/private/roles"
ROTATE = "/v1/private/keys/rotate"
WEBHOOKS = "/v1/private/webhooks"
OAUTH_CLIENTS = "/v1/private/oauth/clients"
CONSENTS = "/v1/private/users/me/consents"
OAUTH_TOKEN = "/oauth/token"
AUDIT = "/v1/internal/audit"
AUTHORIZE = "/oauth/authorize"
OAUTH_LOGOUT = "/oauth/logout"
OAUTH_REDIRECT = "http://127.0.0.1:9999/cb"
PASSKEYS = "/v1/private/users/me/passkeys"
PASSKEY_LOGIN = "/v1/public/users/login/passkey"
FORM = "application/x-www-form-urlencoded"
NEW_PASSWORD = "a brand new passphrase 42"
CLIENT_ADDRESS = "203.0.113.7"
HOOK_URL = "http://127.0.0.1:9/hook"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


gen = load_generator("gen_events")


# -- the page and the table -------------------------------------------------------------


def test_the_page_is_what_the_generator_writes():
    assert (DOCS / "events.md").read_text() == gen.render(), \
        "docs/events.md is out of date: run `python docs/gen_events.py`"


def test_one_list_every_name_has_a_row_and_every_row_a_name():
    from locky import audit

    assert audit.EVENTS is events.NAMES, "the trail and the plugins share one list of names"
    assert len(set(events.NAMES)) == len(events.NAMES)
    assert {spec.name for spec in events.SPECS} == set(events.NAMES)
    keys = [key(spec) for spec in events.SPECS]
    assert len(set(keys)) == len(keys), "two rows say the same thing"


def test_the_hook_page_links_the_event_table():
    assert "(events.md)" in (DOCS / "hooks.md").read_text()


# -- every row, acted out -----------------------------------------------------------------


class Recorder:
    """A plugin that keeps every event it is told of."""

    def __init__(self):
        self.events: list[events.Event] = []

    @hookimpl
    def locky_event(self, event):
        self.events.append(event)


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def locky_plugins(recorder):
    return [recorder]


@pytest.fixture
def locky_settings(locky_database_url, locky_mail_dir):
    return make_settings(locky_database_url, mail_dir=locky_mail_dir, webhook_allow_private=True)


_serial = itertools.count(1)


@dataclass
class World:
    """One app, its admin, and the documented request a row's driver makes (``send``)."""

    client: Any
    admin: Account
    request_id: str = field(default_factory=lambda: f"event-row-{next(_serial)}")
    sent: list[str] = field(default_factory=list)

    def send(self, method: str, path: str, account: Account | None = None, **kwargs):
        """The row's action: with this row's request id, from :data:`CLIENT_ADDRESS`."""
        headers = {"X-Request-ID": self.request_id, **(account.headers if account else {})}
        shown = re.sub(r"(/consents)/[^/]+$", r"\1/{client_id}", re.sub(r"/[0-9]+(?=/|$)", "/{id}", path))
        self.sent.append(f"{method} {shown}")
        return self.client.simulate_request(method, path, headers=headers, remote_addr=CLIENT_ADDRESS, **kwargs)

    def user(self, name: str) -> Account:
        return self.client.account(f"{name}-{next(_serial)}@example.com")

    def post(self, path: str, body: dict, account: Account | None = None) -> dict:
        result = self.client.simulate_post(path, json=body, headers=(account or self.admin).headers)
        assert result.status_code in (200, 201), result.text
        return result.json

    def group(self) -> dict:
        return self.post(GROUPS, {"name": f"Group {next(_serial)}"})

    def role(self) -> dict:
        return self.post(ROLES, {"name": f"auditor{next(_serial)}",
                                 "permissions": [{"resource": "reports", "action": "read"}]})

    def member(self) -> dict:
        return self.post(MEMBERS, {"group_uuid": self.group()["uuid"], "user_uuid": self.user("joiner").uuid})

    def webhook(self) -> dict:
        return self.post(WEBHOOKS, {"url": HOOK_URL, "events": ["role.deleted"]})

    def oauth_client(self) -> dict:
        return self.post(OAUTH_CLIENTS, {"name": f"App {next(_serial)}", "type": "confidential",
                                         "redirect_uris": ["https://app.example.com/cb"]})

    def put_user(self, target: Account, body: dict, caller: Account | None = None):
        result = self.client.simulate_put(f"{USERS}/{target.id}", json=body, headers=(caller or self.admin).headers)
        assert result.status_code == 200, result.text


def fresh_step() -> None:
    """Do not start on a TOTP step about to end (the codes below are of three steps)."""
    if time.time() % 30 > 25:
        time.sleep(30 - time.time() % 30 + 0.1)


def code(secret: str, offset: int) -> str:
    """The code of the step ``offset`` from now (-1, 0, +1: the window Locky accepts)."""
    return pyotp.TOTP(secret).at(time.time() + 30 * offset)


def wrong_code(secret: str) -> str:
    valid = {code(secret, k) for k in range(-3, 4)}
    return next(c for c in (f"{n:06d}" for n in range(10 ** 6)) if c not in valid)


def with_totp(w: World) -> tuple[Account, str]:
    """An account with TOTP on (confirmed with the previous step's code)."""
    account = w.user("mfa")
    fresh_step()
    secret = w.post(TOTP, {}, account)["secret"]
    w.post(TOTP_CONFIRM, {"code": code(secret, -1)}, account)
    return account, secret


def mfa_token(w: World, account: Account) -> str:
    result = w.client.simulate_post(LOGIN, json={"email": account.email, "password": account.password})
    assert result.status_code == 200 and result.json["mfa_required"], result.text
    return result.json["mfa_token"]


# Drivers: each makes the row's documented request (``w.send``) once, after any setup.


def register(w):
    assert w.send("POST", REGISTER, json={"name": "New", "email": f"new{next(_serial)}@example.com",
                                          "password": PASSWORD}).status_code == 201


def delete(path: str, make: Callable[[World], dict]):
    def drive(w):
        record = make(w)
        assert w.send("DELETE", f"{path}/{record['id']}", w.admin).status_code == 204
    return drive


def put(path: str, make: Callable[[World], dict], body: dict):
    def drive(w):
        record = make(w)
        result = w.send("PUT", f"{path}/{record['id']}", w.admin, json=body)
        assert result.status_code == 200, result.text
    return drive


def user_enabled(w):
    account = w.user("enabled")
    w.put_user(account, {"disabled": True})
    assert w.send("PUT", f"{USERS}/{account.id}", w.admin, json={"disabled": False}).status_code == 200


def forgot(known: bool):
    def drive(w):
        email = w.user("forgetful").email if known else f"nobody{next(_serial)}@example.com"
        assert w.send("POST", FORGOT, json={"email": email}).status_code == 202
    return drive


def login_failed_locked(w):
    account = w.user("locked")
    for _ in range(w.client.app.context.settings.login_max_failures):  # from the row's address: it is locked
        w.client.simulate_post(LOGIN, json={"email": account.email, "password": "not the password"},
                               remote_addr=CLIENT_ADDRESS)
    assert w.send("POST", LOGIN, json={"email": account.email, "password": "not the password"}).status_code == 429


def login_failed_current_password(w):
    account = w.user("careful")
    result = w.send("PUT", f"{USERS}/{account.id}", account,
                    json={"password": NEW_PASSWORD, "current_password": "not the password"})
    assert result.status_code == 400, result.text


def login_mfa(w):
    account, secret = with_totp(w)
    result = w.send("POST", LOGIN_MFA, json={"mfa_token": mfa_token(w, account), "code": code(secret, 0)})
    assert result.status_code == 200, result.text


def login_mfa_wrong(w):
    account, secret = with_totp(w)
    result = w.send("POST", LOGIN_MFA, json={"mfa_token": mfa_token(w, account), "code": wrong_code(secret)})
    assert result.status_code == 401, result.text


def refresh_reused(w):
    account = w.user("reuser")
    assert w.client.simulate_post(REFRESH, json={"refresh_token": account.refresh_token}).status_code == 200
    assert w.send("POST", REFRESH, json={"refresh_token": account.refresh_token}).status_code == 401


def verify(w):
    email = f"verify{next(_serial)}@example.com"
    w.client.register(email)
    token = w.client.mailbox.token(w.client.mailbox.wait(email, "verify"))
    assert w.send("POST", VERIFY, json={"token": token}).status_code == 204


def reset(w):
    account = w.user("forgetful")
    assert w.client.simulate_post(FORGOT, json={"email": account.email}).status_code == 202
    token = w.client.mailbox.token(w.client.mailbox.wait(account.email, "reset"))
    assert w.send("POST", RESET, json={"token": token, "password": NEW_PASSWORD}).status_code == 204


def mfa_enabled(w):
    account = w.user("careful")
    fresh_step()
    secret = w.post(TOTP, {}, account)["secret"]
    assert w.send("POST", TOTP_CONFIRM, account, json={"code": code(secret, 0)}).status_code == 200


def mfa_disabled(w):
    account, secret = with_totp(w)
    assert w.send("DELETE", TOTP, account, json={"code": code(secret, 0)}).status_code == 204


def mfa_removed_by_admin(w):
    account, _ = with_totp(w)
    result = w.send("DELETE", f"{USERS}/{account.id}/mfa", w.admin)
    assert result.status_code == 204, result.text


def mfa_disable_wrong(w):
    account, secret = with_totp(w)
    assert w.send("DELETE", TOTP, account, json={"code": wrong_code(secret)}).status_code == 400


def consent_revoked(w):
    user, client = w.user("consenting"), w.oauth_client()
    w.client.app.context.storage.consents.grant(user.uuid, client["client_id"], ["openid"])
    assert w.send("DELETE", f"{CONSENTS}/{client['client_id']}", user).status_code == 204


class Pages:
    """A browser on the OpenID provider's pages (docs/http/oauth.md): its cookies, and the
    last page's hidden fields, for a client registered in storage."""

    def __init__(self, w: World, first_party: bool = False):
        self.w, self.cookies = w, {}
        self.client = w.client.app.context.storage.oauth_clients.create(
            client_id=f"page-app-{next(_serial)}", name="Page app", type="confidential",
            redirect_uris=[OAUTH_REDIRECT], post_logout_redirect_uris=[], grant_types=["authorization_code"],
            scopes=["openid", "email"], id_token_signed_response_alg="RS256", first_party=first_party,
            secret_hash="0" * 64)
        self.fields: dict[str, str] = {}

    def query(self) -> str:
        return urlencode({"response_type": "code", "client_id": self.client.client_id, "redirect_uri": OAUTH_REDIRECT,
                          "scope": "openid email", "state": "s"})

    def kept(self, result):
        self.cookies.update({name: cookie.value for name, cookie in result.cookies.items() if cookie.value})
        self.fields = {name: html.unescape(value) for name, value in
                       re.findall(r'name="(csrf_token|request|mfa_token|fresh)" value="([^"]*)"', result.text)}
        return result

    def open(self, send: bool = False):
        """``GET /oauth/authorize`` (the row's action when ``send``)."""
        call = self.w.send if send else self.w.client.simulate_request
        return self.kept(call("GET", AUTHORIZE, query_string=self.query(), cookies=dict(self.cookies)))

    def post(self, action: str, send: bool = False, **fields: str):
        """Post the last page's form ``action`` (``login``, ``code``, ``consent``)."""
        call = self.w.send if send else self.w.client.simulate_request
        return self.kept(call("POST", f"{AUTHORIZE}/{action}", body=urlencode({**self.fields, **fields}),
                              content_type=FORM, cookies=dict(self.cookies)))

    def signed_in(self, account: Account) -> "Pages":
        self.open()
        assert self.post("login", email=account.email, password=account.password).status_code in (200, 302)
        return self


def page_login(first_party: bool = False, password: str | None = None, known: bool = True):
    """The sign-in page's post: a right or wrong password, an unknown email."""
    def drive(w):
        pages, account = Pages(w, first_party), w.user("pages")
        pages.open()
        email = account.email if known else f"nobody{next(_serial)}@example.com"
        result = pages.post("login", send=True, email=email, password=password or account.password)
        assert result.status_code == (302 if first_party else 200 if password is None else 401), result.text
    return drive


def page_code(first_party: bool = False, right: bool = True):
    def drive(w):
        pages, (account, secret) = Pages(w, first_party), with_totp(w)
        pages.open()
        assert 'name="mfa_token"' in pages.post("login", email=account.email, password=account.password).text
        result = pages.post("code", send=True, code=code(secret, 0) if right else wrong_code(secret))
        assert result.status_code == (401 if not right else 302 if first_party else 200), result.text
    return drive


def page_consent(w):
    pages = Pages(w).signed_in(w.user("consenting"))
    assert pages.post("consent", send=True, decision="allow").status_code == 302


def page_authorized(w):
    pages = Pages(w, first_party=True).signed_in(w.user("returning"))
    assert pages.open(send=True).status_code == 302


def oauth_logout(w):
    pages = Pages(w, first_party=True).signed_in(w.user("leaving"))
    result = w.send("GET", OAUTH_LOGOUT, cookies=dict(pages.cookies))
    assert result.status_code == 200, result.text


def machine_client(w) -> dict:
    return w.post(OAUTH_CLIENTS, {"name": f"Machine {next(_serial)}", "type": "confidential",
                                  "grant_types": ["client_credentials"]})


def oauth_code(w, client: dict, scope: str = "openid offline_access") -> str:
    """A code for a new user signed in at the provider (an OP session), from the code
    grant's own redirect, as the authorization endpoint gives it."""
    from locky.oauth.server import EndUser, OAuthRequest, oauth_server

    context, user = w.client.app.context, w.user("signing-in")
    op_session = context.storage.sessions.create(uuid=str(uuid.uuid4()), user_uuid=user.uuid,
                                                 refresh_jti=uuid.uuid4().hex, amr=("pwd",))
    end_user = EndUser(user=context.storage.users.get_by_uuid(user.uuid), op_session=op_session)
    server = oauth_server(context)
    request = OAuthRequest.from_params(server.base, [
        ("response_type", "code"), ("client_id", client["client_id"]), ("redirect_uri", client["redirect_uris"][0]),
        ("scope", scope), ("state", "s")])
    grant = server.get_consent_grant(request, end_user=end_user)
    _, _, headers = server.create_authorization_response(request, grant_user=end_user, grant=grant)
    return parse_qs(urlsplit(dict(headers)["Location"]).query)["code"][0]


def token_form(client: dict, **fields: str) -> dict:
    """The token endpoint's form, the client's credentials in it (client_secret_post)."""
    return {"body": urlencode({**fields, "client_id": client["client_id"], "client_secret": client["client_secret"]}),
            "content_type": "application/x-www-form-urlencoded"}


def code_tokens(w, client: dict) -> dict:
    code = oauth_code(w, client)
    result = w.client.simulate_post(OAUTH_TOKEN, **token_form(client, grant_type="authorization_code", code=code,
                                                              redirect_uri=client["redirect_uris"][0]))
    assert result.status_code == 200, result.text
    return result.json


def oauth_code_exchanged(w):
    client = w.oauth_client()
    code = oauth_code(w, client)
    result = w.send("POST", OAUTH_TOKEN, **token_form(client, grant_type="authorization_code", code=code,
                                                      redirect_uri=client["redirect_uris"][0]))
    assert result.status_code == 200, result.text


def oauth_code_reused(w):
    client = w.oauth_client()
    code = oauth_code(w, client)
    form = token_form(client, grant_type="authorization_code", code=code, redirect_uri=client["redirect_uris"][0])
    assert w.client.simulate_post(OAUTH_TOKEN, **form).status_code == 200
    assert w.send("POST", OAUTH_TOKEN, **form).status_code == 400


def oauth_client_credentials(w):
    result = w.send("POST", OAUTH_TOKEN, **token_form(machine_client(w), grant_type="client_credentials"))
    assert result.status_code == 200, result.text


def oauth_refreshed(w):
    client = w.oauth_client()
    refresh = code_tokens(w, client)["refresh_token"]
    result = w.send("POST", OAUTH_TOKEN, **token_form(client, grant_type="refresh_token", refresh_token=refresh))
    assert result.status_code == 200, result.text


def oauth_refresh_reused(w):
    client = w.oauth_client()
    form = token_form(client, grant_type="refresh_token", refresh_token=code_tokens(w, client)["refresh_token"])
    assert w.client.simulate_post(OAUTH_TOKEN, **form).status_code == 200
    assert w.send("POST", OAUTH_TOKEN, **form).status_code == 400


def client_token_revoked(w):
    client = machine_client(w)
    result = w.client.simulate_post(OAUTH_TOKEN, **token_form(client, grant_type="client_credentials"))
    assert result.status_code == 200, result.text
    revoked = w.send("POST", REVOKE, **token_form(client, token=result.json["access_token"]))
    assert revoked.status_code == 200 and revoked.json == {}


def with_passkey(w: World) -> tuple[Account, Authenticator, dict]:
    """An account with a passkey of a software authenticator (tests/support)."""
    account, authenticator = w.user("keyholder"), Authenticator()
    options = w.post(f"{PASSKEYS}/options", {}, account)
    return account, authenticator, w.post(PASSKEYS, {"credential": authenticator.create(options)}, account)


def passkey_sign_in(expected: int, **wrong):
    def drive(w):
        _, authenticator, _ = with_passkey(w)
        answer = dict(wrong)
        if answer.get("sign_count") is not None:  # a first sign-in moves the counter to 1
            assert passkey_answer(w, authenticator, PASSKEY_LOGIN).status_code == 200
        if answer.pop("stranger", False):  # a passkey no account has
            authenticator = Authenticator()
            authenticator.create({"rp": {"id": "localhost"}, "user": {"id": "AA"}, "challenge": "AA"})
        result = passkey_answer(w, authenticator, PASSKEY_LOGIN, send=True, **answer)
        assert result.status_code == expected, result.text
    return drive


def passkey_answer(w: World, authenticator: Authenticator, path: str, send: bool = False, **wrong):
    options = w.client.simulate_post(f"{path}/options", json={})
    credential = authenticator.get(options.json, **wrong)
    if send:
        return w.send("POST", path, json={"credential": credential})
    return w.client.simulate_post(path, json={"credential": credential})


def passkey_registered(w):
    account, authenticator = w.user("keyholder"), Authenticator()
    options = w.post(f"{PASSKEYS}/options", {}, account)
    result = w.send("POST", PASSKEYS, account, json={"credential": authenticator.create(options)})
    assert result.status_code == 201, result.text


def passkey_removed(w):
    account, _, passkey = with_passkey(w)
    assert w.send("DELETE", f"{PASSKEYS}/{passkey['id']}", account).status_code == 204


def key(spec: events.EventSpec) -> tuple:
    return spec.name, spec.action, spec.target_type, spec.details


E = events
_LOGIN = f"POST {LOGIN}"
_REFRESH = f"POST {REFRESH}"
_FORGOT = f"POST {FORGOT}"
_PUT_USER = f"PUT {USERS}/{{id}}"
_FAILED = ("email", "reason")
_LOGGED_IN = ("email", "session_uuid", "mfa", "method")
_PAGE_FAILED = ("email", "reason", "method", "client_id")
_AUTHORIZED = ("client_id", "scope", "op_session_uuid")
_PAGE_LOGIN = f"POST {AUTHORIZE}/login"
_PAGE_CODE = f"POST {AUTHORIZE}/code"
_PAGE_CONSENT = f"POST {AUTHORIZE}/consent"
_MEMBER = ("group_uuid", "user_uuid", "role")
_ROLE = ("name", "permissions")
_CLIENT = ("client_id", "name", "type")
#: The driver of every row, by (name, action, target_type, details); ``None``: a command
#: (:data:`COMMANDS`).
DRIVERS: dict[tuple, Callable[[World], None] | None] = {
    (E.USER_REGISTERED, f"POST {REGISTER}", "user", ("email", "name")): register,
    (E.USER_UPDATED, _PUT_USER, "user", ("changed", "email?", "previous_email?", "sessions_ended?")):
        put(USERS, lambda w: w.user("renamed").body, {"name": "Renamed"}),
    (E.USER_DELETED, f"DELETE {USERS}/{{id}}", "user", ("email", "name")): delete(USERS, lambda w: w.user("gone").body),
    (E.USER_DISABLED, _PUT_USER, "user", ("email",)): put(USERS, lambda w: w.user("off").body, {"disabled": True}),
    (E.USER_ENABLED, _PUT_USER, "user", ("email",)): user_enabled,
    (E.EMAIL_VERIFIED, f"POST {VERIFY}", "user", ("email",)): verify,
    (E.PASSWORD_CHANGED, _PUT_USER, "user", ()): put(USERS, lambda w: w.user("changed").body,
                                                     {"password": NEW_PASSWORD}),
    (E.PASSWORD_RESET_REQUESTED, _FORGOT, "user", ("email", "account")): forgot(known=True),
    (E.PASSWORD_RESET_REQUESTED, _FORGOT, None, ("email", "account")): forgot(known=False),
    (E.PASSWORD_RESET, f"POST {RESET}", "user", ("email", "sessions_ended")): reset,
    (E.MFA_ENABLED, f"POST {TOTP_CONFIRM}", "user", ("method",)): mfa_enabled,
    (E.MFA_DISABLED, f"DELETE {TOTP}", "user", ("method",)): mfa_disabled,
    (E.MFA_DISABLED, f"DELETE {USERS}/{{id}}/mfa", "user", ("method", "by")): mfa_removed_by_admin,
    (E.LOGIN_SUCCEEDED, _LOGIN, "user", _LOGGED_IN):
        lambda w: w.send("POST", LOGIN, json={"email": w.admin.email, "password": w.admin.password}),
    (E.LOGIN_SUCCEEDED, f"POST {LOGIN_MFA}", "user", _LOGGED_IN): login_mfa,
    (E.LOGIN_SUCCEEDED, _PAGE_LOGIN, "user", (*_LOGGED_IN, "client_id")): page_login(),
    (E.LOGIN_SUCCEEDED, _PAGE_CODE, "user", (*_LOGGED_IN, "client_id")): page_code(),
    (E.LOGIN_FAILED, _LOGIN, "user", (*_FAILED, "method")):
        lambda w: w.send("POST", LOGIN, json={"email": w.admin.email, "password": "not the password"}),
    (E.LOGIN_FAILED, _LOGIN, None, (*_FAILED, "method")):
        lambda w: w.send("POST", LOGIN, json={"email": "nobody@example.com", "password": "not the password"}),
    (E.LOGIN_FAILED, f"POST {LOGIN_MFA}", "user", (*_FAILED, "method")): login_mfa_wrong,
    (E.LOGIN_FAILED, _PAGE_LOGIN, "user", _PAGE_FAILED): page_login(password="not the password"),
    (E.LOGIN_FAILED, _PAGE_LOGIN, None, _PAGE_FAILED): page_login(password="not the password", known=False),
    (E.LOGIN_FAILED, _PAGE_CODE, "user", _PAGE_FAILED): page_code(right=False),
    (E.LOGIN_FAILED, _PUT_USER, "user", _FAILED): login_failed_current_password,
    (E.LOGIN_FAILED, f"POST {REAUTH}", "user", _FAILED):
        lambda w: w.send("POST", REAUTH, w.user("forgetful"), json={"password": "not the password"}),
    (E.LOGIN_FAILED, f"DELETE {TOTP}", "user", _FAILED): mfa_disable_wrong,
    (E.LOGIN_LOCKED, _LOGIN, None, ("email", "reason", "retry_after")): login_failed_locked,
    (E.TOKEN_REFRESHED, _REFRESH, "session", ("user_uuid",)):
        lambda w: w.send("POST", REFRESH, json={"refresh_token": w.user("refreshing").refresh_token}),
    (E.TOKEN_REUSE_DETECTED, _REFRESH, "session", ("user_uuid",)): refresh_reused,
    (E.TOKEN_REVOKED, f"POST {LOGOUT}", "session", ("reason", "user_uuid")):
        lambda w: w.send("POST", LOGOUT, w.user("leaving")),
    (E.TOKEN_REVOKED, f"POST {REVOKE}", "session", ("reason", "user_uuid")):
        lambda w: w.send("POST", REVOKE, json={"token": w.user("revoked").refresh_token}),
    (E.TOKEN_REVOKED, f"POST {REVOKE}", "oauth_client", ("reason", "client_id")): client_token_revoked,
    (E.TOKEN_REFRESHED, f"POST {OAUTH_TOKEN}", "session", ("user_uuid", "client_id")): oauth_refreshed,
    (E.TOKEN_REUSE_DETECTED, f"POST {OAUTH_TOKEN}", "session", ("user_uuid", "client_id")): oauth_refresh_reused,
    (E.GROUP_CREATED, f"POST {GROUPS}", "group", ("name", "owner_uuid")):
        lambda w: w.send("POST", GROUPS, w.admin, json={"name": "Created"}),
    (E.GROUP_UPDATED, f"PUT {GROUPS}/{{id}}", "group", ("name", "changed")):
        put(GROUPS, World.group, {"name": "Renamed"}),
    (E.GROUP_DELETED, f"DELETE {GROUPS}/{{id}}", "group", ("name",)): delete(GROUPS, World.group),
    (E.MEMBER_ADDED, f"POST {MEMBERS}", "member", _MEMBER):
        lambda w: w.send("POST", MEMBERS, w.admin, json={"group_uuid": w.group()["uuid"],
                                                         "user_uuid": w.user("joiner").uuid}),
    (E.MEMBER_REMOVED, f"DELETE {MEMBERS}/{{id}}", "member", _MEMBER): delete(MEMBERS, World.member),
    (E.ROLE_CREATED, f"POST {ROLES}", "role", _ROLE): lambda w: w.send("POST", ROLES, w.admin, json={"name": "reviewer"}),
    (E.ROLE_UPDATED, f"PUT {ROLES}/{{id}}", "role", (*_ROLE, "changed")):
        put(ROLES, World.role, {"description": "Reads."}),
    (E.ROLE_DELETED, f"DELETE {ROLES}/{{id}}", "role", _ROLE): delete(ROLES, World.role),
    (E.ADMIN_GRANTED, "locky grant-admin EMAIL", "user", ("email", "via", "actor")): None,
    (E.ADMIN_REVOKED, "locky revoke-admin EMAIL", "user", ("email", "via", "actor")): None,
    (E.ROLE_GRANTED, "locky grant-role SUBJECT ROLE", "user", ("subject", "role", "email", "actor")): None,
    (E.ROLE_GRANTED, "locky grant-role client:CLIENT_ID ROLE", "oauth_client",
     ("subject", "role", "client_id", "actor")): None,
    (E.ROLE_REVOKED, "locky revoke-role SUBJECT ROLE", "user", ("subject", "role", "email", "actor")): None,
    (E.ROLE_REVOKED, "locky revoke-role client:CLIENT_ID ROLE", "oauth_client",
     ("subject", "role", "client_id", "actor")): None,
    (E.KEY_ROTATED, f"POST {ROTATE}", "key", ("kid", "alg")): lambda w: w.send("POST", ROTATE, w.admin),
    (E.KEY_ROTATED, "locky keys rotate", "key", ("kid", "alg", "actor")): None,
    (E.WEBHOOK_CREATED, f"POST {WEBHOOKS}", "webhook", ("id", "url", "events")):
        lambda w: w.send("POST", WEBHOOKS, w.admin, json={"url": HOOK_URL, "events": ["role.deleted"]}),
    (E.WEBHOOK_DELETED, f"DELETE {WEBHOOKS}/{{id}}", "webhook", ("id", "url")): delete(WEBHOOKS, World.webhook),
    (E.OAUTH_AUTHORIZED, f"GET {AUTHORIZE}", "user", _AUTHORIZED): page_authorized,
    (E.OAUTH_AUTHORIZED, _PAGE_LOGIN, "user", _AUTHORIZED): page_login(first_party=True),
    (E.OAUTH_AUTHORIZED, _PAGE_CODE, "user", _AUTHORIZED): page_code(first_party=True),
    (E.OAUTH_AUTHORIZED, _PAGE_CONSENT, "user", _AUTHORIZED): page_consent,
    (E.OAUTH_CONSENT_GRANTED, _PAGE_CONSENT, "user", ("client_id", "scopes")): page_consent,
    (E.OAUTH_LOGOUT, f"GET {OAUTH_LOGOUT}", "session", ("user_uuid", "sessions_ended", "client_id?")): oauth_logout,
    (E.OAUTH_TOKEN_ISSUED, f"POST {OAUTH_TOKEN}", "session", ("client_id", "grant_type", "scope", "user_uuid")):
        oauth_code_exchanged,
    (E.OAUTH_TOKEN_ISSUED, f"POST {OAUTH_TOKEN}", "oauth_client", ("client_id", "grant_type", "scope")):
        oauth_client_credentials,
    (E.OAUTH_CODE_REUSE_DETECTED, f"POST {OAUTH_TOKEN}", "session", ("client_id", "user_uuid")): oauth_code_reused,
    (E.OAUTH_CLIENT_CREATED, f"POST {OAUTH_CLIENTS}", "oauth_client", (*_CLIENT, "grant_types", "redirect_uris")):
        lambda w: w.send("POST", OAUTH_CLIENTS, w.admin, json={"name": "Reports", "type": "public",
                                                               "redirect_uris": ["http://127.0.0.1/cb"]}),
    (E.OAUTH_CLIENT_CREATED, "locky clients create NAME", "oauth_client",
     (*_CLIENT, "grant_types", "redirect_uris", "actor")): None,
    (E.OAUTH_CLIENT_UPDATED, f"PUT {OAUTH_CLIENTS}/{{id}}", "oauth_client", (*_CLIENT, "changed")):
        put(OAUTH_CLIENTS, World.oauth_client, {"first_party": True}),
    (E.OAUTH_CLIENT_DELETED, f"DELETE {OAUTH_CLIENTS}/{{id}}", "oauth_client", (*_CLIENT, "sessions_ended")):
        delete(OAUTH_CLIENTS, World.oauth_client),
    (E.OAUTH_CLIENT_DELETED, "locky clients delete CLIENT_ID", "oauth_client", (*_CLIENT, "sessions_ended", "actor")):
        None,
    (E.OAUTH_CLIENT_SECRET_ROTATED, f"POST {OAUTH_CLIENTS}/{{id}}/secret", "oauth_client", _CLIENT):
        lambda w: w.send("POST", f"{OAUTH_CLIENTS}/{w.oauth_client()['id']}/secret", w.admin),
    (E.OAUTH_CLIENT_SECRET_ROTATED, "locky clients rotate-secret CLIENT_ID", "oauth_client", (*_CLIENT, "actor")):
        None,
    (E.OAUTH_CONSENT_REVOKED, f"DELETE {CONSENTS}/{{client_id}}", "user", ("client_id", "scopes", "sessions_ended")):
        consent_revoked,
    (E.PASSKEY_REGISTERED, f"POST {PASSKEYS}", "passkey", ("user_uuid", "name")): passkey_registered,
    (E.PASSKEY_REMOVED, f"DELETE {PASSKEYS}/{{id}}", "passkey", ("user_uuid", "name")): passkey_removed,
    (E.PASSKEY_COUNTER_MISMATCH, f"POST {PASSKEY_LOGIN}", "passkey",
     ("user_uuid", "name", "sign_count", "stored_sign_count")): passkey_sign_in(400, sign_count=1),
    (E.LOGIN_SUCCEEDED, f"POST {PASSKEY_LOGIN}", "user", _LOGGED_IN): passkey_sign_in(200),
    (E.LOGIN_FAILED, f"POST {PASSKEY_LOGIN}", "user", (*_FAILED, "method")): passkey_sign_in(400, tamper=True),
    (E.LOGIN_FAILED, f"POST {PASSKEY_LOGIN}", None, ("reason", "method")): passkey_sign_in(400, stranger=True),
}
REQUEST_ROWS = [spec for spec in events.SPECS if DRIVERS.get(key(spec)) is not None]
COMMAND_ROWS = [spec for spec in events.SPECS if key(spec) in DRIVERS and DRIVERS[key(spec)] is None]


def test_every_row_has_a_driver():
    assert {key(spec) for spec in events.SPECS} == set(DRIVERS), \
        "a row of locky.events.SPECS changed: act it out in DRIVERS"


def trail(app) -> list:
    """Every event of the trail, from storage."""
    found, after = [], 0
    while True:
        page = app.context.storage.audit.list(after_id=after, limit=500)
        found.extend(page.items)
        if page.next_after_id is None:
            return found
        after = page.next_after_id


def as_heard(entry) -> tuple:
    """A trail entry as the plugin must hear it."""
    return (entry.event, entry.uuid, entry.actor_uuid, entry.target_type, entry.target_uuid, entry.ip or None,
            entry.request_id or None, entry.details, entry.created_at)


def heard(event: events.Event) -> tuple:
    created = event.created_at.replace(tzinfo=None) if event.created_at is not None else None
    return (event.name, event.uuid, event.actor_uuid, event.target_type, event.target_uuid, event.client_address,
            event.request_id, event.details, created)


def assert_row(spec: events.EventSpec, event: events.Event) -> None:
    """``event`` has the row's target, record and details keys."""
    assert event.target_type == spec.target_type, event
    assert (type(event.record).__name__ if event.record is not None else None) == spec.record, event
    required = {k for k in spec.details if not k.endswith("?")}
    optional = {k[:-1] for k in spec.details if k.endswith("?")}
    assert required <= set(event.details) <= required | optional, (spec.details, event.details)
    assert not getattr(event.record, "password_hash", ""), "a User is announced without its hash"
    assert event.created_at is not None and event.created_at.tzinfo is not None


@pytest.mark.parametrize("spec", REQUEST_ROWS,
                         ids=lambda s: f"{s.name} {s.action} {s.target_type} {len(s.details)}")
def test_the_documented_action_announces_what_the_trail_records(spec, locky_client, recorder):
    world = World(locky_client, locky_client.account(ADMIN_EMAIL, verified=True))
    DRIVERS[key(spec)](world)
    assert world.sent == [spec.action], "the driver must make the row's request, once"
    recorded = [as_heard(e) for e in trail(locky_client.app) if e.request_id == world.request_id]
    announced = [e for e in recorder.events if e.request_id == world.request_id]
    # Every event the action wrote reaches the plugin, with the trail's fields, in order.
    assert [heard(e) for e in announced] == recorded
    matching = [e for e in announced if e.name == spec.name and e.target_type == spec.target_type]
    assert matching, (spec, [(e.name, e.target_type, e.details) for e in announced])
    for event in matching:
        assert_row(spec, event)
        assert event.client_address == CLIENT_ADDRESS, event
    # The action records what the table says it does, nothing else.
    documented = {s.name for s in events.SPECS if s.action == spec.action}
    assert {e.name for e in announced} <= documented, announced


def run_command(monkeypatch, recorder, settings, command: str, *args: str) -> None:
    """``locky COMMAND ARGS`` in this process, its app with the recorder as a plugin."""
    from locky.cli import main as cli

    make = locky.app.create_app
    monkeypatch.setattr(locky.app, "create_app", lambda settings, plugins=(), **kw: make(settings, [recorder], **kw))
    if command == "clients":  # locky clients ACTION ARGS: its parser sets what runs it
        namespace = cli._parser().parse_args(["clients", *args])
        assert namespace.run(namespace, settings) == 0
        return
    if command == "keys":
        namespace = argparse.Namespace(keys_command=args[0])
    elif command in ("grant-role", "revoke-role"):
        namespace = argparse.Namespace(subject=args[0], role=args[1], json=False)
    else:
        namespace = argparse.Namespace(email=args[0])
    assert cli.COMMANDS[command](settings, namespace) == 0


@pytest.mark.parametrize("spec", COMMAND_ROWS, ids=lambda s: s.action)
def test_the_documented_command_announces_what_the_trail_records(spec, locky_client, locky_settings, recorder,
                                                                  monkeypatch, capsys):
    """An operator's command: the event, with no request id, client address or actor."""
    account = locky_client.account(f"operator{next(_serial)}@example.com", verified=True)
    words = spec.action.split()
    if words[1] == "revoke-admin":
        run_command(monkeypatch, recorder, locky_settings, "grant-admin", account.email)
    arguments = words[2:3] if words[1] == "keys" else [account.email]
    if words[1] in ("grant-role", "revoke-role"):  # a user by email, or a machine client
        subject = account.email
        if words[2].startswith("client:"):
            made = locky_client.app.context.storage.oauth_clients.create(
                client_id=f"machine-{next(_serial)}", name="Reports", type="confidential", redirect_uris=(),
                post_logout_redirect_uris=(), grant_types=("client_credentials",), scopes=("openid",),
                id_token_signed_response_alg="RS256", first_party=False, secret_hash="0" * 64)
            subject = f"client:{made.client_id}"
        arguments = [subject, "member"]
        if words[1] == "revoke-role":
            run_command(monkeypatch, recorder, locky_settings, "grant-role", *arguments)
    if words[1] == "clients":  # create NAME, or an action on a client made first
        arguments = [words[2], "Reports", "--redirect-uri", "https://app.example.com/cb"]
        if words[2] != "create":
            made = locky_client.app.context.storage.oauth_clients.create(
                client_id=f"cli-{next(_serial)}", name="Reports", type="confidential", redirect_uris=(),
                post_logout_redirect_uris=(), grant_types=("client_credentials",), scopes=("openid",),
                id_token_signed_response_alg="RS256", first_party=False, secret_hash="0" * 64)
            arguments = [words[2], made.client_id]
    before = len(recorder.events)
    run_command(monkeypatch, recorder, locky_settings, words[1], *arguments)
    new = recorder.events[before:]
    found = [e for e in new if e.name == spec.name]
    if words[1] == "keys":  # one key.rotated per key family
        assert sorted(e.details["alg"] for e in found) == ["ES256", "RS256"]
        found = found[:1]
    (event,) = found
    assert_row(spec, event)
    assert (event.request_id, event.client_address, event.actor_uuid) == (None, None, None)
    (entry,) = [e for e in trail(locky_client.app) if e.uuid == event.uuid]
    assert heard(event) == as_heard(entry)


# -- after the commit, and only then ---------------------------------------------------------


class Reader:
    """A plugin that, hearing ``group.created``, reads the group and its event from
    another thread (another connection: only what was committed)."""

    def __init__(self):
        self.seen: list[tuple] = []

    @hookimpl
    def locky_event(self, event, context):
        if event.name != events.GROUP_CREATED:
            return
        found = {}

        def read():
            group = context.storage.groups.get(event.record.id)
            entries = context.storage.audit.list(event=event.name, target_uuid=event.target_uuid).items
            found["seen"] = (group is not None and group.uuid == event.target_uuid, [e.uuid for e in entries])

        thread = threading.Thread(target=read)
        thread.start()
        thread.join(30)
        self.seen.append(found.get("seen"))


def test_a_plugin_hearing_an_event_reads_the_change_committed(locky_app_factory, recorder):
    reader = Reader()
    client = LockyClient(locky_app_factory(plugin_objects=[reader, recorder]))
    admin = client.account(ADMIN_EMAIL, verified=True)
    result = client.simulate_post(GROUPS, json={"name": "Committed"}, headers=admin.headers)
    assert result.status_code == 201, result.text
    (event,) = [e for e in recorder.events if e.name == events.GROUP_CREATED]
    assert reader.seen == [(True, [event.uuid])]


def test_an_undone_block_announces_nothing_and_a_nested_one_waits(locky_app, recorder):
    context = locky_app.context
    storage = context.storage
    with pytest.raises(RuntimeError):
        with storage.atomic():
            context.audit.record(events.KEY_ROTATED, target_type="key", target_uuid="undone")
            raise RuntimeError("the change fails after its event was written")
    assert recorder.events == []
    assert storage.audit.list(target_uuid="undone").items == []

    with storage.atomic():
        with storage.atomic():
            context.audit.record(events.KEY_ROTATED, target_type="key", target_uuid="nested")
        assert recorder.events == [], "announced before the outermost block committed"
        context.audit.record(events.KEY_ROTATED, target_type="key", target_uuid="second")
    assert [e.target_uuid for e in recorder.events] == ["nested", "second"]

    context.audit.record(events.KEY_ROTATED, target_type="key", target_uuid="alone")  # a block of its own
    assert recorder.events[-1].target_uuid == "alone"


def test_an_implementation_that_raises_changes_nothing(locky_app_factory, recorder):
    class Broken:
        @hookimpl
        def locky_event(self, event):
            raise RuntimeError("broken plugin")

    client = LockyClient(locky_app_factory(plugin_objects=[Broken(), recorder]))
    account = client.account("ada@example.com")
    assert account.uuid
    assert [e.name for e in recorder.events][:1] == [events.USER_REGISTERED]


# -- a plugin's own events --------------------------------------------------------------------


class ApiKeys:
    """A plugin with events of its own, recorded through the one public call."""

    @hookimpl
    def locky_audit_events(self):
        return ["api_keys.created", "api_keys.revoked"]

    @hookimpl
    def locky_routes(self, context):
        from locky import Operation, Route

        class Keys:
            def on_post(self, req, resp):
                with context.storage.atomic():  # the plugin's change and its event, together
                    context.audit.record("api_keys.created", target_type="api_key", target_uuid="k-1",
                                         details={"name": "ci", "secret": "never stored"})
                resp.status = "201 Created"
                resp.media = {}

        return [Route("/v1/private/api-keys", Keys(), (Operation("post", "Make an API key", "api_keys"),))]


def test_a_plugin_records_its_own_event_listed_and_filtered_by_its_prefix(locky_app_factory, recorder):
    client = LockyClient(locky_app_factory(plugin_objects=[ApiKeys(), recorder]))
    admin = client.account(ADMIN_EMAIL, verified=True)
    result = client.simulate_post("/v1/private/api-keys", headers={**admin.headers, "X-Request-ID": "own-event"},
                                  remote_addr=CLIENT_ADDRESS)
    assert result.status_code == 201, result.text
    (event,) = [e for e in recorder.events if e.name == "api_keys.created"]
    assert (event.actor_uuid, event.target_type, event.target_uuid, event.client_address, event.request_id,
            event.details) == (admin.uuid, "api_key", "k-1", CLIENT_ADDRESS, "own-event", {"name": "ci"})
    for pattern in ("api_keys.created", "api_keys.*"):
        listed = client.simulate_get(AUDIT, params={"event": pattern}, headers=admin.headers)
        assert listed.status_code == 200, listed.text
        assert [(e["event"], e["uuid"], e["details"]) for e in listed.json["events"]] == \
            [("api_keys.created", event.uuid, {"name": "ci"})]
    assert client.simulate_get(AUDIT, params={"event": "api_keys.revoked"},
                               headers=admin.headers).json["events"] == []
    everything = client.simulate_get(AUDIT, params={"event": "*", "limit": 500}, headers=admin.headers).json
    assert "api_keys.created" in {e["event"] for e in everything["events"]}
    # Webhooks may select them too; names nobody declared stay refused.
    hook = client.simulate_post(WEBHOOKS, json={"url": HOOK_URL, "events": ["api_keys.*"]}, headers=admin.headers)
    assert hook.status_code == 201, hook.text
    for pattern in ("other.thing", "api_keys.deleted", "user.nothing"):
        refused = client.simulate_get(AUDIT, params={"event": pattern}, headers=admin.headers)
        assert refused.status_code == 400 and refused.json == {
            "event": f"No event is called {pattern}: see GET /v1/internal/audit for the names."}, refused.text


def test_without_the_plugin_its_names_are_refused(locky_client, locky_admin):
    result = locky_client.simulate_get(AUDIT, params={"event": "api_keys.*"}, headers=locky_admin.headers)
    assert result.status_code == 400 and "api_keys.*" in result.json["event"]


def test_a_plugin_cannot_record_a_name_it_did_not_declare(locky_app_factory):
    app = locky_app_factory(plugin_objects=[ApiKeys()])
    with pytest.raises(ValueError, match="api_keys.deleted"):
        app.context.audit.record("api_keys.deleted")


@pytest.mark.parametrize("names, message", [
    (["user.impersonated"], "Locky's own"),
    (["login.succeeded"], "Locky's own"),
    (["locky.anything"], "Locky's own"),
    (["nodots"], "a name is a prefix"),
    (["Api.Created"], "a name is a prefix"),
    (["api_keys." + "x" * 60], "at most 64"),
])
def test_a_plugin_declaring_a_core_or_malformed_name_stops_startup(locky_app_factory, names, message):
    class Declares:
        @hookimpl
        def locky_audit_events(self):
            return names

    with pytest.raises(SettingsError, match=message):
        locky_app_factory(plugin_objects=[Declares()])


def test_two_plugins_cannot_share_a_prefix(locky_app_factory):
    class Other:
        @hookimpl
        def locky_audit_events(self):
            return ["api_keys.stolen"]

    with pytest.raises(SettingsError, match="another plugin"):
        locky_app_factory(plugin_objects=[ApiKeys(), Other()])


# -- the command line, as an operator runs it ------------------------------------------------


def test_a_command_announces_to_a_plugin_loaded_by_name(locky_client, locky_database_url, locky_mail_dir, tmp_path):
    """``locky grant-admin`` in its own process, with ``LOCKY_PLUGINS=locky_audit_log``
    (``examples/audit-log``): the plugin writes the trail's event."""
    account = locky_client.account(f"promoted{next(_serial)}@example.com", verified=True)
    log = tmp_path / "audit.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    env.update(LOCKY_DATABASE_URL=locky_database_url, LOCKY_JWT_SECRET=TEST_SECRET, LOCKY_BCRYPT_ROUNDS="4",
               LOCKY_MAIL_DIR=locky_mail_dir, LOCKY_PLUGINS="locky_audit_log", LOCKY_AUDIT_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(EXAMPLES / "audit-log"), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "locky.cli.main", "grant-admin", account.email], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    (entry,) = [e for e in trail(locky_client.app) if e.event == events.ADMIN_GRANTED]
    assert [(e["event"], e["uuid"], e["target_uuid"], e["actor_uuid"], e["request_id"], e["details"])
            for e in lines] == [(events.ADMIN_GRANTED, entry.uuid, account.uuid, None, None, entry.details)]
    assert lines[0]["record"]["email"] == account.email
