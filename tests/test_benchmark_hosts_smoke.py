"""``python -m benchmarks.hosts`` still runs to the end on a small fleet: a private
primary with a standby, PgBouncer in transaction mode and two hosts with the auth
cache on. Not a timing assertion: what it checks is what the benchmark reports as its
targets (no errors under the mixed load, no stale answer after a change is
acknowledged, connections per worker within the pool size)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.pgbouncer import PGBOUNCER
from support.replica_cluster import unavailable

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.server
@pytest.mark.backend  # a PostgreSQL primary and standby of its own, behind PgBouncer
@pytest.mark.slow
def test_the_hosts_benchmark_runs():
    if PGBOUNCER is None:
        pytest.skip("needs pgbouncer (.ci/run installs it)")
    if reason := unavailable():
        pytest.skip(reason)
    done = subprocess.run([sys.executable, "-m", "benchmarks.hosts", "--hosts", "2", "--workers", "1",
                           "--seconds", "2", "--threads", "4", "--users", "4", "--rounds", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"\d+ requests, \d+ req/s, 0 errors", out), out
    for kind in ("logout", "user delete", "role change", "membership end"):
        assert re.search(rf"{kind} +acknowledged by every worker: p50 +[\d.]+ ms +p99 +[\d.]+ ms +stale answers"
                         r" after: 0$", out, re.M), (kind, out)
    pool = re.search(r"per worker process: \[([\d, ]+)\] \(LOCKY_DATABASE_POOL_SIZE=(\d+)", out)
    assert pool, out
    assert max(int(n) for n in pool.group(1).split(",")) <= int(pool.group(2)), out
    assert "listeners on the primary: 2 (2 workers)" in out
    assert "tracebacks in the hosts' logs: 0" in out
    # Nothing left in /tmp: the work directory goes with the run.
    workdir = re.search(r"^workdir (\S+);", out, re.M).group(1)
    assert "locky-hosts-" in workdir and not Path(workdir).exists(), workdir
