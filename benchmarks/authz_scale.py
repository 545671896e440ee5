"""How the cost of one authorization decision grows with the stored policy.

    python benchmarks/authz_scale.py            # 10 / 1,000 / 10,000 policy lines, ~1 minute
    python benchmarks/authz_scale.py --small    # a few seconds: does it still run?

For each size it builds a fresh app on SQLite in a temporary directory, seeds it
through the storage interface (users, groups, 10,000 memberships, custom roles whose
permissions are the stored policy lines), then times

- ``context.authorizer.is_allowed`` directly, and
- ``GET /v1/internal/authz/check`` through Falcon's ``TestClient`` (token check,
  user lookup, decision, JSON),

for allowed and for denied decisions. Every check names a random membership (user
and group) and an action drawn from 100,000 strings, so nearly every decision misses
the authorizer's decision cache and is enforced; a third "repeated" row asks the same
few questions again and again to show the cached path. Rates are the median over
chunks of 25 checks, which shrugs off bursts of load from other processes. Each answer is checked against the
expected decision, so a fast wrong authorizer cannot pass. A script, not a test: the
suite only runs it with ``--small`` (tests/test_authz_scale_smoke.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from falcon import testing

from locky.app import create_app
from locky.records import Permission
from locky.settings import Settings

SECRET = "authz-scale-benchmark-secret-0123456789abcdef"
CALLER = "caller@example.com"
PASSWORD = "benchmark password"
PERMISSIONS_PER_ROLE = 10
ACTIONS = 100_000
CHUNK = 25  # checks per timed chunk


@dataclass
class Case:
    user: object  # locky.records.User
    group_uuid: str
    resource: str
    action: str
    allowed: bool


@dataclass
class World:
    app: object
    client: testing.TestClient
    token: str
    users: list
    groups: list
    held: list  # (user index, group index, role index) of every seeded membership
    roles: int
    load_seconds: float
    seed_seconds: float


def batch(storage):
    """One transaction around many store calls on the Pony storage (its methods join
    an enclosing ``db_session``); a no-op context otherwise."""
    if getattr(storage, "db", None) is None:
        from contextlib import nullcontext

        return nullcontext()
    from pony.orm import db_session

    return db_session


def role_permissions(i: int) -> list[Permission]:
    """Role ``i``: every action on ``app{i}``, and nine named actions on ``doc{i}``."""
    return [Permission(f"app{i}", "*")] + [Permission(f"doc{i}", f"act{k}") for k in range(1, PERMISSIONS_PER_ROLE)]


def build(directory: Path, lines: int, users: int, groups: int, memberships: int) -> World:
    started = time.perf_counter()
    settings = Settings.from_mapping({
        "database_url": f"sqlite:///{directory / 'locky.sqlite'}",
        "jwt_secret": SECRET, "bcrypt_rounds": 4, "log_requests": False,
    })
    app = create_app(settings)
    storage = app.context.storage
    client = testing.TestClient(app)
    assert client.simulate_post("/v1/public/users/register", json={
        "name": "caller", "email": CALLER, "password": PASSWORD}).status_code == 201
    token = client.simulate_post("/v1/public/users/login", json={
        "email": CALLER, "password": PASSWORD}).json["access_token"]
    caller = storage.users.get_by_email(CALLER)

    roles = max(1, lines // PERMISSIONS_PER_ROLE)
    with batch(storage):
        for i in range(roles):
            storage.roles.create(name=f"bench-{i}", description="", permissions=role_permissions(i))
    user_rows = []
    with batch(storage):
        for u in range(users):
            user_rows.append(storage.users.create(name=f"u{u}", email=f"u{u}@example.com",
                                                  password_hash="$2b$04$" + "x" * 53))
    group_rows = []
    with batch(storage):
        for g in range(groups):  # owned by the caller, so no seeded user holds "owner"
            group_rows.append(storage.groups.create(name=f"g{g}", description="", owner_uuid=caller.uuid))
    per_user = -(-memberships // users)
    if per_user > groups:
        raise SystemExit("need memberships <= users * groups")
    step = max(1, groups // per_user)
    held = []
    with batch(storage):
        for k in range(memberships):
            u, j = k % users, k // users
            g = (u * 7 + j * step) % groups  # distinct groups for one user's memberships
            r = (u * per_user + j) % roles
            storage.members.create(group_uuid=group_rows[g].uuid, user_uuid=user_rows[u].uuid, role=f"bench-{r}")
            held.append((u, g, r))
    seed_seconds = time.perf_counter() - started

    # The first decision after seeding loads the policy snapshot: time it on its own.
    started = time.perf_counter()
    app.context.authorizer.is_allowed(user_rows[0], "warm", "up")
    load_seconds = time.perf_counter() - started
    return World(app, client, token, user_rows, group_rows, held, roles, load_seconds, seed_seconds)


def cases(world: World, allowed: bool, n: int, rng: random.Random) -> list[Case]:
    out = []
    for _ in range(n):
        u, g, r = world.held[rng.randrange(len(world.held))]
        action = f"a{rng.randrange(ACTIONS)}"
        if allowed:
            resource = f"app{r}"  # held with "*" in this group
        else:
            other = (r + 1 + rng.randrange(max(1, world.roles - 1))) % world.roles
            resource = f"app{other}" if other != r else f"app{world.roles}"  # another role's, or nobody's
        out.append(Case(world.users[u], world.groups[g].uuid, resource, action, allowed))
    return out


def repeated(world: World, n: int) -> list[Case]:
    u, g, r = world.held[0]
    few = [Case(world.users[u], world.groups[g].uuid, f"doc{r}", f"act{k}", True) for k in range(1, 4)]
    return [few[i % len(few)] for i in range(n)]


class Row:
    """One measured row: a checker over its own list of cases, timed in chunks over
    several rounds; the cursor moves on so that no case is asked twice."""

    def __init__(self, one, todo: list[Case]):
        self.one, self.todo, self.cursor, self.chunks = one, todo, 0, []

    def run(self, budget: float) -> None:
        started = time.perf_counter()
        while self.cursor < len(self.todo) and time.perf_counter() - started < budget:
            chunk = self.todo[self.cursor:self.cursor + CHUNK]
            chunk_started = time.perf_counter()
            for case in chunk:
                self.one(case)
            self.chunks.append((time.perf_counter() - chunk_started) / len(chunk))
            self.cursor += len(chunk)

    @property
    def micros(self) -> float:
        """Median microseconds per check over the chunks: bursts of load from other
        processes move the mean, much less the median."""
        return statistics.median(self.chunks) * 1e6


def direct(world: World):
    is_allowed = world.app.context.authorizer.is_allowed

    def one(case: Case) -> None:
        answer = is_allowed(case.user, case.resource, case.action, group_uuid=case.group_uuid)
        if answer is not case.allowed:
            raise SystemExit(f"wrong decision {answer} for {case}")

    return one


def http(world: World):
    headers = {"Authorization": f"Bearer {world.token}"}

    def one(case: Case) -> None:
        result = world.client.simulate_get("/v1/internal/authz/check", headers=headers, params={
            "user_uuid": case.user.uuid, "resource": case.resource, "action": case.action,
            "group_uuid": case.group_uuid})
        if result.status_code != 200 or result.json != {"allowed": case.allowed}:
            raise SystemExit(f"wrong answer {result.status_code} {result.text} for {case}")

    return one


ROW_NAMES = ("direct allowed", "direct denied", "direct repeated", "http allowed", "http denied")


def rows_for(world: World, checks: int, rng: random.Random) -> dict[str, Row]:
    return {
        "direct allowed": Row(direct(world), cases(world, True, checks, rng)),
        "direct denied": Row(direct(world), cases(world, False, checks, rng)),
        "direct repeated": Row(direct(world), repeated(world, checks)),
        "http allowed": Row(http(world), cases(world, True, checks, rng)),
        "http denied": Row(http(world), cases(world, False, checks, rng)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000", help="stored policy lines per app (comma-separated)")
    parser.add_argument("--memberships", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--checks", type=int, default=3_000, help="at most this many checks per row")
    parser.add_argument("--seconds", type=float, default=1.5, help="at most this long per row, over all rounds")
    parser.add_argument("--rounds", type=int, default=3, help="the sizes take turns this many times")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="tiny sizes, for the smoke test")
    args = parser.parse_args(argv)
    if args.small:
        args.sizes, args.memberships, args.users, args.groups = "10,100", 200, 50, 20
        args.checks, args.seconds, args.rounds = 50, 0.5, 2
    sizes = [int(s) for s in args.sizes.split(",")]

    print(f"authorization cost vs stored policy lines ({args.memberships:,} memberships, "
          f"{args.users:,} users, {args.groups:,} groups, SQLite, Python {sys.version.split()[0]})")
    with ExitStack() as stack:
        worlds: dict[int, World] = {}
        for lines in sizes:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="locky-authz-")))
            world = worlds[lines] = build(tmp, lines, args.users, args.groups, args.memberships)
            stack.callback(world.app.close)
            print(f"{lines:>7,} lines in {world.roles:,} custom roles: seeded in {world.seed_seconds:.1f}s,"
                  f" policy snapshot loaded in {world.load_seconds * 1000:.1f} ms")
        rows = {lines: rows_for(world, args.checks, random.Random(args.seed)) for lines, world in worlds.items()}
        # The sizes take turns, so that a burst of load elsewhere hits all of them alike.
        for _ in range(args.rounds):
            for lines in sizes:
                for row in rows[lines].values():
                    row.run(args.seconds / args.rounds)

    print(f"{'lines':>7} {'roles':>6} {'path':<7} {'decision':<9} {'checks':>7} {'checks/s':>10} {'us/check':>10}")
    for lines in sizes:
        for name in ROW_NAMES:
            row = rows[lines][name]
            path, decision = name.split()
            print(f"{lines:>7,} {worlds[lines].roles:>6,} {path:<7} {decision:<9} {row.cursor:>7,}"
                  f" {1e6 / row.micros:>10,.0f} {row.micros:>10,.1f}")
    low, high = min(sizes), max(sizes)
    if low != high:
        print(f"cost ratio, {high:,} lines vs {low:,} (1.0 = flat):")
        for name in ROW_NAMES:
            print(f"  {name:<16} {rows[high][name].micros / rows[low][name].micros:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
