"""The ``smtp`` mailer: hands each message to an SMTP server named by ``LOCKY_SMTP_URL``.

- ``smtp://[user:password@]host[:port]`` (port 587 by default): STARTTLS whenever
  the server offers it. Credentials are sent only over TLS; a server without
  STARTTLS gets them in clear only when it is a loopback address (a local relay).
- ``smtps://[user:password@]host[:port]`` (port 465 by default): TLS from the start.

User and password are percent-decoded (``p%40ss`` is ``p@ss``). Certificates are
checked with ``ssl_context`` (the system's trusted authorities by default). One
connection per message. Nothing here logs a message body or the password.
"""

from __future__ import annotations

import ipaddress
import logging
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

from locky import SettingsError

from .headers import finished

log = logging.getLogger("locky.mail")

DEFAULT_PORTS = {"smtp": 587, "smtps": 465}
URL_EXAMPLE = "smtp://user:password@mail.example.com:587"


class CleartextRefused(smtplib.SMTPException):
    """The server offers no STARTTLS and is not local: the password would go in clear."""


@dataclass(frozen=True)
class SmtpTarget:
    """A parsed ``LOCKY_SMTP_URL``; its ``repr`` leaves out the password."""

    scheme: str  # "smtp" (STARTTLS when offered) or "smtps" (implicit TLS)
    host: str
    port: int
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def implicit_tls(self) -> bool:
        return self.scheme == "smtps"

    @property
    def has_credentials(self) -> bool:
        return self.user is not None

    def redacted(self) -> str:
        """The URL without its password, for messages and logs."""
        user = f"{self.user}@" if self.user is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{user}{host}:{self.port}"


def parse_smtp_url(url: str) -> SmtpTarget:
    """Read ``LOCKY_SMTP_URL``; raise :class:`SettingsError` (never quoting the password)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise SettingsError(f"LOCKY_SMTP_URL is not a valid URL (host or port unreadable), e.g. {URL_EXAMPLE}") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise SettingsError(f"LOCKY_SMTP_URL must start with smtp:// (STARTTLS) or smtps:// (TLS), e.g. {URL_EXAMPLE}")
    if not parts.hostname:
        raise SettingsError(f"LOCKY_SMTP_URL names no host, e.g. {URL_EXAMPLE}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise SettingsError(f"LOCKY_SMTP_URL takes no path, query or fragment, e.g. {URL_EXAMPLE}"
                            " (percent-encode '/', '?', '#' and '@' in the user or password)")
    user = password = None
    if parts.username is not None:
        user = unquote(parts.username)
        if parts.password is None:
            raise SettingsError(f"LOCKY_SMTP_URL has a user but no password, e.g. {URL_EXAMPLE}")
        password = unquote(parts.password)
        if not user:
            raise SettingsError(f"LOCKY_SMTP_URL has a password but no user, e.g. {URL_EXAMPLE}")
    return SmtpTarget(
        scheme=parts.scheme,
        host=parts.hostname,
        port=port if port else DEFAULT_PORTS[parts.scheme],
        user=user,
        password=password,
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine: ``localhost`` or a loopback address (no lookup)."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def may_send_credentials(host: str, *, encrypted: bool) -> bool:
    """Whether a password may go to ``host`` over this connection: only encrypted,
    or in clear to a loopback address (nothing leaves the machine)."""
    return encrypted or is_loopback(host)


class SmtpMailer:
    """Sends each message over a new SMTP connection to ``url``."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10,
        mail_from: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ):
        self.target = parse_smtp_url(url)
        self.timeout = timeout
        self.mail_from = mail_from
        self.ssl_context = ssl_context if ssl_context is not None else ssl.create_default_context()

    def __repr__(self) -> str:
        return f"SmtpMailer({self.target.redacted()!r})"

    def send(self, message: EmailMessage) -> None:
        message = finished(message, self.mail_from)
        target = self.target
        if target.implicit_tls:
            client = smtplib.SMTP_SSL(target.host, target.port, timeout=self.timeout, context=self.ssl_context)
        else:
            client = smtplib.SMTP(target.host, target.port, timeout=self.timeout)
        with client:
            client.ehlo()
            encrypted = target.implicit_tls
            if not encrypted and client.has_extn("starttls"):
                client.starttls(context=self.ssl_context)
                client.ehlo()
                encrypted = True
            if target.has_credentials:
                if not may_send_credentials(target.host, encrypted=encrypted):
                    raise CleartextRefused(
                        f"the SMTP server {target.host}:{target.port} offers no STARTTLS: not sending the"
                        " LOCKY_SMTP_URL password in clear (use smtps://, or a server offering STARTTLS)"
                    )
                client.login(target.user, target.password)
            refused = client.send_message(message)
        if refused:
            # Some recipients were accepted: the message is out, retrying would duplicate it.
            log.warning("the SMTP server %s:%d refused %d of the message's recipients",
                        target.host, target.port, len(refused))
        log.debug("handed a message to the SMTP server %s:%d", target.host, target.port)
