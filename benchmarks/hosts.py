"""``python -m benchmarks.hosts``: several Locky hosts on one PostgreSQL, the way
operators scale out, measured.

What it starts (and stops): a private PostgreSQL primary with a streaming standby
(:mod:`tests.support.replica_cluster`), PgBouncer in transaction pooling mode in front
of the primary (:mod:`tests.support.pgbouncer`), and ``--hosts`` ``locky serve``
processes of ``--workers`` workers each, configured as a production fleet would be:

- statements through PgBouncer (``LOCKY_DATABASE_POOLER=transaction``), at most
  ``LOCKY_DATABASE_POOL_SIZE`` connections per worker;
- lists, counts and reads by id from the standby (``LOCKY_DATABASE_REPLICA_URLS``);
- ``LOCKY_AUTH_CACHE=notify``, listening on a direct connection to the primary.

With ``--namespaces`` (root, and ``ip`` from iproute2) each host runs in a network
namespace of its own, joined to the machine by a veth pair on 10.77.N.0/24: its own
loopback, its own TCP stack, reaching PostgreSQL and PgBouncer (which then also listen on
the veth addresses) as a separate machine would. Without it the hosts are separate
processes on 127.0.0.1, each its own server with its own pools and caches: everything
they share goes through PostgreSQL either way.

What it prints:

1. a mixed read/write load over all hosts for ``--seconds``: requests per second,
   p50/p99 per kind of request, and every unexpected answer (the target: none);
2. propagation of a logout, a user deletion, a role change and a membership change made
   through one host: how long the write takes until it is acknowledged by every worker
   (p50/p99), and the stale answers the other hosts give right after it (the target:
   none, over ``--rounds`` rounds of each, each host's workers asked). With the cache,
   a change is in force everywhere once acknowledged: that time is its propagation;
3. connections: PgBouncer's client connections per worker process against
   ``LOCKY_DATABASE_POOL_SIZE``, and the listeners on the primary.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import tempfile
import threading
import shutil
import time
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

try:  # the servers it starts are tests/support's, which are built on pytest
    import psycopg2  # noqa: F401  (the standby and PgBouncer are PostgreSQL's)
    import pytest

    from locky.testing import ADMIN_EMAIL, PASSWORD
    from locky.testing.databases import run_sql
    from tests.support.pgbouncer import pgbouncer
    from tests.support.replica_cluster import replica_cluster
    from tests.support.server import locky_server
except ImportError as missing:
    raise SystemExit(f"python -m benchmarks.hosts needs {missing.name}: pip install '.[test,postgres]'") from None

from .load import in_threads

SECRET = "hosts-benchmark-secret-" + "Zr7qW" * 8
POOL_SIZE = 4


class Client:
    """Keep-alive HTTP/1.1 to one host, JSON in and out."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=30)

    def request(self, method: str, path: str, body=None, headers=None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body)
        headers = {**(headers or {}), **({"Content-Type": "application/json"} if data else {})}
        for attempt in range(2):
            try:
                self.connection.request(method, path, data, headers)
                answer = self.connection.getresponse()
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()  # the server closed a kept-alive connection: once more
                if attempt:
                    raise
        raise AssertionError("unreachable")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Fleet:
    """The hosts, and an account helper that goes through them."""

    def __init__(self, servers):
        self.servers = servers
        self.urls = [server.url for server in servers]

    def login(self, email: str, host: int = 0) -> dict[str, str]:
        client = Client(self.urls[host])
        status, body = client.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
        assert status == 200, (status, body)
        return bearer(body["access_token"])

    def register(self, email: str, host: int = 0) -> tuple[dict[str, str], dict]:
        client = Client(self.urls[host])
        status, body = client.request("POST", "/v1/public/users/register",
                                      {"name": email.split("@")[0], "email": email, "password": PASSWORD})
        assert status == 201, (status, body)
        return self.login(email, host), body


def mixed_load(fleet: Fleet, admin: dict, users: list[tuple[dict, dict]], seconds: float, threads: int):
    """Every thread talks to every host in turn; the kinds of request drawn at random."""
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    kinds = [("GET /users/me", 40), ("GET /users/{id}", 20), ("GET /users?limit=50", 10),
             ("GET /authz/check", 10), ("POST /groups", 8), ("POST /members", 7), ("POST /login", 5),
             ("PUT /users/{id}", 5)]
    names = [name for name, _ in kinds]
    weights = [weight for _, weight in kinds]

    def work(number: int) -> None:
        clients = [Client(url) for url in fleet.urls]
        rng = random.Random(number)
        groups: list[str] = []
        mine = defaultdict(list)
        sequence = 0
        while time.monotonic() < stop:
            client = clients[sequence % len(clients)]
            sequence += 1
            kind = rng.choices(names, weights)[0]
            headers, user = rng.choice(users)
            started = time.perf_counter()
            if kind == "GET /users/me":
                status, body, want = *client.request("GET", "/v1/internal/users/me", headers=headers), 200
            elif kind == "GET /users/{id}":
                status, body, want = *client.request("GET", f"/v1/internal/users/{user['id']}", headers=admin), 200
            elif kind == "GET /users?limit=50":
                status, body, want = *client.request("GET", "/v1/internal/users?limit=50", headers=admin), 200
            elif kind == "GET /authz/check":
                status, body, want = *client.request(
                    "GET", f"/v1/internal/authz/check?user_uuid={user['uuid']}&resource=users&action=list",
                    headers=admin), 200
            elif kind == "POST /groups":
                name = f"g{number}-{sequence}"
                status, body, want = *client.request("POST", "/v1/private/groups", {"name": name}, headers), 201
                if status == 201:
                    groups.append(body["uuid"])
                    mine[body["uuid"]].append(headers)
            elif kind == "POST /members":
                if not groups:
                    continue
                group = rng.choice(groups)
                other = rng.choice(users)[1]
                status, body, want = *client.request("POST", "/v1/private/members", {
                    "group_uuid": group, "user_uuid": other["uuid"], "role": "member"}, mine[group][0]), (201, 400)
            elif kind == "PUT /users/{id}":  # announced to every worker, acknowledged before the answer
                status, body, want = *client.request("PUT", f"/v1/private/users/{user['id']}",
                                                     {"name": f"user {number}.{sequence}"}, headers), 200
            else:
                status, body, want = *client.request("POST", "/v1/public/users/login",
                                                     {"email": user["email"], "password": PASSWORD}), 200
            elapsed = time.perf_counter() - started
            ok = status in want if isinstance(want, tuple) else status == want
            if status == 400 and kind == "POST /members":
                ok = "already" in json.dumps(body).lower() or "member" in json.dumps(body).lower()
            with lock:
                latencies[kind].append(elapsed)
                if not ok:
                    errors.append(f"{kind}: {status} {json.dumps(body)[:200]}")

    return latencies, errors, in_threads(work, threads)


def stale_answers(fleet: Fleet, source: int, check) -> int:
    """Ask every other host ``check(client)`` on a few new connections (so that each of
    its workers answers), counting the stale answers."""
    stale = 0
    for host, url in enumerate(fleet.urls):
        if host == source:
            continue
        for _ in range(4):
            if not check(Client(url)):
                stale += 1
    return stale


def propagation(fleet: Fleet, admin: dict, rounds: int) -> dict[str, tuple[list[float], int]]:
    """Per kind of change: the write's time until acknowledged, and the stale answers after."""
    results: dict[str, tuple[list[float], int]] = {}

    def timed(client, method, path, body=None, headers=None, want=200):
        started = time.perf_counter()
        status, answer = client.request(method, path, body, headers)
        assert status == want, (method, path, status, answer)
        return time.perf_counter() - started

    def warm(headers, path="/v1/internal/users/me"):
        for url in fleet.urls:
            for _ in range(4):
                Client(url).request("GET", path, headers=headers)

    # Logout.
    times, stale = [], 0
    for round_ in range(rounds):
        headers, _ = fleet.register(f"logout{round_}@example.com")
        warm(headers)
        source = round_ % len(fleet.urls)
        times.append(timed(Client(fleet.urls[source]), "POST", "/v1/private/users/logout", headers=headers, want=204))
        stale += stale_answers(fleet, source, lambda c: c.request("GET", "/v1/internal/users/me",
                                                                   headers=headers)[0] == 401)
    results["logout"] = (times, stale)

    # User deletion (by an admin).
    times, stale = [], 0
    for round_ in range(rounds):
        headers, user = fleet.register(f"deleted{round_}@example.com")
        warm(headers)
        source = round_ % len(fleet.urls)
        times.append(timed(Client(fleet.urls[source]), "DELETE", f"/v1/private/users/{user['id']}",
                           headers=admin, want=204))
        stale += stale_answers(fleet, source, lambda c: c.request("GET", "/v1/internal/users/me",
                                                                   headers=headers)[0] == 401)
    results["user delete"] = (times, stale)

    # Role change and membership change: a custom role's permission, through a group.
    a = Client(fleet.urls[0])
    member_headers, member = fleet.register("auditor@example.com")
    status, role = a.request("POST", "/v1/private/roles", {
        "name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}, admin)
    assert status == 201, role
    status, group = a.request("POST", "/v1/private/groups", {"name": "finance"}, admin)
    assert status == 201, group
    query = (f"/v1/internal/authz/check?user_uuid={member['uuid']}&resource=reports&action=read"
             f"&group_uuid={group['uuid']}")

    def allowed(client) -> bool:
        status, body = client.request("GET", query, headers=admin)
        assert status == 200, body
        return body["allowed"]

    status, membership = a.request("POST", "/v1/private/members", {
        "group_uuid": group["uuid"], "user_uuid": member["uuid"], "role": "auditor"}, admin)
    assert status == 201, membership
    role_times, role_stale, member_times, member_stale = [], 0, [], 0
    for round_ in range(rounds):
        source = round_ % len(fleet.urls)
        client = Client(fleet.urls[source])
        warm(admin, query)
        role_times.append(timed(client, "PUT", f"/v1/private/roles/{role['id']}", {"permissions": []}, admin))
        role_stale += stale_answers(fleet, source, lambda c: not allowed(c))
        timed(client, "PUT", f"/v1/private/roles/{role['id']}",
              {"permissions": [{"resource": "reports", "action": "read"}]}, admin)
        warm(admin, query)
        member_times.append(timed(client, "DELETE", f"/v1/private/members/{membership['id']}",
                                  headers=admin, want=204))
        member_stale += stale_answers(fleet, source, lambda c: not allowed(c))
        status, membership = client.request("POST", "/v1/private/members", {
            "group_uuid": group["uuid"], "user_uuid": member["uuid"], "role": "auditor"}, admin)
        assert status == 201, membership
    results["role change"] = (role_times, role_stale)
    results["membership end"] = (member_times, member_stale)
    return results


def connections_per_worker(pooler_port: int, namespace: str | None) -> dict[int, int]:
    """Open TCP connections from each worker process to PgBouncer (from ``ss``, run in
    the hosts' network namespace)."""
    inside = ("ip", "netns", "exec", namespace) if namespace else ()
    output = subprocess.run([*inside, "ss", "-tnpH", "state", "established", f"( dport = :{pooler_port} )"],
                            capture_output=True, text=True).stdout
    counts: dict[int, int] = defaultdict(int)
    for line in output.splitlines():
        for part in line.split("pid=")[1:]:
            counts[int(part.split(",")[0])] += 1
    return dict(counts)


@dataclass
class Host:
    """Where one host runs: its launcher, the address it serves on, and the address by
    which it reaches the database machine."""

    launcher: tuple[str, ...] = ()
    address: str = "127.0.0.1"
    database_address: str = "127.0.0.1"
    namespace: str | None = None


@contextmanager
def namespaces(count: int):
    """``count`` network namespaces, each joined to this one by a veth pair; removed after."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        raise SystemExit("--namespaces needs root and iproute2's ip")
    made: list[str] = []

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    try:
        hosts = []
        for n in range(1, count + 1):
            name, outer, inner = f"locky-host{n}", f"lockyh{n}a", f"lockyh{n}b"
            subprocess.run(["ip", "netns", "del", name], capture_output=True)  # left by a run that was killed
            ip("netns", "add", name)
            made.append(name)
            ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            ip("link", "set", inner, "netns", name)
            ip("addr", "add", f"10.77.{n}.1/24", "dev", outer)
            ip("link", "set", outer, "up")
            inside = ("netns", "exec", name, "ip")
            ip(*inside, "addr", "add", f"10.77.{n}.2/24", "dev", inner)
            ip(*inside, "link", "set", inner, "up")
            ip(*inside, "link", "set", "lo", "up")
            hosts.append(Host(("ip", "netns", "exec", name), f"10.77.{n}.2", f"10.77.{n}.1", name))
        yield hosts
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)  # its veth pair goes with it


def on(url: str, address: str) -> str:
    """``url`` (a server on 127.0.0.1) as reached from ``address``."""
    return url.replace("@127.0.0.1:", f"@{address}:", 1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hosts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="worker processes per host")
    parser.add_argument("--seconds", type=float, default=15, help="duration of the mixed load")
    parser.add_argument("--threads", type=int, default=12, help="client threads of the mixed load")
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=30, help="rounds of each change measured")
    parser.add_argument("--namespaces", action="store_true", help="each host in a network namespace (root)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (server logs, mail) at the end")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="locky-hosts-"))
    where = "network namespaces" if args.namespaces else "processes on 127.0.0.1"
    print(f"workdir {workdir}; {os.cpu_count()} cores; {args.hosts} hosts x {args.workers} workers, {where}")
    with ExitStack() as stack:
        # Removed last, after the servers and databases have stopped (--keep: left for reading).
        stack.callback(lambda: print(f"kept {workdir}") if args.keep else shutil.rmtree(workdir, ignore_errors=True))
        hosts = (stack.enter_context(namespaces(args.hosts)) if args.namespaces
                 else [Host() for _ in range(args.hosts)])
        listen = tuple(host.database_address for host in hosts if host.namespace)
        try:
            cluster = stack.enter_context(replica_cluster(listen=listen))
            pooled = stack.enter_context(pgbouncer(cluster.primary_url, server_connections=10, clients=500,
                                                   listen=listen))
        except pytest.skip.Exception as missing:
            raise SystemExit(f"cannot run: {missing}") from None
        env = {
            "LOCKY_DATABASE_POOLER": "transaction",
            "LOCKY_DATABASE_POOL_SIZE": str(POOL_SIZE),
            "LOCKY_AUTH_CACHE": "notify",
            "LOCKY_JWT_SECRET": SECRET, "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL, "LOCKY_BCRYPT_ROUNDS": "4",
            "LOCKY_LOGIN_MAX_FAILURES_PER_IP": "1000000", "LOCKY_LOG_REQUESTS": "false",
            "LOCKY_THREADS": "4",
            # One service: one public address (one token issuer) and one mail folder.
            "LOCKY_PUBLIC_URL": "https://locky.example.com", "LOCKY_MAIL_DIR": str(workdir / "mail"),
        }
        servers = []
        for n, host in enumerate(hosts):
            reach = host.database_address
            host_env = {**env, "LOCKY_DATABASE_URL": on(pooled, reach),
                        "LOCKY_DATABASE_LISTEN_URL": on(cluster.primary_url, reach),
                        "LOCKY_DATABASE_REPLICA_URLS": on(cluster.standby_url, reach)}
            servers.append(stack.enter_context(locky_server(workdir / f"host{n}", env=host_env, workers=args.workers,
                                                            host=host.address, launcher=host.launcher)))
        fleet = Fleet(servers)
        _, admin_record = fleet.register(ADMIN_EMAIL)
        servers[0].verify(ADMIN_EMAIL)
        admin = fleet.login(ADMIN_EMAIL)
        users = [fleet.register(f"user{n}@example.com", n % args.hosts) for n in range(args.users)]

        print(f"\n1. mixed load: {args.threads} threads over {args.hosts} hosts for {args.seconds:g} s")
        latencies, errors, elapsed = mixed_load(fleet, admin, users, args.seconds, args.threads)
        total = sum(len(values) for values in latencies.values())
        print(f"   {total} requests, {total / elapsed:.0f} req/s, {len(errors)} errors")
        for kind, values in sorted(latencies.items()):
            print(f"   {kind:<22} {len(values):>6}  p50 {percentile(values, .5) * 1000:6.1f} ms"
                  f"  p99 {percentile(values, .99) * 1000:6.1f} ms")
        for error in errors[:10]:
            print(f"   error: {error}")

        print(f"\n2. propagation ({args.rounds} rounds each; write through one host, then every other"
              " host asked 4 times on new connections)")
        for kind, (times, stale) in propagation(fleet, admin, args.rounds).items():
            print(f"   {kind:<15} acknowledged by every worker: p50 {statistics.median(times) * 1000:5.1f} ms"
                  f"  p99 {percentile(times, .99) * 1000:5.1f} ms   stale answers after: {stale}")

        print("\n3. connections")
        pooler_port = int(pooled.rsplit(":", 1)[1].split("/")[0])
        per_process: dict[int, int] = {}
        for namespace in sorted({host.namespace for host in hosts}, key=str):
            per_process.update(connections_per_worker(pooler_port, namespace))
        print(f"   to PgBouncer, per worker process: {sorted(per_process.values())}"
              f" (LOCKY_DATABASE_POOL_SIZE={POOL_SIZE}; max {max(per_process.values(), default=0)})")
        listeners = run_sql(cluster.primary_url, "SELECT count(*) FROM pg_stat_activity"
                                                 " WHERE application_name = 'locky-listener'")[0][0]
        print(f"   listeners on the primary: {listeners} ({args.hosts * args.workers} workers)")
        logs = "".join(server.log() for server in servers)
        print(f"   tracebacks in the hosts' logs: {logs.count('Traceback')}")


if __name__ == "__main__":
    main()
