"""``python -m benchmarks.run``: seed a database, start the real ``locky serve`` as a
separate process, drive it with ``wrk`` and print req/s, the server's CPU per request,
p50, p99 and every target of the speed goal with its measured value.

    python -m benchmarks.run                      # SQLite, PostgreSQL, MariaDB (those reachable)
    python -m benchmarks.run --engines sqlite --quick   # one engine in a few minutes
    python -m benchmarks.run --go-checkout DIR --go /path/to/go   # with the Go reference's targets
    LOCKY_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test python -m benchmarks.run
    LOCKY_BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/test python -m benchmarks.run --engines mysql

Every read scenario runs twice: on keep-alive connections (wrk's way) and with
``Connection: close`` (a new TCP connection per request, as behind a load balancer that
does not pool), each against bare Falcon on the same server kind in the same mode. The
same rounds run the database floor (``benchmarks/floor.py``); then login, memory, and the
decision API (``benchmarks/authz_api.py``'s throughput); with ``--go-checkout``, Locky
beside the Go reference (``benchmarks/go_reference.py``). Exit 0 only when every target
is met on every engine run (without ``--go-checkout`` the Go reference's row is not).

See docs/benchmarks.md for what each row measures and the targets.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

import bcrypt

from locky.settings import Settings
from tests.support.server import free_port, locky_server, stop

from . import authz_api, load, seed

ROOT = Path(__file__).resolve().parent.parent
SECRET = "locky-benchmark-secret-0123456789-abcdefghijklmnop"
#: The seeded tokens' ``iss``: every server of the run must expect it, whatever its port.
ISSUER = "https://bench.locky.test"
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/test"
DEFAULT_MYSQL = "mysql://root@127.0.0.1:3306/test"
BENCH_DB = "locky_bench"
CONNECTIONS = 32
WORKERS = 2
#: Suffix of the scenarios run with ``Connection: close`` (a new connection per request).
CLOSE = "(new connection each)"
#: The database floor's scenarios: bare Falcon and one statement (benchmarks/floor.py).
FLOOR_ITEM = "floor: bare Falcon + SELECT by id"
FLOOR_LIST = "floor: bare Falcon + SELECT of 50"
HELLO = "hello (bare Falcon, same server)"
ITEM = "GET /users/{id}"
LIST = "GET /users?limit=50"

# -- the speed goal's targets (docs/benchmarks.md "Targets") -------------------------
#: App CPU (the ``locky serve`` master and workers, utime + stime) per answered item read, µs.
ITEM_CPU_US = {"sqlite": 100, "postgres": 150, "mysql": 150}
#: Item read req/s over the database floor's (benchmarks/floor.py), same server, paired rounds.
ITEM_VS_FLOOR = 0.8
#: App CPU per decision in a batch of 100 checks, µs (repeated and new questions each).
DECISION_CPU_US = 20
#: Single check req/s over the user-by-id read's, in the same decision API run.
SINGLE_VS_ITEM = 1.0
#: The explained check's and a user's permissions' req/s over the single check's (each
#: costs at most twice a decision), in the same decision API run.
EXPLAINED_VS_SINGLE = PERMISSIONS_VS_SINGLE = 0.5
#: A page of subjects of a permission every user holds over a page as long of one 10
#: users hold: a page costs about the same however many hold it (keyset paging).
SUBJECTS_MANY_VS_FEW = 0.5
LOGIN_VS_CEILING = 0.9
POLICY_SLOWDOWN = 0.15  # 1,000 and 10,000 stored policy lines against 10
P99_MS = 25
RSS_MB, RSS_GROWTH = 100, 0.05
STARTUP_S = 2.0
#: ``--quick``: one engine checked in a few minutes (figures noisier).
QUICK = {"seconds": 2, "rounds": 1, "memory_requests": 20_000}
FULL = {"seconds": 5, "rounds": 3, "memory_requests": 200_000}


@dataclass
class Check:
    engine: str
    target: str
    measured: str
    ok: bool


@dataclass
class EngineReport:
    engine: str
    results: list[load.Result] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    #: Not targets: ratios to hello, for context (``(what, measured)``).
    context: list[tuple[str, str]] = field(default_factory=list)
    #: The decision API's throughput rows (benchmarks/authz_api.py).
    decisions: list[authz_api.ThroughputRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- databases ----------------------------------------------------------------


def prepare_database(engine: str, workdir: Path, server_url: str, name: str = BENCH_DB) -> str:
    """A fresh, empty database for ``engine`` (on ``server_url``'s server, for the server
    engines); its ``LOCKY_DATABASE_URL``."""
    if engine == "sqlite":
        path = workdir / "sqlite" / f"{name}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        return f"sqlite:///{path}"
    if engine == "mysql":
        return _recreate_mysql(server_url, name)
    return _recreate_postgres(server_url, name)


def _recreate_mysql(mysql_url: str, name: str, source: str | None = None) -> str:
    """Database ``name`` on the server of ``mysql_url``, dropped first if there, empty or
    with the tables and rows of database ``source``; its URL."""
    from locky.testing.databases import connect, with_database

    connection = connect(mysql_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
            cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
            if source:
                cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                               (source,))
                tables = [row[0] for row in cursor.fetchall()]
                cursor.execute("SET foreign_key_checks = 0")
                for table in tables:
                    cursor.execute(f"CREATE TABLE {name}.{table} LIKE {source}.{table}")
                    cursor.execute(f"INSERT INTO {name}.{table} SELECT * FROM {source}.{table}")
                cursor.execute("SET foreign_key_checks = 1")
    finally:
        connection.close()
    return with_database(mysql_url, name)


def _recreate_postgres(pg_url: str, name: str, template: str | None = None) -> str:
    """Database ``name`` on the server of ``pg_url``, dropped first if there, empty or a
    copy of ``template``; its URL."""
    from locky.testing.databases import connect, with_database

    connection = connect(pg_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            cursor.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    finally:
        connection.close()
    return with_database(pg_url, name)


def copy_database(engine: str, source_url: str, workdir: Path, server_url: str, name: str) -> str:
    """A copy of the (closed) database at ``source_url``: same rows, its own file or database."""
    if engine == "sqlite":
        import sqlite3

        target = prepare_database(engine, workdir, server_url, name)
        src = sqlite3.connect(Settings.load(environ={}, database_url=source_url).sqlite_path)
        dst = sqlite3.connect(Settings.load(environ={}, database_url=target).sqlite_path)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        return target
    if engine == "mysql":
        return _recreate_mysql(server_url, name, source=source_url.rsplit("/", 1)[1])
    return _recreate_postgres(server_url, name, template=source_url.rsplit("/", 1)[1])


def drop_databases(engine: str, server_url: str, names: list[str]) -> None:
    if engine == "sqlite":
        return
    from locky.testing.databases import connect

    connection = connect(server_url)
    try:
        with connection.cursor() as cursor:
            for name in names:
                cursor.execute(f"DROP DATABASE IF EXISTS {name}" + (" WITH (FORCE)" if engine == "postgres" else ""))
    finally:
        connection.close()


def unreachable(url: str) -> str | None:
    try:
        from locky.testing.databases import unreachable as why
    except ImportError as exc:  # pragma: no cover
        return str(exc)
    return why(url)


# -- servers --------------------------------------------------------------------


def _wait(url: str, process: subprocess.Popen, timeout: float = 30.0, interval: float = 0.02) -> float:
    started = time.perf_counter()
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return time.perf_counter() - started
        except OSError:
            pass
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"{url} did not answer in {timeout}s")
        time.sleep(interval)


def _serve_module(workdir: Path, module: str, ready: str, *, before: tuple = (), after: tuple = (),
                  workers: int = WORKERS, env: dict[str, str] | None = None):
    """``python -m MODULE [BEFORE...] 127.0.0.1 PORT WORKERS [AFTER...]`` (a bare Falcon
    app of ``benchmarks``) with ``env`` as its environment (default this process's), once
    ``ready`` answers."""
    port = free_port()
    log = (workdir / f"{module.rsplit('.', 1)[-1]}-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", module, *before, "127.0.0.1", str(port), str(workers), *after],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _wait(f"http://127.0.0.1:{port}{ready}", process)
    return process, f"http://127.0.0.1:{port}"


def serve_hello(workdir: Path, threads: int = 1, *, workers: int = WORKERS, worker_class: str | None = None,
                env: dict[str, str] | None = None):
    """``benchmarks.hello`` on Locky's worker (or ``worker_class``)."""
    after = (str(threads),) + ((worker_class,) if worker_class else ())
    return _serve_module(workdir, "benchmarks.hello", "/hello", after=after, workers=workers, env=env)


def serve_floor(workdir: Path, database_url: str):
    """The database floor (``benchmarks/floor.py``) on ``database_url``."""
    return _serve_module(workdir, "benchmarks.floor", "/users", before=(database_url,))


def locky_env(database_url: str) -> dict[str, str]:
    return {"LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": SECRET, "LOCKY_JWT_ISSUER": ISSUER}


def startup_seconds(workdir: Path, database_url: str, runs: int = 3) -> float:
    """Median time from starting ``locky serve`` to its first 200 from /v1/public/health."""
    times = []
    env = {**os.environ, **locky_env(database_url)}
    for _ in range(runs):
        port = free_port()
        with (workdir / f"startup-{port}.log").open("wb") as log:
            started = time.perf_counter()
            process = subprocess.Popen(
                [sys.executable, "-m", "locky.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port),
                 "--workers", str(WORKERS)], cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        try:
            _wait(f"http://127.0.0.1:{port}/v1/public/health", process, interval=0.01)
            times.append(time.perf_counter() - started)
        finally:
            stop(process)
    return statistics.median(times)


def worker_rss_mb(master_pid: int) -> dict[int, float]:
    """Resident memory of each worker process (children of the gunicorn master)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("PPid", "0").strip() or 0) == master_pid:
            found[int(entry.name)] = int(fields["VmRSS"].split()[0]) / 1024
    return found


# -- scenarios ----------------------------------------------------------------


def read_paths(seeded: seed.Seeded, kind: str, *, floor: bool = False) -> list[str]:
    """The item read's 256 paths or the list's; ``floor``: the same reads of the
    database floor (``benchmarks/floor.py``)."""
    ids = seeded.user_ids
    if kind == "item":
        base = "/user/" if floor else "/v1/internal/users/"
        return [f"{base}{ids[(i * 37) % len(ids)]}" for i in range(256)]
    return ["/users"] if floor else ["/v1/internal/users?limit=50"]


def _checkpw_loop(rounds: int, samples: int, queue) -> None:
    queue.put(bcrypt_checkpw_seconds(rounds, samples))


def bcrypt_checkpw_seconds(rounds: int, samples: int = 5) -> float:
    """Median time of one ``checkpw`` at cost ``rounds`` in this process."""
    hashed = bcrypt.hashpw(b"benchmark", bcrypt.gensalt(rounds))
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        bcrypt.checkpw(b"benchmark", hashed)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bcrypt_checkpw_all_cores(rounds: int, cores: int, samples: int = 4) -> float:
    """Time of one ``checkpw`` with every core checking at once (as the workers do under
    load), so the ceiling reflects the CPU this machine really gives at that moment."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_checkpw_loop, args=(rounds, samples, queue)) for _ in range(cores)]
    for proc in procs:
        proc.start()
    times = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    return statistics.median(times)


def verify_token_works(url: str, token: str, path: str) -> None:
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status}")


def merge(name: str, runs: list[load.Result]) -> load.Result:
    """Rounds of one scenario as one row: total req/s, median p50 and p99, CPU per
    answered request over all rounds."""
    requests = sum(r.requests for r in runs)
    seconds = sum(r.seconds for r in runs)
    measured = [(r.cpu_us, r.requests - r.errors) for r in runs if not math.isnan(r.cpu_us)]
    answered = sum(n for _, n in measured)
    cpu_us = sum(us * n for us, n in measured) / answered if answered else float("nan")
    return load.Result(name, requests, seconds, requests / seconds if seconds else 0.0,
                       statistics.median(r.p50_ms for r in runs), statistics.median(r.p99_ms for r in runs),
                       sum(r.errors for r in runs), cpu_us)


def row(result: load.Result) -> str:
    """A scenario's line: req/s, the server's CPU µs per request, p50, p99, errors."""
    return (f"{result.name:<52} {result.rps:>9.1f} {result.cpu_us:>9.0f} {result.p50_ms:>8.2f}"
            f" {result.p99_ms:>8.2f} {result.errors:>7}")


def paired(runs: dict[str, list[load.Result]], name: str, over: str) -> float:
    """Median over rounds of ``name``'s req/s over ``over``'s in the same round."""
    return statistics.median(r.rps / o.rps if o.rps else float("inf") for r, o in zip(runs[name], runs[over]))


def decision_api(engine: str, workdir: Path, server_url: str, seconds: float) -> list[authz_api.ThroughputRow]:
    """``benchmarks.authz_api``'s throughput on ``engine`` with its defaults (1,000 users,
    1,000 policy lines, ``wrk -t2 -c16``); its table goes to stderr with the log."""
    args = SimpleNamespace(users=1000, lines=1000, lines_per_role=10, seed=7, connections=16, threads=2,
                           seconds=seconds, workdir=None,
                           postgres_url=server_url if engine == "postgres" else DEFAULT_PG,
                           mysql_url=server_url if engine == "mysql" else DEFAULT_MYSQL)
    with contextlib.redirect_stdout(sys.stderr):
        return authz_api.throughput(engine, workdir / "authz" / engine, args)


POLICY_SIZES = (10, 1000, 10_000)


def bench_engine(engine: str, workdir: Path, server_url: str, seconds: float, rounds: int, memory_requests: int,
                 log) -> EngineReport:
    report = EngineReport(engine)
    database_url = prepare_database(engine, workdir, server_url)
    settings = Settings.load(environ={}, database_url=database_url, jwt_secret=SECRET, jwt_issuer=ISSUER)
    log(f"[{engine}] seeding ...")
    seeded = seed.seed(settings)
    report.notes.append(f"seeded {len(seeded.user_ids)} users, {seeded.memberships} memberships, "
                        f"{len(seeded.role_ids)} custom roles in {seeded.seconds:.1f}s")
    # One database per policy size, copies of the seeded one, each with its own server:
    # the sizes are then measured in alternation, under the same machine conditions.
    urls = {10: database_url}
    for lines in POLICY_SIZES[1:]:
        urls[lines] = copy_database(engine, database_url, workdir, server_url, f"{BENCH_DB}_p{lines}")
        seed.set_policy_lines(settings.replace(database_url=urls[lines]), seeded, lines)
        seed.settle(settings.replace(database_url=urls[lines]))

    log(f"[{engine}] startup ...")
    startup = startup_seconds(workdir, database_url)

    item = load.get_script(read_paths(seeded, "item"), seeded.tokens)
    listing = load.get_script(read_paths(seeded, "list"), seeded.tokens)
    item_close = load.get_script(read_paths(seeded, "item"), seeded.tokens, close=True)
    listing_close = load.get_script(read_paths(seeded, "list"), seeded.tokens, close=True)
    floor_item = load.get_script(read_paths(seeded, "item", floor=True), None)
    floor_listing = load.get_script(read_paths(seeded, "list", floor=True), None)
    hello_process, hello_url = serve_hello(workdir)
    floor_process = None
    try:
        floor_process, floor_url = serve_floor(workdir, database_url)
        with contextlib.ExitStack() as servers:
            locky = {lines: servers.enter_context(locky_server(workdir, locky_env(u), workers=WORKERS))
                     for lines, u in urls.items()}
            url = {lines: server.url for lines, server in locky.items()}
            for u in url.values():
                verify_token_works(u, seeded.tokens[0], read_paths(seeded, "item")[0])
            # (name, URL, wrk script, the server's gunicorn master: whose CPU is counted)
            hello_ = (hello_url, hello_process.pid)
            floor_ = (floor_url, floor_process.pid)
            locky_ = {lines: (server.url, server.process.pid) for lines, server in locky.items()}
            scenarios = [
                (HELLO, *hello_, load.plain_script("/hello")),
                (ITEM, *locky_[10], item),
                (LIST, *locky_[10], listing),
                (f"hello {CLOSE}", *hello_, load.plain_script("/hello", close=True)),
                (f"{ITEM} {CLOSE}", *locky_[10], item_close),
                (f"{LIST} {CLOSE}", *locky_[10], listing_close),
                (f"{ITEM}, 1,000 policy lines", *locky_[1000], item),
                (f"{ITEM}, 10,000 policy lines", *locky_[10_000], item),
                (FLOOR_ITEM, *floor_, floor_item),
                (FLOOR_LIST, *floor_, floor_listing),
            ]
            for _, u, _, script in scenarios:
                load.run("warm-up", u, script, seconds=2)
            runs: dict[str, list[load.Result]] = {name: [] for name, _, _, _ in scenarios}
            for round_ in range(rounds):  # interleaved: hello and Locky measured side by side
                # Every other round in the reverse order: no scenario always runs first
                # (on a machine still settling) or last.
                for name, u, pid, script in scenarios if round_ % 2 == 0 else scenarios[::-1]:
                    runs[name].append(load.run(name, u, script, seconds=seconds, master_pid=pid))
                log(f"  round {round_ + 1}/{rounds} req/s: " + " | ".join(
                    f"{name.split(' (')[0]} {r[-1].rps:.0f}" for name, r in runs.items()))
            merged = {name: _record(report, log, merge(f"{engine}: {name}", r)) for name, r in runs.items()}

            cores = os.cpu_count() or 1
            rounds_ = settings.bcrypt_rounds
            single = [bcrypt_checkpw_seconds(rounds_)]
            before = bcrypt_checkpw_all_cores(rounds_, cores)
            bodies = [{"email": e, "password": seed.PASSWORD} for e in seeded.emails[:64]]
            r_login = _record(report, log, load.run(
                f"{engine}: POST /login (bcrypt cost {rounds_})", url[10],
                load.post_script("/v1/public/users/login", bodies),
                connections=8, threads=2, seconds=max(seconds * 2, 15), timeout=20, master_pid=locky_[10][1]))
            after = bcrypt_checkpw_all_cores(rounds_, cores)
            single.append(bcrypt_checkpw_seconds(rounds_))
            checkpw = sum(single) / 2  # the issue's ceiling: cores / one checkpw (one process)
            checkpw_busy = (before + after) / 2  # every core checking at once, for context
    finally:
        stop(hello_process)
        if floor_process is not None:
            stop(floor_process)
    drop_databases(engine, server_url, [f"{BENCH_DB}_p{lines}" for lines in POLICY_SIZES[1:]])

    log(f"[{engine}] memory ...")
    mem = memory_run(workdir, database_url, seeded, memory_requests, log)
    log(f"[{engine}] decision API ...")
    report.decisions = decision_api(engine, workdir, server_url, seconds)

    # -- targets ---------------------------------------------------------------
    checks = report.checks
    r_item = merged[ITEM]
    limit = ITEM_CPU_US[engine]
    checks.append(Check(engine, f"{ITEM}: app CPU per request <= {limit} µs",
                        f"{r_item.cpu_us:.0f} µs ({r_item.rps:.0f} req/s; rounds: {rounds})", r_item.cpu_us <= limit))
    vs_floor = paired(runs, ITEM, FLOOR_ITEM)
    checks.append(Check(engine, f"{ITEM}: >= {ITEM_VS_FLOOR}x the database floor's req/s",
                        f"{vs_floor:.2f}x (floor {merged[FLOOR_ITEM].rps:.0f} req/s,"
                        f" {merged[FLOOR_ITEM].cpu_us:.0f} µs/r; paired rounds: {rounds})",
                        vs_floor >= ITEM_VS_FLOOR))
    decided = {r.name.split(": ", 1)[1]: r for r in report.decisions}
    for scenario in (authz_api.BATCH, authz_api.NEW_QUESTIONS):
        d = decided.get(scenario)
        checks.append(Check(engine, f"decisions, {scenario}: app CPU per decision <= {DECISION_CPU_US} µs",
                            f"{d.cpu_us_per_decision:.1f} µs ({d.rps:.0f} req/s, {d.errors} errors)" if d
                            else "not measured", bool(d) and d.cpu_us_per_decision <= DECISION_CPU_US
                            and d.errors == 0))
    # Each: a scenario's req/s over another's in the same run, named as printed (the
    # scenarios' own names unless shorter ones are given).
    for scenario, over, bound, names in (
            (authz_api.SINGLE, authz_api.ITEM, SINGLE_VS_ITEM, ("single check", "user by id")),
            (authz_api.EXPLAINED, authz_api.SINGLE, EXPLAINED_VS_SINGLE, None),
            (authz_api.PERMISSIONS, authz_api.SINGLE, PERMISSIONS_VS_SINGLE, None),
            (authz_api.SUBJECTS_MANY, authz_api.SUBJECTS_FEW, SUBJECTS_MANY_VS_FEW, None)):
        r, o = decided.get(scenario), decided.get(over)
        name, over_name = names or (scenario, over)
        checks.append(Check(engine, f"decisions: {name} req/s >= {bound:g}x {over_name}'s",
                            f"{r.rps / o.rps:.2f}x ({r.rps:.0f} vs {o.rps:.0f} req/s;"
                            f" {r.cpu_us:.0f} vs {o.cpu_us:.0f} µs/r)" if r and o else "not measured",
                            bool(r and o) and r.rps >= bound * o.rps and r.errors == o.errors == 0))
    for mode in ("", f" {CLOSE}"):
        hello = merged[HELLO if not mode else f"hello{mode}"]
        for path in (ITEM, LIST):
            r = merged[path + mode]
            checks.append(Check(engine, f"{path + mode}: p99 < {P99_MS} ms",
                                f"{r.p99_ms:.1f} ms (hello: {hello.p99_ms:.1f} ms)", r.p99_ms < P99_MS))
            checks.append(Check(engine, f"{path + mode}: no errors", str(r.errors), r.errors == 0))
    for lines in (1000, 10_000):
        slower = 1 - paired(runs, f"{ITEM}, {lines:,} policy lines", ITEM)
        checks.append(Check(engine, f"{lines:,} policy lines: at most {POLICY_SLOWDOWN:.0%} slower than 10",
                            f"{slower * 100:+.1f}% (paired rounds: {rounds})", slower <= POLICY_SLOWDOWN))
    ceiling = cores / checkpw
    login_ratio = r_login.rps / ceiling
    checks.append(Check(engine, f"login: >= {LOGIN_VS_CEILING}x bcrypt ceiling",
                        f"{login_ratio:.2f}x ({r_login.rps:.2f}/s; {cores} cores / "
                        f"{checkpw * 1000:.0f} ms = {ceiling:.2f}/s; all cores busy:"
                        f" {checkpw_busy * 1000:.0f} ms)", login_ratio >= LOGIN_VS_CEILING))
    checks.append(Check(engine, "login: no errors", str(r_login.errors), r_login.errors == 0))
    checks.append(Check(engine, f"worker RSS < {RSS_MB} MB", f"max {mem['max_mb']:.1f} MB", mem["max_mb"] < RSS_MB))
    checks.append(Check(engine, f"worker RSS flat (±{RSS_GROWTH:.0%}) {mem['first_n']:,} -> {mem['last_n']:,} requests",
                        f"{mem['growth'] * 100:+.1f}% ({mem['first']} -> {mem['last']} MB)",
                        abs(mem["growth"]) <= RSS_GROWTH))
    checks.append(Check(engine, f"startup on an existing database < {STARTUP_S:g} s", f"{startup:.2f} s",
                        startup < STARTUP_S))

    # -- context, not targets: ratios to hello on the same server, paired rounds ----------
    for mode in ("", f" {CLOSE}"):
        for path in (ITEM, LIST):
            report.context.append((f"{path + mode} / hello{mode}",
                                   f"{paired(runs, path + mode, HELLO if not mode else f'hello{mode}'):.2f}x"))
    for floor in (FLOOR_ITEM, FLOOR_LIST):
        report.context.append((f"{floor} / hello", f"{paired(runs, floor, HELLO):.2f}x"))
    report.context.append((f"{LIST} / {FLOOR_LIST}", f"{paired(runs, LIST, FLOOR_LIST):.2f}x"))
    return report


def _record(report: EngineReport, log, result: load.Result) -> load.Result:
    report.results.append(result)
    log(row(result))
    return result


def memory_run(workdir: Path, database_url: str, seeded: seed.Seeded, total: int, log,
               limit_seconds: float = 150) -> dict:
    """A fresh server; per-worker RSS after 10,000 and after ``total`` mixed reads."""
    script = load.get_script(read_paths(seeded, "item") + read_paths(seeded, "list"), seeded.tokens)
    samples: dict[int, dict[int, float]] = {}
    done = 0
    started = time.monotonic()
    with locky_server(workdir, locky_env(database_url), workers=WORKERS) as server:
        for mark in (10_000, total):
            while done < mark and time.monotonic() - started < limit_seconds:
                chunk = load.run("memory", server.url, script, seconds=1 if mark == 10_000 else 10)
                if chunk.errors:
                    raise RuntimeError(f"memory run: {chunk.errors} errors")
                done += chunk.requests
            samples[done] = worker_rss_mb(server.process.pid)
            log(f"  after {done:,} requests: worker RSS " +
                ", ".join(f"{pid}={mb:.1f} MB" for pid, mb in samples[done].items()))
    (first_n, first), (last_n, last) = list(samples.items())[0], list(samples.items())[-1]
    first_avg = sum(first.values()) / len(first)
    last_avg = sum(last.values()) / len(last)
    return {
        "first_n": first_n, "last_n": last_n,
        "first": "/".join(f"{v:.1f}" for v in first.values()),
        "last": "/".join(f"{v:.1f}" for v in last.values()),
        "max_mb": max(max(first.values()), max(last.values())),
        "growth": last_avg / first_avg - 1,
    }


# -- main -----------------------------------------------------------------------


def go_reference_checks(args, engines: list[str], workdir: Path, log) -> list[Check]:
    """The Go reference's targets (benchmarks/go_reference.py) on ``engines``, or one row
    that is not met when there is no ``--go-checkout`` or the reference cannot run here."""
    how = "pass --go-checkout DIR (a clone of ryo-arima/locky with vendor/) and --go PATH; docs/benchmarks.md"
    if not args.go_checkout:
        return [Check("all", "Go reference: not measured (--go-checkout)", how, False)]
    from . import go_reference

    log("[go reference] ...")
    try:
        rows = go_reference.compare(args.go_checkout, tuple(engines), args.seconds, args.rounds, go=args.go,
                                    postgres_url=args.postgres_url, mysql_url=args.mysql_url,
                                    workdir=workdir / "go-reference", log=log)
    except go_reference.Missing as exc:
        return [Check("all", "Go reference: not measured (--go-checkout)", str(exc), False)]
    return [Check(r.engine, f"Go reference, {r.scenario}: >= {r.target:g}x Go's req/s",
                  f"{r.ratio:.2f}x ({r.locky_rps:.0f} vs {r.go_rps:.0f} req/s; app CPU {r.locky_app_us:.0f}"
                  f" vs {r.go_app_us:.0f} µs/r; {r.errors} errors)", r.ok) for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres,mysql",
                        help="comma-separated: sqlite, postgres, mysql (MariaDB/MySQL)")
    parser.add_argument("--quick", action="store_true",
                        help="shorter runs: --seconds {seconds} --rounds {rounds} --memory-requests {memory_requests}"
                        " unless given (one engine in a few minutes; noisier figures)".format(**QUICK))
    parser.add_argument("--seconds", type=float, help=f"duration of each measured wrk run (default {FULL['seconds']})")
    parser.add_argument("--rounds", type=int, help=f"interleaved rounds of the read scenarios (default {FULL['rounds']})")
    parser.add_argument("--memory-requests", type=int,
                        help=f"requests before the second memory sample (default {FULL['memory_requests']:,})")
    parser.add_argument("--postgres-url", default=os.environ.get("LOCKY_BENCH_POSTGRES_URL", DEFAULT_PG),
                        help=f"a PostgreSQL server to create the scratch database {BENCH_DB} on")
    parser.add_argument("--mysql-url", default=os.environ.get("LOCKY_BENCH_MYSQL_URL", DEFAULT_MYSQL),
                        help=f"a MariaDB/MySQL server to create the scratch database {BENCH_DB} on")
    parser.add_argument("--go-checkout", help="a checkout of ryo-arima/locky (with vendor/): measure the Go"
                        " reference's targets (benchmarks/go_reference.py) on the engines run")
    parser.add_argument("--go", help="with --go-checkout: the go command (default: $GO, then go on PATH)")
    parser.add_argument("--workdir", help="where databases and server logs go (default: a temp directory)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    load.need_wrk()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="locky-bench-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    log(f"workdir {workdir}; {os.cpu_count()} cores; {CONNECTIONS} connections; {WORKERS} workers")
    reports = []
    load_before = os.getloadavg()
    servers = {"sqlite": "", "postgres": args.postgres_url, "mysql": args.mysql_url}
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        if engine not in servers:
            raise SystemExit(f"unknown engine {engine!r}")
        why = servers[engine] and unreachable(servers[engine])
        if why:
            log(f"[{engine}] skipped: {why}")
            continue
        reports.append(bench_engine(engine, workdir, servers[engine], args.seconds, args.rounds,
                                    args.memory_requests, log))
    go_checks = go_reference_checks(args, [r.engine for r in reports], workdir, log) if reports else []
    load_after = os.getloadavg()
    print_table(reports, go_checks)
    print(f"\nload average (1 min) at start {load_before[0]:.2f}, at end {load_after[0]:.2f}"
          f" on {os.cpu_count()} cores: other processes share the CPU; ratios come from paired rounds")
    if args.json:
        Path(args.json).write_text(json.dumps({"engines": [asdict(r) for r in reports],
                                               "go_reference": [asdict(c) for c in go_checks]}, indent=2))
    checks = [c for r in reports for c in r.checks] + go_checks
    return 0 if checks and all(c.ok for c in checks) else 1


def print_table(reports: list[EngineReport], go_checks: list[Check]) -> None:
    head = f"{'scenario':<52} {'req/s':>9} {'CPU µs/r':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}"
    print("\n" + head + "\n" + "-" * len(head))
    for report in reports:
        for result in report.results:
            print(row(result))
    print("CPU µs/r: utime + stime of the server's processes (gunicorn master and workers) per answered request")
    for report in reports:
        if report.decisions:
            print(f"\ndecision API ({report.engine}, benchmarks/authz_api.py --throughput)")
            print(f"  {'scenario':<46} {'req/s':>9} {'CPU µs/r':>10} {'µs/dec':>9} {'errors':>6} {'load1':>6}")
            for decision in report.decisions:
                print(decision.line())
    head = f"{'engine':<8} {'target':<72} {'measured':<68} ok"
    print("\n" + head + "\n" + "-" * len(head))
    for check in [c for r in reports for c in r.checks] + go_checks:
        print(f"{check.engine:<8} {check.target:<72} {check.measured:<68} {'yes' if check.ok else 'NO'}")
    for report in reports:
        for note in report.notes:
            print(f"{report.engine}: {note}")
    print("\nnot targets: req/s ratios of paired rounds, on the same server kind")
    for report in reports:
        for what, ratio in report.context:
            print(f"{report.engine:<8} {what:<72} {ratio}")


if __name__ == "__main__":
    sys.exit(main())
