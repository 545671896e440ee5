"""The page generators of ``docs/`` (``gen_hooks.py``, ``gen_events.py``,
``gen_authorizers.py``), loaded as modules for the docs drift tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parent.parent / "docs"


def load_generator(name: str) -> ModuleType:
    """``docs/{name}.py`` as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
