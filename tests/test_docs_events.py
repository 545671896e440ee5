"""The event table cannot drift from the code (issue 20).

``docs/events.md`` is what ``docs/gen_events.py`` writes from ``locky.events.SPECS``;
every name in ``events.NAMES`` has a row and every row a known name; and every row is
acted out through the API (Falcon's test client, a ``locky_event`` plugin recording
what it is told): the action the row names announces the event, with the row's
``kind``, ``record`` and ``details`` keys, the request's id and the client address.
"""

from __future__ import annotations

import argparse
import itertools
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pyotp
import pytest

import locky.app
from locky import events, hookimpl
from locky.testing import ADMIN_EMAIL, PASSWORD, Account, make_settings
from docs_generators import DOCS, load_generator

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
NEW_PASSWORD = "a brand new passphrase 42"
CLIENT_ADDRESS = "203.0.113.7"


gen = load_generator("gen_events")


# -- the page and the table -------------------------------------------------------------


def test_the_page_is_what_the_generator_writes():
    assert (DOCS / "events.md").read_text() == gen.render(), \
        "docs/events.md is out of date: run `python docs/gen_events.py`"


def test_every_event_name_has_a_row_and_every_row_a_name():
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
        self.sent.append(f"{method} {re.sub(r'/[0-9]+(?=/|$)', '/{id}', path)}")
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
        assert w.send("PUT", f"{path}/{record['id']}", w.admin, json=body).status_code == 200
    return drive


def login_failed_disabled(w):
    account = w.user("disabled")
    w.put_user(account, {"disabled": True})
    assert w.send("POST", LOGIN, json={"email": account.email, "password": account.password}).status_code == 403


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
    valid = {code(secret, k) for k in range(-3, 4)}
    wrong = next(c for c in (f"{n:06d}" for n in range(10 ** 6)) if c not in valid)
    assert w.send("POST", LOGIN_MFA, json={"mfa_token": mfa_token(w, account), "code": wrong}).status_code == 401


def refresh_reused(w):
    account = w.user("reuser")
    assert w.client.simulate_post(REFRESH, json={"refresh_token": account.refresh_token}).status_code == 200
    assert w.send("POST", REFRESH, json={"refresh_token": account.refresh_token}).status_code == 401


def logins_ended_by_update(w):
    account = w.user("changed")
    assert w.send("PUT", f"{USERS}/{account.id}", w.admin, json={"password": NEW_PASSWORD}).status_code == 200


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


def key(spec: events.EventSpec) -> tuple:
    return spec.name, spec.action, spec.kind, spec.details


_LOGIN = f"POST {LOGIN}"
_PUT_USER = f"PUT {USERS}/{{id}}"
#: The driver of every row, by (name, action, kind, details); ``None``: not a request.
DRIVERS: dict[tuple, Callable[[World], None] | None] = {
    (events.USER_REGISTERED, f"POST {REGISTER}", "users", ()): register,
    (events.RECORD_CREATED, f"POST {REGISTER}", "users", ()): register,
    (events.RECORD_CREATED, f"POST {GROUPS}", "groups", ()):
        lambda w: w.send("POST", GROUPS, w.admin, json={"name": "Created"}),
    (events.RECORD_CREATED, f"POST {MEMBERS}", "members", ()):
        lambda w: w.send("POST", MEMBERS, w.admin, json={"group_uuid": w.group()["uuid"],
                                                         "user_uuid": w.user("joiner").uuid}),
    (events.RECORD_CREATED, f"POST {ROLES}", "roles", ()):
        lambda w: w.send("POST", ROLES, w.admin, json={"name": "reviewer"}),
    (events.RECORD_UPDATED, _PUT_USER, "users", ()):
        put(USERS, lambda w: w.user("renamed").body, {"name": "Renamed"}),
    (events.RECORD_UPDATED, f"PUT {GROUPS}/{{id}}", "groups", ()): put(GROUPS, World.group, {"name": "Renamed"}),
    (events.RECORD_UPDATED, f"PUT {ROLES}/{{id}}", "roles", ()): put(ROLES, World.role, {"description": "Reads."}),
    (events.RECORD_DELETED, f"DELETE {USERS}/{{id}}", "users", ()): delete(USERS, lambda w: w.user("gone").body),
    (events.RECORD_DELETED, f"DELETE {GROUPS}/{{id}}", "groups", ()): delete(GROUPS, World.group),
    (events.RECORD_DELETED, f"DELETE {MEMBERS}/{{id}}", "members", ()): delete(MEMBERS, World.member),
    (events.RECORD_DELETED, f"DELETE {ROLES}/{{id}}", "roles", ()): delete(ROLES, World.role),
    (events.LOGIN_SUCCEEDED, _LOGIN, "users", ()):
        lambda w: w.send("POST", LOGIN, json={"email": w.admin.email, "password": w.admin.password}),
    (events.LOGIN_SUCCEEDED, f"POST {LOGIN_MFA}", "users", ()): login_mfa,
    (events.LOGIN_FAILED, _LOGIN, None, ("email",)):
        lambda w: w.send("POST", LOGIN, json={"email": w.admin.email, "password": "not the password"}),
    (events.LOGIN_FAILED, _LOGIN, "users", ("email", "reason")): login_failed_disabled,
    (events.LOGIN_FAILED, f"POST {LOGIN_MFA}", "users", ("email", "reason")): login_mfa_wrong,
    (events.LOGIN_FAILED, _PUT_USER, "users", ("email", "reason")): login_failed_current_password,
    (events.LOGIN_FAILED, _LOGIN, None, ("email", "reason")): login_failed_locked,
    (events.TOKEN_REVOKED, f"POST {LOGOUT}", "sessions", ("session_uuid", "reason")):
        lambda w: w.send("POST", LOGOUT, w.user("leaving")),
    (events.TOKEN_REVOKED, f"POST {REVOKE}", "sessions", ("session_uuid", "reason")):
        lambda w: w.send("POST", REVOKE, json={"token": w.user("revoked").refresh_token}),
    (events.TOKEN_REVOKED, f"POST {REFRESH}", "sessions", ("session_uuid", "reason")): refresh_reused,
    (events.TOKEN_REVOKED, _PUT_USER, "sessions", ("user_uuid", "sessions", "reason")): logins_ended_by_update,
    (events.EMAIL_VERIFIED, f"POST {VERIFY}", "users", ()): verify,
    (events.PASSWORD_RESET, f"POST {RESET}", "users", ("sessions_revoked",)): reset,
    (events.MFA_ENABLED, f"POST {TOTP_CONFIRM}", "users", ()): mfa_enabled,
    (events.MFA_DISABLED, f"DELETE {TOTP}", "users", ()): mfa_disabled,
    (events.KEY_ROTATED, f"POST {ROTATE}", "keys", ("kid", "alg")): lambda w: w.send("POST", ROTATE, w.admin),
    (events.KEY_ROTATED, "locky keys rotate", "keys", ("kid", "alg")): None,  # test_the_command_row
}
REQUEST_ROWS = [spec for spec in events.SPECS if DRIVERS.get(key(spec)) is not None]


def test_every_row_has_a_driver():
    assert {key(spec) for spec in events.SPECS} == set(DRIVERS), \
        "a row of locky.events.SPECS changed: act it out in DRIVERS"


@pytest.mark.parametrize("spec", REQUEST_ROWS, ids=lambda s: f"{s.name} {s.action} {s.kind} {len(s.details)}")
def test_the_documented_action_announces_the_documented_event(spec, locky_client, recorder):
    world = World(locky_client, locky_client.account(ADMIN_EMAIL, verified=True))
    DRIVERS[key(spec)](world)
    assert world.sent == [spec.action], "the driver must make the row's request, once"
    announced = [e for e in recorder.events if e.request_id == world.request_id]
    matching = [e for e in announced if (e.name, e.kind, tuple(sorted(e.details))) ==
                (spec.name, spec.kind, tuple(sorted(spec.details)))]
    assert matching, (spec, [(e.name, e.kind, e.details) for e in announced])
    for event in matching:
        assert (type(event.record).__name__ if event.record is not None else None) == spec.record, event
        assert event.client_address == CLIENT_ADDRESS, event
        assert event.at is not None
    # An event is announced by the actions the table says, no others.
    documented = {(s.name, s.kind, tuple(sorted(s.details))) for s in events.SPECS if s.action == spec.action}
    assert {(e.name, e.kind, tuple(sorted(e.details))) for e in announced} <= documented, announced


def test_the_command_row(locky_database_url, locky_mail_dir, recorder, monkeypatch, capsys):
    """``locky keys rotate``: the event, with no request id, client address or actor."""
    from locky.cli import main as cli

    make = locky.app.create_app
    monkeypatch.setattr(locky.app, "create_app", lambda settings, plugins=(), **kw: make(settings, [recorder], **kw))
    settings = make_settings(locky_database_url, mail_dir=locky_mail_dir)
    assert cli._keys(settings, argparse.Namespace(keys_command="rotate")) == 0
    (spec,) = [s for s in events.SPECS if s.action == "locky keys rotate"]
    (event,) = [e for e in recorder.events if e.name == spec.name]
    assert (event.kind, set(event.details), event.record) == (spec.kind, set(spec.details), None)
    assert (event.request_id, event.client_address, event.actor_uuid) == (None, None, None)


def test_an_event_keeps_a_request_id_given_to_it(locky_app, recorder):
    """``Context.emit`` fills in only what the caller left out."""
    locky_app.context.emit(events.KEY_ROTATED, kind="keys", request_id="given", client_address="198.51.100.1")
    (event,) = recorder.events
    assert (event.request_id, event.client_address) == ("given", "198.51.100.1")
