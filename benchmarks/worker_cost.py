"""``python -m benchmarks.worker_cost``: what Locky's worker (``locky/cli/worker.py``)
itself costs per request. The bare "hello" app (``benchmarks/hello.py``) is served by one
worker of this tree's ``LockyWorker`` and, with ``--against REV``, by one worker of the
worker module at git revision REV of this checkout, in alternating rounds: req/s, and the
CPU all the server's processes spent per request, with the ratio of this tree to REV.

    python -m benchmarks.worker_cost                      # this tree only
    python -m benchmarks.worker_cost --against HEAD~1 --rounds 3 --seconds 4

One worker and one ``wrk`` thread with 8 connections, so that the two cores hold the
worker and the load generator and CPU per request is the steady figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from tests.support.server import stop

from . import load
from .run import ROOT, serve_hello

WORKER_MODULE = "locky/cli/worker.py"


def worker_at(revision: str, folder: Path) -> str:
    """The worker class of ``revision``, written into ``folder`` as a module of its own."""
    source = subprocess.run(["git", "show", f"{revision}:{WORKER_MODULE}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    (folder / "worker_at_revision.py").write_text(source)
    return "worker_at_revision.LockyWorker"


def serve(worker_class: str, folder: Path) -> tuple[subprocess.Popen, str]:
    """``benchmarks.hello`` on one worker of ``worker_class`` (importable from ``folder``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return serve_hello(folder, 1, workers=1, worker_class=worker_class, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a git revision whose worker is measured beside this tree's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4)
    args = parser.parse_args(argv)
    load.need_wrk()
    with tempfile.TemporaryDirectory(prefix="locky-worker-cost-") as tmp:
        folder = Path(tmp)
        candidates = {"this tree": "locky.cli.worker.LockyWorker"}
        if args.against:
            candidates[args.against] = worker_at(args.against, folder)
        servers: dict[str, tuple[subprocess.Popen, str]] = {}
        results: dict[str, list[load.Result]] = {name: [] for name in candidates}
        try:
            for name, worker in candidates.items():
                servers[name] = serve(worker, folder)
            for name, (_, url) in servers.items():  # warm up
                load.run(name, url + "/hello", load.plain_script("/hello"), connections=8, threads=1, seconds=1)
            for _ in range(args.rounds):
                for name, (process, url) in servers.items():
                    results[name].append(load.run(name, url + "/hello", load.plain_script("/hello"), connections=8,
                                                  threads=1, seconds=args.seconds, master_pid=process.pid))
        finally:
            for process, _ in servers.values():
                stop(process)
    print(f"\nbare hello, 1 worker, wrk -t1 -c8, {args.rounds} rounds of {args.seconds:g} s, medians;"
          f" load {os.getloadavg()[0]:.2f}")
    print(f"{'worker':<24} {'req/s':>9} {'CPU µs/req':>11} {'errors':>7}")
    medians = {}
    for name, runs in results.items():
        rps, cpu = statistics.median(r.rps for r in runs), statistics.median(r.cpu_us for r in runs)
        medians[name] = (rps, cpu)
        print(f"{name:<24} {rps:>9.1f} {cpu:>11.1f} {sum(r.errors for r in runs):>7}")
    if args.against:
        (rps, cpu), (base_rps, base_cpu) = medians["this tree"], medians[args.against]
        print(f"this tree vs {args.against}: {rps / base_rps:.2f}x req/s, {cpu / base_cpu:.2f}x CPU per request")
    return 0 if all(r.errors == 0 for runs in results.values() for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
