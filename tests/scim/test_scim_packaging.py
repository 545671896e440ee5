"""SCIM ships: ``pip install .`` (a wheel, not this checkout) carries ``locky.scim`` and
the libraries it is built on, or every app fails to start (``locky.scim.routes`` is one
of ``DEFAULT_PLUGINS``).

Read from pyproject.toml rather than from an installed copy: on a developer's machine an
editable install serves ``locky.scim`` from the checkout even to an unpacked wheel, so
tests/test_wheel.py stays green while a clean ``pip install .`` (CI's first step) has no
``locky/scim``."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCIM = ROOT / "locky" / "scim"


def _distribution(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_locky_scim_is_a_package_of_the_wheel():
    assert "locky.scim" in PYPROJECT["tool"]["setuptools"]["packages"], \
        "pyproject.toml [tool.setuptools] packages lacks \"locky.scim\": a wheel would not hold locky/scim"


def test_the_libraries_locky_scim_imports_are_dependencies():
    imported = set()
    for module in SCIM.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "locky"}
    assert third_party >= {"scim2_models", "scim2_server"}, third_party
    declared = {_distribution(r) for r in PYPROJECT["project"]["dependencies"]}
    wanted = {name.replace("_", "-") for name in third_party}
    assert wanted <= declared, f"locky.scim imports {sorted(wanted - declared)}, not in [project] dependencies"
