"""Every example under ``examples/`` at work, through the front door.

- ``locky-memory-storage``: a third-party storage package, installed with pip (its entry
  point in the ``locky`` group), chosen by name, passing the storage contract suite, and
  running the whole API; its own tests pass in a copy outside this repository.
- ``audit-log``: a ``locky_event`` subscriber writing JSON lines.
- ``api-keys``: a second credential beside JWTs through ``locky_authenticate``.
- ``embedding``: a host Falcon app serving Locky's ``/v1`` beside its own protected route.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from locky import Registry, Settings, SettingsError
from locky.plugins import build_plugin_manager
from locky.testing import ADMIN_EMAIL, PASSWORD, LockyClient, MailBox, make_settings
from locky.testing.storage_contract import StorageContract

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MEMORY_PACKAGE = EXAMPLES / "locky-memory-storage"


def memory_storage_installed() -> None:
    """Skip (fail in CI) unless ``locky-memory-storage`` is installed with its entry point."""
    try:
        dist = importlib.metadata.distribution("locky-memory-storage")
    except importlib.metadata.PackageNotFoundError:
        reason = "locky-memory-storage is not installed: pip install examples/locky-memory-storage"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (.ci/run installs it)", pytrace=False)
        pytest.skip(reason)
    assert any(ep.group == "locky" and ep.name == "memory" for ep in dist.entry_points)


# -- a storage plugin of a third party -------------------------------------------------


@pytest.mark.extras
class TestMemoryStorageContract(StorageContract):
    """The contract suite on the storage the installed package registers as ``memory``."""

    @pytest.fixture
    def storage(self):
        memory_storage_installed()
        registry = Registry("storage")
        build_plugin_manager().hook.locky_register_storage(registry=registry)
        storage = registry.create("memory", None)
        yield storage
        storage.close()


@pytest.mark.extras
class TestMemoryStorageApp:
    @pytest.fixture
    def locky_settings(self, locky_database_url):
        memory_storage_installed()
        return make_settings(locky_database_url, storage="memory")

    def test_chosen_by_name(self, locky_app):
        storage = locky_app.context.storage
        assert type(storage).__module__ == "locky_memory_storage.storage"
        assert locky_app.context.registries["storage"].names() == ["memory", "pony"]

    def test_register_login_groups_members_roles(self, locky_client, locky_user, locky_admin):
        bob = locky_client.account("bob@example.com")
        headers = locky_user.headers
        group = locky_client.simulate_post("/v1/private/groups", json={"name": "editors"}, headers=headers)
        assert group.status_code == 201, group.text
        role = locky_client.simulate_post(
            "/v1/private/roles", headers=locky_admin.headers,
            json={"name": "editor", "permissions": [{"resource": "articles", "action": "publish"}]},
        )
        assert role.status_code == 201, role.text
        member = locky_client.simulate_post(
            "/v1/private/members", headers=headers,
            json={"group_uuid": group.json["uuid"], "user_uuid": bob.uuid, "role": "editor"},
        )
        assert member.status_code == 201, member.text

        check = locky_client.simulate_get("/v1/internal/authz/check", headers=headers, params={
            "user_uuid": bob.uuid, "resource": "articles", "action": "publish", "group_uuid": group.json["uuid"]})
        assert check.json == {"allowed": True}
        count = locky_client.simulate_get("/v1/internal/members/count", headers=headers,
                                          params={"group_uuid": group.json["uuid"]})
        assert count.json == {"count": 2}
        listing = locky_client.simulate_get("/v1/internal/users", headers=headers, params={"limit": 2})
        assert [u["email"] for u in listing.json["users"]] == ["user@example.com", ADMIN_EMAIL]
        assert listing.json["next_after_id"] == listing.json["users"][-1]["id"]

        # Bob may not remove the owner; the owner may remove Bob.
        owner_member = locky_client.simulate_get("/v1/internal/members", headers=headers, params={
            "group_uuid": group.json["uuid"], "role": "owner"}).json["members"][0]
        denied = locky_client.simulate_delete(f"/v1/private/members/{owner_member['id']}", headers=bob.headers)
        assert denied.status_code == 403
        removed = locky_client.simulate_delete(f"/v1/private/members/{member.json['id']}", headers=headers)
        assert removed.status_code == 204

        refreshed = locky_client.simulate_post("/v1/public/users/refresh",
                                               json={"refresh_token": bob.refresh_token})
        assert refreshed.status_code == 200
        reused = locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": bob.refresh_token})
        assert reused.status_code == 401

        wrong = [locky_client.simulate_post("/v1/public/users/login",
                                            json={"email": bob.email, "password": "wrong password"})
                 for _ in range(6)]
        assert [r.status_code for r in wrong] == [401] * 5 + [429]

    def test_installing_it_replaces_nothing(self, locky_app_factory):
        memory_storage_installed()
        assert Settings().storage == "pony"  # the default is still the bundled storage
        # (this class's locky_settings choose "memory"; the factory builds on them)
        assert type(locky_app_factory().context.storage).__name__ == "MemoryStorage"
        storage = locky_app_factory(storage="pony").context.storage  # on an SQLite file: in its auth cache
        assert type(storage).__name__ == "CachingStorage" and type(storage.inner).__name__ == "PonyStorage"


@pytest.mark.extras
@pytest.mark.slow  # a whole pytest run of the package's own suite, in a subprocess
def test_memory_storage_own_tests_pass_outside_the_repository(tmp_path):
    """The package's own test suite, as its author runs it, in a copy of the package."""
    memory_storage_installed()
    copy = tmp_path / "locky-memory-storage"
    shutil.copytree(MEMORY_PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=copy, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


# -- an event subscriber -----------------------------------------------------------------


@pytest.fixture
def audit_path(monkeypatch, tmp_path) -> Path:
    monkeypatch.syspath_prepend(str(EXAMPLES / "audit-log"))
    monkeypatch.delenv("LOCKY_AUDIT_LOG", raising=False)
    return tmp_path / "audit.jsonl"


def test_audit_log_writes_every_event(audit_path, locky_app_factory):
    app = locky_app_factory(plugins=("locky_audit_log",), extra={"audit_log": {"path": str(audit_path)}})
    client = LockyClient(app)
    ada = client.account("ada@example.com")
    client.simulate_post("/v1/public/users/login", json={"email": ada.email, "password": "not the password"})
    group = client.simulate_post("/v1/private/groups", json={"name": "ops"}, headers=ada.headers).json
    client.simulate_put(f"/v1/private/groups/{group['id']}", json={"description": "on call"}, headers=ada.headers)
    client.simulate_delete(f"/v1/private/groups/{group['id']}", headers=ada.headers)
    client.simulate_post("/v1/private/users/logout", headers=ada.headers)

    text = audit_path.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    # The audit trail's events, as GET /v1/internal/audit names them (docs/events.md).
    assert [(e["event"], e["target_type"]) for e in lines] == [
        ("user.registered", "user"),
        ("login.succeeded", "user"),
        ("login.failed", "user"),
        ("group.created", "group"),
        ("group.updated", "group"),
        ("group.deleted", "group"),
        ("token.revoked", "session"),
    ]
    assert all(e["created_at"].endswith("Z") and e["uuid"] for e in lines)
    assert lines[0]["record"]["email"] == "ada@example.com" and lines[1]["actor_uuid"] == ada.uuid
    assert lines[2]["details"] == {"email": "ada@example.com", "reason": "wrong password", "method": "password"}
    assert lines[5]["record"]["deleted_at"].endswith("Z")
    assert lines[6]["details"]["reason"] == "logout"
    for secret in (PASSWORD, "not the password", ada.access_token, ada.refresh_token, "$2b$"):
        assert secret not in text
    assert "password_hash" not in text
    assert oct(audit_path.stat().st_mode & 0o777) == "0o600"


def test_audit_log_appends_across_apps(audit_path, locky_app_factory):
    """Two apps (two workers) append to one file; lines never mix."""
    settings = {"plugins": ("locky_audit_log",), "extra": {"audit_log": {"path": str(audit_path)}}}
    first, second = LockyClient(locky_app_factory(**settings)), LockyClient(locky_app_factory(**settings))
    for i in range(20):
        (first if i % 2 else second).register(f"u{i}@example.com")
    emails = [json.loads(line)["record"]["email"] for line in audit_path.read_text().splitlines()
              if json.loads(line)["event"] == "user.registered"]
    assert sorted(emails) == sorted(f"u{i}@example.com" for i in range(20))


def test_audit_log_without_a_path_stops_startup(audit_path, locky_app_factory):
    with pytest.raises(SettingsError, match="audit_log"):
        locky_app_factory(plugins=("locky_audit_log",))


# -- a second kind of credential ---------------------------------------------------------


@pytest.fixture
def keys_app(monkeypatch, locky_app_factory):
    monkeypatch.syspath_prepend(str(EXAMPLES / "api-keys"))
    monkeypatch.delenv("LOCKY_API_KEYS_DB", raising=False)
    return locky_app_factory(plugins=("locky_api_keys",))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_api_key_authenticates_beside_jwts(keys_app, locky_database_url):
    client = LockyClient(keys_app)
    ada = client.account("ada@example.com")
    issued = client.simulate_post("/v1/private/api-keys", json={"name": "ci"}, headers=ada.headers)
    assert issued.status_code == 201, issued.text
    key = issued.json["key"]
    assert key.startswith(issued.json["prefix"] + "_") and issued.json["prefix"].startswith("lk_")
    assert issued.json["created_at"].endswith("Z")

    me = client.simulate_get("/v1/internal/users/me", headers=bearer(key))
    assert me.status_code == 200 and me.json["uuid"] == ada.uuid
    # The policy applies to key holders as to anyone: Ada may create a group.
    group = client.simulate_post("/v1/private/groups", json={"name": "via-key"}, headers=bearer(key))
    assert group.status_code == 201
    # JWTs keep working beside keys.
    assert client.simulate_get("/v1/internal/users/me", headers=ada.headers).status_code == 200

    listing = client.simulate_get("/v1/internal/api-keys", headers=ada.headers)
    assert listing.status_code == 200
    assert [(k["name"], k["prefix"]) for k in listing.json["api_keys"]] == [("ci", issued.json["prefix"])]
    assert key not in listing.text

    # Only a digest is stored.
    store = Path(locky_database_url.removeprefix("sqlite:///") + ".api-keys")
    with sqlite3.connect(store) as db:
        stored = db.execute("SELECT digest FROM api_keys").fetchall()
    assert len(stored) == 1 and key.split("_", 2)[2] not in stored[0][0]
    # Mode 0600, whatever the umask (0022 here): the digests are the service's alone.
    for path in (store, Path(f"{store}-wal"), Path(f"{store}-shm")):
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_bad_api_keys_are_401(keys_app):
    client = LockyClient(keys_app)
    ada = client.account("ada@example.com")
    key = client.simulate_post("/v1/private/api-keys", json={"name": "ci"}, headers=ada.headers).json["key"]
    lk, public_id, secret = key.split("_", 2)  # the secret may hold "_" itself
    public = f"{lk}_{public_id}"
    for bad in (f"{public}_{'x' * len(secret)}", "lk_0000000000000000_" + secret, "lk_", "lk_nounderscore"):
        result = client.simulate_get("/v1/internal/users/me", headers=bearer(bad))
        assert result.status_code == 401, bad
        assert result.headers["www-authenticate"] == "Bearer"
        assert secret not in result.text


def test_api_keys_are_revoked_and_die_with_their_user(keys_app):
    client = LockyClient(keys_app)
    ada, bob = client.account("ada@example.com"), client.account("bob@example.com")
    first = client.simulate_post("/v1/private/api-keys", json={"name": "one"}, headers=ada.headers).json
    second = client.simulate_post("/v1/private/api-keys", json={"name": "two"}, headers=ada.headers).json

    # Bob cannot revoke Ada's key; Ada can.
    assert client.simulate_delete(f"/v1/private/api-keys/{first['id']}", headers=bob.headers).status_code == 404
    assert client.simulate_delete(f"/v1/private/api-keys/{first['id']}", headers=ada.headers).status_code == 204
    assert client.simulate_get("/v1/internal/users/me", headers=bearer(first["key"])).status_code == 401
    assert client.simulate_delete(f"/v1/private/api-keys/{first['id']}", headers=ada.headers).status_code == 404
    assert client.simulate_get("/v1/internal/users/me", headers=bearer(second["key"])).status_code == 200

    ada_id = client.simulate_get("/v1/internal/users/me", headers=ada.headers).json["id"]
    assert client.simulate_delete(f"/v1/private/users/{ada_id}", headers=ada.headers).status_code == 204
    assert client.simulate_get("/v1/internal/users/me", headers=bearer(second["key"])).status_code == 401


def test_an_api_key_cannot_issue_keys_and_bodies_are_checked(keys_app):
    client = LockyClient(keys_app)
    ada = client.account("ada@example.com")
    key = client.simulate_post("/v1/private/api-keys", json={"name": "ci"}, headers=ada.headers).json["key"]
    assert client.simulate_post("/v1/private/api-keys", json={"name": "more"}, headers=bearer(key)).status_code == 403
    assert client.simulate_post("/v1/private/api-keys", json={"name": "x"}).status_code == 401

    missing = client.simulate_post("/v1/private/api-keys", json={}, headers=ada.headers)
    assert missing.status_code == 400 and list(missing.json) == ["name"]
    unknown = client.simulate_post("/v1/private/api-keys", json={"name": "x", "scope": "all"}, headers=ada.headers)
    assert unknown.status_code == 400 and list(unknown.json) == ["scope"]
    text = client.simulate_post("/v1/private/api-keys", body="name=x", headers={**ada.headers,
                                                                                "Content-Type": "text/plain"})
    assert text.status_code == 415


def test_api_key_routes_are_in_the_swagger_document(keys_app):
    from openapi_spec_validator import validate

    validate(keys_app.swagger)  # still a valid Swagger 2.0 document
    paths = keys_app.swagger["paths"]
    assert set(paths["/private/api-keys"]) == {"post"}
    assert set(paths["/private/api-keys/{id}"]) == {"delete"}
    assert set(paths["/internal/api-keys"]) == {"get"}


# -- embedding Locky in a host app ---------------------------------------------------------


class EmbeddedClient(LockyClient):
    """A client of the host app: Locky's mail is that of the Locky app it embeds."""

    @property
    def mailbox(self) -> MailBox:
        return MailBox(self.app.locky_app.context.settings.mail_path)


@pytest.fixture
def embedded(monkeypatch, locky_settings):
    monkeypatch.syspath_prepend(str(EXAMPLES / "embedding"))
    import reports_app

    app = reports_app.create(locky_settings)
    try:
        yield EmbeddedClient(app)
    finally:
        app.close()


def test_host_route_uses_lockys_tokens_and_policy(embedded):
    client = embedded
    admin = client.account(ADMIN_EMAIL, verified=True)
    ada, bob, carol = (client.account(f"{n}@example.com") for n in ("ada", "bob", "carol"))
    role = client.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "analyst", "permissions": [{"resource": "reports", "action": "read"}]})
    assert role.status_code == 201, role.text
    group = client.simulate_post("/v1/private/groups", json={"name": "sales"}, headers=ada.headers).json
    added = client.simulate_post("/v1/private/members", headers=ada.headers, json={
        "group_uuid": group["uuid"], "user_uuid": bob.uuid, "role": "analyst"})
    assert added.status_code == 201, added.text

    reports = f"/reports/{group['uuid']}"
    ok = client.simulate_get(reports, headers=bob.headers)
    assert ok.status_code == 200 and ok.json["group"] == "sales" and ok.json["reader"] == bob.email
    assert client.simulate_get(reports, headers=carol.headers).status_code == 403  # not a member
    assert client.simulate_get(reports, headers=ada.headers).status_code == 403  # owner, but no such permission
    assert client.simulate_get(reports, headers=admin.headers).status_code == 200  # admin may do anything

    no_token = client.simulate_get(reports)
    assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
    assert client.simulate_get(reports, headers=bearer("not.a.jwt")).status_code == 401
    missing = client.simulate_get("/reports/00000000-0000-4000-8000-000000000000", headers=bob.headers)
    assert missing.status_code == 404

    # Locky's changes are the host's at once: a removed membership, a logout.
    client.simulate_delete(f"/v1/private/members/{added.json['id']}", headers=ada.headers)
    assert client.simulate_get(reports, headers=bob.headers).status_code == 403
    assert client.simulate_post("/v1/private/users/logout", headers=admin.headers).status_code == 204
    assert client.simulate_get(reports, headers=admin.headers).status_code == 401


def test_both_apps_answer_through_one_wsgi_app(embedded):
    client = embedded
    assert client.simulate_get("/").json["service"] == "reports"
    assert client.simulate_get("/v1/public/health").json == {"status": "ok"}
    doc = client.simulate_get("/swagger/doc.json")
    assert doc.status_code == 200 and doc.json["basePath"] == "/v1"
    assert "/reports/{group_uuid}" not in doc.json["paths"]
    assert client.simulate_get("/v1/no/such/route").status_code == 404
    assert client.simulate_get("/no/such/page").status_code == 404
    # Locky's own middleware still applies to its half.
    assert client.simulate_get("/v1/public/health").headers["x-request-id"]
