"""``python -m benchmarks.server_guarantees``: which of the hardening guarantees each
candidate HTTP server keeps when it serves the same Locky app, probed over raw sockets;
and how fast each is (the speed half is ``benchmarks/servers.py``'s).

    python -m benchmarks.server_guarantees                    # every candidate
    python -m benchmarks.server_guarantees --only "locky serve" --speed 0

Candidates (2 workers of 1 thread each, SQLite unless a probe says otherwise):

- ``locky serve``: as shipped (gunicorn with Locky's worker, ``locky/cli/worker.py``);
- ``granian wsgi``: granian's WSGI interface serving ``benchmarks.granian_apps:locky``, as
  ``benchmarks/servers.py`` runs it (HTTP auto-detected, one blocking thread);
- ``granian wsgi + start_app``: the same speaking HTTP/1 only, the app built by Locky's
  ``start_app`` (503 while the database is away, ``locky/cli/worker.py``) through
  ``--factory``: what Locky could add around granian in its own code;
- ``granian wsgi + start_app + respawn``: the same, with ``--respawn-failed-workers`` (a
  worker that dies is replaced, instead of the whole server exiting);
- ``waitress``: when installed (one process, 2 threads, the app as ``start_app`` builds it).

What each probe checks, and what ``tests/hardening`` expects of ``locky serve``:

- malformed requests: refused with the contract's JSON (a 400 is ``{"request": ...}``, any
  other status ``{"title", "description"}``; ``test_service_resilience.py``), not the
  server's own text;
- one parser: a request whose framing is ambiguous (Content-Length and Transfer-Encoding,
  two lengths, an obfuscated coding) is refused or answered and closed, never read as two
  requests (the second, ``GET /smuggled``, would be answered 404);
- slow and idle clients: 32 heads trickling a byte a second (8 of them next requests on
  kept-alive connections) and 32 idle connections, then 16 bodies trickling (by length
  and chunked): far more than workers x threads, while health on new connections answers
  within 2 s (``test_service_resilience.py``);
- bounded bodies: a body over ``LOCKY_MAX_BODY_BYTES`` refused 413 in JSON before it has
  come (``test_request_framing.py``);
- outages, on PostgreSQL behind ``tests/proxy.py``: started while the database refuses
  connections, and a worker killed and replaced during an outage
  (``test_service_resilience.py``): the server stays up, health answers 503
  ``{"status": "unavailable"}``, then 200 once the database is back;
- graceful restart: SIGHUP while requests are in flight (kept-alive, new connections,
  bcrypt logins), three times: none of them lost, every worker replaced.

Each server's own 400s, 413s ... are looked at over raw sockets; the table's cells say
``kept`` or ``NOT kept`` and what happened; details follow the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.support.server import free_port, stop

from .run import DEFAULT_PG, ISSUER, ROOT, SECRET, prepare_database, unreachable

WORKERS = 2
LIMIT = 2048  # LOCKY_MAX_BODY_BYTES of every server here (the smallest allowed is 1024)
HEALTH_PATH = "/v1/public/health"
HEALTH = b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n\r\n"
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
LOGIN = b"POST /v1/public/users/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
PG_DATABASE = "locky_guarantees"


# -- candidates -------------------------------------------------------------------


@dataclass
class Candidate:
    name: str
    #: The command serving on a port.
    command: Callable[[int], list[str]]

    def start(self, workdir: Path, env: dict[str, str], *, wait: bool = True, timeout: float = 60) -> "Running":
        port = free_port()
        log_path = workdir / f"{self.name.replace(' ', '_').replace(',', '')}-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(self.command(port), cwd=ROOT, env={**os.environ, **env}, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        running = Running(self, process, port, log_path)
        if wait:
            running.wait_ready(timeout)
        return running


@dataclass
class Running:
    candidate: Candidate
    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def health(self, timeout: float = 3.0) -> tuple[int, object]:
        """Status and JSON body of GET health (raises OSError when nothing answers)."""
        try:
            with urllib.request.urlopen(self.url + HEALTH_PATH, timeout=timeout) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _json(err.read())

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.candidate.name} exited with {self.process.returncode}:\n{self.log()[-2000:]}")
            try:
                if self.health()[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.candidate.name} did not answer in {timeout}s:\n{self.log()[-2000:]}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop(self.process)


def _locky_serve(port: int) -> list[str]:
    return [sys.executable, "-m", "locky.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(WORKERS)]


def _granian(*extra: str, target: str = "benchmarks.granian_apps:locky") -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "granian", "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
                "--workers", str(WORKERS), "--blocking-threads", "1", "--no-ws", "--log-level", "warning",
                *extra, target]
    return command


def _waitress(port: int) -> list[str]:
    return [sys.executable, "-m", "waitress", "--listen", f"127.0.0.1:{port}", "--threads", str(WORKERS),
            "--call", "benchmarks.server_guarantees:starting_app"]


def starting_app():
    """The Locky app from the ``LOCKY_*`` environment as ``locky serve``'s workers build
    it: 503 while the database is away (``locky.cli.worker.start_app``)."""
    from locky.app import create_app
    from locky.cli.worker import start_app
    from locky.settings import Settings

    settings = Settings.load()
    return start_app(lambda: create_app(settings))


def candidates() -> list[Candidate]:
    found = [Candidate("locky serve", _locky_serve)]
    if importlib.util.find_spec("granian") is not None:
        found += [
            Candidate("granian wsgi", _granian()),
            Candidate("granian wsgi + start_app", _granian(
                "--http", "1", "--factory", target="benchmarks.server_guarantees:starting_app")),
            Candidate("granian wsgi + start_app + respawn", _granian(
                "--http", "1", "--factory", "--respawn-failed-workers", "--respawn-interval", "1",
                target="benchmarks.server_guarantees:starting_app")),
        ]
    if importlib.util.find_spec("waitress") is not None:
        found.append(Candidate("waitress", _waitress))
    return found


# -- raw HTTP ---------------------------------------------------------------------


def _json(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        return None


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def is_contract_error(self) -> bool:
        """The contract's JSON error: a 400 is a field map, any other status
        ``{"title", "description"}``; JSON with ``nosniff`` and a request id."""
        if not self.headers.get("content-type", "").startswith("application/json"):
            return False
        document = _json(self.body)
        if not isinstance(document, dict) or not document:
            return False
        if self.status == 400:
            shaped = all(isinstance(v, str) for v in document.values())
        else:
            shaped = "title" in document and set(document) <= {"title", "description"} and str(
                document["title"]).startswith(str(self.status))
        return shaped and self.headers.get("x-content-type-options") == "nosniff"

    def describe(self) -> str:
        kind = self.headers.get("content-type", "no content-type").split(";")[0]
        text = self.body[:40].decode("latin-1").replace("\r", "").replace("\n", " ")
        return f"{self.status} {kind} {text!r}" if self.body else f"{self.status} {kind}, empty"


@dataclass
class Exchange:
    answers: list[Answer]
    closed: bool  # the server ended the connection
    seconds: float  # until the first answer (or the end)
    error: str = ""

    def describe(self) -> str:
        if self.error:
            return self.error
        if not self.answers:
            return "closed, no answer" if self.closed else "no answer"
        return "; ".join(a.describe() for a in self.answers) + ("" if self.closed else " (kept open)")


def parse_answers(data: bytes, closed: bool) -> list[Answer]:
    answers = []
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            break
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body, rest = _dechunk(rest)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            body, rest = rest[:length], rest[length:]
        elif status < 200 or status in (204, 304):
            body = b""
        else:
            body, rest = rest, b""
        answers.append(Answer(status, headers, body))
        data = rest
        if status == 100:
            answers.pop()
    return answers


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    body = b""
    while True:
        line, sep, rest = data.partition(b"\r\n")
        if not sep:
            return body, b""
        size = int(line.split(b";")[0] or b"0", 16)
        if size == 0:
            return body, rest.partition(b"\r\n")[2]
        body, data = body + rest[:size], rest[size + 2:]


def exchange(port: int, data: bytes, *, quiet: float = 0.8, limit: float = 5.0) -> Exchange:
    """Send ``data`` on a new connection; read until the server closes, says nothing for
    ``quiet`` seconds after its last bytes, or ``limit`` passes."""
    started = time.monotonic()
    received, closed, first = b"", False, None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=limit) as sock:
            sock.sendall(data)
            while time.monotonic() - started < limit:
                sock.settimeout(quiet if received else limit)
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    break
                except ConnectionResetError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                first = first or time.monotonic() - started
                received += chunk
    except OSError as exc:
        return Exchange([], True, time.monotonic() - started, f"{type(exc).__name__}")
    return Exchange(parse_answers(received, closed), closed, first or time.monotonic() - started)


# -- probes -------------------------------------------------------------------------


@dataclass
class Verdict:
    kept: bool | None  # None: not measured
    summary: str
    details: list[str] = field(default_factory=list)

    def cell(self) -> str:
        if self.kept is None:
            return f"n/a ({self.summary})" if self.summary else "n/a"
        return ("kept" if self.kept else "NOT kept") + (f": {self.summary}" if self.summary else "")


#: (what, request): each should be refused with the contract's JSON error.
MALFORMED = [
    ("not HTTP", b"BROKEN\r\n\r\n"),
    ("NUL in the target", b"GET /v1/public/\x00health HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("header line without a colon", b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n"),
    ("control byte in a header value", b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n"),
    ("missing Host on HTTP/1.1", b"GET /v1/public/health HTTP/1.1\r\n\r\n"),
    ("Content-Length abc", LOGIN + b"Content-Length: abc\r\n\r\n{}"),
    ("Content-Length -1", LOGIN + b"Content-Length: -1\r\n\r\n{}"),
    ("obs-fold (a folded header line)", b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"),
    ("bare LF line ends", b"GET /v1/public/health HTTP/1.1\nHost: x\n\n"),
    ("request line over 8 KiB (414)", b"GET /v1/public/health?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("header field of 20 KB (431)", b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"),
    ("chunk size not hex", LOGIN + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
]

#: (what, request): ambiguous framing with ``GET /smuggled`` inside; answering that
#: request (404) means the server read one message as two.
SMUGGLING = [
    ("CL.TE: Content-Length and chunked",
     LOGIN + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % (5 + len(SMUGGLED)) + b"0\r\n\r\n" + SMUGGLED),
    ("TE.CL: chunked and a short Content-Length",
     LOGIN + b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
     + b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"),
    ("two different Content-Lengths",
     LOGIN + b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED),
    ("Transfer-Encoding: xchunked with Content-Length",
     LOGIN + b"Transfer-Encoding: xchunked\r\nContent-Length: %d\r\n\r\n" % (5 + len(SMUGGLED)) + b"0\r\n\r\n" + SMUGGLED),
    ("'Transfer-Encoding :' (space before the colon) with Content-Length",
     LOGIN + b"Transfer-Encoding : chunked\r\nContent-Length: %d\r\n\r\n" % (5 + len(SMUGGLED)) + b"0\r\n\r\n" + SMUGGLED),
    ("chunked, then identity",
     LOGIN + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\nContent-Length: %d\r\n\r\n"
     % (5 + len(SMUGGLED)) + b"0\r\n\r\n" + SMUGGLED),
]


def probe_malformed(server: Running) -> Verdict:
    details, plain, accepted, kinds = [], [], [], []
    for what, data in MALFORMED:
        result = exchange(server.port, data)
        first = result.answers[0] if result.answers else None
        if first is not None and first.is_contract_error():
            mark = "json"
        elif first is not None and first.status < 400:
            mark = "accepted"
            accepted.append(what)
        else:
            mark = "server's own"
            plain.append(what)
            kind = first.describe() if first is not None else result.describe()
            kinds += [kind] if kind not in kinds else []
        details.append(f"  {what:<40} {mark:<13} {result.describe()}")
    summary = f"{len(MALFORMED) - len(plain) - len(accepted)}/{len(MALFORMED)} JSON"
    if plain:
        summary += f"; {len(plain)} answered by the server itself ({' / '.join(kinds)})"
    if accepted:
        summary += f"; served as if valid: {', '.join(accepted)}"
    return Verdict(not plain, summary, details)


def probe_smuggling(server: Running) -> Verdict:
    details, desynced, not_json = [], [], []
    for what, data in SMUGGLING:
        result = exchange(server.port, data + HEALTH)
        smuggled = any(a.status == 404 for a in result.answers)
        if smuggled:
            desynced.append(what)
        refused = [a for a in result.answers if a.status in (400, 501)]
        if refused and not all(a.is_contract_error() for a in refused):
            not_json.append(what)
        mark = "DESYNC" if smuggled else ("refused" if refused else "one request")
        details.append(f"  {what:<40} {mark:<13} {result.describe()}")
    if desynced:
        return Verdict(False, f"read as two requests: {', '.join(desynced)}", details)
    summary = f"no desync in {len(SMUGGLING)} cases"
    if not_json:
        summary += f" (refusals not JSON: {len(not_json)})"
    return Verdict(True, summary, details)


class Trickler:
    """Clients sending their request a byte every ``every`` seconds, never finishing;
    each notes when the server ended its connection."""

    def __init__(self, port: int, every: float = 1.0):
        self.port, self.every = port, every
        self.stopping = threading.Event()
        self.socks: list[socket.socket] = []
        self.ended: dict[int, float] = {}
        self.started = time.monotonic()

    def add(self, prefix: bytes, trickle: bytes, *, answered_first: bytes = b"") -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if answered_first:  # kept alive after one answer
            sock.sendall(answered_first)
            sock.settimeout(5)
            sock.recv(65536)
        if prefix:
            sock.sendall(prefix)
        sock.setblocking(False)  # the trickle must never wait on the socket (see _open)
        index = len(self.socks)
        self.socks.append(sock)
        threading.Thread(target=self._run, args=(index, sock, trickle), daemon=True).start()

    def _run(self, index: int, sock: socket.socket, trickle: bytes) -> None:
        for byte in trickle:
            if self.stopping.wait(self.every):
                return
            try:
                sock.send(bytes([byte]))
            except BlockingIOError:
                continue
            except OSError:
                self.ended.setdefault(index, time.monotonic() - self.started)
                return
            if not _open(sock):
                self.ended.setdefault(index, time.monotonic() - self.started)
                return

    def close(self) -> None:
        self.stopping.set()
        for sock in self.socks:
            sock.close()


def _open(sock: socket.socket) -> bool:
    """Whether the server has not ended the connection (a non-blocking socket: looked at
    without waiting; an answer such as a 408 counts as ending it)."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


def health_probes(server: Running, count: int, timeout: float = 3.0) -> tuple[int, int, float]:
    """Of up to ``count`` health requests on new connections (stopping after 3 failures
    in a row): how many were tried, how many answered (200 or 503) within ``timeout``, and
    the slowest time."""
    tried, answered, failed, slowest = 0, 0, 0, 0.0
    while tried < count and failed < 3:
        tried += 1
        started = time.monotonic()
        try:
            ok = server.health(timeout)[0] in (200, 503)
        except OSError:
            ok = False
        answered += ok
        failed = 0 if ok else failed + 1
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.05)
    return tried, answered, slowest


def probe_slow_clients(server: Running, hold: float = 12.0) -> tuple[Verdict, Verdict]:
    """Heads (and idle connections), then bodies, trickling a byte a second; health on
    new connections meanwhile. The first verdict: heads and idle; the second: bodies."""
    verdicts = []
    for phase in ("heads", "bodies"):
        trickler = Trickler(server.port)
        idle: list[socket.socket] = []
        try:
            if phase == "heads":
                for _ in range(24):  # a head that never ends
                    trickler.add(b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n", b"X-Slow: " + b"a" * 200)
                for _ in range(8):  # kept alive after one answer, then a next request that never ends
                    trickler.add(b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n", b"X-Slow: " + b"a" * 200,
                                 answered_first=HEALTH)
                idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(32)]
                what = "32 heads trickling (8 on kept-alive connections) + 32 idle"
            else:
                for _ in range(8):  # a whole head, then a body that trickles
                    trickler.add(LOGIN + b"Content-Length: 900\r\n\r\n", b'{"email": "' + b"a" * 880)
                for _ in range(8):  # a whole head, then a chunked body that trickles
                    trickler.add(LOGIN + b"Transfer-Encoding: chunked\r\n\r\n", b"1\r\na\r\n" * 100)
                what = "16 bodies trickling (8 by length, 8 chunked)"
            time.sleep(1.5)
            tried, answered, slowest = health_probes(server, 20)
            remaining = hold - (time.monotonic() - trickler.started)
            if remaining > 0:
                time.sleep(remaining)  # how long the server lets a slow client hold a connection
            cut = sorted(trickler.ended.values())
        finally:
            trickler.close()
            for sock in idle:
                sock.close()
        held = f"{len(cut)}/{len(trickler.socks)} slow connections cut by the server" + (
            f" (after {cut[0]:.0f}-{cut[-1]:.0f} s)" if cut else f" within {time.monotonic() - trickler.started:.0f} s")
        kept = answered == tried == 20 and slowest < 2.0
        summary = f"{answered}/{tried} health answered, slowest {slowest:.2f} s" + (
            "" if tried == 20 else " (stopped after 3 failures)")
        verdicts.append(Verdict(kept, summary, [f"  {what}: {summary}; {held}"]))
        time.sleep(1.0)
    return verdicts[0], verdicts[1]


def probe_body_limit(server: Running) -> Verdict:
    """Bodies over LIMIT: announced by Content-Length (10 MB) and chunked (a first chunk
    of 8 KB), the first 8 KB sent; refused before the rest has come?"""
    big = 10_000_000
    cases = [("Content-Length: 10 MB", LOGIN + b"Content-Length: %d\r\n\r\n" % big, big),
             ("chunked, 8 KB chunk", LOGIN + b"Transfer-Encoding: chunked\r\n\r\n" + b"2000\r\n", 8192)]
    details, kept = [], True
    for what, head, size in cases:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(head + b"x" * min(size, 8192))
            sock.settimeout(2.0)
            started = time.monotonic()
            early = b""
            try:
                early = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                pass
            if early:
                answer = parse_answers(_read_rest(sock, early), True)
                ok = bool(answer) and answer[0].status == 413 and answer[0].is_contract_error()
                note = f"answered before the rest in {time.monotonic() - started:.2f} s: " + (
                    answer[0].describe() if answer else repr(early[:60]))
            else:  # send the whole body: what happens at the end?
                sent_at = time.monotonic()
                rest = (b"x" * (size - 8192)) if size > 8192 else b""
                trailer = b"" if what.startswith("Content") else b"\r\n0\r\n\r\n"
                try:
                    sock.settimeout(30)
                    sock.sendall(rest + trailer)
                    answer = parse_answers(_read_rest(sock, b""), True)
                except OSError as exc:
                    answer, note = [], f"{type(exc).__name__}"
                ok = False
                note = "no answer within 2 s; after the whole body (%d bytes, %.1f s): %s" % (
                    size, time.monotonic() - sent_at, answer[0].describe() if answer else "no answer")
        kept = kept and ok
        details.append(f"  {what:<24} {'ok' if ok else 'NOT':<4} {note}")
    return Verdict(kept, "413 JSON before the body has come" if kept else
                   "; ".join(d.strip() for d in details if " NOT " in d), details)


def _read_rest(sock: socket.socket, data: bytes, quiet: float = 1.0) -> bytes:
    sock.settimeout(quiet)
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            return data
        if not chunk:
            return data
        data += chunk


def probe_outage(candidate: Candidate, workdir: Path, env: dict[str, str], pg_url: str | None) -> tuple[Verdict, Verdict]:
    """PostgreSQL behind a proxy. At start: the proxy stopped (connections refused) when
    the server starts, then started. While running: the proxy stopped, a worker killed
    (SIGKILL) and replaced during the outage, then the proxy started again
    (``test_service_resilience.py``). Each: does the server stay up, answer health 503
    ``{"status": "unavailable"}`` and recover?"""
    if pg_url is None:
        return Verdict(None, "PostgreSQL not reachable"), Verdict(None, "PostgreSQL not reachable")
    from tests.proxy import proxy_to

    verdicts = []
    with proxy_to(pg_url) as proxy:
        for phase in ("at start", "worker restarted"):
            if phase == "at start":
                proxy.stop()
            server = candidate.start(workdir, {**env, "LOCKY_DATABASE_URL": proxy.url}, wait=phase != "at start")
            try:
                started = time.monotonic()
                if phase == "worker restarted":
                    proxy.stop()
                    _until_unavailable(server, 10)
                    workers = _children(server.process.pid)
                    if not workers:
                        time.sleep(2.0)
                        verdicts.append(_outage_verdict(server, proxy, started) if server.process.poll() is not None
                                        else Verdict(None, "one process: no worker to replace"))
                        continue
                    victim = workers[0]
                    os.kill(victim, signal.SIGKILL)
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline and server.process.poll() is None and (
                            victim in _children(server.process.pid) or len(_children(server.process.pid)) < WORKERS):
                        time.sleep(0.1)
                    time.sleep(1.0)
                    started = time.monotonic()
                verdicts.append(_outage_verdict(server, proxy, started))
            finally:
                server.stop()
                if proxy._listener is None:
                    proxy.start()
    return verdicts[0], verdicts[1]


def _until_unavailable(server: Running, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if server.health()[0] == 503:
                return
        except OSError:
            pass
        time.sleep(0.1)


def _outage_verdict(server: Running, proxy, started: float) -> Verdict:
    """Every health answer 503 (8 in a row, on new connections, whichever worker takes
    them) while the proxy is stopped; then, the proxy started, 200 again."""
    deadline, answers, health = started + 30, [], None
    while time.monotonic() < deadline and server.process.poll() is None and len(answers) < 8:
        try:
            health = server.health(timeout=5)
            answers.append(health)
        except OSError as exc:
            answers.clear()
            health = type(exc).__name__
        time.sleep(0.1)
    if server.process.poll() is not None:
        last = [line for line in server.log().splitlines() if line.strip()][-1:]
        return Verdict(False, f"the server exits ({server.process.returncode})",
                       [f"  exit {server.process.returncode}: {last[0][:200] if last else ''}"])
    if len(answers) < 8 or {status for status, _ in answers} != {503}:
        return Verdict(False, f"no steady 503 within 30 s (last: {health})")
    seen, body = time.monotonic() - started, answers[-1][1]
    proxy.start()
    back, recovered = time.monotonic(), None
    while time.monotonic() < back + 30 and server.process.poll() is None:
        try:
            if all(server.health()[0] == 200 for _ in range(8)):
                recovered = time.monotonic() - back
                break
        except OSError:
            pass
        time.sleep(0.2)
    summary = f"503 {json.dumps(body)}" + (f", 200 {recovered:.1f} s after the database is back"
                                            if recovered is not None else ", not recovered within 30 s")
    return Verdict(body == {"status": "unavailable"} and recovered is not None, summary,
                   [f"  steady 503 after {seen:.1f} s"])


def _rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0.0)


def _children(pid: int) -> list[int]:
    """The server's worker processes."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def probe_restart(server: Running, rounds: int = 3, limit: float = 15.0) -> Verdict:
    """``rounds`` graceful restarts (:func:`_restart`) one after another: any request lost?"""
    register = json.dumps({"name": "hup", "email": "hup@example.com", "password": "Restart-Pass-9x!"}).encode()
    _post(server, "/v1/public/users/register", register)
    details, lost_in, answered = [], 0, 0
    for round_ in range(rounds):
        if server.process.poll() is not None:
            break
        ok, summary, lost = _restart(server, limit)
        answered += ok
        lost_in += bool(lost)
        details.append(f"  restart {round_ + 1}: {summary}")
    done = len(details)
    summary = f"{answered} answered, requests lost in {lost_in}/{done} restarts" if lost_in else (
        f"{answered} answered in {done} restarts, none lost")
    if server.process.poll() is not None:
        summary += f"; the server exited ({server.process.returncode})"
    elif any("not all replaced" in line for line in details):
        summary += "; workers not all replaced"
    return Verdict(not lost_in and done == rounds and "not all replaced" not in summary, summary, details)


def _restart(server: Running, limit: float) -> tuple[int, str, dict[str, int]]:
    """Health requests on kept-alive and on new connections and slower logins (bcrypt)
    from 6 threads; SIGHUP to the server after 1.5 s; on until every worker is replaced
    (at most ``limit`` seconds), and a second more. How many answered, what happened, and
    the requests lost by kind."""
    counts: dict[str, int] = {}
    failed_at: list[float] = []
    lock = threading.Lock()
    stopping = threading.Event()
    login = json.dumps({"email": "hup@example.com", "password": "Restart-Pass-9x!"}).encode()

    def note(key: str) -> None:
        with lock:
            counts[key] = counts.get(key, 0) + 1
            if key != "ok":
                failed_at.append(time.monotonic())

    def kept_alive() -> None:
        import http.client
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        fresh = True
        while not stopping.is_set():
            try:
                connection.request("GET", HEALTH_PATH)
                response = connection.getresponse()
                response.read()
                note("ok" if response.status == 200 else f"status {response.status}")
                fresh = False
                if response.getheader("connection", "").lower() == "close":
                    connection.close()
                    fresh = True
            except OSError as exc:
                note(f"{'new' if fresh else 'kept-alive'} connection: {type(exc).__name__}")
                connection.close()
                fresh = True
                time.sleep(0.01)

    def new_each(path: str, body: bytes | None) -> Callable[[], None]:
        def loop() -> None:
            while not stopping.is_set():
                try:
                    status = _post(server, path, body) if body else server.health(10)[0]
                    note("ok" if status == 200 else f"status {status}")
                except OSError as exc:
                    note(f"new connection: {type(getattr(exc, 'reason', exc)).__name__}")
                    time.sleep(0.01)
        return loop

    before = _children(server.process.pid)
    threads = [threading.Thread(target=t, daemon=True) for t in
               (kept_alive, kept_alive, new_each(HEALTH_PATH, None), new_each(HEALTH_PATH, None),
                new_each("/v1/public/users/login", login), new_each("/v1/public/users/login", login))]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    hup = time.monotonic()
    os.kill(server.process.pid, signal.SIGHUP)
    replaced = None
    while time.monotonic() - hup < limit and server.process.poll() is None:
        after = _children(server.process.pid)
        if len(after) == WORKERS and not set(before) & set(after):
            replaced = time.monotonic() - hup
            break
        time.sleep(0.1)
    time.sleep(1.0)  # and a second of requests to the new workers
    stopping.set()
    for thread in threads:
        thread.join(15)
    lost = {k: v for k, v in counts.items() if k != "ok"}
    summary = f"{counts.get('ok', 0)} answered, " + (
        ", ".join(f"{v} {k}" for k, v in lost.items()) if lost else "none lost")
    if failed_at:
        summary += f" (from {min(failed_at) - hup:.1f} to {max(failed_at) - hup:.1f} s after the SIGHUP)"
    if server.process.poll() is not None:
        summary += f"; the server exited ({server.process.returncode})"
    elif replaced is None:
        summary += f"; workers not all replaced after {limit:.0f} s ({before} -> {_children(server.process.pid)})"
    else:
        summary += f"; workers replaced in {replaced:.1f} s"
    return counts.get("ok", 0), summary, lost


def _post(server: Running, path: str, body: bytes) -> int:
    request = urllib.request.Request(server.url + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as err:
        err.read()
        return err.code


def probe_speed(server: Running, seconds: float, seeded) -> Verdict:
    from . import load
    from .run import read_paths

    script = load.get_script(read_paths(seeded, "item"), seeded.tokens)
    load.run("warm-up", server.url, script, seconds=1)
    result = load.run(server.candidate.name, server.url, script, seconds=seconds)
    rss = sum(_rss_mb(pid) for pid in _children(server.process.pid) or [server.process.pid])
    return Verdict(None, f"{result.rps:,.0f} req/s, p99 {result.p99_ms:.1f} ms, {rss:.0f} MB"
                   + (f", {result.errors} errors" if result.errors else ""))


# -- the run --------------------------------------------------------------------------

ROWS = ["malformed requests: contract JSON", "one parser: no smuggling", "slow heads + idle clients",
        "slow bodies", "bounded bodies", "database away at start (PostgreSQL)",
        "worker restarted during an outage (PostgreSQL)", "graceful restart (SIGHUP)",
        "speed: item read (wrk -c32)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server_guarantees",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="a candidate's name (repeatable)")
    parser.add_argument("--speed", type=float, default=3, help="seconds of the wrk run (0: none)")
    parser.add_argument("--skip", action="append", default=[], help="a row's first word to skip (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the servers' logs (the folder is printed)")
    args = parser.parse_args(argv)
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731

    workdir = Path(tempfile.mkdtemp(prefix="locky-guarantees-")).resolve()
    database_url = prepare_database("sqlite", workdir, "")
    env = {"LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": SECRET, "LOCKY_JWT_ISSUER": ISSUER,
           "LOCKY_MAX_BODY_BYTES": str(LIMIT), "LOCKY_DB_TIMEOUT": "2", "LOCKY_BCRYPT_ROUNDS": "10",
           "LOCKY_LOG_REQUESTS": "false", "LOCKY_MAIL_DIR": str(workdir / "mail")}
    seeded = None
    if args.speed:
        from locky.settings import Settings

        from . import seed

        log("seeding ...")
        settings = Settings.load(environ={}, database_url=database_url, jwt_secret=SECRET, jwt_issuer=ISSUER)
        seeded = seed.seed(settings, users=500, groups=100, memberships=1000)
    pg_url = None
    if "outage" not in args.skip and unreachable(DEFAULT_PG) is None:
        from .run import _recreate_postgres

        pg_url = _recreate_postgres(DEFAULT_PG, PG_DATABASE)

    chosen = [c for c in candidates() if not args.only or c.name in args.only]
    table: dict[str, dict[str, Verdict]] = {}
    for candidate in chosen:
        log(f"== {candidate.name}")
        verdicts = table.setdefault(candidate.name, {})

        def measure(row: str, probe: Callable[[], Verdict]) -> None:
            if row.split()[0].rstrip(":") in args.skip:
                return
            try:
                verdicts[row] = probe()
            except Exception as exc:  # noqa: BLE001 - a probe that breaks says so in its cell
                verdicts[row] = Verdict(False, f"probe failed: {type(exc).__name__}: {exc}"[:200])
            log(f"   {row}: {verdicts[row].cell()}")

        server = candidate.start(workdir, env)
        try:
            measure(ROWS[0], lambda: probe_malformed(server))
            measure(ROWS[1], lambda: probe_smuggling(server))
            slow: list[Verdict] = []
            measure(ROWS[2], lambda: slow.extend(probe_slow_clients(server)) or slow[0])
            if slow:
                verdicts[ROWS[3]] = slow[1]
                log(f"   {ROWS[3]}: {slow[1].cell()}")
            measure(ROWS[4], lambda: probe_body_limit(server))
            if args.speed:
                measure(ROWS[8], lambda: probe_speed(server, args.speed, seeded))
            measure(ROWS[7], lambda: probe_restart(server))
        finally:
            server.stop()
        outage: list[Verdict] = []
        measure(ROWS[5], lambda: outage.extend(probe_outage(candidate, workdir, env, pg_url)) or outage[0])
        if outage:
            verdicts[ROWS[6]] = outage[1]
            log(f"   {ROWS[6]}: {outage[1].cell()}")

    names = [c.name for c in chosen]
    print("\n| guarantee | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for row in ROWS:
        if any(row in table[name] for name in names):
            cells = [table[name][row].cell() if row in table[name] else "n/a" for name in names]
            print(f"| {row} | " + " | ".join(cells) + " |")
    print("\nDetails:")
    for name in names:
        print(f"\n{name}:")
        for row, verdict in table[name].items():
            if verdict.details:
                print(f" {row}:")
                print("\n".join(verdict.details))
    load1, load5, _ = os.getloadavg()
    print(f"\n{WORKERS} workers x 1 thread each; SQLite; LOCKY_MAX_BODY_BYTES={LIMIT}; {os.cpu_count()} cores;"
          f" load average {load1:.2f} / {load5:.2f} (1 / 5 min) at the end")
    if args.keep:
        print(f"logs in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
