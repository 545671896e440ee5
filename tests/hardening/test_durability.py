"""Issue 31, finding 5: what Locky acknowledged on SQLite survives a crash.

- Every connection of the app's SQLite database syncs the WAL at each commit
  (``synchronous=FULL``): with NORMAL a power loss drops commits already answered.
- The secret file beside the database is written whole to a temporary file, synced,
  linked into place and its directory synced: a process killed while making it leaves no
  file, or the whole secret, never an empty file (which made the service refuse to
  start, and deleting it, as advised, left the sealed signing key unusable).
- An empty secret file (left by an older release) is refused with commands that work.
- Workers making the file at once agree on one secret.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest
from pony.orm import db_session

from locky.app import create_app
from locky.settings import SettingsError
from locky.testing import LockyClient, make_settings

SECRET_NAME = "locky.sqlite.secret"


def settings_for(tmp_path, **overrides):
    return make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}", jwt_secret=None, **overrides)


def run_python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_apps_sqlite_connections_sync_every_commit(tmp_path):
    app = create_app(settings_for(tmp_path), background=False)
    try:
        client = LockyClient(app)
        client.account("ada@example.com")  # the connection has served writes
        database = app.context.storage.db
        with db_session:
            synchronous = database.execute("PRAGMA synchronous").fetchone()[0]
            journal = database.execute("PRAGMA journal_mode").fetchone()[0]
        assert (synchronous, journal) == (2, "wal"), "synchronous must be FULL (2) in WAL mode"
    finally:
        app.close()


def test_the_secret_is_synced_before_it_is_linked_into_place(tmp_path, monkeypatch):
    """The sequence on a real file system: a 0600 temporary file beside it holds the
    whole secret and is synced before the final name appears; the directory is synced
    after; no temporary file stays."""
    path = tmp_path / SECRET_NAME
    seen: list[tuple] = []
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd):
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            seen.append(("fsync", "dir", os.path.samestat(info, os.stat(tmp_path))))
        else:
            seen.append(("fsync", "file", stat.S_IMODE(info.st_mode)))
        return real_fsync(fd)

    def link(source, destination, **kwargs):
        source_text = open(source).read()
        seen.append(("link", os.path.dirname(source) == str(tmp_path), bool(source_text.strip()),
                     stat.S_IMODE(os.stat(source).st_mode), os.path.exists(destination)))
        return real_link(source, destination, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    secret = settings_for(tmp_path).with_secret().jwt_secret
    assert seen == [("fsync", "file", 0o600), ("link", True, True, 0o600, False), ("fsync", "dir", True)], seen
    assert path.read_text().strip() == secret and len(secret) >= 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [SECRET_NAME]


#: A first start killed (SIGKILL) at the moment it writes the secret's bytes: the file
#: is made, nothing is in it yet.
KILLED_WHILE_WRITING = """
    import os, signal, sys
    from locky.testing import make_settings

    real_fdopen = os.fdopen

    class Killed:
        def __init__(self, handle):
            self.handle = handle
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return False
        def write(self, text):
            os.kill(os.getpid(), signal.SIGKILL)
        def __getattr__(self, name):
            return getattr(self.handle, name)

    os.fdopen = lambda fd, *args, **kwargs: Killed(real_fdopen(fd, *args, **kwargs))
    make_settings("sqlite:///" + sys.argv[1], jwt_secret=None).with_secret()
"""


def test_a_start_killed_while_writing_the_secret_leaves_no_empty_secret_file(tmp_path):
    database = tmp_path / "locky.sqlite"
    killed = run_python(KILLED_WHILE_WRITING, str(database))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    path = tmp_path / SECRET_NAME
    assert not path.exists() or path.read_text().strip(), "an empty secret file is left behind"
    # The next start makes the secret and serves.
    app = create_app(settings_for(tmp_path), background=False)
    try:
        client = LockyClient(app)
        assert client.account("ada@example.com").headers
    finally:
        app.close()
    assert len(path.read_text().strip()) >= 64


def test_an_empty_secret_file_says_what_to_do_and_the_advice_works(tmp_path):
    """As an older release's crash left it: the database holds a signing key sealed with
    a secret that never reached the disk."""
    settings = settings_for(tmp_path)
    app = create_app(settings, background=False)
    LockyClient(app).account("ada@example.com")
    app.close()
    path = tmp_path / SECRET_NAME
    path.write_text("")

    with pytest.raises(SettingsError) as caught:
        create_app(settings, background=False)
    message = str(caught.value)
    assert str(path) in message and "empty" in message and "backup" in message, message
    commands = re.search(r"`(rm .+?)`", message)
    assert commands, message

    done = subprocess.run(["sh", "-c", commands.group(1)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    app = create_app(settings, background=False)  # the advised fix: it starts, and serves
    try:
        client = LockyClient(app)
        tokens = client.login("ada@example.com")
        me = client.simulate_get("/v1/internal/users/me",
                                 headers={"Authorization": f"Bearer {tokens['access_token']}"})
        assert me.status_code == 200, me.text
    finally:
        app.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_text().strip()) >= 64


#: One "worker": waits for the common start time, then makes (or reads) the secret.
WORKER = """
    import sys, time
    from locky.testing import make_settings

    settings = make_settings("sqlite:///" + sys.argv[1], jwt_secret=None)
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    print(settings.with_secret().jwt_secret)
"""


# One trial in every run, the race again twice under `pytest --all`.
@pytest.mark.parametrize("trial", [pytest.param(t, marks=pytest.mark.slow if t else ()) for t in range(3)])
def test_workers_starting_together_agree_on_one_secret(tmp_path, trial):
    workers = 8
    start = time.time() + 2.0  # after every interpreter has imported Locky
    processes = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER), str(tmp_path / "locky.sqlite"),
                                   str(start)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(workers)]
    outputs = [process.communicate(timeout=60) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in outputs]
    secrets = {out.strip() for out, _ in outputs}
    assert len(secrets) == 1, f"{len(secrets)} different secrets"
    assert secrets == {(tmp_path / SECRET_NAME).read_text().strip()}
    assert sorted(p.name for p in tmp_path.iterdir()) == [SECRET_NAME]
