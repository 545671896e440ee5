"""A TCP proxy on 127.0.0.1 that a test can cut and restore: a database going away."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import urlsplit

#: The port each database server listens on when its URL names none.
DEFAULT_PORTS = {"postgres": 5432, "postgresql": 5432, "mysql": 3306, "redis": 6379}


@contextmanager
def proxy_to(url: str) -> Iterator["TcpProxy"]:
    """A :class:`TcpProxy` in front of the server ``url`` names, its ``url`` the same
    database (user, name, options) reached through the proxy."""
    parts = urlsplit(url)
    with TcpProxy(parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme]) as proxy:
        netloc = parts.netloc.rsplit("@", 1)
        userinfo = netloc[0] + "@" if len(netloc) == 2 else ""
        proxy.url = parts._replace(netloc=f"{userinfo}127.0.0.1:{proxy.port}").geturl()
        yield proxy


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``host:port``. :meth:`stop` closes the listener
    and every open connection (clients see the server vanish; new connections are
    refused); :meth:`start` listens again on the same port. :meth:`blackhole` keeps every
    connection open and accepts new ones but passes nothing on, either way (a server
    that hangs); :meth:`restore` ends that, closing what it held."""

    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.port = 0
        self.url = ""
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.holding = False

    def __enter__(self) -> "TcpProxy":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def blackhole(self) -> None:
        self.holding = True

    def restore(self) -> None:
        """Stop holding; the connections held (their data lost) are closed."""
        self.holding = False
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self.holding:  # accepted, never answered
                with self._lock:
                    self._sockets.add(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:
                    _close(client), _close(server)
                    return
                self._sockets.update((client, server))
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.holding:
                    target.sendall(data)
        except OSError:
            pass
        finally:
            _close(source), _close(target)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
