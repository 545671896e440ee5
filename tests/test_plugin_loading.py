"""Which plugins an app loads comes from its settings alone (``plugins``,
``block_plugins``, ``autoload_plugins``, ``trace_plugins``), never from the process
environment behind ``create_app``'s back; and an installed package that adds a way in
(``locky_authenticate``) is loaded only when the ``plugins`` setting names it.

The installed distributions are real: ``locky-memory-storage`` (installed from
``examples/``) and a distribution written into a temporary directory on ``sys.path``
with a ``.dist-info`` declaring a ``locky`` entry point, as pip would leave it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
import textwrap

import pytest

from locky import Permission, Settings, create_app, hookimpl
from locky.plugins import describe
from locky.testing import ADMIN_EMAIL, LockyClient, make_settings

ME = "/v1/internal/users/me"
DOOR = {"Authorization": "Bearer let-me-in"}


@pytest.fixture
def memory_installed():
    try:
        dist = importlib.metadata.distribution("locky-memory-storage")
    except importlib.metadata.PackageNotFoundError:
        reason = "locky-memory-storage is not installed: pip install examples/locky-memory-storage"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    assert any(ep.group == "locky" and ep.name == "memory" for ep in dist.entry_points)


@pytest.fixture
def door_installed(tmp_path, monkeypatch):
    """An installed distribution ``locky-door`` whose entry point ``door`` implements
    ``locky_authenticate``: ``Bearer let-me-in`` authenticates as the admin."""
    site = tmp_path / "site"
    package = site / "locky_door"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent('''
        from locky import Identity, hookimpl

        @hookimpl
        def locky_authenticate(req, context):
            if req.get_header("Authorization") == "Bearer let-me-in":
                user = context.storage.users.get_by_email("admin@example.com")
                return Identity(user=user, scheme="door") if user else None
    '''))
    info = site / "locky_door-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: locky-door\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[locky]\ndoor = locky_door\n")
    monkeypatch.syspath_prepend(str(site))
    yield
    sys.modules.pop("locky_door", None)


@pytest.fixture
def make_app(locky_database_url):
    apps = []

    def make(settings=None, **overrides):
        app = create_app(settings or make_settings(locky_database_url, **overrides))
        apps.append(app)
        return app

    yield make
    for app in reversed(apps):
        app.close()


def storage_names(app) -> list[str]:
    return app.context.registries["storage"].names()


# -- a new way in needs its name in LOCKY_PLUGINS ------------------------------------


def test_an_installed_way_in_is_skipped_with_a_warning_unless_named(door_installed, make_app, caplog):
    with caplog.at_level(logging.WARNING, logger="locky.plugins"):
        app = make_app()
    assert app.context.pm.get_plugin("door") is None
    (warning,) = [r for r in caplog.records if r.name == "locky.plugins" and r.levelno == logging.WARNING]
    message = warning.getMessage()
    assert "'door'" in message and "locky-door" in message and "locky_authenticate" in message
    assert "LOCKY_PLUGINS" in message

    client = LockyClient(app)
    client.register(ADMIN_EMAIL)
    refused = client.simulate_get(ME, headers=DOOR)
    assert refused.status_code == 401


def test_an_installed_way_in_named_in_plugins_is_loaded(door_installed, make_app, caplog):
    with caplog.at_level(logging.WARNING, logger="locky.plugins"):
        app = make_app(plugins=("door",))
    assert not [r for r in caplog.records if r.name == "locky.plugins"]
    (row,) = [row for row in describe(app.context.pm) if row["name"] == "door"]
    assert row["distribution"] == "locky-door 0.1" and row["hooks"] == ["locky_authenticate"]

    client = LockyClient(app)
    client.register(ADMIN_EMAIL)
    allowed = client.simulate_get(ME, headers=DOOR)
    assert allowed.status_code == 200 and allowed.json["email"] == ADMIN_EMAIL


@pytest.mark.extras
def test_other_installed_plugins_load_without_being_named(memory_installed, door_installed, make_app):
    app = make_app()
    assert storage_names(app) == ["memory", "pony"]
    (row,) = [row for row in describe(app.context.pm) if row["name"] == "memory"]
    assert row["distribution"].startswith("locky-memory-storage ")


# -- autoload, block, trace ---------------------------------------------------------


@pytest.mark.extras
def test_autoload_off_loads_no_installed_plugin_unless_named(memory_installed, door_installed, make_app, caplog):
    with caplog.at_level(logging.WARNING, logger="locky.plugins"):
        app = make_app(autoload_plugins=False)
    assert storage_names(app) == ["pony"]
    assert app.context.pm.get_plugin("door") is None and app.context.pm.get_plugin("memory") is None
    assert not [r for r in caplog.records if r.name == "locky.plugins"]  # nothing was even looked at

    named = make_app(autoload_plugins=False, plugins=("memory", "door"))
    assert storage_names(named) == ["memory", "pony"]
    assert named.context.pm.get_plugin("door") is not None


@pytest.mark.extras
def test_block_plugins_keeps_an_installed_plugin_out(memory_installed, make_app):
    assert storage_names(make_app(block_plugins=("memory",))) == ["pony"]
    # Blocking wins over naming.
    assert storage_names(make_app(block_plugins=("memory",), plugins=("memory",))) == ["pony"]


def test_trace_plugins_logs_hook_calls(make_app, caplog):
    with caplog.at_level(logging.DEBUG, logger="locky.plugins"):
        make_app(trace_plugins=True)
    traced = "".join(r.getMessage() for r in caplog.records if r.name == "locky.plugins")
    assert "locky_routes" in traced and "locky_register_storage" in traced
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="locky.plugins"):
        make_app()
    assert not [r for r in caplog.records if r.name == "locky.plugins"]


# -- the environment reaches an app only through Settings.load ------------------------


PLUGIN_VARIABLES = {
    "LOCKY_BLOCK_PLUGINS": "memory",
    "LOCKY_AUTOLOAD_PLUGINS": "false",
    "LOCKY_TRACE_PLUGINS": "1",
    "LOCKY_PLUGINS": "door",
}


@pytest.mark.extras
def test_create_app_with_settings_reads_no_plugin_variables(memory_installed, door_installed, make_app,
                                                            monkeypatch, caplog):
    for name, value in PLUGIN_VARIABLES.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.DEBUG, logger="locky.plugins"):
        app = make_app()
    assert storage_names(app) == ["memory", "pony"]
    assert app.context.pm.get_plugin("door") is None
    assert not [r for r in caplog.records if r.name == "locky.plugins" and r.levelno < logging.WARNING]


@pytest.mark.extras
def test_settings_load_reads_the_plugin_variables(memory_installed, door_installed, make_app, locky_database_url):
    environ = {**PLUGIN_VARIABLES, "LOCKY_DATABASE_URL": locky_database_url, "LOCKY_BCRYPT_ROUNDS": "4",
               "LOCKY_JWT_SECRET": make_settings(locky_database_url).jwt_secret}
    settings = Settings.load(environ=environ)
    assert (settings.block_plugins, settings.autoload_plugins, settings.trace_plugins, settings.plugins) == (
        ("memory",), False, True, ("door",))
    app = make_app(settings)
    assert storage_names(app) == ["pony"]
    assert app.context.pm.get_plugin("door") is not None


class _Gatekeeper:
    """Vetoes every decision on ``reports``; hears every decision."""

    def __init__(self):
        self.asked: list[tuple[str, str, dict]] = []
        self.heard: list[tuple[str, str, dict, bool]] = []

    @hookimpl
    def locky_check_access(self, context, identity, resource, action, scope):
        self.asked.append((resource, action, dict(scope)))
        return False if resource == "reports" else None

    @hookimpl
    def locky_decision(self, context, identity, resource, action, scope, allowed):
        self.heard.append((resource, action, dict(scope), allowed))


def test_a_plugin_vetoes_what_the_policy_allows_and_hears_every_decision(locky_app_factory):
    """``locky_check_access`` is asked only about what the authorizer allowed, and its
    ``False`` turns the answer into a 403; ``locky_decision`` hears each final answer,
    with the scope the veto was given (docs/hooks.md)."""
    gatekeeper = _Gatekeeper()
    client = LockyClient(locky_app_factory([gatekeeper]))
    ada = client.account("ada@example.com")
    assert client.simulate_get("/v1/internal/users/me", headers=ada.headers).status_code == 200
    assert gatekeeper.asked[-1] == ("users", "read", {"group_uuid": None, "own": True})
    assert gatekeeper.heard[-1] == ("users", "read", {"group_uuid": None, "own": True}, True)

    role = client.app.context.storage.roles.create(name="reporter", description="",
                                                   permissions=[Permission("reports", "read")])
    client.app.context.storage.grants.grant(ada.uuid, role.name)
    check = {"user_uuid": ada.uuid, "resource": "reports", "action": "read"}
    answer = client.simulate_get("/v1/internal/authz/check", headers=ada.headers, params=check)
    assert answer.status_code == 200 and answer.json == {"allowed": False}, answer.text
    assert gatekeeper.asked[-1] == ("reports", "read", {"group_uuid": None, "own": False})
    assert gatekeeper.heard[-1] == ("reports", "read", {"group_uuid": None, "own": False}, False)

    asked = len(gatekeeper.asked)
    check["resource"] = "nothing"
    answer = client.simulate_get("/v1/internal/authz/check", headers=ada.headers, params=check)
    assert answer.json == {"allowed": False}
    # The caller's own permission to ask was asked about; the question, which the
    # authorizer refused, was not: there was nothing to veto.
    assert [resource for resource, _, _ in gatekeeper.asked[asked:]] == ["authz"]
    assert gatekeeper.heard[-1] == ("nothing", "read", {"group_uuid": None, "own": False}, False)
