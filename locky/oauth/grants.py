"""The grants of the token endpoint (RFC 6749), issuing Locky's own tokens.

Authlib validates each request (client authentication, the code's binding, PKCE, scope
narrowing); these classes store what it issues. Every grant mints its JWTs first
(:meth:`LockyTokens.generate_token`: issuing may rotate a signing key, a write of its
own) and then does its writes and records its audit event in one ``storage.atomic()``
(``save_token``), raising only after that block when a compare-and-set lost, so the
revocation it made and its event commit (the pattern of ``Accounts.refresh``).

- ``authorization_code`` (:class:`CodeGrant`): the code row (``storage.oauth_codes``)
  names the login its exchange creates (``session_uuid``, chosen when the code is made);
  a second use of a code revokes that login (``oauth.code.reuse_detected``).
- ``refresh_token`` (:class:`RefreshGrant`): rotation and reuse detection are
  ``sessions.rotate``, as for ``POST /v1/public/users/refresh``; ``token.refreshed``.
- ``client_credentials`` (:class:`ClientCredentialsGrant`): no session; the token's
  ``sub`` is the client_id and its ``sid`` ``client:<client uuid>:<token_generation>``.
- :class:`OpenIDCodeExtension` adds the ID token, signed by the token backend with the
  client's algorithm.

A refresh token is issued only when the granted scope holds ``offline_access`` (§15).
"""

from __future__ import annotations

import uuid
from datetime import timedelta, timezone
from typing import Any

from authlib.oauth2.rfc6749 import InvalidGrantError, grants
from authlib.oidc.core.grants import OpenIDCode

from locky import events
from locky.accounts.codes import hash_code, new_code
from locky.errors import Unauthorized
from locky.oauth.claims import user_info
from locky.records import AuthorizationCode, User, utcnow

#: How long an authorization code lives (§15: 60 seconds).
CODE_TTL = timedelta(seconds=60)
OFFLINE_ACCESS = "offline_access"
#: Client authentication each grant accepts: confidential clients by secret, public
#: ones by ``none`` (the client's own check_endpoint_auth_method says which is whose).
USER_GRANT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
CLIENT_GRANT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


def client_session_id(client) -> str:
    """The ``sid`` of a client_credentials token: the client and the generation of its
    tokens, which revocation and deletion move on (read back by the bearer check)."""
    return f"client:{client.record.uuid}:{client.record.token_generation}"


def may_sign_in(settings, user: User | None) -> bool:
    """Whether ``user`` may still be given tokens: live, enabled, verified when required."""
    if user is None or user.disabled:
        return False
    return not (settings.require_verified_email and not user.email_verified)


def token_body(access, scope: str) -> dict[str, Any]:
    return {"access_token": access.token, "token_type": "Bearer", "expires_in": access.expires_in, "scope": scope}


class LockyTokens:
    """``generate_token`` of every grant: Locky JWTs. Authlib's server-level generator
    would not see the request (the code's login, the refresh token's session)."""

    def generate_token(self, user=None, scope=None, grant_type=None, expires_in=None, include_refresh_token=True):
        context = self.server.context
        client, scope = self.request.client, scope or ""
        if user is None:  # client_credentials: the client is the subject
            access = context.tokens.issue(user_uuid=client.client_id, session_uuid=client_session_id(client),
                                          kind="access", client_id=client.client_id, scope=scope)
            return token_body(access, scope)
        session_uuid = self.login_session_uuid()
        access = context.tokens.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="access",
                                      client_id=client.client_id, scope=scope)
        body = token_body(access, scope)
        # A login without a refresh token still keeps a jti in its row: one no token carries.
        self.request.new_refresh_jti = uuid.uuid4().hex
        if include_refresh_token and OFFLINE_ACCESS in scope.split():
            refresh = context.tokens.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="refresh",
                                           client_id=client.client_id, scope=scope)
            body["refresh_token"] = refresh.token
            self.request.new_refresh_jti = refresh.jti
        return body


class Code:
    """Authlib's view (``AuthorizationCodeMixin``, RFC 6749 and OpenID) of a stored code."""

    def __init__(self, record: AuthorizationCode):
        self.record = record
        self.code_challenge = record.code_challenge
        self.code_challenge_method = record.code_challenge_method

    def get_redirect_uri(self) -> str:
        return self.record.redirect_uri

    def get_scope(self) -> str:
        return self.record.scope

    def get_nonce(self) -> str | None:
        return self.record.nonce

    def get_auth_time(self) -> int:
        # Records hold naive UTC times: timestamp() alone would read them as local time.
        return int(self.record.auth_time.replace(tzinfo=timezone.utc).timestamp())

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> list[str]:
        return list(self.record.amr)


class CodeGrant(LockyTokens, grants.AuthorizationCodeGrant):
    """``authorization_code``. The authorization endpoint's ``grant_user`` is an
    :class:`~locky.oauth.server.EndUser` (the user and their OP session)."""

    TOKEN_ENDPOINT_AUTH_METHODS = USER_GRANT_AUTH_METHODS

    def generate_authorization_code(self) -> str:
        return new_code()  # 256 bits, stored as its SHA-256 like every Locky code

    def save_authorization_code(self, code: str, request) -> None:
        end_user, data = request.user, request.payload.data
        op_session = end_user.op_session
        self.server.context.storage.oauth_codes.add(
            code_hash=hash_code(code), client_id=request.client.client_id, user_uuid=end_user.user.uuid,
            redirect_uri=request.payload.redirect_uri, scope=request.scope or "", nonce=data.get("nonce"),
            code_challenge=data.get("code_challenge"), code_challenge_method=data.get("code_challenge_method"),
            auth_time=op_session.created_at, amr=tuple(op_session.amr), op_session_uuid=op_session.uuid,
            session_uuid=str(uuid.uuid4()), expires_at=utcnow() + CODE_TTL)

    def query_authorization_code(self, code: str, client) -> Code | None:
        context = self.server.context
        record = context.storage.oauth_codes.find(hash_code(code))
        if record is None or record.client_id != client.client_id:
            return None
        if record.used_at is not None:
            # A second use (RFC 6749 section 4.1.2): revoke what the first one issued.
            self.reuse_detected(record)
            return None
        if record.expires_at <= utcnow():
            return None
        return Code(record)

    def reuse_detected(self, record: AuthorizationCode) -> None:
        context = self.server.context
        with context.storage.atomic():
            context.storage.sessions.revoke(record.session_uuid)
            context.audit.record(events.OAUTH_CODE_REUSE_DETECTED, target_type="session",
                                 target_uuid=record.session_uuid, actor_uuid=None,
                                 details={"client_id": record.client_id, "user_uuid": record.user_uuid})

    def login_session_uuid(self) -> str:
        return self.request.authorization_code.record.session_uuid

    def authenticate_user(self, code: Code) -> User | None:
        context = self.server.context
        user = context.storage.users.get_by_uuid(code.record.user_uuid)
        return user if may_sign_in(context.settings, user) else None

    def delete_authorization_code(self, code: Code) -> None:
        pass  # spent in save_token, in the transaction that creates the login

    def save_token(self, token: dict[str, Any]) -> None:
        context, storage = self.server.context, self.server.context.storage
        code = self.request.authorization_code.record
        with storage.atomic():  # the code spent, the login made and its event, together
            used = storage.oauth_codes.use(code.code_hash, now=utcnow())
            user = storage.users.for_update(code.user_uuid) if used is not None else None
            op_live = code.op_session_uuid is None or storage.sessions.identity(code.op_session_uuid) is not None
            if used is None:
                # Another exchange won the code meanwhile: this is its second use.
                storage.sessions.revoke(code.session_uuid)
                context.audit.record(events.OAUTH_CODE_REUSE_DETECTED, target_type="session",
                                     target_uuid=code.session_uuid, actor_uuid=None,
                                     details={"client_id": code.client_id, "user_uuid": code.user_uuid})
            elif may_sign_in(context.settings, user) and op_live:
                storage.sessions.create(uuid=code.session_uuid, user_uuid=user.uuid,
                                        refresh_jti=self.request.new_refresh_jti, client_id=code.client_id,
                                        scope=code.scope, op_session_uuid=code.op_session_uuid, amr=code.amr)
                context.audit.record(events.OAUTH_TOKEN_ISSUED, target_type="session", target_uuid=code.session_uuid,
                                     actor_uuid=user.uuid,
                                     details={"client_id": code.client_id, "grant_type": "authorization_code",
                                              "scope": code.scope, "user_uuid": user.uuid})
            else:
                used = None
        if used is None:
            raise InvalidGrantError("Invalid 'code' in request.")


class RefreshToken(dict):
    """Authlib's view (``TokenMixin``) of a presented refresh token: its claims. Its
    ``scope`` is what the login was granted (narrowed, if a refresh narrowed it)."""

    def __init__(self, claims):
        super().__init__(sub=claims.subject, sid=claims.session_uuid, jti=claims.jti, client_id=claims.client_id,
                         scope=claims.scope or "")

    def check_client(self, client) -> bool:
        return self["client_id"] == client.client_id

    def get_scope(self) -> str:
        return self["scope"]


class RefreshGrant(LockyTokens, grants.RefreshTokenGrant):
    """``refresh_token``: the session's refresh token rotates (a new one each time, the
    presented one spent); presenting a spent one, or one of a login that ended, is
    refused and recorded (``token.reuse_detected``), and a spent one ends the login.
    Whether the login lives is the rotation's to say (one compare-and-set), as for
    ``POST /v1/public/users/refresh``."""

    TOKEN_ENDPOINT_AUTH_METHODS = USER_GRANT_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> RefreshToken | None:
        try:
            claims = self.server.context.tokens.verify(refresh_token, kind="refresh")
        except Unauthorized:
            return None
        if claims.client_id is None:  # a refresh token of the /v1 API's login
            return None
        return RefreshToken(claims)

    def authenticate_user(self, refresh_token: RefreshToken) -> User | None:
        context = self.server.context
        user = context.storage.users.get_by_uuid(refresh_token["sub"])
        return user if may_sign_in(context.settings, user) else None

    def login_session_uuid(self) -> str:
        return self.request.refresh_token["sid"]

    def save_token(self, token: dict[str, Any]) -> None:
        context, storage = self.server.context, self.server.context.storage
        presented = self.request.refresh_token
        with storage.atomic():  # the user, the rotation and its event, together
            user = storage.users.for_update(presented["sub"])
            rotated = storage.sessions.rotate(presented["sid"], presented["jti"], self.request.new_refresh_jti)
            context.audit.record(events.TOKEN_REFRESHED if rotated else events.TOKEN_REUSE_DETECTED,
                                 target_type="session", target_uuid=presented["sid"], actor_uuid=presented["sub"],
                                 details={"user_uuid": presented["sub"], "client_id": presented["client_id"]})
        if not rotated:
            raise InvalidGrantError("The refresh token has been used or revoked.")
        if not may_sign_in(context.settings, user):
            raise InvalidGrantError("The refresh token has been revoked.")

    def revoke_old_credential(self, refresh_token) -> None:
        pass  # the rotation in save_token spent it


class ClientCredentialsGrant(LockyTokens, grants.ClientCredentialsGrant):
    """``client_credentials``: a confidential client that has the grant, for itself."""

    TOKEN_ENDPOINT_AUTH_METHODS = CLIENT_GRANT_AUTH_METHODS

    def save_token(self, token: dict[str, Any]) -> None:
        client = self.request.client
        self.server.context.audit.record(
            events.OAUTH_TOKEN_ISSUED, target_type="oauth_client", target_uuid=client.record.uuid, actor_uuid=None,
            details={"client_id": client.client_id, "grant_type": "client_credentials", "scope": token["scope"]})


class OpenIDCodeExtension(OpenIDCode):
    """OpenID Connect on the code grant: the ID token, signed by the token backend with
    the client's ``id_token_signed_response_alg``.

    ``nonce`` is optional (§15: "when sent") and not checked for replay here: a code
    works once, and a replayed nonce is the relying party's to notice."""

    def __init__(self, context):
        super().__init__(require_nonce=False)
        self.context = context

    def exists_nonce(self, nonce, request) -> bool:
        return False

    def get_client_algorithm(self, client) -> str:
        return client.id_token_signed_response_alg

    def generate_user_info(self, user, scope):
        return user_info(self.context.storage, user, scope)

    def encode_id_token(self, token, request) -> str:
        from authlib.oidc.core.util import create_half_hash

        client, code = request.client, request.authorization_code
        alg = client.id_token_signed_response_alg
        now = int(utcnow().replace(tzinfo=timezone.utc).timestamp())
        claims: dict[str, Any] = {
            "iss": self.context.settings.issuer, "sub": request.user.uuid, "aud": client.client_id,
            "azp": client.client_id, "iat": now, "exp": now + self.context.settings.access_ttl,
            "auth_time": code.get_auth_time(), "amr": code.get_amr(),
        }
        if code.record.op_session_uuid:
            claims["sid"] = code.record.op_session_uuid
        if code.get_nonce():
            claims["nonce"] = code.get_nonce()
        claims["at_hash"] = create_half_hash(token["access_token"], alg).decode("ascii")
        claims.update(user_info(self.context.storage, request.user, token["scope"]))
        return self.context.tokens.sign_id_token(claims, alg=alg)
