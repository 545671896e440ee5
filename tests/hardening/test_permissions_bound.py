"""Issue 31, finding 10: ``GET /v1/internal/authz/permissions`` had no bound.

It listed every group of the user in one answer (2.8 s and 3.5 MB for a user in 2,000
groups; three clients of one plain user starved the health probes). docs/http/accounts.md: answers
that can be large are paged or capped. It is now keyset-paged over the user's groups like
every list (docs/http/README.md#lists): ``limit`` 1-500 (default 50), ``after_id`` a membership id,
``next_after_id`` present only while more groups follow; the global permissions come on the first page.
The batch check stays capped at 100 questions.
"""

from __future__ import annotations

import pytest

from authz_helpers import assert_fields, create_group

PERMISSIONS = "/v1/internal/authz/permissions"
#: More groups than the default page holds, and not a multiple of the pages below.
GROUPS = 123


@pytest.fixture
def busy(locky_client):
    """A plain user who owns ``GROUPS`` groups: a membership in each."""
    user = locky_client.account("busy@example.com")
    groups = [create_group(locky_client, user, f"g{n}") for n in range(GROUPS)]
    return user, groups


def page(client, caller, user_uuid, **params) -> dict:
    result = client.simulate_get(PERMISSIONS, params={"user_uuid": user_uuid, **params}, headers=caller.headers)
    assert result.status_code == 200, result.text
    # next_after_id is there exactly when more groups follow (the last page's body, docs/http/authorization.md).
    assert set(result.json) in ({"permissions"}, {"permissions", "next_after_id"}), result.json
    assert result.json.get("next_after_id", 0) is not None, result.json
    return result.json


def groups_in(answer: dict) -> set[str]:
    return {p["group_uuid"] for p in answer["permissions"] if p["group_uuid"] is not None}


def has_global(answer: dict) -> bool:
    return any(p["scope"] != "group" and p["group_uuid"] is None for p in answer["permissions"])


def test_one_answer_holds_at_most_a_page_of_groups(locky_client, busy):
    user, groups = busy
    first = page(locky_client, user, user.uuid)
    assert len(groups_in(first)) == 50
    assert first["next_after_id"] > 0
    assert has_global(first)


@pytest.mark.parametrize("limit", [1, 7, 50, 500])
def test_walking_the_pages_lists_every_group_once(locky_client, busy, limit):
    user, groups = busy
    seen: list[str] = []
    globals_on: list[int] = []
    after, pages = 0, 0
    while True:
        answer = page(locky_client, user, user.uuid, limit=limit, after_id=after)
        assert len(groups_in(answer)) <= limit
        if has_global(answer):
            globals_on.append(pages)
        seen += sorted(groups_in(answer))
        pages += 1
        if "next_after_id" not in answer:
            break
        assert answer["next_after_id"] > after
        after = answer["next_after_id"]
        assert pages <= GROUPS + 1, "the pages never end"
    assert sorted(seen) == sorted(g["uuid"] for g in groups)  # each group once
    assert globals_on == [0]  # what holds globally: on the first page only
    assert pages == -(-GROUPS // limit)


def test_a_page_of_groups_says_what_the_owner_may_do_there(locky_client, busy):
    user, groups = busy
    answer = page(locky_client, user, user.uuid, limit=3)
    for group_uuid in groups_in(answer):
        mine = {(p["resource"], p["action"]) for p in answer["permissions"] if p["group_uuid"] == group_uuid}
        assert {("groups", "delete"), ("members", "*")} <= mine


def test_one_group_is_one_page(locky_client, busy):
    user, groups = busy
    answer = page(locky_client, user, user.uuid, group_uuid=groups[-1]["uuid"], limit=1)
    assert groups_in(answer) == {groups[-1]["uuid"]} and "next_after_id" not in answer
    assert has_global(answer)


@pytest.mark.parametrize("params, field", [
    ({"limit": "0"}, "limit"),
    ({"limit": "501"}, "limit"),
    ({"limit": "many"}, "limit"),
    ({"after_id": "-1"}, "after_id"),
])
def test_page_sizes_outside_1_to_500_are_400(locky_client, locky_user, params, field):
    result = locky_client.simulate_get(PERMISSIONS, params={"user_uuid": locky_user.uuid, **params},
                                       headers=locky_user.headers)
    assert_fields(result, field)


def test_the_batch_check_stays_capped(locky_client, locky_user):
    item = {"user_uuid": locky_user.uuid, "resource": "groups", "action": "read"}
    result = locky_client.simulate_post("/v1/internal/authz/check", json={"checks": [item] * 101},
                                        headers=locky_user.headers)
    assert_fields(result, "checks")


def test_the_swagger_operation_documents_the_paging(locky_client, locky_user):
    doc = locky_client.simulate_get("/swagger/doc.json").json
    paths = {doc.get("basePath", "") + path: value for path, value in doc["paths"].items()}
    operation = paths[PERMISSIONS]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"limit", "after_id", "user_uuid", "group_uuid"} <= names
    assert "next_after_id" in operation["description"] and "1-500" in operation["description"]
