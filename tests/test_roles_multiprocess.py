"""Custom roles across worker processes and restarts, on a real ``locky serve
--workers 3`` over SQLite in ``tmp_path`` (127.0.0.1 only): a role and membership
made through one request hold in every worker from the next request on, a change or
deletion is seen by all of them at once, and roles survive a restart (docs/http/authorization.md:
"stored, survive restarts, and take effect in every worker process at
once")."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET
from support.server import free_port, locky_server

pytestmark = pytest.mark.server

WORKERS = 3
NOBODY = "00000000-0000-4000-8000-000000000000"  # a group uuid that names nothing
ROUNDS = 30  # requests per observation, sent 6 at a time so that every worker takes some


@pytest.fixture
def env(tmp_path):
    return {
        "LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'locky.sqlite'}",
        "LOCKY_JWT_SECRET": TEST_SECRET,
        "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL,
        "LOCKY_BCRYPT_ROUNDS": "4",
        "LOCKY_POLICY_DIR": "",
        "LOCKY_PLUGINS": "",
    }


def call(server, method, path, body=None, token=None, expect=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, _, payload = server.request(method, path, body, headers)
    if expect is not None:
        assert status == expect, (method, path, status, payload)
    return status, payload


def account(server, email, verified=False):
    """Register and log in ``email``; prove the address first when ``verified`` (an admin
    email makes an admin only then)."""
    call(server, "POST", "/v1/public/users/register", {"name": email.split("@")[0], "email": email,
                                                        "password": PASSWORD}, expect=201)
    if verified:
        server.verify(email)
    _, tokens = call(server, "POST", "/v1/public/users/login", {"email": email, "password": PASSWORD}, expect=200)
    return tokens["user"], tokens["access_token"]


def many(server, method, path, token, body=None):
    """``ROUNDS`` concurrent-ish requests: their (status, body) pairs."""
    with ThreadPoolExecutor(max_workers=6) as pool:
        return list(pool.map(lambda _: call(server, method, path, body, token), range(ROUNDS)))


def decisions(server, path, token):
    """The distinct (status, allowed) answers of ``ROUNDS`` checks."""
    return {(s, b.get("allowed")) for s, b in many(server, "GET", path, token)}


def check_path(user_uuid, resource, action, group_uuid):
    return (f"/v1/internal/authz/check?user_uuid={user_uuid}&resource={resource}&action={action}"
            f"&group_uuid={group_uuid}")


def test_custom_roles_reach_every_worker_at_once_and_survive_a_restart(tmp_path, env):
    workdir = tmp_path / "run"
    # The restart listens where the first server did: the tokens' issuer (docs/http/tokens.md,
    # http://<host>:<port> when no public URL is set) stays the same, as it does for a
    # service restarted in place.
    port = free_port()
    with locky_server(workdir, env=env, workers=WORKERS, port=port) as server:
        admin, admin_token = account(server, ADMIN_EMAIL)
        # The admin email makes an admin once the address is proved: not before, in any
        # worker (each decides, and caches, "no" first), and from then on in all of them.
        early = many(server, "POST", "/v1/private/roles", admin_token, {"name": "too-early"})
        assert {s for s, _ in early} == {403}, early
        server.verify(ADMIN_EMAIL)
        assert decisions(server, check_path(admin["uuid"], "roles", "write", NOBODY), admin_token) == {(200, True)}
        clerk, clerk_token = account(server, "clerk@example.com")
        _, group = call(server, "POST", "/v1/private/groups", {"name": "Accounts"}, admin_token, expect=201)
        decision = check_path(clerk["uuid"], "invoices", "approve", group["uuid"])
        group_url = f"/v1/private/groups/{group['id']}"

        # Every worker decides (and caches) "no" first, so a stale cache would show.
        assert decisions(server, decision, admin_token) == {(200, False)}
        assert {s for s, _ in many(server, "PUT", group_url, clerk_token, {"description": "x"})} == {403}

        _, role = call(server, "POST", "/v1/private/roles", {
            "name": "approver", "permissions": [{"resource": "invoices", "action": "approve"},
                                                {"resource": "groups", "action": "update"}]},
            admin_token, expect=201)
        _, membership = call(server, "POST", "/v1/private/members", {
            "group_uuid": group["uuid"], "user_uuid": clerk["uuid"], "role": "approver"}, admin_token, expect=201)

        assert decisions(server, decision, admin_token) == {(200, True)}
        updates = many(server, "PUT", group_url, clerk_token, {"description": "by the clerk"})
        assert {s for s, _ in updates} == {200}, updates
        listed = many(server, "GET", "/v1/internal/roles?name=approver", clerk_token)
        assert all(s == 200 and [r["id"] for r in b["roles"]] == [role["id"]] for s, b in listed), listed

        # A change to the role is seen by every worker from the next request on.
        call(server, "PUT", f"/v1/private/roles/{role['id']}", {
            "permissions": [{"resource": "invoices", "action": "approve"}]}, admin_token, expect=200)
        assert {s for s, _ in many(server, "PUT", group_url, clerk_token, {"description": "y"})} == {403}
        assert decisions(server, decision, admin_token) == {(200, True)}

        # Ending the membership, then deleting the role: gone everywhere at once.
        call(server, "DELETE", f"/v1/private/members/{membership['id']}", token=admin_token, expect=204)
        assert decisions(server, decision, admin_token) == {(200, False)}
        call(server, "DELETE", f"/v1/private/roles/{role['id']}", token=admin_token, expect=204)
        listed = many(server, "GET", "/v1/internal/roles?name=approver", clerk_token)
        assert {(s, len(b["roles"])) for s, b in listed} == {(200, 0)}, listed
        gone = many(server, "GET", f"/v1/internal/roles/{role['id']}", clerk_token)
        assert {s for s, _ in gone} == {404}

        # A role that stays, held by a membership, for the restart.
        _, keeper = call(server, "POST", "/v1/private/roles", {
            "name": "keeper", "description": "Survives restarts",
            "permissions": [{"resource": "vault", "action": "open"}]}, admin_token, expect=201)
        call(server, "POST", "/v1/private/members", {
            "group_uuid": group["uuid"], "user_uuid": clerk["uuid"], "role": "keeper"}, admin_token, expect=201)
        vault = check_path(clerk["uuid"], "vault", "open", group["uuid"])
        assert decisions(server, vault, admin_token) == {(200, True)}

    with locky_server(workdir, env=env, workers=WORKERS, port=port) as server:
        # Tokens too survive (same secret, same database): no new login needed.
        _, roles = call(server, "GET", "/v1/internal/roles?name=keeper", token=clerk_token, expect=200)
        assert roles["roles"] == [keeper]
        assert decisions(server, vault, admin_token) == {(200, True)}
        assert decisions(server, decision, admin_token) == {(200, False)}
        _, count = call(server, "GET", "/v1/internal/roles/count", token=clerk_token, expect=200)
        assert count == {"count": 9}  # eight built-in roles and keeper; approver stays deleted
