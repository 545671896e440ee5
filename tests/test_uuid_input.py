"""Uuids a client sends (issue 20): one rule, :class:`locky.schemas.Uuid`, for every
body field and query filter that names a record by uuid.

Accepted: the hyphenated form in any case, of any RFC 9562 version (1-8), lowercased
before anything reads it, so an upper-case uuid finds its record and is stored and
answered lowercase; a valid uuid naming nothing is "no such record" (an empty list, a
denial, ``No such user.``), never "not a uuid". Refused, with the field map of docs/http/README.md
``{"<field>": "Not a valid UUID."}``: braces, ``urn:uuid:``, no hyphens, the nil and
max uuids, spaces around it. The Swagger document states the same rule. No route takes
a uuid in its path (records are addressed by ``{id}``), and a test keeps it so.
"""

from __future__ import annotations

import re

import pytest

from authz_helpers import assert_fields
from locky.audit.schemas import ACTOR_PATTERN
from locky.schemas import UUID_PATTERN

MEMBERS = "/v1/private/members"
GROUPS = "/v1/private/groups"
V1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846"  # RFC 9562 appendix A's version 1 example
V7 = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"  # and its version 7 example
REFUSED = [
    "{3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c}",
    "urn:uuid:3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c",
    "3f2b6c1e8a4d4e5f9b7c2d1e0f9a8b7c",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    " 3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c",
    "3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c\n",
    "3f2b6c1e-8a4d-4e5f-cb7c-2d1e0f9a8b7c",  # not the RFC variant
    "3f2b6c1e-8a4d-0e5f-9b7c-2d1e0f9a8b7c",  # version 0: none the RFC defines
    "3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7g",
    "not-a-uuid",
    "",
]


def ok(result, status: int = 200):
    assert result.status_code == status, result.text
    return result.json


@pytest.fixture
def group(locky_client, locky_admin):
    return ok(locky_client.simulate_post(GROUPS, json={"name": "Uuids"}, headers=locky_admin.headers), 201)


@pytest.fixture
def member(locky_client, locky_admin, locky_user, group):
    """``locky_user`` added to ``group`` by upper-case uuids."""
    body = {"group_uuid": group["uuid"].upper(), "user_uuid": locky_user.uuid.upper()}
    return ok(locky_client.simulate_post(MEMBERS, json=body, headers=locky_admin.headers), 201)


def get(client, account, path, **params):
    return client.simulate_get(path, params=params, headers=account.headers)


# -- in a body ---------------------------------------------------------------------------


def test_an_upper_case_uuid_in_a_body_is_stored_and_answered_lowercase(locky_client, locky_admin, locky_user,
                                                                       group, member):
    assert (member["group_uuid"], member["user_uuid"]) == (group["uuid"], locky_user.uuid)
    stored = ok(get(locky_client, locky_admin, f"/v1/internal/members/{member['id']}"))
    assert (stored["group_uuid"], stored["user_uuid"]) == (group["uuid"], locky_user.uuid)
    # The same membership by its lowercase uuids is the one already there.
    again = locky_client.simulate_post(MEMBERS, json={"group_uuid": group["uuid"], "user_uuid": locky_user.uuid},
                                       headers=locky_admin.headers)
    assert again.status_code == 400, again.text


def test_a_mixed_case_uuid_in_a_batch_check_is_the_same_user(locky_client, locky_admin):
    mixed = "".join(c.upper() if i % 2 else c for i, c in enumerate(locky_admin.uuid))
    body = {"checks": [{"user_uuid": u, "resource": "users", "action": "read"} for u in (locky_admin.uuid, mixed)]}
    result = ok(locky_client.simulate_post("/v1/internal/authz/check", json=body, headers=locky_admin.headers))
    assert result == {"results": [{"allowed": True}, {"allowed": True}]}


@pytest.mark.parametrize("absent", [V1, V7, V7.upper()])
def test_a_valid_uuid_of_another_version_naming_nothing_is_no_such_record(locky_client, locky_admin, group, absent):
    result = locky_client.simulate_post(MEMBERS, json={"group_uuid": group["uuid"], "user_uuid": absent},
                                        headers=locky_admin.headers)
    assert_fields(result, user_uuid="No such user.")


@pytest.mark.parametrize("value", REFUSED)
def test_other_spellings_are_refused_with_the_contract_field_map(locky_client, locky_admin, group, value):
    result = locky_client.simulate_post(MEMBERS, json={"group_uuid": group["uuid"], "user_uuid": value},
                                        headers=locky_admin.headers)
    assert_fields(result, user_uuid="Not a valid UUID.")
    assert result.json == {"user_uuid": "Not a valid UUID."}


# -- in a query --------------------------------------------------------------------------


def test_an_upper_case_uuid_filter_matches(locky_client, locky_admin, locky_user, group, member):
    upper = locky_user.uuid.upper()
    listed = ok(get(locky_client, locky_admin, "/v1/internal/members", user_uuid=upper, group_uuid=group["uuid"].upper()))
    assert [m["id"] for m in listed["members"]] == [member["id"]]
    assert ok(get(locky_client, locky_admin, "/v1/internal/members/count", user_uuid=upper)) == {"count": 1}
    decision = ok(get(locky_client, locky_admin, "/v1/internal/authz/check", user_uuid=upper,
                      group_uuid=group["uuid"].upper(), resource="groups", action="read"))
    assert decision == ok(get(locky_client, locky_admin, "/v1/internal/authz/check", user_uuid=locky_user.uuid,
                              group_uuid=group["uuid"], resource="groups", action="read"))
    granted = ok(get(locky_client, locky_admin, "/v1/internal/authz/permissions", user_uuid=upper))
    assert granted == ok(get(locky_client, locky_admin, "/v1/internal/authz/permissions", user_uuid=locky_user.uuid))
    assert granted["permissions"]


def test_upper_case_uuid_filters_of_the_audit_trail_match(locky_client, locky_admin, member):
    by_actor = ok(get(locky_client, locky_admin, "/v1/internal/audit", actor_uuid=locky_admin.uuid.upper(),
                      event="member.added"))
    assert [e["target_uuid"] for e in by_actor["events"]] == [member["uuid"]]
    by_target = ok(get(locky_client, locky_admin, "/v1/internal/audit", target_uuid=member["uuid"].upper()))
    assert [e["event"] for e in by_target["events"]] == ["member.added"]


@pytest.mark.parametrize("absent", [V1, V7])
def test_a_valid_uuid_filter_naming_nothing_finds_nothing(locky_client, locky_admin, member, absent):
    assert ok(get(locky_client, locky_admin, "/v1/internal/members", user_uuid=absent))["members"] == []
    assert ok(get(locky_client, locky_admin, "/v1/internal/audit", actor_uuid=absent))["events"] == []
    assert ok(get(locky_client, locky_admin, "/v1/internal/audit", target_uuid=absent))["events"] == []
    assert ok(get(locky_client, locky_admin, "/v1/internal/authz/check", user_uuid=absent, resource="users",
                  action="read")) == {"allowed": False}
    assert ok(get(locky_client, locky_admin, "/v1/internal/authz/permissions", user_uuid=absent)) == {"permissions": []}


@pytest.mark.parametrize("path, name", [("/v1/internal/members", "user_uuid"), ("/v1/internal/members", "group_uuid"),
                                        ("/v1/internal/audit", "actor_uuid"),
                                        ("/v1/internal/authz/permissions", "user_uuid")])
def test_refused_spellings_in_a_query_are_the_contract_field_map(locky_client, locky_admin, path, name):
    for value in REFUSED:
        result = get(locky_client, locky_admin, path, **{name: value})
        assert result.status_code == 400 and result.json == {name: "Not a valid UUID."}, (value, result.text)


# -- paths and the Swagger document ------------------------------------------------------


def test_no_route_takes_a_uuid_in_its_path(locky_app):
    """Records are addressed by ``{id}``; a route taking a uuid would need the rule above
    (a converter lowercasing it) before it could be added."""
    for route in locky_app.routes:
        for name in re.findall(r"\{(\w+)", route.path):
            assert "uuid" not in name, route.path


def test_a_uuid_in_a_path_is_no_route(locky_client, locky_admin):
    assert locky_client.simulate_get(f"/v1/internal/users/{locky_admin.uuid.upper()}",
                                     headers=locky_admin.headers).status_code == 404


def _uuid_inputs(doc: dict) -> list[tuple[str, dict]]:
    """Every query parameter and request-body property of the document naming a record by uuid."""
    found = [(f"{path} {name}", parameter) for path, operations in doc["paths"].items()
             for operation in operations.values() for parameter in operation.get("parameters", [])
             if (name := parameter["name"]).endswith("_uuid") and parameter["in"] == "query"]
    found += [(f"{definition} {name}", schema) for definition in ("MemberRequest", "AuthzCheckItem")
              for name, schema in doc["definitions"][definition]["properties"].items() if name.endswith("_uuid")]
    return found


def test_the_document_states_the_accepted_uuids(locky_app):
    import jsonschema_rs

    inputs = _uuid_inputs(locky_app.swagger)
    assert len(inputs) >= 12
    for where, schema in inputs:
        if where == "/internal/audit target_uuid":
            continue  # a uuid or a key's kid: free text
        rule = {k: v for k, v in schema.items() if k in ("type", "pattern")}
        if where == "/internal/audit actor_uuid":  # a user's uuid, or a machine client's client:CLIENT_ID
            assert rule == {"type": "string", "pattern": ACTOR_PATTERN}, where
            assert jsonschema_rs.Draft4Validator(rule).is_valid("client:reports")
        else:
            assert rule == {"type": "string", "pattern": UUID_PATTERN}, where
        validator = jsonschema_rs.Draft4Validator(rule)
        for value in (V1, V7, V7.upper(), "3F2B6C1E-8a4d-4E5F-9b7c-2d1e0f9a8b7c"):
            assert validator.is_valid(value), (where, value)
        for value in REFUSED:
            assert not validator.is_valid(value), (where, value)
