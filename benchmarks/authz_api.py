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

``--throughput`` measures instead the decision API as applications call it, on each engine
of ``--engines`` (a smaller world: ``--users`` 1,000 by default): ``wrk`` against a real
``locky serve`` (2 workers) posting batches of 100 checks (group-scoped, half allowed),
first 20 bodies cycled (decisions the workers made before), then 300 (nearly every
decision made anew), then single ``GET`` checks (30,000 cycled, about users every worker
has read, measured over the storage cache's ``MAX_AGE`` at least: the steady state), a
user read by id, explained checks, a user's permissions and pages of subjects
(:func:`listing_paths`), each warmed before it is measured; req/s, and the CPU of the
server's processes (``/proc``) per decision and per request, with the machine's load
average:

    python -m benchmarks.authz_api --throughput --engines sqlite,postgres,mysql --seconds 5
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from falcon import testing

from locky.app import create_app
from locky.cache.storage import MAX_AGE
from locky.records import Permission
from locky.settings import Settings
from tests.support.server import locky_server

from . import load, seed

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


def caller_token(server) -> str:
    """The benchmark caller's access token from ``server`` (a ``locky serve`` of
    :func:`locky_server`), or the run stops saying why."""
    status, _, body = server.request("POST", "/v1/public/users/login", {"email": CALLER, "password": CALLER_PASSWORD})
    if status != 200:
        raise SystemExit(f"login: {status} {body}")
    return body["access_token"]


def settings_for(directory: Path, database_url: str | None = None) -> Settings:
    return Settings.from_mapping({
        "database_url": database_url or f"sqlite:///{directory / 'locky.sqlite'}", "jwt_secret": SECRET,
        "jwt_issuer": ISSUER, "bcrypt_rounds": 4, "log_requests": False, "mail_dir": str(directory / "mail"),
    })


def build(directory: Path, users: int, lines: int, per_role: int, database_url: str | None = None) -> dict:
    """Seed; return what the rounds ask about: memberships with their role, users, groups."""
    settings = settings_for(directory, database_url)
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
    seed.settle(settings)  # the roles and grants added here too
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


# -- throughput: req/s and CPU per decision under wrk ---------------------------------------

THROUGHPUT_DB = "locky_bench_authz"
BATCHES = 20  # distinct bodies of 100 checks, cycled by wrk: decisions the workers have made before
#: Bodies of new questions: more decisions than a worker keeps (4,096 a policy snapshot),
#: so nearly every one is decided anew, as when applications ask about many resources.
NEW_BATCHES = 300
#: Single checks cycled by wrk, enough that they too are decided anew: at 6,000 req/s
#: (SQLite on a quiet day here) each of the two wrk threads sends 30,000 in 10 s.
SINGLES = 30_000
#: Other checks about the same users, which warm the workers before the singles.
SINGLES_WARMING = 6000
#: At most this long for the single checks' warm-up, which ends when every wrk thread
#: has sent each of its questions once.
WARM_BOUND_SECONDS = 60


def _authorized_post_script(token: str, bodies: list[dict]) -> str:
    return f"""
local bodies = {{{",".join(json.dumps(json.dumps(b)) for b in bodies)}}}
local i = 0
request = function()
  i = i + 1
  return wrk.format("POST", "{CHECK}", {{["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer {token}"}}, bodies[(i % #bodies) + 1])
end
"""


#: The scenarios of :func:`throughput`, each row named ``"<engine>: <scenario>"``.
BATCH = "batch of 100 checks (POST)"
NEW_QUESTIONS = "batch of 100, new questions"
SINGLE = "single check (GET)"
ITEM = "user by id (GET, own)"
EXPLAINED = "single check, explained (GET)"
PERMISSIONS = "permissions of a user (GET)"
#: A page of :data:`SUBJECTS_PAGE` users who may, of a permission few hold (one custom
#: role's, 10 holders at 1,000 users) and of one everybody holds (``bench-all``'s).
SUBJECTS_FEW = "subjects, page of 10 of 10 holders"
SUBJECTS_MANY = "subjects, page of 10 of all users"
SUBJECTS_PAGE = 10


@dataclass
class ThroughputRow:
    """One wrk run of :func:`throughput`: req/s, the server's CPU (µs) per request and
    per decision (NaN for one decision a request), errors, and the load average after it."""

    name: str
    rps: float
    cpu_us: float
    cpu_us_per_decision: float
    errors: int
    load1: float

    def line(self) -> str:
        per_decision = f"{'':>9}" if math.isnan(self.cpu_us_per_decision) else f"{self.cpu_us_per_decision:9.1f}"
        return (f"  {self.name:<46} {self.rps:>9.1f} {self.cpu_us:>10.0f} {per_decision} {self.errors:>6}"
                f" {self.load1:>6.2f}")


def listing_paths(api: Http, world: dict, rng: random.Random, asked: list[tuple[dict, bool]]) -> dict[str, list[str]]:
    """The paths of :data:`EXPLAINED`, :data:`PERMISSIONS`, :data:`SUBJECTS_FEW` and
    :data:`SUBJECTS_MANY` for ``wrk``, each answer checked once against the seeding here."""
    explained = [f"{CHECK}?{urlencode({**params, 'explain': 'true'})}" for params, _ in asked[:2000]]
    for path, (_, expected) in list(zip(explained, asked))[:50]:
        status, body = api.request("GET", path)
        if status != 200 or body["allowed"] is not expected or bool(body["matched"]) is not expected:
            raise SystemExit(f"wrong explanation: {path} {status} {body}")
    held = [world["held"][rng.randrange(len(world["held"]))] for _ in range(500)]
    permissions = [f"/v1/internal/authz/permissions?{urlencode({'user_uuid': user, 'group_uuid': group})}"
                   for user, group, _ in held[:250]]
    permissions += [f"/v1/internal/authz/permissions?{urlencode({'user_uuid': user})}" for user, _, _ in held[250:]]
    for path, (user_uuid, _, _) in list(zip(permissions, held))[::25]:
        status, body = api.request("GET", path)
        vias = {p["via"] for p in body.get("permissions", ())} if status == 200 else set()
        if f"bench-r{user_grant(world, user_uuid)}" not in vias:
            raise SystemExit(f"wrong permissions: {path} {status} {body}")
    # Each custom role past the membership roles (bench-r0..9) is granted to every
    # ``roles``-th user: 10 holders at 1,000 users and 100 roles.
    rare = range(seed.CUSTOM_ROLES, world["roles"])
    few = [f"/v1/internal/authz/subjects?resource=app{r}.res0&action=read&limit={SUBJECTS_PAGE}" for r in rare]
    everyone = api.get("/v1/internal/authz/subjects", {"resource": "dashboard", "action": "read", "limit": 500})
    ids = [user["id"] for user in everyone["users"][::SUBJECTS_PAGE]]  # in id order, as listed
    many = [f"/v1/internal/authz/subjects?resource=dashboard&action=read&limit={SUBJECTS_PAGE}&after_id={after}"
            for after in ids]
    for path, expected in ((few[0], len(world["users"]) // world["roles"]), (many[-1], SUBJECTS_PAGE)):
        status, body = api.request("GET", path)
        if status != 200 or len(body["users"]) != min(expected, SUBJECTS_PAGE):
            raise SystemExit(f"wrong subjects: {path} {status} {body}")
    return {EXPLAINED: explained, PERMISSIONS: permissions, SUBJECTS_FEW: few, SUBJECTS_MANY: many}


def _measured(name: str, url: str, script: str, args, master_pid: int, decisions: int,
              seconds: float | None = None) -> ThroughputRow:
    result = load.run(name, url, script, connections=args.connections, threads=args.threads,
                      seconds=seconds or args.seconds, master_pid=master_pid)
    return ThroughputRow(name, result.rps, result.cpu_us,
                         result.cpu_us / decisions if decisions > 1 else float("nan"), result.errors,
                         os.getloadavg()[0])


def throughput(engine: str, workdir: Path, args) -> list[ThroughputRow]:
    """The decision API under wrk on ``engine`` (:data:`BATCH`, :data:`NEW_QUESTIONS`,
    :data:`SINGLE`, :data:`ITEM`): prints the rows and returns them; none when the
    engine's server does not answer."""
    from .oauth import database, drop

    database_url = database(engine, workdir, args, THROUGHPUT_DB)
    if database_url is None:
        return []
    try:
        world = build(workdir, args.users, args.lines, args.lines_per_role, database_url)
        env = {"LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": SECRET, "LOCKY_JWT_ISSUER": ISSUER,
               "LOCKY_MAIL_DIR": str(workdir / "mail"), "LOCKY_LOG_REQUESTS": "false", "LOCKY_BCRYPT_ROUNDS": "4"}
        with locky_server(workdir / f"server-{engine}", env=env, workers=2) as server:
            server.request("POST", "/v1/public/users/register",
                           {"name": "Bench Caller", "email": CALLER, "password": CALLER_PASSWORD})
            token = caller_token(server)
            remote = Http(server.url, token)
            rng = random.Random(args.seed)
            bodies = []
            for _ in range(BATCHES + NEW_BATCHES):
                asked = questions(world, rng, 100)
                body = {"checks": [params for params, _ in asked]}
                if remote.post(CHECK, body) != {"results": [{"allowed": expected} for _, expected in asked]}:
                    raise SystemExit("wrong batch answer")
                bodies.append(body)
            bodies, new_bodies = bodies[:BATCHES], bodies[BATCHES:]
            asked_singly = questions(world, rng, SINGLES)
            singles = [f"{CHECK}?{urlencode(params)}" for params, _ in asked_singly]
            singles_warming = [f"{CHECK}?{urlencode(params)}" for params, _ in questions(world, rng, SINGLES_WARMING)]
            listings = listing_paths(remote, world, rng, asked_singly)
            me = remote.get("/v1/internal/users/me", {})
            item = [f"/v1/internal/users/{me['id']}"]
            pid = server.process.pid
            print(f"{engine}: {len(world['users']):,} users, {world['seeded'].memberships:,} memberships,"
                  f" {world['lines']:,} policy lines; wrk -t{args.threads} -c{args.connections}"
                  f" -d{args.seconds:g}s, 2 workers")
            print(f"  {'scenario':<46} {'req/s':>9} {'CPU µs/r':>10} {'µs/dec':>9} {'errors':>6} {'load1':>6}")
            rows = []
            # Each scenario is warmed (1 s of the same requests) right before it is
            # measured, so that it runs on the caches its own requests fill, not on what
            # the scenario before it left in them (each worker's storage cache is bounded);
            # the new questions are not: they are there to be decided anew.
            #
            # The single checks are decided anew too, about 1,000 users, in their steady
            # state: every worker has read every user, and reads each again once per
            # MAX_AGE, when the storage cache lets its entry go. So they are warmed by
            # other questions about the same users, each sent once by every wrk thread on
            # as many connections as measured, and measured over MAX_AGE at least: a window
            # that long holds one reading again of every kept entry, however the warm-up
            # timed them. (A 1 s warm-up on 4 connections measured many workers' first
            # reads of a user; a warm-up of them all and then 3 s measured them all read
            # again at once, when the entries it kept aged out together.)
            def warm_singles():
                load.send_each_once(server.url, singles_warming, [token], connections=args.connections,
                                    threads=args.threads, bound=WARM_BOUND_SECONDS)

            for scenario, script, decisions, warm, seconds in (
                    (BATCH, _authorized_post_script(token, bodies), 100, True, None),
                    (NEW_QUESTIONS, _authorized_post_script(token, new_bodies), 100, False, None),
                    (SINGLE, load.get_script(singles, [token]), 1, warm_singles, max(args.seconds, MAX_AGE)),
                    (ITEM, load.get_script(item, [token]), 1, True, None),
                    *((name, load.get_script(paths, [token]), 1, True, None) for name, paths in listings.items())):
                if warm is True:
                    load.run("warm-up", server.url, script, seconds=1, connections=4)
                elif warm:
                    warm()
                rows.append(_measured(f"{engine}: {scenario}", server.url, script, args, pid, decisions, seconds))
                print(rows[-1].line())
            return rows
    finally:
        drop(engine, args, THROUGHPUT_DB)


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
    parser.add_argument("--throughput", action="store_true",
                        help="req/s and CPU per decision under wrk, on each of --engines")
    parser.add_argument("--engines", default="sqlite", help="with --throughput: comma-separated sqlite, postgres, mysql")
    parser.add_argument("--seconds", type=float, default=5, help="with --throughput: length of each wrk run")
    from .oauth import add_server_arguments

    add_server_arguments(parser)
    args = parser.parse_args(argv)
    if args.small:
        args.users, args.lines, args.lines_per_role, args.rounds, args.listing_rounds = 200, 200, 10, 3, 3
    if args.throughput:
        load.need_wrk()
        if "--users" not in (argv if argv is not None else sys.argv):
            args.users, args.lines = min(args.users, 1000), min(args.lines, 1000)
        with tempfile.TemporaryDirectory(prefix="locky-bench-authz-throughput-") as tmp:
            for engine in args.engines.split(","):
                throughput(engine.strip(), Path(args.workdir or tmp) / engine.strip(), args)
        return 0

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
                token = caller_token(server)
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
