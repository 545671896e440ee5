"""Plain records that cross the storage boundary: no ORM object ever leaves a plugin.

Storage providers return these frozen dataclasses; resources dump them through the
marshmallow schemas in :mod:`locky.schemas`. The rules their values follow (the id
range, the uuid form, the role-name form, the clock) are stated here once, for the core
and for plugins alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Generic, TypeVar

RecordT = TypeVar("RecordT")

# -- the values records hold (docs/http/README.md#bodies and docs/http/records.md) -----
# The patterns are also written into the Swagger document, where ``$`` is the true end
# of the value; in Python ``$`` also matches before a final newline, so check them with
# ``fullmatch``, never ``match`` (``"admin\n"`` must not pass).

#: The largest id storage assigns: ids are positive and fit a signed 64-bit column.
MAX_ID = 2**63 - 1
#: A record's ``uuid``, as storage makes it and Locky answers with it: a UUID4 in its
#: lowercase canonical form. A user's uuid is also a policy subject of its own, so no
#: role may have this shape. (A client may send other spellings; ``locky.schemas.Uuid``
#: reads them.)
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
#: A role's ``name``: a lowercase letter, then up to 63 lowercase letters, digits, ``_``
#: and ``-``.
ROLE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def utcnow() -> datetime:
    """Now as a naive UTC datetime, to the microsecond: how records hold their times
    and what the core passes to storage (``now=``, ``since=``, ``created_at=``)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def wire_time(moment: datetime) -> str:
    """How every time goes on the wire: RFC 3339 in UTC, microseconds, a ``Z`` suffix
    (``2026-11-27T14:35:09.000000Z``). A naive datetime is taken as UTC, as records hold
    their times; an aware one is converted."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    if moment.year < 1000:  # isoformat pads the year to four digits; strftime does not
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.isoformat(timespec="microseconds") + "Z"


@dataclass(frozen=True, slots=True)
class Permission:
    """One permission of a role: ``action`` on ``resource``."""

    resource: str
    action: str


@dataclass(frozen=True, slots=True)
class User:
    """A user account (docs/http/records.md). ``email`` is stored trimmed and lowercased and is
    unique among live users; timestamps are UTC to the microsecond; ``deleted_at`` is
    ``None`` while the user is live. ``password_hash`` is what the password hasher made
    and never leaves Locky (no response schema declares it)."""

    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    email: str
    # Account lifecycle (docs/http/accounts.md): proved the address, turned off by an admin,
    # logs in with a second factor.
    email_verified: bool = False
    disabled: bool = False
    mfa_enabled: bool = False
    # Never dumped: no response schema declares it.
    password_hash: str = field(default="", repr=False)
    #: A provisioning system's id for the user (SCIM's ``externalId``), kept as given;
    #: not unique. ``None`` when none was given.
    external_id: str | None = None


@dataclass(frozen=True, slots=True)
class Group:
    """A group (docs/http/records.md): ``name`` unique among live groups (compared exactly),
    ``description`` possibly empty. Its creator is its first ``owner`` member (a group a
    provisioning system makes may start with no member)."""

    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    description: str
    #: A provisioning system's id for the group (SCIM's ``externalId``), kept as given;
    #: not unique. ``None`` when none was given.
    external_id: str | None = None


@dataclass(frozen=True, slots=True)
class Member:
    """A membership: user ``user_uuid`` holds ``role`` within group ``group_uuid`` (one
    live membership per group and user). The role's permissions apply in that group only."""

    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    group_uuid: str
    user_uuid: str
    role: str


@dataclass(frozen=True, slots=True)
class Role:
    """A role (docs/http/records.md and docs/http/authorization.md): ``builtin`` roles come from the authorizer
    (``Authorizer.builtin_roles``) and cannot be changed through the API; custom ones
    are made through the API. ``permissions`` keep the order they were given in."""

    id: int
    uuid: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    name: str
    description: str
    permissions: tuple[Permission, ...]
    builtin: bool


@dataclass(frozen=True, slots=True)
class Session:
    """One login: the chain of refresh tokens it issued, revoked as a whole."""

    uuid: str
    user_uuid: str
    created_at: datetime
    revoked_at: datetime | None
    refresh_jti: str
    # Made through the OpenID provider (docs/http/oauth.md): the client the login was
    # issued to and the scopes it was granted (``None`` for a login of the /v1 API);
    # the OP session (the browser's sign-in at Locky, itself a session with no client)
    # it came from; how the user proved who they are (``pwd``, ``otp``, ``hwk``...).
    client_id: str | None = None
    scope: str | None = None
    op_session_uuid: str | None = None
    amr: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Authenticated:
    """What one authentication read finds: a live session, its live user, and the
    storage's policy revision read in the same statement (see ``SessionStore.authenticate``)."""

    session: Session
    user: User
    policy_revision: int


@dataclass(frozen=True, slots=True)
class Code:
    """A single-use code (docs/http/accounts.md) as storage keeps it: only its hash.

    ``purpose`` is ``verify`` (proves ``email``), ``reset`` (sets a new password) or
    ``mfa`` (the second step of a login); ``email`` is the address it was made for.
    """

    code_hash: str
    purpose: str
    user_uuid: str
    email: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Letter:
    """A message waiting in the outbox: what to send (``purpose``: ``verify`` or
    ``reset``), to whom (``email``; ``user_uuid`` empty when the address was given by
    a caller and is still to be looked up), and how often sending was tried."""

    id: int
    purpose: str
    email: str
    user_uuid: str
    created_at: datetime
    attempts: int


@dataclass(frozen=True, slots=True)
class TotpState:
    """A user's TOTP second factor: ``secret`` sealed by the core (never plain),
    ``confirmed`` once a first code proved the authenticator has it, ``last_step`` the
    last time step whose code was accepted (a code is accepted once), and the hashes of
    the recovery codes not used yet."""

    user_uuid: str
    secret: str
    confirmed: bool
    last_step: int
    recovery_hashes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A token-signing key pair (docs/http/tokens.md): ``public_jwk`` is the public half as a
    JSON text (RFC 7517, with ``kid``, ``kty``, ``alg``, ``use``), ``private_key`` the
    private half as PEM sealed by the core (never plain in storage). ``retired_at`` is
    ``None`` while the key signs; once retired it only verifies what it signed before."""

    kid: str
    alg: str
    public_jwk: str
    private_key: str
    created_at: datetime
    retired_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One security event (docs/http/audit.md), written with the change it records and never
    changed afterwards. ``actor_uuid`` is ``None`` when nobody was logged in (an
    anonymous request, the operator's command line); ``details`` never holds a
    password, hash, token, code or secret."""

    id: int
    uuid: str
    created_at: datetime
    event: str
    actor_uuid: str | None
    target_type: str | None
    target_uuid: str | None
    ip: str
    request_id: str
    details: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Webhook:
    """A subscription: events whose name matches one of ``events`` (exact names, or
    prefixes ending in ``.*``, or ``*``) are POSTed to ``url``, signed with ``secret``
    (sealed by the core in storage, never shown after creation)."""

    id: int
    uuid: str
    url: str
    events: tuple[str, ...]
    description: str
    secret: str
    created_at: datetime


#: The states of a delivery.
PENDING, SUCCEEDED, FAILED = "pending", "succeeded", "failed"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event on its way to one webhook: ``payload`` is the JSON body, fixed when
    the event happened; ``status`` is ``pending`` until a 2xx answer (``succeeded``) or
    until retries ran out (``failed``)."""

    id: int
    webhook_id: int
    event_uuid: str
    event: str
    payload: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str
    created_at: datetime
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Passkey:
    """A WebAuthn credential a user registered (docs/http/accounts.md#passkeys).

    ``credential_id`` is the authenticator's credential id in unpadded base64url, unique
    across all users; ``public_key`` its COSE public key, also unpadded base64url.
    ``sign_count`` is the last signature counter the authenticator reported (0 for an
    authenticator that keeps none). ``aaguid`` names the authenticator's model (a UUID
    string, all zeros when it does not say); ``backed_up``: the credential is synced
    (a multi-device passkey). ``transports`` are the browser's hints, kept for
    ``allowCredentials``."""

    id: int
    uuid: str
    user_uuid: str
    credential_id: str
    public_key: str = field(repr=False)
    sign_count: int
    name: str
    transports: tuple[str, ...]
    aaguid: str
    backed_up: bool
    created_at: datetime
    last_used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[RecordT]):
    """One page of a keyset-paged list."""

    items: list[RecordT]
    next_after_id: int | None


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: the authenticated user and the session the credential belongs to.

    ``session_uuid`` is ``None`` for credentials that are not tied to a login session
    (an API key from a plugin, say). ``policy_revision`` is storage's policy revision
    read together with the session at authentication (``SessionStore.authenticate``):
    it travels with this request to the authorizer, which may trust it instead of
    reading the revision again; ``None`` when the credential's check did not read it.
    """

    user: User
    session_uuid: str | None = None
    scheme: str = "bearer"
    policy_revision: int | None = None


# -- OpenID Connect provider and OAuth 2 clients (docs/http/oauth.md) -------------------


@dataclass(frozen=True, slots=True)
class OAuthClient:
    """An application registered to sign its users in with Locky, or a machine client.

    ``type`` is ``"confidential"`` (holds a secret) or ``"public"`` (a browser or native
    app: no secret, PKCE required). ``secret_hash`` is the SHA-256 hex of the secret
    (``None`` for a public client): the secret itself is shown once and never stored.
    The tuples keep the order the admin gave."""

    id: int
    uuid: str
    client_id: str
    name: str
    type: str
    redirect_uris: tuple[str, ...]
    post_logout_redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    scopes: tuple[str, ...]
    id_token_signed_response_alg: str
    first_party: bool
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    secret_hash: str | None = field(default=None, repr=False)
    #: Moved by ``OAuthClientStore.revoke_tokens``: a ``client_credentials`` token names
    #: the generation it was issued in, and stops working when the client's moves on.
    token_generation: int = 0


@dataclass(frozen=True, slots=True)
class Consent:
    """What a user allowed a client: the scopes, the union of every *Allow*."""

    id: int
    uuid: str
    user_uuid: str
    client_id: str
    scopes: tuple[str, ...]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class AuthorizationCode:
    """An authorization code as storage keeps it: its hash and what it is bound to.

    ``session_uuid`` is the login the code's exchange creates (chosen when the code is
    made), so a second use can revoke what the first one issued. ``used_at`` is set by
    the one exchange that wins."""

    id: int
    code_hash: str
    client_id: str
    user_uuid: str
    redirect_uri: str
    scope: str
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: datetime
    amr: tuple[str, ...]
    op_session_uuid: str | None
    session_uuid: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None


#: The policy subject of a machine client (a ``client_credentials`` token's caller):
#: ``client:<client_id>``. Authorizers get such a caller as a :class:`User` whose
#: ``uuid`` is this subject (see :func:`client_principal`); its built-in role is
#: ``client`` (not ``user``), and admins give it roles like a user's.
CLIENT_SUBJECT_PREFIX = "client:"


def client_principal(client: OAuthClient) -> User:
    """A machine client as the caller of a request: a :class:`User` with the client's
    subject as ``uuid``, no email and no password, never stored."""
    return User(id=0, uuid=CLIENT_SUBJECT_PREFIX + client.client_id, created_at=client.created_at,
                updated_at=client.updated_at, deleted_at=client.deleted_at, name=client.name, email="",
                email_verified=False, disabled=False, mfa_enabled=False)


def is_client_subject(subject: str) -> bool:
    """Whether ``subject`` (a :class:`User`'s ``uuid``) names a machine client."""
    return subject.startswith(CLIENT_SUBJECT_PREFIX)
