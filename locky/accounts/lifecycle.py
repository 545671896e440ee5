"""The account lifecycle (docs/http/accounts.md): proving an address, resetting a forgotten
password, turning a second factor on and off.

Requests only queue letters (:mod:`locky.mail.sender` makes their codes and sends
them) and spend codes; what a public route answers never depends on whether an
account exists, and costs the same either way (one letter queued).
"""

from __future__ import annotations

from typing import Any

from locky import audit
from locky.accounts import abuse_limits, password_rules
from locky.mail import letters
from locky.accounts.logins import Accounts
from locky.accounts.codes import hash_code, hash_recovery_code, new_recovery_code
from locky.errors import Invalid, StateConflict
from locky.records import User, utcnow

BAD_TOKEN = "Invalid, used or expired code."
RECOVERY_CODES = 10


class Lifecycle:
    def __init__(self, context, accounts: Accounts):
        self.context = context
        self.accounts = accounts
        self.storage = context.storage

    # -- mail ---------------------------------------------------------------------------

    def queue(self, purpose: str, email: str, user_uuid: str = "") -> None:
        """Queue a letter and wake the sender (the request's only work for it)."""
        self.storage.outbox.put(purpose=purpose, email=email, user_uuid=user_uuid)
        self.context.mail_sender.wake()

    # -- email verification ---------------------------------------------------------------

    def verify(self, token: str) -> User:
        """Spend a verification code: its account's address (the one it was sent to) is proved."""
        with self.storage.atomic():
            code = self.storage.codes.use(hash_code(token), letters.VERIFY, now=utcnow())
            user = self.storage.users.mark_verified(code.user_uuid, code.email) if code else None
            if user is not None:
                self.context.audit.record(audit.EMAIL_VERIFIED, target_type="user", target_uuid=user.uuid,
                                          details={"email": user.email}, record=user)
        if user is None:
            raise Invalid.one("token", BAD_TOKEN)
        return user

    def resend(self, email: str, client_address: str | None = None) -> None:
        """Queue a new verification letter for ``email`` (sent only to a live account
        still unverified, within the hourly limits). Counted, with ``forgot``, toward
        the client address's hourly recovery requests (429 past them)."""
        abuse_limits.count_request(self.context, abuse_limits.RECOVERY, client_address)
        self.queue(letters.VERIFY, email)

    # -- password reset -------------------------------------------------------------------

    def forgot(self, email: str, client_address: str | None = None) -> None:
        """Queue a reset letter for ``email`` (sent only to a live account, at most
        three an hour), with its ``password.reset_requested`` event (naming the account
        only in the trail, never in the answer). Counted, with ``resend``, toward the
        client address's hourly recovery requests (429 past them, with no event)."""
        abuse_limits.count_request(self.context, abuse_limits.RECOVERY, client_address)
        user = self.storage.users.get_by_email(email)
        with self.storage.atomic():
            self.storage.outbox.put(purpose=letters.RESET, email=email)
            self.context.audit.record(audit.PASSWORD_RESET_REQUESTED, target_type="user" if user else None,
                                      target_uuid=user.uuid if user else None,
                                      details={"email": email, "account": user is not None})
        self.context.mail_sender.wake()

    def reset(self, token: str, password: str) -> User:
        """Set a new password with a reset code: every login of the account ends and its
        lockout is lifted; the code proved the address too. The code is spent only when
        the password is accepted."""
        codes, users = self.storage.codes, self.storage.users
        found = codes.find(hash_code(token), letters.RESET, now=utcnow())
        user = users.get_by_uuid(found.user_uuid) if found else None
        if user is None or user.email != found.email:
            raise Invalid.one("token", BAD_TOKEN)
        password_rules.check(password, email=user.email, name=user.name)
        password_hash = self.context.password_hasher.hash(password)  # the slow part, before deciding
        with self.storage.atomic():
            # Decided on the row as it is now, locked until the commit: an email change
            # that committed while the password was hashed makes the code prove an
            # address the account no longer has, so it must not mark the new one proved.
            current = users.for_update(user.uuid)
            if current is None or current.email != found.email:
                raise Invalid.one("token", BAD_TOKEN)
            if codes.use(found.code_hash, letters.RESET, now=utcnow()) is None:
                raise Invalid.one("token", BAD_TOKEN)
            user = users.update(current.id, password_hash=password_hash, email_verified=True)
            revoked = self.storage.sessions.revoke_all(user.uuid)
            # The owner hears of it at the address, whoever used the code.
            self.storage.outbox.put(purpose=letters.RESET_DONE, email=user.email, user_uuid=user.uuid)
            self.context.audit.record(audit.PASSWORD_RESET, target_type="user", target_uuid=user.uuid,
                                      details={"email": user.email, "sessions_ended": revoked}, record=user)
        self.accounts.limits.clear(user.email)  # every address's lock at the account lifts
        self.context.mail_sender.wake()
        return user

    # -- TOTP -----------------------------------------------------------------------------

    def totp_begin(self, user: User) -> dict[str, Any]:
        """A new pending secret for the caller (replacing a pending one)."""
        totp = self.accounts.totp_codes
        secret = totp.new_secret()
        if not self.storage.totp.begin(user.uuid, totp.seal(secret, user.uuid)):
            raise StateConflict("TOTP is already enabled; turn it off before setting it up again.")
        return {"secret": secret, "otpauth_uri": totp.uri(secret, user.email)}

    def totp_confirm(self, user: User, code: str) -> dict[str, Any]:
        """Turn TOTP on with a first code from the pending secret; the recovery codes,
        shown this once."""
        state = self.storage.totp.get(user.uuid)
        if state is None or state.confirmed:
            raise Invalid.one("code", "No TOTP setup is pending: start one first.")
        totp = self.accounts.totp_codes
        step = totp.step_of(totp.open(state.secret, user.uuid), code)
        confirmed = None
        if step is not None:
            recovery = [new_recovery_code() for _ in range(RECOVERY_CODES)]
            with self.storage.atomic():
                confirmed = self.storage.totp.confirm(user.uuid, step=step,
                                                      recovery_hashes=[hash_recovery_code(c) for c in recovery])
                if confirmed is not None:
                    self.context.audit.record(audit.MFA_ENABLED, target_type="user", target_uuid=user.uuid,
                                              details={"method": "totp"}, record=confirmed)
        if confirmed is None:
            raise Invalid.one("code", "Invalid code: enter the current code of your authenticator app.")
        return {"recovery_codes": recovery}

    def totp_remove(self, user: User, code: str, client_address: str | None = None) -> None:
        """Turn TOTP off, proved by a TOTP or recovery code (a stolen access token alone
        cannot remove the second factor). Each code is a guess counted like a login's
        (:mod:`locky.accounts.login_limits`): wrong ones are failed logins in the trail, and
        past the limits the answer is 429 whatever the code."""
        state = self.storage.totp.get(user.uuid)
        if state is None or not state.confirmed:
            raise StateConflict("TOTP is not enabled.")
        attempt = self.accounts.counted_second_factor(user, code, client_address, "wrong code removing TOTP")
        if attempt is None:
            raise Invalid.one("code", "Invalid code.")
        self.accounts.limits.succeeded(attempt)
        self.remove_second_factors(user, actor_uuid=user.uuid)

    def remove_second_factors(self, user: User, *, actor_uuid: str) -> bool:
        """Turn ``user``'s second factors off, with the ``mfa.disabled`` event whose actor
        is ``actor_uuid`` (the user, or the admin who removed them). Whether one was on."""
        by_admin = actor_uuid != user.uuid
        with self.storage.atomic():
            removed = self.storage.totp.remove(user.uuid)
            if removed is not None:
                details = {"method": "totp", **({"by": "admin"} if by_admin else {})}
                self.context.audit.record(audit.MFA_DISABLED, target_type="user", target_uuid=user.uuid,
                                          details=details, record=removed)
        return removed is not None
