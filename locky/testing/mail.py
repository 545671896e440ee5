"""Reading what the ``file`` mailer wrote: for tests of flows that send mail."""

from __future__ import annotations

import email
import email.policy
import re
import time
from email.message import EmailMessage
from pathlib import Path

TOKEN_LINE = re.compile(r"^Token: (\S+)\r?$", re.MULTILINE)


class MailBox:
    """The ``.eml`` files of one mail directory, oldest first (their names sort by time)."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)

    def messages(self, to: str | None = None, purpose: str | None = None) -> list[EmailMessage]:
        """Every message written so far, oldest first; only those to ``to`` and of
        ``purpose`` (``verify``, ``reset``: the ``X-Locky-Purpose`` header) when given."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob("*.eml")):
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            if to is not None and message["To"] != to:
                continue
            if purpose is not None and message["X-Locky-Purpose"] != purpose:
                continue
            found.append(message)
        return found

    def wait(self, to: str, purpose: str | None = None, count: int = 1, timeout: float = 10.0) -> EmailMessage:
        """The newest message to ``to`` (of ``purpose``) once at least ``count`` exist;
        ``AssertionError`` after ``timeout`` seconds (the sender runs in the background)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.messages(to, purpose)
            if len(found) >= count:
                return found[-1]
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(found)} of {count} {purpose or ''} message(s) to {to}"
                                     f" in {self.directory} after {timeout} s")
            time.sleep(0.02)

    @staticmethod
    def token(message: EmailMessage) -> str:
        """The code on the message's ``Token: <code>`` line."""
        found = TOKEN_LINE.search(message.get_body(("plain",)).get_content())
        assert found, "the message has no Token: line"
        return found.group(1)
