"""An authorizer written from Locky's documentation alone (``tests/outside_authorizer``,
distribution ``locky-rule-table``): its rules live in a SQLite table of its own, not
in Casbin policy files. It passes :class:`AuthorizerContract`, serves the HTTP API
(chosen by name, loaded as an object or by module name) and declares its entry point
as ``docs/authorizers.md`` says.

The package is not installed: it is imported from its folder, so ``pytest`` from the
repository root runs this with nothing but Locky's own test extra.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path

import pytest

from locky.app import create_app
from locky.registry import Registry
from locky.testing import ADMIN_EMAIL, LockyClient
from locky.testing.authorizer_contract import AuthorizerContract

PACKAGE = Path(__file__).resolve().parent / "outside_authorizer"
if str(PACKAGE) not in sys.path:
    sys.path.insert(0, str(PACKAGE))

import locky_rule_table  # noqa: E402  (from its folder, above)

NAME = "rule-table"


class TestRuleTableAuthorizer(AuthorizerContract):
    @pytest.fixture
    def make_app(self, locky_app_factory):
        return lambda **settings: locky_app_factory(
            plugin_objects=[locky_rule_table], authorizer=NAME, log_requests=False, **settings)


class TestRuleTableAuthorizerWithItsOwnFile(AuthorizerContract):
    """The same with the rules file where ``[plugins.rule_table] path`` says."""

    @pytest.fixture
    def make_app(self, locky_app_factory, tmp_path):
        extra = {"rule_table": {"path": str(tmp_path / "rules" / "mine.sqlite")}}
        (tmp_path / "rules").mkdir(exist_ok=True)
        return lambda **settings: locky_app_factory(
            plugin_objects=[locky_rule_table], authorizer=NAME, log_requests=False, extra=extra, **settings)

    @pytest.mark.parametrize("case", [None])
    def test_decision_table(self, case):
        pytest.skip("the table runs once, in TestRuleTableAuthorizer")

    def test_the_rules_file_is_made_where_the_settings_say(self, app, tmp_path):
        assert (tmp_path / "rules" / "mine.sqlite").is_file()


# -- through HTTP ------------------------------------------------------------------------------


@pytest.fixture
def client(locky_settings):
    app = create_app(locky_settings.replace(authorizer=NAME, log_requests=False), plugins=[locky_rule_table])
    try:
        yield LockyClient(app)
    finally:
        app.close()


def assert_forbidden(result) -> None:
    assert result.status_code == 403, (result.status_code, result.text)
    assert result.json["title"] == "403 Forbidden", result.json
    assert isinstance(result.json["description"], str) and set(result.json) == {"title", "description"}


def test_it_decides_the_api(client):
    assert type(client.app.context.authorizer).__module__ == "locky_rule_table.authorizer"
    ada = client.account("ada@example.com")
    bob = client.account("bob@example.com")

    group = client.simulate_post("/v1/private/groups", json={"name": "engineers"}, headers=ada.headers)
    assert group.status_code == 201, group.text
    path = f"/v1/private/groups/{group.json['id']}"

    # Bob is nobody in the group: refused, with the contract's body, and nothing changed.
    assert_forbidden(client.simulate_put(path, json={"description": "Bob's now"}, headers=bob.headers))
    assert_forbidden(client.simulate_delete(path, headers=bob.headers))
    assert_forbidden(client.simulate_post("/v1/private/members", headers=bob.headers, json={
        "group_uuid": group.json["uuid"], "user_uuid": bob.uuid}))
    assert client.simulate_get(f"/v1/internal/groups/{group.json['id']}",
                               headers=bob.headers).json["description"] == ""

    # The owner adds Bob as maintainer: now he may update it, still not delete it.
    added = client.simulate_post("/v1/private/members", headers=ada.headers, json={
        "group_uuid": group.json["uuid"], "user_uuid": bob.uuid, "role": "maintainer"})
    assert added.status_code == 201, added.text
    assert client.simulate_put(path, json={"description": "Builds"}, headers=bob.headers).status_code == 200
    assert_forbidden(client.simulate_delete(path, headers=bob.headers))

    # Roles are for admins; the admin email counts once verified.
    role = {"name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}
    assert_forbidden(client.simulate_post("/v1/private/roles", json=role, headers=ada.headers))
    admin = client.account(ADMIN_EMAIL, verified=True)
    assert client.simulate_post("/v1/private/roles", json=role, headers=admin.headers).status_code == 201

    # The built-in roles are the rule table's, listed as built-in.
    roles = client.simulate_get("/v1/internal/roles", params={"limit": 50}, headers=ada.headers).json["roles"]
    assert {r["name"] for r in roles if r["builtin"]} == {"admin", "user", "owner", "maintainer", "member", "viewer", "client"}

    # Client applications ask it through the check endpoint; explain is not offered.
    check = client.simulate_get("/v1/internal/authz/check", headers=ada.headers, params={
        "user_uuid": bob.uuid, "resource": "groups", "action": "update", "group_uuid": group.json["uuid"]})
    assert check.status_code == 200 and check.json == {"allowed": True}
    explain = client.simulate_get("/v1/internal/authz/check", headers=ada.headers, params={
        "user_uuid": bob.uuid, "resource": "groups", "action": "update", "explain": "true"})
    assert explain.status_code == 501, explain.text

    assert client.simulate_delete(path, headers=ada.headers).status_code == 204


def test_loaded_by_module_name(locky_settings):
    """As an operator would without installing it: ``LOCKY_PLUGINS=locky_rule_table``."""
    app = create_app(locky_settings.replace(plugins=("locky_rule_table",), authorizer=NAME, log_requests=False))
    try:
        assert type(app.context.authorizer).__name__ == "RuleTableAuthorizer"
        client = LockyClient(app)
        user = client.account("ada@example.com")
        assert_forbidden(client.simulate_post("/v1/private/roles", json={"name": "x"}, headers=user.headers))
    finally:
        app.close()


def test_loading_it_replaces_nothing(locky_settings):
    app = create_app(locky_settings.replace(log_requests=False), plugins=[locky_rule_table])
    try:
        assert type(app.context.authorizer).__module__ == "locky_casbin"
        assert NAME in app.context.registries["authorizer"].names()
    finally:
        app.close()


# -- its distribution ---------------------------------------------------------------------------


def test_pyproject_declares_the_entry_point():
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    assert project["name"] == "locky-rule-table"
    assert any(d.startswith("locky") for d in project["dependencies"])
    entry_points = project["entry-points"]["locky"]
    assert entry_points == {NAME: "locky_rule_table"}
    module = importlib.import_module(entry_points[NAME])
    assert module is locky_rule_table
    registry = Registry("authorizer")
    module.locky_register_authorizers(registry)
    assert registry.names() == [NAME]
    assert hasattr(module.locky_register_authorizers, "locky_impl")


def test_it_uses_only_what_locky_exports():
    """Written from the docs: it imports ``locky`` and nothing deeper."""
    import ast

    for source in (PACKAGE / "locky_rule_table").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert node.module == "locky" or not node.module.startswith("locky"), (source.name, node.module)
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("locky.") for a in node.names), source.name
