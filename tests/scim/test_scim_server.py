"""SCIM on a real ``locky serve`` (two workers; SQLite, and PostgreSQL and MariaDB when
configured) as provisioning systems use it: many accounts from one address, and
requests in parallel, where a race decides in the database, never with a 500 or a
duplicate.

- An initial import creates more users from one client address than the anonymous
  sign-up limit per address allows (``LOCKY_SIGNUP_MAX_PER_IP``, 30 an hour by default):
  an authenticated provisioning client is not held to it.
- One address created by many requests at once: one 201, every other a 409
  ``uniqueness``, one live user.
- One member added to a group by many PATCHes at once: one membership.
- Many different members added at once, without ``If-Match``: every one of them, each
  once (a client that did not ask for a condition gets no 412).
- A deprovisioning (``active: false``) racing profile pushes (a PUT without ``active``,
  a PATCH of ``displayName``): the account stays off, whatever lands first; a push that
  read the account before it was turned off gets 409, never re-enables it.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from scim_helpers import GROUP, PATCH_OP, USER

pytestmark = [pytest.mark.server, pytest.mark.slow]

PARALLEL = 8


@pytest.fixture(scope="module")
def token(scim_server) -> str:
    return scim_server.token(scim_server.machine_client("Provisioning", "provisioner"))


def at_once(calls):
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def test_one_address_created_at_once_is_one_user(scim_server, token):
    address = f"race-{uuid.uuid4().hex[:8]}@example.com"
    body = {"schemas": [USER], "userName": address, "displayName": "Race"}
    answers = at_once([lambda: scim_server.call(token, "POST", "/Users", body)] * PARALLEL)
    statuses = sorted(status for status, _ in answers)
    assert statuses == [201] + [409] * (PARALLEL - 1), answers
    assert all(b["scimType"] == "uniqueness" for s, b in answers if s == 409), answers
    status, listing = scim_server.call(token, "GET", f'/Users?filter=userName%20eq%20%22{address}%22')
    assert status == 200 and listing["totalResults"] == 1, listing


def test_one_member_added_at_once_is_one_membership(scim_server, token):
    status, user = scim_server.call(token, "POST", "/Users", {"schemas": [USER], "userName":
                                                              f"m-{uuid.uuid4().hex[:8]}@example.com"})
    assert status == 201, user
    status, group = scim_server.call(token, "POST", "/Groups", {"schemas": [GROUP],
                                                                "displayName": f"Race {uuid.uuid4().hex[:8]}"})
    assert status == 201, group
    patch = {"schemas": [PATCH_OP], "Operations": [{"op": "add", "path": "members", "value": [{"value": user["id"]}]}]}
    answers = at_once([lambda: scim_server.call(token, "PATCH", f"/Groups/{group['id']}", patch)] * PARALLEL)
    assert all(status in (200, 409, 412) for status, _ in answers), answers
    assert any(status == 200 for status, _ in answers), answers
    status, read = scim_server.call(token, "GET", f"/Groups/{group['id']}")
    assert [m["value"] for m in read["members"]] == [user["id"]], read


def test_different_members_added_at_once_are_all_kept(scim_server, token):
    users = []
    for n in range(PARALLEL):
        status, user = scim_server.call(token, "POST", "/Users", {
            "schemas": [USER], "userName": f"many-{n}-{uuid.uuid4().hex[:8]}@example.com"})
        assert status == 201, user
        users.append(user["id"])
    status, group = scim_server.call(token, "POST", "/Groups", {"schemas": [GROUP],
                                                                "displayName": f"Many {uuid.uuid4().hex[:8]}"})
    assert status == 201, group

    def add(user_id):
        return lambda: scim_server.call(token, "PATCH", f"/Groups/{group['id']}", {
            "schemas": [PATCH_OP], "Operations": [{"op": "add", "path": "members", "value": [{"value": user_id}]}]})

    answers = at_once([add(user_id) for user_id in users])
    assert all(status == 200 for status, _ in answers), answers
    status, read = scim_server.call(token, "GET", f"/Groups/{group['id']}")
    assert sorted(m["value"] for m in read["members"]) == sorted(users), read


def test_an_import_is_not_held_to_the_anonymous_sign_up_limit(scim_server, token):
    run = uuid.uuid4().hex[:8]
    statuses = [scim_server.call(token, "POST", "/Users", {"schemas": [USER], "userName":
                                                           f"import-{run}-{n}@example.com"})[0] for n in range(35)]
    assert statuses == [201] * 35, statuses
    anonymous = scim_server.server.request("POST", "/v1/public/users/register", {
        "name": "Visitor", "email": f"visitor-{run}@example.com", "password": "Correct horse battery 1"})
    assert anonymous[0] == 201, anonymous  # the SCIM creations did not use up the address's allowance


ROUNDS = 25


def test_a_deprovisioning_racing_profile_pushes_is_never_undone(scim_server, token):
    for round_ in range(ROUNDS):
        address = f"deprov-{round_}-{uuid.uuid4().hex[:8]}@example.com"
        status, user = scim_server.call(token, "POST", "/Users", {"schemas": [USER], "userName": address,
                                                                  "displayName": "Before"})
        assert status == 201, user
        path = f"/Users/{user['id']}"
        off = {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "active", "value": False}]}
        put = {"schemas": [USER], "userName": address, "displayName": "Pushed"}  # no "active"
        rename = {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "displayName", "value": "Renamed"}]}
        calls = [lambda: scim_server.call(token, "PATCH", path, off)]
        calls += [lambda: scim_server.call(token, "PUT", path, put)] * 3
        calls += [lambda: scim_server.call(token, "PATCH", path, rename)] * 3
        answers = at_once(calls)
        assert answers[0][0] == 200 and answers[0][1]["active"] is False, answers[0]
        assert all(status in (200, 409) for status, _ in answers), answers
        status, read = scim_server.call(token, "GET", path)
        assert status == 200 and read["active"] is False, (round_, answers, read)
