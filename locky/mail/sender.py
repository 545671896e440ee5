"""The background sender: takes letters from storage's outbox and hands them to the mailer.

Requests never talk to a mail server. They queue a *letter* (what to send, to whom) in
storage, in their own transaction, and wake this process's sender; the sender makes the
message's code, stores its hash, composes the message and gives it to the configured
mailer (docs/http/accounts.md). So a slow or broken mail server never slows or fails a request,
and a letter is never lost: a crash or an outage only delays it.

- Every worker process runs one sender thread; letters are *claimed* for a lease
  (``Outbox.claim``), so processes and hosts never send one letter twice at once, and a
  sender that dies mid-way lets its letters go when the lease ends.
- A letter that cannot be sent is retried after 2, 4, 8 ... seconds, at most
  :data:`MAX_DELAY`, for as long as it takes. Its code is spent at once (a message
  that did not go out must not leave a usable code behind); the next attempt makes a
  new one.
- Letters that turn out to need no message (an address with no account, one already
  verified, an account over its hourly limit, an address that got its hour's
  verification messages: :data:`locky.accounts.abuse_limits.VERIFY_MAIL_PER_HOUR`, whatever
  queued them) are dropped silently: the request that queued them answered the same
  whatever happened here.
- Codes never reach a log line; the sender logs letter ids and failure kinds only.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from email.message import EmailMessage

from locky.accounts import abuse_limits
from locky.mail import letters
from locky.background import BackgroundWorker
from locky.accounts.codes import hash_code, new_code
from locky.records import Letter, User, utcnow

log = logging.getLogger("locky.mail")

#: Seconds a claimed letter is held by its sender before another may take it.
LEASE = 120
#: Seconds between looks at the outbox when nothing woke the sender.
POLL = 5.0
#: The longest wait between two attempts at one letter.
MAX_DELAY = 300
#: Messages one account may be sent on a caller's request (reset; verification resent).
HOURLY_LIMIT = 3


def retry_delay(attempts: int) -> int:
    """Seconds before the next attempt after ``attempts`` failed ones."""
    return min(MAX_DELAY, 2 ** min(attempts, 16))


class MailSender(BackgroundWorker):
    """One app's sender: a daemon thread per process, started on first use."""

    name = "locky-mail-sender"
    poll = POLL
    log = log

    def claim(self, limit: int) -> list[Letter]:
        return self.context.storage.outbox.claim(now=utcnow(), lease=LEASE, limit=limit)

    def handle(self, letter: Letter) -> None:
        storage = self.context.storage
        try:
            prepared = self._prepare(letter)
        except Exception as exc:
            log.warning("mail sender: letter %s not prepared (%s); retried when its lease ends",
                        letter.id, type(exc).__name__)
            return
        if prepared is None:
            storage.outbox.done(letter.id)
            return
        message, code_hash = prepared
        try:
            self.context.mailer.send(message)
        except Exception as exc:
            delay = retry_delay(letter.attempts)
            log.warning("mail sender: letter %s (%s) not sent on attempt %d (%s); next try in %d s",
                        letter.id, letter.purpose, letter.attempts, type(exc).__name__, delay)
            if code_hash is not None:
                storage.codes.use(code_hash, letter.purpose, now=utcnow())  # never delivered: spent
            storage.outbox.retry(letter.id, due_at=utcnow() + timedelta(seconds=delay))
            return
        storage.outbox.done(letter.id)
        log.info("mail sender: letter %s (%s) sent", letter.id, letter.purpose)

    def _prepare(self, letter: Letter) -> tuple[EmailMessage, str | None] | None:
        """The message and its code's hash (``None`` for a notice), or ``None`` when
        nothing is to be sent."""
        user = self._recipient(letter)
        if user is None:
            return None
        if letter.purpose in letters.NOTICES:
            return letters.compose(letter.purpose, to=user.email, code=None, ttl=0, sender=self.settings.mail_from,
                                   public_url=self.settings.public_base), None
        ttl = self.settings.verify_ttl if letter.purpose == letters.VERIFY else self.settings.reset_ttl
        now = utcnow()
        code = new_code()
        code_hash = hash_code(code)
        self.context.storage.codes.add(code_hash=code_hash, purpose=letter.purpose, user_uuid=user.uuid,
                                       email=user.email, expires_at=now + timedelta(seconds=ttl))
        message = letters.compose(letter.purpose, to=user.email, code=code, ttl=ttl,
                                  sender=self.settings.mail_from, public_url=self.settings.public_base)
        return message, code_hash

    def _recipient(self, letter: Letter) -> User | None:
        """Who the letter goes to, if it is still to be sent."""
        users = self.context.storage.users
        if letter.purpose not in letters.SUBJECTS:
            log.warning("mail sender: letter %s has an unknown purpose; dropped", letter.id)
            return None
        # A letter queued for a known account (registration, a new email) names it; one
        # asked for by a caller (forgot, resend) names only the address they typed.
        asked = not letter.user_uuid
        user = users.get_by_email(letter.email) if asked else users.get_by_uuid(letter.user_uuid)
        if user is None or user.email != letter.email or user.disabled:
            return None
        if letter.purpose == letters.VERIFY and user.email_verified:
            return None
        if asked and letter.attempts == 1:
            since = utcnow() - timedelta(hours=1)
            if self.context.storage.codes.count_since(user.uuid, letter.purpose, since) >= HOURLY_LIMIT:
                log.info("mail sender: letter %s dropped: the account's hourly limit is spent", letter.id)
                return None
        # Counted last, so only a letter that goes out spends the address's hour; a retry
        # of one that failed to send was counted on its first attempt.
        if letter.purpose == letters.VERIFY and letter.attempts == 1 \
                and not abuse_limits.may_send_verification(self.context, user.email):
            log.info("mail sender: letter %s dropped: the address's hourly verification messages are spent",
                     letter.id)
            return None
        return user
