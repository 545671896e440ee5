"""What an auth cache (``LOCKY_AUTH_CACHE``) must never change, whatever keeps it honest:
scenarios run by ``test_auth_cache.py`` (PostgreSQL ``LISTEN/NOTIFY``, two hosts) and
``test_sqlite_auth_cache.py`` (SQLite's data version, two apps or servers on one file).

``a`` and ``b`` are :class:`~locky.testing.LockyClient` of two apps on one database with
the cache on; every change is made through ``a`` and checked on ``b``.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

from authz_helpers import auditor_in_finance

from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET
from support.server import locky_server, one_service

ROUNDS = 20


def me(client, account) -> int:
    return client.simulate_get("/v1/internal/users/me", headers=account.headers).status_code


def assert_from_memory(cache, read: Callable[[], object], hits: int, attempts: int = 50) -> None:
    """``read()`` (a request that checks its own answer), made again right after it
    filled the cache, is served with at least ``hits`` cache hits. On SQLite any commit
    empties the cache, one of a background sender (the mail outbox) too: while one came
    in between, try again."""
    for _ in range(attempts):
        read()
        before = cache.hits
        read()
        if cache.hits - before >= hits:
            return
        time.sleep(0.02)
    raise AssertionError(f"not served from memory: fewer than {hits} cache hits, {attempts} times")


def me_ok(client, account) -> Callable[[], None]:
    def read() -> None:
        assert me(client, account) == 200
    return read


def reads_come_from_memory_and_a_logout_holds_at_once(a, b) -> None:
    """A's logouts are refused by B on the very next request, round after round, while
    B serves the session and the revision from memory."""
    cache = b.app.context.storage.cache
    for round in range(ROUNDS):
        ada = a.account(f"ada{round}@example.com")
        assert_from_memory(cache, me_ok(b, ada), 2)  # the session and the revision: no database read
        assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
        assert me(b, ada) == 401, f"round {round}: B served a session A had ended"


def user_records_come_from_memory_and_changes_are_seen_at_once(a, b) -> None:
    """B serves a user's record from memory and sees A's changes to it at once."""
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    bob = a.account("bob@example.com")
    cache = b.app.context.storage.cache

    def on_b(account=admin):
        answer = b.simulate_get(f"/v1/internal/users/{ada.id}", headers=account.headers)
        return answer.status_code, answer.json

    def read_ada() -> None:
        assert on_b()[0] == 200

    assert_from_memory(cache, read_ada, 3)  # the session, the revision and the record
    for round in range(5):
        name = f"Ada {round}"
        assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                              json={"name": name}).status_code == 200
        assert on_b()[1]["name"] == name, f"round {round}"
        assert on_b(bob)[1]["name"] == name
    assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                          json={"disabled": True}).status_code == 200
    assert on_b()[1]["disabled"] is True
    assert me(b, ada) == 401  # a disabled user's session ends with it
    # A change to one user leaves what is cached for the others.
    assert_from_memory(cache, me_ok(b, bob), 2)
    assert a.simulate_delete(f"/v1/private/users/{ada.id}", headers=admin.headers).status_code == 204
    assert on_b()[0] == 404


def deletions_and_authorization_changes_hold_at_once(a, b) -> None:
    """Memberships, role permissions, a global grant and a user deletion made through A
    decide B's very next answer."""
    admin, ada, bob = (a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com"),
                       a.account("bob@example.com"))
    role = a.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}).json
    group = a.simulate_post("/v1/private/groups", json={"name": "finance"}, headers=ada.headers).json
    query = {"user_uuid": bob.uuid, "resource": "reports", "action": "read", "group_uuid": group["uuid"]}

    def allowed() -> bool:
        result = b.simulate_get("/v1/internal/authz/check", headers=ada.headers, params=query)
        assert result.status_code == 200, result.text
        return result.json["allowed"]

    for round in range(5):
        member = a.simulate_post("/v1/private/members", headers=ada.headers,
                                 json={"group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "auditor"})
        assert member.status_code == 201, member.text
        assert allowed() and allowed(), f"round {round}: a new membership"
        assert a.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin.headers,
                              json={"permissions": []}).status_code == 200
        assert not allowed(), f"round {round}: a role emptied"
        assert a.simulate_put(f"/v1/private/roles/{role['id']}", headers=admin.headers, json={
            "permissions": [{"resource": "reports", "action": "read"}]}).status_code == 200
        assert allowed(), f"round {round}: a role filled again"
        assert a.simulate_delete(f"/v1/private/members/{member.json['id']}",
                                 headers=ada.headers).status_code == 204
        assert not allowed(), f"round {round}: a membership ended"

    # A global grant, as `locky grant-admin` makes it through the storage.
    admin_only = {"user_uuid": bob.uuid, "resource": "users", "action": "list"}
    check = functools.partial(b.simulate_get, "/v1/internal/authz/check", headers=ada.headers, params=admin_only)
    assert check().json["allowed"] is False and check().json["allowed"] is False
    a.app.context.storage.grants.grant(bob.uuid, "admin")
    assert check().json["allowed"] is True

    # A deleted user's session.
    carl = a.account("carl@example.com")
    assert me(b, carl) == 200 and me(b, carl) == 200
    assert a.simulate_delete(f"/v1/private/users/{carl.id}", headers=carl.headers).status_code == 204
    assert me(b, carl) == 401


def memberships_come_from_memory_and_changes_are_seen_at_once(a, b) -> None:
    """B keeps the roles users hold in groups in memory (a group-scoped check reads one
    more value from it than the same check without the group), for single checks and
    batches alike; a membership added or ended and a group deleted through A decide
    B's very next answer, round after round."""
    cache = b.app.context.storage.cache
    admin, ada, bob = (a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com"),
                       a.account("bob@example.com"))
    assert a.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}).status_code == 201

    def single(query: dict) -> bool:
        result = b.simulate_get("/v1/internal/authz/check", headers=ada.headers, params=query)
        assert result.status_code == 200, result.text
        return result.json["allowed"]

    def batch(query: dict) -> bool:
        result = b.simulate_post("/v1/internal/authz/check", headers=ada.headers, json={"checks": [query]})
        assert result.status_code == 200, result.text
        return result.json["results"][0]["allowed"]

    def hits(read: Callable[[], object]) -> int:
        read()
        before = cache.hits
        read()
        return cache.hits - before

    for round in range(5):
        group = a.simulate_post("/v1/private/groups", json={"name": f"finance {round}"}, headers=ada.headers).json
        scoped = {"user_uuid": bob.uuid, "resource": "reports", "action": "read", "group_uuid": group["uuid"]}
        plain = {key: value for key, value in scoped.items() if key != "group_uuid"}
        assert not single(scoped) and not batch(scoped), f"round {round}: no membership yet"
        member = a.simulate_post("/v1/private/members", headers=ada.headers,
                                 json={"group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "auditor"})
        assert member.status_code == 201, member.text
        assert single(scoped) and batch(scoped), f"round {round}: a new membership"
        for read in (functools.partial(single, scoped), functools.partial(batch, scoped)):
            # On SQLite any commit (a background sender's) empties the cache: try again.
            assert any(hits(read) > hits(functools.partial(single, plain)) for _ in range(50)), \
                f"round {round}: the membership was not served from memory"
        assert a.simulate_delete(f"/v1/private/members/{member.json['id']}",
                                 headers=ada.headers).status_code == 204
        assert not single(scoped) and not batch(scoped), f"round {round}: a membership ended"
        member = a.simulate_post("/v1/private/members", headers=ada.headers,
                                 json={"group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "auditor"})
        assert member.status_code == 201, member.text
        assert single(scoped) and batch(scoped) and single(scoped), f"round {round}: a membership again"
        assert a.simulate_delete(f"/v1/private/groups/{group['id']}", headers=ada.headers).status_code == 204
        assert not single(scoped) and not batch(scoped), f"round {round}: the group deleted"


#: The scenarios of two apps on one database, for ``pytest.mark.parametrize``.
TWO_APPS = (reads_come_from_memory_and_a_logout_holds_at_once,
            user_records_come_from_memory_and_changes_are_seen_at_once,
            deletions_and_authorization_changes_hold_at_once,
            memberships_come_from_memory_and_changes_are_seen_at_once)


def two_servers_hold_revocation_at_once(database_url: str, auth_cache: str, tmp_path) -> None:
    """Two ``locky serve`` processes (two workers each) on one database, with the cache
    on: a logout, a role change and a user deletion made through one hold on the other's
    very next requests, whichever worker serves them."""
    env = one_service(database_url, tmp_path, LOCKY_AUTH_CACHE=auth_cache, LOCKY_JWT_SECRET=TEST_SECRET,
                      LOCKY_ADMIN_EMAILS=ADMIN_EMAIL, LOCKY_BCRYPT_ROUNDS="4", LOCKY_LOGIN_MAX_FAILURES_PER_IP="1000")
    with locky_server(tmp_path / "a", env=env) as a, locky_server(tmp_path / "b", env=env) as b:
        def login(email: str) -> dict[str, str]:
            return a.sign_up(email, PASSWORD, verify=email == ADMIN_EMAIL)

        def on_b(headers) -> list[int]:
            return [b.request("GET", "/v1/internal/users/me", headers=headers)[0] for _ in range(4)]

        stale = 0
        for round in range(10):
            ada = login(f"ada{round}@example.com")
            assert on_b(ada) == [200] * 4  # both of B's workers have it cached
            assert a.request("POST", "/v1/private/users/logout", headers=ada)[0] == 204
            stale += on_b(ada).count(200)
        assert stale == 0

        admin, bob = login(ADMIN_EMAIL), login("bob@example.com")
        bob_uuid = a.request("GET", "/v1/internal/users/me", headers=bob)[2]["uuid"]
        role, query = auditor_in_finance(a, admin, bob_uuid)

        def allowed() -> list[bool]:
            answers = []
            for _ in range(4):
                status, _, body = b.request("GET", f"/v1/internal/authz/check?{query}", headers=bob)
                assert status == 200, body
                answers.append(body["allowed"])
            return answers

        for _ in range(5):
            assert allowed() == [True] * 4
            assert a.request("PUT", f"/v1/private/roles/{role['id']}", {"permissions": []}, admin)[0] == 200
            assert allowed() == [False] * 4
            assert a.request("PUT", f"/v1/private/roles/{role['id']}", {
                "permissions": [{"resource": "reports", "action": "read"}]}, admin)[0] == 200

        carl = login("carl@example.com")
        carl_id = a.request("GET", "/v1/internal/users/me", headers=carl)[2]["id"]
        assert on_b(carl) == [200] * 4
        assert a.request("DELETE", f"/v1/private/users/{carl_id}", headers=carl)[0] == 204
        assert on_b(carl) == [401] * 4
    assert "Traceback" not in a.log() + b.log()
