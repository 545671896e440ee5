"""Privilege escalation inside a group through the roles of its memberships (issue 13,
finding 4).

A maintainer could hand out ``owner`` (or ``admin``, ``user``, any custom role) and
remove the owner; any user could create a group and give a second account ``admin`` in
it, which then matched ``p, admin, *, *, *`` within that group. docs/http/authorization.md now
decides which roles a caller may assign: adding a membership with role R, or removing
one holding R, needs ``members`` × ``assign:R`` in the group (owners: every role;
maintainers: maintainer, member, viewer and custom roles; admins: everything).
``admin`` and ``user`` are never membership roles (400). Leaving stays free, except
for the group's last owner (400). Errors keep their order: body 400, reference 400,
then the policy's 403.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from locky.app import create_app
from locky.testing import Account, make_settings

from harden import RecordingClient

from authz_helpers import add_member, assert_fields, assert_forbidden, check, count, create_group, create_role, listing

MEMBERS = "/v1/private/members"
SHIPPED_POLICY = Path(__file__).resolve().parents[2] / "policies"


def post(client, account: Account, group: dict, user_uuid: str, role: str | None = None):
    body = {"group_uuid": group["uuid"], "user_uuid": user_uuid}
    if role is not None:
        body["role"] = role
    return client.simulate_post(MEMBERS, json=body, headers=account.headers)


def remove(client, account: Account, membership: dict):
    return client.simulate_delete(f"{MEMBERS}/{membership['id']}", headers=account.headers)


def live_roles(client, account: Account, group: dict) -> dict[str, str]:
    return {m["user_uuid"]: m["role"] for m in listing(client, account, "members", group_uuid=group["uuid"])}


@pytest.fixture
def team(locky_client, locky_admin):
    """A group of ``owner`` with a ``maintainer``, and a custom role ``auditor``."""
    client = locky_client
    owner = client.account("owner@example.com")
    maintainer = client.account("maintainer@example.com")
    group = create_group(client, owner, "team")
    add_member(client, owner, group, maintainer.uuid, "maintainer")
    # Carrying only what every user holds: whoever may assign custom roles may give it
    # (issue 31: a role carrying more than the caller holds is refused; see
    # test_role_assignment.py).
    create_role(client, locky_admin, "auditor", [("groups", "read")])
    return {"client": client, "owner": owner, "maintainer": maintainer, "group": group, "admin": locky_admin}


def newcomer(client, n: int) -> Account:
    return client.account(f"newcomer-{n}@example.com")


# -- maintainers -----------------------------------------------------------------


@pytest.mark.parametrize("role", ["maintainer", "member", "viewer", "auditor"])
def test_a_maintainer_assigns_and_removes_every_role_but_owner(team, role):
    c, maintainer, group = team["client"], team["maintainer"], team["group"]
    joiner = newcomer(c, 1)
    added = post(c, maintainer, group, joiner.uuid, role)
    assert added.status_code == 201, added.text
    assert added.json["role"] == role
    assert remove(c, maintainer, added.json).status_code == 204
    assert joiner.uuid not in live_roles(c, maintainer, group)


def test_a_maintainer_cannot_make_an_owner(team):
    c, maintainer, group = team["client"], team["maintainer"], team["group"]
    joiner = newcomer(c, 1)
    assert_forbidden(post(c, maintainer, group, joiner.uuid, "owner"))
    # Nor themself: one membership per group, and the policy would refuse it anyway.
    assert joiner.uuid not in live_roles(c, maintainer, group)
    assert count(c, maintainer, "members", group_uuid=group["uuid"], role="owner") == 1


def test_a_maintainer_cannot_remove_the_owner(team):
    c, owner, maintainer, group = team["client"], team["owner"], team["maintainer"], team["group"]
    (owners,) = listing(c, owner, "members", group_uuid=group["uuid"], role="owner")
    assert_forbidden(remove(c, maintainer, owners))
    assert live_roles(c, owner, group)[owner.uuid] == "owner"
    # ... even a second owner, whom nobody needs to keep.
    second = newcomer(c, 2)
    extra = add_member(c, owner, group, second.uuid, "owner")
    assert_forbidden(remove(c, maintainer, extra))
    assert live_roles(c, owner, group)[second.uuid] == "owner"


def test_the_right_to_assign_shows_in_the_access_check(team):
    c, maintainer, owner, group = team["client"], team["maintainer"], team["owner"], team["group"]
    assert check(c, maintainer, maintainer.uuid, "members", "assign:owner", group["uuid"]) is False
    assert check(c, maintainer, maintainer.uuid, "members", "assign:viewer", group["uuid"]) is True
    assert check(c, maintainer, maintainer.uuid, "members", "assign:auditor", group["uuid"]) is True
    assert check(c, maintainer, owner.uuid, "members", "assign:owner", group["uuid"]) is True
    # Only in their group.
    assert check(c, maintainer, maintainer.uuid, "members", "assign:viewer") is False


# -- owners and admins -----------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "maintainer", "member", "viewer", "auditor"])
def test_an_owner_assigns_and_removes_every_role(team, role):
    c, owner, group = team["client"], team["owner"], team["group"]
    joiner = newcomer(c, 1)
    added = post(c, owner, group, joiner.uuid, role)
    assert added.status_code == 201, added.text
    assert remove(c, owner, added.json).status_code == 204


def test_an_owner_removes_another_owner(team):
    c, owner, group = team["client"], team["owner"], team["group"]
    other = newcomer(c, 1)
    second = add_member(c, owner, group, other.uuid, "owner")
    assert remove(c, owner, second).status_code == 204
    assert live_roles(c, owner, group) == {owner.uuid: "owner", team["maintainer"].uuid: "maintainer"}


@pytest.mark.parametrize("role", ["owner", "maintainer", "viewer", "auditor"])
def test_an_admin_assigns_every_role_in_any_group(team, role):
    c, admin, group = team["client"], team["admin"], team["group"]
    joiner = newcomer(c, 1)
    added = post(c, admin, group, joiner.uuid, role)
    assert added.status_code == 201, added.text
    assert remove(c, admin, added.json).status_code == 204


def test_owners_assign_an_operators_own_builtin_roles_maintainers_do_not(tmp_path, locky_database_url):
    """"Owners assign every role": also one the operator's policy files add."""
    directory = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY, directory)
    with (directory / "policy.csv").open("a") as policy:
        policy.write("\n# role auditor: Reads a group's records.\np, auditor, *, groups, read\n")
    app = create_app(make_settings(locky_database_url, policy_dir=str(directory)))
    try:
        c = RecordingClient(app)
        owner, maintainer, joiner = (c.account(f"{n}@example.com") for n in ("owner", "maintainer", "joiner"))
        group = create_group(c, owner, "audited")
        add_member(c, owner, group, maintainer.uuid, "maintainer")
        assert_forbidden(post(c, maintainer, group, joiner.uuid, "auditor"))
        added = post(c, owner, group, joiner.uuid, "auditor")
        assert added.status_code == 201, added.text
        assert_forbidden(remove(c, maintainer, added.json))
        assert remove(c, owner, added.json).status_code == 204
    finally:
        app.close()


# -- admin and user are no membership roles --------------------------------------


@pytest.mark.parametrize("role", ["admin", "user"])
def test_admin_and_user_are_never_membership_roles(team, role):
    c, group = team["client"], team["group"]
    joiner = newcomer(c, 1)
    for caller in (team["owner"], team["maintainer"], team["admin"]):
        assert_fields(post(c, caller, group, joiner.uuid, role), "role")
    assert joiner.uuid not in live_roles(c, team["owner"], group)


def test_a_second_account_cannot_become_admin_of_ones_own_group(locky_client):
    """The reported path: any user creates a group and makes another account of theirs
    ``admin`` in it, which matched ``p, admin, *, *, *`` there."""
    c = locky_client
    mallory = c.account("mallory@example.com")
    sock = c.account("sock@example.com")
    group = create_group(c, mallory, "mine")
    assert_fields(post(c, mallory, group, sock.uuid, "admin"), "role")
    assert live_roles(c, mallory, group) == {mallory.uuid: "owner"}
    assert check(c, sock, sock.uuid, "roles", "create", group["uuid"]) is False


def test_an_admin_membership_stored_earlier_grants_nothing(locky_app, locky_client):
    """A membership holding ``admin`` made before the rule (straight through storage
    here, as the old API allowed) is no admin right within its group."""
    c = locky_client
    mallory, sock, bystander = (c.account(f"{n}@example.com") for n in ("mallory", "sock", "bystander"))
    group = create_group(c, mallory, "mine")
    other = add_member(c, mallory, group, bystander.uuid, "viewer")
    locky_app.context.storage.members.create(group_uuid=group["uuid"], user_uuid=sock.uuid, role="admin")
    assert check(c, sock, sock.uuid, "members", "assign:owner", group["uuid"]) is False
    assert_forbidden(post(c, sock, group, c.account("joiner@example.com").uuid, "owner"))
    assert_forbidden(remove(c, sock, other))
    assert_forbidden(c.simulate_delete(f"/v1/private/groups/{group['id']}", headers=sock.headers))


# -- custom roles that may add members -------------------------------------------


def test_members_write_without_assign_adds_no_one(team):
    c, admin, owner, group = team["client"], team["admin"], team["owner"], team["group"]
    create_role(c, admin, "recruiter", [("members", "write")])
    create_role(c, admin, "scout", [("members", "write"), ("members", "assign:viewer")])
    recruiter, scout = newcomer(c, 1), newcomer(c, 2)
    add_member(c, owner, group, recruiter.uuid, "recruiter")
    add_member(c, owner, group, scout.uuid, "scout")
    assert_forbidden(post(c, recruiter, group, newcomer(c, 3).uuid, "viewer"))
    viewer = post(c, scout, group, newcomer(c, 4).uuid, "viewer")
    assert viewer.status_code == 201, viewer.text
    assert_forbidden(post(c, scout, group, newcomer(c, 5).uuid, "member"))
    assert_forbidden(post(c, scout, group, newcomer(c, 6).uuid, "owner"))
    assert remove(c, scout, viewer.json).status_code == 204
    assert_forbidden(remove(c, scout, add_member(c, owner, group, newcomer(c, 7).uuid, "member")))


def test_a_custom_role_created_later_is_assignable_at_once(team):
    c, admin, maintainer, group = team["client"], team["admin"], team["maintainer"], team["group"]
    joiner = newcomer(c, 1)
    assert_fields(post(c, maintainer, group, joiner.uuid, "latecomer"), role="No such role.")
    create_role(c, admin, "latecomer")
    assert post(c, maintainer, group, joiner.uuid, "latecomer").status_code == 201


# -- leaving ---------------------------------------------------------------------


@pytest.mark.parametrize("role", ["maintainer", "member", "viewer", "auditor"])
def test_leaving_needs_no_right_to_assign(team, role):
    c, owner, group = team["client"], team["owner"], team["group"]
    leaver = newcomer(c, 1)
    membership = add_member(c, owner, group, leaver.uuid, role)
    assert remove(c, leaver, membership).status_code == 204
    assert leaver.uuid not in live_roles(c, owner, group)


def test_the_last_owner_cannot_leave(team):
    c, owner, group = team["client"], team["owner"], team["group"]
    (mine,) = listing(c, owner, "members", group_uuid=group["uuid"], role="owner")
    assert_fields(remove(c, owner, mine), "role")
    assert live_roles(c, owner, group)[owner.uuid] == "owner"
    # Nor may an admin take the last owner away.
    assert_fields(remove(c, team["admin"], mine), "role")
    # With a second owner, the first one may go.
    successor = newcomer(c, 1)
    theirs = add_member(c, owner, group, successor.uuid, "owner")
    assert remove(c, owner, mine).status_code == 204
    assert_fields(remove(c, successor, theirs), "role")
    assert live_roles(c, successor, group) == {successor.uuid: "owner", team["maintainer"].uuid: "maintainer"}


# -- the order of errors ---------------------------------------------------------


def test_body_then_references_then_policy(team):
    c, group = team["client"], team["group"]
    outsider = newcomer(c, 1)
    nobody = "00000000-0000-4000-8000-000000000000"
    assert_fields(post(c, outsider, group, outsider.uuid, "Not A Role"), "role")
    assert_fields(post(c, outsider, group, outsider.uuid, "admin"), "role")
    assert_fields(post(c, outsider, {"uuid": nobody}, outsider.uuid, "owner"), "group_uuid")
    assert_fields(post(c, outsider, group, nobody, "owner"), "user_uuid")
    assert_fields(post(c, outsider, group, outsider.uuid, "no-such-role"), "role")
    assert_forbidden(post(c, outsider, group, outsider.uuid, "owner"))
    # The maintainer may add members, not owners: the assign check is a 403 too.
    assert_forbidden(post(c, team["maintainer"], group, outsider.uuid, "owner"))
    assert outsider.uuid not in live_roles(c, team["owner"], group)
