"""Membership races: adding a member while its group, user or role is deleted left live
memberships on deleted records (issue 13, finding 3).

Adding a membership read its group, user and role, then inserted; a delete of any of
them committed in between, and its cascade (or, for a role, its "held by a live
membership" check) had not seen the insert. Now the add locks what it reads, and each
delete locks its row before it checks or cascades (see ``locky_pony.stores``), so one of
the two waits for the other. Likewise two owners leaving one group at once could both
pass the "last owner" check.

Each test races the two requests many times through HTTP (threads released together
into one app, on SQLite, PostgreSQL and MariaDB), then counts the orphans by SQL:
live memberships whose group, user or role is not live.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pytest

from locky.app import create_app
from locky.testing import ADMIN_EMAIL, Account, make_settings
from locky.testing.databases import run_sql

from harden import RecordingClient

TRIALS = 25

#: Live memberships whose group, user or role is not live.
ORPHANS = """
SELECT COUNT(*) FROM locky_members m
WHERE m.del_token = 0 AND (
    NOT EXISTS (SELECT 1 FROM locky_groups g WHERE g.uuid = m.group_uuid AND g.del_token = 0)
    OR NOT EXISTS (SELECT 1 FROM locky_users u WHERE u.uuid = m.user_uuid AND u.del_token = 0)
    OR NOT EXISTS (SELECT 1 FROM locky_roles r WHERE r.name = m.role AND r.del_token = 0))
"""
#: Live groups without a live owner.
OWNERLESS = """
SELECT COUNT(*) FROM locky_groups g
WHERE g.del_token = 0 AND NOT EXISTS (
    SELECT 1 FROM locky_members m WHERE m.group_uuid = g.uuid AND m.role = 'owner' AND m.del_token = 0)
"""


@dataclass
class Track:
    url: str
    client: RecordingClient
    admin: Account

    def post(self, path: str, body: dict, account: Account | None = None) -> dict:
        result = self.client.simulate_post(path, json=body, headers=(account or self.admin).headers)
        assert result.status_code == 201, result.text
        return result.json

    def newcomer(self, n: int) -> dict:
        return self.client.register(f"racer-{n}@example.com")

    def add(self, group: dict, user: dict, role: str = "member", account: Account | None = None):
        """The request that adds ``user`` to ``group`` (not sent yet)."""
        body = {"group_uuid": group["uuid"], "user_uuid": user["uuid"], "role": role}
        headers = (account or self.admin).headers
        return lambda: self.client.simulate_post("/v1/private/members", json=body, headers=headers)

    def delete(self, path: str, account: Account | None = None):
        headers = (account or self.admin).headers
        return lambda: self.client.simulate_delete(path, headers=headers)

    def count(self, sql: str) -> int:
        return run_sql(self.url, sql)[0][0]


@pytest.fixture
def track(database_url) -> Track:
    app = create_app(make_settings(database_url, log_requests=False))
    try:
        client = RecordingClient(app)
        yield Track(database_url, client, client.account(ADMIN_EMAIL, verified=True))
    finally:
        app.close()


def together(calls: list[Callable]) -> list:
    """Run the calls in threads released at the same instant; their results in order."""
    gate = threading.Barrier(len(calls))

    def run(call):
        gate.wait(30)
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(run, call) for call in calls]]


def race(track: Track, make_trial: Callable[[int], tuple[Callable, Callable]]) -> tuple[Counter, Counter]:
    """``TRIALS`` races of an add against a delete (either one first in turn); the
    statuses each side got."""
    adds, deletes = Counter(), Counter()
    for n in range(TRIALS):
        add, delete = make_trial(n)
        if n % 2:
            delete_result, add_result = together([delete, add])
        else:
            add_result, delete_result = together([add, delete])
        adds[add_result.status_code] += 1
        deletes[delete_result.status_code] += 1
    return adds, deletes


def test_adding_members_racing_group_deletes_leaves_no_orphans(track):
    def trial(n):
        group = track.post("/v1/private/groups", {"name": f"doomed-{n}"})
        return track.add(group, track.newcomer(n)), track.delete(f"/v1/private/groups/{group['id']}")

    adds, deletes = race(track, trial)
    orphans = track.count(ORPHANS)
    print(f"\ngroup deletes: adds {dict(adds)}, deletes {dict(deletes)}, orphans {orphans}")
    assert set(adds) <= {201, 400} and deletes == {204: TRIALS}, (adds, deletes)
    assert orphans == 0


def test_adding_members_racing_user_deletes_leaves_no_orphans(track):
    group = track.post("/v1/private/groups", {"name": "club"})

    def trial(n):
        user = track.newcomer(n)
        return track.add(group, user), track.delete(f"/v1/private/users/{user['id']}")

    adds, deletes = race(track, trial)
    orphans = track.count(ORPHANS)
    print(f"\nuser deletes: adds {dict(adds)}, deletes {dict(deletes)}, orphans {orphans}")
    assert set(adds) <= {201, 400} and deletes == {204: TRIALS}, (adds, deletes)
    assert orphans == 0


def test_adding_members_racing_role_deletes_leaves_no_orphans(track):
    group = track.post("/v1/private/groups", {"name": "club"})

    def trial(n):
        role = track.post("/v1/private/roles", {"name": f"fleeting-{n}"})
        return track.add(group, track.newcomer(n), role["name"]), track.delete(f"/v1/private/roles/{role['id']}")

    adds, deletes = race(track, trial)
    orphans = track.count(ORPHANS)
    print(f"\nrole deletes: adds {dict(adds)}, deletes {dict(deletes)}, orphans {orphans}")
    # One of the two wins each trial: the add (and the delete finds the role held), or
    # the delete (and the add finds no such role).
    assert adds[201] == deletes[400] and adds[400] == deletes[204], (adds, deletes)
    assert set(adds) <= {201, 400} and set(deletes) <= {204, 400}
    assert orphans == 0


def test_a_recreated_role_name_revives_no_membership(track):
    """The role-delete race again, then each deleted name created anew: no membership
    (live or revived) holds the new role."""
    group = track.post("/v1/private/groups", {"name": "club"})
    names = []

    def trial(n):
        role = track.post("/v1/private/roles", {"name": f"phoenix-{n}"})
        names.append(role["name"])
        return track.add(group, track.newcomer(n), role["name"]), track.delete(f"/v1/private/roles/{role['id']}")

    adds, deletes = race(track, trial)
    reborn = [track.post("/v1/private/roles", {"name": name}) for name in names
              if not run_sql(track.url, "SELECT 1 FROM locky_roles WHERE name = %s AND del_token = 0", name)]
    assert len(reborn) == deletes[204]
    for role in reborn:
        holders = track.client.simulate_get("/v1/internal/members/count", params={"role": role["name"]},
                                            headers=track.admin.headers)
        assert holders.json == {"count": 0}, role
    assert track.count(ORPHANS) == 0


def test_two_owners_leaving_at_once_leave_one(track):
    first = track.client.account("first-owner@example.com")
    second = track.client.account("second-owner@example.com")
    outcomes = Counter()
    for n in range(TRIALS):
        group = track.post("/v1/private/groups", {"name": f"co-owned-{n}"}, first)
        track.add(group, second.body, "owner", first)()
        mine = {m["user_uuid"]: m["id"] for m in track.client.simulate_get(
            "/v1/internal/members", params={"group_uuid": group["uuid"]}, headers=first.headers).json["members"]}
        leaves = [track.delete(f"/v1/private/members/{mine[who.uuid]}", who) for who in (first, second)]
        results = together(leaves if n % 2 else leaves[::-1])
        outcomes[tuple(sorted(r.status_code for r in results))] += 1
        refused = [r for r in results if r.status_code == 400]
        assert all(list(r.json) == ["role"] for r in refused), [r.text for r in refused]
    ownerless = track.count(OWNERLESS)
    print(f"\nowners leaving together: {dict(outcomes)}, ownerless groups {ownerless}")
    assert outcomes == {(204, 400): TRIALS}
    assert ownerless == 0
