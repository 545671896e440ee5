"""Accounts: registration, login with lockout (and its second step), refresh-token
rotation and logout.

One login path serves ``POST /v1/public/users/login`` (tokens) and the OpenID
provider's sign-in page (docs/http/oauth.md: an OP session, no tokens): the same
counts, lockout, refusals and events, told apart by a :class:`PageSignIn`. Login
events say how the user proved who they are (``details.method``: ``password``,
``passkey``, ``totp``, ``recovery_code``) and, through the page, for which client
(``details.client_id``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from datetime import timedelta

from locky import audit
from locky.accounts import abuse_limits, password_rules
from locky.mail import letters
from locky.accounts.login_limits import Attempt, LoginLimits
from locky.accounts.codes import hash_code, hash_recovery_code, new_code
from locky.accounts.passkeys import COUNTER_MISMATCH, Passkeys, UnknownPasskey
from locky.errors import Forbidden, Invalid, Unauthorized
from locky.records import Identity, User, utcnow
from locky.accounts.totp import TotpCodes

BAD_LOGIN = "Invalid email or password."
BAD_MFA_TOKEN = "The MFA token is invalid, used or expired: log in again."
BAD_CODE = "Invalid code."
#: Seconds an ``mfa_token`` (between a login's password and its second factor) lives.
MFA_TOKEN_TTL = 300
MFA_METHODS = ["totp", "recovery_code"]
#: The ``amr`` values (RFC 8176) of each way of logging in: what an OP session keeps
#: and an ID token reports. A passkey is a key the authenticator keeps (``hwk``); one
#: that verified its user (a PIN, a fingerprint) is two factors on its own (``user``,
#: ``mfa``); one that did not is a first factor (``hwk``), and with TOTP after it
#: ``hwk`` and ``otp`` (:data:`AMR_AFTER_PASSKEY`).
AMR = {"password": ("pwd",), "totp": ("pwd", "otp"), "recovery_code": ("pwd", "otp"),
       "passkey": ("hwk", "user", "mfa")}
#: The ``amr`` of a passkey without user verification, alone and with a second factor after it.
AMR_PASSKEY_ALONE = ("hwk",)
AMR_AFTER_PASSKEY = ("hwk", "otp")
#: What an ``mfa_token`` earned with a passkey holds between its code and its password
#: mark (``CODE.passkey.MARK``); one earned with a password holds nothing there.
PASSKEY_MARK = "passkey"


@dataclass(frozen=True)
class PageSignIn:
    """A login through the OpenID provider's sign-in page for ``client_id``: it makes
    an OP session (a session without a client, no tokens) instead of an API login.
    ``previous_op_session`` is the OP session the browser held when it signed in again
    (``prompt=login``, ``max_age``): the new one names it, so signing out ends both."""

    client_id: str
    previous_op_session: str | None = None


def revoke_session(context, session_uuid: str, reason: str, user_uuid: str | None) -> bool:
    """End one login with its ``token.revoked`` event, in one transaction; whether it was live."""
    with context.storage.atomic():
        revoked = context.storage.sessions.revoke(session_uuid)
        if revoked:
            context.audit.record(audit.TOKEN_REVOKED, target_type="session", target_uuid=session_uuid,
                                 details={"reason": reason, "user_uuid": user_uuid})
    return revoked


#: The dummy hash of each kind of hasher, made once per process: a hash takes a third of
#: a second or more, and ``locky serve``'s workers inherit the one its check at startup
#: made before they were forked, instead of each making its own (and so do the apps a
#: test process builds).
_DUMMY_HASHES: dict[type, str] = {}


def dummy_hash(hasher) -> str:
    """A hash of a password nobody knows, at ``hasher``'s configured cost: an unknown
    email's login is checked against it, so it costs what a known one's does. The kept
    one serves while the hasher says it needs no rehash (the cost it was made at is the
    configured one)."""
    kept = _DUMMY_HASHES.get(type(hasher))
    if kept is None or hasher.needs_rehash(kept):
        kept = _DUMMY_HASHES[type(hasher)] = hasher.hash(secrets.token_urlsafe(16))
    return kept


class Accounts:
    """The account operations of one app, over its storage, hasher and token backend."""

    def __init__(self, context):
        self.context = context
        self.settings = context.settings
        # Checked against for unknown emails, so both failures cost one hash check.
        self._dummy_hash = dummy_hash(context.password_hasher)
        self.limits = LoginLimits(context)

    def register(self, *, name: str, email: str, password: str | None, client_address: str | None = None,
                 external_id: str | None = None, via: str | None = None,
                 then: Callable[[User], User] | None = None) -> User:
        """A new account, with the letter proving its address. The client address's
        hourly registrations are counted first (429 past them), before the slow hash.

        A provisioning system (SCIM) registers through here too: it gives the account's
        ``external_id``, names itself in the event (``details.via``), may give no
        ``password`` (the account gets a random one nobody knows: its owner sets theirs
        through the password reset) and may change the new account further in the same
        transaction (``then``: an account created disabled)."""
        if password is None:
            password = secrets.token_urlsafe(32)
        else:
            password_rules.check(password, email=email, name=name)
        abuse_limits.count_request(self.context, abuse_limits.SIGNUP, client_address)
        storage = self.context.storage
        password_hash = self.context.password_hasher.hash(password)
        with storage.atomic():  # the account, the letter proving its address and the event, together
            user = storage.users.create(name=name, email=email, password_hash=password_hash, external_id=external_id)
            storage.outbox.put(purpose=letters.VERIFY, email=user.email, user_uuid=user.uuid)
            self.context.audit.record(audit.USER_REGISTERED, target_type="user", target_uuid=user.uuid,
                                      details={"email": user.email, "name": user.name, **({"via": via} if via else {})},
                                      record=user)
            if then is not None:
                user = then(user)
        self.context.mail_sender.wake()
        return user

    def login(self, email: str, password: str, client_address: str | None = None) -> dict[str, Any]:
        """Tokens for ``email`` and ``password``, or ``Unauthorized`` (401) or ``Locked`` (429)."""
        return self.sign_in(email, password, client_address)

    def sign_in(self, email: str, password: str, client_address: str | None = None,
                page: PageSignIn | None = None) -> dict[str, Any]:
        """The first step of a login: tokens (or, through the sign-in ``page``, the OP
        session: ``{"user", "session_uuid", "amr"}``), or the second step's challenge
        (``{"mfa_required": True, "mfa_token", "methods"}``) for an account with a second
        factor; ``Unauthorized`` (401), ``Forbidden`` (403) or ``Locked`` (429).

        The attempt passes the guess counts of :mod:`locky.accounts.login_limits` first (per
        client address, per account from that address, per account over every address);
        a success takes it back.
        """
        storage, hasher = self.context.storage, self.context.password_hasher
        attempt = self._count_attempt(email, client_address)
        user = storage.users.get_by_email(email)
        matches = hasher.verify(password, user.password_hash if user else self._dummy_hash)
        if user is None or not matches:
            self.context.audit.record(audit.LOGIN_FAILED, target_type="user" if user else None,
                                      target_uuid=user.uuid if user else None,
                                      details={"email": email, "reason": "wrong password" if user else "unknown email",
                                               **_how("password", page)})
            raise Unauthorized(BAD_LOGIN)
        if user.mfa_enabled:
            # Half a login: this attempt is taken back, but the earlier failures (wrong
            # codes) stay until the second factor is right too; forgetting them here
            # would let whoever knows the password guess codes for ever.
            self.limits.half_succeeded(attempt)
        else:
            self.limits.succeeded(attempt)
        # The slow work before the transaction that decides, never between.
        rehash = hasher.hash(password) if hasher.needs_rehash(user.password_hash) else None
        self._may_log_in(user, "password", page)
        if user.mfa_enabled:
            if rehash is not None:
                with storage.atomic():
                    self._still(user, rehash)
            return self._mfa_challenge(user)
        return self._logged_in(user, rehash=rehash, method="password", page=page)

    @property
    def passkeys(self) -> Passkeys:
        return Passkeys(self.context)

    def sign_in_with_passkey(self, credential: Any, client_address: str | None = None,
                             page: PageSignIn | None = None) -> dict[str, Any]:
        """A sign-in with a passkey: ``credential`` is the browser's answer to the options
        of :meth:`Passkeys.request_options` (``PublicKeyCredential.toJSON()`` of
        ``navigator.credentials.get()``). Answers what :meth:`sign_in` answers: tokens;
        through the sign-in ``page`` the OP session ``{"user", "session_uuid", "amr"}``;
        or, for a passkey that did not verify its user on an account with TOTP, the
        second step's challenge (the passkey is then a first factor, like a password).

        ``Invalid`` on ``credential`` (400 ``{"credential": ...}``) when it cannot be
        read, its challenge is not live, no account has the passkey, it does not verify,
        or its signature counter did not move on (also audited
        ``passkey.counter_mismatch``); ``Forbidden`` (403) for a disabled or (with
        ``LOCKY_REQUIRE_VERIFIED_EMAIL``) unverified account; ``Locked`` (429) while the
        account's login limits hold at this address. Each answer naming a passkey is
        counted like a password attempt at its account; a success takes it back.
        Login events carry ``method: passkey``."""
        storage, service = self.context.storage, self.passkeys
        try:
            assertion = service.read_assertion(credential)
        except UnknownPasskey:
            self.context.audit.record(audit.LOGIN_FAILED, details={"reason": "unknown passkey",
                                                                   **_how("passkey", page)})
            raise
        user = storage.users.get_by_uuid(assertion.passkey.user_uuid)
        if user is None:  # its account was deleted
            self.context.audit.record(audit.LOGIN_FAILED, details={"reason": "unknown passkey",
                                                                   **_how("passkey", page)})
            raise UnknownPasskey()
        attempt = self._count_attempt(user.email, client_address)
        try:
            verified = service.verify_assertion(assertion)
        except Invalid:
            self._failed(user, "passkey not verified", "passkey", page)
            raise
        if service.use(assertion, verified) is None:
            self._failed(user, "passkey counter mismatch", "passkey", page)
            raise Invalid.one("credential", COUNTER_MISMATCH)
        second_step = user.mfa_enabled and not verified.user_verified
        if second_step:
            self.limits.half_succeeded(attempt)
        else:
            self.limits.succeeded(attempt)
        self._may_log_in(user, "passkey", page)
        if second_step:
            return self._mfa_challenge(user, first_factor=PASSKEY_MARK)
        amr = AMR["passkey"] if verified.user_verified else AMR_PASSKEY_ALONE
        return self._logged_in(user, method="passkey", page=page, amr=amr)

    def _still(self, checked: User, rehash: str | None = None) -> User | None:
        """Inside an atomic block: ``checked``'s user as stored now, locked until the
        block ends, or ``None`` when the password that was checked is no longer the
        account's (a reset, a change or a deletion committed meanwhile). With
        ``rehash``, the same password's hash at the hasher's current cost replaces it.

        A login decides on the password it checked and writes its session in the same
        transaction as this lock, so a reset or change racing it either commits first
        (and the login fails here) or waits for the login and then ends its session."""
        users = self.context.storage.users
        current = users.for_update(checked.uuid)
        if current is None or current.password_hash != checked.password_hash:
            return None
        if rehash is not None:
            current = users.update(current.id, password_hash=rehash)
        return current

    def _refusal(self, user: User) -> tuple[str, Forbidden] | None:
        """Why ``user`` may not log in though the password was right (the reason for the
        trail, the 403 to raise), or ``None``."""
        if user.disabled:
            return "account disabled", Forbidden("An administrator has disabled this account.",
                                                 title="Account disabled")
        if self.settings.require_verified_email and not user.email_verified:
            return "email not verified", Forbidden(
                "Confirm your email address first: use the code sent to it, or ask for a new one at"
                " /v1/public/users/verify/resend.", title="Email not verified")
        return None

    def _may_log_in(self, user: User, method: str | None = None, page: PageSignIn | None = None) -> None:
        """Refusals that come after a right password (so they tell nothing to a guesser)."""
        refusal = self._refusal(user)
        if refusal is not None:
            reason, forbidden = refusal
            self._failed(user, reason, method, page)
            raise forbidden

    def _logged_in(self, checked: User, rehash: str | None = None, *, method: str,
                   page: PageSignIn | None = None, amr: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The session of a login whose credentials were checked on ``checked``: made
        only if they are still the account's, in the transaction that locks the user.
        Through the sign-in ``page`` it is an OP session (no client, no tokens: its
        refresh jti is a random value no token carries) holding how the user signed in."""
        # The tokens first: issuing may rotate an old signing key, a write of its own that
        # must not join (and conflict inside) the login's transaction.
        session_uuid = str(uuid.uuid4())
        refresh = None if page else self.context.tokens.issue(user_uuid=checked.uuid, session_uuid=session_uuid,
                                                               kind="refresh")
        amr = amr or AMR[method]
        storage = self.context.storage
        with storage.atomic():  # the check, the login and its event, together
            user = self._still(checked, rehash)
            if user is not None and self._refusal(user) is None:
                if page is None:
                    storage.sessions.create(uuid=session_uuid, user_uuid=user.uuid, refresh_jti=refresh.jti)
                else:
                    storage.sessions.create(uuid=session_uuid, user_uuid=user.uuid, refresh_jti=new_code(),
                                            client_id=None, amr=amr,
                                            op_session_uuid=self._earlier_op_session(page, user))
                self.context.audit.record(audit.LOGIN_SUCCEEDED, target_type="user", target_uuid=user.uuid,
                                          actor_uuid=user.uuid,
                                          details={"email": user.email, "session_uuid": session_uuid,
                                                   "mfa": user.mfa_enabled, **_how(method, page)}, record=user)
        if user is None:
            raise Unauthorized(BAD_LOGIN)
        self._may_log_in(user, method, page)  # disabled or unverified meanwhile: refused, with its event
        if page is not None:
            return {"user": user, "session_uuid": session_uuid, "amr": list(amr)}
        return self._token_body(user, session_uuid, refresh.token)

    def _earlier_op_session(self, page: PageSignIn, user: User) -> str | None:
        """The browser's earlier OP session when it is a live one of the same user."""
        if page.previous_op_session is None:
            return None
        found = self.context.storage.sessions.identity(page.previous_op_session)
        if found is None or found[0].client_id is not None or found[1].uuid != user.uuid:
            return None
        return found[0].uuid

    def _mfa_challenge(self, user: User, first_factor: str | None = None) -> dict[str, Any]:
        """The first step's answer for a user with a second factor: no tokens, an
        ``mfa_token`` (single-use, :data:`MFA_TOKEN_TTL` seconds) for the second step.

        The token ends in a keyed digest of the password hash it was earned with
        (:meth:`_password_mark`), and storage keeps the hash of the whole token, so the
        mark cannot be altered: a password reset or change between the two steps makes
        the second one fail, as it ends the sessions of finished logins. A token earned
        with a passkey (``first_factor``) says so between the two, for the ``amr`` of
        the login it finishes."""
        middle = f"{first_factor}." if first_factor else ""
        token = f"{new_code()}.{middle}{self._password_mark(user)}"
        self.context.storage.codes.add(code_hash=hash_code(token), purpose="mfa", user_uuid=user.uuid,
                                       email=user.email, expires_at=utcnow() + timedelta(seconds=MFA_TOKEN_TTL))
        return {"mfa_required": True, "mfa_token": token, "methods": list(MFA_METHODS)}

    def _password_mark(self, user: User) -> str:
        """A keyed digest of ``user``'s password hash (telling nothing of it)."""
        digest = hmac.new(self.settings.jwt_secret.encode(), b"mfa-token:" + user.password_hash.encode(),
                          hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:12]).decode()

    def login_mfa(self, mfa_token: str, code: str, client_address: str | None = None,
                  page: PageSignIn | None = None) -> dict[str, Any]:
        """The second step: a TOTP or recovery code for the login ``mfa_token`` started;
        what :meth:`sign_in` answers for a login without a second factor.

        Each attempt counts toward the email's and the client address's lockout like a
        password (a wrong code is a failed login); the token is spent only by a right
        code, so a typo can be corrected while it lives.
        """
        storage = self.context.storage
        token_hash = hash_code(mfa_token)
        pending = storage.codes.find(token_hash, "mfa", now=utcnow())
        user = storage.users.get_by_uuid(pending.user_uuid) if pending else None
        if user is None or user.email != pending.email:
            raise Unauthorized(BAD_MFA_TOKEN)
        counted = self._counted_code(user, code, client_address, "wrong second-factor code", page, login=True)
        if counted is None:
            raise Unauthorized(BAD_CODE)
        attempt, method = counted
        if storage.codes.use(token_hash, "mfa", now=utcnow()) is None:  # spent by a concurrent request
            raise Unauthorized(BAD_MFA_TOKEN)
        self.limits.succeeded(attempt)
        if not hmac.compare_digest(mfa_token.rpartition(".")[2], self._password_mark(user)):
            raise Unauthorized(BAD_MFA_TOKEN)  # the password of the first step changed since
        self._may_log_in(user, method, page)
        after_passkey = mfa_token.split(".")[1:2] == [PASSKEY_MARK] and mfa_token.count(".") == 2
        try:
            return self._logged_in(user, method=method, page=page, amr=AMR_AFTER_PASSKEY if after_passkey else None)
        except Unauthorized:
            raise Unauthorized(BAD_MFA_TOKEN) from None

    def counted_second_factor(self, user: User, code: str, client_address: str | None,
                              reason: str) -> Attempt | None:
        """Check ``code`` as :meth:`second_factor` does, counted like a password guess: the
        attempt (for the caller to take back once its work is done), or ``None`` after a
        wrong code, recorded as a failed login for ``reason``; ``Locked`` (429) while a
        count is locked."""
        counted = self._counted_code(user, code, client_address, reason)
        return counted[0] if counted else None

    def _counted_code(self, user: User, code: str, client_address: str | None, reason: str,
                      page: PageSignIn | None = None, login: bool = False) -> tuple[Attempt, str] | None:
        """:meth:`counted_second_factor` with the kind of code that was right (``totp`` or
        ``recovery_code``). A failed second step of a ``login`` names the kind of code
        it was given in its event (and, through the sign-in ``page``, the client)."""
        attempt = self._count_attempt(user.email, client_address)
        method = self._second_factor_method(user, code)
        if method is None:
            self._failed(user, reason, _code_kind(code) if login else None, page)
            return None
        return attempt, method

    def second_factor(self, user: User, code: str) -> bool:
        """Whether ``code`` is a TOTP code not used before or an unused recovery code of
        the user's confirmed TOTP; accepting it spends it."""
        return self._second_factor_method(user, code) is not None

    def _second_factor_method(self, user: User, code: str) -> str | None:
        """:meth:`second_factor`, naming the kind of code accepted: ``totp``,
        ``recovery_code``, or ``None``."""
        storage = self.context.storage
        state = storage.totp.get(user.uuid)
        if state is None or not state.confirmed:
            return None
        step = self.totp_codes.step_of(self.totp_codes.open(state.secret, user.uuid), code)
        if step is not None:
            return "totp" if storage.totp.use_step(user.uuid, step) else None
        return "recovery_code" if storage.totp.use_recovery(user.uuid, hash_recovery_code(code)) else None

    @property
    def totp_codes(self) -> TotpCodes:
        codes = self.context.state.get("totp_codes")
        if codes is None:
            codes = self.context.state["totp_codes"] = TotpCodes(self.settings.jwt_secret)
        return codes

    def confirm_password(self, user: User, given: str | None, client_address: str | None = None,
                         field: str = "current_password") -> None:
        """Check ``given`` as ``user``'s current password (a change of one's own password
        or email, a reauthentication): counted exactly like a login attempt, so it is no
        way around the lockout. ``Invalid`` (400 on ``field``) when missing or wrong, ``Locked``
        (429) while the email or the client address is locked."""
        attempt = self._count_attempt(user.email, client_address)
        if given is None:
            self._failed(user, "current_password missing")
            raise Invalid.one(field, "Required to change your own password or email." if field == "current_password"
                              else "Required.")
        if not self.context.password_hasher.verify(given, user.password_hash):
            self._failed(user, "current_password wrong")
            raise Invalid.one(field, "Does not match your current password.")
        self.limits.succeeded(attempt)

    def _count_attempt(self, email: str, client_address: str | None) -> Attempt:
        """Count one password or code attempt at ``email`` (:mod:`locky.accounts.login_limits`);
        ``Locked`` (429, with its ``login.locked`` event) while a count is locked."""
        return self.limits.count(email, client_address,
                                 lambda reason, retry_after: self._locked(email, reason, retry_after))

    def _failed(self, user: User, reason: str, method: str | None = None, page: PageSignIn | None = None) -> None:
        details = {"email": user.email, "reason": reason, **(_how(method, page) if method else {})}
        self.context.audit.record(audit.LOGIN_FAILED, target_type="user", target_uuid=user.uuid, details=details)

    def _locked(self, email: str, reason: str, retry_after: int) -> None:
        """The event of a refusal by a locked count (the caller raises the 429)."""
        self.context.audit.record(audit.LOGIN_LOCKED, details={"email": email, "reason": reason,
                                                               "retry_after": retry_after})

    def _token_body(self, user: User, session_uuid: str, refresh_token: str) -> dict[str, Any]:
        access = self.context.tokens.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="access")
        return {
            "access_token": access.token,
            "token_type": "Bearer",
            "expires_in": access.expires_in,
            "refresh_token": refresh_token,
            "user": user,
        }

    def refresh(self, refresh_token: str) -> dict[str, Any]:
        """New tokens for a refresh token, which is spent. The user is locked and read in
        the rotation's transaction, so the one presentation that rotates is the one
        answered with tokens: a reuse racing it (which ends the login) can no longer
        leave it without them while the trail says it refreshed."""
        tokens, storage = self.context.tokens, self.context.storage
        claims = tokens.verify(refresh_token, kind="refresh")
        new = tokens.issue(user_uuid=claims.subject, session_uuid=claims.session_uuid, kind="refresh")
        with storage.atomic():  # the user, the rotation and its event, together
            user = storage.users.for_update(claims.subject)
            rotated = storage.sessions.rotate(claims.session_uuid, claims.jti, new.jti)
            self.context.audit.record(audit.TOKEN_REFRESHED if rotated else audit.TOKEN_REUSE_DETECTED,
                                      target_type="session", target_uuid=claims.session_uuid,
                                      actor_uuid=claims.subject, details={"user_uuid": claims.subject})
        if not rotated:
            raise Unauthorized("The refresh token has been used or revoked.")
        if user is None or user.disabled:  # deleting or disabling ends the sessions in its transaction
            raise Unauthorized("The refresh token has been revoked.")
        return self._token_body(user, claims.session_uuid, new.token)

    def logout(self, identity: Identity) -> None:
        if identity.session_uuid:
            revoke_session(self.context, identity.session_uuid, "logout", identity.user.uuid)


def _how(method: str, page: PageSignIn | None) -> dict[str, str]:
    """A login event's ``method`` and, through the sign-in page, its ``client_id``."""
    return {"method": method, **({"client_id": page.client_id} if page else {})}


def _code_kind(code: str) -> str:
    """The kind of second-factor code ``code`` looks like: six digits are a TOTP code,
    anything else is taken for a recovery code."""
    return "totp" if code.strip().isdigit() else "recovery_code"
