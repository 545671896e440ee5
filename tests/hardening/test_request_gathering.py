"""How the worker's poller gathers a request before serving it (``DeadlineSocket``), on
a real socket pair: what counts as whole (gunicorn's parser decides), what is handed on
at once for gunicorn's parser to refuse, what is refused as too large, and pipelined
requests one after another."""

from __future__ import annotations

import socket

import pytest

from locky.cli.worker import (BODY_LIMIT, BODY_TOO_LARGE, COMPLETE, HEAD_LIMIT, HEAD_TOO_LARGE, WAITING,
                              DeadlineSocket)

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
