"""What each ``locky serve`` worker process runs: gunicorn's threaded worker, made to
answer in JSON, and an app that starts even while the database is away.

- :class:`LockyWorker` is gunicorn's ``gthread`` worker: connections wait in a poller
  until their request (head and body) is complete (a new connection's first request and
  every next request on a kept-alive one), so slow and idle clients (slowloris,
  keep-alive) hold nothing. With one thread (``LOCKY_THREADS=1``, the default) a
  complete request is served right there on the poller's thread, with no hand-off
  between threads; with more, complete requests run on that many threads, which share
  the process's bounded database pool (``LOCKY_DATABASE_POOL_SIZE``). The errors gunicorn answers
  itself (a bad request line or header, 414, 431, a broken chunked body) are the
  contract's JSON bodies with the usual headers instead of gunicorn's HTML.
- :class:`StartingApp` is the WSGI app a worker serves until ``create_app`` succeeds:
  a worker (re)started during a database outage answers 503 JSON (health
  ``{"status": "unavailable"}``) instead of failing to boot, which would make gunicorn
  stop the whole server; it builds the real app as soon as the database answers.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
import uuid
from collections import deque
from concurrent import futures
from typing import Callable

import orjson
from gunicorn import util
from gunicorn.workers.gthread import _DEFER, ThreadWorker

from locky.middleware import JSON_UTF8, REQUEST_ID, SECURITY_HEADERS

log = logging.getLogger("locky")
HEALTH_PATH = "/v1/public/health"
#: Seconds between two attempts to build the app while the database is away.
RETRY_EVERY = 0.5
#: Seconds a request may take to arrive: its head from its first byte, then its body.
READ_DEADLINE = 10.0
#: A head this long is handed to gunicorn's parser as it is (which answers 414 or 431).
HEAD_LIMIT = 65536
#: Bodies up to this size (announced by Content-Length, or chunked) are gathered before
#: the request is served, unless the worker says otherwise (``locky serve`` gives it
#: LOCKY_MAX_BODY_BYTES, whose default this is: a larger body is the app's to refuse).
BODY_LIMIT = 64 * 1024
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]{1,12})[ \t]*\r\n", re.IGNORECASE)
CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r\n]*chunked[ \t]*\r\n", re.IGNORECASE)
#: A chunk-size line longer than this is malformed: gunicorn's parser gets it (400).
CHUNK_LINE_LIMIT = 1024
WAITING, COMPLETE, EXPIRED = "waiting", "complete", "expired"


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
    """gunicorn's ``util.write_error``, speaking the contract's JSON."""
    headers, body = json_error(status_int, reason)
    head = f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
    util.write_nonblock(sock, head.encode("latin-1") + body)


class LockyWorker(ThreadWorker):
    """gunicorn's threaded worker with JSON error answers, in which a slow or idle client
    holds no thread (see the module docstring and :meth:`handle`)."""

    #: The largest body the poller gathers (``locky serve`` sets LOCKY_MAX_BODY_BYTES):
    #: a larger one is handed on at once, for the app to refuse (413).
    body_limit = BODY_LIMIT

    def init_process(self):
        # This process serves only Locky: every error gunicorn writes itself is JSON.
        util.write_error = _write_json_error
        self._ready: deque = deque()  # complete requests to serve on this thread, in order
        self._serving = False
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
                done: futures.Future = futures.Future()
                try:
                    done.set_result(self.handle(conn))
                except Exception as exc:  # finish_request closes the connection
                    done.set_exception(exc)
                self.finish_request(conn, done)
        finally:
            self._serving = False

    def finish_request(self, conn, fs):
        """gunicorn's, except that a kept-alive connection whose next request was already
        taken from the socket (pipelined, in :class:`DeadlineSocket`'s buffer) is served
        at once: the poller would wait for bytes that have already come."""
        if (self.alive and not fs.cancelled() and fs.exception() is None and fs.result()
                and fs.result() is not _DEFER and isinstance(conn.sock, DeadlineSocket) and conn.sock.pending):
            self.enqueue_req(conn)
            return
        super().finish_request(conn, fs)

    def handle(self, conn):
        """Read a request without waiting: the bytes there are taken (and given to
        gunicorn's parser later), and until the head and its body (``Content-Length`` or
        chunked) are complete the connection goes back to the poller, holding no thread.
        This holds for a new connection and for each next request on a kept-alive one. A
        request not complete within READ_DEADLINE seconds of its first bytes ends the
        connection; what is still read while the request is served (a body over
        ``body_limit``, a pipelined request the parser has begun) must come within
        READ_DEADLINE too."""
        if not isinstance(conn.sock, DeadlineSocket):
            conn.sock = DeadlineSocket(conn.sock, self.body_limit)
        # Bytes the parser already holds (pipelined) are not on the socket: serve them.
        if not conn.initialized or not conn.parser.unreader.buf.getvalue():
            state = conn.sock.gather_head()
            if state == WAITING:
                conn.data_ready = False
                return _DEFER
            if state == EXPIRED:
                return False  # gunicorn closes the connection
            conn.data_ready = True
        conn.sock.deadline = time.monotonic() + READ_DEADLINE
        return super().handle(conn)


class DeadlineSocket:
    """A client socket with the bytes of a request taken ahead (:meth:`gather_head`) and
    served first, whose reads end (as if the client closed) once ``deadline`` passes.

    However the request arrives (in one piece or a byte at a time), gathering it costs
    time in proportion to its size: the bytes are kept in one growing buffer, and each
    look for its end starts where the last one stopped.
    """

    def __init__(self, sock, body_limit: int = BODY_LIMIT):
        self._sock = sock
        self.body_limit = body_limit
        self.deadline = float("inf")
        self.head_deadline: float | None = None
        self._buffer = bytearray()  # bytes taken from the socket
        self._read = 0  # how many of them the parser has had
        self._restart()

    def __getattr__(self, name):
        return getattr(self._sock, name)

    @property
    def pending(self) -> bool:
        """Whether bytes taken ahead are still to be given to the parser."""
        return self._read < len(self._buffer)

    def _restart(self) -> None:
        """Forget where the last request ended: the next one starts at ``_read``."""
        self._scan: int | None = None  # where to go on looking for an empty line
        self._body_at: int | None = None  # where the body starts, once the head is whole
        self._body_end: int | None = None  # where a Content-Length body ends
        self._chunk_at: int | None = None  # the next chunk-size line of a chunked body
        self._chunked_total = 0
        self._trailers = False  # the last chunk has come: looking for the trailers' end

    def gather_head(self) -> str:
        """Take what the client sent so far, without waiting: ``COMPLETE`` once the head
        and its body (announced by ``Content-Length`` or chunked, up to ``body_limit``)
        are here."""
        now = time.monotonic()
        while not self._complete():
            try:
                chunk = self._sock.recv(HEAD_LIMIT, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                chunk = None  # let gunicorn meet the error and close
            if not chunk:  # closed: gunicorn's parser sees the end
                self._restart()
                return COMPLETE
            if self.head_deadline is None:
                self.head_deadline = now + READ_DEADLINE
            self._buffer += chunk
        else:
            self._restart()
            self.head_deadline = None  # the next request on this connection starts afresh
            return COMPLETE
        if self.head_deadline is not None and now > self.head_deadline:
            return EXPIRED
        return WAITING

    def _empty_line(self, start: int) -> int:
        """Where the next empty line (``\\r\\n\\r\\n``) from ``start`` ends, or -1; a
        later call looks only at what came since."""
        found = self._buffer.find(b"\r\n\r\n", start if self._scan is None else self._scan)
        self._scan = None if found >= 0 else max(start, len(self._buffer) - 3)
        return found + 4 if found >= 0 else -1

    def _complete(self) -> bool:
        """Whether the request starting at ``_read`` has come whole, or need not be waited
        for (too large, malformed: gunicorn's parser or the app answers then)."""
        buffer = self._buffer
        if self._body_at is None:
            body_at = self._empty_line(self._read)
            if body_at < 0:
                return len(buffer) - self._read >= HEAD_LIMIT  # gunicorn answers 414 or 431
            self._body_at = body_at
            head = (self._read, body_at - 2)
            if CHUNKED.search(buffer, *head):
                self._chunk_at = self._body_at
            else:
                match = CONTENT_LENGTH.search(buffer, *head)
                length = int(match.group(1)) if match else 0
                # A body over the limit is the app's to refuse (413) without reading it.
                self._body_end = self._body_at + (length if length <= self.body_limit else 0)
        if self._body_end is not None:
            return len(buffer) >= self._body_end
        return self._chunks_complete()

    def _chunks_complete(self) -> bool:
        buffer = self._buffer
        while not self._trailers:
            line_end = buffer.find(b"\r\n", self._chunk_at, self._chunk_at + CHUNK_LINE_LIMIT)
            if line_end < 0:
                return len(buffer) - self._chunk_at >= CHUNK_LINE_LIMIT
            size = bytes(buffer[self._chunk_at:line_end]).split(b";", 1)[0].strip()
            if not size or size.strip(b"0123456789abcdefABCDEF"):
                return True
            length = int(size, 16)
            if length == 0:  # the last chunk; then trailers, and an empty line
                self._trailers, self._chunk_at = True, line_end
                break
            if self._chunked_total + length > self.body_limit:
                return True
            next_at = line_end + 2 + length + 2  # the size line, the data, its CRLF
            if next_at > len(buffer):
                return False
            self._chunked_total += length
            self._chunk_at = next_at
        if self._empty_line(self._chunk_at) >= 0:
            return True
        return len(buffer) - self._chunk_at >= HEAD_LIMIT

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
