"""Helpers for the command-line client tests: a real Locky server on a real socket,
and a runner that calls a client's ``main(argv)`` in-process.

The server is the app from ``locky.testing``'s ``locky_app`` fixture, served by
:mod:`wsgiref` on ``127.0.0.1`` and an ephemeral port in a daemon thread.
"""

from __future__ import annotations

import argparse

import io
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from locky.cli.clients import admin, anonymous, app

MAINS: dict[str, Callable[..., int]] = {"anonymous": anonymous.main, "app": app.main, "admin": admin.main}
PASSWORD = "correct horse battery"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # keep stderr for the client
        pass


class LiveServer:
    """A WSGI app listening on 127.0.0.1 until :meth:`stop`."""

    def __init__(self, wsgi_app: Any):
        self.httpd: WSGIServer = make_server("127.0.0.1", 0, wsgi_app, handler_class=_QuietHandler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def unused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        import json

        return json.loads(self.out)


class Cli:
    """Runs ``locky-<audience> ARGS`` in-process and captures its output."""

    def __init__(self, capsys: Any, monkeypatch: Any):
        self.capsys = capsys
        self.monkeypatch = monkeypatch

    def __call__(self, audience: str, *argv: str, stdin: str = "") -> Result:
        self.capsys.readouterr()  # drop anything earlier
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = MAINS[audience](list(argv))
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, audience: str, *argv: str, stdin: str = "") -> Result:
        """Like calling it, but assert success."""
        result = self(audience, *argv, stdin=stdin)
        assert result.code == 0, result
        return result

    def login(self, audience: str, email: str, password: str = PASSWORD) -> Result:
        return self.ok(audience, "login", "--email", email, "--password-stdin", stdin=password + "\n")

    def register(self, name: str, email: str, password: str = PASSWORD) -> dict[str, Any]:
        result = self.ok("anonymous", "register", "--json", "--name", name, "--email", email,
                         "--password-stdin", stdin=password + "\n")
        return result.json()


def command_paths(parser, path=()):
    """Every command of an argparse tree, as the words that reach it ("", "users", "users list")."""
    yield " ".join(path)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] == name:
                    yield from command_paths(sub, path + (name,))
