"""The TOML settings file as the docs show it, and the README's settings table (issue 20).

Plugin options are written ``[plugins.NAME]`` (docs/plugins.md, the examples) and reach
``Settings.extra`` whether or not the file has a ``[locky]`` table; ``[locky.plugins.NAME]``
works too. An unknown top-level table stops startup naming it and the allowed ones. The
README's table documents every setting as ``LOCKY_<NAME>`` with its real default, and
nothing else.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import falcon.testing
import pytest

from locky import create_app
from locky.settings import Settings, SettingsError
from locky.testing import TEST_SECRET

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
EXAMPLES = ROOT / "examples"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def load(path: Path) -> Settings:
    return Settings.load(environ={}, config=path)


# -- plugin options ------------------------------------------------------------------


def test_documented_plugin_tables_are_read_beside_a_locky_table(tmp_path):
    config = write(tmp_path / "locky.toml", """
        [locky]
        port = 9001
        plugins = ["locky_audit_log"]

        [plugins.audit_log]
        path = "/var/log/locky/audit.jsonl"

        [plugins.metrics]
        token = "scrape-me"
    """)
    settings = load(config)
    assert settings.port == 9001 and settings.plugins == ("locky_audit_log",)
    assert settings.extra == {"audit_log": {"path": "/var/log/locky/audit.jsonl"}, "metrics": {"token": "scrape-me"}}


def test_documented_plugin_tables_are_read_without_a_locky_table(tmp_path):
    config = write(tmp_path / "flat.toml", """
        port = 9002

        [plugins.redis]
        url = "redis://127.0.0.1:6379/0"
    """)
    settings = load(config)
    assert settings.port == 9002 and settings.extra == {"redis": {"url": "redis://127.0.0.1:6379/0"}}


def test_both_forms_together(tmp_path):
    config = write(tmp_path / "both.toml", """
        [locky]
        port = 9003
        [locky.plugins.argon2]
        time_cost = 2
        [locky.plugins.same]
        colour = "blue"

        [plugins.audit_log]
        path = "audit.jsonl"
        [plugins.same]
        colour = "blue"
    """)
    assert load(config).extra == {"argon2": {"time_cost": 2}, "audit_log": {"path": "audit.jsonl"},
                                  "same": {"colour": "blue"}}


def test_one_plugin_configured_differently_in_both_forms_is_refused(tmp_path):
    config = write(tmp_path / "clash.toml", """
        [locky.plugins.metrics]
        token = "one"

        [plugins.metrics]
        token = "two"
    """)
    with pytest.raises(SettingsError, match=r"\[plugins\.metrics\] and \[locky\.plugins\.metrics\]"):
        load(config)


def test_unknown_top_level_tables_are_refused_naming_them_and_the_allowed_ones(tmp_path):
    config = write(tmp_path / "typo.toml", """
        [locky]
        port = 9004

        [plugin.audit_log]
        path = "audit.jsonl"

        [server]
        workers = 4
    """)
    with pytest.raises(SettingsError) as caught:
        load(config)
    message = str(caught.value)
    assert "[plugin], [server]" in message and "typo.toml" in message
    assert "[locky]" in message and "[plugins.NAME]" in message


def test_an_unknown_table_without_a_locky_table_is_refused_too(tmp_path):
    config = write(tmp_path / "flat.toml", "port = 9005\n[lcoky]\nhost = 'localhost'\n")
    with pytest.raises(SettingsError, match=r"unknown top-level table\(s\) \[lcoky\]"):
        load(config)


def test_a_setting_outside_the_locky_table_is_refused(tmp_path):
    config = write(tmp_path / "stray.toml", "port = 9006\n[locky]\nhost = 'localhost'\n")
    with pytest.raises(SettingsError, match="port must go inside the \\[locky\\] table"):
        load(config)


def test_plugin_options_must_be_tables(tmp_path):
    config = write(tmp_path / "scalar.toml", "[locky]\nport = 9007\n[plugins]\naudit_log = 'audit.jsonl'\n")
    with pytest.raises(SettingsError, match=r"plugins\.audit_log must be a table"):
        load(config)


def test_the_cli_stops_on_an_unknown_table_with_the_message(tmp_path):
    config = write(tmp_path / "typo.toml", "[locky]\nport = 9008\n[plugin.audit_log]\npath = 'a'\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}  # the test run's own
    done = subprocess.run([sys.executable, "-m", "locky.cli.main", "check", "--config", str(config)],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("locky: config file") and "[plugin]" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["typo.toml"]


def test_a_plugin_reads_its_documented_table_over_http(tmp_path, monkeypatch):
    """The example audit-log plugin, configured as its docstring says, beside a [locky]
    table: a registration over HTTP lands in its file."""
    monkeypatch.syspath_prepend(str(EXAMPLES / "audit-log"))
    audit = tmp_path / "audit.jsonl"
    config = write(tmp_path / "locky.toml", f"""
        [locky]
        database_url = "sqlite:///{tmp_path / 'locky.sqlite'}"
        jwt_secret = "{TEST_SECRET}"
        bcrypt_rounds = 4
        plugins = ["locky_audit_log"]
        autoload_plugins = false

        [plugins.audit_log]
        path = "{audit}"
    """)
    app = create_app(load(config), background=False)
    try:
        client = falcon.testing.TestClient(app)
        result = client.simulate_post("/v1/public/users/register",
                                      json={"name": "Ada", "email": "ada@example.com", "password": "kit-password-1"})
        assert result.status_code == 201, result.text
    finally:
        app.close()
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert "user.registered" in [event["event"] for event in events], events


# -- the README's settings table -----------------------------------------------------


def settings_rows() -> list[tuple[list[str], list[str]]]:
    """``(names, default cells)`` of each row of the README's settings table."""
    section = README.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `LOCKY_"):
            cells = line.split("|")
            # Values are separated by a slash standing alone (not the ones in a URL).
            rows.append((re.findall(r"`(LOCKY_[A-Z0-9_]+)`", cells[1]), re.split(r"(?<!\S)/(?!\S)", cells[2])))
    return rows


#: Every setting's variable and its default: Settings' fields and the bundled plugins' own.
FIELDS = {f"LOCKY_{name.upper()}": Settings.default_of(name) for name in Settings.names()}


def test_every_setting_is_in_the_readme_table():
    documented = {name for names, _ in settings_rows() for name in names}
    missing = sorted(set(FIELDS) - documented)
    assert not missing, f"add these settings to the README's Configuration table: {missing}"


def test_the_readme_table_documents_only_settings():
    documented = {name for names, _ in settings_rows() for name in names}
    unknown = sorted(documented - set(FIELDS))
    assert not unknown, f"the README's Configuration table names variables Settings does not have: {unknown}"


def rendered(value) -> str:
    """A default as the README writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value in (None, ()):
        return ""
    return str(value)


def test_the_readme_defaults_are_the_code_defaults():
    """Where a row gives one plain value per variable (``\\`8080\\``, or nothing for
    none), it is the field's default; prose defaults are for people to read."""
    checked = 0
    for names, defaults in settings_rows():
        if len(names) != len(defaults):
            assert len(names) == 1, f"give one default per variable (or none) in the row of {names}"
            continue
        for name, cell in zip(names, defaults):
            cell = cell.strip()
            literal = re.fullmatch(r"`([^`]*)`", cell)
            if literal is None and cell:
                continue  # prose: "generated (SQLite only)", "the shipped policy"
            default = FIELDS[name]
            assert (literal.group(1) if literal else "") == rendered(default), (name, cell, default)
            checked += 1
    assert checked >= 30
