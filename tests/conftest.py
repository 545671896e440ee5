"""Locky's own tests use the fixtures of ``locky.testing`` (loaded as a pytest plugin
through its ``pytest11`` entry point); shared helpers beyond those live here.

What a plain ``pytest`` runs: every test but those marked ``slow`` (schemathesis and the
fuzzer, random properties, the browser, clusters of servers, the hosts benchmark smoke
run, waits for retries, outages and restarts, and the repeats of an attack matrix or a
race beyond one pass), so that the README's ``pip install '.[test]' && pytest`` ends in
minutes on any machine. Every feature keeps fast tests in that run. The slow ones run
with ``--all`` (or ``LOCKY_TEST_ALL=1``), with any ``-m`` expression (``-m slow``), or
when their file or test is named on the command line; ``.ci/run`` runs them all.

Markers (``pyproject.toml``): ``slow``; ``backend`` for tests on a database server, which
a test parametrized over ``postgres`` or ``mysql`` gets here without asking; ``extras``
for tests needing more than ``.[test]``; ``server`` for tests that start ``locky serve``.
Tests missing a server, a driver or a program skip with the reason (``LOCKY_REQUIRE_BACKENDS=1``
turns a missing database server into a failure).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

# Real database servers for the storage tests (PostgreSQL, MariaDB/MySQL).
from backends import database_url, mysql_database, postgres_database, server_url, tableless_url  # noqa: E402,F401

ALL_VARIABLE = "LOCKY_TEST_ALL"
#: How many slow tests this run left out, for the summary.
_LEFT_OUT = pytest.StashKey[int]()


#: The loggers ``locky``'s commands set up (``locky.cli.logs.configure_logging``).
_CONFIGURED_LOGGERS = ("locky", "locky.access", "py.warnings")


@pytest.fixture(scope="session")
def sqlite_schema(tmp_path_factory) -> Path:
    """An SQLite database holding this Locky's schema and nothing else, made once per test
    process by Locky's own migrations (:func:`locky.storage.open_storage`, as at startup)."""
    from locky.storage import open_storage
    from locky.testing import make_settings

    folder = tmp_path_factory.mktemp("sqlite-schema")
    path = folder / "locky.sqlite"
    open_storage(make_settings(f"sqlite:///{path}", mail_dir=str(folder / "mail"))).close()
    left = sorted(other.name for other in folder.iterdir() if other.name not in ("locky.sqlite", "mail"))
    assert not left, f"the schema's database left {left} beside it (a WAL not checkpointed at close?)"
    return path


@pytest.fixture
def locky_database_url(tmp_path, locky_scratch_database, sqlite_schema) -> str:
    """``locky.testing``'s, with an SQLite database that starts as a copy of
    :func:`sqlite_schema`: making the schema anew (19 tables, a commit each) was most of
    a test app's start, and so a good part of the suite's time. The tests of migrations
    and of new databases make their own."""
    if locky_scratch_database is None:
        path = tmp_path / "locky.sqlite"
        shutil.copyfile(sqlite_schema, path)
        return f"sqlite:///{path}"
    locky_scratch_database.wipe()
    return locky_scratch_database.url


@pytest.fixture(autouse=True)
def _logging_left_as_found():
    """Logging as it was before the test: a command run in-process (``locky check``)
    points Locky's loggers at stderr at INFO, which would otherwise carry over, so a later
    test's background threads (the mail sender) would write into that test's captured
    stderr."""
    loggers = [logging.getLogger(name) for name in _CONFIGURED_LOGGERS]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved):
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate
    logging.captureWarnings(False)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", dest="locky_all",
                     help=f"run the tests marked slow too (as {ALL_VARIABLE}=1 does)")


def _everything(config: pytest.Config) -> bool:
    """Whether this run keeps the slow tests wherever it finds them."""
    if config.getoption("locky_all") or config.getoption("markexpr"):
        return True
    return os.environ.get(ALL_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def _named_files(config: pytest.Config) -> set[Path]:
    """The test files named on the command line (``tests/test_x.py``, ``tests/test_x.py::t``),
    whose slow tests run as asked; a folder does not count."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return set()
    named = set()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path.is_file():
            named.add(path)
    return named


#: Parameter values that put a test on a database server.
SERVER_ENGINES = frozenset({"postgres", "mysql"})


def _on_a_server(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        isinstance(value, str) and value in SERVER_ENGINES for value in callspec.params.values())


@pytest.hookimpl(tryfirst=True)  # before `-m` reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _on_a_server(item) and not item.get_closest_marker("backend"):
            item.add_marker(pytest.mark.backend)
    if _everything(config):
        return
    named = _named_files(config)
    slow = [item for item in items if item.get_closest_marker("slow") and item.path.resolve() not in named]
    if slow:
        left_out = set(slow)
        items[:] = [item for item in items if item not in left_out]
        config.hook.pytest_deselected(items=slow)
        config.stash[_LEFT_OUT] = len(slow)


def pytest_report_header(config: pytest.Config) -> str | None:
    if _everything(config):
        return None
    return f"slow tests: left out unless named; run them with --all or {ALL_VARIABLE}=1"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} slow tests left out (the deselected): `pytest --all` runs them too")
    elif config.pluginmanager.hasplugin("dsession") and not _everything(config):
        # Under pytest-xdist the workers collect and leave them out; this process only reports.
        terminalreporter.write_line("slow tests left out: `pytest --all` runs them too")
