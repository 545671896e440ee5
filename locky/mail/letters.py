"""The messages Locky sends (docs/http/accounts.md): what they say, as RFC 5322 messages.

Every message is plain text with its code on a line of its own, ``Token: <code>``, so
a person can copy it and a program can find it; with ``LOCKY_PUBLIC_URL`` set it also
carries a link to the console page that takes the code. The code travels in the link's
fragment (after ``#``), which browsers never send to a server: it stays out of access
logs and ``Referer`` headers. ``X-Locky-Purpose`` names what the message is for.

Nothing a caller chose is written into a message except the recipient's own address:
anyone can register, or ask mail for, an address that is not theirs, so the account's
name (whatever the registrant typed) must not greet the address's owner or lead the
text; every message opens with the same fixed words.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import quote

VERIFY, RESET = "verify", "reset"
#: The notice that a password was reset: it carries no code (a reset's last step).
RESET_DONE = "reset-done"
#: Letters that tell, and carry no code.
NOTICES = frozenset({RESET_DONE})

SUBJECTS = {
    VERIFY: "Confirm your email address",
    RESET: "Reset your password",
    RESET_DONE: "Your password was reset",
}

BODIES = {
    VERIFY: (
        "Hello,\n\n"
        "please confirm that {email} is your email address by entering this code\n"
        "(it expires in {ttl}):\n\n"
        "Token: {code}\n"
        "{link}\n"
        "If you did not ask for this, ignore this message.\n"
    ),
    RESET: (
        "Hello,\n\n"
        "someone (we hope you) asked to reset the password of the account {email}.\n"
        "Enter this code with your new password (it expires in {ttl}):\n\n"
        "Token: {code}\n"
        "{link}\n"
        "If you did not ask for this, ignore this message: your password stays as it is.\n"
    ),
    RESET_DONE: (
        "Hello,\n\n"
        "the password of the account {email} was just reset with a code sent to this address,\n"
        "and every sign-in to the account was ended.\n\n"
        "If that was not you, someone can read this mailbox: secure it, reset the password\n"
        "again, and tell your administrator.\n"
    ),
}

PAGES = {VERIFY: "verify", RESET: "reset-password"}


def compose(purpose: str, *, to: str, code: str | None, ttl: int, sender: str,
            public_url: str | None) -> EmailMessage:
    """The message of ``purpose`` to ``to``: ``verify`` or ``reset`` carrying ``code``,
    or a notice (:data:`NOTICES`, ``code`` ``None``)."""
    link = ""
    if public_url and purpose not in NOTICES:
        link = f"\nOr open: {public_url}/console/#/{PAGES[purpose]}?token={quote(code, safe='')}\n"
    message = EmailMessage()
    message["Subject"] = SUBJECTS[purpose]
    message["From"] = sender
    message["To"] = to
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain="locky")
    message["X-Locky-Purpose"] = purpose
    body = BODIES[purpose].format(email=to, code=code, link=link, ttl=_duration(ttl))
    message.set_content(body, cte=_transfer_encoding(body))
    return message


def _transfer_encoding(body: str) -> str | None:
    """``7bit`` for ASCII text whose lines fit RFC 5322's 998 characters: the text goes
    as written, so the link and the code can be copied from the raw message (a ``.eml``
    file) too. Left to the ``email`` package otherwise, which would pick
    quoted-printable for any line over 78 characters and break the link with ``=``
    soft line breaks and ``=3D``."""
    if body.isascii() and all(len(line) <= 998 for line in body.splitlines()):
        return "7bit"
    return None


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours} hour{'s' if hours != 1 else ''}"
    minutes = max(1, seconds // 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
