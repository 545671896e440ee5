"""Crash safety: ``kill -9`` of the whole server (master and workers) in the middle of a
stream of writes. After a restart every write the server acknowledged is there, and
the SQLite file passes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from http.client import HTTPException

import pytest

from locky.testing import ADMIN_EMAIL
from support.server import stop

from harden import STRONG, account, fresh_database, http, query, served

pytestmark = pytest.mark.server

WRITERS = 8
WRITE_FOR = 1.5  # seconds of writes before the kill


def integrity(database_url: str) -> str:
    connection = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    try:
        return connection.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        connection.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_acknowledged_writes_survive_kill_9(tmp_path, backend):
    with fresh_database(backend, tmp_path) as url:
        acknowledged: dict[str, list] = {"groups": [], "users": []}
        with served(tmp_path, url, workers=2) as server:
            token = account(server, ADMIN_EMAIL, verified=True)["access_token"]
            running = threading.Event()
            running.set()

            def write(n: int) -> None:
                count = 0
                while running.is_set():
                    count += 1
                    try:
                        if count % 2:
                            reply = http(server, "POST", "/v1/private/groups", {"name": f"g-{n}-{count}"},
                                         token=token, timeout=5)
                            kind = "groups"
                        else:
                            reply = http(server, "POST", "/v1/public/users/register",
                                         {"name": "W", "email": f"w{n}-{count}@example.com", "password": STRONG},
                                         timeout=5)
                            kind = "users"
                    except (OSError, HTTPException):  # the server died under this request: not acknowledged
                        continue
                    if reply.status == 201:
                        acknowledged[kind].append(reply.json)

            threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
            for thread in threads:
                thread.start()
            time.sleep(WRITE_FOR)
            stop(server.process, sig=signal.SIGKILL)  # the whole process group, no shutdown
            running.clear()
            for thread in threads:
                thread.join(30)
        total = sum(len(v) for v in acknowledged.values())
        print(f"\n{backend}: {total} writes acknowledged before kill -9")
        assert total > 20
        if backend == "sqlite":
            assert integrity(url) == "ok"

        with served(tmp_path, url, workers=2) as server:
            token = http(server, "POST", "/v1/public/users/login",
                         {"email": ADMIN_EMAIL, "password": STRONG}).json["access_token"]
            for kind, records in acknowledged.items():
                ids = {r["id"] for r in records}
                stored = {row[0] for row in query(url, f"SELECT id FROM locky_{kind} WHERE del_token = 0")}
                assert ids <= stored, f"{len(ids - stored)} acknowledged {kind} lost"
            for record in acknowledged["groups"][-5:] + acknowledged["users"][-5:]:
                kind = "groups" if "description" in record else "users"
                reply = http(server, "GET", f"/v1/internal/{kind}/{record['id']}", token=token)
                assert reply.status == 200 and reply.json["uuid"] == record["uuid"]
            # Still writable after recovery.
            assert http(server, "POST", "/v1/private/groups", {"name": "after-crash"}, token=token).status == 201
        if backend == "sqlite":
            assert integrity(url) == "ok"
