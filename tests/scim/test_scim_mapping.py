"""SCIM 2.0 as Locky's own records (docs/http/scim.md), through the front
door: what a provisioning client writes at ``/scim/v2`` is what ``/v1``, sign-in and
the audit trail see, and the other way round.

Users: ``userName`` is the email (unique among live users whatever the case: 409
``uniqueness``), ``displayName``/``name.formatted`` the name, ``active`` not disabled
(§11: sign-in 403 "Account disabled", logins ended), ``password`` write-only under §11's
rules, ``externalId`` kept; DELETE is §6's soft delete. Groups: ``members`` are
memberships with role ``member``, changed by PATCH paths such as
``members[value eq "..."]``. Searches: filters, paging, attribute selection. Errors:
SCIM error bodies with ``scimType``, never a 500; 401 without a token, 403 for a caller
the policy does not allow.
"""

from __future__ import annotations

import pytest

from scim_helpers import GROUP, LIST, PASSWORD, PATCH_OP, SCIM_JSON, SEARCH, USER, Scim, assert_scim_error, machine_client

ADMIN = "admin@example.com"


def v1_user(http, admin, email: str) -> dict | None:
    """The live user with ``email`` as ``/v1`` lists it (admin), or ``None``."""
    result = http.simulate_get("/v1/internal/users", params={"email": email}, headers=admin.headers)
    assert result.status_code == 200, result.text
    users = result.json["users"]
    return users[0] if users else None


def login(http, email: str, password: str = PASSWORD):
    return http.simulate_post("/v1/public/users/login", json={"email": email, "password": password})


def audit_trail(http, admin, target_uuid: str) -> list[dict]:
    result = http.simulate_get("/v1/internal/audit", params={"target_uuid": target_uuid, "limit": 500},
                               headers=admin.headers)
    assert result.status_code == 200, result.text
    return result.json["events"]


def replace(path: str | None, value) -> dict:
    operation = {"op": "replace", "value": value}
    if path is not None:
        operation["path"] = path
    return operation


# -- the User resource -------------------------------------------------------------------


def test_a_created_user_is_a_locky_user(scim, locky_client, locky_admin):
    created = scim.post("/Users", {"schemas": [USER], "userName": "Ada.Lovelace@Example.com",
                                   "displayName": "Ada Lovelace", "externalId": "00u1ada", "password": PASSWORD})
    assert created.status_code == 201, created.text
    assert created.headers["content-type"].startswith(SCIM_JSON)
    body = created.json
    stored = v1_user(locky_client, locky_admin, "ada.lovelace@example.com")
    assert stored is not None and stored["name"] == "Ada Lovelace" and stored["disabled"] is False
    assert body["id"] == stored["uuid"]
    assert body["schemas"] == [USER]
    assert body["userName"] == "ada.lovelace@example.com"  # the address as Locky keeps it
    assert body["displayName"] == "Ada Lovelace" and body["name"] == {"formatted": "Ada Lovelace"}
    assert body["emails"] == [{"value": "ada.lovelace@example.com", "primary": True}]
    assert body["active"] is True and body["externalId"] == "00u1ada"
    assert "password" not in body
    meta = body["meta"]
    assert meta["resourceType"] == "User" and meta["created"] and meta["lastModified"]
    assert meta["location"].endswith(f"/scim/v2/Users/{body['id']}")
    assert created.headers["location"] == meta["location"]
    assert meta["version"].startswith('W/"') and created.headers.get("etag") == meta["version"]
    assert login(locky_client, "ada.lovelace@example.com").status_code == 200


def test_a_user_created_through_v1_is_read_through_scim(scim, locky_client):
    registered = locky_client.register("grace@example.com", PASSWORD, "Grace Hopper")
    result = scim.get(f"/Users/{registered['uuid']}")
    assert result.status_code == 200, result.text
    assert result.json["userName"] == "grace@example.com" and result.json["displayName"] == "Grace Hopper"
    assert result.json["active"] is True and "password" not in result.json


def test_a_user_without_display_name_is_named_after_the_address(scim):
    body = scim.user("linus@example.com")
    assert body["displayName"] == "linus@example.com" and body["name"]["formatted"] == "linus@example.com"


def test_a_put_without_display_name_is_400(scim):
    """displayName is ``required`` in Locky's User schema (every user has a name): a POST
    without it names the user after the address, a PUT without it is refused."""
    user = scim.user("nameless@example.com", "Nameless")
    result = scim.put(f"/Users/{user['id']}", {"schemas": [USER], "userName": "nameless@example.com"})
    assert "displayName" in assert_scim_error(result, 400, "invalidValue")["detail"]
    assert scim.get(f"/Users/{user['id']}").json["displayName"] == "Nameless"


def test_username_must_be_an_address(scim):
    result = scim.post("/Users", {"schemas": [USER], "userName": "not an address", "password": PASSWORD})
    # The detail names the attribute the client sent, not the field of /v1 behind it.
    assert assert_scim_error(result, 400, "invalidValue")["detail"].startswith("userName: ")


@pytest.mark.parametrize("taken_as", ["margaret@example.com", "Margaret@EXAMPLE.com", " margaret@example.com "])
def test_a_taken_username_is_409_uniqueness(scim, locky_client, taken_as):
    scim.user("margaret@example.com", "Margaret Hamilton")
    result = scim.post("/Users", {"schemas": [USER], "userName": taken_as, "password": PASSWORD})
    assert assert_scim_error(result, 409, "uniqueness")["detail"] == "userName: Already registered."


def test_an_address_registered_through_v1_is_taken_for_scim_too(scim, locky_client):
    locky_client.register("katherine@example.com", PASSWORD, "Katherine Johnson")
    result = scim.post("/Users", {"schemas": [USER], "userName": "KATHERINE@example.com"})
    assert_scim_error(result, 409, "uniqueness")


def test_changing_username_to_a_taken_one_is_409(scim):
    scim.user("dorothy@example.com")
    mary = scim.user("mary@example.com")
    result = scim.patch(f"/Users/{mary['id']}", replace("userName", "Dorothy@Example.com"))
    assert_scim_error(result, 409, "uniqueness")
    put = scim.put(f"/Users/{mary['id']}", {"schemas": [USER], "userName": "dorothy@example.com",
                                            "displayName": "Mary"})
    assert_scim_error(put, 409, "uniqueness")
    assert scim.get(f"/Users/{mary['id']}").json["userName"] == "mary@example.com"


def test_patch_answers_200_with_the_resource(scim, locky_client, locky_admin):
    user = scim.user("barbara@example.com", "Barbara L", password=PASSWORD)
    result = scim.patch(f"/Users/{user['id']}", replace("displayName", "Barbara Liskov"))
    assert result.status_code == 200, result.text
    assert result.headers["content-type"].startswith(SCIM_JSON)
    body = result.json
    assert body["id"] == user["id"] and body["schemas"] == [USER]
    assert body["displayName"] == "Barbara Liskov" and body["name"]["formatted"] == "Barbara Liskov"
    assert body["meta"]["version"] != user["meta"]["version"]
    assert v1_user(locky_client, locky_admin, "barbara@example.com")["name"] == "Barbara Liskov"


def test_patch_without_path_as_okta_sends_it(scim, locky_client, locky_admin):
    user = scim.user("frances@example.com", "Frances", password=PASSWORD)
    result = scim.patch(f"/Users/{user['id']}", replace(None, {"displayName": "Frances Allen", "active": False}))
    assert result.status_code == 200, result.text
    assert result.json["displayName"] == "Frances Allen" and result.json["active"] is False
    assert v1_user(locky_client, locky_admin, "frances@example.com")["disabled"] is True


def test_put_replaces_the_user(scim, locky_client, locky_admin):
    user = scim.user("hedy@example.com", "Hedy", externalId="ext-1", password=PASSWORD)
    result = scim.put(f"/Users/{user['id']}", {"schemas": [USER], "userName": "hedy.lamarr@example.com",
                                               "displayName": "Hedy Lamarr", "active": True})
    assert result.status_code == 200, result.text
    body = result.json
    assert body["userName"] == "hedy.lamarr@example.com" and body["displayName"] == "Hedy Lamarr"
    assert "externalId" not in body  # a PUT without it clears it
    assert v1_user(locky_client, locky_admin, "hedy@example.com") is None
    assert v1_user(locky_client, locky_admin, "hedy.lamarr@example.com")["name"] == "Hedy Lamarr"


#: A user as Okta's and Entra ID's default attribute mappings send it: name parts, typed
#: emails, a locale or title, the enterprise extension. Locky keeps none of those extras:
#: it ignores them (neither refused nor stored).
IDP_USER = {
    "schemas": [USER, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
    "userName": "idp.user@example.com", "externalId": "00u1idp", "active": True, "displayName": "Idp User",
    "name": {"givenName": "Idp", "familyName": "User", "formatted": "Idp User"},
    "emails": [{"primary": True, "type": "work", "value": "idp.user@example.com"}],
    "locale": "en-US", "title": "Engineer", "groups": [],
    "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "Research"},
}
def test_a_user_as_identity_providers_send_it_is_created_keeping_what_locky_keeps(scim, locky_client, locky_admin):
    created = scim.post("/Users", IDP_USER)
    assert created.status_code == 201, created.text
    assert created.json["userName"] == "idp.user@example.com" and created.json["displayName"] == "Idp User"
    assert "title" not in created.json and "locale" not in created.json
    assert created.json["name"] == {"formatted": "Idp User"}
    assert created.json["emails"] == [{"value": "idp.user@example.com", "primary": True}]
    assert not any(key.startswith("urn:") for key in created.json), created.json
    assert v1_user(locky_client, locky_admin, "idp.user@example.com")["name"] == "Idp User"
    assert scim.get(f"/Users/{created.json['id']}").json == created.json


def test_patches_of_attributes_locky_does_not_keep_are_ignored(scim):
    user = scim.user("idp.patch@example.com", "Idp Patch")
    result = scim.patch(f"/Users/{user['id']}", {"op": "Replace", "path": "name.givenName", "value": "Idp"},
                        {"op": "Add", "path": "title", "value": "Engineer"},
                        replace("displayName", "Idp Patched"))
    assert result.status_code == 200, result.text
    assert result.json["displayName"] == "Idp Patched" and "title" not in result.json
    assert result.json["name"] == {"formatted": "Idp Patched"}


def test_group_members_with_display_as_identity_providers_send_them(scim):
    user = scim.user("idp.member@example.com", "Idp Member")
    result = scim.post("/Groups", {"schemas": [GROUP], "displayName": "Idp Group",
                                   "members": [{"value": user["id"], "display": "Idp Member"}]})
    assert result.status_code == 201, result.text
    assert [m["value"] for m in result.json["members"]] == [user["id"]]


# -- active and sign-in --------------------------------------------------------------------


def test_active_false_disables_sign_in_and_ends_sessions(scim, locky_client):
    user = scim.user("alan@example.com", "Alan Turing", password=PASSWORD)
    tokens = login(locky_client, "alan@example.com")
    assert tokens.status_code == 200, tokens.text
    bearer = {"Authorization": f"Bearer {tokens.json['access_token']}"}
    assert locky_client.simulate_get("/v1/internal/users/me", headers=bearer).status_code == 200

    result = scim.patch(f"/Users/{user['id']}", replace("active", False))
    assert result.status_code == 200, result.text
    assert result.json["active"] is False

    refused = login(locky_client, "alan@example.com")
    assert refused.status_code == 403 and refused.json["title"] == "Account disabled", refused.text
    assert locky_client.simulate_get("/v1/internal/users/me", headers=bearer).status_code == 401
    refresh = locky_client.simulate_post("/v1/public/users/refresh",
                                         json={"refresh_token": tokens.json["refresh_token"]})
    assert refresh.status_code == 401, refresh.text

    again = scim.patch(f"/Users/{user['id']}", replace("active", True))
    assert again.status_code == 200 and again.json["active"] is True
    assert login(locky_client, "alan@example.com").status_code == 200


def test_a_user_created_inactive_cannot_sign_in(scim, locky_client):
    user = scim.user("edsger@example.com", "Edsger", password=PASSWORD, active=False)
    assert user["active"] is False
    refused = login(locky_client, "edsger@example.com")
    assert refused.status_code == 403 and refused.json["title"] == "Account disabled", refused.text


def test_a_put_without_active_does_not_enable_a_deactivated_user(scim, locky_client):
    """A profile push (PUT) that leaves ``active`` out must not undo a deprovisioning: it
    is refused as a required attribute missing, or the user stays inactive."""
    user = scim.user("deprovisioned@example.com", "Gone", password=PASSWORD, active=False)
    result = scim.put(f"/Users/{user['id']}", {"schemas": [USER], "userName": "deprovisioned@example.com",
                                               "displayName": "Gone Still"})
    assert result.status_code == 400 or result.json["active"] is False, result.text
    assert login(locky_client, "deprovisioned@example.com").status_code == 403


# -- password ------------------------------------------------------------------------------


def test_password_is_write_only(scim, locky_client):
    user = scim.user("john@example.com", "John", password=PASSWORD)
    answers = [scim.get(f"/Users/{user['id']}"), scim.get("/Users"),
               scim.get(f"/Users/{user['id']}", attributes="password"),
               scim.patch(f"/Users/{user['id']}", replace("password", "Another horse battery 8")),
               scim.put(f"/Users/{user['id']}", {"schemas": [USER], "userName": "john@example.com",
                                                  "displayName": "John", "password": "Third horse battery 9"})]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert "password" not in answer.text.lower().replace('"schemas"', ""), answer.text
    assert login(locky_client, "john@example.com", "Third horse battery 9").status_code == 200


@pytest.mark.parametrize("password, why", [
    ("short7", "fewer than 8 bytes"),
    ("x" * 73, "more than 72 bytes"),
    ("password", "in the blocklist"),
    ("ken-thompson-1943", "contains the address's local part"),
])
def test_password_rules_are_11s(scim, locky_client, password, why):
    result = scim.post("/Users", {"schemas": [USER], "userName": "ken-thompson@example.com",
                                  "displayName": "Ken", "password": password})
    assert_scim_error(result, 400, "invalidValue")
    assert "password" in result.json.get("detail", "").lower(), (why, result.json)
    assert locky_client.simulate_post("/v1/public/users/login", json={
        "email": "ken-thompson@example.com", "password": password}).status_code == 401


def test_a_password_change_through_patch_follows_the_rules(scim, locky_client):
    user = scim.user("dennis@example.com", "Dennis", password=PASSWORD)
    assert_scim_error(scim.patch(f"/Users/{user['id']}", replace("password", "short")), 400, "invalidValue")
    assert login(locky_client, "dennis@example.com").status_code == 200  # the old one still works
    assert scim.patch(f"/Users/{user['id']}", replace("password", "A new horse battery 5")).status_code == 200
    assert login(locky_client, "dennis@example.com").status_code == 401
    assert login(locky_client, "dennis@example.com", "A new horse battery 5").status_code == 200


# -- delete --------------------------------------------------------------------------------


def test_delete_is_a_soft_delete_hidden_everywhere(scim, locky_client, locky_admin):
    user = scim.user("ada.byron@example.com", "Ada Byron", password=PASSWORD)
    stored = v1_user(locky_client, locky_admin, "ada.byron@example.com")
    tokens = login(locky_client, "ada.byron@example.com").json

    deleted = scim.delete(f"/Users/{user['id']}")
    assert deleted.status_code == 204, deleted.text
    assert not deleted.content

    assert locky_client.simulate_get(f"/v1/internal/users/{stored['id']}",
                                     headers=locky_admin.headers).status_code == 404
    assert_scim_error(scim.get(f"/Users/{user['id']}"), 404)
    assert_scim_error(scim.delete(f"/Users/{user['id']}"), 404)
    assert scim.search(filter='userName eq "ada.byron@example.com"')["totalResults"] == 0
    assert locky_client.simulate_get("/v1/internal/users/me", headers={
        "Authorization": f"Bearer {tokens['access_token']}"}).status_code == 401
    assert login(locky_client, "ada.byron@example.com").status_code == 401
    again = scim.user("ada.byron@example.com", "Ada Byron")  # the address is free again (§6)
    assert again["id"] != user["id"]


# -- the audit trail -----------------------------------------------------------------------


def test_the_same_changes_through_scim_and_v1_give_the_same_events(scim, provisioner, locky_client, locky_admin):
    # Through SCIM: create, rename, disable, enable, delete.
    through_scim = scim.user("scim.person@example.com", "Scim Person", password=PASSWORD)
    for operation in (replace("displayName", "Scim Person Renamed"), replace("active", False),
                      replace("active", True)):
        assert scim.patch(f"/Users/{through_scim['id']}", operation).status_code == 200
    assert scim.delete(f"/Users/{through_scim['id']}").status_code == 204

    # Through /v1: the same changes.
    registered = locky_client.register("v1.person@example.com", PASSWORD, "V1 Person")
    path = f"/v1/private/users/{registered['id']}"
    for body in ({"name": "V1 Person Renamed"}, {"disabled": True}, {"disabled": False}):
        assert locky_client.simulate_put(path, json=body, headers=locky_admin.headers).status_code == 200
    assert locky_client.simulate_delete(path, headers=locky_admin.headers).status_code == 204

    scim_events = audit_trail(locky_client, locky_admin, through_scim["id"])
    v1_events = audit_trail(locky_client, locky_admin, registered["uuid"])
    assert [e["event"] for e in scim_events] == [e["event"] for e in v1_events]
    assert [e["event"] for e in scim_events][0] == "user.registered"
    # The same details too (the values differ: another user), with "via" besides.
    assert [sorted(set(e["details"]) - {"via"}) for e in scim_events] == \
        [sorted(set(e["details"]) - {"via"}) for e in v1_events]
    for event in scim_events:
        assert event["details"].get("via") == "scim", event
        assert event["actor_uuid"] == provisioner.subject, event
    for event in v1_events:
        assert event["details"].get("via") != "scim", event


def test_group_and_member_events_carry_via_scim(scim, provisioner, locky_client, locky_admin):
    ada = scim.user("ada.g@example.com", "Ada G")
    group = scim.group("Research", [ada["id"]])
    trail = audit_trail(locky_client, locky_admin, group["id"])
    assert [e["event"] for e in trail] == ["group.created"]
    members = locky_client.simulate_get("/v1/internal/audit", params={"event": "member.added"},
                                        headers=locky_admin.headers).json["events"]
    assert len(members) == 1 and members[0]["details"]["via"] == "scim"
    assert members[0]["actor_uuid"] == provisioner.subject and trail[0]["actor_uuid"] == provisioner.subject


# -- groups and members --------------------------------------------------------------------


def v1_members(http, admin, group_uuid: str) -> dict[str, str]:
    """user uuid → role of the group's live memberships, as ``/v1`` lists them."""
    result = http.simulate_get("/v1/internal/members", params={"group_uuid": group_uuid}, headers=admin.headers)
    assert result.status_code == 200, result.text
    return {m["user_uuid"]: m["role"] for m in result.json["members"]}


def test_a_group_created_with_members_has_memberships_with_role_member(scim, locky_client, locky_admin):
    ada, bob = scim.user("ada.m@example.com", "Ada M"), scim.user("bob.m@example.com", "Bob M")
    group = scim.group("Research", [ada["id"], bob["id"]], externalId="grp-1")
    assert group["schemas"] == [GROUP] and group["displayName"] == "Research" and group["externalId"] == "grp-1"
    assert sorted(m["value"] for m in group["members"]) == sorted([ada["id"], bob["id"]])
    assert {m.get("type") for m in group["members"]} == {"User"}
    assert all(m["$ref"].endswith(f"/scim/v2/Users/{m['value']}") for m in group["members"])
    assert group["meta"]["resourceType"] == "Group"
    assert group["meta"]["location"].endswith(f"/scim/v2/Groups/{group['id']}")
    assert v1_members(locky_client, locky_admin, group["id"]) == {ada["id"]: "member", bob["id"]: "member"}
    v1_group = locky_client.simulate_get("/v1/internal/groups", params={"name": "Research"},
                                         headers=locky_admin.headers).json["groups"]
    assert [g["uuid"] for g in v1_group] == [group["id"]]
    user = scim.get(f"/Users/{ada['id']}").json
    assert [g["value"] for g in user.get("groups", [])] == [group["id"]]


def test_patch_members_add_and_remove(scim, locky_client, locky_admin):
    ada, bob, eve = (scim.user(f"{n}.p@example.com", n.title()) for n in ("ada", "bob", "eve"))
    group = scim.group("Ops", [ada["id"]])
    added = scim.patch(f"/Groups/{group['id']}", {"op": "add", "path": "members",
                                                   "value": [{"value": bob["id"]}, {"value": eve["id"]}]})
    assert added.status_code == 200, added.text
    assert sorted(m["value"] for m in added.json["members"]) == sorted([ada["id"], bob["id"], eve["id"]])
    assert set(v1_members(locky_client, locky_admin, group["id"])) == {ada["id"], bob["id"], eve["id"]}

    removed = scim.patch(f"/Groups/{group['id']}", {"op": "remove", "path": f'members[value eq "{bob["id"]}"]'})
    assert removed.status_code == 200, removed.text
    assert sorted(m["value"] for m in removed.json["members"]) == sorted([ada["id"], eve["id"]])
    assert v1_members(locky_client, locky_admin, group["id"]) == {ada["id"]: "member", eve["id"]: "member"}

    emptied = scim.patch(f"/Groups/{group['id']}", {"op": "remove", "path": "members"})
    assert emptied.status_code == 200, emptied.text
    assert not emptied.json.get("members")
    assert v1_members(locky_client, locky_admin, group["id"]) == {}


def test_members_as_entra_id_patches_them(scim, locky_client, locky_admin):
    """Entra ID sends ``Add``/``Remove`` capitalised and removes members with a ``value``
    list instead of a path filter."""
    ada, bob = scim.user("ada.e@example.com", "Ada E"), scim.user("bob.e@example.com", "Bob E")
    group = scim.group("Entra", [ada["id"]])
    added = scim.patch(f"/Groups/{group['id']}", {"op": "Add", "path": "members", "value": [{"value": bob["id"]}]})
    assert added.status_code == 200, added.text
    removed = scim.patch(f"/Groups/{group['id']}", {"op": "Remove", "path": "members",
                                                     "value": [{"value": ada["id"]}]})
    assert removed.status_code == 200, removed.text
    assert [m["value"] for m in removed.json["members"]] == [bob["id"]]
    assert v1_members(locky_client, locky_admin, group["id"]) == {bob["id"]: "member"}


def test_a_member_who_is_no_user_is_400_and_nothing_is_kept(scim, locky_client, locky_admin):
    ada = scim.user("ada.n@example.com", "Ada N")
    group = scim.group("Nobody", [ada["id"]])
    result = scim.patch(f"/Groups/{group['id']}", {"op": "add", "path": "members", "value": [
        {"value": "00000000-0000-4000-8000-000000000000"}]})
    assert assert_scim_error(result, 400, "invalidValue")["detail"].startswith("members: ")
    assert v1_members(locky_client, locky_admin, group["id"]) == {ada["id"]: "member"}


def test_a_deleted_user_leaves_their_groups(scim):
    ada, bob = scim.user("ada.d@example.com", "Ada D"), scim.user("bob.d@example.com", "Bob D")
    group = scim.group("Leavers", [ada["id"], bob["id"]])
    assert scim.delete(f"/Users/{bob['id']}").status_code == 204
    assert [m["value"] for m in scim.get(f"/Groups/{group['id']}").json["members"]] == [ada["id"]]


def test_a_duplicate_group_name_is_409_uniqueness(scim):
    scim.group("Finance")
    taken = assert_scim_error(scim.post("/Groups", {"schemas": [GROUP], "displayName": "Finance"}), 409, "uniqueness")
    assert taken["detail"] == "displayName: Already exists."


def test_deleting_a_group_hides_it_from_v1(scim, locky_client, locky_admin):
    group = scim.group("Temporary")
    assert scim.delete(f"/Groups/{group['id']}").status_code == 204
    assert_scim_error(scim.get(f"/Groups/{group['id']}"), 404)
    assert locky_client.simulate_get("/v1/internal/groups", params={"name": "Temporary"},
                                     headers=locky_admin.headers).json["groups"] == []


# -- searches ------------------------------------------------------------------------------


@pytest.fixture
def people(scim):
    """Five users to search (beside the admin, admin@example.com): local part → resource."""
    made = {}
    for local, name, external in (("ada", "Ada Lovelace", "ext-ada"), ("alan", "Alan Turing", "ext-alan"),
                                  ("grace", "Grace Hopper", None), ("barbara", "Barbara Liskov", None),
                                  ("adele", "Adele Goldberg", "ext-adele")):
        extra = {"externalId": external} if external else {}
        made[local] = scim.user(f"{local}@example.com", name, **extra)
    return made


def names(listing: dict) -> list[str]:
    return sorted(r["userName"].split("@")[0] for r in listing.get("Resources", []))


@pytest.mark.parametrize("scim_filter, expected", [
    ('userName eq "alan@example.com"', ["alan"]),
    ('userName eq "ALAN@Example.com"', ["alan"]),  # userName is caseExact false
    ('userName co "ad"', ["ada", "adele", "admin"]),
    ('userName sw "a"', ["ada", "adele", "admin", "alan"]),
    ('userName ew "le@example.com"', ["adele"]),
    ('displayName co "Lovelace"', ["ada"]),
    ("externalId pr", ["ada", "adele", "alan"]),
    ('externalId eq "ext-alan"', ["alan"]),
    ('userName sw "a" and displayName co "Turing"', ["alan"]),
    ('userName eq "grace@example.com" or userName eq "barbara@example.com"', ["barbara", "grace"]),
    ('not (userName sw "a")', ["barbara", "grace"]),
    ('userName ne "ada@example.com" and userName sw "ad"', ["adele", "admin"]),
    ('emails.value eq "grace@example.com"', ["grace"]),
    ('emails[value co "barbara"]', ["barbara"]),
    ("active eq true", ["ada", "adele", "admin", "alan", "barbara", "grace"]),
    ('userName eq "nobody@example.com"', []),
])
def test_filters(scim, people, scim_filter, expected):
    listing = scim.search(filter=scim_filter)
    assert names(listing) == expected, (scim_filter, listing)
    assert listing["totalResults"] == len(expected)


def test_paging_with_start_index_and_count(scim, people):
    # Six users: the five and the admin.
    first = scim.search(startIndex="1", count="2", sortBy="userName")
    assert first["totalResults"] == 6 and first["startIndex"] == 1 and first["itemsPerPage"] == 2
    assert [r["userName"] for r in first["Resources"]] == ["ada@example.com", "adele@example.com"]
    second = scim.search(startIndex="3", count="2", sortBy="userName")
    assert [r["userName"] for r in second["Resources"]] == ["admin@example.com", "alan@example.com"]
    last = scim.search(startIndex="6", count="2", sortBy="userName")
    assert [r["userName"] for r in last["Resources"]] == ["grace@example.com"]
    assert last["totalResults"] == 6 and last["startIndex"] == 6
    beyond = scim.search(startIndex="10", count="2")
    assert beyond["totalResults"] == 6 and not beyond.get("Resources")
    counted = scim.search(count="0")
    assert counted["totalResults"] == 6 and not counted.get("Resources")
    unpaged = scim.search()
    assert unpaged["totalResults"] == 6 and len(unpaged["Resources"]) == 6
    descending = scim.search(sortBy="userName", sortOrder="descending", count="1")
    assert [r["userName"] for r in descending["Resources"]] == ["grace@example.com"]


def test_search_with_a_body(scim, people):
    result = scim.post("/Users/.search", {"schemas": [SEARCH], "filter": 'userName sw "a"',
                                          "attributes": ["userName"], "startIndex": 1, "count": 10})
    assert result.status_code == 200, result.text
    assert result.json["schemas"] == [LIST] and result.json["totalResults"] == 4  # ada, adele, admin, alan
    assert all(set(r) <= {"id", "schemas", "userName", "meta"} for r in result.json["Resources"]), result.json


def test_a_search_at_the_root_covers_users_and_groups(scim, people):
    scim.group("Adagio")
    found = scim.search("", filter='userName sw "ad" or displayName sw "Ad"')
    kinds = sorted((r["schemas"][0].rsplit(":", 1)[-1], r.get("userName") or r["displayName"])
                   for r in found["Resources"])
    assert kinds == [("Group", "Adagio"), ("User", "ada@example.com"), ("User", "adele@example.com"),
                     ("User", "admin@example.com")], found
    body = scim.post("/.search", {"schemas": [SEARCH], "filter": 'displayName eq "Adagio"'})
    assert body.status_code == 200 and body.json["totalResults"] == 1, body.text


def test_attributes_and_excluded_attributes(scim, people):
    ada = people["ada"]
    only = scim.get(f"/Users/{ada['id']}", attributes="userName,externalId").json
    assert only["id"] == ada["id"] and only["userName"] == "ada@example.com" and only["externalId"] == "ext-ada"
    assert "displayName" not in only and "emails" not in only and "active" not in only
    without = scim.get(f"/Users/{ada['id']}", excludedAttributes="emails,name").json
    assert "emails" not in without and "name" not in without
    assert without["id"] == ada["id"] and without["userName"] == "ada@example.com" and without["displayName"]
    listing = scim.search(filter='userName eq "ada@example.com"', attributes="displayName")
    [resource] = listing["Resources"]
    assert resource["displayName"] == "Ada Lovelace" and resource["id"] == ada["id"] and "userName" not in resource


def test_group_filters(scim, people):
    scim.group("Research", [people["ada"]["id"]], externalId="g-research")
    scim.group("Operations")
    assert [g["displayName"] for g in scim.search("/Groups", filter='displayName eq "Research"')["Resources"]] \
        == ["Research"]
    assert scim.search("/Groups", filter='externalId eq "g-research"')["totalResults"] == 1
    assert scim.search("/Groups", filter='displayName sw "Op"')["totalResults"] == 1
    found = scim.search("/Groups", filter=f'members[value eq "{people["ada"]["id"]}"]')
    assert [g["displayName"] for g in found["Resources"]] == ["Research"]
    assert scim.search("/Groups", filter="members pr")["totalResults"] == 1
    assert scim.search("/Groups", excludedAttributes="members")["totalResults"] == 2


def test_a_group_display_name_eq_compares_as_the_schema_says(scim):
    """Locky compares group names exactly ("Research" and "research" may both exist) and
    publishes the Group's displayName with the caseExact that says so; eq follows it."""
    schema = scim.get(f"/Schemas/{GROUP}").json
    [display_name] = [a for a in schema["attributes"] if a["name"] == "displayName"]
    scim.group("Research")
    assert scim.search("/Groups", filter='displayName eq "Research"')["totalResults"] == 1
    other_case = scim.search("/Groups", filter='displayName eq "research"')["totalResults"]
    assert other_case == (0 if display_name["caseExact"] else 1), display_name


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("scim_filter", [
    'userName eq', 'userName zz "a"', '(userName eq "a"', 'userName eq "a" and', '"unterminated',
    'userName eq "a" or or userName eq "b"',
])
def test_a_bad_filter_is_400_invalid_filter(scim, scim_filter):
    assert_scim_error(scim.get("/Users", filter=scim_filter), 400, "invalidFilter")


@pytest.mark.parametrize("raw", [b"{", b"[]", b"null", b'"text"', b"{\"schemas\": 1}", b"\xff\xfe"])
def test_a_malformed_body_is_400_never_500(scim, raw):
    for method, path in (("POST", "/Users"), ("POST", "/Groups")):
        result = scim.call(method, path, raw=raw)
        body = assert_scim_error(result, 400)
        assert body.get("scimType") in ("invalidSyntax", "invalidValue"), body


def test_a_malformed_patch_is_400(scim):
    user = scim.user("patchy@example.com", "Patchy")
    for operations in ([{"op": "jump", "path": "displayName", "value": "x"}],
                       [{"op": "replace", "path": "displayName["}],
                       [{"op": "remove"}]):
        result = scim.call("PATCH", f"/Users/{user['id']}", {"schemas": [PATCH_OP], "Operations": operations})
        body = assert_scim_error(result, 400)
        assert body.get("scimType") in ("invalidSyntax", "invalidPath", "noTarget", "invalidValue"), body
    result = scim.call("PATCH", f"/Users/{user['id']}", {"schemas": [USER], "displayName": "x"})
    assert_scim_error(result, 400)


def test_read_only_attributes_cannot_be_patched(scim):
    user = scim.user("readonly@example.com", "Read Only")
    result = scim.patch(f"/Users/{user['id']}", replace("id", "00000000-0000-4000-8000-000000000000"))
    assert result.status_code in (200, 400), result.text  # ignored or refused, never a 500
    if result.status_code == 400:
        assert_scim_error(result, 400, "mutability")
    assert scim.get(f"/Users/{user['id']}").status_code == 200


def test_unknown_resources_and_routes_are_404_scim_errors(scim):
    assert_scim_error(scim.get("/Users/00000000-0000-4000-8000-000000000000"), 404)
    assert_scim_error(scim.get("/Users/not-a-uuid"), 404)
    assert_scim_error(scim.get("/Groups/00000000-0000-4000-8000-000000000000"), 404)
    assert_scim_error(scim.get("/Nothing"), 404)
    assert_scim_error(scim.get("/Schemas/urn:example:nothing"), 404)


def test_bulk_is_not_offered(scim):
    config = scim.get("/ServiceProviderConfig").json
    assert config["bulk"]["supported"] is False and config["patch"]["supported"] is True
    result = scim.post("/Bulk", {"schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"],
                                 "Operations": []})
    assert result.status_code in (404, 405, 501), result.text
    assert_scim_error(result, result.status_code)


def test_if_match_with_a_stale_version_is_412(scim):
    user = scim.user("etag@example.com", "E Tag")
    version = user["meta"]["version"]
    assert scim.patch(f"/Users/{user['id']}", replace("displayName", "E Tag 2"),
                      headers={"If-Match": version}).status_code == 200
    stale = scim.patch(f"/Users/{user['id']}", replace("displayName", "E Tag 3"), headers={"If-Match": version})
    assert_scim_error(stale, 412)
    current = scim.get(f"/Users/{user['id']}")
    assert current.json["displayName"] == "E Tag 2"
    assert scim.call("GET", f"/Users/{user['id']}",
                     headers={"If-None-Match": current.json["meta"]["version"]}).status_code == 304


# -- who may call --------------------------------------------------------------------------


@pytest.mark.parametrize("method, path", [("GET", "/Users"), ("POST", "/Users"), ("GET", "/Groups"),
                                          ("PATCH", "/Users/00000000-0000-4000-8000-000000000000")])
def test_without_a_token_401(locky_client, method, path):
    anonymous = Scim(locky_client, None)
    result = anonymous.call(method, path, {"schemas": [USER], "userName": "x@example.com"}
                            if method != "GET" else None)
    assert_scim_error(result, 401)
    assert result.headers.get("www-authenticate", "").startswith("Bearer"), result.headers


def test_a_bad_token_401(locky_client):
    assert_scim_error(Scim(locky_client, "not.a.token").get("/Users"), 401)


def test_a_plain_user_is_403(locky_client, locky_user):
    user = Scim(locky_client, locky_user.access_token)
    assert_scim_error(user.get("/Users"), 403)
    assert_scim_error(user.post("/Users", {"schemas": [USER], "userName": "y@example.com"}), 403)
    assert_scim_error(user.get(f"/Users/{locky_user.uuid}"), 403)  # not even themselves


def test_a_machine_client_without_the_role_is_403(locky_client, locky_admin, locky_settings):
    bare = machine_client(locky_client, locky_admin, locky_settings, "Reports", None)
    assert_scim_error(Scim(locky_client, bare.token).get("/Users"), 403)


def test_an_admin_may_provision(locky_client, locky_admin):
    admin = Scim(locky_client, locky_admin.access_token)
    assert admin.search()["totalResults"] >= 1
    made = admin.user("by.admin@example.com", "By Admin")
    [event] = [e for e in audit_trail(locky_client, locky_admin, made["id"]) if e["event"] == "user.registered"]
    assert event["actor_uuid"] == locky_admin.uuid and event["details"]["via"] == "scim"


def test_a_provisioning_client_cannot_take_over_an_admin(scim, locky_client, locky_admin):
    """The provisioner role changes users, but not an account that may change every user:
    an admin's password, address, status or existence are not the provisioning client's."""
    assert scim.get(f"/Users/{locky_admin.uuid}").status_code == 200
    for operation in (replace("password", "Taken over horse 99"), replace("userName", "mine@example.com"),
                      replace("active", False)):
        assert_scim_error(scim.patch(f"/Users/{locky_admin.uuid}", operation), 403)
    assert_scim_error(scim.delete(f"/Users/{locky_admin.uuid}"), 403)
    assert login(locky_client, ADMIN, locky_admin.password).status_code == 200


def test_nobody_changes_their_own_password_or_address_through_scim(locky_client, locky_admin):
    """``/v1`` asks for the current password for that; a bearer token alone does not prove it."""
    admin = Scim(locky_client, locky_admin.access_token)
    assert_scim_error(admin.patch(f"/Users/{locky_admin.uuid}", replace("password", "Another horse battery 3")), 403)
    assert_scim_error(admin.patch(f"/Users/{locky_admin.uuid}", replace("userName", "new.admin@example.com")), 403)
    assert login(locky_client, ADMIN, locky_admin.password).status_code == 200
    renamed = admin.patch(f"/Users/{locky_admin.uuid}", replace("displayName", "The Admin"))
    assert renamed.status_code == 200 and renamed.json["displayName"] == "The Admin", renamed.text


def test_the_admin_cannot_deactivate_themselves(locky_client, locky_admin):
    admin = Scim(locky_client, locky_admin.access_token)
    assert_scim_error(admin.patch(f"/Users/{locky_admin.uuid}", replace("active", False)), 400)


# -- media type ----------------------------------------------------------------------------


def test_answers_are_application_scim_json(scim):
    user = scim.user("media@example.com", "Media")
    for result in (scim.get("/ServiceProviderConfig"), scim.get("/ResourceTypes"), scim.get("/Schemas"),
                   scim.get("/Users"), scim.get(f"/Users/{user['id']}"),
                   scim.patch(f"/Users/{user['id']}", replace("displayName", "Media 2")),
                   scim.get("/Users/00000000-0000-4000-8000-000000000000")):
        assert result.headers["content-type"].startswith(SCIM_JSON), (result.status_code, result.headers)


def test_application_json_bodies_are_accepted(scim):
    result = scim.post("/Users", {"schemas": [USER], "userName": "plainjson@example.com"},
                       content_type="application/json")
    assert result.status_code == 201, result.text


def test_discovery_documents(scim):
    types = scim.get("/ResourceTypes").json
    assert sorted(r["name"] for r in types["Resources"]) == ["Group", "User"]
    schemas = scim.get("/Schemas").json
    assert {s["id"] for s in schemas["Resources"]} >= {USER, GROUP}
    user_schema = scim.get(f"/Schemas/{USER}").json
    attributes = {a["name"]: a for a in user_schema["attributes"]}
    assert attributes["password"]["mutability"] == "writeOnly" and attributes["password"]["returned"] == "never"
    assert attributes["userName"]["uniqueness"] == "server" and attributes["userName"]["caseExact"] is False
    config = scim.get("/ServiceProviderConfig").json
    assert config["filter"]["supported"] is True and config["filter"]["maxResults"] > 0
    assert config["etag"]["supported"] is True
    assert [s["type"] for s in config["authenticationSchemes"]] == ["oauthbearertoken"]


# -- reading a page ------------------------------------------------------------------------


@pytest.fixture
def store_calls(locky_client, monkeypatch):
    """The calls a request makes to the membership and group reads a SCIM page may use
    (``"members.of_users"``, ``"groups.get_by_uuid"`` ...), counted on the app's storage."""
    from collections import Counter

    storage, calls = locky_client.app.context.storage, Counter()

    def counted(name: str, method):
        def call(*args, **kwargs):
            calls[name] += 1
            return method(*args, **kwargs)
        return call

    for store, names in (("members", ("list", "of_users", "of_groups")),
                         ("groups", ("get_by_uuid", "get_many_by_uuid"))):
        for name in names:
            monkeypatch.setattr(getattr(storage, store), name, counted(f"{store}.{name}",
                                                                          getattr(getattr(storage, store), name)))
    return calls


def test_a_page_reads_the_memberships_of_all_its_resources_at_once(scim, store_calls):
    users = [scim.user(f"page{i:02}@example.com", f"Page {i}") for i in range(12)]
    one = scim.group("Page one", [u["id"] for u in users[:8]])
    two = scim.group("Page two", [u["id"] for u in users[4:]])
    expected = {u["userName"]: ["Page one"] * (i < 8) + ["Page two"] * (i >= 4) for i, u in enumerate(users)}
    expected[ADMIN] = []

    def groups_shown(listing: dict) -> dict:
        return {r["userName"]: [g["display"] for g in r.get("groups", [])] for r in listing["Resources"]}

    for params, shown in (
            ({}, {**expected}),  # every user, whole: read for the page
            ({"filter": 'userName sw "page"'}, {k: v for k, v in expected.items() if k != ADMIN}),  # completed
            ({"filter": f'groups.value eq "{two["id"]}"'},  # the filter looks at the groups
             {k: v for k, v in expected.items() if "Page two" in v})):
        store_calls.clear()
        listing = scim.search(**params)
        assert groups_shown(listing) == shown, params
        assert store_calls == {"members.of_users": 1, "groups.get_many_by_uuid": 1}, params
    listed = {r["userName"]: r for r in scim.search()["Resources"]}
    assert listed["page05@example.com"]["groups"] == [
        {"value": one["id"], "$ref": listed["page05@example.com"]["groups"][0]["$ref"], "display": "Page one"},
        {"value": two["id"], "$ref": listed["page05@example.com"]["groups"][1]["$ref"], "display": "Page two"}]
    assert listed["page05@example.com"]["groups"][1]["$ref"].endswith(f"/Groups/{two['id']}")

    store_calls.clear()
    groups = scim.search("/Groups")["Resources"]
    members = {g["displayName"]: sorted(m["value"] for m in g.get("members", [])) for g in groups}
    assert members == {"Page one": sorted(u["id"] for u in users[:8]), "Page two": sorted(u["id"] for u in users[4:])}
    assert store_calls == {"members.of_groups": 1}


class WrittenBefore:
    """A store of a storage written before the reads of many at once: ``hidden`` are
    not there."""

    def __init__(self, store, hidden: tuple[str, ...]):
        self._store, self._hidden = store, hidden

    def __getattr__(self, name):
        if name in self._hidden:
            raise AttributeError(name)
        return getattr(self._store, name)


def test_a_storage_without_the_reads_of_many_shows_the_same_pages(scim, locky_client, monkeypatch):
    users = [scim.user(f"old{i}@example.com", f"Old {i}") for i in range(4)]
    scim.group("Old one", [u["id"] for u in users[:3]])
    scim.group("Old two", [u["id"] for u in users[1:]])
    users_page, groups_page = scim.search(), scim.search("/Groups")
    storage = locky_client.app.context.storage
    monkeypatch.setattr(storage, "members", WrittenBefore(storage.members, ("of_users", "of_groups")))
    monkeypatch.setattr(storage, "groups", WrittenBefore(storage.groups, ("get_many_by_uuid",)))
    assert not hasattr(storage.members, "of_users") and not hasattr(storage.groups, "get_many_by_uuid")
    again = scim.search()
    assert again == users_page
    assert {r["userName"]: [g["display"] for g in r.get("groups", [])] for r in again["Resources"]} == {
        ADMIN: [], "old0@example.com": ["Old one"], "old1@example.com": ["Old one", "Old two"],
        "old2@example.com": ["Old one", "Old two"], "old3@example.com": ["Old two"]}
    assert scim.search('/Groups') == groups_page
    assert scim.search(filter='userName sw "old"')["Resources"] == [
        r for r in users_page["Resources"] if r["userName"].startswith("old")]
