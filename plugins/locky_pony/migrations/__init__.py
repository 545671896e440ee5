"""The ordered schema steps of the Pony storage, one module each (``vNNNN_name.py``).

A step module has ``DESCRIPTION`` and ``statements(dialect, collation) -> list[str]``
(``dialect`` is Pony's: ``SQLite``, ``PostgreSQL`` or ``MySQL``; ``collation`` the binary
collation of MySQL/MariaDB tables). Step N brings the schema from version N-1 to N;
step 1 is the 1.0.0 schema. A released step is never edited: every change to the
tables is a new step, and ``tests/upgrade`` carries a 1.0.0 database through all of them.
Steps are found by their module names (``v0008_...``): adding one is adding its module.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from locky import Migration

#: A step module's name: its version, four digits, and what it does.
STEP_NAME = re.compile(r"v(\d{4})_\w+")


def _steps_found() -> tuple:
    """The step modules of this package, in version order; the versions must run from 1
    without a gap, so a new step is one new module and nothing else."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if STEP_NAME.fullmatch(m.name))
    numbers = [int(STEP_NAME.fullmatch(name).group(1)) for name in names]
    if numbers != list(range(1, len(names) + 1)):
        raise ImportError(f"locky_pony schema steps must be numbered 1, 2, 3, ... without gaps: {names}")
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in names)


#: Steps in order; a step's version is its position (1-based).
STEPS = _steps_found()
#: The schema version this code writes.
LATEST = len(STEPS)


def steps(dialect: str, collation: str, after: int = 0) -> list[Migration]:
    """The steps that follow version ``after``, with their statements for ``dialect``."""
    return [
        Migration(version, module.DESCRIPTION, tuple(module.statements(dialect, collation)))
        for version, module in enumerate(STEPS, start=1)
        if version > after
    ]
