"""The real service, ``locky serve`` with two worker processes on 127.0.0.1 (docs/http/operation.md
and the multi-process parts of docs/http/tokens.md and authorization.md): register, log in and read
over real HTTP; one JSON log line per request with method, path, status, duration,
request id and user, and no password or token anywhere in the log; no ``gunicorn``
server banner; without ``LOCKY_JWT_SECRET`` on SQLite a private ``<db>.secret`` is made
once and reused across restarts (tokens stay valid), while a PostgreSQL URL without a
secret, or a secret under 32 bytes, refuses to start with a clear message; the login
throttle holds across workers; ``locky spec`` prints the served document; and
``locky grant-admin`` / ``revoke-admin`` take effect in the running workers at once.
Every line the server writes, Locky's and gunicorn's, is JSON (the access lines carry the
client address), and ``locky serve --config FILE`` reads its settings from FILE."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from support.server import ServerProcess, free_port, locky_server, stop

pytestmark = pytest.mark.server

PASSWORD = "serve-password-1"
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def clean_env(**values: str) -> dict[str, str]:
    """The process environment without any LOCKY_* of the caller's, plus ``values``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    return {**base, "LOCKY_BCRYPT_ROUNDS": "4", **values}


@pytest.fixture(scope="module")
def no_locky_env():
    """``locky_server`` adds to ``os.environ``: keep a caller's LOCKY_* settings out."""
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_")]:
            mp.delenv(key)
        yield


def sqlite_env(workdir: Path, **values: str) -> dict[str, str]:
    return {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4", **values}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def server(workdir, no_locky_env):
    with locky_server(workdir, env=sqlite_env(workdir), workers=2) as running:
        yield running


def cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "locky.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def register_and_login(server, email: str, password: str = PASSWORD) -> tuple[dict, dict]:
    status, headers, user = server.request(
        "POST", "/v1/public/users/register", {"name": email.split("@")[0], "email": email, "password": password})
    assert status == 201, user
    assert header(headers, "Location").endswith(f"/v1/internal/users/{user['id']}")
    status, _, tokens = server.request("POST", "/v1/public/users/login", {"email": email, "password": password})
    assert status == 200, tokens
    return user, tokens


def header(headers: dict[str, str], name: str) -> str:
    """A response header, whatever case the server wrote its name in."""
    return {k.lower(): v for k, v in headers.items()}[name.lower()]


def auth(tokens: dict, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens['access_token']}", **extra}


def access_lines(server, wanted: set[str], timeout: float = 5.0) -> dict[str, dict]:
    """The JSON access-log lines of these request ids (waiting for the workers to write them)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {}
        for line in server.log().splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("request_id") in wanted:
                    found[record["request_id"]] = record
        if set(found) == wanted or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# -- over real HTTP --------------------------------------------------------------------


def test_register_login_and_me_over_real_http(server):
    user, tokens = register_and_login(server, "ada@example.com")
    assert set(tokens) == {"access_token", "token_type", "expires_in", "refresh_token", "user"}
    assert tokens["token_type"] == "Bearer" and tokens["user"] == user
    # Many requests, so both workers answer some: every one sees the session.
    for _ in range(20):
        status, _, body = server.request("GET", "/v1/internal/users/me", headers=auth(tokens))
        assert status == 200
        assert body == user


def test_both_workers_booted(server):
    # The server answers as soon as one worker is up; the other follows.
    deadline = time.monotonic() + 15
    while len(pids := set(re.findall(r"Booting worker with pid: (\d+)", server.log()))) < 2:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(pids) >= 2, server.log()


def test_refresh_rotation_and_logout_over_real_http(server):
    _, tokens = register_and_login(server, "rotate@example.com")
    status, _, fresh = server.request("POST", "/v1/public/users/refresh", {"refresh_token": tokens["refresh_token"]})
    assert status == 200
    status, headers, _ = server.request("POST", "/v1/public/users/refresh", {"refresh_token": tokens["refresh_token"]})
    assert status == 401 and header(headers, "WWW-Authenticate") == "Bearer"
    # Reuse revoked the whole chain, whichever worker answers.
    for _ in range(4):
        assert server.request("GET", "/v1/internal/users/me", headers=auth(fresh))[0] == 401
    status, _, again = server.request("POST", "/v1/public/users/login", {"email": "rotate@example.com", "password": PASSWORD})
    assert status == 200
    assert server.request("POST", "/v1/private/users/logout", headers=auth(again))[0] == 204
    for _ in range(4):
        assert server.request("GET", "/v1/internal/users/me", headers=auth(again))[0] == 401


def test_no_gunicorn_server_banner(server):
    for method, path in (("GET", "/v1/public/health"), ("GET", "/v1/no-such-route"), ("DELETE", "/v1/public/health")):
        status, headers, body = server.request(method, path)
        lowered = {k.lower(): v for k, v in headers.items()}
        assert "gunicorn" not in lowered.get("server", "").lower()
        assert not re.search(r"\d+\.\d+", lowered.get("server", "")), lowered.get("server")
        assert all("gunicorn" not in str(v).lower() for v in headers.values())
        assert isinstance(body, dict) and all(isinstance(v, str) for v in body.values())


def test_request_ids_are_echoed_over_real_http(server):
    status, headers, _ = server.request("GET", "/v1/public/health", headers={"X-Request-ID": "real-http-1"})
    assert status == 200 and header(headers, "X-Request-ID") == "real-http-1"
    _, headers, _ = server.request("GET", "/v1/public/health", headers={"X-Request-ID": "x" * 129})
    assert UUID4.match(header(headers, "X-Request-ID"))


def test_the_login_throttle_holds_across_workers(server):
    register_and_login(server, "throttle@example.com")
    for _ in range(5):
        status, _, _ = server.request("POST", "/v1/public/users/login",
                                      {"email": "throttle@example.com", "password": "wrong password"})
        assert status == 401
    for _ in range(4):  # whichever worker answers
        status, headers, body = server.request("POST", "/v1/public/users/login",
                                               {"email": "throttle@example.com", "password": PASSWORD})
        assert status == 429, body
        assert int(header(headers, "Retry-After")) >= 1


# -- the access log ------------------------------------------------------------------------


def test_one_json_log_line_per_request_without_secrets(server):
    secret_password = "Very-Secret-Pw-" + uuid.uuid4().hex[:8]
    email = f"logged-{uuid.uuid4().hex[:6]}@example.com"
    ids = {name: f"log-{name}-{uuid.uuid4().hex}" for name in ("register", "login", "me", "bad", "query", "wrong")}
    status, _, user = server.request("POST", "/v1/public/users/register",
                                     {"name": "Logged", "email": email, "password": secret_password},
                                     headers={"X-Request-ID": ids["register"]})
    assert status == 201
    status, _, tokens = server.request("POST", "/v1/public/users/login", {"email": email, "password": secret_password},
                                       headers={"X-Request-ID": ids["login"]})
    assert status == 200
    assert server.request("GET", "/v1/internal/users/me", headers=auth(tokens, **{"X-Request-ID": ids["me"]}))[0] == 200
    forged = tokens["access_token"][:-4] + "AAAA"
    assert server.request("GET", "/v1/internal/users/me",
                          headers={"Authorization": f"Bearer {forged}", "X-Request-ID": ids["bad"]})[0] == 401
    assert server.request("GET", f"/v1/internal/users?email={email}",
                          headers=auth(tokens, **{"X-Request-ID": ids["query"]}))[0] == 200
    assert server.request("POST", "/v1/public/users/login", {"email": email, "password": secret_password + "-wrong"},
                          headers={"X-Request-ID": ids["wrong"]})[0] == 401

    lines = access_lines(server, set(ids.values()))
    assert set(lines) == set(ids.values()), server.log()
    expected = {
        "register": ("POST", "/v1/public/users/register", 201, None),
        "login": ("POST", "/v1/public/users/login", 200, None),
        "me": ("GET", "/v1/internal/users/me", 200, user["uuid"]),
        "bad": ("GET", "/v1/internal/users/me", 401, None),
        "query": ("GET", "/v1/internal/users", 200, user["uuid"]),
        "wrong": ("POST", "/v1/public/users/login", 401, None),
    }
    for name, (method, path, status, who) in expected.items():
        record = lines[ids[name]]
        assert {"method", "path", "status", "duration_ms", "request_id", "user"} <= set(record), record
        assert (record["method"], record["path"], record["status"]) == (method, path, status), record
        assert isinstance(record["duration_ms"], (int, float)) and record["duration_ms"] >= 0
        if name != "login":
            assert record["user"] == who, record
    # Each request is logged once.
    log = server.log()
    for request_id in ids.values():
        assert sum(1 for line in log.splitlines() if request_id in line) == 1, request_id

    for secret in (secret_password, tokens["access_token"], tokens["refresh_token"], forged,
                   tokens["access_token"].split(".")[2], "$2b$"):
        assert secret not in log, f"{secret[:12]}... is in the server log"


def json_lines(text: str) -> list[dict]:
    """Every line of a server's output as JSON (an assertion names the first that is not)."""
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {number} of the server's output is not JSON: {line!r}") from None
        assert isinstance(record, dict), line
        records.append(record)
    return records


def test_every_line_the_server_writes_is_json_with_the_client_address(server):
    request_id = f"json-{uuid.uuid4().hex}"
    assert server.request("GET", "/v1/public/health",
                          headers={"X-Request-ID": request_id, "X-Forwarded-For": "203.0.113.9"})[0] == 200
    record = access_lines(server, {request_id})[request_id]
    # No trusted proxy is set: the address is the socket's, never the header's.
    assert record["ip"] == "127.0.0.1", record
    records = json_lines(server.log())
    loggers = {r.get("logger") for r in records}
    assert {"locky", "gunicorn.error"} <= loggers, loggers  # Locky's and gunicorn's lines alike
    assert any("Booting worker" in r.get("message", "") for r in records)
    assert all({"time", "level"} <= set(r) for r in records)


def test_serve_reads_the_config_file_given_after_the_command(tmp_path, no_locky_env):
    """``locky serve --config FILE``: the address, database and workers come from the
    file, and plugin tables beside ``[locky]`` are fine; its output is JSON lines too."""
    port = free_port()
    config = tmp_path / "locky.toml"
    config.write_text(f"""
[locky]
database_url = "sqlite:///{tmp_path / 'configured.sqlite'}"
host = "127.0.0.1"
port = {port}
workers = 1
bcrypt_rounds = 4
mail_dir = "{tmp_path / 'mail'}"
""")
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "locky.cli.main", "serve", "--config", str(config)],
                                   cwd=tmp_path, env=clean_env(), stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    running = ServerProcess(url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, running.log()
            try:
                if running.request("GET", "/v1/public/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, running.log()
            time.sleep(0.1)
        register_and_login(running, "configured@example.com")
    finally:
        stop(process)
    assert (tmp_path / "configured.sqlite").exists()
    json_lines(running.log())


# -- the generated secret ------------------------------------------------------------------


def test_sqlite_without_a_secret_makes_a_private_one(server, workdir):
    path = workdir / "locky.sqlite.secret"
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text().strip()
    assert len(secret.encode()) >= 32
    assert "generated a random secret" in server.log() and str(path) in server.log()
    assert secret not in server.log()


def test_the_generated_secret_is_reused_after_a_restart(tmp_path, no_locky_env):
    env = sqlite_env(tmp_path)
    # The same address after the restart: the tokens' issuer is http://<host>:<port> (docs/http/tokens.md).
    port = free_port()
    with locky_server(tmp_path, env=env, workers=2, port=port) as first:
        user, tokens = register_and_login(first, "restart@example.com")
        assert first.request("GET", "/v1/internal/users/me", headers=auth(tokens))[0] == 200
    secret = (tmp_path / "locky.sqlite.secret").read_text()
    with locky_server(tmp_path, env=env, workers=2, port=port) as second:
        assert (tmp_path / "locky.sqlite.secret").read_text() == secret
        for _ in range(4):
            status, _, body = second.request("GET", "/v1/internal/users/me", headers=auth(tokens))
            assert status == 200 and body == user
        status, _, refreshed = second.request("POST", "/v1/public/users/refresh",
                                              {"refresh_token": tokens["refresh_token"]})
        assert status == 200 and refreshed["user"] == user
        assert "generated a random secret" not in second.log()


def test_a_given_secret_is_used_and_no_file_is_written(tmp_path, no_locky_env):
    env = sqlite_env(tmp_path, LOCKY_JWT_SECRET="given-secret-for-the-serve-test-0123456789")
    with locky_server(tmp_path, env=env, workers=1) as running:
        register_and_login(running, "given@example.com")
    assert not (tmp_path / "locky.sqlite.secret").exists()


# -- refusing to start ---------------------------------------------------------------------


def _refuses(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = cli(*args, env=env, cwd=cwd, timeout=60)
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("command", ["check", "serve"])
def test_postgres_without_a_secret_refuses_to_start(tmp_path, command):
    env = clean_env(LOCKY_DATABASE_URL="postgres://locky:pw@127.0.0.1:1/locky")
    args = [command] + (["--host", "127.0.0.1", "--port", str(free_port())] if command == "serve" else [])
    stderr = _refuses(args, env, tmp_path)
    assert "LOCKY_JWT_SECRET" in stderr and "required" in stderr
    assert not list(tmp_path.glob("*.secret"))


@pytest.mark.parametrize("command", ["check", "serve"])
def test_a_secret_under_32_bytes_refuses_to_start(tmp_path, command):
    env = clean_env(LOCKY_DATABASE_URL=f"sqlite:///{tmp_path / 'short.sqlite'}", LOCKY_JWT_SECRET="too-short-secret")
    args = [command] + (["--host", "127.0.0.1", "--port", str(free_port())] if command == "serve" else [])
    stderr = _refuses(args, env, tmp_path)
    assert "LOCKY_JWT_SECRET" in stderr and "32" in stderr
    assert "too-short-secret" not in stderr


def test_an_unknown_provider_refuses_to_start(tmp_path):
    env = clean_env(LOCKY_DATABASE_URL=f"sqlite:///{tmp_path / 'p.sqlite'}", LOCKY_STORAGE="nosuch")
    stderr = _refuses(["check"], env, tmp_path)
    assert "nosuch" in stderr and "pony" in stderr


# -- operator commands ---------------------------------------------------------------------


def test_locky_spec_prints_the_served_document(server, workdir):
    done = cli("spec", env=clean_env(**sqlite_env(workdir)), cwd=workdir)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    status, _, served = server.request("GET", "/swagger/doc.json")
    assert status == 200
    assert printed == served
    assert (printed["swagger"], printed["info"]["title"], printed["info"]["version"]) == ("2.0", "Locky API", "1.0.0")


def test_the_locky_command_is_installed():
    locky = shutil.which("locky")
    if locky is None:
        pytest.skip("the locky console script is not on PATH")
    done = subprocess.run([locky, "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    for command in ("serve", "spec", "grant-admin"):
        assert command in done.stdout


def test_grant_admin_takes_effect_in_the_running_workers(server, workdir):
    boss, boss_tokens = register_and_login(server, "boss@example.com")
    other, _ = register_and_login(server, "other@example.com")
    rename = lambda name: server.request(  # noqa: E731
        "PUT", f"/v1/private/users/{other['id']}", {"name": name}, headers=auth(boss_tokens))
    assert rename("Before")[0] == 403

    done = cli("grant-admin", " BOSS@example.com ", env=clean_env(**sqlite_env(workdir)), cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "boss@example.com" in done.stdout

    # The same token, no new login; every worker answers with the new policy.
    for n in range(6):
        status, _, body = rename(f"Renamed {n}")
        assert status == 200, body
        assert body["name"] == f"Renamed {n}"

    done = cli("revoke-admin", "boss@example.com", env=clean_env(**sqlite_env(workdir)), cwd=workdir)
    assert done.returncode == 0, done.stderr
    for _ in range(6):
        assert rename("After")[0] == 403


def test_grant_admin_of_an_unknown_email_fails(workdir, server):
    done = cli("grant-admin", "nobody-at-all@example.com", env=clean_env(**sqlite_env(workdir)), cwd=workdir)
    assert done.returncode != 0
    assert "nobody-at-all@example.com" in done.stderr


def test_body_rules_hold_over_real_http(server):
    import urllib.error
    import urllib.request

    def post(data: bytes | None, content_type: str | None):
        req = urllib.request.Request(server.url + "/v1/public/users/register", data=data, method="POST")
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    assert post(b"name=x", "text/plain")[0] == 415
    status, body = post(None, None)
    assert (status, set(body)) == (400, {"body"})
    status, body = post(b"[]", "application/json")
    assert (status, set(body)) == (400, {"body"})
    status, body = post(b'{"name": "' + b"x" * (64 * 1024) + b'"}', "application/json")
    assert status == 413 and body["title"] == "413 Content Too Large"
