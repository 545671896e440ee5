"""A real HTTP receiver for webhook tests: a ``ThreadingHTTPServer`` on 127.0.0.1 in a
thread, which records every request (method, path, headers, raw body) and answers a
scripted sequence of statuses, then ``default`` for ever.

    with Receiver(script=[500], default=200) as receiver:
        ...subscribe receiver.url("/hook")...
        [request] = receiver.wait_for(lambda seen: len(seen) >= 1)

``Receiver(port=...)`` listens on a given port (one that was closed until then: a
receiver that "comes back"); :func:`closed_port` gives a port where nothing listens.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

from support.server import free_port


@dataclass
class Received:
    """One request the receiver got, and what it answered."""

    method: str
    path: str
    headers: Message  # case-insensitive get()
    body: bytes
    status: int
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def event_id(self) -> str | None:
        return self.headers.get("Locky-Event-Id")

    @property
    def header_dict(self) -> dict[str, str]:
        return dict(self.headers.items())


class Receiver:
    """Records requests; answers ``script`` statuses in order, then ``default``."""

    def __init__(self, script: Iterable[int] = (), default: int = 200, port: int = 0, delay: float = 0.0):
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._script = list(script)
        self.default = default
        self.delay = delay
        self.requests: list[Received] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                receiver._handle(self)

            do_GET = do_PUT = do_DELETE = do_PATCH = do_POST  # recorded too: a sender must POST

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"webhook-receiver-{self.port}", daemon=True)
        self._thread.start()

    # -- answering ------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if self.delay:
            time.sleep(self.delay)
        with self._changed:
            status = self._script.pop(0) if self._script else self.default
            self.requests.append(Received(handler.command, handler.path, handler.headers, body, status))
            self._changed.notify_all()
        answer = b'{"ok": true}' if 200 <= status < 300 else b'{"ok": false}'
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(answer)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(answer)
        handler.close_connection = True

    def answer(self, *script: int, default: int | None = None) -> None:
        """Answer ``script`` next, then ``default`` (unchanged when not given)."""
        with self._lock:
            self._script = list(script)
            if default is not None:
                self.default = default

    # -- looking ------------------------------------------------------------------------

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def seen(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def event_ids(self) -> list[str]:
        return [r.event_id for r in self.seen()]

    def wait_for(self, predicate: Callable[[list[Received]], Any], timeout: float = 25.0,
                 what: str = "the expected deliveries") -> list[Received]:
        """Wait until ``predicate(requests so far)`` is true; the requests then. Fails
        with what was received after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                seen = list(self.requests)
                if predicate(seen):
                    return seen
                left = deadline - time.monotonic()
                if left <= 0:
                    got = [(r.method, r.path, r.event_id, r.status) for r in seen]
                    raise AssertionError(f"timed out after {timeout}s waiting for {what}; received {got}")
                self._changed.wait(min(left, 0.5))

    def wait_for_events(self, event_ids: Iterable[str], timeout: float = 25.0) -> list[Received]:
        """Wait until every one of ``event_ids`` was received (answered with any status)."""
        wanted = set(event_ids)
        return self.wait_for(lambda seen: wanted <= {r.event_id for r in seen}, timeout,
                             what=f"events {sorted(wanted)}")

    def quiet(self, seconds: float) -> list[Received]:
        """Requests that arrive within the next ``seconds`` (for "nothing more comes")."""
        before = len(self.seen())
        time.sleep(seconds)
        return self.seen()[before:]

    # -- the end --------------------------------------------------------------------------

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def __enter__(self) -> "Receiver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (a receiver that is down)."""
    return free_port()
