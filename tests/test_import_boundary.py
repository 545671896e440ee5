"""The boundary between Locky's core and its plugins holds both ways.

A plugin (``plugins/``, ``contrib/``, ``examples/``) imports only what Locky keeps stable:
the names ``locky`` exports, the storage kit ``locky.storage``, ``locky.client`` and
``locky.testing``; the core imports no plugin and none of the libraries the bundled
plugins are built on (Casbin, Pony, PyJWT, bcrypt). The import-linter contracts in
``pyproject.toml`` say so for the installed packages; the examples, which are not
installed, are read here directly.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import locky

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_MODULES = {"locky", "locky.storage", "locky.client", "locky.testing"}
PLUGIN_TREES = ("plugins", "contrib", "examples")


def test_the_import_linter_contracts_are_kept():
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def imports_of_locky(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for each import of Locky in ``path``: ``name`` is what a
    ``from locky import name`` takes, ``None`` for ``import locky.x`` and ``from locky.x import``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names
                      if alias.name == "locky" or alias.name.startswith("locky.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "locky" or node.module.startswith("locky.")):
            if node.module == "locky":
                found += [(node.lineno, "locky", alias.name) for alias in node.names]
            else:
                found.append((node.lineno, node.module, None))
    return found


def test_plugins_contrib_and_examples_import_only_public_locky():
    exported = set(locky._EXPORTS) | {"__version__"}
    wrong = []
    for tree in PLUGIN_TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            for line, module, name in imports_of_locky(path):
                public = ".".join(module.split(".")[:2]) in PUBLIC_MODULES
                if not public or (name is not None and name not in exported
                                  and f"locky.{name}" not in PUBLIC_MODULES):
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {module}{'.' + name if name else ''}")
    assert wrong == [], "private Locky imported by a plugin:\n" + "\n".join(wrong)


def test_the_storage_kit_holds_what_it_lists():
    import locky.storage

    assert set(locky.storage.__all__) <= set(dir(locky.storage))
    # The helpers the bundled storage and the Redis bus build on are there.
    assert {"CachingStorage", "keep_listening", "current_request", "stale_ok", "selects", "every",
            "Sealer", "SealError", "WritesRefused", "FAILED", "PENDING", "SUCCEEDED"} <= set(locky.storage.__all__)
