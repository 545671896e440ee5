"""Where a request ends, over raw sockets against ``locky serve --workers 1`` (issue 31,
finding 2): the worker's pre-reader and gunicorn agree on it, so a connection whose
request is not whole yet waits in the poller and never holds the worker's only thread.

Each case holds a few bad connections open while health probes on fresh connections
must keep answering within a second: a zero-padded 13-digit ``Content-Length``; a whole
request followed by part of a pipelined second one; a body over the limit (413 with
``Connection: close``, and the connection closed). A request sent on a kept-alive
connection while the worker is busy past the keep-alive time is answered, not reset.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from locky.testing import PASSWORD
from support.server import locky_server

pytestmark = pytest.mark.server
HELD = 4  # bad connections held at once (the four)
LIMIT = 2048  # LOCKY_MAX_BODY_BYTES of the server
HEALTH = b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\n\r\n"
REGISTER = b"POST /v1/public/users/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
SECRET = "framing-test-secret-" + "Kq7Zp" * 8


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("framing")
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_JWT_SECRET": SECRET,
           "LOCKY_BCRYPT_ROUNDS": "4", "LOCKY_MAX_BODY_BYTES": str(LIMIT), "LOCKY_DB_TIMEOUT": "10"}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_")]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=1) as running:
            running.port = urlsplit(running.url).port
            running.database = workdir / "locky.sqlite"
            yield running


@pytest.fixture
def held():
    """The bad connections a test holds open, closed after it whatever happens."""
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def connect(server, timeout: float = 3.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def read_answer(sock: socket.socket, buffered: bytearray | None = None) -> tuple[int, dict[str, str], dict]:
    """Status, headers and JSON body of the next answer on a connection; bytes read past
    it stay in ``buffered`` for the next call."""
    data = buffered if buffered is not None else bytearray()

    def read_until(done) -> None:
        while not done():
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection without answering"
            data.extend(chunk)

    read_until(lambda: b"\r\n\r\n" in data)
    head = bytes(data).partition(b"\r\n\r\n")[0]
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
    end = len(head) + 4 + int(headers["content-length"])
    read_until(lambda: len(data) >= end)
    status, body = int(lines[0].split()[1]), json.loads(bytes(data[len(head) + 4:end]))
    del data[:end]
    return status, headers, body


def closed(sock: socket.socket, within: float = 2.0) -> bool:
    """Whether the server ends the connection (FIN or reset) within ``within`` seconds,
    sending nothing more."""
    sock.settimeout(within)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def assert_the_service_answers(server, probes: int = 3) -> None:
    """Health probes, each on a fresh connection, answer 200 within a second."""
    for _ in range(probes):
        started = time.monotonic()
        with connect(server, timeout=1.0) as sock:
            sock.sendall(b"GET /v1/public/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            try:
                status, _, body = read_answer(sock)
            except TimeoutError:
                pytest.fail(f"a health probe went unanswered for {time.monotonic() - started:.1f} s")
        assert (status, body) == (200, {"status": "ok"})


def register(email: str) -> bytes:
    return json.dumps({"name": email.split("@")[0], "email": email, "password": PASSWORD}).encode()


def test_a_zero_padded_content_length_is_waited_for_in_the_poller(server, held):
    """``Content-Length: 0000000000050`` (13 digits) is the length gunicorn reads: the
    body is waited for in the poller, then read whole."""
    bodies = [register(f"padded{i}@example.com") for i in range(HELD)]
    for body in bodies:
        held.append(connect(server))
        held[-1].sendall(REGISTER + b"Content-Length: %013d\r\n\r\n" % len(body) + body[:10])
    time.sleep(0.3)
    assert_the_service_answers(server)
    for i, (sock, body) in enumerate(zip(held, bodies)):
        sock.sendall(body[10:])
        status, _, answer = read_answer(sock)
        assert (status, answer["email"]) == (201, f"padded{i}@example.com"), answer


def pipelined(kind: str, i: int) -> tuple[bytes, bytes]:
    """The next request, in two parts: cut in its head, or in its body."""
    if kind == "head":
        return b"GET /v1/public/health HTTP/1.1\r\nHo", b"st: x\r\n\r\n"
    body = register(f"pipelined{i}@example.com")
    return REGISTER + b"Content-Length: %d\r\n\r\n" % len(body) + body[:7], body[7:]


@pytest.mark.parametrize("kind", ["head", "body"])
def test_part_of_a_pipelined_request_waits_in_the_poller(server, held, kind):
    """A whole request followed by part of the next: the first is answered, the part
    waits in the poller (holding no thread), and once the rest comes it is answered."""
    parts = [pipelined(kind, i) for i in range(HELD)]
    buffers = [bytearray() for _ in range(HELD)]
    for (first_part, _), buffered in zip(parts, buffers):
        held.append(connect(server))
        held[-1].sendall(HEALTH + first_part)
        assert read_answer(held[-1], buffered)[::2] == (200, {"status": "ok"})
    time.sleep(0.3)
    assert_the_service_answers(server)
    for i, (sock, (_, rest), buffered) in enumerate(zip(held, parts, buffers)):
        sock.sendall(rest)
        status, _, answer = read_answer(sock, buffered)
        if kind == "head":
            assert (status, answer) == (200, {"status": "ok"})
        else:
            assert (status, answer["email"]) == (201, f"pipelined{i}@example.com"), answer


@pytest.mark.parametrize("request_", [
    REGISTER + b"Content-Length: %d\r\n\r\n" % (LIMIT + 100) + b"x" * (LIMIT + 100) + HEALTH,
    REGISTER + b"Content-Length: %d\r\n\r\n" % (LIMIT * 10),
    REGISTER + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (LIMIT + 1, b"x" * (LIMIT + 1)) + HEALTH,
], ids=["whole, then a next request", "announced, none of it sent", "chunked, then a next request"])
def test_a_body_over_the_limit_is_refused_and_its_connection_closed(server, held, request_):
    """413 in JSON with ``Connection: close``, then the connection ends; a request sent
    after the body on that connection is not answered (the client asks again elsewhere)."""
    for _ in range(HELD):
        held.append(connect(server))
        held[-1].sendall(request_)
    answers = [read_answer(sock) for sock in held]  # the clients keep their side open
    assert_the_service_answers(server)
    for status, headers, body in answers:
        assert status == 413 and headers["connection"] == "close", (status, headers)
        assert body == {"title": "413 Content Too Large", "description": f"The body is larger than {LIMIT} bytes."}
    assert all(closed(sock) for sock in held)


def test_a_request_on_a_kept_alive_connection_is_answered_after_a_busy_spell(server):
    """The worker's only thread is busy past the keep-alive time (a write waiting for
    the SQLite lock another process holds); a request sent meanwhile on a kept-alive
    connection is answered once the worker is free, not reset."""
    with connect(server, timeout=15) as kept, connect(server, timeout=15) as busy:
        kept.sendall(HEALTH)
        assert read_answer(kept)[0] == 200
        kept_since = time.monotonic()
        lock = sqlite3.connect(server.database, isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")
            busy.sendall(REGISTER + b"Content-Length: %d\r\n\r\n" % len(register("busy@example.com"))
                         + register("busy@example.com"))
            time.sleep(kept_since + 5.4 - time.monotonic())  # the keep-alive time is 5 s
            kept.sendall(HEALTH)
            time.sleep(0.2)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert read_answer(busy)[0] == 201
        try:
            status, _, body = read_answer(kept)
        except ConnectionResetError:
            pytest.fail("the request on the kept-alive connection was reset unanswered")
        assert (status, body) == (200, {"status": "ok"})
