"""Races: 20 concurrent requests against a real multi-process server (4 workers), on
SQLite and on PostgreSQL. Uniqueness holds (one winner, the losers get the contract's
400 field map, never a 5xx) and an update racing a delete leaves a consistent record.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest

from locky.testing import ADMIN_EMAIL

from harden import STRONG, account, fresh_database, http, query, served

pytestmark = pytest.mark.server

RACERS = 20


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def racetrack(request, tmp_path_factory):
    """A 4-worker server on a fresh database of each backend, with an admin logged in."""
    workdir = tmp_path_factory.mktemp(f"races-{request.param}")
    with fresh_database(request.param, workdir) as url, served(workdir, url, workers=4) as server:
        server.database_url = url
        server.admin = account(server, ADMIN_EMAIL, verified=True)["access_token"]
        yield server


def race(server, requests: list[tuple]) -> list:
    """Send every ``(method, path, body, token)`` at the same instant, one thread each."""
    gate = threading.Barrier(len(requests))
    replies: list = [None] * len(requests)

    def go(n: int, method: str, path: str, body, token) -> None:
        gate.wait()
        replies[n] = http(server, method, path, body, token=token)

    threads = [threading.Thread(target=go, args=(n, *r)) for n, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(replies), "a request did not finish"
    return replies


def one_winner(replies, field: str) -> dict:
    statuses = Counter(r.status for r in replies)
    assert statuses[201] == 1 and statuses[400] == RACERS - 1, statuses
    for reply in replies:
        if reply.status == 400:
            body = reply.json
            assert isinstance(body, dict) and list(body) == [field] and isinstance(body[field], str), body
    return next(r.json for r in replies if r.status == 201)


def test_concurrent_registrations_of_one_email(racetrack):
    email = f"race-{uuid.uuid4().hex[:8]}@example.com"
    body = {"name": "Racer", "email": email, "password": STRONG}
    replies = race(racetrack, [("POST", "/v1/public/users/register", body, None)] * RACERS)
    winner = one_winner(replies, "email")
    print(f"\nregistrations: {dict(Counter(r.status for r in replies))}")
    found = http(racetrack, "GET", f"/v1/internal/users?email={email}", token=racetrack.admin).json["users"]
    assert [u["id"] for u in found] == [winner["id"]]
    assert query(racetrack.database_url, "SELECT COUNT(*) FROM locky_users WHERE email = %s", email) == [(1,)]


def test_concurrent_creations_of_one_group(racetrack):
    name = f"race-group-{uuid.uuid4().hex[:8]}"
    replies = race(racetrack, [("POST", "/v1/private/groups", {"name": name}, racetrack.admin)] * RACERS)
    winner = one_winner(replies, "name")
    print(f"\ngroups: {dict(Counter(r.status for r in replies))}")
    assert query(racetrack.database_url, "SELECT COUNT(*) FROM locky_groups WHERE name = %s", name) == [(1,)]
    # The creator became its owner exactly once, whatever the losers tried.
    owners = http(racetrack, "GET", f"/v1/internal/members?group_uuid={winner['uuid']}", token=racetrack.admin).json
    assert [m["role"] for m in owners["members"]] == ["owner"]


def test_concurrent_adds_of_one_membership(racetrack):
    joiner = account(racetrack, f"joiner-{uuid.uuid4().hex[:8]}@example.com")
    group = http(racetrack, "POST", "/v1/private/groups", {"name": f"club-{uuid.uuid4().hex[:8]}"},
                 token=racetrack.admin).json
    body = {"group_uuid": group["uuid"], "user_uuid": joiner["user"]["uuid"], "role": "member"}
    replies = race(racetrack, [("POST", "/v1/private/members", body, racetrack.admin)] * RACERS)
    one_winner(replies, "user_uuid")
    print(f"\nmemberships: {dict(Counter(r.status for r in replies))}")
    live = query(racetrack.database_url,
                 "SELECT COUNT(*) FROM locky_members WHERE group_uuid = %s AND user_uuid = %s AND del_token = 0",
                 group["uuid"], joiner["user"]["uuid"])
    assert live == [(1,)]


def test_update_racing_delete_of_a_group(racetrack):
    member = account(racetrack, f"member-{uuid.uuid4().hex[:8]}@example.com")
    group = http(racetrack, "POST", "/v1/private/groups", {"name": f"doomed-{uuid.uuid4().hex[:8]}"},
                 token=racetrack.admin).json
    assert http(racetrack, "POST", "/v1/private/members",
                {"group_uuid": group["uuid"], "user_uuid": member["user"]["uuid"]}, token=racetrack.admin).status == 201
    path = f"/v1/private/groups/{group['id']}"
    names = [f"renamed-{n}-{uuid.uuid4().hex[:6]}" for n in range(RACERS // 2)]
    requests = [("PUT", path, {"name": name, "description": "racing"}, racetrack.admin) for name in names]
    requests += [("DELETE", path, None, racetrack.admin)] * (RACERS // 2)
    replies = race(racetrack, requests)
    puts, deletes = replies[: RACERS // 2], replies[RACERS // 2:]
    print(f"\nupdate vs delete: PUT {dict(Counter(r.status for r in puts))}, "
          f"DELETE {dict(Counter(r.status for r in deletes))}")
    assert Counter(r.status for r in deletes) == {204: 1, 404: RACERS // 2 - 1}
    assert {r.status for r in puts} <= {200, 404}
    renamed = {r.json["name"] for r in puts if r.status == 200}
    assert all(r.json["deleted_at"] is None for r in puts if r.status == 200)
    # Gone from the API, and stored as one consistent soft delete: nothing updated it
    # after the delete, and its memberships went with it.
    assert http(racetrack, "GET", f"/v1/internal/groups/{group['id']}", token=racetrack.admin).status == 404
    (name, deleted_at, updated_at, del_token), = query(
        racetrack.database_url, "SELECT name, deleted_at, updated_at, del_token FROM locky_groups WHERE id = %s",
        group["id"])
    assert deleted_at is not None and str(updated_at) == str(deleted_at) and del_token == group["id"]
    assert name in renamed | {group["name"]}
    live = query(racetrack.database_url, "SELECT COUNT(*) FROM locky_members WHERE group_uuid = %s AND del_token = 0",
                 group["uuid"])
    assert live == [(0,)]


def test_update_racing_delete_of_a_user(racetrack):
    victim = account(racetrack, f"victim-{uuid.uuid4().hex[:8]}@example.com")
    path = f"/v1/private/users/{victim['user']['id']}"
    requests = [("PUT", path, {"name": f"Renamed {n}"}, racetrack.admin) for n in range(RACERS // 2)]
    requests += [("DELETE", path, None, racetrack.admin)] * (RACERS // 2)
    replies = race(racetrack, requests)
    puts, deletes = replies[: RACERS // 2], replies[RACERS // 2:]
    assert Counter(r.status for r in deletes) == {204: 1, 404: RACERS // 2 - 1}
    assert {r.status for r in puts} <= {200, 404}
    (deleted_at, updated_at), = query(racetrack.database_url,
                                      "SELECT deleted_at, updated_at FROM locky_users WHERE id = %s",
                                      victim["user"]["id"])
    assert deleted_at is not None and str(updated_at) == str(deleted_at)
    assert http(racetrack, "GET", "/v1/internal/users/me", token=victim["access_token"]).status == 401
