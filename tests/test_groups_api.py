"""Groups over HTTP: create (the creator becomes owner), read, list with filters and
keyset paging, count, update, soft delete with its memberships, and the 400 field
maps of bad bodies and queries (docs/http/records.md and docs/http/README.md)."""

from __future__ import annotations

import pytest

from authz_helpers import (
    NOBODY,
    TIMESTAMP,
    UUID4,
    add_member,
    assert_error,
    assert_fields,
    assert_not_found,
    count,
    create_group,
    listing,
)

GROUPS = "/v1/private/groups"


def group_url(group: dict) -> str:
    return f"{GROUPS}/{group['id']}"


# -- create ------------------------------------------------------------------


def test_create_returns_201_the_group_and_its_location(locky_client, locky_user):
    result = locky_client.simulate_post(
        GROUPS, json={"name": "Platform", "description": "The platform team"}, headers=locky_user.headers
    )
    assert result.status_code == 201, result.text
    group = result.json
    assert set(group) == {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "description"}
    assert isinstance(group["id"], int) and group["id"] > 0
    assert UUID4.match(group["uuid"])
    assert TIMESTAMP.match(group["created_at"]) and group["updated_at"] == group["created_at"]
    assert group["deleted_at"] is None
    assert (group["name"], group["description"]) == ("Platform", "The platform team")
    assert result.headers["location"] == f"/v1/internal/groups/{group['id']}"

    fetched = locky_client.simulate_get(result.headers["location"], headers=locky_user.headers)
    assert fetched.status_code == 200
    assert fetched.json == group


def test_description_defaults_to_empty(locky_client, locky_user):
    assert create_group(locky_client, locky_user, "Solo")["description"] == ""


def test_creator_becomes_the_owner_member(locky_client, locky_user):
    group = create_group(locky_client, locky_user)
    (member,) = listing(locky_client, locky_user, "members", group_uuid=group["uuid"])
    assert (member["user_uuid"], member["group_uuid"], member["role"]) == (locky_user.uuid, group["uuid"], "owner")
    assert member["deleted_at"] is None


def test_each_creator_owns_only_their_group(locky_client, locky_user):
    other = locky_client.account("other@example.com")
    mine, theirs = create_group(locky_client, locky_user), create_group(locky_client, other)
    owners = {m["group_uuid"]: m["user_uuid"] for m in listing(locky_client, locky_user, "members", role="owner")}
    assert owners == {mine["uuid"]: locky_user.uuid, theirs["uuid"]: other.uuid}


def test_name_is_unique_among_live_groups(locky_client, locky_user):
    first = create_group(locky_client, locky_user, "Ops")
    other = locky_client.account("other@example.com")
    again = locky_client.simulate_post(GROUPS, json={"name": "Ops"}, headers=other.headers)
    assert_fields(again, name="Already exists.")
    assert count(locky_client, locky_user, "groups", name="Ops") == 1

    assert locky_client.simulate_delete(group_url(first), headers=locky_user.headers).status_code == 204
    reused = create_group(locky_client, other, "Ops")
    assert reused["id"] != first["id"]
    assert [g["id"] for g in listing(locky_client, other, "groups", name="Ops")] == [reused["id"]]


def test_name_uniqueness_is_exact(locky_client, locky_user):
    create_group(locky_client, locky_user, "Ops")
    # Group names are free text: case and spacing make a different name.
    create_group(locky_client, locky_user, "ops")
    create_group(locky_client, locky_user, "Ops 2")
    assert count(locky_client, locky_user, "groups") == 3


@pytest.mark.parametrize(
    "payload, fields",
    [
        ({}, {"name": "Missing data for required field."}),
        ({"name": ""}, {"name": None}),
        ({"name": "x" * 256}, {"name": None}),
        ({"name": 7}, {"name": None}),
        ({"name": None}, {"name": None}),
        ({"name": "bad\nname"}, {"name": None}),
        ({"name": "  "}, {"name": "Must not be blank."}),
        ({"name": "ok", "description": "d" * 1025}, {"description": None}),
        ({"name": "ok", "description": 5}, {"description": None}),
        ({"name": "ok", "color": "blue"}, {"color": "Unknown field."}),
        ({"name": "", "owner": "me"}, {"name": None, "owner": "Unknown field."}),
    ],
)
def test_create_rejects_bad_bodies_with_a_field_map(locky_client, locky_user, payload, fields):
    result = locky_client.simulate_post(GROUPS, json=payload, headers=locky_user.headers)
    assert_fields(result, *[k for k, v in fields.items() if v is None],
                  **{k: v for k, v in fields.items() if v is not None})
    assert count(locky_client, locky_user, "groups") == 0


def test_limits_are_inclusive(locky_client, locky_user):
    group = create_group(locky_client, locky_user, "n" * 255, description="d" * 1024)
    assert len(group["name"]) == 255 and len(group["description"]) == 1024


def test_read_only_fields_are_ignored(locky_client, locky_user):
    payload = {
        "name": "Readonly", "id": 999, "uuid": NOBODY, "created_at": "2000-01-01T00:00:00.000000Z",
        "updated_at": "2000-01-01T00:00:00.000000Z", "deleted_at": "2000-01-01T00:00:00.000000Z",
    }
    group = locky_client.simulate_post(GROUPS, json=payload, headers=locky_user.headers).json
    assert group["id"] != 999 and group["uuid"] != NOBODY
    assert group["deleted_at"] is None and not group["created_at"].startswith("2000")


def test_body_must_be_a_json_object(locky_client, locky_user):
    result = locky_client.simulate_post(GROUPS, body="[1, 2]", headers={
        **locky_user.headers, "Content-Type": "application/json"})
    assert_fields(result, "body")
    result = locky_client.simulate_post(GROUPS, body="name=x", headers={
        **locky_user.headers, "Content-Type": "application/x-www-form-urlencoded"})
    assert_error(result, 415, "415 Unsupported Media Type")


def test_writes_need_a_token(locky_client, locky_user):
    group = create_group(locky_client, locky_user)
    for result in (
        locky_client.simulate_post(GROUPS, json={"name": "x"}),
        locky_client.simulate_put(group_url(group), json={"name": "x"}),
        locky_client.simulate_delete(group_url(group)),
        locky_client.simulate_get("/v1/internal/groups"),
    ):
        assert_error(result, 401, "401 Unauthorized")
        assert result.headers["www-authenticate"].startswith("Bearer")


# -- read, list, count -------------------------------------------------------


def test_list_pages_by_id_and_filters_by_name(locky_client, locky_user):
    created = [create_group(locky_client, locky_user, f"g{i}") for i in range(5)]
    ids = [g["id"] for g in created]

    first = locky_client.simulate_get("/v1/internal/groups", params={"limit": 2}, headers=locky_user.headers)
    assert first.status_code == 200
    assert [g["id"] for g in first.json["groups"]] == ids[:2]
    assert first.json["next_after_id"] == ids[1]
    assert first.json["groups"][0] == created[0]

    second = locky_client.simulate_get(
        "/v1/internal/groups", params={"limit": 2, "after_id": ids[1]}, headers=locky_user.headers
    )
    assert [g["id"] for g in second.json["groups"]] == ids[2:4]
    assert second.json["next_after_id"] == ids[3]
    last = locky_client.simulate_get(
        "/v1/internal/groups", params={"limit": 2, "after_id": ids[3]}, headers=locky_user.headers
    )
    assert last.json == {"groups": [created[4]], "next_after_id": None}

    exact = locky_client.simulate_get(
        "/v1/internal/groups", params={"limit": 5}, headers=locky_user.headers
    )
    assert exact.json["next_after_id"] is None  # a full last page is still the last page

    assert listing(locky_client, locky_user, "groups", name="g3") == [created[3]]
    assert listing(locky_client, locky_user, "groups", name="g") == []
    assert count(locky_client, locky_user, "groups") == 5
    assert count(locky_client, locky_user, "groups", name="g3") == 1
    assert count(locky_client, locky_user, "groups", name="nope") == 0


@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"after_id": "-1"}, "after_id"),
        ({"name": ""}, "name"),
        ({"name": "n" * 256}, "name"),
        ({"name": "tab\tname"}, "name"),
        ({"owner": "me"}, "owner"),
    ],
)
def test_bad_list_queries_are_field_maps(locky_client, locky_user, params, field):
    for path in ("/v1/internal/groups", "/v1/internal/groups/count"):
        assert_fields(locky_client.simulate_get(path, params=params, headers=locky_user.headers), field)


def test_unknown_ids_are_404(locky_client, locky_user):
    for path in ("/v1/internal/groups/999", "/v1/internal/groups/0", "/v1/internal/groups/abc"):
        assert_not_found(locky_client.simulate_get(path, headers=locky_user.headers))
    assert_not_found(locky_client.simulate_put(f"{GROUPS}/999", json={"name": "x"}, headers=locky_user.headers))
    assert_not_found(locky_client.simulate_delete(f"{GROUPS}/999", headers=locky_user.headers))


# -- update ------------------------------------------------------------------


def test_owner_updates_only_the_fields_given(locky_client, locky_user):
    group = create_group(locky_client, locky_user, "Before", description="keep me")
    result = locky_client.simulate_put(group_url(group), json={"name": "After"}, headers=locky_user.headers)
    assert result.status_code == 200, result.text
    updated = result.json
    assert (updated["name"], updated["description"]) == ("After", "keep me")
    assert (updated["id"], updated["uuid"], updated["created_at"]) == (group["id"], group["uuid"], group["created_at"])
    assert updated["updated_at"] > group["updated_at"]

    result = locky_client.simulate_put(group_url(group), json={"description": ""}, headers=locky_user.headers)
    assert (result.json["name"], result.json["description"]) == ("After", "")
    fetched = locky_client.simulate_get(f"/v1/internal/groups/{group['id']}", headers=locky_user.headers)
    assert fetched.json == result.json


def test_update_ignores_read_only_fields_and_rejects_unknown_ones(locky_client, locky_user):
    group = create_group(locky_client, locky_user)
    result = locky_client.simulate_put(
        group_url(group), json={"id": 5, "uuid": NOBODY, "deleted_at": None, "description": "x"},
        headers=locky_user.headers,
    )
    assert result.status_code == 200
    assert (result.json["id"], result.json["uuid"], result.json["description"]) == (group["id"], group["uuid"], "x")

    assert_fields(
        locky_client.simulate_put(group_url(group), json={"members": []}, headers=locky_user.headers),
        members="Unknown field.",
    )
    assert_fields(locky_client.simulate_put(group_url(group), json={"name": ""}, headers=locky_user.headers), "name")


def test_update_to_a_taken_name_is_a_400(locky_client, locky_user):
    create_group(locky_client, locky_user, "Taken")
    group = create_group(locky_client, locky_user, "Free")
    result = locky_client.simulate_put(group_url(group), json={"name": "Taken"}, headers=locky_user.headers)
    assert_fields(result, name="Already exists.")
    # Keeping one's own name is no conflict.
    same = locky_client.simulate_put(group_url(group), json={"name": "Free"}, headers=locky_user.headers)
    assert same.status_code == 200 and same.json["name"] == "Free"


# -- soft delete -------------------------------------------------------------


def test_delete_is_soft_and_hides_the_group_and_its_memberships(locky_client, locky_user, locky_admin):
    group = create_group(locky_client, locky_user, "Doomed")
    keep = create_group(locky_client, locky_user, "Kept")
    friend = locky_client.account("friend@example.com")
    joined = add_member(locky_client, locky_user, group, friend.uuid, "viewer")
    stays = add_member(locky_client, locky_user, keep, friend.uuid)

    result = locky_client.simulate_delete(group_url(group), headers=locky_user.headers)
    assert result.status_code == 204 and result.text == ""

    h = locky_admin.headers
    assert_not_found(locky_client.simulate_get(f"/v1/internal/groups/{group['id']}", headers=h))
    assert_not_found(locky_client.simulate_put(group_url(group), json={"name": "x"}, headers=h))
    assert_not_found(locky_client.simulate_delete(group_url(group), headers=h))
    assert [g["id"] for g in listing(locky_client, locky_admin, "groups")] == [keep["id"]]
    assert listing(locky_client, locky_admin, "groups", name="Doomed") == []
    assert count(locky_client, locky_admin, "groups") == 1
    assert count(locky_client, locky_admin, "groups", name="Doomed") == 0

    # Its memberships (the owner's and the friend's) went with it; others stay.
    assert listing(locky_client, locky_admin, "members", group_uuid=group["uuid"]) == []
    assert count(locky_client, locky_admin, "members", group_uuid=group["uuid"]) == 0
    assert_not_found(locky_client.simulate_get(f"/v1/internal/members/{joined['id']}", headers=h))
    assert_not_found(locky_client.simulate_delete(f"/v1/private/members/{joined['id']}", headers=h))
    assert [m["id"] for m in listing(locky_client, locky_admin, "members", user_uuid=friend.uuid)] == [stays["id"]]
    assert count(locky_client, locky_admin, "members") == 2  # Kept's owner and the friend


def test_a_deleted_group_takes_no_new_members(locky_client, locky_user, locky_admin):
    group = create_group(locky_client, locky_user)
    assert locky_client.simulate_delete(group_url(group), headers=locky_user.headers).status_code == 204
    friend = locky_client.account("friend@example.com")
    result = locky_client.simulate_post(
        "/v1/private/members", json={"group_uuid": group["uuid"], "user_uuid": friend.uuid},
        headers=locky_admin.headers,
    )
    assert_fields(result, "group_uuid")

