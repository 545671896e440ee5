"""Locky's bundled mailers (docs/http/accounts.md), the providers of the ``mailer`` slot.

- ``file`` (the default): one RFC 5322 ``.eml`` file per message, mode 0600, in
  ``LOCKY_MAIL_DIR`` (default: a ``mail/`` folder beside the SQLite database);
  see :mod:`.files`.
- ``smtp``: an SMTP server named by ``LOCKY_SMTP_URL``
  (``smtp://user:password@host:port`` with STARTTLS, or ``smtps://`` for TLS); see
  :mod:`.smtp`.

Both fill in a missing ``From`` with ``LOCKY_MAIL_FROM``. Locky calls them only from
its background sender, which retries a message while ``send`` raises.
"""

from __future__ import annotations

from locky import SettingsError, hookimpl

from .files import FileMailer
from .smtp import URL_EXAMPLE, SmtpMailer

__all__ = ["FileMailer", "SmtpMailer"]


def file_mailer(context) -> FileMailer:
    settings = context.settings
    return FileMailer(settings.mail_path, mail_from=settings.mail_from)


def smtp_mailer(context) -> SmtpMailer:
    settings = context.settings
    if not settings.smtp_url:
        raise SettingsError(f"LOCKY_MAILER=smtp needs LOCKY_SMTP_URL, e.g. {URL_EXAMPLE}"
                            " (or smtps://... for TLS from the start)")
    return SmtpMailer(settings.smtp_url, timeout=settings.smtp_timeout, mail_from=settings.mail_from)


@hookimpl
def locky_add_settings(settings):
    settings.add("smtp_url", None, type="str | None", check=_smtp_url,
                 help="where the smtp mailer sends (LOCKY_SMTP_URL): smtp:// (STARTTLS) or smtps:// (TLS)")
    # Seconds an SMTP exchange may take before the message is retried later.
    settings.add("smtp_timeout", 10, type="int", bounds=(1, 300),
                 help="seconds an SMTP exchange may take (LOCKY_SMTP_TIMEOUT)")


def _smtp_url(url: str | None) -> None:
    if url is not None and not url.startswith(("smtp://", "smtps://")):
        raise SettingsError("LOCKY_SMTP_URL must start with smtp:// (STARTTLS) or smtps:// (TLS),"
                            " e.g. smtp://user:password@mail.example.com:587")


@hookimpl
def locky_register_mailers(registry):
    registry.add("file", file_mailer)
    registry.add("smtp", smtp_mailer)
