"""What SCIM provisioning reads cost (docs/http/scim.md) beside the same reads through
``/v1``, on one real ``locky serve`` in the same run: requests/s, CPU per request and
the ratio SCIM / ``/v1``.

    python -m benchmarks.provisioning                        # SQLite, 5 s per scenario
    python -m benchmarks.provisioning --engines sqlite,postgres --seconds 10

One ``locky serve --workers 2`` (SQLite in a temporary directory, or a scratch database
``locky_bench_scim`` on the servers of ``--postgres-url`` / ``--mysql-url``, dropped
afterwards) with :data:`USERS` users an admin provisioned through ``POST
/scim/v2/Users``; then ``wrk -t2 -c16`` drives each pair of scenarios with the admin's
token, the SCIM request and its ``/v1`` twin one after the other:

- one user by id: ``GET /scim/v2/Users/{uuid}`` / ``GET /v1/internal/users/{id}``;
- one user by address: ``GET /scim/v2/Users?filter=userName eq "..."`` /
  ``GET /v1/internal/users?email=...`` (an identity provider's lookup before it writes);
- a page of 50: ``GET /scim/v2/Users?count=50`` / ``GET /v1/internal/users?limit=50``.

CPU per request is the user + system CPU of the gunicorn master and workers over the run
(``/proc``) divided by the requests answered: the steadier figure on a machine where wrk
shares the cores. The SCIM answer is a bigger document (schemas, meta, emails, groups)
made by pydantic models: the ratio says what that costs. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from tests.support.server import locky_server

from . import load
from .load import cpu_seconds
from .oauth import add_server_arguments, database, drop

ADMIN, PASSWORD = "admin@bench.example.com", "scim benchmark password 1"
SECRET = "scim-benchmark-secret-0123456789-abcdefghijkl"
WORKERS = 2
USERS = 200
SCIM_USER = "urn:ietf:params:scim:schemas:core:2.0:User"
DB_NAME = "locky_bench_scim"


@dataclass
class Row:
    name: str
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us: float

    def line(self) -> str:
        return (f"{self.name:<46} {self.rps:>9.1f} {self.p50_ms:>8.2f} {self.p99_ms:>8.2f} {self.errors:>6}"
                f" {self.cpu_us:>9.0f}")


HEADER = f"{'scenario':<46} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'CPU µs/r':>9}"


def measure(name: str, url: str, paths: list[str], token: str, args, master_pid: int) -> Row:
    before = cpu_seconds(master_pid)
    result = load.run(name, url, load.get_script(paths, [token]), connections=args.connections,
                      threads=args.threads, seconds=args.seconds)
    after = cpu_seconds(master_pid)
    cpu = sum(after[pid] - before.get(pid, 0.0) for pid in after)
    answered = result.requests - result.errors
    return Row(name, result.rps, result.p50_ms, result.p99_ms, result.errors,
               cpu * 1e6 / answered if answered else float("nan"))


def bench(engine: str, database_url: str, workdir: Path, args, log) -> list[tuple[Row, Row]]:
    env = {"LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": SECRET, "LOCKY_ADMIN_EMAILS": ADMIN,
           "LOCKY_BCRYPT_ROUNDS": "4", "LOCKY_LOG_REQUESTS": "false", "LOCKY_SIGNUP_MAX_PER_IP": "100000"}
    with locky_server(workdir, env=env, workers=WORKERS) as server:
        admin = server.sign_up(ADMIN, PASSWORD, verify=True)
        token = admin["Authorization"].split()[1]
        log(f"[{engine}] provisioning {USERS} users through SCIM ...")
        users = []
        for n in range(USERS):
            status, _, body = server.request("POST", "/scim/v2/Users", {
                "schemas": [SCIM_USER], "userName": f"person{n}@bench.example.com", "displayName": f"Person {n}",
                "active": True, "externalId": f"hr-{n}"}, headers=admin)
            if status != 201:
                raise RuntimeError(f"SCIM create: {status} {body}")
            users.append(body)
        status, _, body = server.request("GET", "/v1/internal/users?limit=500", headers=admin)
        ids = {user["uuid"]: user["id"] for user in body["users"]}
        sample = users[:64]
        emails = [user["userName"] for user in sample]
        pairs = [
            ("one user by id",
             [f"/scim/v2/Users/{user['id']}" for user in sample],
             [f"/v1/internal/users/{ids[user['id']]}" for user in sample]),
            ("one user by address",
             ["/scim/v2/Users?" + urllib.parse.urlencode({"filter": f'userName eq "{email}"'}) for email in emails],
             ["/v1/internal/users?" + urllib.parse.urlencode({"email": email}) for email in emails]),
            ("a page of 50 users", ["/scim/v2/Users?count=50"], ["/v1/internal/users?limit=50"]),
        ]
        load.run("warm-up", server.url, load.get_script(pairs[0][1], [token]), seconds=1, connections=4)
        pid = server.process.pid
        rows = []
        for name, scim_paths, v1_paths in pairs:
            scim = measure(f"{engine}: SCIM {name}", server.url, scim_paths, token, args, pid)
            log(scim.line())
            v1 = measure(f"{engine}: /v1 {name}", server.url, v1_paths, token, args, pid)
            log(v1.line())
            rows.append((scim, v1))
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.provisioning", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite", help="comma-separated: sqlite, postgres, mysql")
    parser.add_argument("--seconds", type=float, default=5, help="length of each measured wrk run")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    load.need_wrk()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="locky-bench-scim-")).resolve()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    cores = os.cpu_count() or 1
    log(f"workdir {workdir}; {cores} cores; wrk -t{args.threads} -c{args.connections}; {WORKERS} workers")
    load_before = os.getloadavg()[0]
    pairs = []
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        url = database(engine, workdir, args, DB_NAME)
        if url:
            try:
                pairs += bench(engine, url, workdir / engine, args, log)
            finally:
                drop(engine, args, DB_NAME)
    print("\n" + HEADER + f" {'SCIM/v1 req/s':>13} {'CPU ratio':>9}")
    print("-" * (len(HEADER) + 24))
    for scim, v1 in pairs:
        print(scim.line() + f" {scim.rps / v1.rps if v1.rps else float('nan'):>13.2f}"
              f" {scim.cpu_us / v1.cpu_us if v1.cpu_us else float('nan'):>9.2f}")
        print(v1.line())
    print(f"\nCPU µs/r: the server's CPU (master and {WORKERS} workers, user + system) per answered request;"
          " the ratios compare each SCIM read with its /v1 twin measured right after it.")
    print(f"load average (1 min) at start {load_before:.2f}, at end {os.getloadavg()[0]:.2f} on {cores} cores"
          " (wrk and other processes share them)")
    if args.json:
        Path(args.json).write_text(json.dumps([[s.__dict__, v.__dict__] for s, v in pairs], indent=2))
    return 0 if pairs and all(s.errors == 0 and v.errors == 0 for s, v in pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
