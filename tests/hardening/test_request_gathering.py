"""How the worker's poller gathers a request before serving it (``DeadlineSocket``), on
a real socket pair: what counts as whole, what is handed on at once for gunicorn's
parser or the app to refuse, and pipelined requests one after another."""

from __future__ import annotations

import socket

import pytest

from locky.cli.worker import BODY_LIMIT, COMPLETE, HEAD_LIMIT, WAITING, DeadlineSocket

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
        states.append(sock.gather_head())
    return states


@pytest.mark.parametrize("pieces, states", [
    ([b"GET / HTTP/1.1\r\nHo", b"st: x\r\n", b"\r\n"], [WAITING, WAITING, COMPLETE]),
    ([LENGTH % 5 + b"ab", b"cde"], [WAITING, COMPLETE]),
    ([CHUNKED, b"5\r\nhello\r\n", b"0\r\n\r\n"], [WAITING, WAITING, COMPLETE]),
    ([CHUNKED + b"5;ext=1\r\nhel", b"lo\r\n0\r\nX-Trailer: t\r\n", b"\r\n"], [WAITING, WAITING, COMPLETE]),
    ([CHUNKED] + [b"1\r\na\r\n"] * 50 + [b"0\r\n\r\n"], [WAITING] * 51 + [COMPLETE]),
], ids=["head", "content-length", "chunked", "chunked with extensions and trailers", "fifty chunks"])
def test_a_request_is_complete_once_its_head_and_body_have_come(pair, pieces, states):
    assert gathered(pair, pieces) == states
    assert pair[1].recv(1 << 20) == b"".join(pieces) and not pair[1].pending


@pytest.mark.parametrize("data", [
    CHUNKED + b"zz\r\n",  # not a chunk size
    CHUNKED + b"5" * 1100,  # a size line that never ends
    CHUNKED + b"%x\r\n" % (BODY_LIMIT + 1),  # a chunk over the limit
    LENGTH % (BODY_LIMIT + 1),  # a body over the limit: the app answers 413 unread
    b"GET / HTTP/1.1\r\nX-Big: " + b"a" * HEAD_LIMIT,  # a head over the limit (414 or 431)
], ids=["bad size", "endless size line", "chunk over the limit", "body over the limit", "head over the limit"])
def test_what_gunicorn_or_the_app_refuses_is_handed_on_at_once(pair, data):
    assert gathered(pair, [data]) == [COMPLETE]


def test_pipelined_requests_are_gathered_one_after_another(pair):
    client, sock = pair
    first, second = b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n", CHUNKED + b"1\r\na\r\n0\r\n\r\n"
    client.sendall(first + second)
    assert sock.gather_head() == COMPLETE
    assert sock.recv(len(first)) == first and sock.pending
    assert sock.gather_head() == COMPLETE
    assert sock.recv(1 << 16) == second and not sock.pending
    client.sendall(b"GET /3 HTTP/1.1\r\n")
    assert sock.gather_head() == WAITING
    client.sendall(b"\r\n")
    assert sock.gather_head() == COMPLETE


def test_a_closed_connection_is_handed_on(pair):
    client, sock = pair
    client.sendall(b"GET / HTTP/1.1\r\n")
    assert sock.gather_head() == WAITING
    client.shutdown(socket.SHUT_WR)
    assert sock.gather_head() == COMPLETE
