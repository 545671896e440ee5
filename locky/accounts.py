"""Accounts: registration, login with lockout, refresh-token rotation and logout."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from locky import events
from locky.client_address import client_key
from locky.errors import Invalid, Locked, Unauthorized
from locky.records import Identity, User

BAD_LOGIN = "Invalid email or password."


class Accounts:
    """The account operations of one app, over its storage, hasher and token backend."""

    def __init__(self, context):
        self.context = context
        self.settings = context.settings
        # Checked against for unknown emails, so both failures cost one hash check.
        self._dummy_hash = context.password_hasher.hash(secrets.token_urlsafe(16))

    def register(self, *, name: str, email: str, password: str, request_id: str | None = None) -> User:
        user = self.context.storage.users.create(
            name=name, email=email, password_hash=self.context.password_hasher.hash(password)
        )
        self.context.emit(events.USER_REGISTERED, kind="users", record=user, actor_uuid=user.uuid, request_id=request_id)
        self.context.emit(events.RECORD_CREATED, kind="users", record=user, actor_uuid=user.uuid, request_id=request_id)
        return user

    def login(self, email: str, password: str, request_id: str | None = None,
              client_address: str | None = None) -> dict[str, Any]:
        """Tokens for ``email`` and ``password``, or ``Unauthorized`` (401) or ``Locked`` (429).

        Two counts guard it, in the storage's throttle (its rule: exponential backoff, see
        :class:`~locky.providers.LoginThrottle`): the email's (``login_max_failures``) and,
        first, the client address's over all emails (``login_max_failures_per_ip``), so
        one address can neither lock many accounts nor guess on through them. Both count
        the attempt before the password is checked (concurrent guesses cannot slip
        through), and a success takes it back: the email's count is forgotten, the
        address's attempt forgiven (its other failures stay). While either is locked the
        answer is 429 whatever the password: a right password let through during the
        lock would make the lock no limit on guessing (the answer would tell).
        """
        storage, hasher = self.context.storage, self.context.password_hasher
        address_key = self._count_attempt(email, client_address, request_id)
        user = storage.users.get_by_email(email)
        matches = hasher.verify(password, user.password_hash if user else self._dummy_hash)
        if user is None or not matches:
            self.context.emit(events.LOGIN_FAILED, details={"email": email}, request_id=request_id)
            raise Unauthorized(BAD_LOGIN)
        self._succeeded(email, address_key)
        if hasher.needs_rehash(user.password_hash):
            user = storage.users.update(user.id, password_hash=hasher.hash(password))
        body = self._start_session(user)
        self.context.emit(events.LOGIN_SUCCEEDED, kind="users", record=user, actor_uuid=user.uuid, request_id=request_id)
        return body

    def confirm_password(self, user: User, given: str | None, request_id: str | None = None,
                         client_address: str | None = None) -> None:
        """Check ``given`` as ``user``'s current password (a change of one's own password
        or email): counted exactly like a login attempt, so it is no way around the
        lockout. ``Invalid`` (400 ``current_password``) when missing or wrong, ``Locked``
        (429) while the email or the client address is locked."""
        address_key = self._count_attempt(user.email, client_address, request_id)
        if given is None:
            self._failed(user, "current_password missing", request_id)
            raise Invalid.one("current_password", "Required to change your own password or email.")
        if not self.context.password_hasher.verify(given, user.password_hash):
            self._failed(user, "current_password wrong", request_id)
            raise Invalid.one("current_password", "Does not match your current password.")
        self._succeeded(user.email, address_key)

    def _count_attempt(self, email: str, client_address: str | None, request_id: str | None) -> str | None:
        """Count one password attempt for the client address (first) and the email;
        raise ``Locked`` while either is locked. The address's throttle key, if any."""
        throttle, settings = self.context.storage.throttle, self.settings
        address_key = client_key(client_address) if client_address is not None else None
        if address_key is not None:
            retry_after = throttle.hit(address_key, limit=settings.login_max_failures_per_ip,
                                       window=settings.login_window)
            if retry_after is not None:
                self._locked(email, "client address locked", retry_after, request_id)
        retry_after = throttle.hit(email, limit=settings.login_max_failures, window=settings.login_window)
        if retry_after is not None:
            self._locked(email, "locked", retry_after, request_id)
        return address_key

    def _succeeded(self, email: str, address_key: str | None) -> None:
        """A right password: the email's count is forgotten, the address's attempt forgiven."""
        throttle = self.context.storage.throttle
        throttle.reset(email)
        if address_key is not None:
            throttle.forgive(address_key)

    def _failed(self, user: User, reason: str, request_id: str | None) -> None:
        self.context.emit(events.LOGIN_FAILED, kind="users", actor_uuid=user.uuid,
                          details={"email": user.email, "reason": reason}, request_id=request_id)

    def _locked(self, email: str, reason: str, retry_after: int, request_id: str | None) -> None:
        self.context.emit(events.LOGIN_FAILED, details={"email": email, "reason": reason}, request_id=request_id)
        raise Locked(retry_after)

    def _start_session(self, user: User) -> dict[str, Any]:
        tokens = self.context.tokens
        session_uuid = str(uuid.uuid4())
        refresh = tokens.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="refresh")
        self.context.storage.sessions.create(uuid=session_uuid, user_uuid=user.uuid, refresh_jti=refresh.jti)
        return self._token_body(user, session_uuid, refresh.token)

    def _token_body(self, user: User, session_uuid: str, refresh_token: str) -> dict[str, Any]:
        access = self.context.tokens.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="access")
        return {
            "access_token": access.token,
            "token_type": "Bearer",
            "expires_in": access.expires_in,
            "refresh_token": refresh_token,
            "user": user,
        }

    def refresh(self, refresh_token: str, request_id: str | None = None) -> dict[str, Any]:
        tokens, sessions = self.context.tokens, self.context.storage.sessions
        claims = tokens.verify(refresh_token, kind="refresh")
        new = tokens.issue(user_uuid=claims.subject, session_uuid=claims.session_uuid, kind="refresh")
        if not sessions.rotate(claims.session_uuid, claims.jti, new.jti):
            self.context.emit(events.TOKEN_REVOKED, kind="sessions", actor_uuid=claims.subject,
                              details={"session_uuid": claims.session_uuid, "reason": "refresh token reused or revoked"},
                              request_id=request_id)
            raise Unauthorized("The refresh token has been used or revoked.")
        found = sessions.identity(claims.session_uuid)
        if found is None or found[1].uuid != claims.subject:
            raise Unauthorized("The refresh token has been revoked.")
        return self._token_body(found[1], claims.session_uuid, new.token)

    def logout(self, identity: Identity, request_id: str | None = None) -> None:
        if identity.session_uuid and self.context.storage.sessions.revoke(identity.session_uuid):
            self.context.emit(events.TOKEN_REVOKED, kind="sessions", actor_uuid=identity.user.uuid,
                              details={"session_uuid": identity.session_uuid, "reason": "logout"},
                              request_id=request_id)
