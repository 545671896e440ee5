"""A private PostgreSQL primary with a streaming standby, for the read-replica tests.

``replica_cluster()`` runs ``initdb`` for a primary on a free loopback port,
copies it with ``pg_basebackup -R`` into a hot standby on another port, starts both and
yields their ``postgres://`` URLs (database ``locky``); both stop afterwards. Needs the
PostgreSQL server binaries (Debian's ``postgresql-15`` puts them in
``/usr/lib/postgresql/15/bin``) and psycopg2 (``locky[postgres]``); skips without either
(:func:`unavailable` says why). As root it runs them as ``postgres``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from .server import free_port


def _bin_dir() -> Path | None:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def unavailable() -> str | None:
    """Why no cluster can be started here, or ``None``."""
    if _bin_dir() is None:
        return "the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) are not installed"
    if importlib.util.find_spec("psycopg2") is None:
        return "psycopg2 is not installed: pip install 'locky[postgres]'"
    return None


@dataclass
class Cluster:
    primary_url: str
    standby_url: str
    primary_port: int
    standby_port: int
    standby_dir: Path
    run: object

    def standby_sql(self, sql: str) -> list[tuple]:
        from locky.testing.databases import run_sql

        return run_sql(self.standby_url, sql)

    def stop_standby(self) -> None:
        self.run("pg_ctl", "-D", str(self.standby_dir), "-m", "immediate", "-w", "stop")


@contextmanager
def replica_cluster(listen: tuple[str, ...] = ()) -> Iterator[Cluster]:
    """The cluster; ``listen``: addresses it serves beside 127.0.0.1 (each trusted from its
    /24, for hosts in network namespaces)."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    bin_dir = _bin_dir()
    # Not under pytest's tmp_path: its parents are root's alone, and the servers run as postgres.
    directory = Path(tempfile.mkdtemp(prefix="locky-replicas-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        import pwd

        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]

    def run(program: str, *args: str) -> None:
        subprocess.run(as_postgres + [str(bin_dir / program), *args], check=True, capture_output=True,
                       timeout=120, cwd=directory)

    primary, standby = directory / "primary", directory / "standby"
    primary_port, standby_port = free_port(), free_port()
    options = (f"-c listen_addresses={','.join(('127.0.0.1', *listen))} -c unix_socket_directories="
               " -c fsync=off")
    started: list[Path] = []
    try:
        run("initdb", "-D", str(primary), "-A", "trust", "-U", "postgres", "--no-sync")
        if listen:  # the standby copies this file with the rest
            with open(primary / "pg_hba.conf", "a") as hba:
                for address in listen:
                    hba.write(f"host all all {address.rsplit('.', 1)[0]}.0/24 trust\n")
        run("pg_ctl", "-D", str(primary), "-o", f"-p {primary_port} {options}", "-l",
            str(directory / "primary.log"), "-w", "start")
        started.append(primary)
        run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary_port), "-U", "postgres", "-D", str(standby),
            "-R", "-X", "stream")
        run("pg_ctl", "-D", str(standby), "-o", f"-p {standby_port} {options}", "-l",
            str(directory / "standby.log"), "-w", "start")
        started.append(standby)
        from locky.testing.databases import connect

        admin = connect(f"postgres://postgres@127.0.0.1:{primary_port}/postgres")
        try:
            admin.cursor().execute("CREATE DATABASE locky")
        finally:
            admin.close()
        cluster = Cluster(f"postgres://postgres@127.0.0.1:{primary_port}/locky",
                          f"postgres://postgres@127.0.0.1:{standby_port}/locky",
                          primary_port, standby_port, standby, run)
        deadline = time.monotonic() + 30
        while True:  # the standby has replayed the CREATE DATABASE
            try:
                cluster.standby_sql("SELECT 1")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield cluster
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"{exc.cmd}: {exc.stderr.decode(errors='replace')[-1500:]}")
    finally:
        for data in reversed(started):
            subprocess.run(as_postgres + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True, timeout=60, cwd=directory)
        shutil.rmtree(directory, ignore_errors=True)
