"""Service resilience: the real server rides out database outages and slow clients, and
answers its own errors in JSON.

Every test runs a real ``locky serve --workers 2``. The outage tests put a TCP proxy
between the server and PostgreSQL or MariaDB and stop it (connections refused),
blackhole it (connections open, nothing answers: a hung server) and restore it; on
SQLite another process holds the write lock. Figures are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import statistics
import threading
import time
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from urllib.parse import urlsplit

import pytest

from locky.testing import PASSWORD
from locky.testing.databases import engine
from support.server import locky_server

from proxy import proxy_to

pytestmark = pytest.mark.server
TIMEOUT = 2  # LOCKY_DB_TIMEOUT of these servers
SECRET = "outage-test-secret-" + "x7Qp9" * 8
JSON = "application/json; charset=utf-8"


def env(url: str, **extra: str) -> dict[str, str]:
    return {"LOCKY_DATABASE_URL": url, "LOCKY_JWT_SECRET": SECRET, "LOCKY_DB_TIMEOUT": str(TIMEOUT),
            "LOCKY_BCRYPT_ROUNDS": "4", "LOCKY_ADMIN_EMAILS": "admin@example.com", **extra}


def timed(server, method: str, path: str, **kwargs):
    started = time.monotonic()
    status, headers, body = server.request(method, path, **kwargs)
    return status, {k.lower(): v for k, v in headers.items()}, body, time.monotonic() - started


def login(server, email: str = "admin@example.com") -> dict[str, str]:
    server.request("POST", "/v1/public/users/register", {"name": "Admin", "email": email, "password": PASSWORD})
    status, _, body = server.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
    assert status == 200, body
    return {"Authorization": f"Bearer {body['access_token']}"}


def assert_unavailable(server, auth, within: float) -> None:
    """Health says unavailable and an authenticated read is a 503 JSON, each in time.
    Health may trust an answer of the database from the last second (docs/http/operation.md):
    an outage no request met yet shows within that second."""
    shows_by = time.monotonic() + 1.5
    status, headers, body, took = timed(server, "GET", "/v1/public/health")
    while status == 200 and time.monotonic() < shows_by:
        time.sleep(0.05)
        status, headers, body, took = timed(server, "GET", "/v1/public/health")
    assert (status, body) == (503, {"status": "unavailable"}) and took < within, (status, body, took)
    status, headers, body, took = timed(server, "GET", "/v1/internal/users", headers=auth)
    assert status == 503 and took < within, (status, body, took)
    assert set(body) <= {"title", "description"} and headers["content-type"] == JSON, (headers, body)


def wait_recovered(server, auth, limit: float = 20.0) -> float:
    """Seconds until health is ok and authenticated reads answer 200 again, in every
    worker (eight answers in a row, whichever worker takes each)."""
    started, streak, recovered = time.monotonic(), 0, None
    while time.monotonic() - started < limit:
        health = server.request("GET", "/v1/public/health")[0]
        ok = health == 200 and server.request("GET", "/v1/internal/users", headers=auth)[0] == 200
        streak = streak + 1 if ok else 0
        recovered = (recovered or time.monotonic() - started) if ok else None
        if streak == 8:
            return recovered
        time.sleep(0.05 if ok else 0.2)
    raise AssertionError(f"not recovered within {limit}s")


def worker_pids(server) -> list[int]:
    children = f"/proc/{server.process.pid}/task/{server.process.pid}/children"
    with open(children) as handle:
        return [int(pid) for pid in handle.read().split()]


def replace_worker(server, victim: int) -> None:
    """Kill worker ``victim`` and wait until the server has forked its replacement."""
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (victim in worker_pids(server) or len(worker_pids(server)) < 2):
        time.sleep(0.1)
    assert server.process.poll() is None, server.log()
    assert len(worker_pids(server)) == 2 and victim not in worker_pids(server), server.log()


@pytest.fixture
def proxied(server_url):
    with proxy_to(server_url) as proxy:
        yield proxy


# ---------------------------------------------------------------------------
# Outages
# ---------------------------------------------------------------------------


def test_the_server_rides_out_a_database_outage(proxied, tmp_path):
    with locky_server(tmp_path, env=env(proxied.url)) as server:
        auth = login(server)
        figures = {}
        for mode in ("stop", "blackhole"):
            if mode == "stop":
                proxied.stop()
            else:
                proxied.blackhole()
            # Within the timeout plus the watchdog's tick and the request itself.
            assert_unavailable(server, auth, within=TIMEOUT + 2.5)
            # A worker killed during the outage comes back and answers 503 too; the
            # server itself stays up.
            replace_worker(server, worker_pids(server)[0])
            for _ in range(4):  # both workers, whichever takes the connection
                assert_unavailable(server, auth, within=TIMEOUT + 2.5)
            if mode == "stop":
                proxied.start()
            else:
                proxied.restore()
            figures[mode] = wait_recovered(server, auth)
            assert server.request("GET", "/v1/internal/users/me", headers=auth)[0] == 200
        print(f"\n{engine(proxied.url)} outage recovery (s): {figures}")
        assert "Worker failed to boot" not in server.log()


def test_a_held_sqlite_write_lock_gives_503_in_time_then_clears(tmp_path):
    path = tmp_path / "locky.sqlite"
    with locky_server(tmp_path, env=env(f"sqlite:///{path}")) as server:
        auth = login(server)
        holder = sqlite3.connect(path, isolation_level=None, timeout=1)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            status, headers, body, took = timed(
                server, "POST", "/v1/private/groups", body={"name": "ops"}, headers=auth)
            assert status == 503 and took < TIMEOUT + 2.5, (status, body, took)
            assert headers["content-type"] == JSON and set(body) <= {"title", "description"}
            # Reads go on beside the writer (WAL), also on a worker that starts meanwhile:
            # starting reads the schema without waiting for the write lock.
            for victim in worker_pids(server):  # every worker, so whichever answers started now
                replace_worker(server, victim)
            for _ in range(4):
                status, _, body = server.request("GET", "/v1/internal/users/me", headers=auth)
                assert status == 200, (body, server.log()[-2000:])
                # Storage answers: health says so at once, without waiting for the lock.
                status, _, body, health_took = timed(server, "GET", "/v1/public/health")
                assert (status, body) == (200, {"status": "ok"}) and health_took < 1, (status, body, health_took)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        status, _, body = server.request("POST", "/v1/private/groups", {"name": "ops"}, headers=auth)
        assert status == 201, body
        print(f"\nSQLite write under a held lock answered 503 in {took:.2f}s")


# ---------------------------------------------------------------------------
# Slow clients and the server's own error answers
# ---------------------------------------------------------------------------


def test_slow_and_idle_clients_do_not_take_the_service_down(tmp_path):
    with locky_server(tmp_path, env=env(f"sqlite:///{tmp_path / 'locky.sqlite'}")) as server:
        port = urlsplit(server.url).port
        stop = threading.Event()
        slow: list[socket.socket] = []

        def trickle(sock, data):  # one byte at a time, never finished
            for byte in data:
                if stop.wait(0.5):
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    return

        for i in range(48):
            sock = socket.create_connection(("127.0.0.1", port))
            trickled = b"X-Slow: " + b"a" * 200  # a header line
            if i >= 40:  # a whole head, then a chunked body that trickles, chunk by chunk
                sock.send(b"POST /v1/public/users/login HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                trickled = b"1\r\na\r\n" * 40
            elif i >= 32:  # kept alive after one answer, then a next request that never ends
                sock.sendall(HEALTH)
                assert read_answer(sock)[0] == 200
                sock.send(b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n")
            elif i % 4:  # a head that never ends
                sock.send(b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n")
            else:  # a whole head, then a body that trickles
                sock.send(b"POST /v1/public/users/login HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 900\r\n\r\n")
            slow.append(sock)
            threading.Thread(target=trickle, args=(sock, trickled), daemon=True).start()
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(32)]  # say nothing
        try:
            time.sleep(1)
            times, answered = [], 0
            for _ in range(60):
                try:
                    status, _, _, took = timed(server, "GET", "/v1/public/health")
                    answered += status == 200
                    times.append(took)
                except OSError:
                    times.append(float("inf"))
            print(f"\nwith 48 slow (24 heads, 8 bodies, 8 chunked bodies, 8 next requests on kept-alive"
                  f" connections) + 32 idle connections: {answered}/60 answered, median"
                  f" {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms")
            assert answered == 60 and max(times) < 2.0
        finally:
            stop.set()
            for sock in slow + idle:
                sock.close()


HEALTH = b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n\r\n"


def read_answer(sock: socket.socket, buffered: bytearray | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the next answer on a connection (``Content-Length``
    framed); bytes read past it stay in ``buffered`` for the next call."""
    data = buffered if buffered is not None else bytearray()

    def read_until(done) -> None:
        while not done():
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            data.extend(chunk)

    read_until(lambda: b"\r\n\r\n" in data)
    head = bytes(data).partition(b"\r\n\r\n")[0]
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
    end = len(head) + 4 + int(headers["content-length"])
    read_until(lambda: len(data) >= end)
    status, body = int(lines[0].split()[1]), bytes(data[len(head) + 4:end])
    del data[:end]
    return status, headers, body


@pytest.mark.parametrize("threads", [1, 4])
def test_pipelined_requests_are_all_answered_in_order(tmp_path, threads):
    """Requests sent back to back on one connection, before any answer: many small ones,
    and heads of exactly 8 KiB (the parser's read size, so one request ends where a read
    ends and the next is already taken from the socket)."""
    request_id = b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nX-Request-ID: %d\r\n"
    with locky_server(tmp_path, env=env(f"sqlite:///{tmp_path / 'locky.sqlite'}", LOCKY_THREADS=str(threads)),
                      workers=1) as server:
        port = urlsplit(server.url).port
        for count, size in ((300, None), (6, 8192)):
            requests = []
            for i in range(count):
                head = request_id % i
                if size:
                    pad = size - len(head) - len(b"X-Pad: \r\n\r\n")
                    head += b"X-Pad: " + b"a" * pad + b"\r\n"
                requests.append(head + b"\r\n")
            assert size is None or {len(r) for r in requests} == {size}
            with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
                sock.sendall(b"".join(requests))
                buffered = bytearray()
                answers = [read_answer(sock, buffered) for _ in range(count)]
            assert [(status, headers["x-request-id"]) for status, headers, _ in answers] == [
                (200, str(i)) for i in range(count)]
            assert {json.loads(body)["status"] for _, _, body in answers} == {"ok"}
            dates = {parsedate_to_datetime(headers["date"]).timestamp() for _, headers, _ in answers}
            assert all(abs(date - time.time()) < 5 for date in dates), dates


def test_a_small_answer_comes_in_one_write(tmp_path):
    """An answer's head and body leave the server in one write, so a client waiting on
    the connection reads the whole answer at its first read: a kept-alive read, a body
    the app answered with an error, and the head of a HEAD request (which has no body)."""
    cases = [(HEALTH, 200, True), (b"GET /v1/nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404, True),
             (b"HEAD /v1/public/health HTTP/1.1\r\nHost: x\r\n\r\n", 200, False)]
    with locky_server(tmp_path, env=env(f"sqlite:///{tmp_path / 'locky.sqlite'}"), workers=1) as server:
        with socket.create_connection(("127.0.0.1", urlsplit(server.url).port), timeout=3) as sock:
            for _ in range(100):
                for request, status, has_body in cases:
                    sock.sendall(request)
                    first = sock.recv(65536)
                    head, _, body = first.partition(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    assert lines[0] == f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", first
                    length = int({k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}[
                        "content-length"])
                    assert length > 0, first
                    if has_body:
                        assert len(body) == length and json.loads(body), first
                    else:
                        assert body == b"", first


#: Each way a connection ends: what the client sends, and whether it then closes its side
#: (else the server answers and closes).
ENDINGS = {
    "idle after an answer": (HEALTH, True),
    "Connection: close": (b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", False),
    "a bad request line": (b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", False),
    "part of a head": (b"GET /v1/public/health HTTP/1.1\r\nHo", True),
    "nothing sent": (b"", True),
    "a body over the limit": (b"POST /v1/public/users/register HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n",
                              False),
    "reset after an answer": (HEALTH, "reset"),
}


@pytest.mark.parametrize("threads", [1, 4])
def test_every_way_a_connection_ends_leaves_the_worker_serving_new_ones(tmp_path, threads):
    """A worker keeps a connection in its poller while it waits between requests (with
    one thread, also while its request is served): however a connection ends, the next
    connection (which mostly gets the closed one's descriptor) is watched and answered.
    A connection left in the poller after it closed would leave the next one unanswered."""
    settings = env(f"sqlite:///{tmp_path / 'locky.sqlite'}", LOCKY_THREADS=str(threads), LOCKY_MAX_BODY_BYTES="2048")
    with locky_server(tmp_path, env=settings, workers=1) as server:
        port = urlsplit(server.url).port
        for _ in range(15):
            for ending, (sent, client_closes) in ENDINGS.items():
                sock = socket.create_connection(("127.0.0.1", port), timeout=3)
                sock.sendall(sent)
                if sent == HEALTH:
                    assert read_answer(sock)[0] == 200, ending
                if client_closes == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                elif not client_closes:
                    while sock.recv(65536):  # the server answers, then closes
                        pass
                sock.close()
                time.sleep(0.02)  # the worker sees the end before the next connection comes
                with socket.create_connection(("127.0.0.1", port), timeout=3) as after:
                    for _ in range(2):  # and it stays watched while kept alive
                        after.sendall(HEALTH)
                        status, _, body = read_answer(after)
                        assert (status, json.loads(body)) == (200, {"status": "ok"}), ending


def test_a_chunked_body_that_comes_in_parts_is_read_whole(tmp_path):
    """The poller gathers a chunked body across reads (chunk extensions and trailers
    included) before the request is served."""
    body = json.dumps({"name": "Chunked", "email": "chunked@example.com", "password": PASSWORD}).encode()
    parts = [body[:10], body[10:]]
    chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\nX-Trailer: t\r\n\r\n"
    with locky_server(tmp_path, env=env(f"sqlite:///{tmp_path / 'locky.sqlite'}"), workers=1) as server:
        with socket.create_connection(("127.0.0.1", urlsplit(server.url).port), timeout=5) as sock:
            sock.sendall(b"POST /v1/public/users/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n" + chunked[:25])
            time.sleep(0.3)
            sock.sendall(chunked[25:])
            status, _, answer = read_answer(sock)
    assert status == 201, answer
    assert json.loads(answer)["email"] == "chunked@example.com"


def test_a_body_announced_over_the_limit_is_refused_without_waiting_for_it(tmp_path):
    """The poller gathers bodies up to LOCKY_MAX_BODY_BYTES: a larger one announced by
    Content-Length is answered 413 at once, before any of it has come."""
    settings = env(f"sqlite:///{tmp_path / 'locky.sqlite'}", LOCKY_MAX_BODY_BYTES="2048")
    with locky_server(tmp_path, env=settings, workers=1) as server:
        with socket.create_connection(("127.0.0.1", urlsplit(server.url).port), timeout=3) as sock:
            sock.sendall(b"POST /v1/public/users/register HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n")
            status, _, answer = read_answer(sock)
    assert status == 413 and json.loads(answer)["title"] == "413 Content Too Large"


#: The titles of the errors the server answers itself.
TITLES = {414: "URI Too Long", 431: "Request Header Fields Too Large", 501: "Not Implemented"}


def raw_request(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        return read_answer(sock)


@pytest.mark.parametrize("data, status", [
    (b"GET /v1/public/health?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431),
    (b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400),
    (b"BROKEN\r\n\r\n", 400),
    (b"POST /v1/public/users/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br, chunked\r\n\r\n0\r\n\r\n", 501),
])  # (broken chunked bodies reach the app: test_trailing_newlines_and_broken_chunks checks their 400 field map)
def test_the_server_answers_its_own_errors_in_json(tmp_path, data, status):
    with locky_server(tmp_path, env=env(f"sqlite:///{tmp_path / 'locky.sqlite'}"), workers=1) as server:
        got, headers, body = raw_request(urlsplit(server.url).port, data)
    assert got == status, (got, body)
    assert headers["content-type"] == JSON
    document = json.loads(body)
    if status == 400:  # a field map, like every 400 of the API
        assert document == {"request": "The request could not be read as HTTP."}
    else:
        assert set(document) == {"title", "description"} and document["title"] == f"{status} {TITLES[status]}"
    assert headers["x-content-type-options"] == "nosniff" and headers["x-request-id"]
