"""Locky's bundled mailers (CONTRACT §11), the providers of the ``mailer`` slot.

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
def locky_register_mailers(registry):
    registry.add("file", file_mailer)
    registry.add("smtp", smtp_mailer)
