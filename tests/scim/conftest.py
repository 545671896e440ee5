"""Fixtures of the SCIM API tests (docs/http/scim.md): an admin, and a provisioning
client as an operator sets one up: a machine client registered through ``/v1`` with the
``client_credentials`` grant, given the built-in role ``provisioner`` with ``locky
grant-role client:CLIENT_ID provisioner`` (run in this process on the test's
database), holding a token from ``/oauth/token``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scim_helpers import Scim, client_credentials_token


def run_cli(settings, *words: str) -> int:
    """``locky WORDS`` in this process, on ``settings``' database."""
    from locky.cli import main as cli

    namespace = cli._parser().parse_args(list(words))
    return cli.COMMANDS[namespace.command](settings, namespace)


def machine_client(http, admin, settings, name: str, role: str | None) -> SimpleNamespace:
    """A registered machine client (``role`` granted with ``locky grant-role``) and its token."""
    result = http.simulate_post("/v1/private/oauth/clients", headers=admin.headers, json={
        "name": name, "type": "confidential", "redirect_uris": [], "grant_types": ["client_credentials"]})
    assert result.status_code == 201, result.text
    client = result.json
    if role:
        assert run_cli(settings, "grant-role", f"client:{client['client_id']}", role) == 0
    token = client_credentials_token(http, client["client_id"], client["client_secret"])
    return SimpleNamespace(client_id=client["client_id"], uuid=client["uuid"], token=token,
                           subject=f"client:{client['client_id']}")


@pytest.fixture
def provisioner(locky_client, locky_admin, locky_settings) -> SimpleNamespace:
    """The provisioning machine client."""
    return machine_client(locky_client, locky_admin, locky_settings, "Provisioning", "provisioner")


@pytest.fixture
def scim(locky_client, provisioner) -> Scim:
    """SCIM as the provisioning client calls it."""
    return Scim(locky_client, provisioner.token)
