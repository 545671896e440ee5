"""Memberships over HTTP: add (role must exist, default ``member``; group and user must
be live; one live membership per group and user), read, filters (group_uuid,
user_uuid, role) with keyset paging, count, remove, and the cascades of deleting a
user or a group (docs/http/records.md and docs/http/README.md)."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from locky import hookimpl
from locky.testing import LockyClient
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
    create_role,
    listing,
)

MEMBERS = "/v1/private/members"


@pytest.fixture
def owner(locky_client):
    return locky_client.account("owner@example.com")


@pytest.fixture
def group(locky_client, owner):
    return create_group(locky_client, owner, "Team")


@pytest.fixture
def friend(locky_client):
    return locky_client.account("friend@example.com")


def post(client, account, payload):
    return client.simulate_post(MEMBERS, json=payload, headers=account.headers)


# -- add ---------------------------------------------------------------------


def test_add_returns_201_the_membership_and_its_location(locky_client, owner, group, friend):
    result = post(locky_client, owner, {"group_uuid": group["uuid"], "user_uuid": friend.uuid, "role": "viewer"})
    assert result.status_code == 201, result.text
    member = result.json
    assert set(member) == {"id", "uuid", "created_at", "updated_at", "deleted_at", "group_uuid", "user_uuid", "role"}
    assert UUID4.match(member["uuid"]) and TIMESTAMP.match(member["created_at"])
    assert member["deleted_at"] is None
    assert (member["group_uuid"], member["user_uuid"], member["role"]) == (group["uuid"], friend.uuid, "viewer")
    assert result.headers["location"] == f"/v1/internal/members/{member['id']}"
    fetched = locky_client.simulate_get(result.headers["location"], headers=friend.headers)
    assert fetched.status_code == 200 and fetched.json == member


def test_role_defaults_to_member(locky_client, owner, group, friend):
    assert add_member(locky_client, owner, group, friend.uuid)["role"] == "member"


@pytest.mark.parametrize(("role", "message"), [
    ("admin", "Not a membership role: admin and user are held globally."),
    ("user", "Not a membership role: admin and user are held globally."),
    ("client", "Not a membership role: client is the role of every machine client."),
])
def test_roles_held_outside_groups_are_no_membership_roles(locky_client, locky_admin, group, friend, role, message):
    result = post(locky_client, locky_admin, {"group_uuid": group["uuid"], "user_uuid": friend.uuid, "role": role})
    assert (result.status_code, result.json) == (400, {"role": message})


@pytest.mark.parametrize("role", ["owner", "maintainer", "member", "viewer"])
def test_any_builtin_group_role_may_be_given(locky_client, owner, group, friend, role):
    assert add_member(locky_client, owner, group, friend.uuid, role)["role"] == role


def test_a_custom_role_may_be_given(locky_client, locky_admin, owner, group, friend):
    # By whoever holds every permission it carries in the group (issue 31): an owner
    # for a role within an owner's rights, an admin for an application's permissions.
    editor = create_role(locky_client, locky_admin, "editor", [("groups", "update"), ("members", "write")])
    assert add_member(locky_client, owner, group, friend.uuid, editor["name"])["role"] == "editor"
    reviewer = create_role(locky_client, locky_admin, "reviewer", [("docs", "review")])
    other = locky_client.account("other@example.com")
    assert add_member(locky_client, locky_admin, group, other.uuid, reviewer["name"])["role"] == "reviewer"


def test_role_must_exist(locky_client, locky_admin, owner, group, friend):
    payload = {"group_uuid": group["uuid"], "user_uuid": friend.uuid}
    assert_fields(post(locky_client, owner, {**payload, "role": "nosuchrole"}), role="No such role.")
    assert_fields(post(locky_client, owner, {**payload, "role": "Not A Role!"}), "role")
    assert_fields(post(locky_client, owner, {**payload, "role": ""}), "role")
    assert_fields(post(locky_client, owner, {**payload, "role": "member\n"}), "role")
    # A deleted custom role is gone too.
    role = create_role(locky_client, locky_admin, "temp")
    assert locky_client.simulate_delete(f"/v1/private/roles/{role['id']}", headers=locky_admin.headers).status_code == 204
    assert_fields(post(locky_client, owner, {**payload, "role": "temp"}), role="No such role.")
    assert count(locky_client, owner, "members", group_uuid=group["uuid"]) == 1


def test_user_must_be_live(locky_client, locky_admin, owner, group, friend):
    assert_fields(post(locky_client, owner, {"group_uuid": group["uuid"], "user_uuid": NOBODY}),
                  user_uuid="No such user.")
    assert locky_client.simulate_delete(f"/v1/private/users/{friend.id}", headers=friend.headers).status_code == 204
    assert_fields(post(locky_client, owner, {"group_uuid": group["uuid"], "user_uuid": friend.uuid}),
                  user_uuid="No such user.")


def test_group_must_be_live(locky_client, locky_admin, owner, friend):
    # Only an admin's request reaches the check: for anyone else the policy has no
    # role of theirs in a group that does not exist, so it is a 403 first.
    assert_fields(post(locky_client, locky_admin, {"group_uuid": NOBODY, "user_uuid": friend.uuid}),
                  group_uuid="No such group.")
    gone = create_group(locky_client, owner)
    assert locky_client.simulate_delete(f"/v1/private/groups/{gone['id']}", headers=owner.headers).status_code == 204
    assert_fields(post(locky_client, locky_admin, {"group_uuid": gone["uuid"], "user_uuid": friend.uuid}),
                  group_uuid="No such group.")
    assert count(locky_client, locky_admin, "members", user_uuid=friend.uuid) == 0


def test_one_live_membership_per_group_and_user(locky_client, owner, group, friend):
    first = add_member(locky_client, owner, group, friend.uuid)
    for role in ("member", "viewer"):
        again = post(locky_client, owner, {"group_uuid": group["uuid"], "user_uuid": friend.uuid, "role": role})
        assert_fields(again, "user_uuid")
    # The owner is a member already too.
    assert_fields(post(locky_client, owner, {"group_uuid": group["uuid"], "user_uuid": owner.uuid}), "user_uuid")
    assert count(locky_client, owner, "members", group_uuid=group["uuid"]) == 2

    # Once removed, the user may join again: a new membership, a new id.
    assert locky_client.simulate_delete(f"{MEMBERS}/{first['id']}", headers=owner.headers).status_code == 204
    second = add_member(locky_client, owner, group, friend.uuid, "viewer")
    assert second["id"] != first["id"] and second["uuid"] != first["uuid"]
    assert [m["id"] for m in listing(locky_client, owner, "members", user_uuid=friend.uuid)] == [second["id"]]


def test_one_user_may_join_many_groups(locky_client, owner, group, friend):
    other = create_group(locky_client, owner, "Other")
    a = add_member(locky_client, owner, group, friend.uuid)
    b = add_member(locky_client, owner, other, friend.uuid, "maintainer")
    assert [m["id"] for m in listing(locky_client, friend, "members", user_uuid=friend.uuid)] == [a["id"], b["id"]]


@pytest.mark.parametrize(
    "payload, fields",
    [
        ({}, {"group_uuid": "Missing data for required field.", "user_uuid": "Missing data for required field."}),
        ({"group_uuid": "not-a-uuid", "user_uuid": NOBODY}, {"group_uuid": "Not a valid UUID."}),
        ({"group_uuid": NOBODY, "user_uuid": "{abcdef00-0000-4000-8000-00000000000a}"}, {"user_uuid": "Not a valid UUID."}),
        ({"group_uuid": NOBODY, "user_uuid": 12}, {"user_uuid": None}),
        ({"group_uuid": NOBODY, "user_uuid": NOBODY, "role": 3}, {"role": None}),
        ({"group_uuid": NOBODY, "user_uuid": NOBODY, "expires": "never"}, {"expires": "Unknown field."}),
    ],
)
def test_bad_bodies_are_field_maps(locky_client, owner, payload, fields):
    result = post(locky_client, owner, payload)
    assert_fields(result, *[k for k, v in fields.items() if v is None],
                  **{k: v for k, v in fields.items() if v is not None})


def test_read_only_fields_are_ignored(locky_client, owner, group, friend):
    payload = {"group_uuid": group["uuid"], "user_uuid": friend.uuid, "id": 77, "uuid": NOBODY,
               "deleted_at": "2000-01-01T00:00:00.000000Z", "builtin": True}
    result = post(locky_client, owner, payload)
    assert result.status_code == 201, result.text
    assert result.json["id"] != 77 and result.json["uuid"] != NOBODY and result.json["deleted_at"] is None


def test_memberships_cannot_be_edited(locky_client, owner, group, friend):
    member = add_member(locky_client, owner, group, friend.uuid)
    result = locky_client.simulate_put(f"{MEMBERS}/{member['id']}", json={"role": "owner"}, headers=owner.headers)
    assert_error(result, 405, "405 Method Not Allowed")
    assert listing(locky_client, owner, "members", user_uuid=friend.uuid)[0]["role"] == "member"


# -- list, filters, count ----------------------------------------------------


def test_filters_combine_and_page(locky_client, owner, group, friend):
    third = locky_client.account("third@example.com")
    other = create_group(locky_client, owner, "Other")
    m1 = add_member(locky_client, owner, group, friend.uuid, "viewer")
    m2 = add_member(locky_client, owner, group, third.uuid)
    m3 = add_member(locky_client, owner, other, friend.uuid)

    def ids(**params):
        return [m["id"] for m in listing(locky_client, owner, "members", **params)]

    owners = ids(role="owner")
    assert len(owners) == 2
    assert ids(group_uuid=group["uuid"]) == [owners[0], m1["id"], m2["id"]]
    assert ids(user_uuid=friend.uuid) == [m1["id"], m3["id"]]
    assert ids(role="member") == [m2["id"], m3["id"]]
    assert ids(group_uuid=group["uuid"], role="member") == [m2["id"]]
    assert ids(group_uuid=other["uuid"], user_uuid=friend.uuid) == [m3["id"]]
    assert ids(group_uuid=other["uuid"], user_uuid=third.uuid) == []
    assert ids(role="admin") == []
    assert ids(group_uuid=NOBODY) == []

    assert count(locky_client, owner, "members") == 5
    assert count(locky_client, owner, "members", group_uuid=group["uuid"]) == 3
    assert count(locky_client, owner, "members", user_uuid=friend.uuid, role="viewer") == 1
    assert count(locky_client, owner, "members", role="maintainer") == 0

    page = locky_client.simulate_get("/v1/internal/members", params={"group_uuid": group["uuid"], "limit": 2},
                                     headers=owner.headers).json
    assert [m["id"] for m in page["members"]] == [owners[0], m1["id"]]
    assert page["next_after_id"] == m1["id"]
    rest = locky_client.simulate_get(
        "/v1/internal/members", params={"group_uuid": group["uuid"], "limit": 2, "after_id": m1["id"]},
        headers=owner.headers,
    ).json
    assert rest == {"members": [m2], "next_after_id": None}


@pytest.mark.parametrize(
    "params, field",
    [
        ({"group_uuid": "nope"}, "group_uuid"),
        ({"user_uuid": "12"}, "user_uuid"),
        ({"role": ""}, "role"),
        ({"role": "r" * 65}, "role"),
        ({"role": "Bad Role"}, "role"),
        ({"role": "owner\n"}, "role"),
        ({"limit": "-3"}, "limit"),
        ({"group": "x"}, "group"),
    ],
)
def test_bad_filters_are_field_maps(locky_client, owner, params, field):
    for path in ("/v1/internal/members", "/v1/internal/members/count"):
        assert_fields(locky_client.simulate_get(path, params=params, headers=owner.headers), field)


# -- remove and cascades -----------------------------------------------------


def test_remove_is_soft_and_hides_the_membership(locky_client, owner, group, friend):
    member = add_member(locky_client, owner, group, friend.uuid)
    result = locky_client.simulate_delete(f"{MEMBERS}/{member['id']}", headers=owner.headers)
    assert result.status_code == 204 and result.text == ""
    assert_not_found(locky_client.simulate_get(f"/v1/internal/members/{member['id']}", headers=owner.headers))
    assert_not_found(locky_client.simulate_delete(f"{MEMBERS}/{member['id']}", headers=owner.headers))
    assert listing(locky_client, owner, "members", user_uuid=friend.uuid) == []
    assert count(locky_client, owner, "members", user_uuid=friend.uuid) == 0
    assert count(locky_client, owner, "members", role="member") == 0
    assert count(locky_client, owner, "members") == 1  # the owner


def test_unknown_membership_ids_are_404(locky_client, owner):
    assert_not_found(locky_client.simulate_get("/v1/internal/members/4242", headers=owner.headers))
    assert_not_found(locky_client.simulate_delete(f"{MEMBERS}/4242", headers=owner.headers))
    assert_not_found(locky_client.simulate_delete(f"{MEMBERS}/0", headers=owner.headers))


def test_deleting_a_user_removes_their_memberships(locky_client, locky_admin, owner, group, friend):
    other = create_group(locky_client, friend, "Friend's")
    joined = add_member(locky_client, owner, group, friend.uuid, "maintainer")
    (owned,) = listing(locky_client, friend, "members", group_uuid=other["uuid"])
    third = locky_client.account("third@example.com")
    kept = add_member(locky_client, friend, other, third.uuid)

    result = locky_client.simulate_delete(f"/v1/private/users/{friend.id}", headers=locky_admin.headers)
    assert result.status_code == 204

    assert listing(locky_client, owner, "members", user_uuid=friend.uuid) == []
    assert count(locky_client, owner, "members", user_uuid=friend.uuid) == 0
    for member in (joined, owned):
        assert_not_found(locky_client.simulate_get(f"/v1/internal/members/{member['id']}", headers=owner.headers))
        assert_not_found(locky_client.simulate_delete(f"{MEMBERS}/{member['id']}", headers=locky_admin.headers))
    # The groups and other people's memberships stay.
    assert [m["id"] for m in listing(locky_client, owner, "members", group_uuid=other["uuid"])] == [kept["id"]]
    assert count(locky_client, owner, "groups") == 2
    assert count(locky_client, owner, "members", group_uuid=group["uuid"]) == 1


def test_deleting_a_group_removes_its_memberships(locky_client, owner, group, friend):
    member = add_member(locky_client, owner, group, friend.uuid)
    assert locky_client.simulate_delete(f"/v1/private/groups/{group['id']}", headers=owner.headers).status_code == 204
    assert count(locky_client, friend, "members") == 0
    assert listing(locky_client, friend, "members", group_uuid=group["uuid"]) == []
    assert_not_found(locky_client.simulate_get(f"/v1/internal/members/{member['id']}", headers=friend.headers))
    # The user is still there, free to join a new group of the same name.
    again = create_group(locky_client, owner, "Team")
    assert add_member(locky_client, owner, again, friend.uuid)["group_uuid"] == again["uuid"]


def test_a_group_that_is_gone_is_a_400_for_its_former_owner_too(locky_client, owner, friend):
    # The owner's membership went with the group: the answer is about the body, not a 403.
    gone = create_group(locky_client, owner, "Short-lived")
    assert locky_client.simulate_delete(f"/v1/private/groups/{gone['id']}", headers=owner.headers).status_code == 204
    assert_fields(post(locky_client, owner, {"group_uuid": gone["uuid"], "user_uuid": friend.uuid}),
                  group_uuid="No such group.")


def test_unknown_references_are_400_whoever_asks(locky_client, group, friend):
    stranger = locky_client.account("stranger@example.com")
    assert_fields(post(locky_client, stranger, {"group_uuid": NOBODY, "user_uuid": friend.uuid}),
                  group_uuid="No such group.")
    assert_fields(post(locky_client, stranger, {"group_uuid": group["uuid"], "user_uuid": NOBODY}),
                  user_uuid="No such user.")
    assert_fields(post(locky_client, stranger, {"group_uuid": group["uuid"], "user_uuid": friend.uuid, "role": "nosuchrole"}),
                  role="No such role.")
    # Valid references: now the policy speaks, and a stranger to the group is refused.
    assert_error(post(locky_client, stranger, {"group_uuid": group["uuid"], "user_uuid": friend.uuid}),
                 403, "403 Forbidden")


def test_deleted_references_are_400_for_a_stranger_and_a_refusal_writes_nothing(
        locky_client, locky_admin, owner, group, friend):
    stranger = locky_client.account("stranger@example.com")
    role = create_role(locky_client, locky_admin, "short-lived", [("docs", "read")])
    assert locky_client.simulate_delete(f"/v1/private/roles/{role['id']}",
                                        headers=locky_admin.headers).status_code == 204
    gone = locky_client.account("gone@example.com")
    assert locky_client.simulate_delete(f"/v1/private/users/{gone.id}", headers=gone.headers).status_code == 204

    assert_fields(post(locky_client, stranger, {"group_uuid": group["uuid"], "user_uuid": friend.uuid,
                                                "role": "short-lived"}), role="No such role.")
    assert_fields(post(locky_client, stranger, {"group_uuid": group["uuid"], "user_uuid": gone.uuid}),
                  user_uuid="No such user.")
    # Group first, then user, then role: one field, whatever else is wrong.
    assert_fields(post(locky_client, stranger, {"group_uuid": NOBODY, "user_uuid": gone.uuid,
                                                "role": "short-lived"}), group_uuid="No such group.")
    refused = post(locky_client, stranger, {"group_uuid": group["uuid"], "user_uuid": friend.uuid})
    assert_error(refused, 403, "403 Forbidden")
    assert count(locky_client, owner, "members", group_uuid=group["uuid"]) == 1


class _Recorded:
    """A store whose calls from outside storage are written down by name, with the
    number of ``atomic()`` blocks open around each: those of the thread that made it (the
    test's, where the test client runs each request), not the app's senders, which read
    users for letters at their own pace."""

    def __init__(self, inner, kind: str, owner: "_RecordingStorage"):
        self._inner, self._kind, self._owner = inner, kind, owner

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def recorded(*args, **kwargs):
            if threading.get_ident() == self._owner.thread:
                self._owner.calls.append((f"{self._kind}.{name}", self._owner.depth))
            return value(*args, **kwargs)

        return recorded


class _RecordingStorage:
    """The configured storage, with the calls made to its users, groups, roles and
    members recorded, and its outermost ``atomic()`` blocks counted."""

    def __init__(self, inner):
        self.inner, self.calls, self.depth, self.blocks = inner, [], 0, 0
        self.thread = threading.get_ident()
        for kind in ("users", "groups", "roles", "members"):
            setattr(self, kind, _Recorded(getattr(inner, kind), kind, self))

    @contextmanager
    def atomic(self):
        mine = threading.get_ident() == self.thread
        if mine:
            self.depth += 1
            self.blocks += self.depth == 1
        try:
            with self.inner.atomic():
                yield
        finally:
            if mine:
                self.depth -= 1

    def __getattr__(self, name):
        return getattr(self.inner, name)


class _RecordingPlugin:
    @hookimpl
    def locky_register_storage(self, registry):
        registry.add("recording",
                     lambda context: _RecordingStorage(context.registries["storage"].create("pony", context)))


def test_the_decision_is_made_in_the_transaction_that_writes(locky_app_factory):
    app = locky_app_factory([_RecordingPlugin()], storage="recording")
    client = LockyClient(app)
    owner, friend = client.account("owner@example.com"), client.account("friend@example.com")
    stranger = client.account("stranger@example.com")
    group = create_group(client, owner, "Team")
    storage = app.context.storage
    storage.calls.clear()
    storage.blocks = 0
    result = post(client, owner, {"group_uuid": group["uuid"], "user_uuid": friend.uuid, "role": "viewer"})
    assert result.status_code == 201, result.text
    # One block (one transaction): the references read, the policy's reads (the caller's
    # membership), then the insert, which storage makes without calling back.
    assert storage.blocks == 1
    assert [(name, depth) for name, depth in storage.calls if depth == 0] == []
    names = [name for name, _ in storage.calls]
    assert names[:3] == ["groups.for_update", "users.get_by_uuid", "roles.list"]
    assert names[-1] == "members.create" and names.count("members.create") == 1
    assert "members.role_of" in names[3:-1]
    assert count(client, owner, "members", group_uuid=group["uuid"]) == 2

    # Refused in that block: nothing reaches members.create, nothing is written.
    storage.calls.clear()
    storage.blocks = 0
    refused = post(client, stranger, {"group_uuid": group["uuid"], "user_uuid": stranger.uuid, "role": "viewer"})
    assert_error(refused, 403, "403 Forbidden")
    assert storage.blocks == 1 and all(depth == 1 for _, depth in storage.calls)
    names = [name for name, _ in storage.calls]
    assert "members.role_of" in names and "members.create" not in names
    assert count(client, owner, "members", group_uuid=group["uuid"]) == 2
