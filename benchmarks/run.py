"""``python -m benchmarks.run``: seed a database, start the real ``locky serve`` as a
separate process, drive it with ``wrk`` and print req/s, p50, p99 and the targets.

    python -m benchmarks.run                      # SQLite, PostgreSQL, MariaDB (those reachable)
    python -m benchmarks.run --engines sqlite --seconds 5
    LOCKY_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test python -m benchmarks.run
    LOCKY_BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/test python -m benchmarks.run --engines mysql

Every read scenario runs twice: on keep-alive connections (wrk's way) and with
``Connection: close`` (a new TCP connection per request, as behind a load balancer that
does not pool), each against bare Falcon on the same server kind in the same mode.

See docs/benchmarks.md for what each row measures and the targets.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import bcrypt

from locky.settings import Settings
from tests.support.server import free_port, locky_server, stop

from . import load, seed

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
    #: Not targets: how near the database floor comes to them (its ``ok``: whether it reaches).
    bounds: list[Check] = field(default_factory=list)
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


def _serve_module(workdir: Path, module: str, ready: str, *, before: tuple = (), after: tuple = ()):
    """``python -m MODULE [BEFORE...] 127.0.0.1 PORT WORKERS [AFTER...]`` (a bare Falcon
    app of ``benchmarks``), once ``ready`` answers."""
    port = free_port()
    log = (workdir / f"{module.rsplit('.', 1)[-1]}-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", module, *before, "127.0.0.1", str(port), str(WORKERS), *after],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _wait(f"http://127.0.0.1:{port}{ready}", process)
    return process, f"http://127.0.0.1:{port}"


def serve_hello(workdir: Path, threads: int = 1):
    return _serve_module(workdir, "benchmarks.hello", "/hello", after=(str(threads),))


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
    """Rounds of one scenario as one row: total req/s, median p50 and p99."""
    requests = sum(r.requests for r in runs)
    seconds = sum(r.seconds for r in runs)
    return load.Result(name, requests, seconds, requests / seconds if seconds else 0.0,
                       statistics.median(r.p50_ms for r in runs), statistics.median(r.p99_ms for r in runs),
                       sum(r.errors for r in runs))


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
            url = {lines: servers.enter_context(locky_server(workdir, locky_env(u), workers=WORKERS)).url
                   for lines, u in urls.items()}
            for u in url.values():
                verify_token_works(u, seeded.tokens[0], read_paths(seeded, "item")[0])
            scenarios = [
                ("hello (bare Falcon, same server)", hello_url, load.plain_script("/hello")),
                ("GET /users/{id}", url[10], item),
                ("GET /users?limit=50", url[10], listing),
                (f"hello {CLOSE}", hello_url, load.plain_script("/hello", close=True)),
                (f"GET /users/{{id}} {CLOSE}", url[10], item_close),
                (f"GET /users?limit=50 {CLOSE}", url[10], listing_close),
                ("GET /users/{id}, 1,000 policy lines", url[1000], item),
                ("GET /users/{id}, 10,000 policy lines", url[10_000], item),
                (FLOOR_ITEM, floor_url, floor_item),
                (FLOOR_LIST, floor_url, floor_listing),
            ]
            for _, u, script in scenarios:
                load.run("warm-up", u, script, seconds=2)
            runs: dict[str, list[load.Result]] = {name: [] for name, _, _ in scenarios}
            for round_ in range(rounds):  # interleaved: hello and Locky measured side by side
                # Every other round in the reverse order: no scenario always runs first
                # (on a machine still settling) or last.
                for name, u, script in scenarios if round_ % 2 == 0 else scenarios[::-1]:
                    runs[name].append(load.run(name, u, script, seconds=seconds))
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
                connections=8, threads=2, seconds=max(seconds * 2, 15), timeout=20))
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

    # -- targets ---------------------------------------------------------------
    for mode in ("", f" {CLOSE}"):
        hello = runs["hello (bare Falcon, same server)" if not mode else f"hello{mode}"]
        for path, floor in (("GET /users/{id}", 0.8), ("GET /users?limit=50", 0.6)):
            name = path + mode
            ratio = statistics.median(r.rps / h.rps for r, h in zip(runs[name], hello))
            r = merged[name]
            report.checks.append(Check(engine, f"{name}: >= {floor}x hello req/s",
                                       f"{ratio:.2f}x (median of {rounds} paired rounds)", ratio >= floor))
            report.checks.append(Check(engine, f"{name}: p99 < 25 ms",
                                       f"{r.p99_ms:.1f} ms (hello: {merged[hello[0].name].p99_ms:.1f} ms)",
                                       r.p99_ms < 25))
            report.checks.append(Check(engine, f"{name}: no errors", str(r.errors), r.errors == 0))
    # What any design reaches that asks the database once per request (benchmarks/floor.py).
    for floor, path, target in ((FLOOR_ITEM, "GET /users/{id}", 0.8), (FLOOR_LIST, "GET /users?limit=50", 0.6)):
        hello = runs["hello (bare Falcon, same server)"]
        bound = statistics.median(f.rps / h.rps for f, h in zip(runs[floor], hello))
        locky = statistics.median(r.rps / h.rps for r, h in zip(runs[path], hello))
        report.bounds.append(Check(engine, floor, f"{bound:.2f}x hello (Locky's {path}: {locky:.2f}x; target {target}x)",
                                   bound >= target))
    small = runs["GET /users/{id}"]
    for lines in (1000, 10_000):
        big = runs[f"GET /users/{{id}}, {lines:,} policy lines"]
        slower = 1 - statistics.median(b.rps / s_.rps for b, s_ in zip(big, small))
        report.checks.append(Check(engine, f"{lines:,} policy lines: at most 15% slower than 10",
                                   f"{slower * 100:+.1f}% (median of {rounds} paired rounds)", slower <= 0.15))
    ceiling = cores / checkpw
    login_ratio = r_login.rps / ceiling
    report.checks.append(Check(engine, "login: >= 0.9x bcrypt ceiling",
                               f"{login_ratio:.2f}x ({r_login.rps:.2f}/s; {cores} cores / "
                               f"{checkpw * 1000:.0f} ms = {ceiling:.2f}/s; all cores busy:"
                               f" {checkpw_busy * 1000:.0f} ms)", login_ratio >= 0.9))
    report.checks.append(Check(engine, "login: no errors", str(r_login.errors), r_login.errors == 0))
    report.checks.append(Check(engine, "worker RSS < 100 MB", f"max {mem['max_mb']:.1f} MB", mem["max_mb"] < 100))
    report.checks.append(Check(engine, f"worker RSS flat (±5%) {mem['first_n']:,} -> {mem['last_n']:,} requests",
                               f"{mem['growth'] * 100:+.1f}% ({mem['first']} -> {mem['last']} MB)",
                               abs(mem["growth"]) <= 0.05))
    report.checks.append(Check(engine, "startup on an existing database < 2 s", f"{startup:.2f} s", startup < 2))
    return report


def _record(report: EngineReport, log, result: load.Result) -> load.Result:
    report.results.append(result)
    log(result.row())
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres,mysql",
                        help="comma-separated: sqlite, postgres, mysql (MariaDB/MySQL)")
    parser.add_argument("--seconds", type=float, default=5, help="duration of each measured wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the read scenarios")
    parser.add_argument("--memory-requests", type=int, default=200_000,
                        help="requests before the second memory sample")
    parser.add_argument("--postgres-url", default=os.environ.get("LOCKY_BENCH_POSTGRES_URL", DEFAULT_PG),
                        help=f"a PostgreSQL server to create the scratch database {BENCH_DB} on")
    parser.add_argument("--mysql-url", default=os.environ.get("LOCKY_BENCH_MYSQL_URL", DEFAULT_MYSQL),
                        help=f"a MariaDB/MySQL server to create the scratch database {BENCH_DB} on")
    parser.add_argument("--workdir", help="where databases and server logs go (default: a temp directory)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    load.need_wrk()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="locky-bench-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    log(f"workdir {workdir}; {os.cpu_count()} cores; {CONNECTIONS} connections; {WORKERS} workers")
    reports = []
    load_before = os.getloadavg()
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        servers = {"sqlite": "", "postgres": args.postgres_url, "mysql": args.mysql_url}
        if engine not in servers:
            raise SystemExit(f"unknown engine {engine!r}")
        why = servers[engine] and unreachable(servers[engine])
        if why:
            log(f"[{engine}] skipped: {why}")
            continue
        reports.append(bench_engine(engine, workdir, servers[engine], args.seconds, args.rounds,
                                    args.memory_requests, log))
    load_after = os.getloadavg()
    print_table(reports)
    print(f"\nload average (1 min) at start {load_before[0]:.2f}, at end {load_after[0]:.2f}"
          f" on {os.cpu_count()} cores: other processes share the CPU; ratios come from paired rounds")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in reports], indent=2))
    return 0 if all(c.ok for r in reports for c in r.checks) else 1


def print_table(reports: list[EngineReport]) -> None:
    print(f"\n{'scenario':<44} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    print("-" * 80)
    for report in reports:
        for result in report.results:
            print(result.row())
    print(f"\n{'target':<58} {'measured':<52} ok")
    print("-" * 114)
    for report in reports:
        for check in report.checks:
            print(f"{check.engine + ': ' + check.target:<58} {check.measured:<52} {'yes' if check.ok else 'NO'}")
        for note in report.notes:
            print(f"{report.engine}: {note}")
    print("\nthe database floor, not a target: bare Falcon and the one statement a read needs (benchmarks/floor.py)")
    print(f"{'scenario':<58} {'req/s ratio, paired rounds':<52} reaches the target")
    print("-" * 128)
    for report in reports:
        for bound in report.bounds:
            print(f"{bound.engine + ': ' + bound.target:<58} {bound.measured:<52} {'yes' if bound.ok else 'no'}")


if __name__ == "__main__":
    sys.exit(main())
