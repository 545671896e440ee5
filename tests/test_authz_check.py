"""``GET /v1/internal/authz/check``: the policy decision for any user, with and without
a group, for Locky's own resources and for free-string resources of client
applications granted through custom roles; decisions follow deletions and role
changes at once; a bad query is a 400 field map (docs/http/README.md and docs/http/authorization.md)."""

from __future__ import annotations

import pytest

from authz_helpers import (
    NOBODY,
    add_member,
    assert_error,
    assert_fields,
    create_group,
    create_role,
)
from authz_helpers import check as decide

CHECK = "/v1/internal/authz/check"


@pytest.fixture
def owner(locky_client):
    return locky_client.account("owner@example.com")


@pytest.fixture
def group(locky_client, owner):
    return create_group(locky_client, owner, "Team")


@pytest.fixture
def other_group(locky_client, owner):
    return create_group(locky_client, owner, "Elsewhere")


def test_plain_user_decisions(locky_client, locky_user):
    def check(resource, action):
        return decide(locky_client, locky_user, locky_user.uuid, resource, action)

    for resource in ("users", "groups", "members", "roles", "authz"):
        assert check(resource, "read") is True
    assert check("groups", "create") is True
    for resource, action in (("groups", "update"), ("groups", "delete"), ("groups", "write"),
                             ("members", "create"), ("roles", "create"), ("roles", "write"),
                             ("users", "write"), ("users", "delete"), ("invoices", "read"), ("*", "*")):
        assert check(resource, action) is False, (resource, action)


def test_admin_is_allowed_everything(locky_client, locky_user, locky_admin):
    # Asked by a plain user about the admin: the answer is the admin's.
    for resource, action in (("roles", "write"), ("users", "delete"), ("invoices", "approve"), ("x", "y")):
        assert decide(locky_client, locky_user, locky_admin.uuid, resource, action) is True


def test_group_roles_apply_with_their_group_only(locky_client, owner, group, other_group, locky_user):
    maintainer = locky_client.account("maint@example.com")
    member = locky_client.account("member@example.com")
    add_member(locky_client, owner, group, maintainer.uuid, "maintainer")
    add_member(locky_client, owner, group, member.uuid, "member")
    g, elsewhere = group["uuid"], other_group["uuid"]

    def check(who, resource, action, group_uuid=g):
        return decide(locky_client, locky_user, who.uuid, resource, action, group_uuid)

    assert check(owner, "groups", "delete") and check(owner, "groups", "update") and check(owner, "members", "create")
    assert check(maintainer, "groups", "update") and check(maintainer, "members", "delete")
    assert not check(maintainer, "groups", "delete")
    assert not check(member, "groups", "update") and not check(member, "members", "create")
    assert check(member, "groups", "read")  # what every user may, in any group
    # Without the group, or in a group where the role is not held, the role is not there.
    assert not check(owner, "groups", "delete", None)
    assert not check(maintainer, "groups", "update", None)
    assert not check(maintainer, "groups", "update", elsewhere)
    # An unknown group holds no roles.
    assert not check(owner, "groups", "delete", NOBODY)


def test_client_application_resources_through_custom_roles(locky_client, locky_admin, owner, group, other_group):
    create_role(locky_client, locky_admin, "approver",
                [("invoices", "approve"), ("docs", "*"), ("billing.reports", "export:csv")])
    clerk = locky_client.account("clerk@example.com")
    add_member(locky_client, locky_admin, group, clerk.uuid, "approver")
    g = group["uuid"]

    def check(resource, action, group_uuid=g):
        return decide(locky_client, owner, clerk.uuid, resource, action, group_uuid)

    assert check("invoices", "approve") is True
    assert check("docs", "read") is True and check("docs", "publish") is True
    assert check("billing.reports", "export:csv") is True
    assert check("invoices", "read") is False
    assert check("invoices", "approve:all") is False
    assert check("invoice", "approve") is False
    assert check("billing.reports", "export") is False
    assert check("invoices", "approve", None) is False
    assert check("invoices", "approve", other_group["uuid"]) is False
    # The owner of the same group does not hold the custom role.
    assert decide(locky_client, owner, owner.uuid, "invoices", "approve", g) is False


def test_write_covers_create_update_delete_for_any_resource(locky_client, locky_admin, owner, group):
    create_role(locky_client, locky_admin, "docwriter", [("docs", "write")])
    writer = locky_client.account("writer@example.com")
    add_member(locky_client, locky_admin, group, writer.uuid, "docwriter")
    for action, allowed in (("create", True), ("update", True), ("delete", True), ("write", True),
                            ("read", False), ("publish", False)):
        assert decide(locky_client, owner, writer.uuid, "docs", action, group["uuid"]) is allowed, action


def test_wildcard_resource_role(locky_client, locky_admin, owner, group):
    create_role(locky_client, locky_admin, "reader", [("*", "read")])
    reader = locky_client.account("reader@example.com")
    add_member(locky_client, locky_admin, group, reader.uuid, "reader")
    assert decide(locky_client, owner, reader.uuid, "anything", "read", group["uuid"]) is True
    assert decide(locky_client, owner, reader.uuid, "anything", "write", group["uuid"]) is False


def test_decisions_follow_role_changes_at_once(locky_client, locky_admin, owner, group):
    role = create_role(locky_client, locky_admin, "approver", [("invoices", "approve")])
    clerk = locky_client.account("clerk@example.com")
    args = (locky_client, owner, clerk.uuid, "invoices", "approve", group["uuid"])
    assert decide(*args) is False
    membership = add_member(locky_client, locky_admin, group, clerk.uuid, "approver")
    assert decide(*args) is True
    url = f"/v1/private/roles/{role['id']}"
    h = locky_admin.headers
    assert locky_client.simulate_put(url, json={"permissions": []}, headers=h).status_code == 200
    assert decide(*args) is False
    assert locky_client.simulate_put(url, json={"permissions": [{"resource": "invoices", "action": "*"}]},
                                     headers=h).status_code == 200
    assert decide(*args) is True
    assert locky_client.simulate_delete(f"/v1/private/members/{membership['id']}",
                                        headers=owner.headers).status_code == 204
    assert decide(*args) is False
    assert locky_client.simulate_delete(url, headers=h).status_code == 204
    # A new role of the same name starts from its own permissions, not the old ones.
    create_role(locky_client, locky_admin, "approver", [("invoices", "read")])
    add_member(locky_client, locky_admin, group, clerk.uuid, "approver")
    assert decide(*args) is False
    assert decide(locky_client, owner, clerk.uuid, "invoices", "read", group["uuid"]) is True


def test_deleted_users_are_allowed_nothing(locky_client, locky_admin, owner, group, locky_user):
    friend = locky_client.account("friend@example.com")
    add_member(locky_client, owner, group, friend.uuid, "maintainer")
    assert decide(locky_client, locky_user, friend.uuid, "groups", "update", group["uuid"]) is True
    assert decide(locky_client, locky_user, friend.uuid, "groups", "read") is True
    assert locky_client.simulate_delete(f"/v1/private/users/{friend.id}", headers=friend.headers).status_code == 204
    assert decide(locky_client, locky_user, friend.uuid, "groups", "update", group["uuid"]) is False
    assert decide(locky_client, locky_user, friend.uuid, "groups", "read") is False
    # Even the admin, once deleted.
    assert locky_client.simulate_delete(f"/v1/private/users/{locky_admin.id}",
                                        headers=locky_admin.headers).status_code == 204
    assert decide(locky_client, locky_user, locky_admin.uuid, "roles", "write") is False


def test_unknown_users_are_allowed_nothing(locky_client, locky_user):
    assert decide(locky_client, locky_user, NOBODY, "groups", "read") is False


def test_deleted_groups_and_memberships_give_nothing(locky_client, owner, group, other_group, locky_user):
    friend = locky_client.account("friend@example.com")
    membership = add_member(locky_client, owner, other_group, friend.uuid, "owner")
    assert decide(locky_client, locky_user, friend.uuid, "groups", "delete", other_group["uuid"]) is True
    assert locky_client.simulate_delete(f"/v1/private/members/{membership['id']}",
                                        headers=owner.headers).status_code == 204
    assert decide(locky_client, locky_user, friend.uuid, "groups", "delete", other_group["uuid"]) is False

    assert decide(locky_client, locky_user, owner.uuid, "groups", "delete", group["uuid"]) is True
    assert locky_client.simulate_delete(f"/v1/private/groups/{group['id']}", headers=owner.headers).status_code == 204
    assert decide(locky_client, locky_user, owner.uuid, "groups", "delete", group["uuid"]) is False
    assert decide(locky_client, locky_user, owner.uuid, "groups", "delete", other_group["uuid"]) is True


def test_check_needs_a_token(locky_client, locky_user):
    result = locky_client.simulate_get(CHECK, params={"user_uuid": locky_user.uuid, "resource": "groups",
                                                      "action": "read"})
    assert_error(result, 401, "401 Unauthorized")


@pytest.mark.parametrize(
    "params, fields",
    [
        ({}, {"user_uuid", "resource", "action"}),
        ({"resource": "groups", "action": "read"}, {"user_uuid"}),
        ({"user_uuid": "me", "resource": "groups", "action": "read"}, {"user_uuid"}),
        ({"user_uuid": NOBODY, "action": "read"}, {"resource"}),
        ({"user_uuid": NOBODY, "resource": "groups"}, {"action"}),
        ({"user_uuid": NOBODY, "resource": "Groups", "action": "read"}, {"resource"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": "re ad"}, {"action"}),
        ({"user_uuid": NOBODY, "resource": "g" * 65, "action": "read"}, {"resource"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": ""}, {"action"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": "read", "group_uuid": "g1"}, {"group_uuid"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": "read", "group_uuid": ""}, {"group_uuid"}),
        ({"user_uuid": NOBODY, "resource": "groups", "action": "read", "as": "admin"}, {"as"}),
    ],
)
def test_bad_queries_are_field_maps(locky_client, locky_user, params, fields):
    assert_fields(locky_client.simulate_get(CHECK, params=params, headers=locky_user.headers), *fields)


def test_repeated_parameters_are_rejected(locky_client, locky_user):
    query = f"user_uuid={locky_user.uuid}&resource=groups&resource=roles&action=read"
    result = locky_client.simulate_get(CHECK, query_string=query, headers=locky_user.headers)
    assert_fields(result, "resource")
