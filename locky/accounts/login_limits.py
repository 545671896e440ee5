"""How many guesses at an account are heard: the counts every password and code check
passes (a login, its second step, ``current_password``, reauthentication, the code that
removes TOTP).

Three counts, kept in the storage's login throttle (shared by every process, with its
exponential backoff, see :class:`locky.providers.LoginThrottle`), each counting an
attempt before the check, so concurrent guesses cannot slip through:

- the client address over every account (``ip:ADDRESS``, ``LOCKY_LOGIN_MAX_FAILURES_PER_IP``
  per ``LOCKY_LOGIN_WINDOW``): one address can neither guess on through many accounts nor
  lock many;
- the account from that address (``EMAIL|ip:ADDRESS``, ``LOCKY_LOGIN_MAX_FAILURES`` per
  window): whoever guesses wrong locks out that address only, so the owner signing in
  from another one is not locked out by it;
- the account over every address (``EMAIL``, a quota of ``LOCKY_LOGIN_MAX_GUESSES_PER_HOUR``
  per hour, :meth:`~locky.providers.LoginThrottle.take`): past it, an address is heard
  only if it signed in to the account in the last :data:`KNOWN_FOR` (its
  ``login.succeeded`` events in the audit trail), so guessing from many addresses stays
  bounded while the owner still gets in.

While a count is locked the answer is 429 whatever the password: a right password let
through during the lock would make it no limit on guessing. Its ``login.locked`` event
is recorded once per lock, not once per refused attempt (a quota of one in the
throttle, for as long as the lock lasts), so hammering a locked account writes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from locky import audit
from locky.http.client_address import client_key
from locky.errors import Locked
from locky.records import utcnow

#: How long a successful sign-in makes an address known to an account.
KNOWN_FOR = timedelta(days=30)
HOUR = 3600


@dataclass(frozen=True)
class Attempt:
    """The keys one counted attempt was counted under (what a success takes back)."""

    email: str
    pair: str
    address: str | None
    #: Whether the account's count over every address counted it (it had room).
    counted_for_account: bool


#: Longest email kept as it is at the start of a pair key: with ``|`` and an address
#: (``ip:`` and an IPv6 /64 at most ~45 characters) the key stays within the 254 a key holds.
PAIR_EMAIL_MAX = 200


def account_prefix(email: str) -> str:
    """What ``email``'s pair keys start with, before ``|``: the email, or for a longer
    one a digest of it (``#`` and 40 hex digits; an email always holds an ``@``)."""
    if len(email) <= PAIR_EMAIL_MAX:
        return email
    return "#" + hashlib.sha256(email.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def pair_key(email: str, address: str | None) -> str:
    """The key of ``email``'s guesses from one client address."""
    return f"{account_prefix(email)}|{client_key(address) if address is not None else 'ip:unknown'}"


class LoginLimits:
    """The guess counts of one app (see the module docstring)."""

    def __init__(self, context):
        self.context = context
        self.settings = context.settings

    @property
    def throttle(self):
        return self.context.storage.throttle


    def count(self, email: str, client_address: str | None, on_locked) -> Attempt:
        """Count one attempt at ``email`` from ``client_address``; while any count is
        locked, call ``on_locked(reason, retry_after)`` and raise :class:`Locked`."""
        settings, throttle = self.settings, self.throttle
        address = client_key(client_address) if client_address is not None else None
        if address is not None:
            wait = throttle.hit(address, limit=settings.login_max_failures_per_ip, window=settings.login_window)
            if wait is not None:
                self._locked(on_locked, address, "client address locked", wait)
        pair = pair_key(email, client_address)
        wait = throttle.hit(pair, limit=settings.login_max_failures, window=settings.login_window)
        if wait is not None:
            self._locked(on_locked, pair, "locked", wait)
        wait = throttle.take(email, limit=settings.login_max_guesses_per_hour, window=HOUR)
        if wait is not None and not self._known(email, client_address):
            throttle.forgive(pair)  # refused before any check: this address's count stays as it was
            self._locked(on_locked, pair, "account guess limit", wait)
        return Attempt(email=email, pair=pair, address=address, counted_for_account=wait is None)

    def succeeded(self, attempt: Attempt) -> None:
        """A right password or code: this address's count at the account is forgotten,
        the attempt taken back from the others (their other failures stay)."""
        self.throttle.reset(attempt.pair)
        self._forgive_others(attempt)

    def half_succeeded(self, attempt: Attempt) -> None:
        """A right password with a second factor still due: the attempt is taken back
        everywhere, but earlier failures (wrong codes) stay until the code is right too."""
        self.throttle.forgive(attempt.pair)
        self._forgive_others(attempt)

    def clear(self, email: str, client_address: str | None = None) -> bool:
        """Forget ``email``'s counts: from every address, or only ``client_address``'s
        (and the account's over every address). Whether anything was forgotten."""
        throttle = self.throttle
        account = throttle.reset(email)
        if client_address is not None:
            return throttle.reset(pair_key(email, client_address)) or account
        return bool(throttle.reset_prefix(account_prefix(email) + "|")) or account

    def _forgive_others(self, attempt: Attempt) -> None:
        if attempt.counted_for_account:
            self.throttle.forgive(attempt.email)
        if attempt.address is not None:
            self.throttle.forgive(attempt.address)

    def _known(self, email: str, client_address: str | None) -> bool:
        """Whether ``client_address`` signed in to ``email``'s account within :data:`KNOWN_FOR`."""
        if not client_address:
            return False
        storage = self.context.storage
        user = storage.users.get_by_email(email)
        if user is None:
            return False
        found = storage.audit.list(event=audit.LOGIN_SUCCEEDED, target_uuid=user.uuid, ip=client_address[:64],
                                   since=utcnow() - KNOWN_FOR, limit=1)
        return bool(found.items)

    def _locked(self, on_locked, key: str, reason: str, retry_after: int) -> None:
        """Refuse the attempt (429); its ``login.locked`` event once per lock of ``key``,
        not once per refused attempt, so hammering a locked account writes nothing."""
        noted = "locked:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        if self.throttle.take(noted, limit=1, window=retry_after) is None:
            on_locked(reason, retry_after)
        raise Locked(retry_after)
