"""Running a real ``locky serve`` process for tests and benchmarks, on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    """A started server: its URL, process and log file."""

    url: str
    process: subprocess.Popen
    log_path: Path
    #: Where the server's ``file`` mailer writes (``LOCKY_MAIL_DIR``).
    mail_dir: Path | None = None

    def request(self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None):
        """``(status, headers, parsed JSON or None)`` of one HTTP request."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, dict(resp.headers), json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, dict(err.headers), json.loads(raw) if raw else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def sign_up(self, email: str, password: str, *, verify: bool = False) -> dict[str, str]:
        """Register ``email``, prove the address when ``verify`` (an admin email makes an
        admin only then), log in: the ``Authorization`` header of its access token."""
        status, _, body = self.request("POST", "/v1/public/users/register",
                                       {"name": email.split("@")[0], "email": email, "password": password})
        assert status == 201, body
        if verify:
            self.verify(email)
        status, _, body = self.request("POST", "/v1/public/users/login", {"email": email, "password": password})
        assert status == 200, body
        return {"Authorization": f"Bearer {body['access_token']}"}

    def verify(self, email: str, timeout: float = 15.0) -> None:
        """Prove ``email`` with the code of the newest verification message the server
        mailed to it (an admin email makes an admin only then)."""
        from locky.testing.mail import MailBox

        message = MailBox(self.mail_dir).wait(email, "verify", timeout=timeout)
        status, _, body = self.request("POST", "/v1/public/users/verify", {"token": MailBox.token(message)})
        assert status == 204, body


def one_service(database_url: str, workdir: Path, **env: str) -> dict[str, str]:
    """The environment of servers that are hosts of one service on ``database_url``:
    one public address (so one token issuer, docs/http/tokens.md) and, as the outbox is
    shared, one mail folder for any host's sender; ``env`` on top."""
    return {"LOCKY_DATABASE_URL": database_url, "LOCKY_PUBLIC_URL": "https://locky.example.com",
            "LOCKY_MAIL_DIR": str(workdir / "mail"), **env}


@contextmanager
def locky_server(
    workdir: Path,
    env: Mapping[str, str] | None = None,
    workers: int = 2,
    port: int | None = None,
    startup_timeout: float = 30.0,
    host: str = "127.0.0.1",
    launcher: Sequence[str] = (),
) -> Iterator[ServerProcess]:
    """Start ``locky serve`` in ``workdir`` with ``env`` added to the environment; wait
    until ``/v1/public/health`` answers; stop it (SIGTERM, then SIGKILL) afterwards.
    ``launcher`` runs it through another command (``ip netns exec NAME``: a host in a
    network namespace of its own, serving on ``host``, an address of that namespace)."""
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"server-{port}.log"
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("LOCKY_MAIL_DIR", str(workdir / "mail"))
    command = [*launcher, sys.executable, "-m", "locky.cli.main", "serve", "--host", host,
               "--port", str(port), "--workers", str(workers)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = ServerProcess(url=f"http://{host}:{port}", process=process, log_path=log_path,
                           mail_dir=Path(full_env["LOCKY_MAIL_DIR"]))
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"locky serve exited with {process.returncode}:\n{server.log()}")
            try:
                if server.request("GET", "/v1/public/health")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"locky serve did not answer in {startup_timeout}s:\n{server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        stop(process)


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Stop the server's whole process group."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)
    except ProcessLookupError:
        pass
