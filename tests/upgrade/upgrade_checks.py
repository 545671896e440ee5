"""What an upgraded database must answer over HTTP: everything a released Locky answered
when the fixture was made (``expected.json``), asked again of today's code.

The same checks run in process (Falcon's test client) and against a real ``locky serve``
(urllib): both are wrapped as an :class:`Http` that answers ``(status, parsed body)``.

Records compare field by field: every field the release answered is there with the same
value (ids, uuids, timestamps, text). Fields a later release adds to a record, and
built-in roles a later policy adds, are additions the contract allows.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable
from urllib.parse import urlencode

import jwt

from upgrade_dumps import FIXTURES

KINDS = ("users", "groups", "members", "roles")


def expected(release: str, engine: str) -> dict[str, Any]:
    """The fixture's recorded answers for ``engine``, with the release-wide values
    (``jwt_secret``, ``jwt``, ...) merged in."""
    document = json.loads((FIXTURES / release / "expected.json").read_text(encoding="utf-8"))
    return {**{k: v for k, v in document.items() if k != "engines"}, **document["engines"][engine]}


class Http:
    """``request(method, path, body=None, token=None, params=None) -> (status, body)``."""

    def __init__(self, send: Callable[..., tuple[int, Any]]):
        self.send = send

    def __call__(self, method: str, path: str, body: Any = None, token: str | None = None,
                 params: dict[str, str] | None = None) -> tuple[int, Any]:
        return self.send(method, path, body, {"Authorization": f"Bearer {token}"} if token else {}, params or {})

    @classmethod
    def in_process(cls, client) -> "Http":
        def send(method, path, body, headers, params):
            result = client.simulate_request(method, path, json=body, headers=headers, params=params)
            return result.status_code, (result.json if result.text else None)

        return cls(send)

    @classmethod
    def real(cls, server) -> "Http":
        """Over real HTTP to a :class:`support.server.ServerProcess`."""

        def send(method, path, body, headers, params):
            status, _, answer = server.request(method, path + ("?" + urlencode(params) if params else ""),
                                               body, headers)
            return status, answer

        return cls(send)


def refresh_token(fixture: dict, session: dict) -> str:
    """A refresh token for a stored session, exactly as the release's ``jwt`` backend
    wrote them (plugins/locky_jwt of 1.0.0: HS256, these nine claims)."""
    now = int(time.time())
    claims = {
        "sub": session["user_uuid"], "sid": session["session_uuid"], "jti": session["refresh_jti"],
        "iat": now, "nbf": now, "exp": now + 7 * 24 * 3600,
        "iss": fixture["jwt"]["issuer"], "aud": fixture["jwt"]["audience"], "typ": "refresh",
    }
    return jwt.encode(claims, fixture["jwt_secret"], algorithm=fixture["jwt"]["algorithm"])


#: The User fields step 4 added, false on every account a 1.0.0 database held.
LIFECYCLE_FLAGS = ("email_verified", "disabled", "mfa_enabled")

#: The fields of a built-in role that an upgrade keeps whatever the new policy says.
BUILTIN_IDENTITY = ("id", "uuid", "name", "builtin", "created_at", "deleted_at")


def comparable(kind: str, record: dict) -> dict:
    """What of a recorded record must read back unchanged. A built-in role is what the
    installed policy files say (synced at start): it keeps its identity, while its text
    and permissions follow the release."""
    if kind == "roles" and record["builtin"]:
        return {k: record[k] for k in BUILTIN_IDENTITY}
    return record


def assert_same_record(actual: dict, recorded: dict, what: str) -> None:
    missing = sorted(set(recorded) - set(actual))
    assert not missing, f"{what}: fields {missing} are gone: {actual}"
    changed = {k: (recorded[k], actual[k]) for k in recorded if actual[k] != recorded[k]}
    assert not changed, f"{what}: changed (recorded, now): {changed}"


def assert_same_list(kind: str, actual: list[dict], recorded: list[dict]) -> None:
    by_id = {record["id"]: record for record in actual}
    for record in recorded:
        assert record["id"] in by_id, f"{kind} {record['id']} ({record['uuid']}) is missing"
        assert_same_record(by_id[record["id"]], comparable(kind, record), f"{kind} {record['id']}")
    extra = [record for record in actual if record["id"] not in {r["id"] for r in recorded}]
    # Only a later release's policy may add records here: built-in roles.
    assert all(kind == "roles" and record["builtin"] for record in extra), f"{kind}: new records {extra}"
    assert [record["id"] for record in actual] == sorted(by_id), f"{kind} are not in id order"


def everything(http: Http, kind: str, token: str) -> list[dict]:
    status, page = http("GET", f"/v1/internal/{kind}", token=token, params={"limit": "500"})
    assert status == 200, page
    assert page["next_after_id"] is None
    return page[kind]


def login(http: Http, email: str, password: str) -> dict:
    status, body = http("POST", "/v1/public/users/login", {"email": email, "password": password})
    assert status == 200, (email, body)
    return body


def check_reads_back(http: Http, fixture: dict) -> dict[str, str]:
    """Every record, count, deletion, password and decision of the fixture, read back;
    the live login refreshes. Reads only (the refresh rotates the one live session).
    Returns the access tokens of the logins it made, by email."""
    users = {user["uuid"]: user for user in fixture["users"]}
    tokens: dict[str, str] = {}

    # Old passwords log in, and the login answers the user as recorded.
    for email, password in fixture["passwords"].items():
        if email == fixture["deleted_user"]["email"]:
            continue
        answer = login(http, email, password)
        assert_same_record(answer["user"], next(u for u in fixture["users"] if u["email"] == email), email)
        # Step 4 (account lifecycle): no address was ever proved before it, nobody is
        # disabled and nobody has a second factor.
        assert {k: answer["user"][k] for k in LIFECYCLE_FLAGS} == dict.fromkeys(LIFECYCLE_FLAGS, False), answer["user"]
        tokens[email] = answer["access_token"]
    admin = tokens[users[fixture["admin_uuid"]]["email"]]

    for kind in KINDS:
        assert_same_list(kind, everything(http, kind, admin), fixture[kind])
        for record in fixture[kind]:
            status, body = http("GET", f"/v1/internal/{kind}/{record['id']}", token=admin)
            assert status == 200, body
            assert_same_record(body, comparable(kind, record), f"{kind} {record['id']}")
        status, body = http("GET", f"/v1/internal/{kind}/count", token=admin)
        assert status == 200
        count = fixture["counts"][kind]
        new_builtin = len(everything(http, kind, admin)) - len(fixture[kind]) if kind == "roles" else 0
        assert body == {"count": count + new_builtin}, (kind, body, count)

    # Deleted records stay deleted: not found, not listed, and their owner cannot log in.
    for kind, ids in fixture["deleted"].items():
        for record_id in ids:
            status, body = http("GET", f"/v1/internal/{kind}/{record_id}", token=admin)
            assert status == 404, (kind, record_id, body)
    gone = fixture["deleted_user"]
    status, page = http("GET", "/v1/internal/users", token=admin, params={"email": gone["email"]})
    assert status == 200 and page["users"] == [], page
    status, body = http("POST", "/v1/public/users/login",
                        {"email": gone["email"], "password": fixture["passwords"][gone["email"]]})
    assert status == 401, body

    # Decisions hold as recorded.
    for check in fixture["checks"]:
        params = {k: check[k] for k in ("user_uuid", "resource", "action", "group_uuid") if k in check}
        status, body = http("GET", "/v1/internal/authz/check", token=admin, params=params)
        assert status == 200, body
        assert body == {"allowed": check["allowed"]}, check

    # The live login goes on: its stored refresh token is accepted (once), the revoked one is not.
    live = fixture["live_session"]
    token = refresh_token(fixture, live)
    status, body = http("POST", "/v1/public/users/refresh", {"refresh_token": token})
    assert status == 200, body
    assert_same_record(body["user"], users[live["user_uuid"]], "the refreshed login's user")
    status, me = http("GET", "/v1/internal/users/me", token=body["access_token"])
    assert status == 200
    assert_same_record(me, users[live["user_uuid"]], "users/me of the refreshed login")
    status, body = http("POST", "/v1/public/users/refresh", {"refresh_token": token})
    assert status == 401, body  # single use, as in 1.0.0
    status, body = http("POST", "/v1/public/users/refresh",
                        {"refresh_token": refresh_token(fixture, fixture["revoked_session"])})
    assert status == 401, body
    return tokens


def check_writes(http: Http, fixture: dict, tokens: dict[str, str]) -> None:
    """New writes on the upgraded data: ids go on after the release's (sequences and
    auto-increments survived), names and emails of deleted records are free again, the
    admin is still admin and a plain user still is not."""
    users = {user["uuid"]: user for user in fixture["users"]}
    admin = tokens[users[fixture["admin_uuid"]]["email"]]
    plain = tokens[users[fixture["accounts"]["plain"]]["email"]]
    highest = {kind: max([r["id"] for r in fixture[kind]] + fixture["deleted"][kind]) for kind in KINDS}

    gone = fixture["deleted_user"]["email"]
    status, user = http("POST", "/v1/public/users/register", {"name": "Again", "email": gone, "password": "fresh-start-pass-7"})
    assert status == 201, user
    assert user["id"] > highest["users"] and user["uuid"] != fixture["deleted_user"]["uuid"]

    deleted_group = fixture["deleted"]["groups"][0]
    status, group = http("POST", "/v1/private/groups", {"name": "temp"}, token=admin)
    assert status == 201, group
    assert group["id"] > highest["groups"] and group["id"] != deleted_group

    permissions = [{"resource": "reports", "action": "write"}]
    status, body = http("POST", "/v1/private/roles", {"name": "writer", "permissions": permissions}, token=plain)
    assert status == 403, body
    status, role = http("POST", "/v1/private/roles", {"name": "writer", "permissions": permissions}, token=admin)
    assert status == 201, role
    assert role["id"] > highest["roles"]

    status, member = http("POST", "/v1/private/members",
                          {"group_uuid": group["uuid"], "user_uuid": user["uuid"], "role": "auditor"}, token=admin)
    assert status == 201, member
    assert member["id"] > highest["members"]
    status, body = http("GET", "/v1/internal/authz/check", token=admin, params={
        "user_uuid": user["uuid"], "resource": "reports", "action": "read", "group_uuid": group["uuid"]})
    assert (status, body) == (200, {"allowed": True})

    check_audit_trail(http, admin, user, group, member)


def check_audit_trail(http: Http, admin: str, user: dict, group: dict, member: dict) -> None:
    """Step 6 on upgraded data: the writes above are in the audit trail (the 1.0.0 data
    has no events: the trail starts at the upgrade), and a webhook can be subscribed."""
    status, body = http("GET", "/v1/internal/audit", token=admin, params={"limit": "500"})
    assert status == 200, body
    seen = {(event["event"], event["target_uuid"]) for event in body["events"]}
    assert {("user.registered", user["uuid"]), ("group.created", group["uuid"]),
            ("member.added", member["uuid"])} <= seen, seen
    status, hook = http("POST", "/v1/private/webhooks", {"url": "https://example.com/locky", "events": ["user.*"]},
                        token=admin)
    assert status == 201, hook
    status, listed = http("GET", "/v1/internal/webhooks", token=admin)
    assert (status, [item["uuid"] for item in listed["webhooks"]]) == (200, [hook["uuid"]])
