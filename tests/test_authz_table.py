"""The authorization table of docs/http/authorization.md, row by row, through HTTP: for each
kind of caller (admin, group owner, maintainer, member, viewer, a user outside the
group) every operation the shipped policy allows succeeds and every other one is a
403 with Falcon's ``{"title", "description"}`` body and no side effect. Custom roles
held through a membership grant their permissions in that group only, from the next
request on, and lose them as soon as the role or membership changes.

One app serves the whole module (a fresh app per case would dominate the run time);
each case gets fresh accounts and groups, so no case sees another's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from locky.app import create_app
from locky.testing import ADMIN_EMAIL, PASSWORD, Account, LockyClient, MailBox, make_settings

from authz_helpers import (
    add_member,
    assert_error,
    assert_fields,
    assert_forbidden,
    check,
    count,
    create_group,
    create_role,
    listing,
    unique,
)

ACTORS = ("admin", "owner", "maintainer", "member", "viewer", "outsider")
GROUP_ROLES = {"owner": "owner", "maintainer": "maintainer", "member": "member", "viewer": "viewer"}


@pytest.fixture(scope="module")
def client(tmp_path_factory, locky_scratch_database):
    if locky_scratch_database is None:
        url = f"sqlite:///{tmp_path_factory.mktemp('authz')}/locky.sqlite"
    else:  # LOCKY_TEST_DATABASE_URL names a server: this module's app has it to itself
        locky_scratch_database.wipe()
        url = locky_scratch_database.url
    app = create_app(make_settings(url, log_requests=False))
    client = LockyClient(app)
    register_admin(client)
    yield client
    app.close()


def register_admin(client) -> None:
    """Register the admin email and verify it: the address makes an admin only then."""
    sent = len(client.mailbox.messages(ADMIN_EMAIL, "verify"))  # an earlier admin's, when re-registered
    client.register(ADMIN_EMAIL)
    unverified = login(client, ADMIN_EMAIL)
    assert not check(client, unverified, unverified.uuid, "roles", "write")
    message = client.mailbox.wait(ADMIN_EMAIL, "verify", count=sent + 1)
    verified = client.simulate_post("/v1/public/users/verify", json={"token": MailBox.token(message)})
    assert verified.status_code == 204, verified.text
    assert check(client, unverified, unverified.uuid, "roles", "write")


def login(client, email: str) -> Account:
    tokens = client.login(email)
    user = tokens["user"]
    return Account(id=user["id"], uuid=user["uuid"], email=user["email"], password=PASSWORD,
                   access_token=tokens["access_token"], refresh_token=tokens["refresh_token"], body=user)


@dataclass
class World:
    """Group ``group`` owned by ``owner`` with a maintainer, member and viewer; a
    ``target`` member to act on; an ``outsider``; and ``other_group`` owned by
    ``stranger``, in which none of them holds a role."""

    client: LockyClient
    accounts: dict[str, Account]
    group: dict
    target: Account
    target_membership: dict
    stranger: Account
    other_group: dict
    other_membership: dict
    memberships: dict[str, dict] = field(default_factory=dict)

    def __getitem__(self, actor: str) -> Account:
        return self.accounts[actor]

    def fresh_user(self) -> Account:
        return self.client.account(f"{unique('fresh')}@example.com")


@pytest.fixture
def world(client) -> World:
    accounts = {"admin": login(client, ADMIN_EMAIL)}
    for actor in ACTORS[1:]:
        accounts[actor] = client.account(f"{unique(actor)}@example.com")
    owner = accounts["owner"]
    group = create_group(client, owner)
    memberships = {}
    for actor, role in GROUP_ROLES.items():
        if actor != "owner":
            memberships[actor] = add_member(client, owner, group, accounts[actor].uuid, role)
    (memberships["owner"],) = listing(client, owner, "members", group_uuid=group["uuid"], role="owner")
    target = client.account(f"{unique('target')}@example.com")
    target_membership = add_member(client, owner, group, target.uuid)
    stranger = client.account(f"{unique('stranger')}@example.com")
    other_group = create_group(client, stranger)
    other_membership = add_member(client, stranger, other_group, target.uuid)
    return World(client, accounts, group, target, target_membership, stranger, other_group,
                 other_membership, memberships)


def expect(result, allowed: bool, status: int) -> None:
    if allowed:
        assert result.status_code == status, (result.status_code, result.text)
    else:
        assert_forbidden(result)


def get_group(world: World, group: dict) -> dict:
    result = world.client.simulate_get(f"/v1/internal/groups/{group['id']}", headers=world["admin"].headers)
    assert result.status_code == 200, result.text
    return result.json


# -- any user ----------------------------------------------------------------


@pytest.mark.parametrize("actor", ACTORS)
def test_every_user_reads_every_internal_endpoint(world, actor):
    c, h = world.client, world[actor].headers
    ids = {"users": world.target.id, "groups": world.other_group["id"],
           "members": world.other_membership["id"], "roles": listing(c, world[actor], "roles")[0]["id"]}
    paths = ["/v1/internal/users/me"]
    for kind, record_id in ids.items():
        paths += [f"/v1/internal/{kind}", f"/v1/internal/{kind}/count", f"/v1/internal/{kind}/{record_id}"]
    for path in paths:
        result = c.simulate_get(path, headers=h)
        assert result.status_code == 200, (path, result.text)
    me = c.simulate_get("/v1/internal/users/me", headers=h).json
    assert me["uuid"] == world[actor].uuid
    check = c.simulate_get("/v1/internal/authz/check", params={
        "user_uuid": world.stranger.uuid, "resource": "groups", "action": "delete",
        "group_uuid": world.other_group["uuid"]}, headers=h)
    assert check.status_code == 200 and check.json == {"allowed": True}


@pytest.mark.parametrize("actor", ACTORS)
def test_every_user_updates_themself(world, actor):
    me = world[actor]
    result = world.client.simulate_put(f"/v1/private/users/{me.id}", json={"name": "Renamed"}, headers=me.headers)
    assert result.status_code == 200, result.text
    assert result.json["name"] == "Renamed"


@pytest.mark.parametrize("actor", ACTORS)
def test_only_admin_updates_another_user(world, actor):
    victim = world.target
    result = world.client.simulate_put(f"/v1/private/users/{victim.id}", json={"name": "Hijacked"},
                                       headers=world[actor].headers)
    expect(result, actor == "admin", 200)
    name = world.client.simulate_get(f"/v1/internal/users/{victim.id}", headers=victim.headers).json["name"]
    assert name == ("Hijacked" if actor == "admin" else victim.body["name"])


@pytest.mark.parametrize("actor", ACTORS)
def test_every_user_deletes_themself(world, actor):
    me = world[actor]
    result = world.client.simulate_delete(f"/v1/private/users/{me.id}", headers=me.headers)
    assert result.status_code == 204, result.text
    assert_error(world.client.simulate_get("/v1/internal/users/me", headers=me.headers), 401, "401 Unauthorized")
    if actor == "admin":  # the module's later cases log the admin in again
        register_admin(world.client)


@pytest.mark.parametrize("actor", ACTORS)
def test_only_admin_deletes_another_user(world, actor):
    victim = world.target
    result = world.client.simulate_delete(f"/v1/private/users/{victim.id}", headers=world[actor].headers)
    expect(result, actor == "admin", 204)
    still = world.client.simulate_get("/v1/internal/users/me", headers=victim.headers)
    assert still.status_code == (401 if actor == "admin" else 200)


@pytest.mark.parametrize("actor", ACTORS)
def test_every_user_logs_out(world, actor):
    me = world[actor]
    assert world.client.simulate_post("/v1/private/users/logout", headers=me.headers).status_code == 204
    assert_error(world.client.simulate_get("/v1/internal/users/me", headers=me.headers), 401, "401 Unauthorized")


@pytest.mark.parametrize("actor", ACTORS)
def test_every_user_creates_groups_and_owns_them(world, actor):
    me = world[actor]
    group = create_group(world.client, me)
    (membership,) = listing(world.client, me, "members", group_uuid=group["uuid"])
    assert (membership["user_uuid"], membership["role"]) == (me.uuid, "owner")
    # ... and, as its owner, may update it.
    result = world.client.simulate_put(f"/v1/private/groups/{group['id']}", json={"description": "mine"},
                                       headers=me.headers)
    assert result.status_code == 200


# -- group roles -------------------------------------------------------------


@pytest.mark.parametrize("actor", ACTORS)
def test_update_group(world, actor):
    allowed = actor in ("admin", "owner", "maintainer")
    result = world.client.simulate_put(f"/v1/private/groups/{world.group['id']}",
                                       json={"description": f"by {actor}"}, headers=world[actor].headers)
    expect(result, allowed, 200)
    assert get_group(world, world.group)["description"] == (f"by {actor}" if allowed else "")


@pytest.mark.parametrize("actor", ACTORS)
def test_delete_group(world, actor):
    allowed = actor in ("admin", "owner")
    result = world.client.simulate_delete(f"/v1/private/groups/{world.group['id']}", headers=world[actor].headers)
    expect(result, allowed, 204)
    left = count(world.client, world["admin"], "members", group_uuid=world.group["uuid"])
    assert left == (0 if allowed else 5)


@pytest.mark.parametrize("actor", ACTORS)
def test_add_member(world, actor):
    allowed = actor in ("admin", "owner", "maintainer")
    newcomer = world.fresh_user()
    result = world.client.simulate_post("/v1/private/members", headers=world[actor].headers, json={
        "group_uuid": world.group["uuid"], "user_uuid": newcomer.uuid, "role": "viewer"})
    expect(result, allowed, 201)
    assert count(world.client, newcomer, "members", user_uuid=newcomer.uuid) == (1 if allowed else 0)


@pytest.mark.parametrize("actor", ACTORS)
def test_remove_another_member(world, actor):
    allowed = actor in ("admin", "owner", "maintainer")
    result = world.client.simulate_delete(f"/v1/private/members/{world.target_membership['id']}",
                                          headers=world[actor].headers)
    expect(result, allowed, 204)
    assert count(world.client, world.target, "members", group_uuid=world.group["uuid"],
                 user_uuid=world.target.uuid) == (0 if allowed else 1)


@pytest.mark.parametrize("actor", ["owner", "maintainer", "member", "viewer"])
def test_every_member_may_leave(world, actor):
    membership = world.memberships[actor]
    if actor == "owner":  # docs/http/authorization.md: not as the group's last owner; once another owner is there
        assert_fields(world.client.simulate_delete(f"/v1/private/members/{membership['id']}",
                                                   headers=world[actor].headers), "role")
        add_member(world.client, world[actor], world.group, world.fresh_user().uuid, "owner")
    result = world.client.simulate_delete(f"/v1/private/members/{membership['id']}", headers=world[actor].headers)
    assert result.status_code == 204, result.text
    assert count(world.client, world[actor], "members", user_uuid=world[actor].uuid) == 0


@pytest.mark.parametrize("actor", ["owner", "maintainer", "member", "viewer"])
def test_a_member_may_not_add_themself_elsewhere(world, actor):
    result = world.client.simulate_post("/v1/private/members", headers=world[actor].headers, json={
        "group_uuid": world.other_group["uuid"], "user_uuid": world[actor].uuid, "role": "owner"})
    assert_forbidden(result)


@pytest.mark.parametrize("actor", ["owner", "maintainer"])
def test_group_rights_end_at_the_group(world, actor):
    c, h = world.client, world[actor].headers
    other = world.other_group
    assert_forbidden(c.simulate_put(f"/v1/private/groups/{other['id']}", json={"name": "x"}, headers=h))
    assert_forbidden(c.simulate_delete(f"/v1/private/groups/{other['id']}", headers=h))
    assert_forbidden(c.simulate_post("/v1/private/members", headers=h, json={
        "group_uuid": other["uuid"], "user_uuid": world.fresh_user().uuid}))
    assert_forbidden(c.simulate_delete(f"/v1/private/members/{world.other_membership['id']}", headers=h))
    # ... and grant nothing outside groups either.
    assert_forbidden(c.simulate_put(f"/v1/private/users/{world.target.id}", json={"name": "x"}, headers=h))
    assert_forbidden(c.simulate_post("/v1/private/roles", json={"name": unique("r")}, headers=h))
    assert get_group(world, other) == other
    assert count(c, world["admin"], "members", group_uuid=other["uuid"]) == 2


# -- roles -------------------------------------------------------------------


@pytest.mark.parametrize("actor", ACTORS)
def test_only_admin_writes_roles(world, actor):
    c, h, admin = world.client, world[actor].headers, world["admin"]
    allowed = actor == "admin"
    name = unique("r")
    expect(c.simulate_post("/v1/private/roles", json={"name": name}, headers=h), allowed, 201)
    assert count(c, admin, "roles", name=name) == (1 if allowed else 0)
    role = create_role(c, admin)
    url = f"/v1/private/roles/{role['id']}"
    expect(c.simulate_put(url, json={"description": "changed"}, headers=h), allowed, 200)
    expect(c.simulate_delete(url, headers=h), allowed, 204)
    assert count(c, admin, "roles", name=role["name"]) == (0 if allowed else 1)


def test_admin_may_do_everything_anywhere(world):
    c, admin = world.client, world["admin"]
    other = world.other_group
    assert c.simulate_put(f"/v1/private/groups/{other['id']}", json={"name": unique("g")},
                          headers=admin.headers).status_code == 200
    assert add_member(c, admin, other, world.fresh_user().uuid, "maintainer")["role"] == "maintainer"
    assert c.simulate_delete(f"/v1/private/members/{world.other_membership['id']}",
                             headers=admin.headers).status_code == 204
    assert c.simulate_delete(f"/v1/private/groups/{other['id']}", headers=admin.headers).status_code == 204


def test_the_admin_email_match_ignores_case(client):
    # The registered email is stored lowercased, so "Admin@Example.COM" is the admin.
    tokens = client.login("Admin@Example.COM")
    result = client.simulate_post("/v1/private/roles", json={"name": unique("r")},
                                  headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert result.status_code == 201


# -- custom roles held through a membership ----------------------------------


def test_custom_role_grants_its_permissions_in_its_group_only(world):
    c, admin = world.client, world["admin"]
    role = create_role(c, admin, permissions=[("groups", "write")])
    holder = world.fresh_user()
    add_member(c, world["owner"], world.group, holder.uuid, role["name"])
    h = holder.headers

    ok = c.simulate_put(f"/v1/private/groups/{world.group['id']}", json={"description": "edited"}, headers=h)
    assert ok.status_code == 200 and ok.json["description"] == "edited"
    # groups:write is not members:write.
    assert_forbidden(c.simulate_post("/v1/private/members", headers=h, json={
        "group_uuid": world.group["uuid"], "user_uuid": world.fresh_user().uuid}))
    assert_forbidden(c.simulate_delete(f"/v1/private/members/{world.target_membership['id']}", headers=h))
    # Nothing in a group where the role is not held.
    assert_forbidden(c.simulate_put(f"/v1/private/groups/{world.other_group['id']}", json={"name": "x"}, headers=h))
    assert_forbidden(c.simulate_delete(f"/v1/private/groups/{world.other_group['id']}", headers=h))
    # write covers delete.
    assert c.simulate_delete(f"/v1/private/groups/{world.group['id']}", headers=h).status_code == 204


def test_custom_role_with_members_write(world):
    c, admin = world.client, world["admin"]
    # docs/http/authorization.md: members:write adds and removes; which roles, assign:ROLE says.
    role = create_role(c, admin, permissions=[("members", "write"), ("members", "assign:member")])
    holder = world.fresh_user()
    add_member(c, world["owner"], world.group, holder.uuid, role["name"])
    h = holder.headers
    added = c.simulate_post("/v1/private/members", headers=h, json={
        "group_uuid": world.group["uuid"], "user_uuid": world.fresh_user().uuid})
    assert added.status_code == 201, added.text
    assert c.simulate_delete(f"/v1/private/members/{world.target_membership['id']}", headers=h).status_code == 204
    assert_forbidden(c.simulate_put(f"/v1/private/groups/{world.group['id']}", json={"name": "x"}, headers=h))
    assert_forbidden(c.simulate_post("/v1/private/members", headers=h, json={
        "group_uuid": world.other_group["uuid"], "user_uuid": world.fresh_user().uuid}))


def test_custom_role_with_update_only_does_not_delete(world):
    c, admin = world.client, world["admin"]
    role = create_role(c, admin, permissions=[("groups", "update")])
    holder = world.fresh_user()
    add_member(c, world["owner"], world.group, holder.uuid, role["name"])
    url = f"/v1/private/groups/{world.group['id']}"
    assert c.simulate_put(url, json={"description": "u"}, headers=holder.headers).status_code == 200
    assert_forbidden(c.simulate_delete(url, headers=holder.headers))


def test_wildcard_custom_role_is_admin_of_its_group_only(world):
    c, admin = world.client, world["admin"]
    role = create_role(c, admin, permissions=[("*", "*")])
    holder = world.fresh_user()
    add_member(c, admin, world.group, holder.uuid, role["name"])  # more than an owner holds
    h = holder.headers
    assert c.simulate_put(f"/v1/private/groups/{world.group['id']}", json={"description": "w"},
                          headers=h).status_code == 200
    assert c.simulate_delete(f"/v1/private/members/{world.target_membership['id']}", headers=h).status_code == 204
    # Global operations are decided outside any group: the membership gives nothing there.
    assert_forbidden(c.simulate_post("/v1/private/roles", json={"name": unique("r")}, headers=h))
    assert_forbidden(c.simulate_put(f"/v1/private/users/{world.target.id}", json={"name": "x"}, headers=h))
    assert_forbidden(c.simulate_delete(f"/v1/private/users/{world.target.id}", headers=h))
    assert_forbidden(c.simulate_put(f"/v1/private/groups/{world.other_group['id']}", json={"name": "x"}, headers=h))


def test_global_permissions_in_a_custom_role_apply_only_within_groups(world):
    c, admin = world.client, world["admin"]
    role = create_role(c, admin, permissions=[("roles", "write"), ("users", "write")])
    holder = world.fresh_user()
    add_member(c, admin, world.group, holder.uuid, role["name"])  # more than an owner holds
    assert_forbidden(c.simulate_post("/v1/private/roles", json={"name": unique("r")}, headers=holder.headers))
    assert_forbidden(c.simulate_put(f"/v1/private/roles/{role['id']}", json={"description": "x"},
                                    headers=holder.headers))
    assert_forbidden(c.simulate_put(f"/v1/private/users/{world.target.id}", json={"name": "x"},
                                    headers=holder.headers))


def test_custom_role_takes_effect_and_is_revoked_at_once(world):
    """The same access token throughout: roles are not in tokens, every request is
    decided against the live policy."""
    c, admin = world.client, world["admin"]
    holder = world.fresh_user()
    url = f"/v1/private/groups/{world.group['id']}"
    h = holder.headers

    def can_update() -> bool:
        result = c.simulate_put(url, json={"description": unique("d")}, headers=h)
        if result.status_code == 403:
            assert_forbidden(result)
            return False
        assert result.status_code == 200, result.text
        return True

    role = create_role(c, admin, permissions=[("groups", "update")])
    role_url = f"/v1/private/roles/{role['id']}"
    assert not can_update()
    membership = add_member(c, world["owner"], world.group, holder.uuid, role["name"])
    assert can_update()
    # Revoked by changing the role ...
    assert c.simulate_put(role_url, json={"permissions": [{"resource": "docs", "action": "read"}]},
                          headers=admin.headers).status_code == 200
    assert not can_update()
    # ... granted again by changing it back ...
    assert c.simulate_put(role_url, json={"permissions": [{"resource": "groups", "action": "write"}]},
                          headers=admin.headers).status_code == 200
    assert can_update()
    # ... and revoked by ending the membership.
    assert c.simulate_delete(f"/v1/private/members/{membership['id']}", headers=world["owner"].headers).status_code == 204
    assert not can_update()
    # A new membership with a built-in role that gives nothing: still nothing.
    add_member(c, world["owner"], world.group, holder.uuid, "viewer")
    assert not can_update()


def test_builtin_role_changes_take_effect_at_once(world):
    """Removing a maintainer's membership, then re-adding it as member, ends the right."""
    c, owner = world.client, world["owner"]
    maintainer = world["maintainer"]
    url = f"/v1/private/groups/{world.group['id']}"
    assert c.simulate_put(url, json={"description": "m1"}, headers=maintainer.headers).status_code == 200
    assert c.simulate_delete(f"/v1/private/members/{world.memberships['maintainer']['id']}",
                             headers=owner.headers).status_code == 204
    assert_forbidden(c.simulate_put(url, json={"description": "m2"}, headers=maintainer.headers))
    add_member(c, owner, world.group, maintainer.uuid, "member")
    assert_forbidden(c.simulate_put(url, json={"description": "m3"}, headers=maintainer.headers))
