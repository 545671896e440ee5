"""The operator's guide (docs/operating.md) cannot drift from the code: every ``locky``
command it shows parses with the real command-line parser (``locky-admin`` ones with
that client's), every ``LOCKY_*`` name is a setting, the TOML example loads as
settings, and the SQLite backup recipe, run as written on a real Locky database while
the app is open, gives a copy that holds the user and serves a login again."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from falcon import testing

from locky import create_app
from locky.cli.main import _parser as locky_parser
from locky.cli.clients.admin import build_parser as admin_parser
from locky.settings import Settings
from locky.testing import PASSWORD, make_settings

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "operating.md").read_text()
FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)  # also indented, in lists
#: Names read from the environment besides the Settings fields (checked below to be read).
NOT_FIELDS = {"LOCKY_CONFIG": ROOT / "locky" / "settings.py"}
#: Placeholders in the guide's commands, and a value of the right kind for the parser.
PLACEHOLDERS = {"ID": "1", "EMAIL": "ada@example.com"}
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "<<", "&"}
PROGRAMS = {"locky": locky_parser, "locky-admin": admin_parser}


def blocks(language: str | None = None) -> list[str]:
    return [body for lang, body in FENCE.findall(PAGE) if language is None or lang == language]


def prose() -> str:
    return FENCE.sub("", PAGE)


def commands() -> list[list[str]]:
    """Every ``locky``/``locky-admin`` command line of the page, as argument lists."""
    found: list[list[str]] = []
    lines = [line for lang, body in FENCE.findall(PAGE) if lang in ("sh", "console", "") for line in
             body.splitlines()]
    lines += re.findall(r"`((?:locky|locky-admin) [^`]+)`", prose())
    for line in lines:
        if "<<" in line:  # a here-document's first line: the rest is not a command
            line = line.split("<<", 1)[0]
        try:
            words = shlex.split(line.removeprefix("$ "), comments=True)
        except ValueError:
            continue
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value before the command
            words = words[1:]
        if words[:1] == ["sudo"]:
            words = words[3:] if words[1:2] == ["-u"] else words[1:]
        program = words[0].rsplit("/", 1)[-1] if words else ""
        if program in PROGRAMS:
            args = []
            for arg in words[1:]:
                if arg in SHELL_OPERATORS:
                    break
                args.append(PLACEHOLDERS.get(arg, arg))
            found.append([program, *args])
    return found


COMMANDS = commands()


def test_the_page_shows_the_operator_commands():
    shown = {" ".join(c) for c in COMMANDS}
    for expected in ("locky serve", "locky --config /etc/locky/locky.toml migrate",
                     "locky --config /etc/locky/locky.toml unlock", "locky --config /etc/locky/locky.toml keys",
                     "locky --config /etc/locky/locky.toml audit"):
        assert any(s.startswith(expected) for s in shown), (expected, sorted(shown))
    assert len(COMMANDS) >= 12


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_every_command_parses(command):
    program, *args = command
    parser = PROGRAMS[program]()
    error = io.StringIO()
    with contextlib.redirect_stderr(error), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(args)
        except SystemExit as exit:
            pytest.fail(f"`{' '.join(command)}` does not parse (exit {exit.code}): {error.getvalue()}")


def test_every_locky_setting_named_exists():
    fields = {"LOCKY_" + name.upper() for name in Settings.names()}
    named = set(re.findall(r"\bLOCKY_[A-Z0-9_]*[A-Z0-9]\b", PAGE))
    assert len(named) >= 15
    unknown = named - fields - set(NOT_FIELDS)
    assert not unknown, f"docs/operating.md names settings that do not exist: {sorted(unknown)}"
    for name, source in NOT_FIELDS.items():
        assert f'"{name}"' in source.read_text(), f"{name} is no longer read by {source}"


def test_the_toml_example_is_valid_settings():
    (text,) = blocks("toml")
    values = tomllib.loads(text)["locky"]
    with pytest.raises(Exception, match="at least 32 bytes"):
        Settings.from_mapping(values)  # the placeholder secret refuses to start
    settings = Settings.from_mapping({**values, "jwt_secret": "Zq8-real-random-secret-0123456789abcdefXYZ"})
    assert settings.public_url == "https://auth.example.com"
    assert settings.trusted_proxies == ("127.0.0.1/32", "::1/128")


def recipe(marker: str) -> str:
    (block,) = [body for body in blocks("sh") if marker in body]
    return block


def test_the_sqlite_backup_recipe_copies_a_live_database(tmp_path):
    live = tmp_path / "live" / "locky.sqlite"
    backups = tmp_path / "backups"
    backups.mkdir()
    # No jwt_secret: Locky makes locky.sqlite.secret beside the database, as in production.
    settings = dataclasses.replace(make_settings(f"sqlite:///{live}"), jwt_secret=None)
    app = create_app(settings, background=False)
    try:
        client = testing.TestClient(app)
        made = client.simulate_post("/v1/public/users/register",
                                    json={"name": "Ada", "email": "ada@example.com", "password": PASSWORD})
        assert made.status_code == 201, made.text
        script = (recipe("source.backup(target)")
                  .replace("/var/lib/locky/", f"{live.parent}/")
                  .replace("/var/backups/locky/", f"{backups}/")
                  .replace("python3 -", f"{shlex.quote(sys.executable)} -"))
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        # Locky keeps serving (and writing) while and after the copy is made.
        assert client.simulate_post("/v1/public/users/login",
                                    json={"email": "ada@example.com", "password": PASSWORD}).status_code == 200
    finally:
        app.close()

    copy = backups / "locky.sqlite"
    assert (backups / "locky.sqlite.secret").read_text() == (live.parent / "locky.sqlite.secret").read_text()
    with contextlib.closing(sqlite3.connect(copy)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found = [row for table in tables for row in _rows_with(db, table, "ada@example.com")]
        assert found, f"no table of the copy holds the user: {tables}"

    # Restored with its secret beside it, the copy serves the account again.
    restored = tmp_path / "restored" / "locky.sqlite"
    restored.parent.mkdir()
    shutil.copy(copy, restored)
    shutil.copy(backups / "locky.sqlite.secret", restored.parent / "locky.sqlite.secret")
    app = create_app(dataclasses.replace(settings, database_url=f"sqlite:///{restored}"), background=False)
    try:
        login = testing.TestClient(app).simulate_post("/v1/public/users/login",
                                                      json={"email": "ada@example.com", "password": PASSWORD})
        assert login.status_code == 200, login.text
    finally:
        app.close()


def _rows_with(db, table: str, value: str) -> list:
    columns = [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]
    if "email" not in columns:
        return []
    return db.execute(f'SELECT email FROM "{table}" WHERE email = ?', (value,)).fetchall()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed")
def test_the_sqlite_shell_recipe_works_too(tmp_path):
    live = tmp_path / "locky.sqlite"
    app = create_app(make_settings(f"sqlite:///{live}"), background=False)
    try:
        testing.TestClient(app).simulate_post("/v1/public/users/register", json={
            "name": "Ada", "email": "ada@example.com", "password": PASSWORD})
        line = recipe('".backup ').strip()
        script = line.replace("/var/lib/locky/", f"{tmp_path}/").replace("/var/backups/locky/", f"{tmp_path}/copy-")
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    finally:
        app.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "copy-locky.sqlite")) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert any(_rows_with(db, table, "ada@example.com") for table in tables)


# -- installing, the proxy, systemd (issue 36, item 3) ----------------------------------


def test_the_install_shows_building_the_wheel_of_this_version_with_extras():
    import locky

    install = recipe("useradd --system")
    wheel = f"locky-{locky.__version__}-py3-none-any.whl"
    assert f"'/tmp/{wheel}[postgres]'" in install
    assert "pip wheel --no-deps --wheel-dir dist ." in PAGE and "python3 -m build --wheel" in PAGE
    assert f"# {wheel}" in PAGE  # what `ls dist/` shows
    assert "pip install 'locky[" not in PAGE and "pip install --upgrade 'locky[" not in PAGE
    # The config file, the PostgreSQL role and database, and `locky` on PATH are made.
    for step in ("install -m 0640 -o root -g locky /dev/null /etc/locky/locky.toml", "createuser --pwprompt locky",
                 "createdb --owner=locky locky", "ln -s /opt/locky/bin/locky /usr/local/bin/locky",
                 "locky --config /etc/locky/locky.toml migrate"):
        assert step in install, step
    assert install.index("useradd") < install.index("-g locky") < install.index("systemctl enable")


def test_the_nginx_site_gives_both_http2_forms():
    (site,) = blocks("nginx")
    assert "http2 on;" in site and "listen 443 ssl http2;" in site and "1.25.1" in site


def test_the_unit_stops_restarting_on_the_exit_status_of_a_bad_setting(monkeypatch, capsys):
    from locky.cli.main import main

    (unit,) = blocks("ini")
    assert "RestartPreventExitStatus=2" in unit.splitlines()
    monkeypatch.setenv("LOCKY_PORT", "not-a-port")
    assert main(["serve"]) == 2  # what the unit names: a bad setting stops it, not restarted
    assert "LOCKY_PORT" in capsys.readouterr().err


def test_a_busy_port_is_said_and_exits_2(tmp_path):
    import os
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
        env["LOCKY_DATABASE_URL"] = f"sqlite:///{tmp_path / 'locky.sqlite'}"
        done = subprocess.run([sys.executable, "-m", "locky.cli.main", "serve", "--port", str(port)],
                              capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use by another process" in done.stderr
    assert "Can't connect" not in done.stderr
    assert "the port is in use" in PAGE


def test_the_page_says_what_locky_check_writes():
    assert "on a database no server has started on yet it writes what a\nfirst start writes" in PAGE


# -- restoring SQLite: the database and its secret together -----------------------------


def _live_with_user(directory: Path):
    settings = dataclasses.replace(make_settings(f"sqlite:///{directory / 'locky.sqlite'}"), jwt_secret=None)
    app = create_app(settings, background=False)
    try:
        made = testing.TestClient(app).simulate_post(
            "/v1/public/users/register", json={"name": "Ada", "email": "ada@example.com", "password": PASSWORD})
        assert made.status_code == 201, made.text
    finally:
        app.close()
    return settings


def test_the_restore_recipe_puts_back_the_database_and_its_secret(tmp_path):
    backups, live = tmp_path / "backups", tmp_path / "live"
    backups.mkdir()
    live.mkdir()
    _live_with_user(backups)  # the database the backup holds, with its secret
    # The host's current database: another one, with a secret of its own.
    other = _live_with_user(live)
    assert (live / "locky.sqlite.secret").read_text() != (backups / "locky.sqlite.secret").read_text()
    (live / "locky.sqlite-wal").write_bytes(b"")
    script = "\n".join(line for line in recipe("install -m 0600").splitlines() if not line.startswith("systemctl"))
    script = (script.replace(" -o locky -g locky", "").replace("/var/lib/locky", str(live))
              .replace("/var/backups/locky", str(backups)))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (live / "locky.sqlite.secret").read_text() == (backups / "locky.sqlite.secret").read_text()
    assert not (live / "locky.sqlite-wal").exists()
    assert oct((live / "locky.sqlite.secret").stat().st_mode & 0o777) == "0o600"
    app = create_app(other, background=False)
    try:
        login = testing.TestClient(app).simulate_post("/v1/public/users/login",
                                                      json={"email": "ada@example.com", "password": PASSWORD})
        assert login.status_code == 200, login.text
    finally:
        app.close()


def test_a_database_restored_without_its_secret_stops_and_leaves_no_secret_file(tmp_path):
    from locky.settings import SettingsError

    _live_with_user(tmp_path / "old")
    restored = tmp_path / "restored"
    restored.mkdir()
    shutil.copy(tmp_path / "old" / "locky.sqlite", restored / "locky.sqlite")
    settings = dataclasses.replace(make_settings(f"sqlite:///{restored / 'locky.sqlite'}"), jwt_secret=None)
    with pytest.raises(SettingsError, match="its secret file .* is missing: put back the locky.sqlite.secret"):
        create_app(settings, background=False)
    assert sorted(p.name for p in restored.iterdir()) == ["locky.sqlite"]  # no wrong secret, no -wal
    assert "restored without its secret file does not start" in PAGE
