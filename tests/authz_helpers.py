"""Helpers shared by the group, member, role and authorization tests: short calls for
the records they set up through the API, and exact checks of the contract's error
bodies. Every helper goes through HTTP (a ``LockyClient``) and asserts the status it
expects, so a failing setup step fails loudly where it happens.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Iterable

_counter = itertools.count(1)

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
BUILTIN_ROLES = {"admin", "user", "owner", "maintainer", "member", "viewer", "client", "provisioner"}
# A well-formed UUID4 that names nothing.
NOBODY = "00000000-0000-4000-8000-000000000000"


def unique(prefix: str) -> str:
    """A name no other call in this process returns."""
    return f"{prefix}-{next(_counter)}"


def create_group(client, account, name: str | None = None, **fields: Any) -> dict:
    result = client.simulate_post(
        "/v1/private/groups", json={"name": name or unique("group"), **fields}, headers=account.headers
    )
    assert result.status_code == 201, result.text
    return result.json


def add_member(client, account, group: dict, user_uuid: str, role: str | None = None) -> dict:
    payload = {"group_uuid": group["uuid"], "user_uuid": user_uuid}
    if role is not None:
        payload["role"] = role
    result = client.simulate_post("/v1/private/members", json=payload, headers=account.headers)
    assert result.status_code == 201, result.text
    return result.json


def create_role(client, admin, name: str | None = None, permissions: Iterable[tuple[str, str]] = (),
                description: str | None = None) -> dict:
    payload: dict[str, Any] = {
        "name": name or unique("role"),
        "permissions": [{"resource": r, "action": a} for r, a in permissions],
    }
    if description is not None:
        payload["description"] = description
    result = client.simulate_post("/v1/private/roles", json=payload, headers=admin.headers)
    assert result.status_code == 201, result.text
    return result.json


def role_id(client, account, name: str) -> int:
    result = client.simulate_get("/v1/internal/roles", params={"name": name}, headers=account.headers)
    assert result.status_code == 200, result.text
    (role,) = result.json["roles"]
    return role["id"]


def check(client, caller, user_uuid: str, resource: str, action: str, group_uuid: str | None = None) -> bool:
    """What ``GET /v1/internal/authz/check`` answers."""
    params = {"user_uuid": user_uuid, "resource": resource, "action": action}
    if group_uuid is not None:
        params["group_uuid"] = group_uuid
    result = client.simulate_get("/v1/internal/authz/check", params=params, headers=caller.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"allowed"} and isinstance(result.json["allowed"], bool), result.json
    return result.json["allowed"]


def listing(client, account, kind: str, **params: Any) -> list[dict]:
    """Every live record of ``kind`` matching ``params``, following the pages."""
    items: list[dict] = []
    after = 0
    while True:
        result = client.simulate_get(
            f"/v1/internal/{kind}", params={**params, "after_id": after}, headers=account.headers
        )
        assert result.status_code == 200, result.text
        assert set(result.json) == {kind, "next_after_id"}, result.json
        items.extend(result.json[kind])
        after = result.json["next_after_id"]
        if after is None:
            return items


def count(client, account, kind: str, **params: Any) -> int:
    result = client.simulate_get(f"/v1/internal/{kind}/count", params=params, headers=account.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"count"}, result.json
    return result.json["count"]


def assert_error(result, status: int, title: str) -> None:
    """A non-400 error: Falcon's ``{"title", "description"}`` object of strings."""
    assert result.status_code == status, (result.status_code, result.text)
    body = result.json
    assert isinstance(body, dict) and body.get("title") == title, body
    assert set(body) <= {"title", "description"}, body
    assert all(isinstance(v, str) and v for v in body.values()), body


def assert_forbidden(result) -> None:
    assert_error(result, 403, "403 Forbidden")
    assert "description" in result.json, result.json


def assert_not_found(result) -> None:
    assert_error(result, 404, "404 Not Found")


def assert_fields(result, *fields: str, **exact: str) -> dict:
    """A 400 whose body maps exactly these fields (``fields`` with any message,
    ``exact`` with that message) to one non-empty message string each."""
    assert result.status_code == 400, (result.status_code, result.text)
    body = result.json
    assert isinstance(body, dict), body
    assert set(body) == set(fields) | set(exact), body
    assert all(isinstance(v, str) and v for v in body.values()), body
    for name, message in exact.items():
        assert body[name] == message, body
    return body


def member_with_role(server, admin: dict, user_uuid: str, role: str, permission: tuple[str, str],
                     group: str) -> tuple[dict, dict, dict]:
    """On a real server (``support.server``): a custom role ``role`` allowed the one
    ``(resource, action)`` ``permission``, a group ``group``, and ``user_uuid`` a member of
    it with that role. Returns the role, the group and the membership as created."""
    resource, action = permission
    status, _, made_role = server.request("POST", "/v1/private/roles", {
        "name": role, "permissions": [{"resource": resource, "action": action}]}, admin)
    assert status == 201, made_role
    status, _, made_group = server.request("POST", "/v1/private/groups", {"name": group}, admin)
    assert status == 201, made_group
    status, _, member = server.request("POST", "/v1/private/members", {
        "group_uuid": made_group["uuid"], "user_uuid": user_uuid, "role": role}, admin)
    assert status == 201, member
    return made_role, made_group, member


def auditor_in_finance(server, admin: dict, user_uuid: str) -> tuple[dict, str]:
    """:func:`member_with_role`: ``user_uuid`` an ``auditor`` (may read reports) in
    ``finance``. Returns the role and the query string of the authorization check "may
    the user read reports in finance"."""
    role, group, _ = member_with_role(server, admin, user_uuid, "auditor", ("reports", "read"), "finance")
    return role, f"user_uuid={user_uuid}&resource=reports&action=read&group_uuid={group['uuid']}"
