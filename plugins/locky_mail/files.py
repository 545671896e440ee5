"""The ``file`` mailer: one RFC 5322 ``.eml`` file per message in a folder.

For development and for sites whose own tooling picks the files up. Each file is
written to a temporary name beside its final one (mode 0600) and only then given
its final name ``<time_ns>-<8 hex>.eml``, so a reader listing ``*.eml`` never sees a
half-written message, and the names sort by the time they were written.
"""

from __future__ import annotations

import email.policy
import logging
import os
import secrets
import time
from email.message import EmailMessage
from pathlib import Path

from .headers import finished

log = logging.getLogger("locky.mail")

#: Enough digits for ``time.time_ns()`` until the year 2286 and beyond, so that names
#: compared as text sort as numbers.
_TIME_DIGITS = 20


class FileMailer:
    """Writes each message to ``directory`` (made with mode 0700 when missing)."""

    def __init__(self, directory: str | os.PathLike, mail_from: str | None = None):
        self.directory = Path(directory)
        self.mail_from = mail_from

    def __repr__(self) -> str:
        return f"FileMailer({str(self.directory)!r})"

    def send(self, message: EmailMessage) -> None:
        # Lines end in LF, as in a Maildir: the convention for mail stored in a file
        # (``email.message_from_bytes`` gives back the same body); headers are
        # RFC 2047-encoded and folded as on the wire.
        data = finished(message, self.mail_from).as_bytes(policy=email.policy.default)
        self._make_directory()
        path = self._write(data)
        log.debug("wrote a message to %s", path)

    def _make_directory(self) -> None:
        if self.directory.is_dir():
            return
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(self.directory, 0o700)
        except FileExistsError:
            return  # another process (or thread) made it first
        os.chmod(self.directory, 0o700)  # whatever the umask

    def _write(self, data: bytes) -> Path:
        while True:
            name = f"{time.time_ns():0{_TIME_DIGITS}d}-{secrets.token_hex(4)}.eml"
            final = self.directory / name
            temporary = self.directory / f".{name}.tmp"
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0), 0o600)
            except FileExistsError:
                continue  # the same name drawn twice: draw again
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                if not self._publish(temporary, final):
                    continue  # ``final`` exists already: another name (finally removes the temporary)
            finally:
                try:
                    os.unlink(temporary)
                except FileNotFoundError:
                    pass  # renamed to its final name
            self._sync_directory()
            return final

    @staticmethod
    def _publish(temporary: Path, final: Path) -> bool:
        """Give the written file its final name; ``False`` when that name is taken.

        A hard link never replaces an existing file, so two processes drawing the same
        name cannot overwrite each other's message. Where the file system has no hard
        links, ``os.replace`` (atomic too) does it, after a check for the name.
        """
        try:
            os.link(temporary, final)
            return True
        except FileExistsError:
            return False
        except OSError:
            pass  # no hard links here (some network and FUSE file systems)
        if os.path.lexists(final):
            return False
        os.replace(temporary, final)
        return True

    def _sync_directory(self) -> None:
        """Make the new name durable (POSIX only; best effort)."""
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
