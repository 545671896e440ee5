"""How the worker's poller gathers a request before serving it (``DeadlineSocket``), on
a real socket pair: what counts as whole (gunicorn's parser decides), what is handed on
at once for gunicorn's parser to refuse, what is refused as too large, pipelined
requests one after another, and the head gathered being the one gunicorn serves."""

from __future__ import annotations

import socket
import threading
import time
from email.utils import formatdate

import pytest

from gunicorn.config import Config
from gunicorn.http.errors import InvalidHeader
from gunicorn.http.unreader import IterUnreader
from gunicorn import util
from gunicorn.http.wsgi import FileWrapper, Response

from locky.cli.worker import (BODY_LIMIT, BODY_TOO_LARGE, COMPLETE, HEAD_LIMIT, HEAD_TOO_LARGE, WAITING,
                              DeadlineSocket, _GatheredParser, _http_date, _OneWriteResponse, _Request,
                              _write_closing, settled)

CHUNKED = b"POST /v1/public/users/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
LENGTH = b"POST /v1/public/users/login HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"


@pytest.fixture
def pair():
    client, server = socket.socketpair()
    yield client, DeadlineSocket(server)
    client.close()
    server.close()


def gathered(pair, pieces: list[bytes]) -> list[str]:
    client, sock = pair
    states = []
    for piece in pieces:
        client.sendall(piece)
        states.append(sock.gather())
    return states


@pytest.mark.parametrize("pieces, states", [
    ([b"GET / HTTP/1.1\r\nHo", b"st: x\r\n", b"\r\n"], [WAITING, WAITING, COMPLETE]),
    ([LENGTH % 5 + b"ab", b"cde"], [WAITING, COMPLETE]),
    ([LENGTH.replace(b"%d", b"%013d") % 5 + b"ab", b"cde"], [WAITING, COMPLETE]),
    ([CHUNKED, b"5\r\nhello\r\n", b"0\r\n\r\n"], [WAITING, WAITING, COMPLETE]),
    ([CHUNKED + b"5;ext=1\r\nhel", b"lo\r\n0\r\nX-Trailer: t\r\n", b"\r\n"], [WAITING, WAITING, COMPLETE]),
    ([CHUNKED] + [b"1\r\na\r\n"] * 50 + [b"0\r\n\r\n"], [WAITING] * 51 + [COMPLETE]),
    ([CHUNKED + b"4000\r\n"] + [b"a" * 1024] * 16 + [b"\r\n0\r\n\r\n"], [WAITING] * 17 + [COMPLETE]),
], ids=["head", "content-length", "zero-padded content-length", "chunked", "chunked with extensions and trailers",
        "fifty chunks", "a chunk in pieces"])
def test_a_request_is_complete_once_its_head_and_body_have_come(pair, pieces, states):
    assert gathered(pair, pieces) == states
    assert pair[1].recv(1 << 20) == b"".join(pieces) and not pair[1].pending


@pytest.mark.parametrize("data", [
    CHUNKED + b"zz\r\n",  # not a chunk size
    CHUNKED + b"5" * 20000,  # a size line longer than gunicorn reads
    CHUNKED + b"5\r\nhelloXX",  # a chunk not ended by CRLF
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",  # two lengths
    b"GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n",  # a bare LF
    b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n",  # a field over the limit (431)
], ids=["bad size", "endless size line", "chunk without CRLF", "two lengths", "bare LF", "field over the limit"])
def test_what_gunicorn_refuses_is_handed_on_at_once(pair, data):
    assert gathered(pair, [data]) == [COMPLETE]


@pytest.mark.parametrize("data, state", [
    (CHUNKED + b"%x\r\n" % (BODY_LIMIT + 1), BODY_TOO_LARGE),  # a chunk over the limit
    (CHUNKED + b"%x\r\n%s\r\n" % (BODY_LIMIT, b"a" * BODY_LIMIT) + b"1\r\n", BODY_TOO_LARGE),  # chunks over it
    (LENGTH % (BODY_LIMIT + 1), BODY_TOO_LARGE),  # a body announced over the limit
    (b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * (HEAD_LIMIT // 8), HEAD_TOO_LARGE),  # a head that does not end
    (CHUNKED + b"0\r\n" + b"X-A: b\r\n" * (HEAD_LIMIT // 8), HEAD_TOO_LARGE),  # trailers that do not end
], ids=["chunk over the limit", "chunks over the limit", "length over the limit", "endless head",
        "endless trailers"])
def test_what_is_too_large_to_gather_is_refused_at_once(pair, data, state):
    client, sock = pair
    client.sendall(data)
    assert sock.gather() == state


def test_pipelined_requests_are_gathered_one_after_another(pair):
    client, sock = pair
    first, second = b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n", CHUNKED + b"1\r\na\r\n0\r\n\r\n"
    client.sendall(first + second)
    assert sock.gather() == COMPLETE
    assert sock.recv(len(first)) == first and sock.pending
    assert sock.gather() == COMPLETE
    assert sock.recv(1 << 16) == second and not sock.pending
    client.sendall(b"GET /3 HTTP/1.1\r\n")
    assert sock.gather() == WAITING
    client.sendall(b"\r\n")
    assert sock.gather() == COMPLETE


def test_bytes_the_parser_took_past_its_request_start_the_next(pair):
    """gunicorn's parser reads ahead: what it gives back is gathered with what follows."""
    client, sock = pair
    first, second = b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
    client.sendall(first + second[:10])
    assert sock.gather() == COMPLETE
    assert sock.recv(1 << 16) == first + second[:10] and not sock.pending
    sock.unread(second[:10])
    assert sock.gather() == WAITING
    client.sendall(second[10:])
    assert sock.gather() == COMPLETE
    assert sock.recv(1 << 16) == second


def test_a_closed_connection_is_handed_on(pair):
    client, sock = pair
    client.sendall(b"GET / HTTP/1.1\r\n")
    assert sock.gather() == WAITING
    client.shutdown(socket.SHUT_WR)
    assert sock.gather() == COMPLETE



def test_the_head_gathered_is_the_one_served_and_each_body_is_read_after_it(pair):
    """gunicorn's parser serves the head the poller parsed (it is not parsed twice), and
    its own readers take each body from where that head ends, however much of the body
    the app read: the next request starts where gunicorn's framing says."""
    client, sock = pair
    parser = _GatheredParser(sock.cfg, sock, None)
    requests = [(b"GET /1?a=b HTTP/1.1\r\nHost: x\r\n\r\n", b"", None),
                (LENGTH % 5 + b"hello", b"hello", 2),  # the app reads 2 bytes of the body
                (CHUNKED + b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n", b"abcde", None),
                (LENGTH % 4 + b"wxyz", b"wxyz", 0),  # and none of this one
                (b"GET /5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"", None)]
    client.sendall(b"".join(data for data, _, _ in requests))
    for number, (data, body, read) in enumerate(requests, start=1):
        sock.unread(parser.unreader.take_buffered())  # as LockyWorker.handle does
        assert sock.gather() == COMPLETE
        gathered_head = sock.request
        request = next(parser)
        assert request is gathered_head and request.req_number == number
        assert request.path == data.split(b" ")[1].split(b"?")[0].decode()
        if read is None:
            assert request.body.read() == body
        else:
            assert request.body.read(read) == body[:read]
        assert parser.finish_body(deadline=time.monotonic() + 5) is True  # what is left of the body is drained
    assert request.should_close() and not sock.pending and sock.held == 0
    assert sock.gather() == WAITING


def test_a_kept_alive_connection_holds_no_more_than_its_next_request(pair):
    """Each head served is forgotten: a connection serving thousands of requests one
    after another, or two at a time, holds only what has not been served."""
    client, sock = pair
    parser = _GatheredParser(sock.cfg, sock, None)
    head = b"GET /v1/internal/users/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"t" * 500 + b"\r\n\r\n"
    for number in range(2000):
        if number % 2 == 0:
            client.sendall(head * 2)  # two pipelined: the second waits in the buffer
        sock.unread(parser.unreader.take_buffered())
        assert sock.gather() == COMPLETE
        assert next(parser).path == "/v1/internal/users/1"
        assert sock.held == (len(head) if number % 2 == 0 else 0)


def test_a_head_gunicorn_refuses_is_parsed_again_and_refused_again(pair):
    client, sock = pair
    parser = _GatheredParser(sock.cfg, sock, None)
    client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n")
    assert sock.gather() == COMPLETE and sock.request is None
    with pytest.raises(InvalidHeader):
        next(parser)


def test_the_worker_parses_with_gunicorns_python_parser(pair):
    """Its refusals are the ones tests/hardening holds; gunicorn would take up its C parser
    wherever ``gunicorn_h1c`` is installed (CI installs it for the steps after the first)."""
    assert pair[1].cfg.http_parser == "python"


@pytest.mark.parametrize("peer, scheme", [(("127.0.0.1", 40000), "https"), (("192.0.2.7", 40000), "http")],
                         ids=["allowed peer", "other peer"])
def test_forwarding_headers_count_only_from_the_peers_gunicorn_allows(pair, peer, scheme):
    """The worker remembers gunicorn's answer per peer address (``forwarded_allow_ips``,
    by default the loopback addresses); the answer is gunicorn's, on every request."""
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-Proto: https\r\n\r\n"
    for _ in range(3):
        assert _Request(pair[1].cfg, IterUnreader([head]), peer).scheme == scheme


def test_the_date_of_an_answer_is_this_second(pair):
    """Formatted once a second: always the current second, as gunicorn's."""
    for _ in range(3):
        before = int(time.time())
        date = _http_date()
        assert date in {formatdate(second, usegmt=True) for second in range(before, int(time.time()) + 1)}
        time.sleep(0.6)
    assert _http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"


def test_an_error_answer_never_waits_for_a_client_that_does_not_read(pair):
    """gunicorn sets the socket blocking to serve a request; an answer after which the
    connection closes (413, 431, gunicorn's own 400s) is still written without waiting:
    a client that reads nothing, its buffers full, cannot hold the worker's thread."""
    client, sock = pair
    raw = sock.raw
    raw.setblocking(False)
    try:
        while True:
            raw.send(b"x" * 65536)  # fill what the client does not read
    except BlockingIOError:
        pass
    sock.setblocking(True)  # as gunicorn does before it serves
    outcome = []

    def answer():
        try:
            _write_closing(sock, 431, "Request Header Fields Too Large", [("Content-Length", "2")], b"{}")
            outcome.append("written")
        except OSError as exc:
            outcome.append(type(exc).__name__)

    writer = threading.Thread(target=answer, daemon=True)
    writer.start()
    writer.join(2)
    alive = writer.is_alive()
    if alive:
        client.close()  # let the blocked write end
    assert not alive and outcome == ["BlockingIOError"], outcome


class _Sends:
    """A socket that records each ``sendall`` (and ``sendfile``) as one write."""

    def __init__(self):
        self.writes: list[bytes] = []

    def sendall(self, data):
        self.writes.append(bytes(data))

    def sendfile(self, file, offset=0, count=None):
        file.seek(offset)
        self.writes.append(file.read(count))


@pytest.mark.parametrize("method, status, headers, body, writes", [
    ("GET", "200 OK", [("Content-Length", "11")], [b"hello", b" world"], 2),  # head with the first bytes
    ("GET", "200 OK", [], [b"hello", b" world"], 4),  # chunked: the head, two chunks, the last chunk
    ("HEAD", "200 OK", [("Content-Length", "5")], [b"hello"], 1),  # no body: the head alone
    ("GET", "204 No Content", [], [b""], 1),
    ("GET", "200 OK", [("Content-Length", "0")], [b"", b""], 1),
    ("GET", "200 OK", [("Content-Length", "2")], [b"", b"hi"], 3),  # an empty first write: as gunicorn
    ("GET", "200 OK", [("Content-Length", "5")], "file", 2),  # a file (sendfile): the head first
], ids=["two writes", "chunked", "HEAD", "204", "empty", "empty first write", "file"])
def test_an_answer_is_written_as_gunicorn_writes_it_with_its_head_joined_to_the_body(
        pair, tmp_path, monkeypatch, method, status, headers, body, writes):
    """The worker's response writes the bytes gunicorn's own does, in fewer writes: the
    head goes with the body's first bytes, else on its own. Whatever the app has written,
    the same bytes are on the wire as with gunicorn's (an app that fails there leaves no
    head held back), and ``headers_sent`` says so."""
    monkeypatch.setattr(util, "http_date", lambda timestamp=None: "Sun, 06 Nov 1994 08:49:37 GMT")
    head = f"{method} / HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    written, before_close, sent = {}, {}, {}
    for kind in (Response, _OneWriteResponse):
        request = _Request(pair[1].cfg, IterUnreader([head]), ("127.0.0.1", 1))
        sock = _Sends()
        response = kind(request, sock, pair[1].cfg)
        response.start_response(status, list(headers))
        if body == "file":
            (tmp_path / "f").write_bytes(b"hello")
            with (tmp_path / "f").open("rb") as file:
                response.write_file(FileWrapper(file))
        else:
            for piece in body:
                response.write(piece)
        before_close[kind], sent[kind] = b"".join(sock.writes), response.headers_sent
        response.close()
        written[kind] = sock.writes
    assert before_close[_OneWriteResponse] == before_close[Response]
    assert sent[_OneWriteResponse] == sent[Response] == (b"\r\n\r\n" in before_close[Response])
    assert b"".join(written[_OneWriteResponse]) == b"".join(written[Response])
    assert len(written[_OneWriteResponse]) == writes
    assert written[_OneWriteResponse][0].startswith(f"HTTP/1.1 {status}\r\n".encode())


def test_a_write_that_is_not_bytes_fails_as_with_gunicorn(pair):
    """gunicorn sends the head, then refuses a body item that is not bytes; so does the
    worker's response: the head is on the wire, as ``headers_sent`` says."""
    request = _Request(pair[1].cfg, IterUnreader([b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]), ("127.0.0.1", 1))
    sock = _Sends()
    response = _OneWriteResponse(request, sock, pair[1].cfg)
    response.start_response("200 OK", [("Content-Length", "2")])
    with pytest.raises(TypeError):
        response.write("hi")
    assert response.headers_sent and len(sock.writes) == 1 and sock.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_worker_reads_every_setting_as_gunicorn_does():
    """The settings a worker serves with (``settled``) read as gunicorn's ``Config``
    reads them, every one, the properties ``Config`` computes from others included, and
    a setting changed on them afterwards reads changed."""
    cfg = Config()
    cfg.set("keepalive", 7)
    cfg.set("certfile", "/nowhere/cert.pem")
    cfg.set("forwarded_allow_ips", "127.0.0.1,10.1.2.3")
    read = settled(cfg)
    for name in cfg.settings:
        assert getattr(read, name) == getattr(cfg, name), name
    assert (read.keepalive, read.is_ssl, read.forwarded_allow_ips) == (7, "/nowhere/cert.pem", ["127.0.0.1", "10.1.2.3"])
    assert "keepalive" in vars(read) and "keepalive" not in vars(cfg)  # a plain attribute, read once
    read.set("keepalive", 9)
    read.set("certfile", None)
    assert (read.keepalive, read.is_ssl) == (9, None)
