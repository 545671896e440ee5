"""Upgrading a real Locky 1.0.0 database (docs/http/operation.md#upgrades), on SQLite, PostgreSQL
and MariaDB: the dumps in ``fixtures/1.0.0/`` were written by the 1.0.0 release itself
(``make_fixtures.py``), and ``expected.json`` holds what 1.0.0 answered over HTTP.

For each engine the dump is loaded into an empty database, then:

- ``locky migrate --dry-run`` lists the pending steps with their SQL and changes nothing;
- ``locky migrate`` applies them, a second run has nothing to do, and every record,
  count, deletion, password, decision and the live login read back as 1.0.0 answered;
- ``locky serve --workers 2`` started straight on the dump migrates once and serves the
  same answers over real HTTP;
- with ``LOCKY_AUTO_MIGRATE=false`` ``locky serve`` refuses the old database, naming
  ``locky migrate``, and a database ahead of the code stops ``serve`` and ``migrate``.

The commands run as the installed ``locky`` console script, in processes of their own.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jwt
import pytest

from locky.app import create_app
from locky.testing import LockyClient, make_settings
from support.server import free_port, locky_server, stop
from upgrade_checks import Http, check_reads_back, check_writes, expected, login, refresh_token
from upgrade_dumps import empty, load, schema_version, set_schema_version, snapshot

RELEASE = "1.0.0"
#: The schema version 1.0.0 wrote; every step of an upgrade from it is above it.
RELEASE_SCHEMA = 1
LOCKY = Path(sys.executable).with_name("locky")

ENGINES = [pytest.param(kind, id=kind, marks=() if kind == "sqlite" else pytest.mark.backend)
           for kind in ("sqlite", "postgres", "mysql")]


@pytest.fixture(params=ENGINES)
def engine(request) -> str:
    return request.param


@pytest.fixture
def recorded(engine) -> dict:
    """What 1.0.0 answered when it wrote this engine's dump."""
    return expected(RELEASE, engine)


@pytest.fixture
def release_database(request, engine, tmp_path):
    """The URL of a database holding the 1.0.0 dump and nothing else. PostgreSQL and
    MariaDB use the run's scratch database (``tests/backends.py``: skipped, or failed
    under LOCKY_REQUIRE_BACKENDS=1, when the server is not there), emptied of every
    table before and after, so that the next test there starts from nothing."""
    if engine == "sqlite":
        url = f"sqlite:///{tmp_path / 'locky-1.0.0.sqlite'}"
    else:
        url = request.getfixturevalue(f"{engine}_database").url
    empty(url)
    load(url, RELEASE)
    try:
        yield url
    finally:
        empty(url)


def command_env(url: str, fixture: dict, **values: str) -> dict[str, str]:
    """The environment of a ``locky`` command: the caller's, minus any LOCKY_* setting."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    return {**base, "LOCKY_DATABASE_URL": url, "LOCKY_JWT_SECRET": fixture["jwt_secret"],
            "LOCKY_BCRYPT_ROUNDS": "4", **release_tokens(fixture), **values}


def release_tokens(fixture: dict) -> dict[str, str]:
    """The release's token settings (HS256, issuer "locky"), kept by the operator: the
    logins made before the upgrade go on working. With the new defaults (ES256) they end,
    as ``test_default_tokens_end_the_release_logins_and_say_so`` shows."""
    return {"LOCKY_JWT_ALGORITHM": fixture["jwt"]["algorithm"], "LOCKY_JWT_ISSUER": fixture["jwt"]["issuer"]}


def locky(*args: str, url: str, fixture: dict, cwd: Path, timeout: float = 120, **values: str):
    """Run the installed ``locky`` command; its completed process."""
    assert LOCKY.exists(), f"the locky console script is not installed beside {sys.executable}"
    done = subprocess.run([str(LOCKY), *args], env=command_env(url, fixture, **values), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    if "invalid choice: 'migrate'" in done.stderr:
        pytest.fail("`locky migrate` does not exist yet", pytrace=False)
    return done


def serve_until_exit(url: str, fixture: dict, cwd: Path, timeout: float = 60, **values: str):
    """``locky serve`` expected to stop by itself: ``(returncode, stdout, stderr)``."""
    process = subprocess.Popen(
        [str(LOCKY), "serve", "--host", "127.0.0.1", "--port", str(free_port()), "--workers", "1"],
        env=command_env(url, fixture, **values), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        out, err = process.communicate()
        pytest.fail(f"locky serve kept running instead of stopping:\n{err[-3000:]}")
    return process.returncode, out, err


def steps(dry_run_output: str) -> dict[int, str]:
    """The pending steps a dry run printed: ``{version: its line}``. A step's line starts
    at the margin and holds its version; its SQL statements follow it, indented (which
    tells it from a heading or summary line)."""
    lines = [line for line in dry_run_output.splitlines() if line.strip()]
    found = {}
    for line, following in zip(lines, lines[1:]):
        if not line[0].isspace() and following[0].isspace():
            number = re.search(r"\b(\d+)\b", line)
            assert number, f"a step line without a version: {line!r}"
            found.setdefault(int(number.group(1)), line.strip())
    return found


def description(step_line: str) -> str:
    """What a step's line says after its version."""
    return re.split(r"\b\d+\b\W*", step_line, maxsplit=1)[-1].strip()


def dry_run(url: str, fixture: dict, cwd: Path) -> dict[int, str]:
    done = locky("migrate", "--dry-run", url=url, fixture=fixture, cwd=cwd)
    assert done.returncode == 0, done.stderr
    pending = steps(done.stdout)
    assert pending, f"the dry run names no step:\n{done.stdout}"
    assert all(version > RELEASE_SCHEMA for version in pending), done.stdout
    assert sorted(pending) == list(range(RELEASE_SCHEMA + 1, max(pending) + 1)), done.stdout
    indented = [line for line in done.stdout.splitlines() if line[:1].isspace() and line.strip()]
    assert any(re.search(r"\b(CREATE|ALTER|INSERT|UPDATE|DROP)\b", line, re.I) for line in indented), \
        f"the dry run shows no SQL:\n{done.stdout}"
    return pending


def migrated_app(url: str, fixture: dict, **settings):
    """Today's app on ``url``, with the fixture's secret and no admin by email (the
    fixture's admin is one by grant only)."""
    values = {"jwt_algorithm": fixture["jwt"]["algorithm"], "jwt_issuer": fixture["jwt"]["issuer"], **settings}
    return create_app(make_settings(url, jwt_secret=fixture["jwt_secret"], admin_emails=(),
                                    log_requests=False, **values))


def assert_refused(done_or_stderr, *words: str) -> str:
    text = done_or_stderr if isinstance(done_or_stderr, str) else done_or_stderr.stderr
    assert "Traceback" not in text, text
    lowered = text.lower()
    assert any(word.lower() in lowered for word in words), f"none of {words} in:\n{text}"
    return text


# -- the release's data through today's code ---------------------------------------------


def test_the_release_dump_is_1_0_0_data(release_database, recorded):
    """The fixture is what it claims: a 1.0.0 schema holding the recorded records."""
    assert schema_version(release_database) == RELEASE_SCHEMA
    tables = snapshot(release_database)
    users = tables["locky_users"]
    assert len(users) == recorded["counts"]["users"] + len(recorded["deleted"]["users"])
    assert {row[1] for row in users} >= {user["uuid"] for user in recorded["users"]}


def test_create_app_serves_the_release_database(release_database, recorded):
    """Today's ``create_app`` on a 1.0.0 database (migrating it at start, as ``serve``
    does by default): everything reads back as 1.0.0 answered, and writes go on."""
    app = migrated_app(release_database, recorded)
    try:
        http = Http.in_process(LockyClient(app))
        tokens = check_reads_back(http, recorded)
        check_writes(http, recorded, tokens)
    finally:
        app.close()


# -- locky migrate ---------------------------------------------------------------------------


def test_migrate_dry_run_prints_the_steps_and_changes_nothing(release_database, recorded, tmp_path):
    before = snapshot(release_database)
    dry_run(release_database, recorded, tmp_path)
    assert snapshot(release_database) == before
    assert schema_version(release_database) == RELEASE_SCHEMA


def test_migrate_keeps_every_record(release_database, recorded, tmp_path):
    pending = dry_run(release_database, recorded, tmp_path)

    done = locky("migrate", url=release_database, fixture=recorded, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for version in pending:  # one line per applied step
        assert re.search(rf"\b{version}\b", done.stdout), f"step {version} not reported:\n{done.stdout}"
    assert schema_version(release_database) == max(pending)

    after = snapshot(release_database)
    again = locky("migrate", url=release_database, fixture=recorded, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stdout.lower(), again.stdout
    assert snapshot(release_database) == after
    again = locky("migrate", "--dry-run", url=release_database, fixture=recorded, cwd=tmp_path)
    assert again.returncode == 0 and "up to date" in again.stdout.lower(), again.stdout

    # Not migrating at start: the command alone brought the database up to date.
    app = migrated_app(release_database, recorded, auto_migrate=False)
    try:
        http = Http.in_process(LockyClient(app))
        tokens = check_reads_back(http, recorded)
        check_writes(http, recorded, tokens)
    finally:
        app.close()


# -- locky serve -----------------------------------------------------------------------------


@pytest.mark.server
def test_serve_migrates_the_release_database_once_and_serves_it(release_database, recorded, tmp_path, monkeypatch):
    pending = dry_run(release_database, recorded, tmp_path)
    # locky_server adds to this process's environment: keep the caller's LOCKY_* out.
    for key in [k for k in os.environ if k.startswith("LOCKY_")]:
        monkeypatch.delenv(key)
    env = {"LOCKY_DATABASE_URL": release_database, "LOCKY_JWT_SECRET": recorded["jwt_secret"],
           "LOCKY_BCRYPT_ROUNDS": "4", **release_tokens(recorded)}
    with locky_server(tmp_path / "serve", env=env, workers=2, startup_timeout=60) as server:
        http = Http.real(server)
        tokens = check_reads_back(http, recorded)
        check_writes(http, recorded, tokens)
        log = server.log()
    assert len(set(re.findall(r"Booting worker with pid: (\d+)", log))) >= 2, log
    assert "Traceback" not in log, log
    # Each step ran once, whichever process started first: no line about a step is
    # written twice (a step may have several lines, from storage and from startup).
    for version, line in pending.items():
        said = description(line)
        repeated = Counter(entry for entry in log.splitlines() if said and said in entry)
        assert all(times == 1 for times in repeated.values()), f"step {version} ran more than once:\n{log}"
    assert schema_version(release_database) == max(pending)
    done = locky("migrate", url=release_database, fixture=recorded, cwd=tmp_path)
    assert done.returncode == 0 and "up to date" in done.stdout.lower(), done.stdout + done.stderr


@pytest.mark.server
def test_serve_without_auto_migrate_refuses_the_release_database(release_database, recorded, tmp_path):
    before = snapshot(release_database)
    code, _, stderr = serve_until_exit(release_database, recorded, tmp_path, LOCKY_AUTO_MIGRATE="false")
    assert code != 0, stderr
    assert_refused(stderr, "locky migrate")
    assert snapshot(release_database) == before


@pytest.mark.server
def test_a_database_ahead_of_the_code_stops_serve_and_migrate(release_database, recorded, tmp_path):
    done = locky("migrate", url=release_database, fixture=recorded, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    set_schema_version(release_database, 999)
    before = snapshot(release_database)

    code, _, stderr = serve_until_exit(release_database, recorded, tmp_path)
    assert code != 0, stderr
    assert_refused(stderr, "999", "newer", "ahead")
    for args in (("migrate",), ("migrate", "--dry-run")):
        done = locky(*args, url=release_database, fixture=recorded, cwd=tmp_path)
        assert done.returncode != 0, (args, done.stdout, done.stderr)
        assert_refused(done, "999", "newer", "ahead")
    assert snapshot(release_database) == before
    assert schema_version(release_database) == 999


def test_default_tokens_end_the_release_logins_and_say_so(release_database, recorded, caplog):
    """An operator who upgrades without setting LOCKY_JWT_ALGORITHM gets ES256: the
    release's HS256 tokens stop working (their users log in again), and startup says so."""
    caplog.set_level(logging.INFO, logger="locky")
    app = migrated_app(release_database, recorded, jwt_algorithm="ES256", jwt_issuer=None)
    try:
        http = Http.in_process(LockyClient(app))
        session = recorded["live_session"]
        status, _ = http("POST", "/v1/public/users/refresh", {"refresh_token": refresh_token(recorded, session)})
        assert status == 401
        assert "tokens issued before (HS256 with LOCKY_JWT_SECRET) are no longer accepted" in caplog.text
        email, password = next(iter(recorded["passwords"].items()))
        if email == recorded["deleted_user"]["email"]:
            email, password = list(recorded["passwords"].items())[1]
        answer = login(http, email, password)  # a new login: an ES256 token with a kid
        assert jwt.get_unverified_header(answer["access_token"])["alg"] == "ES256"
    finally:
        app.close()
