"""A SCIM list response is the document the library's own code makes of the page.

Locky publishes each resource in place, where ``scim2-server`` publishes a deep copy,
and puts its first dump of each resource in the library's envelope, where the library
validates the dumps back into models and dumps them again (``locky.scim.service``:
together about half a page's CPU). These tests make every kind of list request twice
through the same app, once as Locky answers it and once with the library's
``publish`` and ``search_response`` put back, and compare the two answers whole:
pages and their bounds, ``attributes`` and ``excludedAttributes``, filters, both
resource types and the root, ``POST .../.search``, ``count=0`` and no match.
"""

from __future__ import annotations

import gc

import pytest
from scim2_server.service import ScimService

from locky.scim import mapping
from locky.scim.discovery import provider
from locky.scim.service import LockyScimService
from scim_helpers import SEARCH

GET, POST = "GET", "POST"


@pytest.fixture
def people(scim) -> dict:
    """Five users, two groups (one with three members, one empty)."""
    users = [scim.user(f"{name}@example.com", name.title(), externalId=f"hr-{name}",
                       emails=[{"value": f"{name}@example.com", "primary": True}])
             for name in ("ada", "bea", "cy", "dee", "eve")]
    team = scim.group("Team", [user["id"] for user in users[:3]])
    empty = scim.group("Empty")
    return {"users": users, "team": team, "empty": empty}


def requests(people: dict) -> list[tuple[str, str, dict | None, dict | None]]:
    """(method, path, query parameters, body) of every shape of list request."""
    ada, team = people["users"][0], people["team"]
    return [
        (GET, "/Users", None, None),
        (GET, "/Users", {"count": "2"}, None),
        (GET, "/Users", {"startIndex": "4", "count": "2"}, None),
        (GET, "/Users", {"startIndex": "9"}, None),
        (GET, "/Users", {"count": "0"}, None),
        (GET, "/Users", {"attributes": "userName,groups"}, None),
        (GET, "/Users", {"excludedAttributes": "emails,meta"}, None),
        (GET, "/Users", {"filter": 'userName eq "bea@example.com"'}, None),
        (GET, "/Users", {"filter": 'userName sw "d" or externalId eq "hr-ada"', "sortBy": "userName",
                         "sortOrder": "descending"}, None),
        (GET, "/Users", {"filter": f'groups.value eq "{team["id"]}"'}, None),
        (GET, "/Users", {"filter": 'userName eq "nobody@example.com"'}, None),
        (GET, "/Groups", None, None),
        (GET, "/Groups", {"attributes": "members"}, None),
        (GET, "/Groups", {"filter": f'members[value eq "{ada["id"]}"]'}, None),
        (GET, "", {"count": "4"}, None),
        (POST, "/Users/.search", None, {"schemas": [SEARCH], "filter": 'userName co "e"', "count": 3,
                                        "attributes": ["userName", "displayName"]}),
        (POST, "/.search", None, {"schemas": [SEARCH], "startIndex": 2, "excludedAttributes": ["members"]}),
    ]


def answers(scim, people) -> list[tuple[int, dict]]:
    found = []
    for method, path, params, body in requests(people):
        result = scim.call(method, path, body, params=params)
        found.append((result.status_code, result.json))
    return found


def test_list_responses_are_what_the_library_makes_of_the_page(scim, people, monkeypatch):
    locky = answers(scim, people)
    monkeypatch.setattr(LockyScimService, "publish", ScimService.publish)
    monkeypatch.setattr(LockyScimService, "search_response", ScimService.search_response)
    library = answers(scim, people)
    for (method, path, params, body), ours, theirs in zip(requests(people), locky, library):
        assert ours == theirs, (method, path, params, body)

    # and they are real pages: the bounds, the attributes, the members
    pages = {(path, str(params or body)): answer for (_, path, params, body), (_, answer) in zip(requests(people),
                                                                                                  locky)}
    assert all(status == 200 for status, _ in locky), locky
    first = pages[("/Users", "None")]
    assert first["totalResults"] == 5 + 1  # the provisioning client's admin is a user too
    assert first["itemsPerPage"] == len(first["Resources"]) == 6
    assert all(user["meta"]["location"].endswith(f"/scim/v2/Users/{user['id']}") for user in first["Resources"])
    window = pages[("/Users", str({"startIndex": "4", "count": "2"}))]
    assert (window["startIndex"], window["itemsPerPage"]) == (4, 2)
    assert pages[("/Users", str({"count": "0"}))] == {"schemas": first["schemas"], "totalResults": 6,
                                                       "startIndex": 1, "itemsPerPage": 0, "Resources": []}
    members = pages[("/Users", str({"filter": f'groups.value eq "{people["team"]["id"]}"'}))]
    assert sorted(user["userName"] for user in members["Resources"]) == [
        "ada@example.com", "bea@example.com", "cy@example.com"]
    team = next(group for group in pages[("/Groups", str({"attributes": "members"}))]["Resources"]
                if group["id"] == people["team"]["id"])
    assert set(team) == {"schemas", "id", "members"}
    assert all(member["$ref"].endswith(f"/scim/v2/Users/{member['value']}") for member in team["members"])


def test_a_resource_is_published_in_place_and_publishing_twice_changes_nothing(people, locky_client):
    context = locky_client.app.context
    service = LockyScimService(provider(), context)
    group = context.storage.groups.get_by_uuid(people["team"]["id"])
    resource = mapping.group_resource(context, group)
    published = service.publish("http://127.0.0.1:8000/scim/v2", resource)
    assert published is resource
    once = published.model_dump(mode="json")
    assert once["meta"]["location"] == f"http://127.0.0.1:8000/scim/v2/Groups/{group.uuid}"
    assert sorted(member["$ref"] for member in once["members"]) == sorted(
        f"http://127.0.0.1:8000/scim/v2/Users/{user['id']}" for user in people["users"][:3])
    assert service.publish("http://127.0.0.1:8000/scim/v2", published).model_dump(mode="json") == once


def test_requests_build_no_pydantic_model_after_a_garbage_collection(scim, people, monkeypatch):
    """The library parametrizes generic models per request (``ResponseParameters[User]``,
    ``ListResponse[Union[User, Group]]``, ``PatchOp[User]`` ...), which pydantic caches
    weakly: freed by a collection, each was built again by the next request, 3-6 ms of
    CPU. Locky's service keeps them (``locky.scim.service.generic_models``)."""
    import pydantic._internal._generics as generics

    built = []
    original = generics.create_generic_submodel

    def counted(name, *args):
        built.append(name)
        return original(name, *args)

    monkeypatch.setattr(generics, "create_generic_submodel", counted)
    ada, team = people["users"][0], people["team"]
    calls = [
        lambda: scim.get("/Users", count="2"),
        lambda: scim.get(f"/Users/{ada['id']}"),
        lambda: scim.get(f"/Groups/{team['id']}", attributes="members"),
        lambda: scim.call("POST", "/.search", {"schemas": [SEARCH], "count": 2}),
        lambda: scim.call("POST", "/Users/.search", {"schemas": [SEARCH], "count": 2}),
        lambda: scim.patch(f"/Users/{ada['id']}", {"op": "replace", "path": "displayName", "value": "Ada L."}),
    ]
    for call in calls:
        assert call().status_code == 200
        gc.collect()
    assert built == []
