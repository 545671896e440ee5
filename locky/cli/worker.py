"""What each ``locky serve`` worker process runs: gunicorn's threaded worker, made to
answer in JSON, and an app that starts even while the database is away.

- :class:`LockyWorker` is gunicorn's ``gthread`` worker: connections wait in a poller
  until their request (head and body) is complete (a new connection's first request and
  every next request on a kept-alive one), so slow and idle clients (slowloris,
  keep-alive) hold nothing. Whether a request is complete, and where it ends, is decided
  by gunicorn's own parser (its Python one, :func:`python_parser`) run over the bytes
  gathered so far (:class:`DeadlineSocket`), so the poller and the server never disagree
  about it; the head that parse made is the one served (:class:`_GatheredParser`), so a
  head is parsed once. A body over the limit is answered 413 at once, a head that does
  not end within ``HEAD_LIMIT`` 431, each with ``Connection: close``. A connection is
  closed without holding a thread (the poller drains what the client still sends), and a
  kept-alive one only while no request waits on it, even when the worker was busy past
  its keep-alive time. With one thread (``LOCKY_THREADS=1``, the default) a complete
  request is served right there on the poller's thread, with no hand-off between
  threads, and its connection stays in the poller meanwhile; with more, complete
  requests run on that many threads, which share the process's bounded database pool
  (``LOCKY_DATABASE_POOL_SIZE``). The errors gunicorn answers itself (a bad request
  line or header, 414, 431, a broken chunked body) are the contract's JSON bodies with
  the usual headers instead of gunicorn's HTML. A worker reads gunicorn's settings once,
  when it starts (:func:`settled`).
- :class:`StartingApp` is the WSGI app a worker serves until ``create_app`` succeeds:
  a worker (re)started during a database outage answers 503 JSON (health
  ``{"status": "unavailable"}``) instead of failing to boot, which would make gunicorn
  stop the whole server; it builds the real app as soon as the database answers.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
import uuid
from collections import deque
from functools import lru_cache, partial
from http import HTTPStatus
from types import SimpleNamespace
from typing import Callable

import orjson
from gunicorn import util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import Unreader
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import _DEFER, ThreadWorker

from locky.http.middleware import JSON_UTF8, REQUEST_ID, SECURITY_HEADERS

log = logging.getLogger("locky")
HEALTH_PATH = "/v1/public/health"
#: Seconds between two attempts to build the app while the database is away.
RETRY_EVERY = 0.5
#: Seconds a request may take to arrive, from its first byte.
READ_DEADLINE = 10.0
#: A head (or a chunked body's trailers) not ended within this many bytes is refused
#: (431) rather than held: gunicorn's own bound is ~1.6 MB with ``locky serve``'s limits.
HEAD_LIMIT = 65536
#: Bodies up to this size (announced by Content-Length, or chunked) are gathered before
#: the request is served, unless the worker says otherwise (``locky serve`` gives it
#: LOCKY_MAX_BODY_BYTES, whose default this is): a larger one is answered 413 at once.
BODY_LIMIT = 64 * 1024
#: How much is taken from a socket at once.
READ_SIZE = 65536
#: Seconds, and bytes, for which a closed connection's unread input is drained (as
#: gunicorn's ``util.close_graceful`` does), so that the kernel does not reset the
#: connection before the client has read the answer.
LINGER, LINGER_BYTES = 2.0, 65536
WAITING, COMPLETE, EXPIRED = "waiting", "complete", "expired"
BODY_TOO_LARGE, HEAD_TOO_LARGE = "body too large", "head too large"


def json_error(status: int, reason: str, request_id: str | None = None) -> tuple[list[tuple[str, str]], bytes]:
    """Headers and body of an error answer made outside the app (no driver or parser text):
    a 400 is a field map like every 400 of the API (the field is ``request``), any other
    status Falcon's ``{"title", "description"}``."""
    description = _DESCRIPTIONS.get(status, reason + ".")
    if status == 400:
        return json_answer({"request": description}, request_id)
    return json_answer({"title": f"{status} {reason}", "description": description}, request_id)


def json_answer(document: dict, request_id: str | None = None) -> tuple[list[tuple[str, str]], bytes]:
    """``document`` as a JSON body with the headers every Locky answer carries."""
    body = orjson.dumps(document)
    given = request_id if request_id and REQUEST_ID.fullmatch(request_id) else None
    headers = [("Content-Type", JSON_UTF8), ("Content-Length", str(len(body))),
               ("X-Request-ID", given or str(uuid.uuid4())), *SECURITY_HEADERS.items()]
    return headers, body


_DESCRIPTIONS = {
    400: "The request could not be read as HTTP.",
    403: "The request is forbidden.",
    414: "The request line is too long.",
    417: "The expectation cannot be met.",
    431: "The request's header fields are too large.",
    500: "The server could not answer the request.",
    501: "The transfer coding is not supported.",
    503: "The service is starting and storage is not answering yet.",
}


def _write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error``, speaking the contract's JSON. gunicorn passes
    "Bad Request" with some other statuses (501 for a transfer coding it does not
    support, 500 for a configuration problem): the reason is then the status's own."""
    if status_int != 400 and reason == "Bad Request":
        reason = HTTPStatus(status_int).phrase
    headers, body = json_error(status_int, reason)
    _write_closing(sock, status_int, reason, headers, body)


def _write_closing(sock, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> None:
    """An answer after which the connection closes, written without waiting for a client
    that does not read (on the socket itself: a :class:`DeadlineSocket` stays blocking)."""
    head = f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
    util.write_nonblock(sock.raw if isinstance(sock, DeadlineSocket) else sock, head.encode("latin-1") + body)


def python_parser(cfg: Config) -> Config:
    """``cfg``, set to parse with gunicorn's Python HTTP parser. gunicorn would otherwise
    take up its C parser (``gunicorn_h1c``, ``gunicorn[fast]``) wherever it is installed,
    which answers some malformed requests differently (an endless head, an unknown transfer
    coding before ``chunked``) from what the contract and ``tests/hardening`` hold, and
    gathers no faster (3 % of a bare request's CPU, docs/benchmarks.md)."""
    cfg.set("http_parser", "python")
    return cfg


class _Settled(Config):
    """gunicorn's settings as one worker reads them: each setting's value is an attribute
    of its own, read once, where ``Config`` looks every read up by name (``__getattr__``),
    about 27 reads a request (docs/benchmarks.md). Settings ``Config`` computes from
    others (``is_ssl``, ``sendfile``) are still its properties, over these values."""

    def set(self, name, value):
        super().set(name, value)
        if name in self.__dict__:
            self.__dict__[name] = self.settings[name].get()


def settled(cfg: Config) -> Config:
    """A copy of ``cfg`` (sharing its settings) whose settings read as plain attributes:
    what a worker serves with, once every setting is made."""
    copy = _Settled.__new__(_Settled)
    copy.__dict__.update(cfg.__dict__)
    copy.__dict__.update({name: setting.get() for name, setting in cfg.settings.items()
                          if not hasattr(Config, name)})
    return copy


_gunicorn_http_date = util.http_date
_date = (0, "")


def _http_date(timestamp=None) -> str:
    """gunicorn's ``util.http_date``, formatted once a second rather than for every answer
    (the header counts whole seconds; 4 % of a bare request's CPU)."""
    global _date
    if timestamp is not None:
        return _gunicorn_http_date(timestamp)
    second = int(time.time())
    if _date[0] != second:
        _date = (second, _gunicorn_http_date(second))  # one tuple: a thread reads it whole
    return _date[1]


_gunicorn_create = wsgi.create


def _create(req, sock, client, server, cfg, response_class=None, response_args=()):
    """gunicorn's ``wsgi.create``, whose HTTP/1 answers are :class:`_OneWriteResponse`."""
    return _gunicorn_create(req, sock, client, server, cfg, response_class or _OneWriteResponse, response_args)


class _HeadBuffer:
    """Where :class:`_OneWriteResponse` has gunicorn write an answer's head."""

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data


class _OneWriteResponse(wsgi.Response):
    """gunicorn's response, which writes the head of an answer together with the first
    bytes of its body: one ``send`` and one TCP segment for a small answer instead of two
    (a system call, 5 % of a bare request's CPU, and a second wake-up of the client).
    The head is gunicorn's own, made at that first write and sent with it; an answer
    whose first write sends no body bytes (HEAD, 204, 304, an empty or chunked body, a
    file) gets its head on its own, when and as gunicorn sends it. A head is never held
    while the app runs: what ``headers_sent`` says is on the wire."""

    _head = b""

    def write(self, arg):
        if (self.headers_sent or self.chunked or self._omits_body or type(arg) is not bytes or not arg
                or (self.response_length is not None and self.sent >= self.response_length)):
            return super().write(arg)
        buffer = _HeadBuffer()
        sock, self.sock = self.sock, buffer
        try:
            self.send_headers()
        finally:
            self.sock = sock
        self._head = buffer.data
        super().write(arg)  # the head goes out with these bytes (:meth:`_emit_body`)

    def _emit_body(self, data):
        head, self._head = self._head, b""
        super()._emit_body(head + data if head else data)


class _Served:
    """What :meth:`LockyWorker.finish_request` asks of a request served on the poller's
    thread (as of the ``Future`` a request thread would give): its result or exception."""

    __slots__ = ("_result", "_exception")

    def __init__(self, result=None, exception: BaseException | None = None):
        self._result, self._exception = result, exception

    def cancelled(self) -> bool:
        return False

    def exception(self):
        return self._exception

    def result(self):
        if self._exception is not None:
            raise self._exception
        return self._result


class _Request(Request):
    """gunicorn's request, which asks whether its peer may send forwarding headers
    (``forwarded_allow_ips``) once per peer address rather than for every request (an
    address parse, 4 % of a bare request's CPU)."""

    def _peer_is_trusted_proxy(self):
        peer = self.peer_addr
        return not isinstance(peer, tuple) or _trusted_peer(self.cfg, peer[0])


@lru_cache(maxsize=1024)
def _trusted_peer(cfg: Config, address: str) -> bool:
    """gunicorn's own answer for ``address`` under ``cfg``."""
    return Request._peer_is_trusted_proxy(SimpleNamespace(cfg=cfg, peer_addr=(address, 0)))


class LockyWorker(ThreadWorker):
    """gunicorn's threaded worker with JSON error answers, in which a slow or idle client
    holds no thread (see the module docstring and :meth:`handle`)."""

    #: The largest body the poller gathers (``locky serve`` sets LOCKY_MAX_BODY_BYTES):
    #: a larger one is answered 413 without being read.
    body_limit = BODY_LIMIT

    def init_process(self):
        # This process serves only Locky: every error gunicorn writes itself is JSON.
        util.write_error = _write_json_error
        util.http_date = _http_date
        wsgi.create = _create
        self.cfg = settled(python_parser(self.cfg))
        self._ready: deque = deque()  # complete requests to serve on this thread, in order
        self._serving = False
        self._lingering: deque = deque()  # closed connections being drained, oldest first
        super().init_process()

    def enqueue_req(self, conn):
        """With one thread, serve ``conn``'s request here, on the poller's thread: handing
        it to a thread and its answer back costs two wake-ups per request, a quarter of a
        small read's time (docs/benchmarks.md). Requests that become ready while one is
        served (a pipelined next request) wait in ``_ready``, so nothing recurses."""
        if self.cfg.threads > 1:
            return super().enqueue_req(conn)
        self._ready.append(conn)
        if self._serving:
            return
        self._serving = True
        try:
            while self._ready:
                conn = self._ready.popleft()
                try:
                    done = _Served(self.handle(conn))
                except Exception as exc:  # finish_request closes the connection
                    done = _Served(exception=exc)
                self.finish_request(conn, done)
        finally:
            self._serving = False

    def finish_request(self, conn, fs):
        """gunicorn's, except that a kept-alive connection whose next request was already
        taken from the socket (pipelined, in :class:`DeadlineSocket`'s buffer) is served
        at once, as the poller would wait for bytes that have already come; that a
        connection to close is closed by the poller (:meth:`_linger`), not on this thread;
        and that, with one thread, a connection that waits for its next bytes stays in
        the poller (:meth:`_wait_in_poller`)."""
        served = not fs.cancelled() and fs.exception() is None
        if served and isinstance(conn.sock, DeadlineSocket):
            result = fs.result()
            if not result:
                self._linger(conn)
                return
            if self.alive and result is not _DEFER and (conn.sock.pending or conn.parser.unreader.buf.getvalue()):
                self.enqueue_req(conn)
                return
            if self.alive and self.cfg.threads == 1:
                self._wait_in_poller(conn, result)
                return
        if self.cfg.threads == 1:
            self._unwatch(conn.sock)  # gunicorn closes it, or puts it in the poller anew
        super().finish_request(conn, fs)

    def on_client_socket_readable(self, conn, client):
        """gunicorn's, except that with one thread the connection stays in the poller
        while its request is served (:meth:`_wait_in_poller`)."""
        if self.cfg.threads > 1:
            return super().on_client_socket_readable(conn, client)
        self.keepalived_conns.remove(conn)
        self.enqueue_req(conn)

    def on_pending_socket_readable(self, conn, client):
        """gunicorn's, except that with one thread the connection stays in the poller
        while its request is gathered and served (:meth:`_wait_in_poller`)."""
        if self.cfg.threads > 1:
            return super().on_pending_socket_readable(conn, client)
        self.pending_conns.remove(conn)
        conn.data_ready = True
        self.enqueue_req(conn)

    def _wait_in_poller(self, conn, result) -> None:
        """Let ``conn`` wait for its next bytes, as gunicorn's ``finish_request`` does: a
        served request's connection kept alive, or (``_DEFER``) one whose request is not
        whole yet. gunicorn takes a connection out of the poller while its request is
        served and puts it back after, two system calls a request; with one thread the
        request is served on the poller's thread, so the poller cannot report the
        connection meanwhile, and it stays in: only what the poller calls changes."""
        conn.sock.setblocking(False)
        if result is _DEFER:
            conn.timeout = time.monotonic() + self.cfg.keepalive
            self.pending_conns.append(conn)
            self._watch(conn.sock, partial(self.on_pending_socket_readable, conn))
        else:
            conn.set_timeout()
            self.keepalived_conns.append(conn)
            self._watch(conn.sock, partial(self.on_client_socket_readable, conn))

    def _watch(self, sock, callback) -> None:
        """Have the poller call ``callback`` once ``sock`` is readable: without a system
        call when it is in the poller already (for another callback)."""
        try:
            self.poller.modify(sock, selectors.EVENT_READ, callback)
        except KeyError:  # not in the poller
            self.poller.register(sock, selectors.EVENT_READ, callback)

    def _unwatch(self, sock) -> None:
        try:
            self.poller.unregister(sock)
        except (OSError, KeyError, ValueError):
            pass  # not in the poller

    def handle(self, conn):
        """Read a request without waiting: the bytes there are taken (and given to
        gunicorn's parser later), and until the head and its body are complete the
        connection goes back to the poller, holding no thread. This holds for a new
        connection and for each next request on a kept-alive one (a pipelined request,
        whole or in part, included). A request not complete within READ_DEADLINE seconds
        of its first byte ends the connection; one too large to gather is refused."""
        if not isinstance(conn.sock, DeadlineSocket):
            conn.sock = DeadlineSocket(conn.sock, self.cfg, conn.client, self.body_limit)
            plain = not self.cfg.is_ssl and not negotiation.prior_knowledge_allowed(self.cfg, conn.client)
            if conn.parser is None and plain:  # else gunicorn makes its own parser (TLS, HTTP/2)
                conn.parser = _GatheredParser(self.cfg, conn.sock, conn.client)
        unreader = getattr(conn.parser, "unreader", None)
        if unreader is not None:
            # What gunicorn's parser took past the last request starts the next one.
            conn.sock.unread(unreader.take_buffered())
        state = conn.sock.gather()
        if state == WAITING:
            conn.data_ready = False
            return _DEFER
        if state in (BODY_TOO_LARGE, HEAD_TOO_LARGE):
            self._refuse(conn.sock, state)
            return False
        if state == EXPIRED:
            return False  # the connection is closed
        conn.data_ready = True
        conn.sock.deadline = time.monotonic() + READ_DEADLINE
        return super().handle(conn)

    def _refuse(self, sock: DeadlineSocket, state: str) -> None:
        """Answer a request too large to gather: 413 for its body (in the words of the
        app's own 413) or 431 for its head. What follows on the connection is not read,
        so the connection closes."""
        request_id = sock.header("X-REQUEST-ID")
        if state == BODY_TOO_LARGE:
            status, reason = 413, "Content Too Large"
            headers, body = json_answer({"title": f"{status} {reason}",
                                         "description": f"The body is larger than {self.body_limit} bytes."},
                                        request_id)
        else:
            status, reason = 431, "Request Header Fields Too Large"
            headers, body = json_error(status, reason, request_id)
        try:
            _write_closing(sock, status, reason, headers, body)
        except OSError:
            pass  # the client is gone, or reads nothing: it is closed all the same

    def _linger(self, conn) -> None:
        """Close ``conn`` as gunicorn's ``util.close_graceful`` does (end the writing side,
        drain what the client still sends until it closes, then close), with the poller
        doing the draining: gunicorn's blocks this thread until the client closes."""
        sock = conn.sock.raw
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
            self._watch(sock, partial(self._drain, conn))
        except (OSError, ValueError):
            self._close(conn)
            return
        conn.timeout = time.monotonic() + LINGER
        conn.drained = 0
        self._lingering.append(conn)

    def _drain(self, conn, _watched) -> None:
        try:  # from the socket itself, not waiting (what the poller watches may be its wrapper)
            data = conn.sock.raw.recv(LINGER_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        conn.drained += len(data)
        if not data or conn.drained >= LINGER_BYTES:
            self._lingering.remove(conn)
            self._close(conn)

    def _close(self, conn) -> None:
        self._unwatch(conn.sock)
        self.nr_conns -= 1
        conn.close()

    def murder_keepalived(self, force=False):
        """gunicorn's, except that a kept-alive connection on which a request has come is
        served, not closed, though its keep-alive time has passed (while this worker was
        busy, the poller did not look): only idle ones are closed. Drained connections
        past their ``LINGER`` are closed here too."""
        self._expire(self.keepalived_conns, self.on_client_socket_readable, force)
        while self._lingering and (force or self._lingering[0].timeout <= time.monotonic()):
            self._close(self._lingering.popleft())

    def murder_pending(self):
        """gunicorn's, except that a connection whose request went on coming while this
        worker was busy is gathered further, not closed."""
        self._expire(self.pending_conns, self.on_pending_socket_readable, False)

    def _expire(self, conns: deque, serve: Callable, force: bool) -> None:
        while conns:
            conn = conns[0]
            if not force:
                if conn.timeout > time.monotonic():
                    break
                if isinstance(conn.sock, DeadlineSocket) and conn.sock.has_input():
                    serve(conn, conn.sock)  # which takes it out of ``conns``
                    continue
            conns.popleft()
            self._close(conn)


class _GatheredParser(RequestParser):
    """gunicorn's parser of a connection's requests, whose next request is the head
    :meth:`DeadlineSocket.gather` parsed, when it has one, with its body read from the
    socket after that head (gunicorn's own readers, over the same bytes); else gunicorn's
    parse of the socket, which meets what the gathering parse met (an error, a closed
    connection) again."""

    def mesg_class(self, cfg, unreader, peer_addr, req_number):
        head = self.unreader.sock.hand_over(unreader, req_number)
        return head if head is not None else _Request(cfg, unreader, peer_addr, req_number)

    def finish_body(self, deadline=None, max_bytes=None):
        """gunicorn's, at no cost when the body has all been read (a request without one,
        or one its app read whole): nothing is left to drain, so the socket's timeout is
        not set and set back around a read that would return nothing (two system calls,
        7 % of a bare request's CPU)."""
        body = getattr(self.mesg, "body", None)
        reader = getattr(body, "reader", None)
        if isinstance(reader, LengthReader) and reader.length == 0 and not getattr(body, "failed", False):
            return True
        return super().finish_body(deadline, max_bytes)


class _OutOfBytes(Exception):
    """The bytes gathered so far end before the request does (where a socket would block).
    ``wanted``: how many more the parser asked for, when it knows (a body's), else None."""

    def __init__(self, wanted: int | None):
        super().__init__(wanted)
        self.wanted = wanted


class _BodyTooLarge(Exception):
    """A chunked body's chunks add up to more than the limit."""


class _Gathered(Unreader):
    """gunicorn's unreader over the bytes of ``buffer`` from ``start`` on: running out of
    them raises :class:`_OutOfBytes`."""

    def __init__(self, buffer: bytearray, start: int):
        super().__init__()
        self.start = start
        self._data = bytes(buffer[start:])
        self._size = len(self._data)

    def chunk(self, size_hint=None):
        if not self._data:
            raise _OutOfBytes(size_hint)
        data, self._data = self._data, b""
        return data

    @property
    def position(self) -> int:
        """Where in the buffer the parser has got to (what it took and gave back is not
        counted)."""
        return self.start + self._size - len(self._data) - len(self.buf.getvalue())


class _Chunks(ChunkedReader):
    """gunicorn's reader of a chunked body, counting the body against ``limit`` and noting
    where the chunk being read starts (``mark``, with ``mark_total`` bytes of body before
    it), so that the next look resumes there."""

    def __init__(self, request: Request, source: _Gathered, total: int, limit: int):
        super().__init__(request, source)
        self.source, self.total, self.limit = source, total, limit
        self.mark, self.mark_total, self.in_trailers = source.start, total, False

    def parse_chunk_size(self, unreader, data=None):
        self.mark, self.mark_total = self.source.position - len(data or b""), self.total
        size, rest = super().parse_chunk_size(unreader, data)
        self.total += size
        if self.total > self.limit:
            raise _BodyTooLarge()
        return size, rest

    def parse_trailers(self, unreader, data):
        self.in_trailers = True
        return super().parse_trailers(unreader, data)


class DeadlineSocket:
    """A client socket with the bytes of a request taken ahead (:meth:`gather`) and
    served first, whose reads end (as if the client closed) once ``deadline`` passes.

    Whether the request is whole is gunicorn's parser's answer, run over the bytes
    gathered so far: running out of them means wait for more; an error means the request
    is whole as far as it goes (gunicorn's parser meets the same error and answers it).
    However the request arrives (in one piece or a byte at a time), gathering it costs
    time in proportion to its size: a head (or trailers) is looked at again once an empty
    line may have come or its bytes grew by a quarter, a body of known length once it has
    all come, and a chunked body from the chunk where the last look stopped, once a line
    may have ended.
    """

    def __init__(self, sock, cfg: Config | None = None, peer=None, body_limit: int = BODY_LIMIT):
        self._sock = sock
        self.cfg = cfg if cfg is not None else python_parser(Config())  # LockyWorker pins its own once
        self.peer = peer
        self.body_limit = body_limit
        self.deadline = float("inf")
        self.arrival_deadline: float | None = None  # READ_DEADLINE from the request's first byte
        self.request: Request | None = None  # the head of the last request gathered
        self._whole: Request | None = None  # that head, while it is the one to serve next
        self._whole_end = 0  # where in the buffer that head ends
        self._buffer = bytearray()  # bytes taken from the socket
        self._read = 0  # how many of them the parser has had
        self._gathered = 0  # requests gathered on this connection
        self._restart()

    def __getattr__(self, name):
        return getattr(self._sock, name)

    @property
    def raw(self) -> socket.socket:
        return self._sock

    @property
    def pending(self) -> bool:
        """Whether bytes taken ahead are still to be given to the parser."""
        return self._read < len(self._buffer)

    @property
    def held(self) -> int:
        """How many bytes taken from the socket it still holds."""
        return len(self._buffer)

    def setblocking(self, flag: bool) -> None:
        """Blocking, as gunicorn sets it for the thread that serves a request, with no
        system call when it is so already. The non-blocking mode gunicorn sets before the
        socket waits in the poller is not needed (:meth:`gather` and :meth:`has_input`
        take what has come without waiting, call by call), so the socket stays as it is:
        two system calls fewer a request. What must not wait sets :attr:`raw` itself
        (:func:`_write_closing`)."""
        if flag and self._sock.gettimeout() is not None:
            self._sock.setblocking(True)

    def has_input(self) -> bool:
        """Whether the client has sent something not yet read (looked at without waiting
        or taking it; a closed side is not input)."""
        if self.pending:
            return True
        try:
            return bool(self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # BlockingIOError: nothing has come
            return False

    def header(self, name: str) -> str | None:
        """A field of the last request's head, by its upper-case name."""
        return next((value for field, value in (self.request.headers if self.request else ()) if field == name), None)

    def unread(self, data: bytes) -> None:
        """Put back, before what is still buffered, bytes the parser took past the end of
        its request: the start of the next one."""
        if data:
            del self._buffer[:self._read]
            self._buffer[:0] = data
            self._read = 0

    def hand_over(self, unreader: Unreader, req_number: int) -> Request | None:
        """The head of the request :meth:`gather` found complete, to be served as
        request ``req_number``, its body read through ``unreader`` (gunicorn's, over this
        socket) from where the head ends; None when the last gather parsed no head, or
        it was handed over already."""
        head, self._whole = self._whole, None
        if head is None:
            return None
        del self._buffer[:self._whole_end]  # the head is served: forget its bytes
        self._read = 0
        head.unreader, head.req_number = unreader, req_number
        head.set_body_reader()
        return head

    def _restart(self) -> None:
        """Forget the last request: the next one starts at ``_read``."""
        self._head: Request | None = None  # gunicorn's parse of the head, once whole
        self._head_end = 0  # where in the buffer it ends
        self._at = 0  # where the next look starts: the body, or the chunk being read
        self._total = 0  # body bytes of the chunks before ``_at``
        self._need = 0  # no look before the buffer is this long,
        self._until: bytes | None = None  # nor until this has come after ``_scan``
        self._scan = 0
        self._grown = 0  # or the buffer has grown to this,
        self._limit = 0  # or to this, where it is refused if the request has not ended

    def gather(self) -> str:
        """Take what the client sent so far, without waiting: ``COMPLETE`` once the
        request (head and body) is here, ``WAITING`` until then, ``EXPIRED`` once it has
        taken longer than READ_DEADLINE, or ``BODY_TOO_LARGE`` / ``HEAD_TOO_LARGE``."""
        now = time.monotonic()
        if self.arrival_deadline is None and self.pending:  # pipelined, already here
            self.arrival_deadline = now + READ_DEADLINE
        state = self._look()
        while state == WAITING:
            try:
                chunk = self._sock.recv(READ_SIZE, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                chunk = b""  # let gunicorn meet the error and close
            if not chunk:  # closed: gunicorn's parser sees the end
                state = COMPLETE
                break
            if self.arrival_deadline is None:
                self.arrival_deadline = now + READ_DEADLINE
            self._buffer += chunk
            state = self._look()
        if state != WAITING:
            self.request = self._head
            self._whole = self._head if state == COMPLETE else None
            self._whole_end = self._head_end
            self._gathered += 1
            self._restart()
            self.arrival_deadline = None  # the next request on this connection starts afresh
            return state
        if self.arrival_deadline is not None and now > self.arrival_deadline:
            return EXPIRED
        return WAITING

    def _worth_a_look(self) -> bool:
        size = len(self._buffer)
        if size < self._need:
            return False
        if self._until is None or size >= self._grown or size >= self._limit:
            return True
        found = self._buffer.find(self._until, self._scan) >= 0
        self._scan = max(self._scan, size - len(self._until) + 1)
        return found

    def _look(self) -> str:
        """Run gunicorn's parser over the request's bytes gathered so far (from where the
        last look stopped, in a chunked body)."""
        if not self._worth_a_look():
            return WAITING
        size, chunks = len(self._buffer), None
        try:
            if self._head is None:
                source = _Gathered(self._buffer, self._read)
                self._head = _Request(self.cfg, source, self.peer, self._gathered + 1)
                self._at = self._head_end = source.position
                if isinstance(self._head.body.reader, LengthReader):
                    length = self._head.body.reader.length
                    if length > self.body_limit:
                        return BODY_TOO_LARGE
                    self._need, self._until = self._at + length, None
            if isinstance(self._head.body.reader, LengthReader):
                return COMPLETE if size >= self._need else WAITING
            chunks = _Chunks(self._head, _Gathered(self._buffer, self._at), self._total, self.body_limit)
            while chunks.read(READ_SIZE):
                pass
            return COMPLETE
        except _OutOfBytes as out:
            return self._wait_for(out.wanted, chunks)
        except _BodyTooLarge:
            return BODY_TOO_LARGE
        except Exception:  # noqa: BLE001 - gunicorn's parser refuses the request, and answers it
            return COMPLETE

    def _wait_for(self, wanted: int | None, chunks: _Chunks | None) -> str:
        """Note when the next look is worth it; refuse a head or trailers over HEAD_LIMIT
        and chunk framing out of all proportion to the body."""
        size = len(self._buffer)
        if chunks is not None:
            self._at, self._total = chunks.mark, chunks.mark_total
        start = self._read if self._head is None else self._at
        if wanted:  # a chunk's data: nothing to decide before it has all come
            self._need, self._until = size + wanted, None
        else:  # a line: look again once it may have ended, or the bytes grew by a quarter
            self._until = b"\n" if chunks is not None and not chunks.in_trailers else b"\r\n\r\n"
            self._need, self._scan = size + 1, max(start, size - len(self._until) + 1)
            self._grown = size + (size - start) // 4 + 1
        in_a_head = self._head is None or (chunks is not None and chunks.in_trailers)
        self._limit = start + HEAD_LIMIT if in_a_head else self._read + HEAD_LIMIT + 2 * self.body_limit
        if size >= self._limit:
            return HEAD_TOO_LARGE if in_a_head else BODY_TOO_LARGE
        return WAITING

    def _wait(self) -> bool:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._sock.settimeout(remaining)
        return True

    def recv(self, size, *flags):
        if self.pending:
            end = min(self._read + size, len(self._buffer))
            taken = bytes(self._buffer[self._read:end])
            self._read = end
            if end == len(self._buffer):  # all given: start the buffer afresh
                self._buffer.clear()
                self._read = 0
            return taken
        if not self._wait():
            return b""
        try:
            return self._sock.recv(size, *flags)
        except TimeoutError:
            return b""

    def recv_into(self, buffer, *args):
        data = self.recv(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class StartingApp:
    """Answers 503 until ``build()`` (which makes the real app) succeeds, then hands
    every request to the real app. One thread builds at a time, at most twice a second."""

    def __init__(self, build: Callable[[], Callable]):
        self.build = build
        self.app: Callable | None = None
        self._lock = threading.Lock()
        self._next_try = 0.0
        self._failed = False

    def __call__(self, environ, start_response):
        app = self.app or self._try()
        if app is not None:
            return app(environ, start_response)
        request_id = environ.get("HTTP_X_REQUEST_ID")
        if environ.get("PATH_INFO", "").rstrip("/") == HEALTH_PATH:
            headers, body = json_answer({"status": "unavailable"}, request_id)
        else:
            headers, body = json_error(503, "Service Unavailable", request_id)
        start_response("503 Service Unavailable", headers + [("Retry-After", "1")])
        return [body]

    def _try(self):
        if time.monotonic() < self._next_try or not self._lock.acquire(blocking=False):
            return None
        try:
            if self.app is None:
                self.app = self.build()
                if self._failed:
                    log.warning("the database answers again: this worker now serves requests")
        except Exception as exc:
            self._failed = True
            self._next_try = time.monotonic() + RETRY_EVERY
            log.warning("this worker cannot start its app yet (%s: %s); answering 503",
                        type(exc).__name__, (str(exc).splitlines() or [""])[0][:200])
        finally:
            self._lock.release()
        return self.app


def start_app(build: Callable[[], Callable]) -> Callable:
    """The real app when it can be built now, else a :class:`StartingApp` that keeps trying."""
    starting = StartingApp(build)
    return starting._try() or starting
