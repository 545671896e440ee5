"""``python -m benchmarks.servers``: the same Locky app and the same bare Falcon app under
each candidate server model, side by side: req/s, p50, p99 and worker RSS, on keep-alive
connections and with a new connection per request.

    python -m benchmarks.servers                  # SQLite, 2 workers each
    python -m benchmarks.servers --seconds 5 --rounds 3

Candidates (every one with ``--workers`` processes):

- ``locky worker x1``: ``locky serve`` as shipped (gunicorn with Locky's worker class, a
  poller that serves each complete request on its own thread);
- ``locky worker x4``: the same with ``LOCKY_THREADS=4`` (the poller hands complete
  requests to 4 threads, as gunicorn's ``gthread`` does);
- ``locky worker x1, hand-off``: the same worker handing each request to its one thread
  and the answer back (``benchmarks/handoff.py``, gunicorn's ``gthread`` way), served by
  gunicorn's command line;
- ``granian wsgi``: granian's WSGI interface (Rust HTTP, one blocking thread per worker),
  when ``granian`` is installed (``pip install granian``).

Rounds alternate between the candidates so that each sees the same machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from locky.settings import Settings
from tests.support.server import free_port, locky_server, stop

from . import load, seed
from .run import ISSUER, ROOT, SECRET, _wait, locky_env, prepare_database, read_paths, serve_hello, worker_rss_mb

WORKERS = 2


def granian_available() -> bool:
    return importlib.util.find_spec("granian") is not None


def serve_granian(workdir: Path, target: str, env: dict[str, str], health: str):
    """``granian --interface wsgi`` serving ``target`` (``module:attribute``)."""
    port = free_port()
    log = (workdir / f"granian-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "granian", "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(WORKERS), "--blocking-threads", "1", "--no-ws", "--log-level", "warning", target],
        cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _wait(f"http://127.0.0.1:{port}{health}", process, timeout=60)
    return process, f"http://127.0.0.1:{port}"


def serve_gunicorn(workdir: Path, target: str, env: dict[str, str], health: str, worker_class: str):
    """gunicorn's command line serving ``target`` with ``worker_class``, one thread each."""
    port = free_port()
    log = (workdir / f"gunicorn-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", str(WORKERS),
         "--worker-class", worker_class, "--threads", "1", "--keep-alive", "5", target],
        cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _wait(f"http://127.0.0.1:{port}{health}", process, timeout=60)
    return process, f"http://127.0.0.1:{port}"


def rss_mb(master_pid: int) -> float:
    """Resident memory of all the server's worker processes together."""
    return sum(worker_rss_mb(master_pid).values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.servers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4, help="duration of each measured wrk run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    args = parser.parse_args(argv)
    load.need_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="locky-servers-")).resolve()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    database_url = prepare_database("sqlite", workdir, "")
    settings = Settings.load(environ={}, database_url=database_url, jwt_secret=SECRET, jwt_issuer=ISSUER)
    log("seeding ...")
    seeded = seed.seed(settings, users=500, groups=100, memberships=1000)
    item = read_paths(seeded, "item")
    env = {**locky_env(database_url), "LOCKY_LOG_REQUESTS": "false"}

    candidates: list[tuple[str, object, str, str]] = []  # name, process, locky url, hello url
    processes = []
    try:
        for threads in (1, 4):
            hello_process, hello_url = serve_hello(workdir, threads)
            processes.append(hello_process)
            server = locky_server(workdir, {**env, "LOCKY_THREADS": str(threads)}, workers=WORKERS)
            running = server.__enter__()
            processes.append(server)
            candidates.append((f"locky worker x{threads}", running.process, running.url, hello_url))
        handoff = "benchmarks.handoff.HandOffWorker"
        locky_process, locky_url = serve_gunicorn(workdir, "benchmarks.granian_apps:locky", env,
                                                  "/v1/public/health", handoff)
        hello_h, hello_h_url = serve_gunicorn(workdir, "benchmarks.granian_apps:hello", {}, "/hello", handoff)
        processes += [locky_process, hello_h]
        candidates.append(("locky worker x1, hand-off", locky_process, locky_url, hello_h_url))
        if granian_available():
            locky_process, locky_url = serve_granian(workdir, "benchmarks.granian_apps:locky", env,
                                                     "/v1/public/health")
            hello_g, hello_g_url = serve_granian(workdir, "benchmarks.granian_apps:hello", {}, "/hello")
            processes += [locky_process, hello_g]
            candidates.append(("granian wsgi", locky_process, locky_url, hello_g_url))
        else:
            log("granian is not installed: pip install granian to compare it")

        scripts = {
            "hello": load.plain_script("/hello"),
            "hello, new connection each": load.plain_script("/hello", close=True),
            "GET /users/{id}": load.get_script(item, seeded.tokens),
            "GET /users/{id}, new connection each": load.get_script(item, seeded.tokens, close=True),
        }
        results: dict[tuple[str, str], list[load.Result]] = {}
        for name, _, url, hello in candidates:
            load.run("warm-up", url, scripts["GET /users/{id}"], seconds=2)
            load.run("warm-up", hello, scripts["hello"], seconds=1)
        for round_ in range(args.rounds):
            for name, _, url, hello in candidates:
                for scenario, script in scripts.items():
                    target = hello if scenario.startswith("hello") else url
                    results.setdefault((name, scenario), []).append(
                        load.run(f"{name}: {scenario}", target, script, seconds=args.seconds))
            log(f"round {round_ + 1}/{args.rounds} done")
        rss = {name: rss_mb(process.pid) for name, process, _, _ in candidates}
    finally:
        for process in reversed(processes):
            if isinstance(process, subprocess.Popen):
                stop(process)
            else:
                process.__exit__(None, None, None)

    print(f"\n{'server / scenario':<58} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    print("-" * 94)
    for (name, scenario), runs in results.items():
        rps = statistics.median(r.rps for r in runs)
        p50 = statistics.median(r.p50_ms for r in runs)
        p99 = max(r.p99_ms for r in runs)
        errors = sum(r.errors for r in runs)
        print(f"{name + ': ' + scenario:<58} {rps:>9.1f} {p50:>8.2f} {p99:>8.2f} {errors:>7}")
    print(f"\n{'server':<30} {'worker RSS (all workers) MB':>28}")
    for name, value in rss.items():
        print(f"{name:<30} {value:>28.1f}")
    print(f"\n{WORKERS} workers each; {os.cpu_count()} cores shared with wrk; medians of {args.rounds} rounds"
          " (p99: the worst round)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
