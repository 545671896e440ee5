"""Fixtures of the SCIM tests (docs/http/scim.md).

- ``provisioner`` / ``scim``: through Falcon's test client, a provisioning client as an
  operator sets one up: a machine client registered through ``/v1`` with the
  ``client_credentials`` grant, given the built-in role ``provisioner`` with ``locky
  grant-role client:CLIENT_ID provisioner`` (run in this process on the test's
  database), holding a token from ``/oauth/token``.
- ``scim_server``: a real ``locky serve`` per test module, on SQLite and, when
  LOCKY_TEST_POSTGRES_URL / LOCKY_TEST_MYSQL_URL name them (tests/backends.py), on
  PostgreSQL and MariaDB.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from scim_helpers import Scim, ScimServer, machine_client
from support.server import free_port, locky_server


@pytest.fixture
def provisioner(locky_client, locky_admin, locky_settings) -> SimpleNamespace:
    """The provisioning machine client."""
    return machine_client(locky_client, locky_admin, locky_settings, "Provisioning", "provisioner")


@pytest.fixture
def scim(locky_client, provisioner) -> Scim:
    """SCIM as the provisioning client calls it."""
    return Scim(locky_client, provisioner.token)


ENGINES = [pytest.param(kind, id=kind, marks=() if kind == "sqlite" else pytest.mark.backend)
           for kind in ("sqlite", "postgres", "mysql")]


@pytest.fixture(scope="module", params=ENGINES)
def scim_server(request, tmp_path_factory):
    """``locky serve`` (2 workers) on an empty database of each engine."""
    workdir = tmp_path_factory.mktemp(f"scim-server-{request.param}")
    if request.param == "sqlite":
        database_url = f"sqlite:///{workdir / 'locky.sqlite'}"
    else:
        scratch = request.getfixturevalue(f"{request.param}_database")
        scratch.wipe()
        database_url = scratch.url
    port = free_port()
    env = {"LOCKY_DATABASE_URL": database_url, "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_PUBLIC_URL": f"http://127.0.0.1:{port}",
           # A database server's hosts share one secret (locky serve refuses to start without it).
           "LOCKY_JWT_SECRET": "scim-server-test-secret-0123456789-abcdefghijklmnop"}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_")]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=2, port=port) as server:
            yield ScimServer(server, {**os.environ, **env}, workdir)
