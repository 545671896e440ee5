"""Machinery of the hardening suite: real servers, fresh databases, raw HTTP, and the
evidence (response bodies, log text) that the secrets scan reads after every test.

Every response a hardening test sees, in-process or from a real ``locky serve``, is
recorded in :data:`EVIDENCE`; so is the log of every server it started and everything
the ``locky`` loggers said in-process (``caplog``). After each test the autouse fixture
``no_secret_leaks`` (conftest.py) fails the test when a password or token the test used, or any
bcrypt hash, appears where it must not (see :meth:`Evidence.leaks`).
"""

from __future__ import annotations

from http.client import HTTPConnection
import json
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import urlsplit

import pytest

from locky.testing import ADMIN_EMAIL, TEST_SECRET, Account, LockyClient, MailBox
from locky.testing.databases import run_sql, scratch_database, unreachable
from support.server import ServerProcess, locky_server

#: The PostgreSQL server of the suite's ``postgres`` cases: as for every backend test
#: (tests/backends.py), only one named by ``LOCKY_TEST_POSTGRES_URL``, never a guess.
PG_URL = os.environ.get("LOCKY_TEST_POSTGRES_URL", "").strip()
REQUIRE_BACKENDS = os.environ.get("LOCKY_REQUIRE_BACKENDS", "").strip().lower() in ("1", "true", "yes")

#: A bcrypt hash as bcrypt writes it; none may ever leave the server.
BCRYPT_HASH = re.compile(r"\$2[abxy]\$\d\d\$[./A-Za-z0-9]{53}")
#: Anything shaped like a JWT (header and payload are base64 JSON objects).
JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*")
#: Passwords the suite uses (besides locky.testing's default one).
STRONG = "hardening-Pass-0451"
OTHER = "another-Pass-9917"


# ---------------------------------------------------------------------------
# Evidence for the secrets scan
# ---------------------------------------------------------------------------


@dataclass
class Seen:
    where: str
    status: int
    text: str


@dataclass
class Evidence:
    """What the suite saw: response bodies, log texts, and the secrets it knows."""

    bodies: list[Seen] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def learn_request(self, body: Any) -> None:
        if not isinstance(body, dict):
            return
        for key in ("password", "current_password"):
            if isinstance(body.get(key), str) and len(body[key]) >= 8:
                self.secrets.add(body[key])
        # Codes of the account lifecycle; a 6-digit TOTP code is left out (six digits
        # turn up by chance in any log line with a timestamp or a duration).
        for key in ("refresh_token", "token", "mfa_token", "code"):
            if isinstance(body.get(key), str) and len(body[key]) >= 16:
                self.secrets.add(body[key])

    def response(self, where: str, status: int, text: str) -> None:
        with self.lock:
            self.bodies.append(Seen(where, status, text))
            if 200 <= status < 300 and "_token" in text:
                try:
                    data = json.loads(text)
                except ValueError:
                    return
                if isinstance(data, dict):
                    for key in ("access_token", "refresh_token", "mfa_token"):
                        if isinstance(data.get(key), str):
                            self.secrets.add(data[key])
            if 200 <= status < 300 and ('"secret"' in text or '"recovery_codes"' in text):
                try:
                    data = json.loads(text)
                except ValueError:
                    return
                if isinstance(data, dict):
                    if isinstance(data.get("secret"), str):
                        self.secrets.add(data["secret"])
                    self.secrets.update(c for c in data.get("recovery_codes", ()) if isinstance(c, str))

    def log(self, where: str, text: str) -> None:
        with self.lock:
            self.logs.append((where, text))

    def learn(self, secret: str) -> None:
        """A secret the test came by another way (a code read from a mail message)."""
        with self.lock:
            self.secrets.add(secret)

    def mark(self) -> tuple[int, int]:
        return len(self.bodies), len(self.logs)

    def leaks(self, since: tuple[int, int] = (0, 0)) -> list[str]:
        """Every place a secret shows: a bcrypt hash in any body or log line; a known
        password or token, or anything JWT-shaped, in an error body or a log line."""
        found: list[str] = []
        known = sorted(self.secrets, key=len, reverse=True)
        for seen in self.bodies[since[0]:]:
            if BCRYPT_HASH.search(seen.text):
                found.append(f"a bcrypt hash in the {seen.status} body of {seen.where}")
            if seen.status >= 400:
                if JWT_SHAPE.search(seen.text):
                    found.append(f"a token in the {seen.status} body of {seen.where}: {seen.text[:200]}")
                found += [f"a secret in the {seen.status} body of {seen.where}" for s in known if s in seen.text]
        for where, text in self.logs[since[1]:]:
            found += scan_text(where, text, known)
        return found


def scan_text(where: str, text: str, secrets) -> list[str]:
    """Every secret that shows in ``text``: a bcrypt hash, anything JWT-shaped, or one of
    ``secrets`` (known passwords and tokens)."""
    found = []
    if BCRYPT_HASH.search(text):
        found.append(f"a bcrypt hash in {where}")
    token = JWT_SHAPE.search(text)
    if token:
        found.append(f"a token in {where}: {token.group()[:40]}...")
    found += [f"a password or token in {where}" for secret in secrets if secret in text]
    return found


EVIDENCE = Evidence(secrets={TEST_SECRET})


class RecordingClient(LockyClient):
    """``locky.testing``'s client, recording every response for the secrets scan."""

    def simulate_request(self, method="GET", path="/", *args, **kwargs):
        EVIDENCE.learn_request(kwargs.get("json"))
        result = super().simulate_request(method, path, *args, **kwargs)
        EVIDENCE.response(f"{method} {path}", result.status_code, result.text)
        return result

    def verified_account(self, email: str, password: str = STRONG, name: str | None = None) -> Account:
        """``account(email, password, name, verified=True)`` for an address that may have
        had accounts before (deleted since): the code comes from the message the new
        registration sent, never from an older one still in the mail folder."""
        sent = len(self.mailbox.messages(email, "verify"))
        user = self.register(email, password, name)
        message = self.mailbox.wait(email, "verify", count=sent + 1)
        verified = self.simulate_post("/v1/public/users/verify", json={"token": MailBox.token(message)})
        assert verified.status_code == 204, verified.text
        tokens = self.login(email, password)
        return Account(id=user["id"], uuid=user["uuid"], email=user["email"], password=password,
                       access_token=tokens["access_token"], refresh_token=tokens["refresh_token"],
                       body={**user, "email_verified": True})


# ---------------------------------------------------------------------------
# Raw HTTP against a real server
# ---------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text) if self.text else None

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


def http(server: ServerProcess | str, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
         headers: Mapping[str, str] | None = None, token: str | None = None, timeout: float = 60) -> Reply:
    """One request over a fresh connection; ``body`` is sent as JSON, ``raw`` as is."""
    url = urlsplit(server if isinstance(server, str) else server.url)
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
        EVIDENCE.learn_request(body)
    connection = HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
        reply = Reply(response.status, dict(response.getheaders()), text)
    finally:
        connection.close()
    EVIDENCE.response(f"{method} {path} (server)", reply.status, reply.text)
    return reply


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a test server: fixed secret, cheap hashing, one admin email."""
    return {
        "LOCKY_DATABASE_URL": database_url,
        "LOCKY_JWT_SECRET": TEST_SECRET,
        "LOCKY_BCRYPT_ROUNDS": "4",
        "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL,
        **extra,
    }


@contextmanager
def served(workdir: Path, database_url: str, workers: int = 2, **extra: str) -> Iterator[ServerProcess]:
    """A real ``locky serve`` on 127.0.0.1; its log joins the evidence when it stops."""
    server = None
    try:
        with locky_server(workdir, server_env(database_url, **extra), workers=workers) as server:
            yield server
    finally:
        if server is not None:
            EVIDENCE.log(f"the log of the server at {server.url}", server.log())


def account(server: ServerProcess, email: str, password: str = STRONG, name: str | None = None,
            verified: bool = False) -> dict:
    """Register ``email`` on a real server (and prove it, when ``verified``: an admin
    email makes an admin only then) and log it in: the login's token body."""
    reply = http(server, "POST", "/v1/public/users/register",
                 {"name": name or email.split("@")[0], "email": email, "password": password})
    assert reply.status == 201, reply.text
    if verified:
        verify(server, email)
    reply = http(server, "POST", "/v1/public/users/login", {"email": email, "password": password})
    assert reply.status == 200, reply.text
    return reply.json


def verify(server: ServerProcess, email: str, count: int = 1, timeout: float = 15.0) -> None:
    """Prove ``email`` with the code of the newest of at least ``count`` verification
    messages the server mailed to it; the code (sent through :func:`http`) joins the
    secrets the scan looks for."""
    message = MailBox(server.mail_dir).wait(email, "verify", count=count, timeout=timeout)
    reply = http(server, "POST", "/v1/public/users/verify", {"token": MailBox.token(message)})
    assert reply.status == 204, reply.text


# ---------------------------------------------------------------------------
# Databases
# ---------------------------------------------------------------------------


def pg_unreachable() -> str | None:
    return unreachable(PG_URL) if PG_URL else "LOCKY_TEST_POSTGRES_URL is not set"


@contextmanager
def fresh_database(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database: a file in ``tmp_path``, or a PostgreSQL database
    created for this test (on the server of ``LOCKY_TEST_POSTGRES_URL``) and dropped after."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'locky.sqlite'}"
        return
    reason = pg_unreachable()
    if reason:
        if REQUIRE_BACKENDS:
            pytest.fail(reason + " (LOCKY_REQUIRE_BACKENDS=1)")
        pytest.skip(reason)
    with scratch_database(PG_URL, prefix="locky_hardening_") as scratch:
        yield scratch.url


#: Rows of one SQL query straight from the database, under the service's feet.
query = run_sql
