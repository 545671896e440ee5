"""What both mailers do to a message before it leaves: the headers RFC 5322 requires."""

from __future__ import annotations

import copy
import email.utils
from email.message import EmailMessage


def finished(message: EmailMessage, mail_from: str | None) -> EmailMessage:
    """``message`` with ``From`` (``mail_from``), ``Date`` and ``Message-ID`` present.

    The caller's message is never changed (it is kept for a retry): when something
    is missing, a copy gets it. ``Message-ID`` uses the domain of ``From``.
    """
    missing_from = message["From"] is None and bool(mail_from)
    missing_date = message["Date"] is None
    missing_id = message["Message-ID"] is None
    if not (missing_from or missing_date or missing_id):
        return message
    message = copy.deepcopy(message)
    if missing_from:
        message["From"] = mail_from
    if missing_date:
        message["Date"] = email.utils.formatdate(usegmt=True)
    if missing_id:
        address = email.utils.parseaddr(str(message["From"] or ""))[1]
        domain = address.rpartition("@")[2]
        if not domain.isascii():
            try:
                domain = domain.encode("idna").decode("ascii")
            except UnicodeError:
                domain = ""
        message["Message-ID"] = email.utils.make_msgid(domain=domain or "localhost")
    return message
