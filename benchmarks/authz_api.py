"""What the authorization API of docs/http/authorization.md costs: batch vs single checks, and the
``permissions`` / ``subjects`` answers at 10,000 users and 10,000 policy lines.

    python -m benchmarks.authz_api                          # 10,000 users, 10,000 lines; ~3 minutes
    python -m benchmarks.authz_api --lines-per-role 1000    # the same lines in 10 big roles
    python -m benchmarks.authz_api --small                  # a few seconds: does it still run?

Setup (SQLite in a temporary directory): :func:`benchmarks.seed.seed` makes the users,
500 groups and 10,000 memberships (held with the custom roles ``bench-r0``..``bench-r9``
and the built-in member roles); then the custom roles are given their permissions, the
stored policy lines: ``--lines`` in all, ``--lines-per-role`` each (``app<r>.res<i>``,
``read``), 1,000 roles of 10 by default. Every user holds one of those roles as a
global grant (user ``i``: role ``i % roles``), and a role ``bench-all`` (``dashboard``,
``read``) is granted to every user, so ``subjects`` has 10,000 users to list for it.

(a) 100 checks as one ``POST /v1/internal/authz/check`` vs 100 ``GET`` checks one after
    the other: over HTTP on one keep-alive connection to a real ``locky serve`` (127.0.0.1,
    one worker), and through Falcon's ``TestClient`` in this process (no HTTP, no
    server). Each round asks 100 new questions (random memberships, half allowed, half
    denied); median and p95 over the rounds, and the ratio of the medians.
(b) ``GET /v1/internal/authz/permissions`` and ``GET /v1/internal/authz/subjects`` over
    HTTP to the same server: median and p95 latency of one request.

Every answer is checked against what the seeding implies, so a fast wrong answer
cannot pass. A script, not a test.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from falcon import testing

from locky.app import create_app
from locky.records import Permission
from locky.settings import Settings
from tests.support.server import locky_server

from . import seed

SECRET = "authz-api-benchmark-secret-0123456789-abcdefgh"
ISSUER = "locky-bench"
CALLER = "caller@example.com"
CALLER_PASSWORD = "a long benchmark passphrase"
CHECK = "/v1/internal/authz/check"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def figures(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:8.2f} ms   p95 {percentile(values, 0.95) * 1e3:8.2f} ms"


class Http:
    """One keep-alive connection to the server (reopened if the server closes it)."""

    def __init__(self, url: str, token: str):
        self.host, self.port = url.split("//", 1)[1].split(":")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.connection = http.client.HTTPConnection(self.host, int(self.port), timeout=60)

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=data, headers=headers)
                response = self.connection.getresponse()
                return response.status, json.loads(response.read() or b"null")
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                self.connection = http.client.HTTPConnection(self.host, int(self.port), timeout=60)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str, params: dict) -> dict:
        status, body = self.request("GET", f"{path}?{urlencode(params)}")
        if status != 200:
            raise SystemExit(f"GET {path} {params}: {status} {body}")
        return body

    def post(self, path: str, body: dict) -> dict:
        status, answer = self.request("POST", path, body)
        if status != 200:
            raise SystemExit(f"POST {path}: {status} {answer}")
        return answer


class InProcess:
    """The same calls through Falcon's TestClient (no HTTP, no server)."""

    def __init__(self, app, token: str):
        self.client = testing.TestClient(app)
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, params: dict) -> dict:
        result = self.client.simulate_get(path, params=params, headers=self.headers)
        if result.status_code != 200:
            raise SystemExit(f"GET {path} {params}: {result.status_code} {result.text}")
        return result.json

    def post(self, path: str, body: dict) -> dict:
        result = self.client.simulate_post(path, json=body, headers=self.headers)
        if result.status_code != 200:
            raise SystemExit(f"POST {path}: {result.status_code} {result.text}")
        return result.json


# -- seeding ----------------------------------------------------------------------------


def settings_for(directory: Path) -> Settings:
    return Settings.from_mapping({
        "database_url": f"sqlite:///{directory / 'locky.sqlite'}", "jwt_secret": SECRET, "jwt_issuer": ISSUER,
        "bcrypt_rounds": 4, "log_requests": False, "mail_dir": str(directory / "mail"),
    })


def build(directory: Path, users: int, lines: int, per_role: int) -> dict:
    """Seed; return what the rounds ask about: memberships with their role, users, groups."""
    settings = settings_for(directory)
    groups = max(1, min(500, users // 2))
    memberships = min(10_000, groups * 20)
    roles = max(seed.CUSTOM_ROLES, lines // per_role)
    started = time.perf_counter()
    # seed's 10 custom roles bench-r0..9 are the membership roles; more roles are added here.
    seeded = seed.seed(settings, users=users, groups=groups, memberships=memberships, tokens=1,
                       policy_lines=seed.CUSTOM_ROLES)
    app = create_app(settings)
    try:
        storage = app.context.storage
        with seed._batch(storage):
            for r, role_id in enumerate(seeded.role_ids):
                storage.roles.update(role_id, permissions=seed._permissions(r, per_role))
        for chunk in seed._chunks(roles - seed.CUSTOM_ROLES, 200):
            with seed._batch(storage):
                for k in chunk:
                    r = seed.CUSTOM_ROLES + k
                    storage.roles.create(name=f"bench-r{r}", description="benchmark role",
                                         permissions=seed._permissions(r, per_role))
        with seed._batch(storage):
            storage.roles.create(name="bench-all", description="everyone's", permissions=[
                Permission("dashboard", "read")])
        user_rows = [storage.users.get(i) for i in seeded.user_ids]
        for chunk in seed._chunks(len(user_rows), 1000):
            with seed._batch(storage):
                for i in chunk:
                    storage.grants.grant(user_rows[i].uuid, f"bench-r{i % roles}")
                    storage.grants.grant(user_rows[i].uuid, "bench-all")
        held, after = [], 0
        while True:
            page = storage.members.list(after_id=after, limit=500)
            held.extend((m.user_uuid, m.group_uuid, m.role) for m in page.items if m.role.startswith("bench-r"))
            if page.next_after_id is None:
                break
            after = page.next_after_id
        group_uuids = sorted({g for _, g, _ in held})
    finally:
        app.close()
    return {"settings": settings, "seeded": seeded, "held": held, "users": [u.uuid for u in user_rows],
            "groups": group_uuids, "roles": roles, "per_role": per_role, "lines": roles * per_role,
            "seconds": time.perf_counter() - started}


def user_grant(world: dict, user_uuid: str) -> int:
    """The custom role (its number) the user holds as a global grant."""
    index = world.setdefault("_index", {u: i for i, u in enumerate(world["users"])})
    return index[user_uuid] % world["roles"]


def questions(world: dict, rng: random.Random, n: int) -> list[tuple[dict, bool]]:
    """``n`` checks, alternately allowed (a line of the membership's role, in its group)
    and denied (a line of a role the user holds neither there nor globally)."""
    out = []
    for i in range(n):
        user_uuid, group_uuid, role = world["held"][rng.randrange(len(world["held"]))]
        r = int(role.removeprefix("bench-r"))
        line = rng.randrange(world["per_role"])
        if i % 2:
            held = (r, user_grant(world, user_uuid))
            r = next(k for k in iter(lambda: rng.randrange(world["roles"]), None) if k not in held)
        out.append(({"user_uuid": user_uuid, "resource": f"app{r}.res{line}", "action": "read",
                     "group_uuid": group_uuid}, i % 2 == 0))
    return out


# -- (a) batch vs singles -----------------------------------------------------------------


def batch_vs_singles(api, world: dict, rounds: int, rng: random.Random) -> tuple[list[float], list[float]]:
    singles, batches = [], []
    for _ in range(rounds):
        asked = questions(world, rng, 100)
        started = time.perf_counter()
        for params, expected in asked:
            if api.get(CHECK, params) != {"allowed": expected}:
                raise SystemExit(f"wrong single answer for {params}: expected {expected}")
        singles.append(time.perf_counter() - started)

        asked = questions(world, rng, 100)
        started = time.perf_counter()
        answer = api.post(CHECK, {"checks": [params for params, _ in asked]})
        batches.append(time.perf_counter() - started)
        if answer != {"results": [{"allowed": expected} for _, expected in asked]}:
            raise SystemExit("wrong batch answer")
    return singles, batches


# -- (b) permissions and subjects ---------------------------------------------------------


def timed(call, rounds: int) -> list[float]:
    times = []
    for i in range(rounds):
        started = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - started)
    return times


def listings(api, world: dict, rounds: int, rng: random.Random) -> dict[str, list[float]]:
    per_role, users = world["per_role"], len(world["users"])
    results: dict[str, list[float]] = {}

    def permissions(group: bool):
        def call(_):
            user_uuid, group_uuid, role = world["held"][rng.randrange(len(world["held"]))]
            params = {"user_uuid": user_uuid, **({"group_uuid": group_uuid} if group else {})}
            listed = api.get("/v1/internal/authz/permissions", params)["permissions"]
            granted = user_grant(world, user_uuid)
            global_lines = sum(1 for p in listed if p["via"] == f"bench-r{granted}" and p["scope"] == "global")
            if global_lines != per_role:
                raise SystemExit(f"permissions: {global_lines} global lines of bench-r{granted}, not {per_role}")
            in_group = sum(1 for p in listed if p["via"] == role and p["group_uuid"] == group_uuid)
            # With or without group_uuid the membership's lines are listed in its group;
            # a membership role also held globally is listed once, globally.
            expected = 0 if role == f"bench-r{granted}" else per_role
            if in_group != expected:
                raise SystemExit(f"permissions: {in_group} lines of {role} in {group_uuid}, not {expected}")
        return call

    def subjects(resource: str, action: str, expected: int | None, limit: int, group: bool = False,
                 everyone: bool = False):
        def call(_):
            params = {"resource": resource, "action": action, "limit": limit}
            if group:
                params["group_uuid"] = world["groups"][rng.randrange(len(world["groups"]))]
            body = api.get("/v1/internal/authz/subjects", params)
            if body["all_users"] is not everyone:
                raise SystemExit(f"subjects {params}: all_users {body['all_users']}")
            if expected is not None and len(body["users"]) != min(limit, expected):
                raise SystemExit(f"subjects {params}: {len(body['users'])} users, expected {min(limit, expected)}")
        return call

    r = 3
    holders = sum(1 for i in range(users) if i % world["roles"] == r)
    results[f"permissions, no group ({per_role:,} lines of a grant + user's)"] = timed(permissions(False), rounds)
    results[f"permissions, group_uuid (+ {per_role:,} of the membership)"] = timed(permissions(True), rounds)
    results[f"subjects, {holders:,} holders, limit 50"] = timed(
        subjects(f"app{r}.res{per_role - 1}", "read", holders, 50), rounds)
    results[f"subjects, {holders:,} holders, group_uuid, limit 50"] = timed(
        subjects(f"app{r}.res{per_role - 1}", "read", None, 50, group=True), rounds)
    results[f"subjects, {users:,} holders, limit 50"] = timed(subjects("dashboard", "read", users, 50), rounds)
    results[f"subjects, {users:,} holders, limit 500"] = timed(subjects("dashboard", "read", users, 500), rounds)
    results["subjects, all_users (groups read), limit 50"] = timed(
        subjects("groups", "read", 0, 50, everyone=True), rounds)
    results["subjects, nobody may (nothing, read)"] = timed(subjects("nothing", "read", 0, 50), rounds)
    return results


# -- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--lines", type=int, default=10_000, help="stored policy lines (custom roles' permissions)")
    parser.add_argument("--lines-per-role", type=int, default=10,
                        help="lines of each custom role (a check enforces the lines of the roles held)")
    parser.add_argument("--rounds", type=int, default=30, help="rounds of 100 checks each way")
    parser.add_argument("--listing-rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="tiny sizes, to see that it runs")
    args = parser.parse_args(argv)
    if args.small:
        args.users, args.lines, args.lines_per_role, args.rounds, args.listing_rounds = 200, 200, 10, 3, 3

    with tempfile.TemporaryDirectory(prefix="locky-bench-authz-api-") as tmp:
        directory = Path(tmp)
        world = build(directory, args.users, args.lines, args.lines_per_role)
        settings = world["settings"]
        print(f"authorization API, SQLite, Python {sys.version.split()[0]}: {len(world['users']):,} users,"
              f" {world['seeded'].memberships:,} memberships in {len(world['groups']):,} groups,"
              f" {world['lines']:,} stored policy lines in {world['roles']:,} custom roles of {world['per_role']:,},"
              f" {2 * len(world['users']):,} global grants; seeded in {world['seconds']:.1f}s")

        env = {"LOCKY_DATABASE_URL": settings.database_url, "LOCKY_JWT_SECRET": SECRET,
               "LOCKY_JWT_ISSUER": ISSUER, "LOCKY_MAIL_DIR": str(directory / "mail"),
               "LOCKY_LOG_REQUESTS": "false"}
        app = create_app(settings)
        try:
            local = testing.TestClient(app)
            registered = local.simulate_post("/v1/public/users/register", json={
                "name": "Bench Caller", "email": CALLER, "password": CALLER_PASSWORD})
            if registered.status_code != 201:
                raise SystemExit(f"register: {registered.status_code} {registered.text}")
            with locky_server(directory / "server", env=env, workers=1) as server:
                status, _, body = server.request("POST", "/v1/public/users/login",
                                                 {"email": CALLER, "password": CALLER_PASSWORD})
                if status != 200:
                    raise SystemExit(f"login: {status} {body}")
                token = body["access_token"]
                remote = Http(server.url, token)
                inproc = InProcess(app, token)

                rng = random.Random(args.seed)
                # Warm both (policy snapshot, caches of the first requests).
                batch_vs_singles(remote, world, 1, rng)
                batch_vs_singles(inproc, world, 1, rng)
                print(f"\n(a) 100 checks: 100 GET vs one POST of 100; {args.rounds} rounds, new questions each")
                for name, api in (("HTTP, locky serve (1 worker, keep-alive)", remote),
                                  ("in process, Falcon TestClient", inproc)):
                    singles, batches = batch_vs_singles(api, world, args.rounds, rng)
                    print(f"  {name}")
                    print(f"    100 single checks   {figures(singles)}")
                    print(f"    1 batch of 100      {figures(batches)}")
                    print(f"    ratio singles/batch median {statistics.median(singles) / statistics.median(batches):5.1f}x"
                          f"   per check: single {statistics.median(singles) * 10:6.2f} ms,"
                          f" in a batch {statistics.median(batches) * 10:6.3f} ms")

                print(f"\n(b) one request each, over HTTP to locky serve; {args.listing_rounds} rounds")
                for name, times in listings(remote, world, args.listing_rounds, rng).items():
                    print(f"  {name:<56} {figures(times)}")
        finally:
            app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
