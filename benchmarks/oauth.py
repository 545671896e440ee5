"""What the OpenID provider's token side costs (docs/http/oauth.md): grants per second
and CPU per grant on a real ``locky serve``, beside Keycloak's published sizing.

    python -m benchmarks.oauth                          # SQLite, 5 s per scenario
    python -m benchmarks.oauth --engines sqlite,postgres --seconds 10
    python -m benchmarks.oauth --seconds 2 --rounds 1   # a few seconds: does it still run?

One ``locky serve --workers 2`` (SQLite in a temporary directory, or a scratch database
``locky_bench_oauth`` on the PostgreSQL / MariaDB servers of ``--postgres-url`` /
``--mysql-url``, dropped afterwards), a confidential first-party client with every grant, a user signed in
once through the sign-in page (its OP session cookie kept), then ``wrk`` (a separate C
process, ``-t2 -c16``) drives each scenario in turn:

- ``client_credentials``: ``POST /oauth/token`` with ``client_secret_basic``, each
  request a grant (a signed access token and its audit event);
- ``refresh_token``: 64 login chains (code flows made beforehand with
  ``offline_access``); each request spends a chain's newest refresh token and the Lua
  script keeps the rotated one for that chain's next request, so no token is ever sent
  twice (a reuse would end its chain: counted as lost);
- authorization-code round trips: ``GET /oauth/authorize?prompt=none`` with the OP
  session cookie (the code issued at once, consent not asked: first party), then
  ``POST /oauth/token`` exchanging that code with its PKCE verifier (an ID token signed
  RS256, an access token, a login stored): one round trip is both requests;
- introspection: ``POST /v1/internal/tokens/introspect`` (RFC 7662) of 64 users' access
  tokens in turn, the client authenticating with ``client_secret_basic``.

For each: requests/s, grants/s (successful ones only, counted by the Lua script from
the answers), p50/p99, errors, and the server's CPU per grant: user + system CPU seconds
of the gunicorn master and workers over the run (``/proc/PID/stat``) divided by the
grants, and its inverse, grants per CPU-second, i.e. per fully used core. Beside it,
Keycloak's sizing guide ("Concepts for sizing CPU and memory resources": one vCPU per
120 client-credential grants/s and per 120 refresh-token requests/s) as a ratio per
core; issue 33 aims for 10x. Keycloak publishes no figure for code round trips or
introspection: those print without a ratio. ``wrk`` shares the machine's cores with the
server: grants per CPU-second is the steadier figure on a busy machine. A script, not a test.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html.parser
import http.cookiejar
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

from tests.support.server import locky_server

from . import load

ADMIN, USER, PASSWORD = "admin@bench.example.com", "user@bench.example.com", "oauth benchmark password 1"
REDIRECT_URI = "http://127.0.0.1:9/callback"  # nothing listens: the code is read from the Location
SECRET = "oauth-benchmark-secret-0123456789-abcdefghijkl"
WORKERS = 2
#: Keycloak's sizing guide: grants per second one vCPU serves.
KEYCLOAK_PER_VCPU = {"client_credentials": 120, "refresh_token": 120}
CHAINS = 64
DB_NAME = "locky_bench_oauth"


@dataclass
class Row:
    name: str
    rps: float
    grants: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_ms_per_grant: float
    grants_per_cpu_second: float
    keycloak: int | None

    def line(self) -> str:
        ratio = f"{self.grants_per_cpu_second / self.keycloak:6.1f}x" if self.keycloak else "     -"
        keycloak = f"{self.keycloak:>9}" if self.keycloak else f"{'-':>9}"
        return (f"{self.name:<42} {self.rps:>8.0f} {self.grants:>8.0f} {self.p50_ms:>7.2f} {self.p99_ms:>7.2f}"
                f" {self.errors:>6} {self.cpu_ms_per_grant:>9.2f} {self.grants_per_cpu_second:>9.0f} {keycloak} {ratio}")


HEADER = (f"{'scenario':<42} {'req/s':>8} {'grants/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}"
          f" {'CPU ms/gr':>9} {'gr/CPU-s':>9} {'Keycloak':>9} {'ratio':>6}")


# -- the browser and the client, over HTTP ---------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class _Forms(html.parser.HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.forms: list[dict] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "hidden": {}, "names": set()})
        elif tag in ("input", "button") and self.forms and a.get("name"):
            self.forms[-1]["names"].add(a["name"])
            if a.get("type") == "hidden":
                self.forms[-1]["hidden"][a["name"]] = a.get("value", "")


class Browser:
    """Cookies kept, redirects not followed: where each answer points is read instead."""

    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect(),
                                                  urllib.request.HTTPCookieProcessor(self.jar))

    def open(self, url: str, form: dict | None = None, headers: dict | None = None) -> tuple[int, Message, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(url, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as answer:
                return answer.status, answer.headers, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read().decode()

    def cookie(self, name: str) -> str:
        return next(c.value for c in self.jar if c.name == name)


def _basic(client: dict) -> str:
    return "Basic " + base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def authorize_path(client: dict, verifier: str, scope: str, prompt: str | None = "none") -> str:
    query = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT_URI, "scope": scope,
             "state": "bench", "code_challenge": _challenge(verifier), "code_challenge_method": "S256"}
    if prompt:
        query["prompt"] = prompt
    return "/oauth/authorize?" + urllib.parse.urlencode(query)


def _code(location: str) -> str:
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    if "code" not in query:
        raise RuntimeError(f"no code in the redirect: {location}")
    return query["code"]


def sign_in(url: str, client: dict) -> Browser:
    """A browser signed in at Locky (its OP session cookie set) through the sign-in page."""
    browser = Browser()
    verifier = secrets.token_urlsafe(48)
    status, _, page = browser.open(url + authorize_path(client, verifier, "openid", prompt=None))
    form = next((f for f in _Forms(page).forms if {"email", "password"} <= f["names"]), None)
    if status != 200 or form is None:
        raise RuntimeError(f"no sign-in page ({status}): {page[:300]}")
    status, headers, page = browser.open(urllib.parse.urljoin(url + "/oauth/authorize", form["action"]),
                                         {**form["hidden"], "email": USER, "password": PASSWORD})
    if status not in (302, 303):
        raise RuntimeError(f"the sign-in did not redirect ({status}): {page[:300]}")
    _code(headers["Location"])
    return browser


def code_login(url: str, browser: Browser, client: dict, scope: str) -> dict:
    """One silent code flow of the signed-in browser: the token answer."""
    verifier = secrets.token_urlsafe(48)
    status, headers, page = browser.open(url + authorize_path(client, verifier, scope))
    if status not in (302, 303):
        raise RuntimeError(f"prompt=none did not redirect ({status}): {page[:300]}")
    status, _, body = browser.open(url + "/oauth/token", {
        "grant_type": "authorization_code", "code": _code(headers["Location"]), "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier}, headers={"Authorization": _basic(client)})
    if status != 200:
        raise RuntimeError(f"code exchange: {status} {body}")
    return json.loads(body)


# -- wrk scripts -------------------------------------------------------------------------------

#: Counts of the successful grants, kept per wrk thread and printed by done() in the main thread.
_COUNTING = """
local threads = {}
local made = 0
function setup(thread)
  made = made + 1
  thread:set("id", made)
  table.insert(threads, thread)
end
ok, lost = 0, 0
function done(summary, latency, requests)
  local total_ok, total_lost = 0, 0
  for _, t in ipairs(threads) do
    total_ok = total_ok + t:get("ok")
    total_lost = total_lost + t:get("lost")
  end
  io.write(string.format("LOCKY_GRANTS %d\\nLOCKY_LOST %d\\n", total_ok, total_lost))
end
"""


def _lua(value) -> str:
    if isinstance(value, list):
        return "{" + ",".join(_lua(v) for v in value) + "}"
    return json.dumps(value)


def client_credentials_script(client: dict) -> str:
    return _COUNTING + f"""
local headers = {{["Content-Type"] = "application/x-www-form-urlencoded", ["Authorization"] = {_lua(_basic(client))}}}
function request()
  return wrk.format("POST", "/oauth/token", headers, "grant_type=client_credentials")
end
function response(status, headers, body)
  if status == 200 and string.find(body, '"access_token"', 1, true) then ok = ok + 1 end
end
"""


def refresh_script(client: dict, tokens: list[str], threads: int) -> str:
    return _COUNTING + f"""
local headers = {{["Content-Type"] = "application/x-www-form-urlencoded", ["Authorization"] = {_lua(_basic(client))}}}
local tokens = {_lua(tokens)}
local pool = nil
function request()
  if pool == nil then
    pool = {{}}
    for i = id, #tokens, {threads} do table.insert(pool, tokens[i]) end
  end
  local token = table.remove(pool)
  if token == nil then lost = lost + 1; token = "none" end
  return wrk.format("POST", "/oauth/token", headers, "grant_type=refresh_token&refresh_token=" .. token)
end
function response(status, headers, body)
  local token = status == 200 and string.match(body, '"refresh_token"%s*:%s*"([^"]+)"')
  if token then table.insert(pool, token); ok = ok + 1 elseif status ~= 200 then lost = lost + 1 end
end
"""


def code_round_trip_script(client: dict, cookie: str, verifier: str) -> str:
    form = "grant_type=authorization_code&redirect_uri=" + urllib.parse.quote(REDIRECT_URI, safe="") \
        + "&code_verifier=" + verifier + "&code="
    return _COUNTING + f"""
local authorize = {_lua(authorize_path(client, verifier, "openid"))}
local browser = {{["Cookie"] = {_lua("locky_op=" + cookie)}}}
local headers = {{["Content-Type"] = "application/x-www-form-urlencoded", ["Authorization"] = {_lua(_basic(client))}}}
local codes = {{}}
function request()
  local code = table.remove(codes)
  if code then return wrk.format("POST", "/oauth/token", headers, {_lua(form)} .. code) end
  return wrk.format("GET", authorize, browser)
end
function response(status, headers, body)
  if status == 302 or status == 303 then
    local code = string.match(headers["Location"] or headers["location"] or "", "[?&]code=([^&]+)")
    if code then table.insert(codes, code) else lost = lost + 1 end
  elseif status == 200 and string.find(body, '"id_token"', 1, true) then
    ok = ok + 1
  else
    lost = lost + 1
  end
end
"""


def introspection_script(client: dict, tokens: list[str]) -> str:
    return _COUNTING + f"""
local headers = {{["Content-Type"] = "application/x-www-form-urlencoded", ["Authorization"] = {_lua(_basic(client))}}}
local tokens = {_lua(tokens)}
local i = 0
function request()
  i = i + 1
  return wrk.format("POST", "/v1/internal/tokens/introspect", headers, "token=" .. tokens[(i % #tokens) + 1])
end
function response(status, headers, body)
  if status == 200 and string.find(body, '"active": *true') then ok = ok + 1 else lost = lost + 1 end
end
"""


# -- measuring --------------------------------------------------------------------------------


def run_wrk(name: str, url: str, script: str, seconds: float, connections: int, threads: int,
            master_pid: int, keycloak: int | None, ) -> Row:
    """One wrk run of ``script``; the grants are what its Lua counted as successful."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        lua = f.name
    before = load.cpu_seconds(master_pid)
    try:
        out = subprocess.run([load.need_wrk(), f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
                              "--timeout=10s", "--latency", "-s", lua, url],
                             capture_output=True, text=True, timeout=seconds + 60)
    finally:
        Path(lua).unlink(missing_ok=True)
    after = load.cpu_seconds(master_pid)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr}\n{out.stdout}")
    result = load.parse(name, out.stdout)
    grants = int(_field(out.stdout, "LOCKY_GRANTS"))
    lost = int(_field(out.stdout, "LOCKY_LOST"))
    cpu = load.cpu_spent(before, after)
    grants_per_s = grants / result.seconds if result.seconds else 0.0
    return Row(name, result.rps, grants_per_s, result.p50_ms, result.p99_ms, result.errors + lost,
               cpu * 1000 / grants if grants else float("nan"), grants / cpu if cpu else 0.0, keycloak)


def _field(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return line.split()[1]
    raise RuntimeError(f"wrk printed no {name}:\n{text}")


def merge(rows: list[Row]) -> Row:
    """Rounds of one scenario as one row: medians."""
    def median(attribute: str) -> float:
        return statistics.median(getattr(r, attribute) for r in rows)
    return Row(rows[0].name, median("rps"), median("grants"), median("p50_ms"), median("p99_ms"),
               sum(r.errors for r in rows), median("cpu_ms_per_grant"), median("grants_per_cpu_second"),
               rows[0].keycloak)


# -- the run ----------------------------------------------------------------------------------


def database(engine: str, workdir: Path, args, name: str = DB_NAME) -> str | None:
    """The scratch database of ``engine``, or ``None`` (with the reason logged) when its server does not answer."""
    from .run import prepare_database, unreachable

    server = {"sqlite": "", "postgres": args.postgres_url, "mysql": args.mysql_url}[engine]
    why = server and unreachable(server)
    if why:
        print(f"[{engine}] skipped: {why}", file=sys.stderr)
        return None
    return prepare_database(engine, workdir, server, name)


def drop(engine: str, args, name: str = DB_NAME) -> None:
    """Drop the scratch database of a server engine (its server stopped)."""
    from .run import drop_databases

    if engine != "sqlite":
        drop_databases(engine, {"postgres": args.postgres_url, "mysql": args.mysql_url}[engine], [name])


def bench(engine: str, database_url: str, workdir: Path, args, log) -> list[Row]:
    env = {"LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": SECRET, "LOCKY_ADMIN_EMAILS": ADMIN,
           "LOCKY_BCRYPT_ROUNDS": "4", "LOCKY_LOG_REQUESTS": "false"}
    with locky_server(workdir, env=env, workers=WORKERS) as server:
        admin = server.sign_up(ADMIN, PASSWORD, verify=True)
        server.sign_up(USER, PASSWORD)
        status, _, client = server.request("POST", "/v1/private/oauth/clients", {
            "name": "Benchmark app", "type": "confidential", "redirect_uris": [REDIRECT_URI], "first_party": True,
            "grant_types": ["authorization_code", "refresh_token", "client_credentials"]}, headers=admin)
        if status != 201:
            raise RuntimeError(f"client registration: {status} {client}")
        log(f"[{engine}] signing in and making {CHAINS} logins ...")
        browser = sign_in(server.url, client)
        logins = [code_login(server.url, browser, client, "openid offline_access") for _ in range(CHAINS)]
        refresh_tokens = [login["refresh_token"] for login in logins]
        access_tokens = [login["access_token"] for login in logins]
        verifier = secrets.token_urlsafe(48)
        pid = server.process.pid
        scenarios = [
            ("client_credentials grants", client_credentials_script(client), KEYCLOAK_PER_VCPU["client_credentials"]),
            ("refresh_token grants", None, KEYCLOAK_PER_VCPU["refresh_token"]),
            ("code round trips (authorize+token)", code_round_trip_script(client, browser.cookie("locky_op"), verifier),
             None),
            ("introspections", introspection_script(client, access_tokens), None),
        ]
        load.run("warm-up", server.url, client_credentials_script(client), seconds=1, connections=4)
        rows: dict[str, list[Row]] = {name: [] for name, _, _ in scenarios}
        for round_ in range(args.rounds):
            for name, script, keycloak in scenarios:
                if script is None:  # refresh chains are spent as they go: fresh ones each round
                    script = refresh_script(client, refresh_tokens, args.threads)
                row = run_wrk(f"{engine}: {name}", server.url, script, args.seconds, args.connections, args.threads,
                              pid, keycloak)
                rows[name].append(row)
                log(row.line())
                if name.startswith("refresh"):
                    refresh_tokens = [code_login(server.url, browser, client, "openid offline_access")["refresh_token"]
                                      for _ in range(CHAINS)]
        return [merge(r) for r in rows.values()]


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark of one ``locky serve`` under wrk: load, the database
    servers' addresses, where its files go and where the rows are written."""
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--postgres-url", default=os.environ.get("LOCKY_BENCH_POSTGRES_URL",
                                                                 "postgres://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--mysql-url", default=os.environ.get("LOCKY_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"))
    parser.add_argument("--workdir", help="where databases and server logs go (default: a temporary directory)")
    parser.add_argument("--json", help="also write the rows to this file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.oauth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite", help="comma-separated: sqlite, postgres, mysql")
    parser.add_argument("--seconds", type=float, default=5, help="length of each measured wrk run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each scenario (the table shows medians)")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    load.need_wrk()
    if CHAINS < args.connections:
        raise SystemExit(f"--connections at most {CHAINS} (one refresh chain per connection at least)")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="locky-bench-oauth-")).resolve()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    cores = os.cpu_count() or 1
    log(f"workdir {workdir}; {cores} cores; wrk -t{args.threads} -c{args.connections}; {WORKERS} workers")
    load_before = os.getloadavg()[0]
    rows: list[Row] = []
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        url = database(engine, workdir, args)
        if url:
            try:
                rows += bench(engine, url, workdir / engine, args, log)
            finally:
                drop(engine, args)
    print("\n" + HEADER)
    print("-" * len(HEADER))
    for row in rows:
        print(row.line())
    print(f"\nCPU ms/gr: the server's CPU (master and {WORKERS} workers, user + system) per successful grant;"
          f" gr/CPU-s: grants per CPU-second, i.e. per fully used core. Keycloak: its sizing guide's grants/s"
          f" per vCPU; ratio: gr/CPU-s over it (issue 33 aims for 10x). A code round trip is two requests.")
    print(f"load average (1 min) at start {load_before:.2f}, at end {os.getloadavg()[0]:.2f} on {cores} cores"
          " (wrk and other processes share them)")
    if args.json:
        Path(args.json).write_text(json.dumps([row.__dict__ for row in rows], indent=2))
    return 0 if rows and all(row.errors == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
