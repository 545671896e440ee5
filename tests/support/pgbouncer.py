"""A PgBouncer in transaction pooling mode in front of a test PostgreSQL database.

``pgbouncer(url, server_connections=N)`` starts one on a free loopback port with at
most ``N`` server connections per database and user, yields its URL and stops it.
Transaction pooling hands each transaction the next free server connection: a client
that keeps anything on its session (``SET``, a read-only session, SQL ``PREPARE``,
``LISTEN``) finds it gone, or leaves it to another client. Skips when PgBouncer is not
installed (``.ci/run`` installs it from the OS packages).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import urlsplit

import pytest

PGBOUNCER = shutil.which("pgbouncer") or next(
    (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(path)), None)


@contextmanager
def pgbouncer(url: str, *, server_connections: int, clients: int = 200,
              listen: tuple[str, ...] = ()) -> Iterator[str]:
    """The URL of a transaction-pooling PgBouncer in front of ``url``'s database;
    ``listen``: addresses it serves beside 127.0.0.1."""
    if PGBOUNCER is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    server = urlsplit(url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    directory = tempfile.mkdtemp(prefix="locky-pgbouncer-")
    user = server.username or "postgres"
    with open(os.path.join(directory, "userlist.txt"), "w") as users:
        users.write(f'"{user}" ""\n')
    with open(os.path.join(directory, "pgbouncer.ini"), "w") as config:
        config.write(
            f"[databases]\n* = host={server.hostname} port={server.port or 5432}\n"
            f"[pgbouncer]\nlisten_addr = {','.join(('127.0.0.1', *listen))}\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {directory}/userlist.txt\n"
            f"pool_mode = transaction\ndefault_pool_size = {server_connections}\n"
            f"max_client_conn = {clients}\nlogfile = {directory}/pgbouncer.log\n"
        )
    command = [PGBOUNCER, os.path.join(directory, "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        import pwd

        owner = pwd.getpwnam("postgres")
        for name in os.listdir(directory) + [""]:
            os.chown(os.path.join(directory, name), owner.pw_uid, owner.pw_gid)
        command = ["runuser", "-u", "postgres", "--"] + command
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None:
                    pytest.fail(f"pgbouncer did not start: {_log(directory)}")
                time.sleep(0.05)
        yield server._replace(netloc=f"{user}@127.0.0.1:{port}").geturl()
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


def _log(directory: str) -> str:
    try:
        with open(os.path.join(directory, "pgbouncer.log")) as log:
            return log.read()[-2000:]
    except OSError:
        return "(no log)"
