"""The token-signing secret file beside the SQLite database, and the database file, are
private and the secret is random (issue 13, finding 10).

The secret file (``locky.sqlite.secret``) signs every token: one that is a symbolic link,
owned by another user, or open to the group or to others is refused at startup with a
message saying what to fix; so is a secret that is not random (one character repeated,
only whitespace, a short word typed many times), in the file and in ``LOCKY_JWT_SECRET``.
The SQLite database holds every password hash: it is made 0600, and so are its -wal and
-shm files, whatever the umask.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager

import pytest

from locky.app import create_app
from locky.settings import SettingsError
from locky.testing import TEST_SECRET, make_settings

from harden import STRONG, RecordingClient

RANDOM_SECRET = "kQ3v-9xZr_Tb7LmW2pYcN8sHdF4gJ6aE1uVoBiXt5Rq"  # 43 characters, as Locky makes them


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def start(tmp_path, **overrides):
    """Start an app on ``tmp_path/locky.sqlite`` with no secret given (the file is used)."""
    app = create_app(make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}", jwt_secret=None, **overrides))
    app.close()


def secret_file(tmp_path, text: str = RANDOM_SECRET, mode: int = 0o600):
    path = tmp_path / "locky.sqlite.secret"
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


def refused(tmp_path, *words: str) -> str:
    with pytest.raises(SettingsError) as caught:
        start(tmp_path)
    message = str(caught.value)
    for word in words:
        assert word in message, message
    return message


def test_a_private_secret_file_is_used(tmp_path):
    """The control: a random secret in a 0600 file of the server's user starts."""
    secret_file(tmp_path)
    start(tmp_path)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644, 0o666], ids=lambda mode: f"{mode:04o}")
def test_a_secret_file_open_to_group_or_others_is_refused(tmp_path, mode):
    path = secret_file(tmp_path, mode=mode)
    message = refused(tmp_path, str(path), f"{mode:04o}", f"chmod 600 {path}")
    assert RANDOM_SECRET not in message


def test_a_symlinked_secret_file_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = secret_file(elsewhere)
    (tmp_path / "locky.sqlite.secret").symlink_to(target)
    refused(tmp_path, "locky.sqlite.secret", "symbolic link")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_a_secret_file_of_another_user_is_refused(tmp_path):
    path = secret_file(tmp_path)
    os.chown(path, 65534, -1)
    refused(tmp_path, str(path), "owned by uid 65534", "chown")


@pytest.mark.parametrize("weak", ["a" * 48, "ab" * 24, "abc1234" * 6, "x y " * 12],
                         ids=["one character", "two", "seven", "two and spaces"])
def test_a_secret_file_that_is_not_random_is_refused(tmp_path, weak):
    secret_file(tmp_path, weak)
    message = refused(tmp_path, "locky.sqlite.secret", "different characters")
    assert weak.strip() not in message


@pytest.mark.parametrize("weak", ["a" * 48, " " * 48, "\t \n" * 16, "ab" * 24, "passwordpassword" * 3],
                         ids=["one character", "spaces", "whitespace", "two", "a word repeated"])
def test_a_jwt_secret_that_is_not_random_is_refused(tmp_path, weak):
    with pytest.raises(SettingsError) as caught:
        make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}", jwt_secret=weak)
    message = str(caught.value)
    assert "LOCKY_JWT_SECRET" in message and "different characters" in message and "token_urlsafe" in message
    make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}", jwt_secret=TEST_SECRET)  # the control


def test_a_generated_secret_file_is_private_and_accepted_again(tmp_path):
    with umask(0o022):
        start(tmp_path)
    path = tmp_path / "locky.sqlite.secret"
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    start(tmp_path)  # the second start reads the file it made


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o000], ids=lambda mask: f"umask {mask:03o}")
def test_the_sqlite_database_and_its_wal_files_are_private(tmp_path, mask):
    with umask(mask):
        app = create_app(make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}"))
        try:
            client = RecordingClient(app)
            client.account("private@example.com", STRONG)  # a write: the -wal and -shm files exist
            modes = {name: stat.S_IMODE(os.stat(tmp_path / name).st_mode)
                     for name in ("locky.sqlite", "locky.sqlite-wal", "locky.sqlite-shm")}
        finally:
            app.close()
    assert modes == dict.fromkeys(modes, 0o600), {name: f"{mode:04o}" for name, mode in modes.items()}
