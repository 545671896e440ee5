"""``benchmarks/authz_scale.py --small`` still runs to the end: it seeds, checks every
decision it times against the expected answer (exiting non-zero on a wrong one), and
prints its table and ratios. Not a timing assertion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "authz_scale.py"


def test_the_authz_scale_benchmark_runs(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--small"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("authorization cost vs stored policy lines")
    for size in ("10", "100"):
        for row in ("direct  allowed", "direct  denied", "direct  repeated", "http    allowed", "http    denied"):
            assert any(line.split()[:1] == [size] and row in line for line in lines), (size, row, done.stdout)
    assert "cost ratio, 100 lines vs 10 (1.0 = flat):" in lines
    assert sum(1 for line in lines if line.strip().endswith("x")) == 5
