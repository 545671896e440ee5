"""Users over HTTP (docs/http/records.md, docs/http/README.md and docs/http/authorization.md): list with keyset paging
(``limit``, ``after_id``, ``next_after_id``) and the exact ``email`` filter, count
with the same filter, get one, ``me``; ``PUT`` by the user themself or an admin only
(partial updates, each field validated, unknown fields 400, read-only fields ignored,
case-insensitive email uniqueness); soft ``DELETE`` by the user themself or an admin,
after which the user is hidden from every read and filter, their tokens fail, and
writes to them are 404; path ids that are not positive 64-bit integers are 404."""

from __future__ import annotations

import pytest

from authz_helpers import TIMESTAMP, UUID4, assert_error, assert_fields, assert_forbidden, assert_not_found

USERS = "/v1/internal/users"
WRITE = "/v1/private/users"
USER_KEYS = {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "email",
             "email_verified", "disabled", "mfa_enabled"}


def page(client, account, **params):
    result = client.simulate_get(USERS, params=params, headers=account.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"users", "next_after_id"}, result.json
    return result.json


def count(client, account, **params) -> int:
    result = client.simulate_get(f"{USERS}/count", params=params, headers=account.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"count"} and isinstance(result.json["count"], int), result.json
    return result.json["count"]


def put(client, account, user_id, body):
    return client.simulate_put(f"{WRITE}/{user_id}", json=body, headers=account.headers)


def delete(client, account, user_id):
    return client.simulate_delete(f"{WRITE}/{user_id}", headers=account.headers)


def get(client, account, user_id):
    return client.simulate_get(f"{USERS}/{user_id}", headers=account.headers)


@pytest.fixture
def people(locky_client):
    """Five more registered users (plain dicts), ascending ids."""
    return [locky_client.register(f"person{i}@example.com", name=f"Person {i}") for i in range(5)]


# -- list ------------------------------------------------------------------------


def test_list_shows_users_by_ascending_id_without_secrets(locky_client, locky_user, people):
    body = page(locky_client, locky_user)
    assert body["next_after_id"] is None
    users = body["users"]
    assert [u["id"] for u in users] == sorted(u["id"] for u in users)
    assert [u["email"] for u in users] == ["user@example.com"] + [p["email"] for p in people]
    for user in users:
        assert set(user) == USER_KEYS
        assert UUID4.match(user["uuid"]) and TIMESTAMP.match(user["created_at"])
    assert users[1:] == people


def test_keyset_paging_walks_every_user_once(locky_client, locky_user, people):
    everyone = page(locky_client, locky_user)["users"]
    seen, after = [], 0
    pages = 0
    while True:
        body = page(locky_client, locky_user, limit=2, after_id=after)
        assert len(body["users"]) <= 2
        seen.extend(body["users"])
        pages += 1
        if body["next_after_id"] is None:
            break
        assert body["next_after_id"] == body["users"][-1]["id"]
        after = body["next_after_id"]
    assert seen == everyone
    assert pages == 3  # 6 users: 2 + 2 + 2, and the last page says so


def test_a_full_last_page_has_next_after_id_null(locky_client, locky_user, people):
    assert page(locky_client, locky_user, limit=6)["next_after_id"] is None
    assert page(locky_client, locky_user, limit=5)["next_after_id"] == people[3]["id"]


def test_after_id_returns_records_with_greater_ids(locky_client, locky_user, people):
    body = page(locky_client, locky_user, after_id=people[1]["id"])
    assert body["users"] == people[2:]
    assert page(locky_client, locky_user, after_id=people[-1]["id"]) == {"users": [], "next_after_id": None}
    assert page(locky_client, locky_user, after_id=2**63 - 1) == {"users": [], "next_after_id": None}


def test_limit_defaults_to_50_and_allows_1_to_500(locky_client, locky_user):
    for i in range(51):
        locky_client.register(f"bulk{i}@example.com")
    first = page(locky_client, locky_user)
    assert len(first["users"]) == 50 and first["next_after_id"] == first["users"][-1]["id"]
    rest = page(locky_client, locky_user, after_id=first["next_after_id"])
    assert len(rest["users"]) == 2 and rest["next_after_id"] is None
    assert len(page(locky_client, locky_user, limit=500)["users"]) == 52
    one = page(locky_client, locky_user, limit=1)
    assert len(one["users"]) == 1 and one["next_after_id"] == one["users"][0]["id"]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"limit": ""}, "limit"),
        ({"after_id": "-1"}, "after_id"),
        ({"after_id": "abc"}, "after_id"),
        ({"after_id": str(2**64)}, "after_id"),
        ({"email": "not-an-email"}, "email"),
        ({"email": ""}, "email"),
        ({"sort": "name"}, "sort"),
        ({"password": "x"}, "password"),
    ],
)
def test_bad_query_values_are_field_400s(locky_client, locky_user, params, field):
    result = locky_client.simulate_get(USERS, params=params, headers=locky_user.headers)
    assert_fields(result, field)
    assert_fields(locky_client.simulate_get(f"{USERS}/count", params=params, headers=locky_user.headers), field)


@pytest.mark.parametrize("after_id", [2**63 - 1, 2**63, 2**64 - 1])
def test_any_unsigned_64_bit_cursor_past_the_end_is_an_empty_last_page(locky_client, locky_user, after_id):
    result = locky_client.simulate_get(USERS, params={"after_id": str(after_id)}, headers=locky_user.headers)
    assert result.status_code == 200, result.text
    assert result.json == {"users": [], "next_after_id": None}


def test_email_filter_is_exact_and_case_insensitive(locky_client, locky_user, people):
    for query in ("person2@example.com", "PERSON2@Example.com"):
        body = page(locky_client, locky_user, email=query)
        assert body == {"users": [people[2]], "next_after_id": None}
        assert count(locky_client, locky_user, email=query) == 1
    for query in ("person@example.com", "erson2@example.com", "nobody@example.com"):
        assert page(locky_client, locky_user, email=query)["users"] == []
        assert count(locky_client, locky_user, email=query) == 0
    # A value no user can hold is a bad query value, not an empty match.
    result = locky_client.simulate_get(USERS, params={"email": "person2@example"}, headers=locky_user.headers)
    assert_fields(result, email="Not a valid email address.")


# -- count, get, me ----------------------------------------------------------------


def test_count_counts_live_users(locky_client, locky_user, people):
    assert count(locky_client, locky_user) == 6
    assert delete(locky_client, locky_user, locky_user.id).status_code == 204
    admin = locky_client.account("admin@example.com")
    assert count(locky_client, admin) == 6  # five people and the admin


def test_get_one_user(locky_client, locky_user, people):
    result = get(locky_client, locky_user, people[0]["id"])
    assert result.status_code == 200
    assert result.json == people[0]


def test_get_an_unknown_id_is_404(locky_client, locky_user):
    assert_not_found(get(locky_client, locky_user, 987654))


def test_me_is_the_caller(locky_client, locky_user, people):
    result = locky_client.simulate_get(f"{USERS}/me", headers=locky_user.headers)
    assert result.status_code == 200
    assert result.json == locky_user.body
    other = locky_client.account("other@example.com")
    assert locky_client.simulate_get(f"{USERS}/me", headers=other.headers).json["uuid"] == other.uuid


def test_reads_need_a_token(locky_client, locky_user):
    for path in (USERS, f"{USERS}/count", f"{USERS}/{locky_user.id}", f"{USERS}/me"):
        result = locky_client.simulate_get(path)
        assert_error(result, 401, "401 Unauthorized")
        assert result.headers["www-authenticate"] == "Bearer"


# -- update ------------------------------------------------------------------------


def test_a_user_updates_themself(locky_client, locky_user):
    before = locky_user.body
    result = put(locky_client, locky_user, locky_user.id, {"name": "New Name", "email": " New@Example.com ",
                                                           "current_password": locky_user.password})
    assert result.status_code == 200, result.text
    user = result.json
    assert set(user) == USER_KEYS
    assert (user["name"], user["email"]) == ("New Name", "new@example.com")
    assert (user["id"], user["uuid"], user["created_at"]) == (before["id"], before["uuid"], before["created_at"])
    assert user["updated_at"] > before["updated_at"] and TIMESTAMP.match(user["updated_at"])
    assert user["deleted_at"] is None
    assert get(locky_client, locky_user, locky_user.id).json == user
    # The new email logs in; the old one no longer does.
    assert locky_client.simulate_post("/v1/public/users/login", json={"email": "new@example.com", "password": locky_user.password}).status_code == 200
    assert locky_client.simulate_post("/v1/public/users/login", json={"email": "user@example.com", "password": locky_user.password}).status_code == 401


def test_put_changes_only_the_fields_present(locky_client, locky_user):
    result = put(locky_client, locky_user, locky_user.id, {"name": "Only Name"})
    assert result.status_code == 200
    assert result.json["email"] == locky_user.email
    result = put(locky_client, locky_user, locky_user.id, {"email": "only-email@example.com",
                                                           "current_password": locky_user.password})
    assert result.status_code == 200
    assert result.json["name"] == "Only Name"
    empty = put(locky_client, locky_user, locky_user.id, {})
    assert empty.status_code == 200
    assert empty.json == result.json


def test_put_changes_the_password(locky_client, locky_user):
    result = put(locky_client, locky_user, locky_user.id, {"password": "a brand new password",
                                                           "current_password": locky_user.password})
    assert result.status_code == 200
    assert "password" not in result.json and "a brand new password" not in result.text
    login = locky_client.simulate_post
    assert login("/v1/public/users/login", json={"email": locky_user.email, "password": "a brand new password"}).status_code == 200
    assert login("/v1/public/users/login", json={"email": locky_user.email, "password": locky_user.password}).status_code == 401


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": ""}, "name"),
        ({"name": "n" * 256}, "name"),
        ({"name": None}, "name"),
        ({"email": "not-an-email"}, "email"),
        ({"email": ""}, "email"),
        ({"email": None}, "email"),
        ({"password": "short"}, "password"),
        ({"password": "p" * 73}, "password"),
        ({"password": "\u00e9" * 36 + "a"}, "password"),
        ({"role": "admin"}, "role"),
        ({"is_admin": True}, "is_admin"),
    ],
)
def test_bad_updates_are_field_400s_and_change_nothing(locky_client, locky_user, body, field):
    assert_fields(put(locky_client, locky_user, locky_user.id, body), field)
    assert get(locky_client, locky_user, locky_user.id).json == locky_user.body


def test_read_only_fields_in_an_update_are_ignored(locky_client, locky_user):
    result = put(locky_client, locky_user, locky_user.id, {
        "id": 42, "uuid": "00000000-0000-4000-8000-000000000000", "created_at": "2000-01-01T00:00:00Z",
        "updated_at": "2000-01-01T00:00:00Z", "deleted_at": "2000-01-01T00:00:00Z", "builtin": True,
        "name": "Still Me",
    })
    assert result.status_code == 200, result.text
    user = result.json
    assert (user["id"], user["uuid"], user["created_at"]) == (locky_user.id, locky_user.uuid, locky_user.body["created_at"])
    assert user["deleted_at"] is None and user["name"] == "Still Me"


def test_email_must_stay_unique_regardless_of_case(locky_client, locky_user):
    other = locky_client.register("taken@example.com")
    for email in ("taken@example.com", "TAKEN@example.COM", "  Taken@Example.com"):
        assert_fields(put(locky_client, locky_user, locky_user.id, {"email": email, "current_password": locky_user.password}),
                      email="Already registered.")
    assert get(locky_client, locky_user, locky_user.id).json["email"] == locky_user.email
    assert get(locky_client, locky_user, other["id"]).json == other


def test_keeping_ones_own_email_in_another_case_is_fine(locky_client, locky_user):
    result = put(locky_client, locky_user, locky_user.id, {"email": locky_user.email.upper(), "name": "Same"})
    assert result.status_code == 200, result.text
    assert result.json["email"] == locky_user.email


def test_a_plain_user_cannot_update_someone_else(locky_client, locky_user, people):
    target = people[0]
    assert_forbidden(put(locky_client, locky_user, target["id"], {"name": "Hijacked"}))
    assert_forbidden(put(locky_client, locky_user, target["id"], {"password": "taken over!"}))
    assert get(locky_client, locky_user, target["id"]).json == target


def test_a_plain_user_cannot_update_an_admin(locky_client, locky_user, locky_admin):
    assert_forbidden(put(locky_client, locky_user, locky_admin.id, {"name": "Not Admin"}))


def test_an_admin_updates_anyone(locky_client, locky_admin, locky_user):
    result = put(locky_client, locky_admin, locky_user.id, {"name": "Renamed By Admin", "password": "set by the admin"})
    assert result.status_code == 200, result.text
    assert result.json["name"] == "Renamed By Admin"
    assert result.json["uuid"] == locky_user.uuid
    login = locky_client.simulate_post("/v1/public/users/login", json={"email": locky_user.email, "password": "set by the admin"})
    assert login.status_code == 200


def test_an_admin_also_hits_the_email_uniqueness_rule(locky_client, locky_admin, locky_user):
    assert_fields(put(locky_client, locky_admin, locky_user.id, {"email": "ADMIN@example.com"}), email="Already registered.")


def test_put_an_unknown_id_is_404(locky_client, locky_admin, locky_user):
    assert_not_found(put(locky_client, locky_admin, 987654, {"name": "Ghost"}))
    # A plain user gets 404 too, not 403, for a record that is not there.
    assert_not_found(put(locky_client, locky_user, 987654, {"name": "Ghost"}))


def test_put_needs_json(locky_client, locky_user):
    result = locky_client.simulate_put(f"{WRITE}/{locky_user.id}", body="name=x",
                                       headers={**locky_user.headers, "Content-Type": "application/x-www-form-urlencoded"})
    assert_error(result, 415, "415 Unsupported Media Type")
    result = locky_client.simulate_put(f"{WRITE}/{locky_user.id}", body="[]",
                                       headers={**locky_user.headers, "Content-Type": "application/json"})
    assert_fields(result, "body")


# -- delete ------------------------------------------------------------------------


def test_a_user_deletes_themself_softly(locky_client, locky_user, people):
    observer = locky_client.account("observer@example.com")
    result = delete(locky_client, locky_user, locky_user.id)
    assert result.status_code == 204
    assert result.content == b""
    # Hidden from every read, count and filter.
    assert_not_found(get(locky_client, observer, locky_user.id))
    assert locky_user.uuid not in {u["uuid"] for u in page(locky_client, observer)["users"]}
    assert page(locky_client, observer, email=locky_user.email)["users"] == []
    assert count(locky_client, observer, email=locky_user.email) == 0
    assert count(locky_client, observer) == 6
    # Their tokens stop working, and they can no longer log in.
    assert_error(locky_client.simulate_get(f"{USERS}/me", headers=locky_user.headers), 401, "401 Unauthorized")
    login = locky_client.simulate_post("/v1/public/users/login", json={"email": locky_user.email, "password": locky_user.password})
    assert_error(login, 401, "401 Unauthorized")


def test_writes_to_a_deleted_user_are_404(locky_client, locky_admin, locky_user):
    assert delete(locky_client, locky_admin, locky_user.id).status_code == 204
    assert_not_found(put(locky_client, locky_admin, locky_user.id, {"name": "Zombie"}))
    assert_not_found(delete(locky_client, locky_admin, locky_user.id))
    assert_not_found(get(locky_client, locky_admin, locky_user.id))


def test_a_deleted_users_email_is_free_again(locky_client, locky_admin, locky_user):
    assert delete(locky_client, locky_admin, locky_user.id).status_code == 204
    again = locky_client.register(locky_user.email)
    assert again["id"] != locky_user.id and again["uuid"] != locky_user.uuid
    assert page(locky_client, locky_admin, email=locky_user.email)["users"] == [again]
    # And another live user can take it by update once its owner is gone.
    assert delete(locky_client, locky_admin, again["id"]).status_code == 204
    other = locky_client.account("other@example.com")
    assert put(locky_client, other, other.id, {"email": locky_user.email,
                                               "current_password": other.password}).status_code == 200


def test_a_plain_user_cannot_delete_someone_else(locky_client, locky_user, people):
    assert_forbidden(delete(locky_client, locky_user, people[0]["id"]))
    assert get(locky_client, locky_user, people[0]["id"]).json == people[0]


def test_an_admin_deletes_anyone(locky_client, locky_admin, locky_user):
    assert delete(locky_client, locky_admin, locky_user.id).status_code == 204
    assert_not_found(get(locky_client, locky_admin, locky_user.id))
    assert_error(locky_client.simulate_get(f"{USERS}/me", headers=locky_user.headers), 401, "401 Unauthorized")


def test_deleting_a_user_ends_their_memberships(locky_client, locky_user, locky_admin):
    group = locky_client.simulate_post("/v1/private/groups", json={"name": "Team"}, headers=locky_user.headers)
    assert group.status_code == 201
    members = lambda: locky_client.simulate_get(  # noqa: E731
        "/v1/internal/members", params={"user_uuid": locky_user.uuid}, headers=locky_admin.headers).json["members"]
    assert len(members()) == 1
    assert delete(locky_client, locky_user, locky_user.id).status_code == 204
    assert members() == []


def test_deleting_needs_a_token(locky_client, locky_user):
    assert_error(locky_client.simulate_delete(f"{WRITE}/{locky_user.id}"), 401, "401 Unauthorized")
    assert get(locky_client, locky_user, locky_user.id).status_code == 200


# -- path ids ----------------------------------------------------------------------

BAD_IDS = ["0", "-1", "abc", str(2**64), str(2**64 + 1), "9" * 30, "1.0", "1e3", "0x1", "\u0661"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_path_ids_that_are_not_positive_64_bit_integers_are_404(locky_client, locky_admin, bad):
    for result in (
        locky_client.simulate_get(f"{USERS}/{bad}", headers=locky_admin.headers),
        locky_client.simulate_put(f"{WRITE}/{bad}", json={"name": "x"}, headers=locky_admin.headers),
        locky_client.simulate_delete(f"{WRITE}/{bad}", headers=locky_admin.headers),
    ):
        assert_not_found(result)


def test_the_largest_id_is_a_plain_404(locky_client, locky_admin):
    assert_not_found(get(locky_client, locky_admin, 2**63 - 1))
    assert_not_found(put(locky_client, locky_admin, 2**63 - 1, {"name": "x"}))
