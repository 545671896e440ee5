"""Roles over HTTP: the built-in roles come from the policy files and are read-only;
custom roles are created, listed, filtered, updated and soft-deleted by an admin,
with the name and permission formats of docs/http/records.md and the rule that a
role held by a live membership cannot be deleted (section 6)."""

from __future__ import annotations

import pytest

from authz_helpers import (
    BUILTIN_ROLES,
    NOBODY,
    TIMESTAMP,
    UUID4,
    add_member,
    assert_fields,
    assert_not_found,
    count,
    create_group,
    create_role,
    listing,
    role_id,
)

ROLES = "/v1/private/roles"


def perms(*pairs):
    return [{"resource": r, "action": a} for r, a in pairs]


# -- built-in roles ----------------------------------------------------------


def test_builtin_roles_are_listed_from_the_policy_files(locky_client, locky_user):
    roles = {r["name"]: r for r in listing(locky_client, locky_user, "roles")}
    assert set(roles) == BUILTIN_ROLES
    assert all(r["builtin"] is True and r["deleted_at"] is None for r in roles.values())
    assert all(UUID4.match(r["uuid"]) and TIMESTAMP.match(r["created_at"]) for r in roles.values())
    # Permissions are the roles' own "*"-scope lines of policies/policy.csv.
    assert roles["admin"]["permissions"] == perms(("*", "*"))
    # ... with the assignable roles of docs/http/authorization.md (members, assign:ROLE).
    assert roles["owner"]["permissions"] == perms(("groups", "write"), ("members", "*"))
    assert roles["maintainer"]["permissions"] == perms(
        ("groups", "update"), ("members", "write"), ("members", "assign:maintainer"), ("members", "assign:member"),
        ("members", "assign:viewer"), ("members", "assign:custom"))
    assert roles["member"]["permissions"] == [] and roles["viewer"]["permissions"] == []
    assert {(p["resource"], p["action"]) for p in roles["user"]["permissions"]} == {
        ("users", "read"), ("groups", "read"), ("members", "read"), ("roles", "read"), ("authz", "read"),
        ("keys", "read"), ("tokens", "introspect"),
        ("groups", "create"),
    }
    # Descriptions are the "# role NAME: TEXT" comments.
    assert roles["admin"]["description"] == "Everything, everywhere."
    assert roles["viewer"]["description"].startswith("Sees a group")
    assert count(locky_client, locky_user, "roles") == len(BUILTIN_ROLES)


def test_builtin_roles_are_not_duplicated_by_a_restart(locky_settings, locky_client, locky_user):
    from locky.app import create_app

    create_app(locky_settings).close()  # a second start on the same database
    assert count(locky_client, locky_user, "roles") == len(BUILTIN_ROLES)
    assert [r["name"] for r in listing(locky_client, locky_user, "roles", name="owner")] == ["owner"]


@pytest.mark.parametrize("name", sorted(BUILTIN_ROLES))
def test_builtin_roles_cannot_be_changed_or_deleted(locky_client, locky_admin, name):
    rid = role_id(locky_client, locky_admin, name)
    before = locky_client.simulate_get(f"/v1/internal/roles/{rid}", headers=locky_admin.headers).json
    for payload in ({"description": "mine now"}, {"permissions": []}, {"name": "renamed"}, {}):
        result = locky_client.simulate_put(f"{ROLES}/{rid}", json=payload, headers=locky_admin.headers)
        assert_fields(result, name="Built-in roles cannot be changed.")
    assert_fields(locky_client.simulate_delete(f"{ROLES}/{rid}", headers=locky_admin.headers),
                  name="Built-in roles cannot be deleted.")
    after = locky_client.simulate_get(f"/v1/internal/roles/{rid}", headers=locky_admin.headers).json
    assert after == before


def test_a_builtin_name_cannot_be_taken(locky_client, locky_admin):
    for name in sorted(BUILTIN_ROLES):
        result = locky_client.simulate_post(ROLES, json={"name": name}, headers=locky_admin.headers)
        assert_fields(result, name="Already exists.")
    assert count(locky_client, locky_admin, "roles") == len(BUILTIN_ROLES)


# -- custom roles: create ----------------------------------------------------


def test_create_returns_201_the_role_and_its_location(locky_client, locky_admin):
    payload = {"name": "auditor", "description": "Reads the audit log",
               "permissions": perms(("audit", "read"), ("groups", "write"))}
    result = locky_client.simulate_post(ROLES, json=payload, headers=locky_admin.headers)
    assert result.status_code == 201, result.text
    role = result.json
    assert set(role) == {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "description",
                         "permissions", "builtin"}
    assert (role["name"], role["description"], role["builtin"], role["deleted_at"]) == (
        "auditor", "Reads the audit log", False, None)
    assert role["permissions"] == payload["permissions"]
    assert result.headers["location"] == f"/v1/internal/roles/{role['id']}"
    assert locky_client.simulate_get(result.headers["location"], headers=locky_admin.headers).json == role
    assert listing(locky_client, locky_admin, "roles", name="auditor") == [role]
    assert count(locky_client, locky_admin, "roles") == len(BUILTIN_ROLES) + 1


def test_description_and_permissions_default_to_empty(locky_client, locky_admin):
    role = create_role(locky_client, locky_admin, "bare")
    assert (role["description"], role["permissions"]) == ("", [])


def test_repeated_permissions_are_stored_once(locky_client, locky_admin):
    role = create_role(locky_client, locky_admin, "dup", [("docs", "read"), ("docs", "read"), ("docs", "write")])
    assert role["permissions"] == perms(("docs", "read"), ("docs", "write"))


def test_builtin_flag_in_a_request_is_ignored(locky_client, locky_admin):
    result = locky_client.simulate_post(
        ROLES, json={"name": "sneaky", "builtin": True, "id": 1, "uuid": NOBODY}, headers=locky_admin.headers
    )
    assert result.status_code == 201
    assert result.json["builtin"] is False and result.json["uuid"] != NOBODY
    rid = result.json["id"]
    updated = locky_client.simulate_put(f"{ROLES}/{rid}", json={"builtin": True}, headers=locky_admin.headers)
    assert updated.status_code == 200 and updated.json["builtin"] is False
    assert locky_client.simulate_delete(f"{ROLES}/{rid}", headers=locky_admin.headers).status_code == 204


def test_name_is_unique_among_live_roles(locky_client, locky_admin):
    first = create_role(locky_client, locky_admin, "ops")
    assert_fields(locky_client.simulate_post(ROLES, json={"name": "ops"}, headers=locky_admin.headers),
                  name="Already exists.")
    assert locky_client.simulate_delete(f"{ROLES}/{first['id']}", headers=locky_admin.headers).status_code == 204
    again = create_role(locky_client, locky_admin, "ops", [("x", "y")])
    assert again["id"] != first["id"]
    assert listing(locky_client, locky_admin, "roles", name="ops") == [again]


@pytest.mark.parametrize("name", ["a", "a" * 64, "x_y-1", "data-team_2", "z9"])
def test_valid_role_names(locky_client, locky_admin, name):
    assert create_role(locky_client, locky_admin, name)["name"] == name


@pytest.mark.parametrize("name", ["", "1abc", "_abc", "-abc", "Abc", "abC", "a" * 65, "a b", "a.b", "a:b",
                                  "caf\u00e9", "a\n", 5, None])
def test_invalid_role_names(locky_client, locky_admin, name):
    result = locky_client.simulate_post(ROLES, json={"name": name}, headers=locky_admin.headers)
    assert_fields(result, "name")
    assert count(locky_client, locky_admin, "roles") == len(BUILTIN_ROLES)


def test_a_role_name_may_not_have_the_shape_of_a_uuid(locky_client, locky_admin, locky_user):
    # User uuids are policy subjects: a role named like one would grant that user its
    # permissions everywhere instead of within the groups where it is held.
    uuid = "f2418b48-ce05-4f7e-a2ed-7c855c3526e0"
    result = locky_client.simulate_post(ROLES, json={"name": uuid, "permissions": perms(("roles", "write"))},
                                        headers=locky_admin.headers)
    assert_fields(result, "name")
    role = create_role(locky_client, locky_admin, "plain")
    assert_fields(locky_client.simulate_put(f"{ROLES}/{role['id']}", json={"name": uuid},
                                            headers=locky_admin.headers), "name")
    # Hex words that are not UUIDs are fine, and so is the shape of a uuid no user has:
    # every user's uuid is a UUID4 (docs/http/README.md#bodies), and this one's version is 1.
    assert create_role(locky_client, locky_admin, "deadbeef")["name"] == "deadbeef"
    not_v4 = "f2418b48-ce05-1f7e-a2ed-7c855c3526e0"
    assert create_role(locky_client, locky_admin, not_v4)["name"] == not_v4


@pytest.mark.parametrize("part", ["*", "docs", "docs:read", "a.b_c-d:*", "x" * 64, "*:*", "app.v2"])
def test_valid_permission_parts(locky_client, locky_admin, part):
    role = create_role(locky_client, locky_admin, permissions=[(part, part)])
    assert role["permissions"] == perms((part, part))


@pytest.mark.parametrize("part", ["", "Docs", "-x", "1x", ".x", "a/b", "a b", "x" * 65, "caf\u00e9", "a\u0000", "docs\n"])
def test_invalid_permission_parts(locky_client, locky_admin, part):
    for permission in ({"resource": part, "action": "read"}, {"resource": "docs", "action": part}):
        result = locky_client.simulate_post(ROLES, json={"name": "p", "permissions": [permission]},
                                            headers=locky_admin.headers)
        assert_fields(result, "permissions")
    assert count(locky_client, locky_admin, "roles", name="p") == 0


@pytest.mark.parametrize(
    "permissions",
    [
        [{"resource": "docs"}],
        [{"action": "read"}],
        [{"resource": "docs", "action": "read", "scope": "all"}],
        ["docs:read"],
        {"resource": "docs", "action": "read"},
        "docs",
        [{"resource": 1, "action": "read"}],
    ],
)
def test_malformed_permission_lists(locky_client, locky_admin, permissions):
    result = locky_client.simulate_post(ROLES, json={"name": "p", "permissions": permissions},
                                        headers=locky_admin.headers)
    assert_fields(result, "permissions")


def test_unknown_fields_are_rejected(locky_client, locky_admin):
    result = locky_client.simulate_post(ROLES, json={"name": "p", "inherits": "admin"}, headers=locky_admin.headers)
    assert_fields(result, inherits="Unknown field.")
    assert_fields(locky_client.simulate_post(ROLES, json={"name": "p", "description": "x" * 1025},
                                             headers=locky_admin.headers), "description")


# -- custom roles: update ----------------------------------------------------


def test_update_changes_only_the_fields_given(locky_client, locky_admin):
    role = create_role(locky_client, locky_admin, "editor", [("docs", "read")], description="Edits")
    url = f"{ROLES}/{role['id']}"
    result = locky_client.simulate_put(url, json={"permissions": perms(("docs", "write"), ("docs", "read"))},
                                       headers=locky_admin.headers)
    assert result.status_code == 200, result.text
    assert result.json["permissions"] == perms(("docs", "write"), ("docs", "read"))
    assert (result.json["name"], result.json["description"]) == ("editor", "Edits")
    assert result.json["updated_at"] > role["updated_at"] and result.json["created_at"] == role["created_at"]

    result = locky_client.simulate_put(url, json={"description": "", "name": "writer"}, headers=locky_admin.headers)
    assert (result.json["name"], result.json["description"]) == ("writer", "")
    assert result.json["permissions"] == perms(("docs", "write"), ("docs", "read"))
    result = locky_client.simulate_put(url, json={"permissions": []}, headers=locky_admin.headers)
    assert result.json["permissions"] == []
    assert locky_client.simulate_get(f"/v1/internal/roles/{role['id']}", headers=locky_admin.headers).json == result.json
    assert listing(locky_client, locky_admin, "roles", name="editor") == []


def test_update_validates_like_create(locky_client, locky_admin):
    create_role(locky_client, locky_admin, "taken")
    role = create_role(locky_client, locky_admin, "mine")
    url = f"{ROLES}/{role['id']}"
    h = locky_admin.headers
    assert_fields(locky_client.simulate_put(url, json={"name": "taken"}, headers=h), name="Already exists.")
    assert_fields(locky_client.simulate_put(url, json={"name": "admin"}, headers=h), name="Already exists.")
    assert_fields(locky_client.simulate_put(url, json={"name": "Bad Name"}, headers=h), "name")
    assert_fields(locky_client.simulate_put(url, json={"permissions": perms(("Docs", "read"))}, headers=h),
                  "permissions")
    assert_fields(locky_client.simulate_put(url, json={"color": "red"}, headers=h), color="Unknown field.")
    assert locky_client.simulate_get(f"/v1/internal/roles/{role['id']}", headers=h).json == role


def test_a_held_role_cannot_be_renamed(locky_client, locky_admin, locky_user):
    role = create_role(locky_client, locky_admin, "held")
    group = create_group(locky_client, locky_user)
    add_member(locky_client, locky_user, group, locky_admin.uuid, "held")
    url = f"{ROLES}/{role['id']}"
    assert_fields(locky_client.simulate_put(url, json={"name": "renamed"}, headers=locky_admin.headers), "name")
    # Its permissions and description may change.
    result = locky_client.simulate_put(url, json={"description": "still held", "name": "held"},
                                       headers=locky_admin.headers)
    assert result.status_code == 200 and result.json["description"] == "still held"


# -- custom roles: delete ----------------------------------------------------


def test_delete_is_soft_and_hides_the_role(locky_client, locky_admin):
    role = create_role(locky_client, locky_admin, "gone", [("docs", "read")])
    url = f"{ROLES}/{role['id']}"
    result = locky_client.simulate_delete(url, headers=locky_admin.headers)
    assert result.status_code == 204 and result.text == ""
    h = locky_admin.headers
    assert_not_found(locky_client.simulate_get(f"/v1/internal/roles/{role['id']}", headers=h))
    assert_not_found(locky_client.simulate_put(url, json={"description": "x"}, headers=h))
    assert_not_found(locky_client.simulate_delete(url, headers=h))
    assert listing(locky_client, locky_admin, "roles", name="gone") == []
    assert count(locky_client, locky_admin, "roles", name="gone") == 0
    assert {r["name"] for r in listing(locky_client, locky_admin, "roles")} == BUILTIN_ROLES


def test_a_role_held_by_a_live_membership_cannot_be_deleted(locky_client, locky_admin, locky_user):
    role = create_role(locky_client, locky_admin, "held")
    url = f"{ROLES}/{role['id']}"
    group = create_group(locky_client, locky_user)
    other = create_group(locky_client, locky_user)
    friend = locky_client.account("friend@example.com")
    first = add_member(locky_client, locky_user, group, friend.uuid, "held")
    add_member(locky_client, locky_user, other, friend.uuid, "held")

    assert_fields(locky_client.simulate_delete(url, headers=locky_admin.headers), "name")
    # One membership removed, the other still holds it.
    assert locky_client.simulate_delete(f"/v1/private/members/{first['id']}", headers=locky_user.headers).status_code == 204
    assert_fields(locky_client.simulate_delete(url, headers=locky_admin.headers), "name")
    # Deleting the group ends the last membership (soft), which no longer holds it.
    assert locky_client.simulate_delete(f"/v1/private/groups/{other['id']}", headers=locky_user.headers).status_code == 204
    assert locky_client.simulate_delete(url, headers=locky_admin.headers).status_code == 204


def test_a_deleted_users_membership_does_not_hold_a_role(locky_client, locky_admin, locky_user):
    role = create_role(locky_client, locky_admin, "held")
    group = create_group(locky_client, locky_user)
    friend = locky_client.account("friend@example.com")
    add_member(locky_client, locky_user, group, friend.uuid, "held")
    url = f"{ROLES}/{role['id']}"
    assert_fields(locky_client.simulate_delete(url, headers=locky_admin.headers), "name")
    assert locky_client.simulate_delete(f"/v1/private/users/{friend.id}", headers=friend.headers).status_code == 204
    assert locky_client.simulate_delete(url, headers=locky_admin.headers).status_code == 204


# -- reads -------------------------------------------------------------------


def test_list_pages_and_counts_custom_and_builtin_roles(locky_client, locky_admin, locky_user):
    custom = [create_role(locky_client, locky_admin, f"r{i}") for i in range(3)]
    everything = listing(locky_client, locky_user, "roles")
    assert [r["id"] for r in everything] == sorted(r["id"] for r in everything)
    assert [r["name"] for r in everything[-3:]] == ["r0", "r1", "r2"]
    page = locky_client.simulate_get("/v1/internal/roles", params={"limit": 4}, headers=locky_user.headers).json
    assert len(page["roles"]) == 4 and page["next_after_id"] == page["roles"][-1]["id"]
    rest = locky_client.simulate_get("/v1/internal/roles", params={"limit": 500, "after_id": page["next_after_id"]},
                                     headers=locky_user.headers).json
    assert rest["roles"][-3:] == custom and rest["next_after_id"] is None
    assert count(locky_client, locky_user, "roles") == len(BUILTIN_ROLES) + 3
    assert count(locky_client, locky_user, "roles", name="r1") == 1
    for params, field in (({"name": ""}, "name"), ({"name": "Bad Name"}, "name"), ({"name": "x" * 65}, "name"),
                          ({"builtin": "true"}, "builtin"), ({"limit": "x"}, "limit")):
        assert_fields(locky_client.simulate_get("/v1/internal/roles", params=params, headers=locky_user.headers), field)
    assert_not_found(locky_client.simulate_get("/v1/internal/roles/9999", headers=locky_user.headers))
