"""Issue 31, finding 9: maintainers handed out any custom role, whatever it permitted.

``maintainer`` holds ``members`` × ``assign:custom``, so through a custom role with
``members`` × ``*`` a maintainer's second account made itself an owner and removed the
original one, and through one with ``groups`` × ``delete`` it deleted the group. Now a
role may be given only by someone who holds, in that group, all it could do there in
Locky (each group-scoped check its permissions cover, as ``GET /v1/internal/roles``
lists them), besides ``members`` × ``assign:<role>``; admins hold them all. A refusal is the policy's 403 and writes nothing.
"""

from __future__ import annotations

import pytest

from authz_helpers import add_member, assert_forbidden, create_group, create_role, listing

MEMBERS = "/v1/private/members"


def post(client, account, group: dict, user_uuid: str, role: str):
    return client.simulate_post(MEMBERS, json={"group_uuid": group["uuid"], "user_uuid": user_uuid, "role": role},
                                headers=account.headers)


def live_roles(client, account, group: dict) -> dict[str, str]:
    return {m["user_uuid"]: m["role"] for m in listing(client, account, "members", group_uuid=group["uuid"])}


@pytest.fixture
def team(locky_client, locky_admin):
    c = locky_client
    owner, maintainer, sock = (c.account(f"{n}@example.com") for n in ("owner", "maintainer", "sock"))
    group = create_group(c, owner, "team")
    add_member(c, owner, group, maintainer.uuid, "maintainer")
    return {"client": c, "admin": locky_admin, "owner": owner, "maintainer": maintainer, "sock": sock,
            "group": group}


def role(team, name: str, *permissions: tuple[str, str]) -> str:
    return create_role(team["client"], team["admin"], name, permissions)["name"]


# -- the reported paths ------------------------------------------------------------


def test_a_maintainer_cannot_give_a_role_with_members_wildcard(team):
    """The reported chain: the second account would make itself owner, then remove
    the original owner."""
    c, maintainer, sock, group, owner = team["client"], team["maintainer"], team["sock"], team["group"], team["owner"]
    name = role(team, "co-owner", ("members", "*"))
    refused = post(c, maintainer, group, sock.uuid, name)
    assert_forbidden(refused)
    assert "members:*" in refused.json["description"]
    assert sock.uuid not in live_roles(c, owner, group)
    # Without the membership the second account can do nothing to the group.
    assert_forbidden(post(c, sock, group, sock.uuid, "owner"))
    assert live_roles(c, owner, group) == {owner.uuid: "owner", maintainer.uuid: "maintainer"}


def test_a_maintainer_cannot_give_a_role_that_deletes_the_group(team):
    c, maintainer, sock, group, owner = team["client"], team["maintainer"], team["sock"], team["group"], team["owner"]
    name = role(team, "demolisher", ("groups", "delete"))
    assert_forbidden(post(c, maintainer, group, sock.uuid, name))
    assert_forbidden(c.simulate_delete(f"/v1/private/groups/{group['id']}", headers=sock.headers))
    assert c.simulate_get(f"/v1/internal/groups/{group['id']}", headers=owner.headers).status_code == 200


@pytest.mark.parametrize("permissions", [
    [("groups", "write")],  # delete through write
    [("groups", "*")],
    [("*", "*")],
    [("members", "assign:owner")],
    [("groups", "read"), ("members", "create"), ("groups", "write")],  # one of them is too much
    [("members", "assign:*")],
])
def test_a_maintainer_cannot_give_a_role_carrying_more_than_they_hold(team, permissions):
    c, maintainer, sock, group = team["client"], team["maintainer"], team["sock"], team["group"]
    name = role(team, "too-much", *permissions)
    assert_forbidden(post(c, maintainer, group, sock.uuid, name))
    assert sock.uuid not in live_roles(c, team["owner"], group)


# -- what still works ----------------------------------------------------------------


@pytest.mark.parametrize("permissions", [
    [],
    [("groups", "read"), ("users", "read")],  # what every user holds
    [("groups", "update"), ("members", "create"), ("members", "assign:viewer")],  # a part of maintainer's
    [("members", "write")],
])
def test_a_maintainer_gives_a_custom_role_they_hold_every_permission_of(team, permissions):
    c, maintainer, sock, group = team["client"], team["maintainer"], team["sock"], team["group"]
    name = role(team, "helper", *permissions)
    added = post(c, maintainer, group, sock.uuid, name)
    assert added.status_code == 201, added.text
    assert c.simulate_delete(f"{MEMBERS}/{added.json['id']}", headers=maintainer.headers).status_code == 204


@pytest.mark.parametrize("builtin", ["maintainer", "member", "viewer"])
def test_a_maintainer_still_gives_the_builtin_roles_below_owner(team, builtin):
    c, maintainer, sock, group = team["client"], team["maintainer"], team["sock"], team["group"]
    added = post(c, maintainer, group, sock.uuid, builtin)
    assert added.status_code == 201, added.text


def test_a_maintainer_never_makes_an_owner(team):
    c, maintainer, sock, group = team["client"], team["maintainer"], team["sock"], team["group"]
    assert_forbidden(post(c, maintainer, group, sock.uuid, "owner"))
    assert sock.uuid not in live_roles(c, team["owner"], group)


@pytest.mark.parametrize("permissions", [
    [("members", "*")], [("groups", "delete")], [("groups", "write"), ("members", "*")], [],
])
def test_an_owner_gives_roles_within_what_owners_hold(team, permissions):
    c, owner, sock, group = team["client"], team["owner"], team["sock"], team["group"]
    name = role(team, "deputy", *permissions)
    added = post(c, owner, group, sock.uuid, name)
    assert added.status_code == 201, added.text
    assert post(c, owner, group, team["client"].account("second@example.com").uuid, "owner").status_code == 201


def test_a_role_with_an_applications_permissions_is_given_as_the_policy_assigns_it(team):
    """A client application's permissions are no power over Locky's records: a role
    carrying only ``reports`` × ``read`` is given by owners and maintainers alike, as
    ``members`` × ``assign:<role>`` says (custom roles: both); one that also carries
    ``groups`` × ``delete`` is not, by a maintainer."""
    c, owner, maintainer, sock, group = (team[k] for k in ("client", "owner", "maintainer", "sock", "group"))
    name = role(team, "reporter", ("reports", "read"), ("reports", "export"))
    for giver in (owner, maintainer):
        added = post(c, giver, group, sock.uuid, name)
        assert added.status_code == 201, added.text
        assert c.simulate_delete(f"{MEMBERS}/{added.json['id']}", headers=giver.headers).status_code == 204
    mixed = role(team, "reporter-plus", ("reports", "read"), ("groups", "delete"))
    assert_forbidden(post(c, maintainer, group, sock.uuid, mixed))


def test_an_admin_gives_every_role_in_any_group(team):
    c, admin, sock, group = team["client"], team["admin"], team["sock"], team["group"]
    name = role(team, "everything", ("*", "*"))
    added = post(c, admin, group, sock.uuid, name)
    assert added.status_code == 201, added.text


def test_a_role_that_gained_a_permission_is_judged_by_what_it_carries_now(team):
    c, admin, maintainer, sock, group = (team[k] for k in ("client", "admin", "maintainer", "sock", "group"))
    created = create_role(c, admin, "grower", [("groups", "read")])
    changed = c.simulate_put(f"/v1/private/roles/{created['id']}", headers=admin.headers,
                             json={"permissions": [{"resource": "groups", "action": "delete"}]})
    assert changed.status_code == 200, changed.text
    assert_forbidden(post(c, maintainer, group, sock.uuid, "grower"))
