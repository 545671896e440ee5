"""Real database servers for the storage tests: PostgreSQL and MariaDB/MySQL.

``LOCKY_TEST_POSTGRES_URL`` and ``LOCKY_TEST_MYSQL_URL`` name a server and a database to
log in to; each test run gets its own scratch database there
(:mod:`locky.testing.databases`), emptied before every test that uses it. A server that
is not configured or does not answer skips its tests with the reason, unless
``LOCKY_REQUIRE_BACKENDS=1`` (as in CI), which turns the skip into a failure.

Fixtures (imported by ``conftest.py``):

- ``postgres_database`` / ``mysql_database``: the run's scratch database (session).
- ``database_url``: an empty database, parametrized over ``sqlite``, ``postgres``, ``mysql``.
- ``server_url``: the same over ``postgres`` and ``mysql`` only.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from locky.testing.databases import ScratchDatabase, scratch_database, unreachable

#: The variable naming each server.
SERVERS = {"postgres": "LOCKY_TEST_POSTGRES_URL", "mysql": "LOCKY_TEST_MYSQL_URL"}
ENGINES = ("sqlite", "postgres", "mysql")


def required() -> bool:
    return os.environ.get("LOCKY_REQUIRE_BACKENDS", "").strip().lower() in ("1", "true", "yes")


def _scratch(kind: str) -> Iterator[ScratchDatabase]:
    variable = SERVERS[kind]
    url = os.environ.get(variable, "").strip()
    reason = f"{variable} is not set" if not url else unreachable(url)
    if reason:
        if required():
            pytest.fail(f"{kind} is required (LOCKY_REQUIRE_BACKENDS=1) but {reason}", pytrace=False)
        pytest.skip(f"{kind} tests skipped: {reason}")
    with scratch_database(url) as scratch:
        yield scratch


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[ScratchDatabase]:
    yield from _scratch("postgres")


@pytest.fixture(scope="session")
def mysql_database() -> Iterator[ScratchDatabase]:
    yield from _scratch("mysql")


def empty_database_url(request, kind: str, tmp_path) -> str:
    """The URL of an empty database of ``kind`` for the requesting test."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'locky.sqlite'}"
    scratch: ScratchDatabase = request.getfixturevalue(f"{kind}_database")
    scratch.wipe()
    return scratch.url


def _params(kinds):
    return [pytest.param(k, id=k, marks=() if k == "sqlite" else pytest.mark.backend) for k in kinds]


@pytest.fixture(params=_params(ENGINES))
def database_url(request, tmp_path) -> str:
    return empty_database_url(request, request.param, tmp_path)


@pytest.fixture
def tableless_url(database_url) -> Iterator[str]:
    """A database of each engine without a single table (for a test that migrates from
    version 0): SQLite's file is new; on a server, a scratch database of its own, since
    the shared one is only emptied of rows between tests and keeps its schema."""
    if database_url.startswith("sqlite"):
        yield database_url
        return
    with scratch_database(database_url) as scratch:
        yield scratch.url


@pytest.fixture(params=_params(("postgres", "mysql")))
def server_url(request, tmp_path) -> str:
    return empty_database_url(request, request.param, tmp_path)
