"""The operator's ``locky`` command and the clients as a kit outsiders build on (issue 20).

- ``locky spec`` and ``locky plugins`` need no database: run in an empty directory they
  leave it empty (no ``locky.sqlite``, no secret file).
- ``locky check`` on a SQLite file that does not exist fails with a message instead of
  making a new database, and on a real one prints what it checked.
- ``locky revoke-admin`` for an admin held by ``LOCKY_ADMIN_EMAILS`` says so and fails.
- Every argument of ``locky`` and of the clients has help; ``--version`` works after
  every client sub-command.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import falcon.testing
import pytest

from locky import __version__, create_app
from locky.cli import main as operator
from locky.cli.check import masked_url
from locky.cli.clients import admin, anonymous, app
from locky.testing import TEST_SECRET, make_settings

CLIENTS = {"anonymous": anonymous, "app": app, "admin": admin}


def locky(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m locky.cli.main ARGS`` in ``cwd``, with no LOCKY_* of the caller's."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "locky.cli.main", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(words, parser)`` for ``parser`` and every sub-command under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, path + (name,))


# -- commands that need no database ----------------------------------------------------


@pytest.mark.parametrize("command", ["spec", "plugins"])
def test_offline_commands_leave_an_empty_directory_empty(tmp_path, command):
    done = locky(tmp_path, command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert list(tmp_path.iterdir()) == []


def test_spec_logs_nothing_of_its_in_memory_database(tmp_path):
    done = locky(tmp_path, "spec")
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize("command", [["unlock", "ada@example.com"], ["grant-admin", "ada@example.com"],
                                     ["revoke-admin", "ada@example.com"], ["keys", "list"], ["keys", "rotate"],
                                     ["audit", "prune", "--older-than", "90"]])
def test_commands_on_a_missing_database_file_stop_without_making_one(tmp_path, command):
    done = locky(tmp_path, *command)
    assert done.returncode == 2, done.stderr
    assert "no database at" in done.stderr and "locky migrate" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_dry_run_on_a_missing_database_file_shows_every_step_and_writes_nothing(tmp_path):
    done = locky(tmp_path, "migrate", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"locky: no database at {tmp_path / 'locky.sqlite'} yet")
    assert "step 1:" in done.stdout and "CREATE TABLE" in done.stdout
    assert list(tmp_path.iterdir()) == []
    made = locky(tmp_path, "migrate")  # the real one creates it
    assert made.returncode == 0 and (tmp_path / "locky.sqlite").is_file()


def test_spec_prints_the_routes_of_the_configured_plugins(tmp_path):
    done = locky(tmp_path, "spec")
    assert done.returncode == 0, done.stderr
    assert '"/public/users/register"' in done.stdout and '"swagger": "2.0"' in done.stdout


# -- locky check -------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["sqlite:///nope/locky.sqlite", "sqlite:///missing.sqlite", "ABSOLUTE"])
def test_check_refuses_a_database_file_that_does_not_exist(tmp_path, url):
    if url == "ABSOLUTE":
        url = f"sqlite:///{tmp_path / 'typo' / 'lcoky.sqlite'}"
    done = locky(tmp_path, "check", LOCKY_DATABASE_URL=url)
    assert done.returncode != 0
    assert "no database at" in done.stderr and "locky migrate" in done.stderr, done.stderr
    assert "in order" not in done.stdout and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # no new database, directory or secret file


def test_check_prints_what_it_checked(tmp_path):
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'locky.sqlite'}", "LOCKY_JWT_SECRET": TEST_SECRET}
    assert locky(tmp_path, "migrate", **env).returncode == 0
    done = locky(tmp_path, "check", **env)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines() if not line.startswith("locky:"))
    checked = {key: value.strip() for key, value in lines.items()}
    assert checked["database"] == f"sqlite:///{tmp_path / 'locky.sqlite'} (file {tmp_path / 'locky.sqlite'})"
    assert checked["schema version"].startswith("6 ") or checked["schema version"].split()[0].isdigit()
    assert checked["policy"].endswith("(shipped)") and Path(checked["policy"].split()[0], "policy.csv").is_file()
    assert {checked[slot] for slot in ("storage", "tokens", "password_hasher", "authorizer", "mailer")} \
        == {"pony", "jwt", "bcrypt", "casbin", "file"}
    assert done.stdout.rstrip().endswith("are in order")
    assert TEST_SECRET not in done.stdout + done.stderr


def test_check_reports_a_schema_behind_instead_of_upgrading_it(tmp_path):
    """An existing database without Locky's tables (or at an older step) is reported;
    ``check`` leaves it as it found it."""
    database = tmp_path / "locky.sqlite"
    sqlite3.connect(database).close()  # an empty SQLite file: schema version 0
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{database}", "LOCKY_JWT_SECRET": TEST_SECRET}
    done = locky(tmp_path, "check", **env)
    assert done.returncode != 0 and "in order" not in done.stdout
    assert "locky migrate" in done.stderr and "Traceback" not in done.stderr, done.stderr
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)


@pytest.mark.parametrize("url, shown", [
    ("postgres://locky:s3cret@db.example.com:5432/locky", "postgres://locky:***@db.example.com:5432/locky"),
    ("mysql://root:p%40ss@127.0.0.1/locky", "mysql://root:***@127.0.0.1/locky"),
    ("postgresql://locky@db/locky", "postgresql://locky@db/locky"),
    ("sqlite:////srv/locky.sqlite", "sqlite:////srv/locky.sqlite"),
])
def test_database_urls_are_shown_without_their_password(url, shown):
    assert masked_url(url) == shown


def test_check_never_shows_the_database_password(tmp_path):
    done = locky(tmp_path, "check", LOCKY_DATABASE_URL="postgres://locky:hunter2-secret@127.0.0.1:1/locky",
                 LOCKY_JWT_SECRET=TEST_SECRET, LOCKY_DB_TIMEOUT="1")
    assert done.returncode != 0
    assert "hunter2-secret" not in done.stdout + done.stderr


# -- revoke-admin and LOCKY_ADMIN_EMAILS --------------------------------------------------


@pytest.fixture
def database(tmp_path) -> dict[str, str]:
    """A SQLite database with one (unverified) user, boss@example.com; the env naming it."""
    url = f"sqlite:///{tmp_path / 'locky.sqlite'}"
    built = create_app(make_settings(url, admin_emails=()), background=False)
    try:
        boss = {"name": "Boss", "email": "boss@example.com", "password": "kit-password-1"}
        result = falcon.testing.TestClient(built).simulate_post("/v1/public/users/register", json=boss)
        assert result.status_code == 201, result.text
    finally:
        built.close()
    return {"LOCKY_DATABASE_URL": url, "LOCKY_JWT_SECRET": TEST_SECRET, "LOCKY_BCRYPT_ROUNDS": "4"}


def test_revoke_admin_explains_an_admin_held_by_the_setting(tmp_path, database):
    done = locky(tmp_path, "revoke-admin", "boss@example.com", LOCKY_ADMIN_EMAILS="Boss@Example.com", **database)
    assert done.returncode == 1
    assert "LOCKY_ADMIN_EMAILS" in done.stderr and "remove the email" in done.stderr
    assert "no longer an admin" not in done.stdout and "nothing to change" not in done.stdout


def test_revoke_admin_takes_back_a_stored_grant_but_still_explains_the_setting(tmp_path, database):
    assert locky(tmp_path, "grant-admin", "boss@example.com", **database).returncode == 0
    done = locky(tmp_path, "revoke-admin", "boss@example.com", LOCKY_ADMIN_EMAILS="boss@example.com", **database)
    assert done.returncode == 1
    assert "grant stored in the database is taken back" in done.stdout
    assert "held by the LOCKY_ADMIN_EMAILS setting" in done.stderr


def test_revoke_admin_without_the_setting_still_succeeds(tmp_path, database):
    assert locky(tmp_path, "grant-admin", "boss@example.com", **database).returncode == 0
    done = locky(tmp_path, "revoke-admin", "boss@example.com", LOCKY_ADMIN_EMAILS="other@example.com", **database)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "boss@example.com is no longer an admin\n"


# -- --config after the command ----------------------------------------------------------


def test_config_is_accepted_after_every_settings_command():
    parser = operator._parser()
    assert parser.parse_args(["serve", "--config", "x.toml"]).config == "x.toml"
    assert parser.parse_args(["--config", "x.toml", "serve"]).config == "x.toml"  # before it, as in 1.0
    assert parser.parse_args(["keys", "rotate", "--config", "y.toml"]).config == "y.toml"
    assert parser.parse_args(["check"]).config is None


def test_check_reads_the_config_given_after_the_command(tmp_path):
    config = tmp_path / "locky.toml"
    config.write_text(f'[locky]\ndatabase_url = "sqlite:///{tmp_path / "elsewhere.sqlite"}"\n')
    done = locky(tmp_path, "check", "--config", str(config))
    assert done.returncode != 0
    assert f"no database at {tmp_path / 'elsewhere.sqlite'}" in done.stderr


# -- help and --version ------------------------------------------------------------------


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments (and sub-commands) of ``parser`` that have no help text."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.help or action.help == argparse.SUPPRESS:
            missing.append("/".join(action.option_strings) or action.dest)
        if isinstance(action, argparse._SubParsersAction):
            missing.extend(choice.dest for choice in action._choices_actions if not choice.help)
    return missing


@pytest.mark.parametrize("name", ["locky", *CLIENTS])
def test_every_argument_has_help(name):
    root = operator._parser() if name == "locky" else CLIENTS[name].build_parser()
    levels = list(parsers(root))
    assert len(levels) > 5
    missing = {" ".join(path) or name: found for path, parser in levels if (found := undocumented(parser))}
    assert not missing, missing


@pytest.mark.parametrize("audience", list(CLIENTS))
def test_version_after_every_client_sub_command(audience, capsys):
    module = CLIENTS[audience]
    levels = [path for path, _ in parsers(module.build_parser())]
    assert len(levels) > 5
    for path in levels:
        assert module.main([*path, "--version"]) == 0, path
        captured = capsys.readouterr()
        assert captured.out == f"locky-{audience} {__version__}\n", path
        assert captured.err == ""


def test_the_operator_command_prints_the_version_and_the_schema_it_writes(capsys, tmp_path):
    from locky_pony.migrations import LATEST

    with pytest.raises(SystemExit) as exited:
        operator._parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"locky {__version__} (database schema version {LATEST})\n"
    done = locky(tmp_path, "--version")  # reads no settings and no database
    assert (done.returncode, done.stdout, done.stderr) == (0, f"locky {__version__} (database schema version {LATEST})\n", "")
    assert not any(tmp_path.iterdir())


def test_the_changelog_starts_with_this_version():
    """CHANGELOG.md's newest release is the package's version, and 1.0.0 is a release before it."""
    text = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text()
    releases = [line.split("]")[0][4:] for line in text.splitlines() if line.startswith("## [")]
    assert releases[0] == "Unreleased" and releases[1] == __version__, releases
    assert "1.0.0" in releases[2:], releases
