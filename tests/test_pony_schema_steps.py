"""The Pony storage's schema steps are found by their module names: a new step is one
new ``migrations/vNNNN_name.py`` and nothing else, and a gap in the numbers stops the
import rather than skipping a step."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import locky_pony.migrations as migrations


def test_each_step_is_the_module_of_its_number():
    names = [module.__name__.rsplit(".", 1)[1] for module in migrations.STEPS]
    assert [int(name[1:5]) for name in names] == list(range(1, migrations.LATEST + 1))
    assert names[0] == "v0001_baseline" and migrations.LATEST >= 7
    assert [m.version for m in migrations.steps("SQLite", "", 0)] == list(range(1, migrations.LATEST + 1))


def test_a_gap_in_the_numbers_stops_the_import(tmp_path):
    package = Path(importlib.util.find_spec("locky_pony").origin).parent
    copy = tmp_path / "locky_pony"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    last = sorted((copy / "migrations").glob("v0*.py"))[-1]
    last.rename(last.with_name(f"v{migrations.LATEST + 2:04d}_{last.stem[6:]}.py"))
    result = subprocess.run([sys.executable, "-c", "import locky_pony.migrations"], cwd=tmp_path,
                            capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode != 0
    assert "must be numbered 1, 2, 3, ... without gaps" in result.stderr
