"""Operators change authorization by editing the policy files, not the code: the API
runs against a copy of ``policies/`` in ``tmp_path``, edited per test (more rights,
fewer rights, a new built-in role, an admin by a ``g`` line), through
``policy_dir``/``LOCKY_POLICY_DIR``. Policy files that do not parse, or that Casbin
cannot enforce Locky's requests with, stop ``create_app`` (and ``locky serve``) with
a :class:`locky.SettingsError` that names the problem; nothing falls back to
allowing (docs/http/authorization.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import locky
from locky.app import create_app
from locky.testing import TEST_SECRET, LockyClient, make_settings
from support.server import free_port

from authz_helpers import BUILTIN_ROLES, add_member, assert_forbidden, create_group, listing
from authz_helpers import check as decide

SHIPPED = Path(__file__).resolve().parents[1] / "policies"


@pytest.fixture
def policy_dir(tmp_path) -> Path:
    directory = tmp_path / "policy"
    directory.mkdir()
    for name in ("model.conf", "policy.csv"):
        shutil.copy(SHIPPED / name, directory / name)
    return directory


def edit(directory: Path, name: str, *, add: str = "", remove: str = "", replace: tuple[str, str] | None = None):
    path = directory / name
    text = path.read_text()
    if remove:
        assert remove in text, f"{remove!r} is not in the shipped {name}"
        text = text.replace(remove, "")
    if replace:
        assert replace[0] in text, f"{replace[0]!r} is not in the shipped {name}"
        text = text.replace(*replace)
    path.write_text(text + add)


@pytest.fixture
def make_client(locky_database_url, policy_dir):
    apps = []

    def make(**overrides) -> LockyClient:
        app = create_app(make_settings(locky_database_url, policy_dir=str(policy_dir), log_requests=False,
                                       **overrides))
        apps.append(app)
        return LockyClient(app)

    yield make
    for app in apps:
        app.close()


def test_an_unedited_copy_behaves_like_the_shipped_policy(make_client):
    client = make_client()
    user, other = client.account("user@example.com"), client.account("other@example.com")
    group = create_group(client, user)
    add_member(client, user, group, other.uuid)
    assert_forbidden(client.simulate_put(f"/v1/private/groups/{group['id']}", json={"name": "x"},
                                         headers=other.headers))
    assert {r["name"] for r in listing(client, user, "roles")} == BUILTIN_ROLES


def test_operator_lets_members_update_groups(make_client, policy_dir):
    edit(policy_dir, "policy.csv", add="\np, member, *, groups, update\n")
    client = make_client()
    owner, member, viewer = (client.account(f"{n}@example.com") for n in ("owner", "member", "viewer"))
    group = create_group(client, owner)
    add_member(client, owner, group, member.uuid, "member")
    add_member(client, owner, group, viewer.uuid, "viewer")
    url = f"/v1/private/groups/{group['id']}"
    result = client.simulate_put(url, json={"description": "by a member"}, headers=member.headers)
    assert result.status_code == 200 and result.json["description"] == "by a member"
    # Only update: not delete, not members; and viewers (not members) gain nothing.
    assert_forbidden(client.simulate_delete(url, headers=member.headers))
    assert_forbidden(client.simulate_post("/v1/private/members", headers=member.headers, json={
        "group_uuid": group["uuid"], "user_uuid": client.account("new@example.com").uuid}))
    assert_forbidden(client.simulate_put(url, json={"description": "by a viewer"}, headers=viewer.headers))
    # The built-in role shows the new permission.
    (role,) = listing(client, owner, "roles", name="member")
    assert role["permissions"] == [{"resource": "groups", "action": "update"}]


def test_operator_takes_away_group_creation(make_client, policy_dir):
    edit(policy_dir, "policy.csv", remove="p, user, *, groups, create\n")
    client = make_client()
    user, admin = client.account("user@example.com"), client.account("admin@example.com", verified=True)
    assert_forbidden(client.simulate_post("/v1/private/groups", json={"name": "nope"}, headers=user.headers))
    assert decide(client, user, user.uuid, "groups", "create") is False
    assert listing(client, admin, "groups") == []
    # Admins still may.
    assert create_group(client, admin)["name"]


def test_operator_takes_away_group_deletion_from_owners(make_client, policy_dir):
    edit(policy_dir, "policy.csv", replace=("p, owner, *, groups, write", "p, owner, *, groups, update"))
    client = make_client()
    owner = client.account("owner@example.com")
    group = create_group(client, owner)
    url = f"/v1/private/groups/{group['id']}"
    assert client.simulate_put(url, json={"description": "still mine"}, headers=owner.headers).status_code == 200
    assert_forbidden(client.simulate_delete(url, headers=owner.headers))
    assert listing(client, owner, "groups") != []


def test_operator_adds_a_builtin_role(make_client, policy_dir):
    edit(policy_dir, "policy.csv",
         add="\n# role auditor: Reads the audit trail of a group.\np, auditor, *, audit, read\ng, auditor, viewer\n"
             # Owners hold it in their groups too, so they may give the role (issue 31).
             "p, owner, *, audit, read\n")
    client = make_client()
    owner, auditor = client.account("owner@example.com"), client.account("auditor@example.com")
    (role,) = listing(client, owner, "roles", name="auditor")
    assert role["builtin"] is True
    assert role["description"] == "Reads the audit trail of a group."
    assert role["permissions"] == [{"resource": "audit", "action": "read"}]
    group = create_group(client, owner)
    add_member(client, owner, group, auditor.uuid, "auditor")
    assert decide(client, owner, auditor.uuid, "audit", "read", group["uuid"]) is True
    assert decide(client, owner, auditor.uuid, "audit", "read") is False
    assert_forbidden(client.simulate_put(f"/v1/private/roles/{role['id']}", json={"description": "x"},
                                         headers=owner.headers))


def test_a_g_line_with_an_email_makes_an_admin(make_client, policy_dir):
    edit(policy_dir, "policy.csv", add="\ng, boss@example.com, admin\n")
    client = make_client(admin_emails=())
    boss, user = client.account("boss@example.com"), client.account("user@example.com")
    # The line makes an admin of the account only once it has verified the address.
    assert_forbidden(client.simulate_post("/v1/private/roles", json={"name": "early"}, headers=boss.headers))
    assert decide(client, user, boss.uuid, "anything", "at-all") is False
    client.verify("boss@example.com")
    group = create_group(client, user)
    assert client.simulate_post("/v1/private/roles", json={"name": "bossy"}, headers=boss.headers).status_code == 201
    assert client.simulate_put(f"/v1/private/users/{user.id}", json={"name": "Renamed"},
                               headers=boss.headers).status_code == 200
    assert client.simulate_delete(f"/v1/private/groups/{group['id']}", headers=boss.headers).status_code == 204
    assert decide(client, user, boss.uuid, "anything", "at-all") is True
    # Nobody else is: not the user, and not admin@example.com (no LOCKY_ADMIN_EMAILS here).
    assert_forbidden(client.simulate_post("/v1/private/roles", json={"name": "mine"}, headers=user.headers))
    plain = client.account("admin@example.com", verified=True)
    assert_forbidden(client.simulate_post("/v1/private/roles", json={"name": "mine"}, headers=plain.headers))
    # The email is a subject, not a role.
    assert {r["name"] for r in listing(client, user, "roles")} == BUILTIN_ROLES | {"bossy"}


def test_a_g_line_with_a_uuid_makes_an_admin(make_client, policy_dir):
    client = make_client(admin_emails=())
    user = client.account("user@example.com")
    chief = client.account("chief@example.com")
    assert_forbidden(client.simulate_post("/v1/private/roles", json={"name": "r1"}, headers=chief.headers))
    client.app.close()

    edit(policy_dir, "policy.csv", add=f"\ng, {chief.uuid}, admin\n")
    client = make_client(admin_emails=())  # the same database, restarted with the new file
    assert client.simulate_post("/v1/private/roles", json={"name": "r2"}, headers=chief.headers).status_code == 201
    assert_forbidden(client.simulate_post("/v1/private/roles", json={"name": "r3"}, headers=user.headers))
    # A user's uuid is a subject, not a role.
    assert {r["name"] for r in listing(client, user, "roles")} == BUILTIN_ROLES | {"r2"}


def test_an_empty_policy_allows_nothing(make_client, policy_dir):
    (policy_dir / "policy.csv").write_text("# nothing is allowed\n")
    client = make_client()
    admin, user = client.account("admin@example.com"), client.account("user@example.com")
    for account in (admin, user):
        for path in ("/v1/internal/users", "/v1/internal/users/me", "/v1/internal/roles"):
            assert_forbidden(client.simulate_get(path, headers=account.headers))
        assert_forbidden(client.simulate_post("/v1/private/groups", json={"name": "g"}, headers=account.headers))
    # Public endpoints do not consult the policy.
    assert client.simulate_get("/v1/public/health").status_code == 200


def test_a_removed_builtin_role_is_no_longer_listed(make_client, policy_dir):
    client = make_client()
    user = client.account("user@example.com")
    assert "viewer" in {r["name"] for r in listing(client, user, "roles")}
    client.app.close()
    edit(policy_dir, "policy.csv", remove="g, viewer, user\n",
         replace=("# role viewer: Sees a group; nothing beyond what every user may do.\n", ""))
    client = make_client()
    assert {r["name"] for r in listing(client, user, "roles")} == BUILTIN_ROLES - {"viewer"}


# -- files that must stop startup ----------------------------------------------

MODEL_BREAKS = {
    "garbage": ("model.conf", None, "this is not a casbin model\n"),
    "no matcher": ("model.conf", ("[matchers]", "[nothing]"), None),
    "matcher syntax": ("model.conf", ("m = g(r.sub, p.sub) &&", "m = g(r.sub, p.sub) &&& ((("), None),
    "matcher unknown function": ("model.conf", ("m = g(r.sub, p.sub)", "m = nosuch(r.sub, p.sub)"), None),
    "matcher unknown name": ("model.conf", ("p.obj == r.obj", "p.obj == r.object"), None),
    "request of 3": ("model.conf", ("r = sub, dom, obj, act", "r = sub, obj, act"), None),
    "policy of 3": ("model.conf", ("p = sub, dom, obj, act", "p = sub, obj, act"), None),
    "unknown effect": ("model.conf", ("e = some(where (p.eft == allow))", "e = whatever"), None),
    "g2 undefined": ("model.conf", ("g2 = _, _\n", ""), None),
    "short p line": ("policy.csv", None, "p, user, *, users\n"),
    "long g line": ("policy.csv", None, "g, a, b, c\n"),
    "empty value": ("policy.csv", None, "p, user, , users, read\n"),
    "unknown line type": ("policy.csv", None, "x, user, admin\n"),
    "not utf-8": ("policy.csv", None, b"p, user, *, users, r\xffad\n"),
}


@pytest.mark.parametrize("case", sorted(MODEL_BREAKS))
def test_broken_policy_files_stop_create_app(locky_database_url, policy_dir, case):
    name, replace, content = MODEL_BREAKS[case]
    path = policy_dir / name
    if replace:
        edit(policy_dir, name, replace=replace)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(locky.SettingsError) as raised:
        create_app(make_settings(locky_database_url, policy_dir=str(policy_dir)))
    message = str(raised.value)
    assert str(policy_dir) in message, message
    if name == "policy.csv" and case != "not utf-8":
        assert f"{path}:1:" in message, message  # file and line


def test_a_missing_policy_directory_stops_create_app(locky_database_url, tmp_path):
    with pytest.raises(locky.SettingsError, match="cannot read policy file"):
        create_app(make_settings(locky_database_url, policy_dir=str(tmp_path / "nowhere")))


def test_locky_serve_refuses_to_start_with_a_broken_policy(tmp_path, policy_dir):
    edit(policy_dir, "model.conf", replace=("m = g(r.sub, p.sub)", "m = nosuch(r.sub, p.sub)"))
    env = {**os.environ, "LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.sqlite'}",
           "LOCKY_JWT_SECRET": TEST_SECRET, "LOCKY_POLICY_DIR": str(policy_dir), "LOCKY_PORT": str(free_port())}
    done = subprocess.run([sys.executable, "-m", "locky.cli.main", "serve", "--host", "127.0.0.1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "nosuch" in output and str(policy_dir) in output, output
    assert "Traceback" not in output, output
