"""The audit trail over HTTP (docs/http/audit.md).

Every security event Locky names (``locky.audit.EVENTS``) is produced here by the action
that makes it (through the Falcon test client, on real storage, with real tokens; the
admin grants through the ``locky`` command line) and read back with ``GET
/v1/internal/audit``: who (``actor_uuid``, null when anonymous), what (``target_type``,
``target_uuid``), from where (``ip``: the peer, or ``X-Forwarded-For`` behind trusted
proxies) and in which request (``request_id``: the ``X-Request-ID`` sent). Then: no
secret of any of those actions is in the trail; the filters and keyset paging; who may
read it, and that nothing changes it; and that a change whose event cannot be written is
not kept (SQLite only: the audit table is dropped under the app).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import itertools
import json
import os
import re
import sqlite3
import struct
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable
from urllib.parse import urlencode

import jwt
import pytest

from locky.audit import EVENTS
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, Account, LockyClient

from authz_helpers import TIMESTAMP, UUID4, assert_error, assert_fields
from support.webauthn_authenticator import Authenticator as PasskeyAuthenticator

AUDIT = "/v1/internal/audit"
REGISTER = "/v1/public/users/register"
LOGIN = "/v1/public/users/login"
LOGIN_MFA = "/v1/public/users/login/mfa"
REFRESH = "/v1/public/users/refresh"
VERIFY = "/v1/public/users/verify"
FORGOT = "/v1/public/users/password/forgot"
RESET = "/v1/public/users/password/reset"
LOGOUT = "/v1/private/users/logout"
REVOKE = "/v1/public/tokens/revoke"
USERS = "/v1/private/users"
TOTP = "/v1/private/users/me/mfa/totp"
TOTP_CONFIRM = "/v1/private/users/me/mfa/totp/confirm"
GROUPS = "/v1/private/groups"
MEMBERS = "/v1/private/members"
ROLES = "/v1/private/roles"
ROTATE = "/v1/private/keys/rotate"
WEBHOOKS = "/v1/private/webhooks"
EVENT_KEYS = {"id", "uuid", "created_at", "event", "actor_uuid", "target_type", "target_uuid", "ip",
              "request_id", "details"}
#: Words no key of ``details`` may contain (docs/http/audit.md: no password, hash, token, code or secret).
SECRET_WORDS = ("password", "hash", "token", "secret", "code")
NEW_PASSWORD = "a brand new passphrase 42"
OTHER_PASSWORD = "yet another passphrase 7"
HOOK_URL = "http://127.0.0.1:9/hook"

_serial = itertools.count(1)


# -- a small RFC 6238 authenticator (as tests/lifecycle's, written from the RFC) --------


def hotp(key: bytes, counter: int) -> str:
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    return str((struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF) % 10 ** 6).zfill(6)


class Authenticator:
    """Hands out codes of unused steps, ascending, within the ±1 window of now."""

    def __init__(self, secret: str):
        cleaned = secret.replace(" ", "").upper()
        self.key = base64.b32decode(cleaned + "=" * (-len(cleaned) % 8))
        self.last: int | None = None

    def code(self) -> str:
        if time.time() % 30 > 28.5:  # never start on a step about to leave the window
            time.sleep(30 - time.time() % 30 + 0.05)
        now = int(time.time()) // 30
        step = now - 1 if self.last is None else max(now - 1, self.last + 1)
        assert step <= now + 1, "the test used every code of the ±1 window"
        self.last = step
        return hotp(self.key, step)

    def wrong(self) -> str:
        """Six digits that are the code of no step near now."""
        now = int(time.time()) // 30
        valid = {hotp(self.key, s) for s in range(now - 3, now + 4)}
        return next(c for c in (f"{n:06d}" for n in range(10 ** 6)) if c not in valid)


# -- the world a test acts in ----------------------------------------------------------


@dataclass
class Expect:
    """What the event an action made must say (besides its name, request id and ip)."""

    actor_uuid: str | None
    target_type: str | None
    target_uuid: str | None
    details: dict[str, Any] = field(default_factory=dict)  # a subset of the event's details
    request_id: str | None = None  # None: the one the action sent
    ip: str | None = None  # None: the address the action came from


class World:
    """One test's apps (all on the test's database), its admin, and every secret its
    actions handled (for the scan of the trail)."""

    def __init__(self, client: LockyClient, admin: Account, factory, database_url: str, mail_dir: str):
        self.client, self.admin = client, admin
        self.factory, self.database_url, self.mail_dir = factory, database_url, mail_dir
        self.secrets: set[str] = {PASSWORD, admin.access_token, admin.refresh_token}
        self._apps: dict[tuple, LockyClient] = {}

    # apps with other settings, on the same database (the same trail)
    def app(self, **settings) -> LockyClient:
        key = tuple(sorted(settings.items()))
        if key not in self._apps:
            self._apps[key] = LockyClient(self.factory(**settings))
        return self._apps[key]

    def secret(self, *values: str) -> None:
        self.secrets.update(v for v in values if v)

    @staticmethod
    def send(client: LockyClient, method: str, path: str, *, rid: str | None = None, ip: str | None = None,
             token: str | None = None, body: Any = None, params: dict | None = None, headers: dict | None = None):
        sent = dict(headers or {})
        if rid is not None:
            sent["X-Request-ID"] = rid
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        kwargs: dict[str, Any] = {"headers": sent}
        if body is not None:
            kwargs["json"] = body
        if params is not None:
            kwargs["params"] = params
        if ip is not None:
            kwargs["remote_addr"] = ip
        return client.simulate_request(method, path, **kwargs)

    def account(self, tag: str, verified: bool = False, client: LockyClient | None = None) -> Account:
        """A new, logged-in user (its address proved when ``verified``)."""
        email = f"{tag}-{next(_serial)}@example.com"
        account = (client or self.client).account(email, verified=verified)
        self.secret(account.access_token, account.refresh_token)
        if verified:
            self.secret(mail_code(client or self.client, email, "verify"))
        return account

    def login(self, client: LockyClient, email: str, password: str = PASSWORD) -> dict:
        result = self.send(client, "POST", LOGIN, body={"email": email, "password": password})
        assert result.status_code == 200, result.text
        self.secret(result.json.get("access_token"), result.json.get("refresh_token"), result.json.get("mfa_token"))
        return result.json

    def group(self, owner: Account, client: LockyClient | None = None) -> dict:
        result = self.send(client or self.client, "POST", GROUPS, token=owner.access_token,
                           body={"name": f"group-{next(_serial)}"})
        assert result.status_code == 201, result.text
        return result.json

    def role(self, client: LockyClient | None = None) -> dict:
        result = self.send(client or self.client, "POST", ROLES, token=self.admin.access_token,
                           body={"name": f"role-{next(_serial)}",
                                 "permissions": [{"resource": "docs", "action": "read"}]})
        assert result.status_code == 201, result.text
        return result.json

    def totp_on(self, account: Account) -> tuple[Authenticator, list[str]]:
        """Turn TOTP on for ``account``: its authenticator and recovery codes."""
        result = self.send(self.client, "POST", TOTP, token=account.access_token, body={})
        assert result.status_code == 200, result.text
        self.secret(result.json["secret"], result.json["otpauth_uri"])
        authenticator = Authenticator(result.json["secret"])
        code = authenticator.code()
        self.secret(code)
        result = self.send(self.client, "POST", TOTP_CONFIRM, token=account.access_token, body={"code": code})
        assert result.status_code == 200, result.text
        self.secret(*result.json["recovery_codes"])
        return authenticator, result.json["recovery_codes"]

    def webhook(self, rid: str | None = None, ip: str | None = None) -> dict:
        client = self.app(webhook_allow_private=True)
        result = self.send(client, "POST", WEBHOOKS, rid=rid, ip=ip, token=self.admin.access_token,
                           body={"url": HOOK_URL + "?key=sekrit-in-the-query", "events": ["group.*"]})
        assert result.status_code == 201, result.text
        self.secret(result.json["secret"], "sekrit-in-the-query")
        return result.json

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """``locky ARGS`` in another process, on this test's database."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
        env.update(LOCKY_DATABASE_URL=self.database_url, LOCKY_JWT_SECRET=TEST_SECRET, LOCKY_BCRYPT_ROUNDS="4",
                   LOCKY_ADMIN_EMAILS=ADMIN_EMAIL, LOCKY_MAIL_DIR=self.mail_dir)
        # Run from the test's own directory: from the checkout, ``-m`` would import the
        # source tree's locky beside the installed plugins (CI installs with pip).
        done = subprocess.run([sys.executable, "-m", "locky.cli.main", *args], env=env, capture_output=True,
                              text=True, timeout=120, cwd=os.path.dirname(self.mail_dir))
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return done


def mail_code(client: LockyClient, to: str, purpose: str, count: int = 1) -> str:
    message = client.mailbox.wait(to, purpose=purpose, count=count)
    return client.mailbox.token(message)


def session_of(token: str) -> str:
    """The login (``sid``) a token belongs to, read from its (verified elsewhere) claims."""
    return jwt.decode(token, options={"verify_signature": False})["sid"]


def read_trail(client: LockyClient, caller: Account, **params: Any) -> list[dict]:
    """Every event matching ``params``, following the pages."""
    events: list[dict] = []
    after = params.pop("after_id", 0)
    while True:
        result = client.simulate_get(AUDIT, params={**params, "after_id": after, "limit": 500},
                                     headers=caller.headers)
        assert result.status_code == 200, result.text
        assert set(result.json) == {"events", "next_after_id"}, result.json
        events.extend(result.json["events"])
        after = result.json["next_after_id"]
        if after is None:
            return events


def assert_event_shape(event: dict) -> None:
    assert set(event) == EVENT_KEYS, event
    assert isinstance(event["id"], int) and event["id"] > 0, event
    assert UUID4.fullmatch(event["uuid"]), event
    assert TIMESTAMP.fullmatch(event["created_at"]), event
    assert event["event"] in EVENTS, event
    assert event["actor_uuid"] is None or UUID4.fullmatch(event["actor_uuid"]), event
    assert isinstance(event["ip"], str) and isinstance(event["request_id"], str), event
    assert isinstance(event["details"], dict), event


@pytest.fixture
def world(locky_client, locky_admin, locky_app_factory, locky_database_url, locky_mail_dir) -> World:
    return World(locky_client, locky_admin, locky_app_factory, locky_database_url, locky_mail_dir)


# -- the actions, one per event ----------------------------------------------------------
#
# Each takes the world, the request id and the client address to send the decisive request
# with, and returns what the event must say.


def user_registered(w: World, rid: str, ip: str) -> Expect:
    email = f"newcomer-{next(_serial)}@example.com"
    result = w.send(w.client, "POST", REGISTER, rid=rid, ip=ip,
                    body={"name": "Newcomer", "email": email, "password": PASSWORD})
    assert result.status_code == 201, result.text
    return Expect(None, "user", result.json["uuid"], {"email": email})


def user_updated(w: World, rid: str, ip: str) -> Expect:
    user = w.account("renamed")
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", rid=rid, ip=ip, token=w.admin.access_token,
                    body={"name": "Renamed"})
    assert result.status_code == 200, result.text
    return Expect(w.admin.body["uuid"], "user", user.uuid, {"changed": ["name"]})


def user_deleted(w: World, rid: str, ip: str) -> Expect:
    user = w.account("deleted")
    result = w.send(w.client, "DELETE", f"{USERS}/{user.id}", rid=rid, ip=ip, token=w.admin.access_token)
    assert result.status_code == 204, result.text
    return Expect(w.admin.body["uuid"], "user", user.uuid)


def user_disabled(w: World, rid: str, ip: str) -> Expect:
    user = w.account("disabled")
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", rid=rid, ip=ip, token=w.admin.access_token,
                    body={"disabled": True})
    assert result.status_code == 200 and result.json["disabled"] is True, result.text
    return Expect(w.admin.body["uuid"], "user", user.uuid)


def user_enabled(w: World, rid: str, ip: str) -> Expect:
    user = w.account("enabled")
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", token=w.admin.access_token, body={"disabled": True})
    assert result.status_code == 200, result.text
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", rid=rid, ip=ip, token=w.admin.access_token,
                    body={"disabled": False})
    assert result.status_code == 200 and result.json["disabled"] is False, result.text
    return Expect(w.admin.body["uuid"], "user", user.uuid)


def email_verified(w: World, rid: str, ip: str) -> Expect:
    user = w.account("verifier")
    code = mail_code(w.client, user.email, "verify")
    w.secret(code)
    result = w.send(w.client, "POST", VERIFY, rid=rid, ip=ip, body={"token": code})
    assert result.status_code == 204, result.text
    return Expect(None, "user", user.uuid)


def password_changed(w: World, rid: str, ip: str) -> Expect:
    user = w.account("changer")
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", rid=rid, ip=ip, token=user.access_token,
                    body={"password": NEW_PASSWORD, "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    w.secret(NEW_PASSWORD)
    return Expect(user.uuid, "user", user.uuid)


def password_reset_requested(w: World, rid: str, ip: str) -> Expect:
    user = w.account("forgetful")
    result = w.send(w.client, "POST", FORGOT, rid=rid, ip=ip, body={"email": user.email})
    assert result.status_code == 202, result.text
    w.secret(mail_code(w.client, user.email, "reset"))
    return Expect(None, "user", user.uuid)


def password_reset(w: World, rid: str, ip: str) -> Expect:
    user = w.account("resetter")
    result = w.send(w.client, "POST", FORGOT, body={"email": user.email})
    assert result.status_code == 202, result.text
    code = mail_code(w.client, user.email, "reset")
    w.secret(code, OTHER_PASSWORD)
    result = w.send(w.client, "POST", RESET, rid=rid, ip=ip, body={"token": code, "password": OTHER_PASSWORD})
    assert result.status_code == 204, result.text
    return Expect(None, "user", user.uuid)


def mfa_enabled(w: World, rid: str, ip: str) -> Expect:
    user = w.account("enrolling")
    result = w.send(w.client, "POST", TOTP, token=user.access_token, body={})
    assert result.status_code == 200, result.text
    w.secret(result.json["secret"], result.json["otpauth_uri"])
    code = Authenticator(result.json["secret"]).code()
    w.secret(code)
    result = w.send(w.client, "POST", TOTP_CONFIRM, rid=rid, ip=ip, token=user.access_token, body={"code": code})
    assert result.status_code == 200, result.text
    w.secret(*result.json["recovery_codes"])
    return Expect(user.uuid, "user", user.uuid)


def mfa_disabled(w: World, rid: str, ip: str) -> Expect:
    user = w.account("unenrolling")
    _, recovery = w.totp_on(user)
    result = w.send(w.client, "DELETE", TOTP, rid=rid, ip=ip, token=user.access_token, body={"code": recovery[0]})
    assert result.status_code == 204, result.text
    return Expect(user.uuid, "user", user.uuid)


def login_succeeded(w: World, rid: str, ip: str) -> Expect:
    user = w.account("returning")
    result = w.send(w.client, "POST", LOGIN, rid=rid, ip=ip, body={"email": user.email, "password": PASSWORD})
    assert result.status_code == 200, result.text
    w.secret(result.json["access_token"], result.json["refresh_token"])
    return Expect(user.uuid, "user", user.uuid,
                  {"email": user.email, "session_uuid": session_of(result.json["access_token"])})


def login_failed(w: World, rid: str, ip: str) -> Expect:
    user = w.account("mistyping")
    w.secret("not my password at all")
    result = w.send(w.client, "POST", LOGIN, rid=rid, ip=ip,
                    body={"email": user.email, "password": "not my password at all"})
    assert result.status_code == 401, result.text
    return Expect(None, "user", user.uuid, {"email": user.email})


def login_locked(w: World, rid: str, ip: str) -> Expect:
    client = w.app(login_max_failures=2)
    user = w.account("locked", client=client)
    w.secret("guessing wrongly")
    statuses = []
    for _ in range(6):
        result = w.send(client, "POST", LOGIN, rid=rid, ip=ip,
                        body={"email": user.email, "password": "guessing wrongly"})
        statuses.append(result.status_code)
        if result.status_code == 429:
            break
    assert statuses[-1] == 429 and set(statuses[:-1]) == {401}, statuses
    # No target is named when the lock is hit (the email is in details): the lock counts
    # emails, known or not.
    return Expect(None, None, None, {"email": user.email})


def token_refreshed(w: World, rid: str, ip: str) -> Expect:
    user = w.account("refreshing")
    result = w.send(w.client, "POST", REFRESH, rid=rid, ip=ip, body={"refresh_token": user.refresh_token})
    assert result.status_code == 200, result.text
    w.secret(result.json["access_token"], result.json["refresh_token"])
    return Expect(user.uuid, "session", session_of(user.refresh_token))


def token_reuse_detected(w: World, rid: str, ip: str) -> Expect:
    user = w.account("replaying")
    result = w.send(w.client, "POST", REFRESH, body={"refresh_token": user.refresh_token})
    assert result.status_code == 200, result.text
    w.secret(result.json["access_token"], result.json["refresh_token"])
    result = w.send(w.client, "POST", REFRESH, rid=rid, ip=ip, body={"refresh_token": user.refresh_token})
    assert result.status_code == 401, result.text
    return Expect(user.uuid, "session", session_of(user.refresh_token))


def token_revoked_by_logout(w: World, rid: str, ip: str) -> Expect:
    user = w.account("leaving")
    result = w.send(w.client, "POST", LOGOUT, rid=rid, ip=ip, token=user.access_token)
    assert result.status_code == 204, result.text
    return Expect(user.uuid, "session", session_of(user.access_token), {"reason": "logout", "user_uuid": user.uuid})


def token_revoked_by_revocation(w: World, rid: str, ip: str) -> Expect:
    user = w.account("revoking")
    result = w.send(w.client, "POST", REVOKE, rid=rid, ip=ip, body={"token": user.refresh_token})
    assert result.status_code == 200 and result.json == {}, result.text
    # The revocation endpoint is public: nobody is logged in, the owner is in details.
    return Expect(None, "session", session_of(user.refresh_token), {"user_uuid": user.uuid})


def group_created(w: World, rid: str, ip: str) -> Expect:
    owner = w.account("founder")
    result = w.send(w.client, "POST", GROUPS, rid=rid, ip=ip, token=owner.access_token, body={"name": "founders"})
    assert result.status_code == 201, result.text
    return Expect(owner.uuid, "group", result.json["uuid"], {"name": "founders"})


def group_updated(w: World, rid: str, ip: str) -> Expect:
    owner = w.account("editor")
    group = w.group(owner)
    result = w.send(w.client, "PUT", f"{GROUPS}/{group['id']}", rid=rid, ip=ip, token=owner.access_token,
                    body={"description": "Edited."})
    assert result.status_code == 200, result.text
    return Expect(owner.uuid, "group", group["uuid"])


def group_deleted(w: World, rid: str, ip: str) -> Expect:
    owner = w.account("dissolver")
    group = w.group(owner)
    result = w.send(w.client, "DELETE", f"{GROUPS}/{group['id']}", rid=rid, ip=ip, token=owner.access_token)
    assert result.status_code == 204, result.text
    return Expect(owner.uuid, "group", group["uuid"])


def _add_member(w: World, owner: Account, rid: str | None = None, ip: str | None = None) -> tuple[dict, dict, Account]:
    group, joiner = w.group(owner), w.account("joiner")
    result = w.send(w.client, "POST", MEMBERS, rid=rid, ip=ip, token=owner.access_token,
                    body={"group_uuid": group["uuid"], "user_uuid": joiner.uuid, "role": "viewer"})
    assert result.status_code == 201, result.text
    return group, result.json, joiner


def member_added(w: World, rid: str, ip: str) -> Expect:
    owner = w.account("inviter")
    group, member, joiner = _add_member(w, owner, rid, ip)
    return Expect(owner.uuid, "member", member["uuid"],
                  {"group_uuid": group["uuid"], "user_uuid": joiner.uuid, "role": "viewer"})


def member_removed(w: World, rid: str, ip: str) -> Expect:
    owner = w.account("remover")
    group, member, joiner = _add_member(w, owner)
    result = w.send(w.client, "DELETE", f"{MEMBERS}/{member['id']}", rid=rid, ip=ip, token=owner.access_token)
    assert result.status_code == 204, result.text
    return Expect(owner.uuid, "member", member["uuid"], {"group_uuid": group["uuid"], "user_uuid": joiner.uuid})


def role_created(w: World, rid: str, ip: str) -> Expect:
    result = w.send(w.client, "POST", ROLES, rid=rid, ip=ip, token=w.admin.access_token,
                    body={"name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]})
    assert result.status_code == 201, result.text
    return Expect(w.admin.body["uuid"], "role", result.json["uuid"], {"name": "auditor"})


def role_updated(w: World, rid: str, ip: str) -> Expect:
    role = w.role()
    result = w.send(w.client, "PUT", f"{ROLES}/{role['id']}", rid=rid, ip=ip, token=w.admin.access_token,
                    body={"description": "Changed."})
    assert result.status_code == 200, result.text
    return Expect(w.admin.body["uuid"], "role", role["uuid"])


def role_deleted(w: World, rid: str, ip: str) -> Expect:
    role = w.role()
    result = w.send(w.client, "DELETE", f"{ROLES}/{role['id']}", rid=rid, ip=ip, token=w.admin.access_token)
    assert result.status_code == 204, result.text
    return Expect(w.admin.body["uuid"], "role", role["uuid"])


def key_rotated(w: World, rid: str, ip: str) -> Expect:
    result = w.send(w.client, "POST", ROTATE, rid=rid, ip=ip, token=w.admin.access_token)
    assert result.status_code == 200, result.text
    assert "d" not in result.json, "the rotation answered a private key"
    return Expect(w.admin.body["uuid"], "key", result.json["kid"], {"kid": result.json["kid"]})


def webhook_created(w: World, rid: str, ip: str) -> Expect:
    hook = w.webhook(rid, ip)
    return Expect(w.admin.body["uuid"], "webhook", hook["uuid"], {"url": HOOK_URL, "events": ["group.*"]})


def webhook_deleted(w: World, rid: str, ip: str) -> Expect:
    hook = w.webhook()
    result = w.send(w.app(webhook_allow_private=True), "DELETE", f"{WEBHOOKS}/{hook['id']}", rid=rid, ip=ip,
                    token=w.admin.access_token)
    assert result.status_code == 204, result.text
    return Expect(w.admin.body["uuid"], "webhook", hook["uuid"], {"url": HOOK_URL})


class OAuthBrowser:
    """A browser on the OpenID provider's pages (docs/http/oauth.md) for a client
    registered in storage: its cookies and the last page's hidden fields."""

    REDIRECT = "http://127.0.0.1:9999/cb"

    def __init__(self, w: World, first_party: bool):
        self.w, self.client = w, w.client
        self.cookies: dict[str, str] = {}
        self.fields: dict[str, str] = {}
        self.oauth_client = w.client.app.context.storage.oauth_clients.create(
            client_id=f"audit-app-{next(_serial)}", name="Audit app", type="confidential",
            redirect_uris=[self.REDIRECT], post_logout_redirect_uris=[], grant_types=["authorization_code"],
            scopes=["openid", "email"], id_token_signed_response_alg="RS256", first_party=first_party,
            secret_hash="0" * 64)

    def request(self, method: str, path: str, *, rid: str | None = None, ip: str | None = None, **kwargs):
        headers = {"X-Request-ID": rid} if rid else {}
        result = self.client.simulate_request(method, path, headers=headers, cookies=dict(self.cookies),
                                              **({"remote_addr": ip} if ip else {}), **kwargs)
        self.cookies.update({name: c.value for name, c in result.cookies.items() if c.value})
        self.fields = {name: html.unescape(value) for name, value in
                       re.findall(r'name="(csrf_token|request|fresh)" value="([^"]*)"', result.text)}
        # The cookies, the form's token and an authorization code are secrets of the trail's scan.
        code = re.search(r"[?&]code=([^&]+)", result.headers.get("location") or "")
        self.w.secret(*self.cookies.values(), self.fields.get("csrf_token"), code.group(1) if code else None)
        return result

    def authorize(self, **kwargs):
        query = urlencode({"response_type": "code", "client_id": self.oauth_client.client_id,
                           "redirect_uri": self.REDIRECT, "scope": "openid email", "state": "s"})
        return self.request("GET", "/oauth/authorize", query_string=query, **kwargs)

    def post(self, action: str, fields: dict[str, str], **kwargs):
        return self.request("POST", f"/oauth/authorize/{action}", body=urlencode({**self.fields, **fields}),
                            content_type="application/x-www-form-urlencoded", **kwargs)

    def sign_in(self, user: Account):
        self.authorize()
        return self.post("login", {"email": user.email, "password": PASSWORD})


def oauth_authorized(w: World, rid: str, ip: str) -> Expect:
    user, browser = w.account("authorizing"), OAuthBrowser(w, first_party=True)
    assert browser.sign_in(user).status_code == 302
    result = browser.authorize(rid=rid, ip=ip)
    assert result.status_code == 302 and "code=" in result.headers["location"], result.text
    return Expect(user.uuid, "user", user.uuid, {"client_id": browser.oauth_client.client_id, "scope": "openid email"})


def oauth_consent_granted(w: World, rid: str, ip: str) -> Expect:
    user, browser = w.account("consenting"), OAuthBrowser(w, first_party=False)
    assert 'action="/oauth/authorize/consent"' in browser.sign_in(user).text
    result = browser.post("consent", {"decision": "allow"}, rid=rid, ip=ip)
    assert result.status_code == 302, result.text
    return Expect(user.uuid, "user", user.uuid,
                  {"client_id": browser.oauth_client.client_id, "scopes": ["email", "openid"]})


def oauth_logout(w: World, rid: str, ip: str) -> Expect:
    user, browser = w.account("leaving"), OAuthBrowser(w, first_party=True)
    assert browser.sign_in(user).status_code == 302
    op_session_uuid = browser.cookies["locky_op"].rpartition(".")[0]
    result = browser.request("GET", "/oauth/logout", rid=rid, ip=ip)
    assert result.status_code == 200, result.text
    return Expect(user.uuid, "session", op_session_uuid, {"user_uuid": user.uuid, "sessions_ended": 1})


OAUTH_CLIENTS = "/v1/private/oauth/clients"


def registered_client(w: World, **extra: Any) -> dict:
    """An OAuth client an admin registers through the API (its secret a secret of the scan)."""
    result = w.send(w.client, "POST", OAUTH_CLIENTS, token=w.admin.access_token, body={
        "name": f"App {next(_serial)}", "type": "confidential", "redirect_uris": [OAuthBrowser.REDIRECT], **extra})
    assert result.status_code == 201, result.text
    w.secret(result.json["client_secret"])
    return result.json


def token_request(w: World, client: dict, fields: dict[str, str], *, rid: str | None = None,
                  ip: str | None = None):
    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    headers = {"Authorization": f"Basic {basic}", **({"X-Request-ID": rid} if rid else {})}
    result = w.client.simulate_post("/oauth/token", body=urlencode(fields), headers=headers,
                                    content_type="application/x-www-form-urlencoded",
                                    **({"remote_addr": ip} if ip else {}))
    if result.status_code == 200:
        w.secret(result.json["access_token"])
    return result


def oauth_client_created(w: World, rid: str, ip: str) -> Expect:
    result = w.send(w.client, "POST", OAUTH_CLIENTS, rid=rid, ip=ip, token=w.admin.access_token, body={
        "name": "Reports", "type": "confidential", "redirect_uris": [OAuthBrowser.REDIRECT]})
    assert result.status_code == 201, result.text
    w.secret(result.json["client_secret"])
    return Expect(w.admin.body["uuid"], "oauth_client", result.json["uuid"],
                  {"client_id": result.json["client_id"], "redirect_uris": [OAuthBrowser.REDIRECT]})


def oauth_client_updated(w: World, rid: str, ip: str) -> Expect:
    client = registered_client(w)
    result = w.send(w.client, "PUT", f"{OAUTH_CLIENTS}/{client['id']}", rid=rid, ip=ip,
                    token=w.admin.access_token, body={"name": "Renamed"})
    assert result.status_code == 200, result.text
    return Expect(w.admin.body["uuid"], "oauth_client", client["uuid"], {"client_id": client["client_id"]})


def oauth_client_deleted(w: World, rid: str, ip: str) -> Expect:
    client = registered_client(w)
    result = w.send(w.client, "DELETE", f"{OAUTH_CLIENTS}/{client['id']}", rid=rid, ip=ip,
                    token=w.admin.access_token)
    assert result.status_code == 204, result.text
    return Expect(w.admin.body["uuid"], "oauth_client", client["uuid"],
                  {"client_id": client["client_id"], "sessions_ended": 0})


def oauth_client_secret_rotated(w: World, rid: str, ip: str) -> Expect:
    client = registered_client(w)
    result = w.send(w.client, "POST", f"{OAUTH_CLIENTS}/{client['id']}/secret", rid=rid, ip=ip,
                    token=w.admin.access_token)
    assert result.status_code == 200, result.text
    w.secret(result.json["client_secret"])
    return Expect(w.admin.body["uuid"], "oauth_client", client["uuid"], {"client_id": client["client_id"]})


def oauth_consent_revoked(w: World, rid: str, ip: str) -> Expect:
    user, browser = w.account("withdrawing"), OAuthBrowser(w, first_party=False)
    browser.sign_in(user)
    assert browser.post("consent", {"decision": "allow"}).status_code == 302
    client_id = browser.oauth_client.client_id
    result = w.send(w.client, "DELETE", f"/v1/private/users/me/consents/{client_id}", rid=rid, ip=ip,
                    token=user.access_token)
    assert result.status_code == 204, result.text
    return Expect(user.uuid, "user", user.uuid, {"client_id": client_id, "scopes": ["email", "openid"]})


def oauth_token_issued(w: World, rid: str, ip: str) -> Expect:
    client = registered_client(w, grant_types=["client_credentials"], redirect_uris=[])
    result = token_request(w, client, {"grant_type": "client_credentials"}, rid=rid, ip=ip)
    assert result.status_code == 200, result.text
    return Expect(None, "oauth_client", client["uuid"],
                  {"client_id": client["client_id"], "grant_type": "client_credentials"})


def oauth_code_reuse_detected(w: World, rid: str, ip: str) -> Expect:
    client = registered_client(w)
    user, browser = w.account("replayed"), OAuthBrowser(w, first_party=True)
    browser.oauth_client = w.client.app.context.storage.oauth_clients.get_by_client_id(client["client_id"])
    w.client.app.context.storage.oauth_clients.update(browser.oauth_client.id, first_party=True)
    code = re.search(r"[?&]code=([^&]+)", browser.sign_in(user).headers["location"]).group(1)
    exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": OAuthBrowser.REDIRECT}
    first = token_request(w, client, exchange)
    assert first.status_code == 200, first.text
    again = token_request(w, client, exchange, rid=rid, ip=ip)
    assert again.status_code == 400 and again.json["error"] == "invalid_grant", again.text
    return Expect(None, "session", session_of(first.json["access_token"]),
                  {"client_id": client["client_id"], "user_uuid": user.uuid})


def admin_granted(w: World, rid: str, ip: str) -> Expect:
    user = w.account("promoted", verified=True)
    assert "is now an admin" in w.cli("grant-admin", user.email).stdout
    # The operator's command line: no request, nobody logged in, no address.
    return Expect(None, "user", user.uuid, {"email": user.email, "actor": "cli"}, request_id="", ip="")


def admin_revoked(w: World, rid: str, ip: str) -> Expect:
    user = w.account("demoted", verified=True)
    w.cli("grant-admin", user.email)
    assert "is no longer an admin" in w.cli("revoke-admin", user.email).stdout
    return Expect(None, "user", user.uuid, {"email": user.email, "actor": "cli"}, request_id="", ip="")


def role_granted(w: World, rid: str, ip: str) -> Expect:
    user = w.account("granted", verified=True)
    assert "now holds role member" in w.cli("grant-role", user.email, "member").stdout
    return Expect(None, "user", user.uuid, {"subject": user.uuid, "role": "member", "email": user.email,
                                            "actor": "cli"}, request_id="", ip="")


def role_revoked(w: World, rid: str, ip: str) -> Expect:
    user = w.account("ungranted", verified=True)
    w.cli("grant-role", user.email, "member")
    assert "no longer holds role member" in w.cli("revoke-role", user.email, "member").stdout
    return Expect(None, "user", user.uuid, {"subject": user.uuid, "role": "member", "email": user.email,
                                            "actor": "cli"}, request_id="", ip="")


PASSKEYS = "/v1/private/users/me/passkeys"


def passkey_of(w: World, tag: str) -> tuple[Account, PasskeyAuthenticator, dict]:
    """A new user with a passkey registered (just signed in: a recent authentication)."""
    user, authenticator = w.account(tag), PasskeyAuthenticator()
    options = w.send(w.client, "POST", f"{PASSKEYS}/options", token=user.access_token)
    assert options.status_code == 200, options.text
    result = w.send(w.client, "POST", PASSKEYS, token=user.access_token,
                    body={"credential": authenticator.create(options.json), "name": "Laptop"})
    assert result.status_code == 201, result.text
    return user, authenticator, result.json


def passkey_registered(w: World, rid: str, ip: str) -> Expect:
    user, authenticator = w.account("keyed"), PasskeyAuthenticator()
    options = w.send(w.client, "POST", f"{PASSKEYS}/options", token=user.access_token)
    w.secret(options.json["challenge"])
    result = w.send(w.client, "POST", PASSKEYS, rid=rid, ip=ip, token=user.access_token,
                    body={"credential": authenticator.create(options.json), "name": "Laptop"})
    assert result.status_code == 201, result.text
    return Expect(user.uuid, "passkey", result.json["uuid"], {"user_uuid": user.uuid, "name": "Laptop"})


def passkey_removed(w: World, rid: str, ip: str) -> Expect:
    user, _, passkey = passkey_of(w, "unkeyed")
    result = w.send(w.client, "DELETE", f"{PASSKEYS}/{passkey['id']}", rid=rid, ip=ip, token=user.access_token)
    assert result.status_code == 204, result.text
    return Expect(user.uuid, "passkey", passkey["uuid"], {"user_uuid": user.uuid, "name": "Laptop"})


def passkey_counter_mismatch(w: World, rid: str, ip: str) -> Expect:
    user, authenticator, passkey = passkey_of(w, "cloned")
    for sign_count in (5, 5):  # the second answer reports a counter that did not move on
        options = w.send(w.client, "POST", "/v1/public/users/login/passkey/options", body={})
        result = w.send(w.client, "POST", "/v1/public/users/login/passkey", rid=rid, ip=ip,
                        body={"credential": authenticator.get(options.json, sign_count=sign_count)})
        w.secret(result.json.get("access_token"), result.json.get("refresh_token"))
    assert result.status_code == 400, result.text
    return Expect(None, "passkey", passkey["uuid"], {"user_uuid": user.uuid, "sign_count": 5, "stored_sign_count": 5})


#: event name -> the actions that produce it (token.revoked has two).
ACTIONS: dict[str, tuple[Callable[[World, str, str], Expect], ...]] = {
    "user.registered": (user_registered,),
    "user.updated": (user_updated,),
    "user.deleted": (user_deleted,),
    "user.disabled": (user_disabled,),
    "user.enabled": (user_enabled,),
    "email.verified": (email_verified,),
    "password.changed": (password_changed,),
    "password.reset_requested": (password_reset_requested,),
    "password.reset": (password_reset,),
    "mfa.enabled": (mfa_enabled,),
    "mfa.disabled": (mfa_disabled,),
    "login.succeeded": (login_succeeded,),
    "login.failed": (login_failed,),
    "login.locked": (login_locked,),
    "token.refreshed": (token_refreshed,),
    "token.reuse_detected": (token_reuse_detected,),
    "token.revoked": (token_revoked_by_logout, token_revoked_by_revocation),
    "group.created": (group_created,),
    "group.updated": (group_updated,),
    "group.deleted": (group_deleted,),
    "member.added": (member_added,),
    "member.removed": (member_removed,),
    "role.created": (role_created,),
    "role.updated": (role_updated,),
    "role.deleted": (role_deleted,),
    "admin.granted": (admin_granted,),
    "admin.revoked": (admin_revoked,),
    "role.granted": (role_granted,),
    "role.revoked": (role_revoked,),
    "key.rotated": (key_rotated,),
    "webhook.created": (webhook_created,),
    "webhook.deleted": (webhook_deleted,),
    "oauth.authorized": (oauth_authorized,),
    "oauth.consent.granted": (oauth_consent_granted,),
    "oauth.logout": (oauth_logout,),
    "oauth.client.created": (oauth_client_created,),
    "oauth.client.updated": (oauth_client_updated,),
    "oauth.client.deleted": (oauth_client_deleted,),
    "oauth.client.secret_rotated": (oauth_client_secret_rotated,),
    "oauth.consent.revoked": (oauth_consent_revoked,),
    "oauth.token.issued": (oauth_token_issued,),
    "oauth.code.reuse_detected": (oauth_code_reuse_detected,),
    "passkey.registered": (passkey_registered,),
    "passkey.removed": (passkey_removed,),
    "passkey.counter_mismatch": (passkey_counter_mismatch,),
}
CASES = [pytest.param(name, action, id=f"{name}-{action.__name__}" if len(actions) > 1 else name)
         for name, actions in ACTIONS.items() for action in actions]


def run(w: World, name: str, action, index: int) -> tuple[dict, Expect]:
    """Do ``action`` with a request id and address of its own; the one ``name`` event it made."""
    rid = f"audit-{name}-{uuid.uuid4().hex[:12]}"
    ip = f"198.51.100.{index % 250 + 1}"
    expect = action(w, rid, ip)
    wanted_rid = rid if expect.request_id is None else expect.request_id
    events = read_trail(w.client, w.admin, event=name)
    if wanted_rid:
        found = [e for e in events if e["request_id"] == wanted_rid]
        if len(found) > 1:  # one request, several events (key.rotated: one per key family)
            found = [e for e in found if e["target_uuid"] == expect.target_uuid]
    else:  # the command line's: the newest of its target
        found = [e for e in events if e["target_uuid"] == expect.target_uuid][-1:]
    assert len(found) == 1, (name, wanted_rid, events)
    event = found[0]
    assert_event_shape(event)
    assert event["event"] == name
    assert event["actor_uuid"] == expect.actor_uuid, event
    assert (event["target_type"], event["target_uuid"]) == (expect.target_type, expect.target_uuid), event
    assert event["request_id"] == wanted_rid, event
    assert event["ip"] == (ip if expect.ip is None else expect.ip), event
    for key, value in expect.details.items():
        assert event["details"].get(key) == value, (key, event)
    return event, expect


def test_every_event_has_an_action_here():
    assert set(ACTIONS) == set(EVENTS)


@pytest.mark.parametrize("name, action", CASES)
def test_each_event_is_recorded_with_who_what_where(world, name, action):
    run(world, name, action, EVENTS.index(name))


def test_password_change_records_the_update_and_the_change_in_one_request(world):
    event, _ = run(world, "password.changed", password_changed, 1)
    updates = [e for e in read_trail(world.client, world.admin, event="user.updated")
               if e["request_id"] == event["request_id"]]
    assert len(updates) == 1, updates
    assert "password" in updates[0]["details"]["changed"], updates
    assert updates[0]["id"] < event["id"]


def test_a_key_rotated_on_the_command_line_is_recorded(world):
    done = world.cli("keys", "rotate")
    events = read_trail(world.client, world.admin, event="key.rotated")  # one per key family
    assert sorted(event["details"]["alg"] for event in events) == ["ES256", "RS256"]
    for event in events:
        assert_event_shape(event)
        assert event["target_type"] == "key" and event["target_uuid"] in done.stdout, (event, done.stdout)
        assert (event["actor_uuid"], event["ip"], event["request_id"]) == (None, "", ""), event
        assert event["details"]["actor"] == "cli"
    keys = world.send(world.client, "GET", "/v1/internal/keys", token=world.admin.access_token)
    assert keys.status_code == 200, keys.text
    active = [k["kid"] for k in keys.json["keys"] if k["retired_at"] is None]
    assert sorted(active) == sorted(event["target_uuid"] for event in events), keys.json


def test_a_grant_that_changes_nothing_records_nothing(world):
    user = world.account("twice", verified=True)
    world.cli("grant-admin", user.email)
    assert "nothing to change" in world.cli("grant-admin", user.email).stdout
    world.cli("revoke-admin", user.email)
    assert "nothing to change" in world.cli("revoke-admin", user.email).stdout
    mine = read_trail(world.client, world.admin, event="admin.*", target_uuid=user.uuid)
    assert [e["event"] for e in mine] == ["admin.granted", "admin.revoked"], mine


@pytest.mark.parametrize("path, body, status, name", [
    (LOGIN, {"email": "nobody@example.com", "password": "whatever it is"}, 401, "login.failed"),
    (FORGOT, {"email": "nobody@example.com"}, 202, "password.reset_requested"),
])
def test_events_about_an_unknown_email_name_no_target(world, path, body, status, name):
    result = world.send(world.client, "POST", path, rid=f"nobody-{name}", ip="192.0.2.77", body=body)
    assert result.status_code == status, result.text
    (event,) = [e for e in read_trail(world.client, world.admin, event=name)
                if e["request_id"] == f"nobody-{name}"]
    assert (event["actor_uuid"], event["target_type"], event["target_uuid"]) == (None, None, None), event
    assert (event["ip"], event["details"]["email"]) == ("192.0.2.77", "nobody@example.com"), event


def test_a_login_with_a_second_factor_is_recorded_once_it_is_complete(world):
    user = world.account("twofactor")
    authenticator, _ = world.totp_on(user)
    start = read_trail(world.client, world.admin)[-1]["id"]
    challenge = world.login(world.client, user.email)
    assert challenge["mfa_required"] is True, challenge
    wrong = authenticator.wrong()
    result = world.send(world.client, "POST", LOGIN_MFA, rid="mfa-wrong", ip="192.0.2.44",
                        body={"mfa_token": challenge["mfa_token"], "code": wrong})
    assert result.status_code == 401, result.text
    code = authenticator.code()
    world.secret(code)
    result = world.send(world.client, "POST", LOGIN_MFA, rid="mfa-right", ip="192.0.2.44",
                        body={"mfa_token": challenge["mfa_token"], "code": code})
    assert result.status_code == 200, result.text
    world.secret(result.json["access_token"], result.json["refresh_token"])
    mine = read_trail(world.client, world.admin, target_uuid=user.uuid, event="login.*", after_id=start)
    by_request = {(e["request_id"], e["event"]) for e in mine}
    assert ("mfa-wrong", "login.failed") in by_request, mine
    assert ("mfa-right", "login.succeeded") in by_request, mine
    # The password step alone is no login.
    assert [e["event"] for e in mine if e["event"] == "login.succeeded"] == ["login.succeeded"], mine
    succeeded = next(e for e in mine if e["request_id"] == "mfa-right")
    assert succeeded["actor_uuid"] == user.uuid and succeeded["details"].get("mfa") is True, succeeded
    assert_no_secrets(read_trail(world.client, world.admin), world.secrets)


# -- no secret in the trail --------------------------------------------------------------


def secret_keys(value: Any, path: str = "details") -> list[str]:
    """The paths of keys in ``value`` named like a credential."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if any(word in str(key).lower() for word in SECRET_WORDS):
                found.append(f"{path}.{key}")
            found.extend(secret_keys(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found.extend(secret_keys(item, f"{path}[{n}]"))
    return found


def assert_no_secrets(events: list[dict], secrets: set[str]) -> None:
    assert events
    for event in events:
        assert not secret_keys(event["details"]), (secret_keys(event["details"]), event)
        whole = json.dumps(event)
        details = json.dumps(event["details"])
        for secret in secrets:
            # Short codes (six digits) are looked for in details only: a timestamp's
            # microseconds could hold the same six digits by chance.
            assert secret not in (whole if len(secret) >= 12 else details), (secret, event)


def test_no_secret_of_any_action_is_in_the_trail(world):
    for index, (name, action) in enumerate((c.values[0], c.values[1]) for c in CASES):
        run(world, name, action, index)
    # Wrong credentials are secrets too (someone's almost-right password).
    user = world.account("typo")
    world.secret("correct horse batterx")
    assert world.send(world.client, "POST", LOGIN, body={"email": user.email,
                                                         "password": "correct horse batterx"}).status_code == 401
    world.secret("a made-up refresh token value")
    assert world.send(world.client, "POST", REFRESH,
                      body={"refresh_token": "a made-up refresh token value"}).status_code in (400, 401)
    events = read_trail(world.client, world.admin)
    assert {e["event"] for e in events} == set(EVENTS), set(EVENTS) - {e["event"] for e in events}
    for event in events:
        assert_event_shape(event)
    assert len(world.secrets) > 30
    assert_no_secrets(events, world.secrets)


# -- filters and keyset paging -----------------------------------------------------------


@pytest.fixture
def history(world):
    """A user who made a group and renamed it, a role made by the admin, and a login."""
    user = world.account("historian")
    group = world.group(user)
    result = world.send(world.client, "PUT", f"{GROUPS}/{group['id']}", token=user.access_token,
                        body={"name": "renamed-group"})
    assert result.status_code == 200, result.text
    world.role()
    world.login(world.client, user.email)
    return user, group


def query(world, **params):
    return world.send(world.client, "GET", AUDIT, token=world.admin.access_token, params=params)


def test_filter_by_exact_event_name(world, history):
    events = read_trail(world.client, world.admin, event="group.updated")
    assert [e["event"] for e in events] == ["group.updated"], events
    assert events[0]["target_uuid"] == history[1]["uuid"]


def test_filter_by_prefix(world, history):
    everything = read_trail(world.client, world.admin)
    users = read_trail(world.client, world.admin, event="user.*")
    assert users == [e for e in everything if e["event"].startswith("user.")]
    assert {"user.registered"} <= {e["event"] for e in users}
    groups = read_trail(world.client, world.admin, event="group.*")
    assert groups == [e for e in everything if e["event"].startswith("group.")]
    assert {e["event"] for e in groups} == {"group.created", "group.updated"}
    assert read_trail(world.client, world.admin, event="*") == everything


def test_filter_by_actor_and_target(world, history):
    user, group = history
    everything = read_trail(world.client, world.admin)
    acted = read_trail(world.client, world.admin, actor_uuid=user.uuid)
    assert acted == [e for e in everything if e["actor_uuid"] == user.uuid]
    assert {"group.created", "group.updated", "login.succeeded"} <= {e["event"] for e in acted}
    on_group = read_trail(world.client, world.admin, target_uuid=group["uuid"])
    assert [e["event"] for e in on_group] == ["group.created", "group.updated"], on_group
    assert read_trail(world.client, world.admin, actor_uuid=user.uuid, event="group.*") == on_group
    assert read_trail(world.client, world.admin, actor_uuid=str(uuid.uuid4())) == []


def test_filter_by_a_machine_client_as_actor(world):
    """What a machine client did (here: provisioning a user over SCIM) is found by its subject."""
    client = registered_client(world, grant_types=["client_credentials"], redirect_uris=[])
    subject = f"client:{client['client_id']}"
    assert world.cli("grant-role", subject, "provisioner").returncode == 0
    token = token_request(world, client, {"grant_type": "client_credentials"}).json["access_token"]
    made = world.send(world.client, "POST", "/scim/v2/Users", token=token, body={
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "provisioned@example.com",
        "displayName": "Provisioned", "active": True})
    assert made.status_code == 201, made.text
    acted = read_trail(world.client, world.admin, actor_uuid=subject)
    assert [(e["event"], e["target_uuid"], e["details"]["via"]) for e in acted] == [
        ("user.registered", made.json["id"], "scim")]
    assert read_trail(world.client, world.admin, actor_uuid="client:" + client["client_id"].upper()) == []  # exact
    for wrong in ("client:", "nobody", "client:x\x00"):
        result = world.send(world.client, "GET", AUDIT, token=world.admin.access_token, params={"actor_uuid": wrong})
        assert result.status_code == 400 and list(result.json) == ["actor_uuid"], result.text


def test_since_is_inclusive_and_until_exclusive(world, history):
    everything = read_trail(world.client, world.admin)
    assert len(everything) >= 5
    middle = everything[len(everything) // 2]
    moment = middle["created_at"]
    since = read_trail(world.client, world.admin, since=moment)
    until = read_trail(world.client, world.admin, until=moment)
    assert middle in since and middle not in until
    assert since == [e for e in everything if e["created_at"] >= moment]
    assert until == [e for e in everything if e["created_at"] < moment]
    assert sorted(since + until, key=lambda e: e["id"]) == everything
    # The same instant written with another offset.
    parsed = datetime.fromisoformat(moment.replace("Z", "+00:00")).astimezone(timezone(timedelta(hours=2)))
    assert read_trail(world.client, world.admin, since=parsed.isoformat()) == since
    assert read_trail(world.client, world.admin, since=moment, until=moment) == []
    window = read_trail(world.client, world.admin, since=everything[1]["created_at"],
                        until=everything[-1]["created_at"])
    low, high = everything[1]["created_at"], everything[-1]["created_at"]
    assert window == [e for e in everything if low <= e["created_at"] < high]
    assert read_trail(world.client, world.admin, since="2999-01-01T00:00:00Z") == []
    assert read_trail(world.client, world.admin, until="2000-01-01T00:00:00Z") == []


def test_keyset_paging_with_limit_and_after_id(world, history):
    everything = read_trail(world.client, world.admin)
    ids = [e["id"] for e in everything]
    assert ids == sorted(set(ids)) and len(ids) >= 5
    pages, after = [], 0
    while True:
        result = query(world, limit=2, after_id=after)
        assert result.status_code == 200, result.text
        page = result.json
        assert len(page["events"]) <= 2
        pages.append(page["events"])
        after = page["next_after_id"]
        if after is None:
            break
        assert after == page["events"][-1]["id"]
    assert [e for page in pages for e in page] == everything
    assert all(len(page) == 2 for page in pages[:-1])
    result = query(world, after_id=ids[2])
    assert result.json["events"] == everything[3:]
    assert query(world, after_id=ids[-1]).json == {"events": [], "next_after_id": None}
    # Filters and paging together.
    first = query(world, event="user.*", limit=1).json
    assert len(first["events"]) == 1 and first["next_after_id"] == first["events"][0]["id"]
    second = query(world, event="user.*", limit=1, after_id=first["next_after_id"]).json
    users = [e for e in everything if e["event"].startswith("user.")]
    assert first["events"] + second["events"] == users[:2]


#: field -> values it refuses (400 naming the field).
BAD_QUERIES = {
    "event": ["nosuch.thing", "user", "user.", "User.Registered", "nosuch.*", "user.**", "user.*.x", "u.*",
              "user.registered.*", ""],
    "since": ["yesterday", "2026-13-01T00:00:00Z", "2026-01-01", "1700000000", "2026-01-01 00:00:00Z",
              "2026-01-01T25:00:00Z",
              # Valid RFC 3339 times whose UTC instant is out of Python's datetime range.
              "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"],
    "until": ["tomorrow", "2026-02-30T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"],
    "actor_uuid": ["not-a-uuid", "12345", "00000000-0000-0000-0000-000000000000"],
    "target_uuid": ["x" * 65, "", "a\x00b"],
    "limit": ["0", "-1", "501", "ten"],
    "after_id": ["-1", "abc"],
    "request_id": ["x"],  # no such filter
}


@pytest.mark.parametrize("field", BAD_QUERIES)
def test_bad_query_values_are_400_naming_the_field(world, field):
    wrong = []
    for value in BAD_QUERIES[field]:
        result = query(world, **{field: value})
        if result.status_code != 400 or set(result.json or {}) != {field}:
            wrong.append((value, result.status_code, result.text))
        else:
            assert_fields(result, field)
    assert not wrong, wrong


# -- who may read it; nothing changes it ------------------------------------------------


def test_a_plain_user_gets_403_and_nobody_401(world):
    user = world.account("curious")
    assert_error(world.send(world.client, "GET", AUDIT, token=user.access_token), 403, "403 Forbidden")
    assert_error(world.send(world.client, "GET", AUDIT), 401, "401 Unauthorized")
    assert_error(world.send(world.client, "GET", AUDIT, token="not.a.token"), 401, "401 Unauthorized")
    assert query(world).status_code == 200


def test_an_admin_made_on_the_command_line_may_read_it_until_revoked(world):
    user = world.account("operator", verified=True)
    world.cli("grant-admin", user.email)
    assert world.send(world.client, "GET", AUDIT, token=user.access_token).status_code == 200
    world.cli("revoke-admin", user.email)
    assert_error(world.send(world.client, "GET", AUDIT, token=user.access_token), 403, "403 Forbidden")


@pytest.mark.parametrize("path", [AUDIT, f"{AUDIT}/1", "/v1/private/audit", "/v1/private/audit/1"])
def test_no_route_changes_or_deletes_an_event(world, path):
    before = read_trail(world.client, world.admin)
    assert before[0]["id"] == 1, before[0]
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for token in (world.admin.access_token, None):
            result = world.send(world.client, method, path, token=token,
                                body={"event": "user.deleted", "details": {}})
            assert result.status_code in (404, 405) or (token is None and result.status_code == 401), \
                (method, path, token is not None, result.status_code, result.text)
    assert read_trail(world.client, world.admin) == before


# -- the client address behind proxies ------------------------------------------------------


def registered_from(w: World, client: LockyClient, peer: str, forwarded: str | None) -> dict:
    rid = f"proxy-{uuid.uuid4().hex[:12]}"
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else None
    result = w.send(client, "POST", REGISTER, rid=rid, ip=peer, headers=headers,
                    body={"name": "Proxied", "email": f"proxied-{next(_serial)}@example.com", "password": PASSWORD})
    assert result.status_code == 201, result.text
    (event,) = [e for e in read_trail(w.client, w.admin, event="user.registered") if e["request_id"] == rid]
    return event


@pytest.mark.parametrize("peer, forwarded, expected", [
    ("10.1.2.3", "203.0.113.7", "203.0.113.7"),            # from the trusted proxy
    ("10.1.2.3", "198.51.100.1, 203.0.113.7", "203.0.113.7"),  # the right-most is the proxy's word
    ("10.1.2.3", "203.0.113.7, 10.9.9.9", "203.0.113.7"),  # through two trusted proxies
    ("10.1.2.3", None, "10.1.2.3"),                        # a trusted peer without the header
    ("192.0.2.9", "203.0.113.7", "192.0.2.9"),             # an untrusted peer: header ignored
    ("192.0.2.9", "10.1.2.3", "192.0.2.9"),
])
def test_ip_behind_trusted_proxies(world, peer, forwarded, expected):
    client = world.app(trusted_proxies=("10.0.0.0/8",))
    assert registered_from(world, client, peer, forwarded)["ip"] == expected


def test_without_trusted_proxies_the_header_is_ignored(world):
    assert registered_from(world, world.client, "10.1.2.3", "203.0.113.7")["ip"] == "10.1.2.3"


def test_request_id_is_generated_when_none_is_sent(world):
    email = f"anonymous-{next(_serial)}@example.com"
    result = world.send(world.client, "POST", REGISTER, body={"name": "Anon", "email": email, "password": PASSWORD})
    assert result.status_code == 201, result.text
    (event,) = [e for e in read_trail(world.client, world.admin, event="user.registered")
                if e["target_uuid"] == result.json["uuid"]]
    assert event["request_id"] == result.headers["x-request-id"] and event["request_id"], event
    assert event["ip"] == "127.0.0.1", event  # the test client's default peer


# -- no change without its event -----------------------------------------------------------


def drop_audit_table(database_url: str) -> None:
    path = database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "locky_audit" in tables, tables
        db.execute("DROP TABLE locky_audit")


def listed(w: World, kind: str, **params) -> list[dict]:
    result = w.send(w.client, "GET", f"/v1/internal/{kind}", token=w.admin.access_token, params=params)
    assert result.status_code == 200, result.text
    return result.json[kind]


def create_group(w: World, user: Account):
    result = w.send(w.client, "POST", GROUPS, token=user.access_token, body={"name": "doomed"})
    return result, lambda: listed(w, "groups", name="doomed") == []


def register(w: World, user: Account):
    result = w.send(w.client, "POST", REGISTER, body={"name": "Doomed", "email": "doomed@example.com",
                                                      "password": PASSWORD})
    return result, lambda: listed(w, "users", email="doomed@example.com") == []


def create_role(w: World, user: Account):
    result = w.send(w.client, "POST", ROLES, token=w.admin.access_token, body={"name": "doomed"})
    return result, lambda: listed(w, "roles", name="doomed") == []


def rename_user(w: World, user: Account):
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", token=w.admin.access_token, body={"name": "Doomed"})
    return result, lambda: listed(w, "users", email=user.email)[0]["name"] != "Doomed"


def disable_user(w: World, user: Account):
    result = w.send(w.client, "PUT", f"{USERS}/{user.id}", token=w.admin.access_token, body={"disabled": True})
    return result, lambda: listed(w, "users", email=user.email)[0]["disabled"] is False


def delete_user(w: World, user: Account):
    result = w.send(w.client, "DELETE", f"{USERS}/{user.id}", token=w.admin.access_token)
    return result, lambda: len(listed(w, "users", email=user.email)) == 1


@pytest.mark.parametrize("change", [create_group, register, create_role, rename_user, disable_user, delete_user])
def test_a_change_whose_event_cannot_be_written_is_not_kept(world, locky_database_url, change):
    if not locky_database_url.startswith("sqlite:///"):
        pytest.skip("drops the audit table of the SQLite database")
    user = world.account("unlucky")
    drop_audit_table(locky_database_url)
    result, unchanged = change(world, user)
    assert result.status_code == 503, (result.status_code, result.text)
    assert "Traceback" not in result.text and "locky_audit" not in result.text, result.text
    assert unchanged(), change.__name__
