"""Smoke tests of the SCIM 2.0 server (docs/http/scim.md) written while building it,
through Falcon's test client with an admin's real token: discovery, create, read,
the userName filter, 409 on a duplicate, PATCH answering 200 with the resource,
``active=false`` refusing sign-in, a SCIM delete hiding the user from ``/v1``, and the
events ``/v1`` records with ``details.via = "scim"``. The full mapping and the
compliance run are tests/scim/'s other files."""

from __future__ import annotations

import json

import pytest

SCIM = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


@pytest.fixture
def scim(locky_client, locky_admin):
    def call(method: str, path: str, body=None, headers=None, **params):
        return locky_client.simulate_request(
            method, "/scim/v2" + path, params=params or None,
            headers={"Authorization": f"Bearer {locky_admin.access_token}", "Content-Type": SCIM,
                     **(headers or {})},
            body=json.dumps(body) if body is not None else None)
    return call


def new_user(scim, email="ada@example.com", **more):
    result = scim("POST", "/Users", {"schemas": [USER], "userName": email, "displayName": "Ada Lovelace",
                                     "password": "a long provisioned passphrase", **more})
    assert result.status_code == 201, result.text
    return result.json


def test_discovery_needs_no_token(locky_client):
    result = locky_client.simulate_get("/scim/v2/ServiceProviderConfig")
    assert result.status_code == 200
    assert result.headers["content-type"].startswith(SCIM)
    assert result.json["patch"]["supported"] is True
    types = locky_client.simulate_get("/scim/v2/ResourceTypes").json
    assert {r["id"] for r in types["Resources"]} == {"User", "Group"}
    schema = locky_client.simulate_get(f"/scim/v2/Schemas/{USER}").json
    assert "userName" in {a["name"] for a in schema["attributes"]}


def test_users_without_a_token_get_a_scim_401(locky_client):
    result = locky_client.simulate_get("/scim/v2/Users")
    assert result.status_code == 401
    assert result.json["schemas"] == [ERROR]
    assert result.json["status"] == "401"
    assert result.headers["www-authenticate"].startswith("Bearer")


def test_a_plain_user_gets_403(locky_client, locky_user):
    result = locky_client.simulate_get("/scim/v2/Users", headers=locky_user.headers)
    assert result.status_code == 403
    assert result.json["schemas"] == [ERROR]


def test_create_read_and_filter_by_username(scim, locky_client):
    created = new_user(scim, externalId="ext-1")
    assert created["userName"] == "ada@example.com"
    assert created["displayName"] == created["name"]["formatted"] == "Ada Lovelace"
    assert created["active"] is True and created["externalId"] == "ext-1"
    assert "password" not in created
    assert created["meta"]["location"].endswith(f"/scim/v2/Users/{created['id']}")
    read = scim("GET", f"/Users/{created['id']}")
    assert read.status_code == 200 and read.json["id"] == created["id"]
    assert read.headers["etag"] == created["meta"]["version"]
    found = scim("GET", "/Users", filter='userName eq "ADA@example.com"')
    assert found.status_code == 200, found.text
    assert found.json["totalResults"] == 1 and found.json["Resources"][0]["id"] == created["id"]
    none = scim("GET", "/Users", filter='userName eq "nobody@example.com"')
    assert none.json["totalResults"] == 0


def test_duplicate_username_is_409_uniqueness(scim):
    new_user(scim)
    again = scim("POST", "/Users", {"schemas": [USER], "userName": "Ada@Example.com", "displayName": "Other"})
    assert again.status_code == 409, again.text
    assert again.json["scimType"] == "uniqueness"


def test_bad_username_is_400_invalid_value(scim):
    result = scim("POST", "/Users", {"schemas": [USER], "userName": "not an address"})
    assert result.status_code == 400
    assert result.json["scimType"] == "invalidValue"


def test_patch_answers_200_and_inactive_cannot_sign_in(scim, locky_client, locky_admin):
    created = new_user(scim)
    login = locky_client.simulate_post("/v1/public/users/login",
                                       json={"email": "ada@example.com", "password": "a long provisioned passphrase"})
    assert login.status_code == 200
    patched = scim("PATCH", f"/Users/{created['id']}",
                   {"schemas": [PATCH], "Operations": [{"op": "replace", "path": "active", "value": False}]})
    assert patched.status_code == 200, patched.text
    assert patched.json["active"] is False
    refused = locky_client.simulate_post("/v1/public/users/login",
                                         json={"email": "ada@example.com", "password": "a long provisioned passphrase"})
    assert refused.status_code == 403
    assert locky_client.simulate_get("/v1/internal/users/me",
                                     headers={"Authorization": f"Bearer {login.json['access_token']}"}).status_code == 401
    events = locky_client.simulate_get("/v1/internal/audit", params={"event": "user.disabled"},
                                       headers=locky_admin.headers).json["events"]
    assert events[0]["target_uuid"] == created["id"]
    assert events[0]["details"]["via"] == "scim"
    assert events[0]["actor_uuid"] == locky_admin.uuid


def test_delete_hides_the_user_from_v1(scim, locky_client, locky_admin):
    created = new_user(scim)
    v1 = locky_client.simulate_get("/v1/internal/users", params={"email": "ada@example.com"},
                                   headers=locky_admin.headers).json["users"]
    assert [u["uuid"] for u in v1] == [created["id"]]
    assert scim("DELETE", f"/Users/{created['id']}").status_code == 204
    assert locky_client.simulate_get("/v1/internal/users", params={"email": "ada@example.com"},
                                     headers=locky_admin.headers).json["users"] == []
    assert scim("GET", f"/Users/{created['id']}").status_code == 404
    registered = locky_client.simulate_get("/v1/internal/audit", params={"event": "user.*"},
                                           headers=locky_admin.headers).json["events"]
    by_name = {e["event"]: e for e in registered if e["target_uuid"] == created["id"]}
    assert by_name["user.registered"]["details"]["via"] == "scim"
    assert by_name["user.deleted"]["details"]["via"] == "scim"


def test_group_with_members_and_member_patch(scim, locky_client, locky_admin):
    ada = new_user(scim)
    bob = new_user(scim, "bob@example.com")
    group = scim("POST", "/Groups", {"schemas": [GROUP], "displayName": "Engineering",
                                     "members": [{"value": ada["id"]}]})
    assert group.status_code == 201, group.text
    assert [m["value"] for m in group.json["members"]] == [ada["id"]]
    added = scim("PATCH", f"/Groups/{group.json['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "add", "path": "members", "value": [{"value": bob["id"]}]}]})
    assert added.status_code == 200, added.text
    assert {m["value"] for m in added.json["members"]} == {ada["id"], bob["id"]}
    removed = scim("PATCH", f"/Groups/{group.json['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "remove", "path": f'members[value eq "{ada["id"]}"]'}]})
    assert removed.status_code == 200, removed.text
    assert [m["value"] for m in removed.json["members"]] == [bob["id"]]
    members = locky_client.simulate_get("/v1/internal/members", params={"group_uuid": group.json["id"]},
                                        headers=locky_admin.headers).json["members"]
    assert [(m["user_uuid"], m["role"]) for m in members] == [(bob["id"], "member")]


def test_a_provisioning_client_cannot_take_over_an_admin(locky_client, locky_admin, provisioner):
    from scim_helpers import Scim

    client = Scim(locky_client, provisioner.token)
    made = client.user("carol@example.com", "Carol")
    assert client.patch(f"/Users/{made['id']}", {"op": "replace", "path": "displayName",
                                                  "value": "Carol C"}).status_code == 200
    for attempt in (client.patch(f"/Users/{locky_admin.uuid}", {"op": "replace", "path": "password",
                                                                 "value": "a thief's new passphrase"}),
                    client.patch(f"/Users/{locky_admin.uuid}", {"op": "replace", "path": "userName",
                                                                 "value": "thief@example.com"}),
                    client.delete(f"/Users/{locky_admin.uuid}")):
        assert attempt.status_code == 403, attempt.text
        assert attempt.json["schemas"] == [ERROR]
    assert locky_client.simulate_get("/v1/internal/users/me", headers=locky_admin.headers).status_code == 200
    events = locky_client.simulate_get("/v1/internal/audit", params={"event": "user.registered"},
                                       headers=locky_admin.headers).json["events"]
    mine = [e for e in events if e["target_uuid"] == made["id"]]
    assert mine[0]["actor_uuid"] == provisioner.subject and mine[0]["details"]["via"] == "scim"


def test_head_etag_and_if_match(scim):
    created = new_user(scim)
    head = scim("HEAD", f"/Users/{created['id']}")
    assert head.status_code == 200 and head.text == ""
    stale = scim("PATCH", f"/Users/{created['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "replace", "path": "displayName", "value": "Ada King"}]}, headers={"If-Match": 'W/"stale"'})
    assert stale.status_code == 412, stale.text
    fresh = scim("PATCH", f"/Users/{created['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "replace", "path": "displayName", "value": "Ada King"}]},
        headers={"If-Match": created["meta"]["version"]})
    assert fresh.status_code == 200 and fresh.json["displayName"] == "Ada King"
    assert fresh.json["meta"]["version"] != created["meta"]["version"]


def test_a_scan_past_the_cap_is_too_many_but_an_indexed_filter_answers(scim, monkeypatch):
    from locky.scim import filters

    new_user(scim)
    new_user(scim, "bob@example.com")
    monkeypatch.setattr(filters, "SCAN_CAP", 2)  # the admin and the two users: three
    too_many = scim("GET", "/Users", filter='displayName co "a"')
    assert too_many.status_code == 400 and too_many.json["scimType"] == "tooMany", too_many.text
    found = scim("GET", "/Users", filter='userName eq "bob@example.com"')
    assert found.status_code == 200 and found.json["totalResults"] == 1


def test_group_names_compare_exactly_as_locky_compares_them(scim):
    schema = scim("GET", f"/Schemas/{GROUP}").json
    assert {a["name"]: a["caseExact"] for a in schema["attributes"]}["displayName"] is True
    for name in ("Research", "research"):
        assert scim("POST", "/Groups", {"schemas": [GROUP], "displayName": name}).status_code == 201
    exact = scim("GET", "/Groups", filter='displayName eq "Research"').json
    assert [g["displayName"] for g in exact["Resources"]] == ["Research"]
    scanned = scim("GET", "/Groups", filter='displayName sw "R"').json
    assert [g["displayName"] for g in scanned["Resources"]] == ["Research"]


def test_an_admin_changes_no_own_credentials_nor_disables_themself_through_scim(scim, locky_admin):
    me = f"/Users/{locky_admin.uuid}"
    for path, value, status in (("password", "a brand new passphrase", 403),
                                ("userName", "elsewhere@example.com", 403), ("active", False, 400)):
        result = scim("PATCH", me, {"schemas": [PATCH], "Operations": [{"op": "replace", "path": path,
                                                                         "value": value}]})
        assert result.status_code == status, (path, result.text)
    renamed = scim("PATCH", me, {"schemas": [PATCH], "Operations": [{"op": "replace", "path": "displayName",
                                                                     "value": "The Admin"}]})
    assert renamed.status_code == 200 and renamed.json["displayName"] == "The Admin"


def test_a_body_over_the_limit_is_413_and_nul_text_a_400(scim, locky_app):
    limit = locky_app.context.settings.max_body_bytes
    big = scim("POST", "/Users", {"schemas": [USER], "userName": "big@example.com", "displayName": "x" * limit})
    assert big.status_code == 413 and big.json["schemas"] == [ERROR], big.text
    nul = scim("POST", "/Users", {"schemas": [USER], "userName": "nul@example.com", "displayName": "a\u0000b"})
    assert nul.status_code == 400 and nul.json["scimType"] == "invalidValue", nul.text


def test_an_external_id_over_255_characters_is_a_400(scim):
    for path, body in (("/Users", {"schemas": [USER], "userName": "long@example.com", "externalId": "e" * 256}),
                       ("/Groups", {"schemas": [GROUP], "displayName": "Long", "externalId": "e" * 256})):
        result = scim("POST", path, body)
        assert result.status_code == 400 and result.json["scimType"] == "invalidValue", result.text


def test_ids_that_are_no_uuid_name_nothing(scim):
    assert scim("GET", "/Users/" + "x" * 300).status_code == 404
    assert scim("DELETE", "/Groups/abc").status_code == 404
    bad_member = scim("POST", "/Groups", {"schemas": [GROUP], "displayName": "G", "members": [{"value": "y" * 300}]})
    assert bad_member.status_code == 400 and bad_member.json["scimType"] == "invalidValue", bad_member.text
    assert scim("GET", "/Users", filter='id eq "' + "z" * 300 + '"').json["totalResults"] == 0
    assert scim("GET", "/Groups", filter='externalId eq "' + "z" * 300 + '"').json["totalResults"] == 0
