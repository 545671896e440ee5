"""The authorization API for client applications (docs/http/authorization.md), over HTTP:

- ``GET /v1/internal/authz/check?...&explain=true``: ``matched`` (the lines that allowed
  it, empty when denied) and ``roles`` (every role held for the decision, ``user``
  included), with their scopes;
- ``POST /v1/internal/authz/check``: 1-100 checks answered in order, each equal to the
  single check; bad bodies are 400s keyed ``checks`` / ``checks.<index>.<field>``;
- ``GET /v1/internal/authz/permissions``: what a user may do, wildcards as written,
  globally and per group;
- ``GET /v1/internal/authz/subjects``: who may do it, keyset-paged, with ``all_users``;
- 401 without a token, 403 without ``authz`` × ``read``, 400 field maps for bad
  queries, and the Swagger document.

Policy tooling and assignable roles are tested elsewhere.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from locky import hookimpl
from locky.testing import ADMIN_EMAIL, LockyClient

from authz_helpers import (
    NOBODY,
    UUID4,
    add_member,
    assert_error,
    assert_fields,
    assert_forbidden,
    create_group,
    create_role,
)
from authz_helpers import check as decide

CHECK = "/v1/internal/authz/check"
PERMISSIONS = "/v1/internal/authz/permissions"
SUBJECTS = "/v1/internal/authz/subjects"
SHIPPED = Path(__file__).resolve().parents[1] / "policies"

BRACED_UUID = "{abcdef01-abcd-4abc-8abc-abcdef012345}"  # a uuid, but not in the canonical form
USER_GLOBAL = {"role": "user", "scope": "global", "group_uuid": None}
PERMISSION_KEYS = {"resource", "action", "scope", "group_uuid", "via"}
USER_KEYS = {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "email", "email_verified",
             "disabled", "mfa_enabled"}


# -- helpers ----------------------------------------------------------------------------


def explain(client, caller, user_uuid, resource, action, group_uuid=None) -> dict:
    params = {"user_uuid": user_uuid, "resource": resource, "action": action, "explain": "true"}
    if group_uuid is not None:
        params["group_uuid"] = group_uuid
    result = client.simulate_get(CHECK, params=params, headers=caller.headers)
    assert result.status_code == 200, result.text
    body = result.json
    assert set(body) == {"allowed", "matched", "roles"}, body
    assert isinstance(body["allowed"], bool), body
    for item in body["matched"]:
        assert set(item) == {"role", "scope", "group_uuid", "rule"}, item
        assert item["scope"] in ("global", "group", "self"), item
        assert (item["group_uuid"] is not None) == (item["scope"] == "group"), item
        assert item["rule"].startswith("p, "), item
    for item in body["roles"]:
        assert set(item) == {"role", "scope", "group_uuid"}, item
        assert item["scope"] in ("global", "group"), item
        assert (item["group_uuid"] is not None) == (item["scope"] == "group"), item
    return body


def batch(client, caller, checks):
    return client.simulate_post(CHECK, json={"checks": checks}, headers=caller.headers)


def item(user_uuid, resource, action, group_uuid=None) -> dict:
    found = {"user_uuid": user_uuid, "resource": resource, "action": action}
    if group_uuid is not None:
        found["group_uuid"] = group_uuid
    return found


def permissions(client, caller, user_uuid, group_uuid=None) -> list[dict]:
    params = {"user_uuid": user_uuid}
    if group_uuid is not None:
        params["group_uuid"] = group_uuid
    result = client.simulate_get(PERMISSIONS, params=params, headers=caller.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"permissions"}, result.json  # these users are in few groups: one page
    listed = result.json["permissions"]
    assert isinstance(listed, list)
    for entry in listed:
        assert set(entry) == PERMISSION_KEYS, entry
        assert all(isinstance(entry[k], str) and entry[k] for k in ("resource", "action", "via")), entry
        assert entry["scope"] in ("global", "group", "self"), entry
        if entry["scope"] == "group":
            assert UUID4.match(entry["group_uuid"]), entry
        elif entry["scope"] == "global":
            assert entry["group_uuid"] is None, entry
    return listed


def triples(listed: list[dict]) -> set[tuple]:
    return {(p["resource"], p["action"], p["scope"], p["group_uuid"], p["via"]) for p in listed}


def subjects_page(client, caller, resource, action, **params) -> dict:
    result = client.simulate_get(SUBJECTS, params={"resource": resource, "action": action, **params},
                                 headers=caller.headers)
    assert result.status_code == 200, result.text
    body = result.json
    assert set(body) == {"users", "next_after_id", "all_users"}, body
    assert isinstance(body["all_users"], bool), body
    for user in body["users"]:
        assert set(user) == USER_KEYS, user
    ids = [user["id"] for user in body["users"]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
    return body


def subjects(client, caller, resource, action, group_uuid=None, limit=None) -> tuple[list[dict], bool]:
    """Every listed user, following the pages; and ``all_users`` (the same on every page)."""
    params = {}
    if group_uuid is not None:
        params["group_uuid"] = group_uuid
    if limit is not None:
        params["limit"] = limit
    users, after, everyone = [], 0, set()
    while True:
        body = subjects_page(client, caller, resource, action, after_id=after, **params)
        users.extend(body["users"])
        everyone.add(body["all_users"])
        after = body["next_after_id"]
        if after is None:
            break
        assert after == body["users"][-1]["id"], body
    assert len(everyone) == 1, everyone
    return users, everyone.pop()


def uuids(users: list[dict]) -> set[str]:
    return {user["uuid"] for user in users}


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def owner(locky_client):
    return locky_client.account("owner@example.com")


@pytest.fixture
def group(locky_client, owner):
    return create_group(locky_client, owner, "Team")


@pytest.fixture
def other_group(locky_client, owner):
    return create_group(locky_client, owner, "Elsewhere")


@pytest.fixture
def storage(locky_client):
    return locky_client.app.context.storage


@pytest.fixture(params=["paged", "authorizer without holder_sources", "storage without holders_by_id"])
def holder_reads(request, locky_client, monkeypatch):
    """How a page of subjects finds its candidates: storage pages the sources the
    authorizer names (``holder_sources``, the stores' ``holders_by_id``); an authorizer
    or a storage written before them is read whole, with the same answers."""
    context = locky_client.app.context
    if request.param == "authorizer without holder_sources":
        monkeypatch.setattr(context.authorizer, "holder_sources", None, raising=False)
    elif request.param == "storage without holders_by_id":
        for store in (context.storage.grants, context.storage.members):
            monkeypatch.setattr(store, "holders_by_id", None, raising=False)
    return request.param


# -- explain ----------------------------------------------------------------------------


def test_explain_an_allowed_decision_of_the_role_user(locky_client, locky_user):
    body = explain(locky_client, locky_user, locky_user.uuid, "groups", "read")
    assert body["allowed"] is True
    assert body["matched"] == [{"role": "user", "scope": "global", "group_uuid": None,
                                "rule": "p, user, *, groups, read"}]
    assert body["roles"] == [USER_GLOBAL]


def test_explain_a_denied_decision_has_nothing_matched(locky_client, locky_user, owner, group):
    body = explain(locky_client, locky_user, locky_user.uuid, "invoices", "approve")
    assert body == {"allowed": False, "matched": [], "roles": [USER_GLOBAL]}
    # Denied although the user holds a group role there: roles say so, matched stays empty.
    member = locky_client.account("member@example.com")
    add_member(locky_client, owner, group, member.uuid, "member")
    body = explain(locky_client, locky_user, member.uuid, "groups", "update", group["uuid"])
    assert body["allowed"] is False and body["matched"] == []
    assert USER_GLOBAL in body["roles"]
    assert {"role": "member", "scope": "group", "group_uuid": group["uuid"]} in body["roles"]


def test_explain_is_only_added_when_asked(locky_client, locky_user):
    params = {"user_uuid": locky_user.uuid, "resource": "groups", "action": "read"}
    for extra in ({}, {"explain": "false"}):
        result = locky_client.simulate_get(CHECK, params={**params, **extra}, headers=locky_user.headers)
        assert result.status_code == 200 and result.json == {"allowed": True}, result.text


def test_explain_a_membership_role_has_group_scope(locky_client, locky_user, owner, group, other_group):
    g = group["uuid"]
    body = explain(locky_client, locky_user, owner.uuid, "groups", "delete", g)
    assert body["allowed"] is True
    assert body["matched"] == [{"role": "owner", "scope": "group", "group_uuid": g,
                                "rule": "p, owner, *, groups, write"}]
    assert USER_GLOBAL in body["roles"]
    assert {"role": "owner", "scope": "group", "group_uuid": g} in body["roles"]

    maintainer = locky_client.account("maint@example.com")
    add_member(locky_client, owner, group, maintainer.uuid, "maintainer")
    body = explain(locky_client, locky_user, maintainer.uuid, "groups", "update", g)
    assert body["allowed"] is True
    assert body["matched"] == [{"role": "maintainer", "scope": "group", "group_uuid": g,
                                "rule": "p, maintainer, *, groups, update"}]
    assert USER_GLOBAL in body["roles"]
    assert {"role": "maintainer", "scope": "group", "group_uuid": g} in body["roles"]

    # The same question without the group, or in another group: no group role, denied.
    for where in (None, other_group["uuid"], NOBODY):
        body = explain(locky_client, locky_user, maintainer.uuid, "groups", "update", where)
        assert body == {"allowed": False, "matched": [], "roles": [USER_GLOBAL]}, where


def test_explain_an_owner_lists_every_line_that_allows(locky_client, locky_user, owner, group):
    # groups update: the owner's "write" line (update is a kind of write) and the
    # "update" line the owner inherits from maintainer, both in the group.
    g = group["uuid"]
    body = explain(locky_client, locky_user, owner.uuid, "groups", "update", g)
    assert body["allowed"] is True
    assert sorted(body["matched"], key=lambda m: m["rule"]) == [
        {"role": "maintainer", "scope": "group", "group_uuid": g, "rule": "p, maintainer, *, groups, update"},
        {"role": "owner", "scope": "group", "group_uuid": g, "rule": "p, owner, *, groups, write"},
    ]


def test_explain_a_user_line_held_in_a_group_may_show_either_scope(locky_client, locky_user, owner, group):
    body = explain(locky_client, locky_user, owner.uuid, "groups", "read", group["uuid"])
    assert body["allowed"] is True
    assert {"role": "user", "scope": "global", "group_uuid": None, "rule": "p, user, *, groups, read"} \
        in body["matched"]
    assert {m["rule"] for m in body["matched"]} == {"p, user, *, groups, read"}


def test_explain_an_admin(locky_client, locky_user, locky_admin, storage):
    admin_line = {"role": "admin", "scope": "global", "group_uuid": None, "rule": "p, admin, *, *, *"}
    for resource, action in (("roles", "write"), ("invoices", "approve"), ("groups", "read")):
        body = explain(locky_client, locky_user, locky_admin.uuid, resource, action)
        assert body["allowed"] is True
        assert admin_line in body["matched"]
        assert USER_GLOBAL in body["roles"]
        assert {"role": "admin", "scope": "global", "group_uuid": None} in body["roles"]
    # An admin made by `locky grant-admin` (a stored grant) explains the same way.
    granted = locky_client.account("granted@example.com")
    assert explain(locky_client, locky_user, granted.uuid, "roles", "write")["allowed"] is False
    storage.grants.grant(granted.uuid, "admin")
    body = explain(locky_client, locky_user, granted.uuid, "roles", "write")
    assert body["allowed"] is True and body["matched"] == [admin_line]
    assert USER_GLOBAL in body["roles"] and {"role": "admin", "scope": "global", "group_uuid": None} in body["roles"]


def test_explain_a_custom_roles_stored_permission(locky_client, locky_admin, locky_user, owner, group, storage):
    create_role(locky_client, locky_admin, "billing", [("invoices", "approve"), ("reports", "*")])
    clerk = locky_client.account("clerk@example.com")
    add_member(locky_client, owner, group, clerk.uuid, "billing")
    g = group["uuid"]
    body = explain(locky_client, locky_user, clerk.uuid, "invoices", "approve", g)
    assert body["allowed"] is True
    assert body["matched"] == [{"role": "billing", "scope": "group", "group_uuid": g,
                                "rule": "p, billing, *, invoices, approve"}]
    assert USER_GLOBAL in body["roles"]
    assert {"role": "billing", "scope": "group", "group_uuid": g} in body["roles"]
    body = explain(locky_client, locky_user, clerk.uuid, "reports", "export", g)
    assert body["matched"] == [{"role": "billing", "scope": "group", "group_uuid": g,
                                "rule": "p, billing, *, reports, *"}]
    # Outside the group the custom role is not held.
    assert explain(locky_client, locky_user, clerk.uuid, "invoices", "approve") == {
        "allowed": False, "matched": [], "roles": [USER_GLOBAL]}
    # Held globally (a stored grant), it explains with global scope.
    auditor = locky_client.account("auditor@example.com")
    storage.grants.grant(auditor.uuid, "billing")
    body = explain(locky_client, locky_user, auditor.uuid, "invoices", "approve")
    assert body["allowed"] is True
    assert body["matched"] == [{"role": "billing", "scope": "global", "group_uuid": None,
                                "rule": "p, billing, *, invoices, approve"}]
    assert {"role": "billing", "scope": "global", "group_uuid": None} in body["roles"]


def test_explain_unknown_and_deleted_users(locky_client, locky_user, owner, group):
    body = explain(locky_client, locky_user, NOBODY, "groups", "read")
    assert body["allowed"] is False and body["matched"] == []
    gone = locky_client.account("gone@example.com")
    add_member(locky_client, owner, group, gone.uuid, "maintainer")
    assert locky_client.simulate_delete(f"/v1/private/users/{gone.id}", headers=gone.headers).status_code == 204
    for where in (None, group["uuid"]):
        body = explain(locky_client, locky_user, gone.uuid, "groups", "read", where)
        assert body["allowed"] is False and body["matched"] == []


# -- batch ------------------------------------------------------------------------------


def test_batch_answers_in_order_each_equal_to_the_single_check(
        locky_client, locky_user, locky_admin, owner, group, other_group):
    create_role(locky_client, locky_admin, "billing", [("invoices", "approve")])
    clerk = locky_client.account("clerk@example.com")
    add_member(locky_client, owner, group, clerk.uuid, "billing")
    g, elsewhere = group["uuid"], other_group["uuid"]
    checks = [
        item(locky_user.uuid, "groups", "read"),
        item(locky_user.uuid, "groups", "delete"),
        item(owner.uuid, "groups", "delete", g),
        item(owner.uuid, "groups", "delete"),
        item(clerk.uuid, "invoices", "approve", g),
        item(clerk.uuid, "invoices", "approve", elsewhere),
        item(clerk.uuid, "invoices", "approve"),
        item(locky_admin.uuid, "anything", "at:all"),
        item(NOBODY, "groups", "read"),
        item(owner.uuid, "members", "assign:owner", g),
        item(locky_user.uuid, "groups", "read", NOBODY),
        item(clerk.uuid, "invoices", "approve", g),
    ]
    result = batch(locky_client, locky_user, checks)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"results"}
    expected = [decide(locky_client, locky_user, c["user_uuid"], c["resource"], c["action"], c.get("group_uuid"))
                for c in checks]
    assert result.json["results"] == [{"allowed": answer} for answer in expected]
    assert expected == [True, False, True, False, True, False, False, True, False, True, True, True]


def test_batch_of_100_is_answered(locky_client, locky_user, owner, group):
    checks = [item(owner.uuid, "groups", "delete", group["uuid"] if i % 2 else None) for i in range(100)]
    result = batch(locky_client, locky_user, checks)
    assert result.status_code == 200, result.text
    assert result.json["results"] == [{"allowed": bool(i % 2)} for i in range(100)]


def test_batch_of_one_is_answered(locky_client, locky_user):
    result = batch(locky_client, locky_user, [item(locky_user.uuid, "groups", "read")])
    assert result.status_code == 200 and result.json == {"results": [{"allowed": True}]}, result.text


@pytest.mark.parametrize("count", [0, 101, 500])
def test_batch_sizes_outside_1_to_100_are_400_on_checks(locky_client, locky_user, count):
    result = batch(locky_client, locky_user, [item(locky_user.uuid, "groups", "read")] * count)
    assert_fields(result, "checks")


@pytest.mark.parametrize("checks", [{}, "checks", 3, True, None, {"0": {"user_uuid": NOBODY}}])
def test_batch_checks_that_are_not_a_list_are_400_on_checks(locky_client, locky_user, checks):
    result = locky_client.simulate_post(CHECK, json={"checks": checks}, headers=locky_user.headers)
    assert_fields(result, "checks")


def test_batch_without_checks_is_400_on_checks(locky_client, locky_user):
    result = locky_client.simulate_post(CHECK, json={}, headers=locky_user.headers)
    assert_fields(result, "checks")


def test_batch_unknown_top_level_field_is_400(locky_client, locky_user):
    result = locky_client.simulate_post(
        CHECK, json={"checks": [item(locky_user.uuid, "groups", "read")], "explain": True},
        headers=locky_user.headers)
    assert_fields(result, "explain")


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"user_uuid": "nope"}, "checks.3.user_uuid"),
        ({"user_uuid": BRACED_UUID}, "checks.3.user_uuid"),
        ({"user_uuid": 7}, "checks.3.user_uuid"),
        ({"resource": "Groups"}, "checks.3.resource"),
        ({"resource": ""}, "checks.3.resource"),
        ({"resource": "r" * 65}, "checks.3.resource"),
        ({"action": "re ad"}, "checks.3.action"),
        ({"action": ["read"]}, "checks.3.action"),
        ({"group_uuid": "g1"}, "checks.3.group_uuid"),
        ({"group_uuid": 12}, "checks.3.group_uuid"),
        ({"colour": "blue"}, "checks.3.colour"),
        ({"explain": True}, "checks.3.explain"),
    ],
)
def test_batch_an_invalid_item_is_400_keyed_by_index_and_field(locky_client, locky_user, bad, key):
    checks = [item(locky_user.uuid, "groups", "read") for _ in range(6)]
    checks[3] = {**checks[3], **bad}
    result = batch(locky_client, locky_user, checks)
    assert_fields(result, key)


@pytest.mark.parametrize("field", ["user_uuid", "resource", "action"])
def test_batch_a_missing_field_is_400_keyed_by_index_and_field(locky_client, locky_user, field):
    checks = [item(locky_user.uuid, "groups", "read") for _ in range(3)]
    del checks[1][field]
    assert_fields(batch(locky_client, locky_user, checks), f"checks.1.{field}")


def test_batch_the_last_allowed_index_is_named(locky_client, locky_user):
    checks = [item(locky_user.uuid, "groups", "read") for _ in range(100)]
    checks[99] = {**checks[99], "zzz": 1}
    assert_fields(batch(locky_client, locky_user, checks), "checks.99.zzz")


@pytest.mark.parametrize("bad", ["groups", 3, None, ["x"]])
def test_batch_an_item_that_is_not_an_object_is_400_on_its_index(locky_client, locky_user, bad):
    checks = [item(locky_user.uuid, "groups", "read"), bad]
    result = batch(locky_client, locky_user, checks)
    assert result.status_code == 400, result.text
    (key,) = result.json
    assert key == "checks.1" or key.startswith("checks.1."), result.json
    assert isinstance(result.json[key], str) and result.json[key]


def test_batch_body_that_is_not_an_object(locky_client, locky_user):
    result = locky_client.simulate_post(CHECK, json=[item(locky_user.uuid, "groups", "read")],
                                        headers=locky_user.headers)
    assert_fields(result, "body")


def test_batch_body_in_another_content_type_is_415(locky_client, locky_user):
    result = locky_client.simulate_post(CHECK, body='{"checks": []}', headers={
        **locky_user.headers, "Content-Type": "text/plain"})
    assert result.status_code == 415, result.text


def test_batch_unknown_and_deleted_users_are_denied(locky_client, locky_user, owner, group):
    gone = locky_client.account("gone@example.com")
    add_member(locky_client, owner, group, gone.uuid, "owner")
    checks = [item(gone.uuid, "groups", "read"), item(gone.uuid, "groups", "delete", group["uuid"])]
    assert batch(locky_client, locky_user, checks).json == {"results": [{"allowed": True}, {"allowed": True}]}
    assert locky_client.simulate_delete(f"/v1/private/users/{gone.id}", headers=gone.headers).status_code == 204
    checks.append(item(NOBODY, "groups", "read"))
    checks.append(item(locky_user.uuid, "groups", "read"))
    result = batch(locky_client, locky_user, checks)
    assert result.status_code == 200, result.text
    assert result.json == {"results": [{"allowed": False}, {"allowed": False}, {"allowed": False},
                                       {"allowed": True}]}


# -- permissions ------------------------------------------------------------------------


def test_permissions_of_a_plain_user(locky_client, locky_user):
    listed = permissions(locky_client, locky_user, locky_user.uuid)
    found = triples(listed)
    for resource in ("users", "groups", "members", "roles", "authz"):
        assert (resource, "read", "global", None, "user") in found
    assert ("groups", "create", "global", None, "user") in found
    # "self" lines, and the actions that are kinds of write (g2) listed beside write.
    for action in ("write", "create", "update", "delete"):
        assert ("users", action, "self", None, "user") in found
    assert ("members", "delete", "self", None, "user") in found
    assert all(p["scope"] != "group" for p in listed)
    assert not any(p["via"] in ("admin", "owner", "maintainer") for p in listed)


def test_permissions_keep_wildcards_as_written(locky_client, locky_user, locky_admin, owner, group):
    assert ("*", "*", "global", None, "admin") in triples(permissions(locky_client, locky_user, locky_admin.uuid))
    assert ("members", "*", "group", group["uuid"], "owner") in triples(
        permissions(locky_client, locky_user, owner.uuid, group["uuid"]))
    create_role(locky_client, locky_admin, "reader", [("*", "read"), ("reports", "*")])
    reader = locky_client.account("reader@example.com")
    add_member(locky_client, owner, group, reader.uuid, "reader")
    found = triples(permissions(locky_client, locky_user, reader.uuid, group["uuid"]))
    assert ("*", "read", "group", group["uuid"], "reader") in found
    assert ("reports", "*", "group", group["uuid"], "reader") in found


def test_permissions_per_group(locky_client, locky_user, locky_admin, owner, group, other_group):
    create_role(locky_client, locky_admin, "billing", [("invoices", "approve")])
    both = locky_client.account("both@example.com")
    add_member(locky_client, owner, group, both.uuid, "maintainer")
    add_member(locky_client, owner, other_group, both.uuid, "billing")
    g, elsewhere = group["uuid"], other_group["uuid"]
    global_only = {t for t in triples(permissions(locky_client, locky_user, locky_user.uuid))}

    everywhere = triples(permissions(locky_client, locky_user, both.uuid))
    assert ("groups", "update", "group", g, "maintainer") in everywhere
    for action in ("write", "create", "update", "delete", "assign:member"):
        assert ("members", action, "group", g, "maintainer") in everywhere
    assert ("invoices", "approve", "group", elsewhere, "billing") in everywhere
    assert global_only <= everywhere  # what every user may

    in_group = permissions(locky_client, locky_user, both.uuid, g)
    assert {p["group_uuid"] for p in in_group if p["scope"] == "group"} == {g}
    assert ("groups", "update", "group", g, "maintainer") in triples(in_group)
    assert not any(p["via"] == "billing" for p in in_group)
    assert global_only <= triples(in_group)

    in_other = permissions(locky_client, locky_user, both.uuid, elsewhere)
    assert {p["group_uuid"] for p in in_other if p["scope"] == "group"} == {elsewhere}
    assert ("invoices", "approve", "group", elsewhere, "billing") in triples(in_other)
    assert not any(p["via"] == "maintainer" for p in in_other)
    assert global_only <= triples(in_other)

    # A group the user is not in (or no group at all): global rules only.
    for where in (NOBODY, None):
        listed = permissions(locky_client, locky_user, locky_user.uuid, where)
        assert triples(listed) == global_only
    assert not any(p["scope"] == "group" for p in permissions(locky_client, locky_user, owner.uuid, NOBODY))


def test_permissions_of_a_custom_role_held_globally(locky_client, locky_user, locky_admin, storage):
    create_role(locky_client, locky_admin, "auditor", [("reports", "read")])
    auditor = locky_client.account("auditor@example.com")
    storage.grants.grant(auditor.uuid, "auditor")
    assert ("reports", "read", "global", None, "auditor") in triples(
        permissions(locky_client, locky_user, auditor.uuid))


def test_permissions_of_unknown_and_deleted_users_are_empty(locky_client, locky_user, owner, group):
    result = locky_client.simulate_get(PERMISSIONS, params={"user_uuid": NOBODY}, headers=locky_user.headers)
    assert result.status_code == 200 and result.json == {"permissions": []}, result.text
    result = locky_client.simulate_get(PERMISSIONS, params={"user_uuid": NOBODY, "group_uuid": group["uuid"]},
                                       headers=locky_user.headers)
    assert result.status_code == 200 and result.json == {"permissions": []}, result.text
    gone = locky_client.account("gone@example.com")
    assert permissions(locky_client, locky_user, gone.uuid)
    assert locky_client.simulate_delete(f"/v1/private/users/{gone.id}", headers=gone.headers).status_code == 204
    assert permissions(locky_client, locky_user, gone.uuid) == []


# -- subjects ---------------------------------------------------------------------------


def test_subjects_keyset_paging(locky_client, locky_user, locky_admin, storage, holder_reads):
    create_role(locky_client, locky_admin, "auditor", [("reports", "read")])
    auditors = [locky_client.account(f"auditor{i}@example.com") for i in range(7)]
    for account in auditors:
        storage.grants.grant(account.uuid, "auditor")
    expected = sorted([locky_admin.id] + [a.id for a in auditors])

    pages, after = [], 0
    while True:
        body = subjects_page(locky_client, locky_user, "reports", "read", limit=3, after_id=after)
        assert body["all_users"] is False
        pages.append([user["id"] for user in body["users"]])
        if body["next_after_id"] is None:
            break
        assert body["next_after_id"] == body["users"][-1]["id"]
        after = body["next_after_id"]
    assert [len(page) for page in pages] == [3, 3, 2]
    assert [i for page in pages for i in page] == expected

    # after_id in the middle, and past the end.
    body = subjects_page(locky_client, locky_user, "reports", "read", after_id=expected[4])
    assert [u["id"] for u in body["users"]] == expected[5:] and body["next_after_id"] is None
    body = subjects_page(locky_client, locky_user, "reports", "read", after_id=expected[-1])
    assert body["users"] == [] and body["next_after_id"] is None
    # A page exactly as long as what is left ends the listing.
    body = subjects_page(locky_client, locky_user, "reports", "read", limit=len(expected))
    assert [u["id"] for u in body["users"]] == expected and body["next_after_id"] is None
    body = subjects_page(locky_client, locky_user, "reports", "read", limit=len(expected) - 1)
    assert body["next_after_id"] == expected[-2]
    # The listed users are User records, as everywhere else.
    listed = {u["uuid"]: u for u in subjects(locky_client, locky_user, "reports", "read")[0]}
    assert listed[auditors[0].uuid]["email"] == "auditor0@example.com"
    assert listed[locky_admin.uuid]["email_verified"] is True


class _DecisionLog:
    """Hears every decision the app makes (``locky_decision``, docs/hooks.md), and vetoes
    ``reports`` for the users in ``vetoed`` (``locky_check_access``)."""

    def __init__(self):
        self.heard: list[tuple[int, str]] = []
        self.vetoed: set[int] = set()

    @hookimpl
    def locky_check_access(self, context, identity, resource, action, scope):
        return False if resource == "reports" and identity.user.id in self.vetoed else None

    @hookimpl
    def locky_decision(self, context, identity, resource, action, scope, allowed):
        self.heard.append((identity.user.id, resource))


def test_a_subjects_page_decides_only_what_it_walks_past(locky_app_factory):
    """A page of subjects is decided in user id order from its cursor, one candidate at a
    time, and no further than one allowed past the page (docs/http/README.md: a page
    costs the same wherever it is in the list): the holders beyond it are not asked about, however
    many there are. Candidates the decision refuses are walked past and left out."""
    log = _DecisionLog()
    client = LockyClient(locky_app_factory([log]))
    admin = client.account(ADMIN_EMAIL, verified=True)
    caller = client.account("caller@example.com")
    storage = client.app.context.storage
    create_role(client, admin, "auditor", [("reports", "read")])
    auditors = [client.account(f"auditor{i}@example.com") for i in range(12)]
    for account in auditors:
        storage.grants.grant(account.uuid, "auditor")
    log.vetoed = {a.id for a in auditors[1::3]}  # candidates the decision refuses
    candidates = sorted([admin.id] + [a.id for a in auditors])
    allowed = [i for i in candidates if i not in log.vetoed]

    def page(**params) -> tuple[list[int], list[int]]:
        log.heard.clear()
        body = subjects_page(client, caller, "reports", "read", **params)
        return [u["id"] for u in body["users"]], [who for who, resource in log.heard if resource == "reports"]

    def walked(after_id: int, up_to: int) -> list[int]:
        """The candidates after ``after_id`` up to and including the allowed ``up_to``."""
        return [i for i in candidates if after_id < i <= up_to]

    listed, asked = page(limit=3)
    assert listed == allowed[:3]
    assert asked == walked(0, allowed[3])  # the page, and one more to know that another follows
    listed, asked = page(limit=2, after_id=allowed[3])
    assert listed == allowed[4:6] and asked == walked(allowed[3], allowed[6])
    # The last page walks to the end, and says it is the last.
    body = subjects_page(client, caller, "reports", "read", limit=50, after_id=allowed[-3])
    assert [u["id"] for u in body["users"]] == allowed[-2:] and body["next_after_id"] is None
    listed, asked = page(limit=50, after_id=allowed[-3])
    assert asked == [i for i in candidates if i > allowed[-3]]


def test_a_subjects_page_reads_only_what_it_walks_past(locky_client, locky_user, locky_admin, storage,
                                                       monkeypatch):
    """A page reads its candidates from storage a page and one more at a time, by id
    from its cursor (``holders_by_id``), not every holder of the roles that allow it:
    with 30 holders a page of 3 reads 4 of them, and their 4 user records (and the admin's,
    whom the policy names by address)."""
    create_role(locky_client, locky_admin, "auditor", [("reports", "read")])
    auditors = [locky_client.account(f"auditor{i}@example.com") for i in range(30)]
    for account in auditors:
        storage.grants.grant(account.uuid, "auditor")
    ids = sorted([locky_admin.id] + [a.id for a in auditors])
    grants, users = locky_client.app.context.storage.grants, locky_client.app.context.storage.users
    pages, records = [], []
    holders_by_id, get_many = grants.holders_by_id, users.get_many_by_uuid
    monkeypatch.setattr(grants, "holders", lambda role: pytest.fail(f"every holder of {role} read"))
    monkeypatch.setattr(grants, "holders_by_id", lambda *a: pages.append(holders_by_id(*a)) or pages[-1])
    monkeypatch.setattr(users, "get_many_by_uuid", lambda uuids: records.append(list(uuids)) or get_many(records[-1]))

    body = subjects_page(locky_client, locky_user, "reports", "read", limit=3, after_id=ids[10])
    assert [u["id"] for u in body["users"]] == ids[11:14] and body["next_after_id"] == ids[13]
    assert [[i for i, _ in page] for page in pages] == [ids[11:15]]
    assert [len(asked) for asked in records] == [1, 4]  # the admin, named by address; the page's four


def test_subjects_and_permissions_decide_on_the_callers_policy_revision(locky_client, locky_user, locky_admin,
                                                                         storage, monkeypatch):
    """Every decision of a subjects page, and a user's permissions, take the policy
    revision read with the caller's session, as a check does: none asks storage for it
    again (on PostgreSQL and MariaDB that was a round trip per listed user)."""
    create_role(locky_client, locky_admin, "auditor", [("reports", "read")])
    auditors = [locky_client.account(f"auditor{i}@example.com") for i in range(4)]
    for account in auditors:
        storage.grants.grant(account.uuid, "auditor")
    subjects(locky_client, locky_user, "reports", "read")  # the policy snapshot is made
    context_storage = locky_client.app.context.storage
    asked = []
    read = context_storage.revision
    monkeypatch.setattr(context_storage, "revision", lambda: asked.append(1) or read())
    listed, everyone = subjects(locky_client, locky_user, "reports", "read", limit=2)
    assert sorted(u["id"] for u in listed) == sorted([locky_admin.id] + [a.id for a in auditors])
    assert everyone is False
    assert ("reports", "read", "global", None, "auditor") in triples(
        permissions(locky_client, locky_user, auditors[0].uuid))
    assert asked == []


def test_subjects_all_users(locky_client, locky_user, locky_admin):
    users, everyone = subjects(locky_client, locky_user, "groups", "read")
    assert everyone is True
    # Only those with an explicit grant are listed: the admin, not the plain user.
    assert uuids(users) == {locky_admin.uuid}
    users, everyone = subjects(locky_client, locky_user, "groups", "delete")
    assert everyone is False
    assert uuids(users) == {locky_admin.uuid}
    users, everyone = subjects(locky_client, locky_user, "groups", "create")
    assert everyone is True


def test_subjects_in_a_group(locky_client, locky_user, locky_admin, owner, group, other_group, storage, holder_reads):
    roles = {}
    for role in ("maintainer", "member", "viewer"):
        roles[role] = locky_client.account(f"{role}@example.com")
        add_member(locky_client, owner, group, roles[role].uuid, role)
    outsider_owner = locky_client.account("outsider@example.com")
    add_member(locky_client, owner, other_group, outsider_owner.uuid, "owner")
    granted = locky_client.account("granted@example.com")
    storage.grants.grant(granted.uuid, "admin")
    g = group["uuid"]
    admins = {locky_admin.uuid, granted.uuid}

    users, everyone = subjects(locky_client, locky_user, "groups", "delete", g)
    assert everyone is False and uuids(users) == {owner.uuid} | admins
    users, everyone = subjects(locky_client, locky_user, "groups", "update", g)
    assert everyone is False and uuids(users) == {owner.uuid, roles["maintainer"].uuid} | admins
    users, everyone = subjects(locky_client, locky_user, "members", "create", g)
    assert everyone is False and uuids(users) == {owner.uuid, roles["maintainer"].uuid} | admins
    users, everyone = subjects(locky_client, locky_user, "members", "assign:owner", g)
    assert everyone is False and uuids(users) == {owner.uuid} | admins
    # Without the group, membership roles do not count: only global grants.
    users, everyone = subjects(locky_client, locky_user, "groups", "update")
    assert everyone is False and uuids(users) == admins
    # An unknown group has no members: only global grants.
    users, everyone = subjects(locky_client, locky_user, "groups", "delete", NOBODY)
    assert everyone is False and uuids(users) == admins


def test_subjects_custom_role_in_a_group(locky_client, locky_user, locky_admin, owner, group, other_group):
    create_role(locky_client, locky_admin, "billing", [("invoices", "approve")])
    clerk = locky_client.account("clerk@example.com")
    other = locky_client.account("other@example.com")
    add_member(locky_client, owner, group, clerk.uuid, "billing")
    add_member(locky_client, owner, other_group, other.uuid, "billing")
    users, everyone = subjects(locky_client, locky_user, "invoices", "approve", group["uuid"])
    assert everyone is False and uuids(users) == {clerk.uuid, locky_admin.uuid}
    users, everyone = subjects(locky_client, locky_user, "invoices", "approve")
    assert everyone is False and uuids(users) == {locky_admin.uuid}


def test_subjects_leave_out_deleted_users(locky_client, locky_user, locky_admin, owner, group, storage, holder_reads):
    gone = locky_client.account("gone@example.com")
    storage.grants.grant(gone.uuid, "admin")
    maint = locky_client.account("maint@example.com")
    add_member(locky_client, owner, group, maint.uuid, "maintainer")
    users, _ = subjects(locky_client, locky_user, "groups", "update", group["uuid"])
    assert {gone.uuid, maint.uuid} <= uuids(users)
    for account in (gone, maint):
        assert locky_client.simulate_delete(f"/v1/private/users/{account.id}",
                                            headers=account.headers).status_code == 204
    users, _ = subjects(locky_client, locky_user, "groups", "update", group["uuid"])
    assert uuids(users) == {owner.uuid, locky_admin.uuid}


# -- who may ask ------------------------------------------------------------------------


def _requests(user_uuid: str) -> list[tuple[str, str, dict]]:
    """One request of each operation: (method, path, kwargs)."""
    return [
        ("GET", CHECK, {"params": {"user_uuid": user_uuid, "resource": "groups", "action": "read"}}),
        ("GET", CHECK, {"params": {"user_uuid": user_uuid, "resource": "groups", "action": "read",
                                   "explain": "true"}}),
        ("POST", CHECK, {"json": {"checks": [item(user_uuid, "groups", "read")]}}),
        ("GET", PERMISSIONS, {"params": {"user_uuid": user_uuid}}),
        ("GET", SUBJECTS, {"params": {"resource": "groups", "action": "read"}}),
    ]


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic dXNlcjpwYXNz"])
def test_every_operation_needs_a_token(locky_client, locky_user, index, authorization):
    method, path, kwargs = _requests(locky_user.uuid)[index]
    headers = {} if authorization is None else {"Authorization": authorization}
    result = locky_client.simulate_request(method, path, headers=headers, **kwargs)
    assert_error(result, 401, "401 Unauthorized")
    assert result.headers.get("WWW-Authenticate", "").startswith("Bearer"), result.headers


def test_a_caller_without_authz_read_gets_403(tmp_path, locky_app_factory):
    directory = tmp_path / "policy"
    directory.mkdir()
    shutil.copy(SHIPPED / "model.conf", directory / "model.conf")
    text = (SHIPPED / "policy.csv").read_text()
    assert "p, user, *, authz, read\n" in text
    (directory / "policy.csv").write_text(text.replace("p, user, *, authz, read\n", ""))
    client = LockyClient(locky_app_factory(policy_dir=str(directory), log_requests=False))
    plain = client.account("plain@example.com")
    admin = client.account(ADMIN_EMAIL, verified=True)
    for method, path, kwargs in _requests(plain.uuid):
        assert_forbidden(client.simulate_request(method, path, headers=plain.headers, **kwargs))
        # The admin ("*, *") still may; and the answers are about the policy, not the caller.
        result = client.simulate_request(method, path, headers=admin.headers, **kwargs)
        assert result.status_code == 200, (path, result.text)
    assert decide(client, admin, plain.uuid, "authz", "read") is False
    assert decide(client, admin, admin.uuid, "authz", "read") is True


# -- bad queries ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, fields",
    [
        ({"user_uuid": NOBODY, "resource": "groups", "action": "read", "explain": "yes"}, {"explain"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": "read", "explain": "1"}, {"explain"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": "read", "explain": ""}, {"explain"}),
        ({"user_uuid": "x", "resource": "A", "action": "", "explain": "maybe"},
         {"user_uuid", "resource", "action", "explain"}),
        ({"explain": "true"}, {"user_uuid", "resource", "action"}),
    ],
)
def test_bad_check_queries_are_field_maps(locky_client, locky_user, params, fields):
    assert_fields(locky_client.simulate_get(CHECK, params=params, headers=locky_user.headers), *fields)


@pytest.mark.parametrize(
    "params, fields",
    [
        ({}, {"user_uuid"}),
        ({"user_uuid": "me"}, {"user_uuid"}),
        ({"user_uuid": BRACED_UUID}, {"user_uuid"}),
        ({"user_uuid": NOBODY, "group_uuid": "g"}, {"group_uuid"}),
        ({"user_uuid": NOBODY, "group_uuid": ""}, {"group_uuid"}),
        ({"user_uuid": NOBODY, "resource": "groups"}, {"resource"}),
        ({"user_uuid": NOBODY, "limit": "0"}, {"limit"}),
        ({"user_uuid": NOBODY, "limit": "501"}, {"limit"}),
        ({"user_uuid": NOBODY, "after_id": "-1"}, {"after_id"}),
        ({"group_uuid": "g"}, {"user_uuid", "group_uuid"}),
    ],
)
def test_bad_permissions_queries_are_field_maps(locky_client, locky_user, params, fields):
    assert_fields(locky_client.simulate_get(PERMISSIONS, params=params, headers=locky_user.headers), *fields)


@pytest.mark.parametrize(
    "params, fields",
    [
        ({}, {"resource", "action"}),
        ({"resource": "groups"}, {"action"}),
        ({"action": "read"}, {"resource"}),
        ({"resource": "Groups", "action": "read"}, {"resource"}),
        ({"resource": "groups", "action": "re ad"}, {"action"}),
        ({"resource": "groups", "action": "read", "group_uuid": "g"}, {"group_uuid"}),
        ({"resource": "groups", "action": "read", "limit": "0"}, {"limit"}),
        ({"resource": "groups", "action": "read", "limit": "501"}, {"limit"}),
        ({"resource": "groups", "action": "read", "limit": "ten"}, {"limit"}),
        ({"resource": "groups", "action": "read", "limit": "-1"}, {"limit"}),
        ({"resource": "groups", "action": "read", "after_id": "-1"}, {"after_id"}),
        ({"resource": "groups", "action": "read", "after_id": "1.5"}, {"after_id"}),
        ({"resource": "groups", "action": "read", "user_uuid": NOBODY}, {"user_uuid"}),
        ({"resource": "groups", "action": "read", "limit": "0", "after_id": "x"}, {"limit", "after_id"}),
    ],
)
def test_bad_subjects_queries_are_field_maps(locky_client, locky_user, params, fields):
    assert_fields(locky_client.simulate_get(SUBJECTS, params=params, headers=locky_user.headers), *fields)


def test_subjects_limit_bounds_are_accepted(locky_client, locky_user):
    for limit in ("1", "500"):
        body = subjects_page(locky_client, locky_user, "groups", "read", limit=limit)
        assert body["all_users"] is True


# -- the Swagger document ---------------------------------------------------------------


@pytest.fixture
def doc(locky_client):
    result = locky_client.simulate_get("/swagger/doc.json")
    assert result.status_code == 200, result.text
    return result.json


def _resolve(doc, schema):
    ref = schema.get("$ref")
    if ref:
        assert ref.startswith("#/definitions/"), ref
        return doc["definitions"][ref.split("/")[-1]]
    return schema


def _properties(doc, ref_schema) -> dict:
    return _resolve(doc, ref_schema)["properties"]


def _parameters(operation) -> dict:
    return {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}


def test_swagger_lists_the_authz_operations(doc):
    base = doc.get("basePath", "")
    paths = {base + path: value for path, value in doc["paths"].items()}
    check, perms, subs = paths[CHECK], paths[PERMISSIONS], paths[SUBJECTS]
    assert {"get", "post"} <= set(check) and "get" in perms and "get" in subs
    for operation in (check["get"], check["post"], perms["get"], subs["get"]):
        assert operation.get("security"), operation
        assert {"200", "400", "401", "403"} <= set(operation["responses"]), operation["responses"]

    # GET check: the query, explain included; the explained answer.
    query = _parameters(check["get"])
    assert {"user_uuid", "resource", "action", "group_uuid", "explain"} <= set(query)
    assert query["user_uuid"]["required"] is True and query["group_uuid"].get("required") is not True
    assert query["explain"]["type"] == "boolean"
    answer = _properties(doc, check["get"]["responses"]["200"]["schema"])
    assert {"allowed", "matched", "roles"} <= set(answer)
    matched = _resolve(doc, answer["matched"]["items"])["properties"]
    assert set(matched) == {"role", "scope", "group_uuid", "rule"}
    roles = _resolve(doc, answer["roles"]["items"])["properties"]
    assert set(roles) == {"role", "scope", "group_uuid"}

    # POST check: the body of 1-100 items, the answers.
    (body,) = [p for p in check["post"]["parameters"] if p["in"] == "body"]
    batch_schema = _resolve(doc, body["schema"])
    assert "checks" in batch_schema.get("required", [])
    checks = batch_schema["properties"]["checks"]
    assert checks["type"] == "array" and checks.get("minItems") == 1 and checks.get("maxItems") == 100
    item_schema = _resolve(doc, checks["items"])
    assert set(item_schema["properties"]) == {"user_uuid", "resource", "action", "group_uuid"}
    assert set(item_schema.get("required", [])) == {"user_uuid", "resource", "action"}
    results = _properties(doc, check["post"]["responses"]["200"]["schema"])["results"]
    assert results["type"] == "array"
    assert "allowed" in _resolve(doc, results["items"])["properties"]

    # GET permissions.
    query = _parameters(perms["get"])
    assert set(query) == {"user_uuid", "group_uuid", "limit", "after_id"} and query["user_uuid"]["required"] is True
    answer = _properties(doc, perms["get"]["responses"]["200"]["schema"])
    assert set(answer) == {"permissions", "next_after_id"}
    listed = answer["permissions"]
    assert set(_resolve(doc, listed["items"])["properties"]) == PERMISSION_KEYS

    # GET subjects: keyset paging like every list.
    query = _parameters(subs["get"])
    assert {"resource", "action", "group_uuid", "limit", "after_id"} <= set(query)
    assert query["resource"]["required"] is True and query["action"]["required"] is True
    answer = _properties(doc, subs["get"]["responses"]["200"]["schema"])
    assert set(answer) == {"users", "next_after_id", "all_users"}
    assert answer["all_users"]["type"] == "boolean"
    assert _resolve(doc, answer["users"]["items"]) is doc["definitions"]["User"] or \
        answer["users"]["items"].get("$ref") == "#/definitions/User"
