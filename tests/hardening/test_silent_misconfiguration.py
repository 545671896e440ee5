"""Silent misconfiguration: policy files and settings that failed without a word
(issue 13, finding 13).

- A policy line with a trailing ``# comment`` (as the README's own example has) made
  the comment part of its last value, so the rule never matched. A ``#`` after a space
  or a comma now starts a comment; a ``#`` inside any other value than an email stops
  startup with the file and line.
- ``g`` lines with upper-case emails never matched (emails are stored lowercased):
  they are read lowercased.
- ``LOCKY_*`` variables that nothing reads (typos) were ignored without a word: one
  startup warning names them.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest

from locky.app import create_app
from locky.settings import Settings, SettingsError
from locky.testing import make_settings

from harden import STRONG, RecordingClient

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "policies"


def policy(tmp_path: Path, lines: str, name: str = "policy") -> Path:
    """A policy directory: the shipped model and ``lines`` as policy.csv."""
    directory = tmp_path / name
    directory.mkdir()
    shutil.copy(SHIPPED / "model.conf", directory / "model.conf")
    (directory / "policy.csv").write_text(lines)
    return directory


def readme_policy_example() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```csv\n(.*?)```", text, re.S)
    assert block, "the README has no ```csv policy example"
    return block.group(1)


def test_the_readme_policy_example_works_with_its_comments(tmp_path, locky_database_url):
    example = readme_policy_example()
    assert re.search(r"\S\s+#", example), "the README example has no trailing comment any more"
    directory = policy(tmp_path, example)
    app = create_app(make_settings(locky_database_url, policy_dir=str(directory), admin_emails=()))
    try:
        client = RecordingClient(app)
        owner = client.account("owner@example.com", STRONG)
        # "p, user, *, groups, create        # every logged-in user may create groups"
        created = client.simulate_post("/v1/private/groups", json={"name": "commented"}, headers=owner.headers)
        assert created.status_code == 201, created.text
        # "p, owner, *, groups, write  # ..." with "g2, update, write  # ...": the owner renames it.
        renamed = client.simulate_put(f"/v1/private/groups/{created.json['id']}", json={"name": "renamed"},
                                      headers=owner.headers)
        assert renamed.status_code == 200, renamed.text
    finally:
        app.close()


def test_a_trailing_comment_does_not_change_a_rule(tmp_path, locky_database_url):
    """Members may update their group by an added line with a comment; the comment's
    words (``*``, ``#``, commas) do not leak into the rule."""
    lines = (SHIPPED / "policy.csv").read_text() + \
        "p, member, *, groups, update\t# members rename their group, *, everything #2\n"
    app = create_app(make_settings(locky_database_url, policy_dir=str(policy(tmp_path, lines)), admin_emails=()))
    try:
        client = RecordingClient(app)
        owner, member = client.account("owner@example.com", STRONG), client.account("member@example.com", STRONG)
        group = client.simulate_post("/v1/private/groups", json={"name": "g"}, headers=owner.headers).json
        added = client.simulate_post("/v1/private/members", json={"group_uuid": group["uuid"],
                                                                  "user_uuid": member.uuid, "role": "member"},
                                     headers=owner.headers)
        assert added.status_code == 201, added.text
        renamed = client.simulate_put(f"/v1/private/groups/{group['id']}", json={"name": "by a member"},
                                      headers=member.headers)
        assert renamed.status_code == 200, renamed.text
        deleted = client.simulate_delete(f"/v1/private/groups/{group['id']}", headers=member.headers)
        assert deleted.status_code == 403, deleted.text  # update, not write: the comment gave nothing more
    finally:
        app.close()


@pytest.mark.parametrize("line", ["p, user, *, groups, read#no space", "p, user, *, gro#ups, read",
                                  "g, owner#x, maintainer"])
def test_a_hash_inside_a_value_stops_startup_naming_the_line(tmp_path, locky_database_url, line):
    text = (SHIPPED / "policy.csv").read_text()
    number = len(text.splitlines()) + 1
    directory = policy(tmp_path, text + line + "\n")
    with pytest.raises(SettingsError) as caught:
        create_app(make_settings(locky_database_url, policy_dir=str(directory)))
    assert f"{directory / 'policy.csv'}:{number}:" in str(caught.value), str(caught.value)
    assert "'#'" in str(caught.value)


def decisions(client: RecordingClient, login: dict) -> dict[tuple[str, str], bool]:
    """What the policy decides for the user of ``login`` on a few requests, asked by them."""
    found = {}
    headers = {"Authorization": f"Bearer {login['access_token']}"}
    for resource, action in (("roles", "write"), ("audit", "read"), ("anything", "at-all"), ("groups", "read")):
        result = client.simulate_get("/v1/internal/authz/check", headers=headers,
                                     params={"user_uuid": login["user"]["uuid"], "resource": resource,
                                             "action": action})
        assert result.status_code == 200, result.text
        found[(resource, action)] = result.json["allowed"]
    return found


def test_an_upper_case_email_in_a_g_line_matches_like_the_lower_case_one(tmp_path, locky_database_url):
    """``g, Boss@Example.COM, ROLE`` grants exactly what ``g, boss@example.com, ROLE``
    grants (before, nothing: the stored email is lowercase). Both apps run on one
    database, so the same account is asked about."""
    extra = "p, auditor, *, audit, read\ng, {email}, admin\ng, {email}, auditor\n"
    base = (SHIPPED / "policy.csv").read_text()
    seen = {}
    for name, email in (("lower", "boss@example.com"), ("upper", "Boss@Example.COM")):
        directory = policy(tmp_path, base + extra.format(email=email), name)
        app = create_app(make_settings(locky_database_url, policy_dir=str(directory), admin_emails=()))
        try:
            client = RecordingClient(app)
            if name == "lower":
                client.register("boss@example.com", STRONG)
            seen[name] = decisions(client, client.login("boss@example.com", STRONG))
        finally:
            app.close()
    assert seen["upper"] == seen["lower"], seen
    assert seen["lower"][("groups", "read")] is True  # the control: the checks ran


# ---------------------------------------------------------------------------
# Unknown LOCKY_* variables
# ---------------------------------------------------------------------------


def unknown_variable_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "locky" and r.levelno == logging.WARNING
            and "LOCKY_" in r.getMessage() and "unknown" in r.getMessage().lower()]


def test_unknown_locky_variables_are_named_in_one_warning(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="locky")
    environ = {
        "LOCKY_DATABSE_URL": f"sqlite:///{tmp_path / 'typo.sqlite'}",  # the typo
        "LOCKY_JWT_SECERT": "x",
        "LOCKY_BCRYPT_ROUNDS": "4",  # real settings
        "LOCKY_PORT": "9000",
        # read elsewhere: the TOML file's name, the clients, the test kit, benchmarks, plugins
        "LOCKY_URL": "http://127.0.0.1:8080", "LOCKY_TEST_POSTGRES_URL": "postgres://x", "LOCKY_TEST_MYSQL_URL": "m",
        "LOCKY_TEST_DATABASE_URL": "d", "LOCKY_TEST_REDIS_URL": "r", "LOCKY_REQUIRE_BACKENDS": "1",
        "LOCKY_BENCH_POSTGRES_URL": "p", "LOCKY_REDIS_URL": "redis://x", "LOCKY_API_KEYS_DB": "k",
        "LOCKY_AUDIT_LOG": "a", "LOCKY_FUZZ_EXAMPLES": "3",
        "NOT_LOCKY_AT_ALL": "1", "locky_port": "2",
    }
    settings = Settings.load(environ=environ)
    assert settings.port == 9000 and settings.bcrypt_rounds == 4
    warnings = unknown_variable_warnings(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    named = set(re.findall(r"LOCKY_[A-Z0-9_]+", message))
    assert {"LOCKY_DATABSE_URL", "LOCKY_JWT_SECERT"} <= named, message
    assert "did you mean LOCKY_DATABASE_URL?" in message, message
    assert named <= {"LOCKY_DATABSE_URL", "LOCKY_JWT_SECERT", "LOCKY_DATABASE_URL", "LOCKY_JWT_SECRET"}, message
    assert "sqlite" not in message  # names only: values may be secrets


def test_known_variables_alone_give_no_warning(caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="locky")
    Settings.load(environ={"LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'ok.sqlite'}", "LOCKY_CONFIG": "",
                           "LOCKY_AUTO_MIGRATE": "true", "LOCKY_TEST_POSTGRES_URL": "x"})
    assert unknown_variable_warnings(caplog) == []
