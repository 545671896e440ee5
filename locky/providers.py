"""The interfaces a provider implements: storage, password hashing, tokens, authorization.

They are :class:`typing.Protocol` classes: a provider needs no base class, only these
methods. Records in and out are the dataclasses of :mod:`locky.records`; errors are
those of :mod:`locky.errors`. The storage contract suite in :mod:`locky.testing`
checks a storage provider against this text.

What each store method makes stale in the copies processes keep (the storage cache, an
authorizer's policy, the signing keys) is declared once, in :mod:`locky.cache.declared`:
a method added to a store protocol here is added there too (a test fails otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any, ContextManager, Generic, Iterable, Protocol, TypeVar, runtime_checkable

from locky.paging import every
from locky.records import (
    AuditEvent,
    Authenticated,
    AuthorizationCode,
    Code,
    Consent,
    Delivery,
    Group,
    Letter,
    Member,
    OAuthClient,
    Page,
    Passkey,
    Permission,
    Role,
    Session,
    SigningKey,
    TotpState,
    User,
    Webhook,
)

RecordT = TypeVar("RecordT", covariant=True)


# ---------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------


class RecordStore(Protocol, Generic[RecordT]):
    """Reads and deletes shared by every kind of record. Deleted records are invisible:
    ``get``/``get_by_uuid`` return ``None`` for them and lists and counts skip them.

    What holds for every kind (users, groups, members, roles):

    - **Ids** are positive integers below ``2**63`` assigned by storage, growing with
      each insert; a deleted record's id is never reused. ``uuid`` is a fresh lowercase
      UUID4 string.
    - **Timestamps** (``created_at``, ``updated_at``, ``deleted_at``) are UTC, kept to
      the **microsecond**: a record read back equals, field for field, the record the
      write returned (naive datetimes are UTC; aware ones are compared as UTC). A new
      record has ``created_at == updated_at`` and ``deleted_at is None``.
    - **Text** is stored exactly as given (no trimming; any Unicode, emoji included);
      only emails are lowercased.
    - **Writes** are each one transaction of their own, unless called inside
      :meth:`Storage.atomic`. A database that does not answer raises
      :class:`~locky.errors.Unavailable` (no driver text in its message).
    """

    def get(self, id: int) -> RecordT | None:
        """The live record with this id, or ``None``.

        Ids out of range (0, negative, ``2**63`` or more) and ids of deleted records
        are ``None`` too, never an error.
        """

    def get_by_uuid(self, uuid: str) -> RecordT | None:
        """The live record with this uuid, or ``None`` (also for an unknown uuid and
        for a value that is not a ``str``)."""

    def list(self, *, after_id: int = 0, limit: int = 50, **filters: Any) -> Page[RecordT]:
        """Live records with ``id > after_id`` in ascending id order, at most ``limit``.

        ``filters`` are exact matches on the kind's filter fields (users: ``email``;
        groups: ``name``; members: ``group_uuid``, ``user_uuid``, ``role``; roles:
        ``name``): case-sensitive and untrimmed (``"admins"`` finds neither ``"Admins"``
        nor ``" admins "``), except ``email``, which is lowercased before it compares.
        A filter whose value is ``None`` is ignored (as if not given). A filter name the
        kind does not have raises :class:`ValueError` (never silently ignored: a typo
        would list everything). ``after_id`` may fall between ids or past the last one.

        ``next_after_id`` is the last item's id when more records follow, else ``None``
        (also when the last page is exactly full). Must cost the same on every page
        (keyset paging over the id index).
        """

    def count(self, **filters: Any) -> int:
        """How many live records match ``filters``: the same filters as :meth:`list`,
        with the same rules (``None`` ignored, unknown names a ``ValueError``)."""

    def delete(self, id: int) -> RecordT:
        """Soft-delete: set ``deleted_at`` and ``updated_at`` (equal) in one write;
        return the deleted record.

        Raise :class:`~locky.errors.NotFound` for a missing or already deleted record
        (ids out of range included). The value stays in storage but no longer blocks
        uniqueness: a new record may take a deleted record's unique value.
        """


@runtime_checkable
class DocumentPages(Protocol):
    """Optional on a record store (users, groups, members): list pages already in their
    JSON form, for the list endpoints. A store without it is listed through
    :meth:`RecordStore.list` and the response schema, with the same answer.

    The list of 50 users spent most of its time building 50 records and then 50 dicts
    from them (parsing and formatting two timestamps each); a store that can shape the
    rows in its query skips both.
    """

    def list_documents(self, fields: tuple[tuple[str, str], ...], *, after_id: int = 0, limit: int = 50,
                       **filters: Any) -> Page[dict]:
        """The page :meth:`RecordStore.list` gives for the same arguments (same records,
        order, ``next_after_id`` and filter rules), each record as a dict holding exactly
        ``fields``, in that order.

        ``fields`` are ``(name, kind)`` pairs naming the record's fields
        (:func:`locky.dump.plain_fields` of the response schema): kind ``"timestamp"``
        is rendered as the API shows it, ``"YYYY-MM-DDTHH:MM:SS.ffffffZ"`` in UTC
        (``None`` stays ``None``); ``"bool"`` is a ``bool``; ``"value"`` is the stored
        ``str`` or ``int``. A name the record does not have raises :class:`ValueError`.
        """


class UserStore(RecordStore[User], Protocol):
    """Users. ``email`` is unique among live users, without regard to case; filters:
    ``email``, ``external_id`` (exact). A new user has ``email_verified``, ``disabled``
    and ``mfa_enabled`` false."""

    def create(self, *, name: str, email: str, password_hash: str, external_id: str | None = None) -> User:
        """Insert a user (with a provisioning system's ``external_id``, when given). ``email`` arrives trimmed and lowercased; raise
        ``Conflict("email", "Already registered.")`` (the client sees
        ``{"email": "Already registered."}``) when a live user has it, in any case,
        also under concurrent inserts from threads and from other processes sharing the
        database (the database enforces it: a check-then-insert guarded by a lock of
        one process is not enough). Emails compare without regard to case everywhere
        (store, look up and filter them lowercased)."""

    def get_by_email(self, email: str) -> User | None:
        """The live user with this email, compared lowercased (``"ADA@Example.COM"``
        finds ``ada@example.com``), or ``None``."""

    def get_many_by_uuid(self, uuids: Iterable[str]) -> dict[str, User]:
        """:meth:`get_by_uuid` of many uuids in one read: the live users found, keyed by
        uuid; a uuid with none (or a value that is no string) is left out. A batch of
        checks reads the users it asks about with it (docs/http/authorization.md); a
        storage without it is asked :meth:`get_by_uuid` once per user."""

    def update(self, id: int, **changes: Any) -> User:
        """Change ``name``, ``email``, ``password_hash``, ``email_verified``,
        ``disabled`` and/or ``external_id`` (``""`` clears it: stored as ``None``);
        return the updated user.

        A change whose value is ``None`` is ignored (that field stays as stored). A
        change that actually alters something sets ``updated_at``; the other fields,
        ``uuid`` and ``created_at`` stay. ``NotFound`` for a missing or deleted user;
        ``Conflict("email", "Already registered.")`` when another live user has the new
        email (then nothing changes, ``email_verified`` included); setting a user's own
        email again is no conflict. A new ``email`` (different from the stored one)
        sets ``email_verified`` false in the same write, unless the changes set it
        themselves. Users do not move :meth:`Storage.revision`."""

    def for_update(self, uuid: str) -> User | None:
        """The live user ``uuid`` as stored now, or ``None`` (unknown, deleted, or
        ``uuid`` not a ``str``), read from the primary.

        Inside :meth:`Storage.atomic` the row stays locked against every other write to
        it (``update``, ``delete``, ``mark_verified``, the second-factor changes) until
        the block ends, also across processes sharing the database (a SQL backend:
        ``SELECT ... FOR UPDATE``; SQLite: the database's write lock). Locky decides on
        what it returns and writes in the same block, so no change can slip between a
        check and its write (a reset racing an email change, a login racing a password
        change): it calls ``for_update`` first in the block, as every caller locks the user
        before its sessions, codes or second factor, so two blocks never wait on each
        other the wrong way round."""

    def mark_verified(self, uuid: str, email: str) -> User | None:
        """Set ``email_verified`` on the live user ``uuid`` if its email is still
        ``email`` (a verification code proves only the address it was sent to); the
        user, or ``None`` when it is gone or its email changed."""


class GroupStore(RecordStore[Group], Protocol):
    """Groups. ``name`` is unique among live groups, compared exactly (``"Admins"`` and
    ``"admins"`` are two groups); filters: ``name``, ``external_id`` (exact).
    ``description`` may be empty."""

    def create(self, *, name: str, description: str, owner_uuid: str | None,
               external_id: str | None = None) -> Group:
        """Insert a group and, in the same transaction, make ``owner_uuid`` its
        ``owner`` member (``None``: a group with no members yet, as a provisioning
        system makes them). ``Invalid.one("owner_uuid", ...)`` when no live user has that
        uuid. ``Conflict("name")`` (the client sees ``{"name": "Already exists."}``) when
        a live group has the name, also under concurrent inserts from threads and other
        processes (the database enforces it)."""

    def get_many_by_uuid(self, uuids: Iterable[str]) -> dict[str, Group]:
        """:meth:`get_by_uuid` of many uuids in one read, as
        :meth:`UserStore.get_many_by_uuid`: the live groups found, keyed by uuid; a uuid
        with none (or a value that is no string) is left out. A page of SCIM users reads
        the groups they are in with it (docs/http/scim.md); a storage without it is asked
        :meth:`get_by_uuid` once per group."""

    def for_update(self, uuid: str) -> Group | None:
        """The live group ``uuid`` as stored now, or ``None`` (unknown, deleted, or
        ``uuid`` not a ``str``), read from the primary.

        Inside :meth:`Storage.atomic` the row stays locked until the block ends, as
        :meth:`UserStore.for_update` holds a user's, against every write that takes the
        group's row: its ``update`` and ``delete``, and a membership's ``create`` and
        ``delete``, which lock it first. Locky adds a membership so: the group locked,
        then its policy asked about the caller's own membership there, then the insert;
        a concurrent removal of the caller's membership is either seen or waits."""

    def update(self, id: int, **changes: Any) -> Group:
        """Change ``name``, ``description`` and/or ``external_id`` (``""`` clears it);
        return the updated group. ``None``
        values are ignored; a real change sets ``updated_at``. ``NotFound`` for a missing
        or deleted group; ``Conflict("name")`` (``{"name": "Already exists."}``) when
        another live group has the new name.

        :meth:`delete` of a group also soft-deletes its live memberships, in the same
        transaction."""


class MemberStore(RecordStore[Member], Protocol):
    """Memberships: a user's role in a group. One live membership per (group, user);
    filters: ``group_uuid``, ``user_uuid``, ``role``. Memberships do not move
    :meth:`Storage.revision`: authorizers ask :meth:`role_of` on every group-scoped
    decision, which Locky's storage cache keeps until a membership's write, or a group's
    or user's delete, is announced (:mod:`locky.cache.declared`)."""

    def create(self, *, group_uuid: str, user_uuid: str, role: str) -> Member:
        """Add a membership, in one transaction (the write's own, or the caller's
        :meth:`Storage.atomic` block), in this order:

        1. check the references: raise ``Invalid.missing(field)`` for the first of
           ``group_uuid``, ``user_uuid``, ``role`` that names no live group, user or role;
        2. insert: ``Conflict("user_uuid", "Already a member of this group.")`` when the
           user already has a live membership in the group (also under concurrent
           inserts: exactly one of them is kept).

        Storage decides nothing else: Locky reads the group, user and role, asks its
        policy and then calls this, all in one :meth:`Storage.atomic` block (a refusal
        undoes the block), so these checks are what holds against deletes that commit
        in between. Concurrent deletes of the group, the user or the role must not leave
        the new membership live on a deleted record: they either complete first (then
        this is ``Invalid.missing``) or see it (and end it, or refuse the role's delete).
        """

    def delete(self, id: int) -> Member:
        """Soft-delete the membership, as :meth:`RecordStore.delete`; but raise
        ``Invalid.one("role", ...)`` when it is the group's last live ``owner``
        membership, also when two owners leave at the same moment (one of them stays)."""

    def role_of(self, user_uuid: str, group_uuid: str) -> str | None:
        """The role of the user's live membership in the live group, or ``None``."""

    def roles_in(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """:meth:`role_of` of many ``(user_uuid, group_uuid)`` pairs in one read: the role
        of each pair's live membership in the live group, keyed by the pair; a pair with
        none (or with a value that is no string) is left out. A batch of checks reads the
        memberships it needs with it, in one storage round trip (docs/http/authorization.md)."""

    def roles_by_group(self, user_uuid: str, at_most: int) -> dict[str, str] | None:
        """The roles of the user's live memberships in live groups, by group uuid, in one
        read of at most ``at_most + 1`` memberships: ``None`` when the user has more than
        ``at_most``; ``{}`` for a user with none (or a value that is no string). The
        storage cache keeps the answer (:mod:`locky.cache.storage`), so a user's
        decisions in each of their groups read storage once, not once per group; a
        storage without it is asked :meth:`role_of` per group."""

    def user_with_roles_by_group(self, user_uuid: str, at_most: int) -> tuple[User | None, dict[str, str] | None]:
        """The live user of ``user_uuid`` and their :meth:`roles_by_group`, in one read:
        ``(user, roles)`` as ``users.get_by_uuid(user_uuid)`` and
        ``roles_by_group(user_uuid, at_most)`` answer them; ``(None, {})`` when no live
        user has that uuid (or for a value that is no string). A group-scoped check
        (``GET /v1/internal/authz/check``, docs/http/authorization.md) reads its user with
        it, and the storage cache keeps both: when it holds neither (a user new to the
        worker, or both entries aged out together), the check costs one round trip, not
        two; a storage without it is asked both."""

    def of_users(self, user_uuids: Iterable[str]) -> list[Member]:
        """The live memberships of any of these users, oldest first (by id), in one read;
        a value that is no string is left out. A page of SCIM users reads their groups
        with it (docs/http/scim.md); a storage without it is listed user by user
        (:meth:`RecordStore.list` with ``user_uuid``)."""

    def of_groups(self, group_uuids: Iterable[str]) -> list[Member]:
        """The live memberships in any of these groups, oldest first (by id), in one
        read; a value that is no string is left out. A page of SCIM groups reads their
        members with it; a storage without it is listed group by group
        (:meth:`RecordStore.list` with ``group_uuid``)."""

    def holders_by_id(self, group_uuid: str, roles: Iterable[str], after_id: int,
                      limit: int) -> list[tuple[int, str]]:
        """A page of the users whose live membership in the group has any of ``roles``:
        ``(user id, user uuid)`` of those whose id is above ``after_id``, by id, at most
        ``limit`` (:meth:`GrantStore.holders_by_id` for a group); a ``group_uuid`` that is no
        string lists none. A storage without it is listed with :meth:`RecordStore.list`."""


class RoleStore(RecordStore[Role], Protocol):
    """Roles: built-in ones (from the policy files, ``builtin`` true) and custom ones
    (made through the API). ``name`` is unique among live roles; filter: ``name``.

    **Policy revision**: every write of a custom role (:meth:`create`, :meth:`update`,
    :meth:`delete`) makes :meth:`Storage.revision` grow, in the same transaction, so
    authorizers in every process reload what they cached."""

    def create(self, *, name: str, description: str, permissions: Iterable[Permission]) -> Role:
        """Insert a custom role (``builtin`` false). ``permissions`` may be any iterable
        and keep their order. ``Conflict("name")`` (``{"name": "Already exists."}``)
        when a live role has the name. Moves :meth:`Storage.revision`."""

    def update(self, id: int, **changes: Any) -> Role:
        """Change ``name``, ``description``, ``permissions`` (``None`` values ignored).
        ``Invalid`` (not ``Conflict``) for a built-in role or a rename of a role held by
        live memberships or grants; ``NotFound``; ``Conflict("name")``. Moves
        :meth:`Storage.revision`."""

    def delete(self, id: int) -> Role:
        """Soft-delete a custom role, as :meth:`RecordStore.delete`, and move
        :meth:`Storage.revision`. ``Invalid.one("name", ...)`` (not ``Conflict``) for a
        built-in role or one held by live memberships or grants (also against
        memberships added concurrently): a role created later with the same name must
        start with nobody holding it."""

    def sync_builtin(self, roles: Iterable[BuiltinRole]) -> None:
        """Make the stored built-in roles match ``roles`` (from the policy files):
        insert new ones, update changed ones, soft-delete ones no longer there.
        Idempotent; called at every start. It need not move :meth:`Storage.revision`
        (built-in roles' permissions come from the files every process reads)."""

    def custom_permissions(self) -> dict[str, tuple[Permission, ...]]:
        """Every live custom (non built-in) role's permissions, by role name."""


class SessionStore(Protocol):
    """Login sessions: one per login, holding the single refresh token still usable.

    The OpenID provider keeps its own sign-ins here too: an *OP session* (the browser
    signed in at Locky) is a session without ``client_id``, and each login it gives a
    client names it in ``op_session_uuid``."""

    def create(self, *, uuid: str, user_uuid: str, refresh_jti: str, client_id: str | None = None,
               scope: str | None = None, op_session_uuid: str | None = None,
               amr: Iterable[str] = ()) -> Session:
        """Start session ``uuid`` for a live user, with its first refresh token's jti,
        and (logins made through the OpenID provider) the client, the granted scope, the
        OP session it came from and how the user authenticated."""

    def identity(self, uuid: str) -> tuple[Session, User] | None:
        """The live (not revoked) session and its live user, or ``None``."""

    def authenticate(self, uuid: str) -> Authenticated | None:
        """What Locky reads on every authenticated request, in one read.

        The live (not revoked) session ``uuid``, its live (not deleted) user and
        :meth:`Storage.revision` as of that same read (one SQL statement for a SQL
        backend; under one lock in memory), as :class:`~locky.records.Authenticated`.
        ``None`` when the session is unknown or revoked, its user deleted, or ``uuid``
        is not a ``str``. The revision goes on the request's ``Identity`` and on to the
        authorizer, so a request costs no second trip for it.
        """

    def rotate(self, uuid: str, presented_jti: str, new_jti: str) -> bool:
        """Atomically replace the session's refresh jti ``presented_jti`` by ``new_jti``.

        Return ``False`` when the session is revoked or ``presented_jti`` is not its
        current one; in the latter case (a refresh token used twice) revoke the session.
        """

    def revoke(self, uuid: str) -> bool:
        """Revoke the session; ``True`` when it was live."""

    def revoke_all(self, user_uuid: str, *, keep: str | None = None) -> int:
        """Revoke every live session of the user but the one whose uuid is ``keep``
        (when given); return how many were revoked.

        Locky calls it when a password changes (``keep`` is the caller's own session
        when users change their own) and when an admin changes another user's
        credentials (no ``keep``). A refresh racing it must not outlive it.
        """

    def end_op_session(self, uuid: str) -> int:
        """Revoke the OP session ``uuid`` and every live session whose
        ``op_session_uuid`` is ``uuid`` (signing out at Locky ends the logins it gave
        clients); how many were revoked."""

    def revoke_client(self, client_id: str, *, user_uuid: str | None = None) -> int:
        """Revoke every live session issued to ``client_id`` (of ``user_uuid`` only,
        when given: a user withdrawing consent); how many were revoked."""


class CodeStore(Protocol):
    """Single-use codes (docs/http/accounts.md): storage sees only their hashes (SHA-256 hex of
    a random value of at least 128 bits), never the codes."""

    def add(self, *, code_hash: str, purpose: str, user_uuid: str, email: str, expires_at: datetime) -> Code:
        """Keep a new code. A call also deletes a bounded batch of codes that expired a
        day or more ago, so they do not pile up."""

    def find(self, code_hash: str, purpose: str, *, now: datetime) -> Code | None:
        """The unused code with this hash and purpose that expires after ``now``, or ``None``."""

    def use(self, code_hash: str, purpose: str, *, now: datetime) -> Code | None:
        """Mark the code used and return it, if :meth:`find` would find it; else ``None``.
        Atomic: of concurrent uses of one code exactly one gets it."""

    def count_since(self, user_uuid: str, purpose: str, since: datetime) -> int:
        """How many codes of ``purpose`` were made for the user at ``since`` or later
        (used or not): the per-account message limit."""


class Outbox(Protocol):
    """Messages to send, kept in storage until a mailer took them (docs/http/accounts.md):
    queued by requests, sent by a background sender in every worker process."""

    def put(self, *, purpose: str, email: str, user_uuid: str = "") -> Letter:
        """Queue a letter, due now."""

    def claim(self, *, now: datetime, lease: int, limit: int = 10) -> list[Letter]:
        """Up to ``limit`` letters due at ``now`` (oldest first) that no sender holds,
        each now held for ``lease`` seconds and its ``attempts`` counted one up.
        Concurrent claims (other processes and hosts) never get the same letter while
        its lease runs; a sender that died lets it go when the lease ends."""

    def done(self, id: int) -> None:
        """The letter was sent (or needs no sending): forget it."""

    def retry(self, id: int, *, due_at: datetime) -> None:
        """Sending failed: release the letter and make it due again at ``due_at``."""

    def pending(self) -> int:
        """How many letters wait (for health reports and tests)."""


class TotpStore(Protocol):
    """Users' TOTP second factor (docs/http/accounts.md). Secrets arrive sealed by the core."""

    def get(self, user_uuid: str) -> TotpState | None:
        """The user's TOTP state, confirmed or pending, or ``None``."""

    def begin(self, user_uuid: str, secret: str) -> bool:
        """Keep a pending (unconfirmed) ``secret`` for the user, replacing a pending
        one; ``False`` (and nothing changed) when the user's TOTP is confirmed."""

    def confirm(self, user_uuid: str, *, step: int, recovery_hashes: Iterable[str]) -> User | None:
        """Confirm the pending secret: accepted at time ``step``, with these recovery
        codes; set the user's ``mfa_enabled`` in the same transaction and return the
        user. ``None`` when nothing is pending or ``step`` was accepted already."""

    def use_step(self, user_uuid: str, step: int) -> bool:
        """Accept a TOTP code of time ``step``: ``True`` once per step and never for a
        step at or before the last one accepted (a code works once), atomically."""

    def use_recovery(self, user_uuid: str, code_hash: str) -> bool:
        """Spend a recovery code of a confirmed TOTP: ``True`` once, atomically."""

    def remove(self, user_uuid: str) -> User | None:
        """Delete the user's TOTP (pending or confirmed), clear ``mfa_enabled`` in the
        same transaction and return the user; ``None`` when there was none."""


class PasskeyStore(Protocol):
    """Users' passkeys (WebAuthn credentials, docs/http/accounts.md#passkeys). Removed
    passkeys are deleted, not soft-deleted: nothing may sign in with them again."""

    def add(self, *, user_uuid: str, credential_id: str, public_key: str, sign_count: int, name: str,
            transports: Iterable[str], aaguid: str, backed_up: bool) -> Passkey:
        """Keep a new passkey of the user. :class:`~locky.errors.Conflict`
        (``Conflict("credential", "Already registered.")``) when any user has this
        ``credential_id``, also under concurrent inserts (the database enforces it)."""

    def of_user(self, user_uuid: str) -> list[Passkey]:
        """The user's passkeys, oldest first."""

    def get_by_credential_id(self, credential_id: str) -> Passkey | None:
        """The passkey with this credential id, or ``None`` (also for a non-``str``)."""

    def use(self, id: int, *, sign_count: int, now: datetime) -> Passkey | None:
        """A sign-in with the passkey verified, reporting ``sign_count``: atomically, if
        the stored counter is below ``sign_count``, or both are 0 (an authenticator that
        counts nothing), store ``sign_count`` and ``last_used_at = now`` and return the
        passkey as it is after; otherwise (the counter did not move on: a cloned
        authenticator or a replay racing the sign-in; or the passkey is gone) change
        nothing and return ``None``. Of concurrent calls with one count above 0 at most one
        wins (an authenticator that counts nothing gives no way to tell a copy)."""

    def rename(self, user_uuid: str, id: int, name: str) -> Passkey | None:
        """Rename the user's passkey ``id``; ``None`` when the user has no such passkey."""

    def remove(self, user_uuid: str, id: int) -> Passkey | None:
        """Delete the user's passkey ``id`` and return it; ``None`` when the user has no
        such passkey (another user's is not theirs to remove)."""


class KeyStore(Protocol):
    """Token-signing keys shared by every worker and host (docs/http/tokens.md). Keys come
    in families, one per algorithm (``alg``: the configured one, and RS256 for ID tokens);
    exactly one key of each family is active (signs) at a time, whatever processes rotate
    at once."""

    def active(self, alg: str) -> SigningKey | None:
        """The active key of the ``alg`` family, or ``None`` before its first."""

    def all(self) -> list[SigningKey]:
        """Every stored key, active and retired, oldest first."""

    def rotate(self, new: SigningKey, *, replacing: str | None) -> SigningKey:
        """Make ``new`` the active key of its family (``new.alg``) and retire that
        family's active one, atomically, if its kid is still ``replacing`` (``None``:
        the family has no active key yet);
        otherwise change nothing and return the active key another process made. So
        hosts rotating together (at startup, or when the key is old) agree on one key:
        the one returned."""

    def prune(self, retired_before: datetime) -> int:
        """Delete keys retired before ``retired_before`` (no token they signed can still
        be valid); how many."""


class LoginThrottle(Protocol):
    """Failed-login counting with exponential backoff, shared by every worker process.

    Keys are emails (lowercased: an account's guesses from every address), an email and
    a client address (``EMAIL|ip:...``: that address's guesses at that account) and
    client addresses (``ip:...``: over every account). Locky calls :meth:`hit` before it
    checks a password, so an attempt counts as a failure until a success takes it back
    (:meth:`reset` for the account and address, :meth:`forgive` for the others).

    The rule, for ``limit`` L and ``window`` W seconds: a key's count starts at its first
    attempt and ends W seconds later. Once the count reaches L, the key is locked for
    ``min(W, W / 16 * 2**(count - L))`` seconds after its last counted attempt (56 seconds
    for the defaults, doubling with each further failure up to the window). Attempts
    while locked are refused and NOT counted, so they cannot extend the lock; the first
    attempt after the lock ends is counted again (and, failing, locks for twice as long).
    A count whose window has ended starts afresh at the next attempt once no lock holds.

    :meth:`take` keeps a plain quota in the same store under keys of their own (such as
    ``signup:ip:...``): at most ``limit`` per window, no backoff (docs/http/accounts.md).
    """

    def hit(self, key: str, *, limit: int, window: int) -> int | None:
        """Count one attempt for ``key`` atomically (concurrent hits never let more than
        ``limit`` attempts through before the lock), as the class docstring says.

        Return ``None`` when the attempt may proceed, else the whole seconds (at least 1,
        rounded up) until the lock ends, without counting the attempt. A hit that adds a
        key also deletes a bounded batch of ended keys (see :meth:`prune`), so keys never
        seen again do not pile up.
        """

    def take(self, key: str, *, limit: int, window: int) -> int | None:
        """Count one request for quota ``key`` atomically: at most ``limit`` per
        ``window`` seconds, counted from the key's first request; the first request after
        the window ended starts a new one. Concurrent takes never let more than ``limit``
        through in one window.

        Return ``None`` when the request may proceed, else the whole seconds (at least 1,
        rounded up) until the window ends, without counting it. A quota key's row is
        kept until its window ended, whatever window other keys' pruning uses (a quota
        of an hour outlives a login window of 15 minutes); :meth:`hit` and :meth:`prune`
        delete it afterwards. Quota keys never meet :meth:`hit`'s keys.
        """

    def reset(self, key: str) -> bool:
        """Forget ``key``'s count and lock (a successful login; ``locky unlock``).
        ``True`` when there was something to forget: an attempt not forgiven."""

    def reset_prefix(self, prefix: str) -> int:
        """Forget every key that starts with ``prefix`` (compared exactly: ``%`` and
        ``_`` are no wildcards), as :meth:`reset` does one: an account's counts from
        each client address (``locky unlock``, a password reset). How many of them held
        something to forget (as :meth:`reset` says)."""

    def forgive(self, key: str) -> None:
        """Take back one counted attempt of ``key`` (it succeeded), never below zero;
        the window and the other attempts stay (a client address's successful login)."""

    def prune(self, *, window: int, batch: int = 1000) -> int:
        """Delete up to ``batch`` keys that ended: whose window started ``2 * window``
        seconds ago or earlier (any count and lock of theirs is over by then), and
        quota keys (:meth:`take`) whose window ended that long ago. Return how many
        were deleted."""


class GrantStore(Protocol):
    """Global role grants (``admin`` made by ``locky grant-admin``). Grants bind to the
    account (its uuid), never to an address."""

    def grant(self, user_uuid: str, role: str) -> bool:
        """Grant ``role`` to the user everywhere; ``False`` when already granted. Of
        concurrent grants of one role to one user exactly one answers ``True``. A grant
        that adds something moves :meth:`Storage.revision`."""

    def revoke(self, user_uuid: str, role: str) -> bool:
        """Take the grant back; ``False`` when there was none. A revoke that removes
        something moves :meth:`Storage.revision`."""

    def roles_of(self, user_uuid: str) -> frozenset[str]:
        """The roles granted to the user."""

    def holders(self, role: str) -> list[str]:
        """The uuids of the users granted ``role`` (who may do what it allows,
        ``/v1/internal/authz/subjects``), in no particular order."""

    def holders_by_id(self, roles: Iterable[str], after_id: int, limit: int) -> list[tuple[int, str]]:
        """A page of the users granted any of ``roles``: ``(user id, user uuid)`` of those
        whose id is above ``after_id``, by id, each once, at most ``limit``. Deleted users
        may be listed (Locky leaves them out); a grant to a subject that is no user
        (``client:<client_id>``) is not. A page of ``/v1/internal/authz/subjects`` reads
        its candidates with it, so its cost is the page's, not the number of holders; a
        storage without it is read with :meth:`holders` and the users' records."""


@dataclass(frozen=True)
class Migration:
    """One step of a storage schema: ``version`` (1, 2, ...) and what it does.

    ``statements`` are what the step runs on the connected engine, shown by
    ``locky migrate --dry-run``; a storage without SQL may leave it empty.
    """

    version: int
    description: str
    statements: tuple[str, ...] = ()


@dataclass(frozen=True)
class SchemaState:
    """Where a storage's schema stands: ``current`` is the version the database holds
    (0 for an empty one), ``latest`` the version this code writes, ``pending`` the
    steps between them, in order."""

    current: int
    latest: int
    pending: tuple[Migration, ...] = ()

    @property
    def ahead(self) -> bool:
        """The database was written by a newer release than this code."""
        return self.current > self.latest


class AuditStore(Protocol):
    """The audit trail (docs/http/audit.md): append-only. Locky writes an event inside the
    :meth:`Storage.atomic` block of the change it records, so both are kept or neither;
    nothing but :meth:`prune` ever removes one, and nothing changes one."""

    def add(self, *, uuid: str, event: str, actor_uuid: str | None, target_type: str | None,
            target_uuid: str | None, ip: str, request_id: str, details: dict,
            created_at: datetime) -> AuditEvent:
        """Store one event; its ``id`` is larger than every earlier event's."""

    def list(self, *, after_id: int = 0, limit: int = 50, event: str | None = None,
             event_prefix: str | None = None, actor_uuid: str | None = None,
             target_uuid: str | None = None, since: datetime | None = None,
             until: datetime | None = None, ip: str | None = None) -> Page[AuditEvent]:
        """Events with ``id > after_id`` in ascending id order, at most ``limit``, that
        match every filter given: ``event`` exactly, or names starting with
        ``event_prefix`` (``"user."``); ``actor_uuid``, ``target_uuid``, ``ip`` exactly;
        ``since <= created_at < until``. Keyset paging, as :meth:`RecordStore.list`."""

    def prune(self, older_than: datetime, *, batch: int = 1000) -> int:
        """Delete up to ``batch`` events created before ``older_than``; how many went.
        The operator's retention, never an API call."""


class WebhookStore(Protocol):
    """Webhook subscriptions (docs/http/audit.md)."""

    def create(self, *, uuid: str, url: str, events: Iterable[str], description: str, secret: str,
               created_at: datetime) -> Webhook:
        """Store a subscription (``secret`` already sealed by the core)."""

    def get(self, id: int) -> Webhook | None:
        """The subscription ``id``, or ``None``."""

    def list(self, *, after_id: int = 0, limit: int = 50) -> Page[Webhook]:
        """Subscriptions by ascending id, keyset paged."""

    def matching(self, event: str) -> list[Webhook]:
        """Every subscription one of whose patterns matches ``event`` (see
        :func:`locky.webhooks.patterns.matches`). Called with every audited change, inside its
        transaction: keep it cheap (few rows; cache what a change cannot make stale)."""

    def delete(self, id: int) -> Webhook | None:
        """Remove the subscription and every delivery of it that is still pending; the
        removed subscription, or ``None`` when there was none."""


class DeliveryStore(Protocol):
    """The webhook delivery outbox and its history (docs/http/audit.md): one row per event and
    subscription, queued in the event's transaction, claimed by background senders in
    every process as :class:`Outbox` letters are (a lease, never two senders at once)."""

    def queue(self, *, webhook_id: int, event_uuid: str, event: str, payload: str,
              created_at: datetime) -> Delivery:
        """A pending delivery, due at ``created_at``."""

    def claim(self, *, now: datetime, lease: int, limit: int = 10) -> list[Delivery]:
        """Up to ``limit`` pending deliveries due at ``now`` that no sender holds (oldest
        first), each now held for ``lease`` seconds with ``attempts`` counted one up.
        Concurrent claims never get the same delivery while its lease runs
        (``SELECT ... FOR UPDATE SKIP LOCKED`` or the engine's equivalent)."""

    def succeeded(self, id: int, *, status_code: int, at: datetime) -> None:
        """The receiver answered 2xx: the delivery is ``succeeded``."""

    def retry(self, id: int, *, status_code: int | None, error: str, at: datetime,
              due_at: datetime) -> None:
        """The attempt at ``at`` failed: record why, release it, due again at ``due_at``."""

    def failed(self, id: int, *, status_code: int | None, error: str, at: datetime) -> None:
        """The last attempt failed and no more will be made: the delivery is ``failed``."""

    def get(self, id: int) -> Delivery | None:
        """The delivery ``id``, or ``None``."""

    def list(self, webhook_id: int, *, after_id: int = 0, limit: int = 50) -> Page[Delivery]:
        """The deliveries of one subscription by ascending id, keyset paged."""

    def pending(self) -> int:
        """How many deliveries wait (for health reports and tests)."""


class OAuthClientStore(RecordStore[OAuthClient], Protocol):
    """OAuth 2 / OpenID Connect clients (docs/http/oauth.md). Soft-deleted like the other
    records: ``get``, ``get_by_uuid``, ``list`` and ``count`` see live clients only;
    ``client_id`` is unique among live clients. ``list`` takes no filters."""

    def create(self, *, client_id: str, name: str, type: str, redirect_uris: Iterable[str],
               post_logout_redirect_uris: Iterable[str], grant_types: Iterable[str], scopes: Iterable[str],
               id_token_signed_response_alg: str, first_party: bool, secret_hash: str | None) -> OAuthClient:
        """Store a new client. :class:`~locky.errors.Conflict` when ``client_id`` is taken."""

    def get_by_client_id(self, client_id: str) -> OAuthClient | None:
        """The live client with this ``client_id``, or ``None`` (also for a non-``str``)."""

    def update(self, id: int, **changes: Any) -> OAuthClient:
        """Change any of ``name``, ``redirect_uris``, ``post_logout_redirect_uris``,
        ``grant_types``, ``scopes``, ``id_token_signed_response_alg``, ``first_party``,
        ``secret_hash``; move ``updated_at``. :class:`~locky.errors.NotFound` when the
        client is not live."""

    def revoke_tokens(self, id: int) -> OAuthClient | None:
        """Move the client's ``token_generation`` on by one, atomically (every
        ``client_credentials`` token issued so far stops working); the client as it is
        after, or ``None`` when it is not live."""


class ConsentStore(Protocol):
    """What each user allowed each client (docs/http/oauth.md): one live row per user and
    client, whose scopes grow with each *Allow* and go when the user withdraws them."""

    def get(self, user_uuid: str, client_id: str) -> Consent | None:
        """The user's consent to the client, or ``None``."""

    def grant(self, user_uuid: str, client_id: str, scopes: Iterable[str]) -> Consent:
        """Add ``scopes`` to the user's consent to the client (made when there is none);
        the stored scopes are the sorted union."""

    def of_user(self, user_uuid: str) -> list[Consent]:
        """Every consent the user gave, oldest first."""

    def withdraw(self, user_uuid: str, client_id: str) -> bool:
        """Remove the user's consent to the client; ``True`` when there was one."""


class AuthorizationCodeStore(Protocol):
    """Authorization codes (RFC 6749 section 4.1), kept only as hashes, single-use."""

    def add(self, *, code_hash: str, client_id: str, user_uuid: str, redirect_uri: str, scope: str,
            nonce: str | None, code_challenge: str | None, code_challenge_method: str | None,
            auth_time: datetime, amr: Iterable[str], op_session_uuid: str | None, session_uuid: str,
            expires_at: datetime) -> AuthorizationCode:
        """Store a new code. May delete codes that expired more than a day ago."""

    def find(self, code_hash: str) -> AuthorizationCode | None:
        """The code with this hash, used or not, expired or not (a used code must stay
        findable for a day, so that its second use is noticed); ``None`` when unknown."""

    def use(self, code_hash: str, *, now: datetime) -> AuthorizationCode | None:
        """Atomically mark the code used, if it is unused and ``now`` is before its
        ``expires_at``; return it, or ``None`` when another exchange won, it expired or
        it is unknown. Of concurrent calls on one code at most one returns it."""


@runtime_checkable
class Storage(Protocol):
    """A storage provider: one object per app holding every store, built by the factory
    registered in ``locky_register_storage``. Run
    :class:`locky.testing.storage_contract.StorageContract` against it."""

    users: UserStore
    groups: GroupStore
    members: MemberStore
    roles: RoleStore
    sessions: SessionStore
    throttle: LoginThrottle
    grants: GrantStore
    codes: CodeStore
    outbox: Outbox
    totp: TotpStore
    keys: KeyStore
    audit: AuditStore
    webhooks: WebhookStore
    deliveries: DeliveryStore
    oauth_clients: OAuthClientStore
    consents: ConsentStore
    oauth_codes: AuthorizationCodeStore
    passkeys: PasskeyStore

    def atomic(self) -> ContextManager[None]:
        """A block whose store calls make one transaction: all of them are kept, or none.

        Locky uses it where a change and what must follow it belong together (a user
        and the verification letter to their address; an account turned off and the
        end of its logins). Store calls inside it run no retries of their own; an
        exception leaving the block undoes every write in it and propagates, with
        database failures mapped as in every store call (``Conflict``,
        ``Unavailable``). Nested blocks join the outer one.
        """

    def revision(self) -> int:
        """A number that grows whenever roles or grants change (for caches of policy).

        An ``int`` (never a ``bool``). Moved, in the transaction of the change, by
        ``roles.create``, ``roles.update``, ``roles.delete``, ``grants.grant`` and
        ``grants.revoke`` (when they change something); users, groups, memberships,
        sessions and the rest never move it. Every process sharing the database sees
        the new value at once."""

    def schema(self) -> SchemaState:
        """The stored schema version, this code's version and the steps between them.

        Reads only; an empty database is version 0 with every step pending. Called at
        startup before anything else touches the database (see ``migrate``).
        """

    def migrate(self, *, dry_run: bool = False) -> list[Migration]:
        """Bring the database to ``schema().latest`` and return the steps applied.

        Runs under a database-wide lock (many processes and hosts starting together
        migrate once: the others wait, then find nothing pending) and keeps every
        record. With ``dry_run`` it changes nothing and returns the steps it would run.
        Raise :class:`~locky.errors.SchemaError` when the database is ahead of the code
        or a step fails (a failed step leaves the version where it was).
        """

    def ping(self) -> bool:
        """``True`` when the database answers (the health check). Called for every health
        request: it may trust an answer of the last second rather than ask each time (the
        bundled storage does, while no statement has failed since)."""

    def close(self) -> None:
        """Release connections."""


@dataclass(frozen=True)
class BuiltinRole:
    """A role defined by the policy files."""

    name: str
    description: str
    permissions: tuple[Permission, ...]


# ---------------------------------------------------------------------------
# Passwords, tokens, decisions
# ---------------------------------------------------------------------------


class PasswordHasher(Protocol):
    """Hashes passwords for storage. Run
    :class:`locky.testing.password_hasher_contract.PasswordHasherContract` against it."""

    def hash(self, password: str) -> str:
        """A salted hash of ``password`` (at most 72 UTF-8 bytes, already validated):
        a ``str`` that never contains the password, different on every call for the
        same password. Any Unicode text is accepted."""

    def verify(self, password: str, hashed: str) -> bool:
        """Whether ``password`` matches ``hashed``; ``False`` (never an exception) for a
        wrong password, an empty one or a hash it cannot read."""

    def needs_rehash(self, hashed: str) -> bool:
        """Whether ``hashed`` should be replaced (older algorithm or cost)."""


@dataclass(frozen=True)
class IssuedToken:
    token: str
    jti: str
    expires_in: int


@dataclass(frozen=True)
class Claims:
    """What a verified token says."""

    subject: str  # user uuid; a client_credentials token's: the client_id
    session_uuid: str  # a client_credentials token's: "client:<client uuid>:<token generation>"
    jti: str
    kind: str  # "access" or "refresh"
    expires_at: int
    #: Tokens the OpenID provider issued: the client (also their ``aud``) and the scope.
    client_id: str | None = None
    scope: str | None = None


class TokenBackend(Protocol):
    """Issues and checks the bearer tokens of login sessions. Run
    :class:`locky.testing.token_backend_contract.TokenBackendContract` against it."""

    def issue(self, *, user_uuid: str, session_uuid: str, kind: str, client_id: str | None = None,
              scope: str | None = None) -> IssuedToken:
        """A signed token of ``kind`` (``access`` or ``refresh``) for the session.

        ``jti`` is unique per call; ``expires_in`` is the lifetime in seconds
        (``access_ttl`` or ``refresh_ttl`` of the settings). Revocation is not the
        backend's: Locky checks the session in storage on every request. With
        ``client_id`` (a token the OpenID provider issues) the token's ``aud`` is the
        client_id and it carries ``client_id`` and ``scope`` claims."""

    def verify(self, token: str, *, kind: str) -> Claims:
        """Check signature, algorithm, time claims, issuer, audience and ``kind``;
        return the :class:`Claims` ``issue`` put in (``subject``, ``session_uuid``,
        ``jti``, ``kind``, ``expires_at`` in Unix seconds). Raise
        :class:`~locky.errors.Unauthorized` on any failure (garbage, a changed byte,
        another kind, expired, another issuer or audience), never another exception.
        A token with a ``client_id`` claim has that client_id as its audience."""

    def sign_id_token(self, claims: dict[str, Any], *, alg: str) -> str:
        """An OpenID Connect ID token: ``claims`` signed as they are, with the active
        key of the ``alg`` family (``RS256``, ``ES256`` or ``EdDSA``; made when the
        family has none yet) and its ``kid`` in the header."""


class Mailer(Protocol):
    """Hands finished messages to whatever delivers mail (a folder, an SMTP server)."""

    def send(self, message: EmailMessage) -> None:
        """Deliver ``message`` (its ``To``, ``From`` and ``Subject`` are set) or raise.

        Any exception means "not delivered, try again later": the background sender
        keeps the message and retries with a growing delay. Must not log the body
        (it holds single-use codes). Called from the sender's thread, one message at a
        time per process.
        """


class Authorizer(Protocol):
    """Decides every protected request (docs/http/authorization.md). ``docs/authorizers.md`` says what
    it gets and must decide; run
    :class:`locky.testing.authorizer_contract.AuthorizerContract` against it.

    The authorizer, not Locky's core, decides what the roles mean: every authenticated
    user holds ``user``; a membership gives its role within its group; a global grant
    (``storage.grants``, ``locky grant-admin``) gives its role everywhere; and an address
    in ``settings.admin_emails`` makes its account ``admin`` once ``email_verified``."""

    def is_allowed(
        self,
        user: User,
        resource: str,
        action: str,
        *,
        group_uuid: str | None = None,
        own: bool = False,
        policy_revision: int | None = None,
    ) -> bool:
        """Whether the policy lets ``user`` do ``action`` on ``resource``.

        ``group_uuid`` is the group the operation concerns (its members' roles apply
        there only); ``own`` says the target record belongs to the user. Must not get
        slower as stored policy grows, and must see role and grant changes made by
        any process at once.

        ``policy_revision``, when given, is :meth:`Storage.revision` as read with the
        caller's session at authentication (``Identity.policy_revision``, this request
        only): the authorizer may trust it instead of reading storage's revision. When
        ``None`` it reads storage.
        """

    def builtin_roles(self) -> list[BuiltinRole]:
        """The roles this authorizer defines (``admin``, ``user``, ``owner``,
        ``maintainer``, ``member``, ``viewer`` at least): Locky stores them with
        ``roles.sync_builtin`` at startup, so ``GET /roles`` lists them with
        ``builtin: true`` and the API refuses to change them."""


class ExplainingAuthorizer(Authorizer, Protocol):
    """An authorizer that can also say why and for whom (docs/http/authorization.md). Optional: with
    an authorizer lacking these, ``explain=true``, ``/authz/permissions`` and
    ``/authz/subjects`` answer 501; the plain and batch checks work with any authorizer.
    The bundled ``casbin`` authorizer has them all."""

    def explain(self, user: User, resource: str, action: str, *, group_uuid: str | None = None,
                own: bool = False, policy_revision: int | None = None) -> Any:
        """An object with ``roles`` (``[{"role", "scope": "global"|"group", "group_uuid"}]``:
        every role the user held for this decision, ``user`` included) and ``matched``
        (``[{"role", "scope": "global"|"group"|"self", "group_uuid", "rule"}]``: each
        policy line or stored permission that on its own allows the request)."""

    def permissions(self, user: User, group_uuids: Iterable[str | None],
                    policy_revision: int | None = None) -> list[dict]:
        """``[{"resource", "action", "scope", "group_uuid", "via"}]`` for the global
        context (``None``) and each group given: every permission of every role held
        there, wildcards as written, plus actions that inherit a listed one."""

    def may_everyone(self, resource: str, action: str, policy_revision: int | None = None) -> bool:
        """Whether every authenticated user may do it (globally)."""

    def explicit_holders(self, resource: str, action: str, group_uuid: str | None,
                         policy_revision: int | None = None) -> set[str]:
        """Uuids of the users who may do it through more than what every user holds
        (a superset is fine: Locky checks each with :meth:`is_allowed`). An authorizer
        that also has :meth:`holder_sources` is asked that instead."""

    def holder_sources(self, resource: str, action: str, group_uuid: str | None,
                       policy_revision: int | None = None) -> "HolderSources":
        """Where :meth:`explicit_holders` finds its users, for storage to page them by id
        (:class:`HolderSources`): ``/v1/internal/authz/subjects`` then reads a page's
        candidates, not every holder. Optional: without it, the uuids of
        :meth:`explicit_holders` are paged."""


@dataclass(frozen=True)
class HolderSources:
    """Who may do something through more than what every user holds, as storage finds
    them (:meth:`ExplainingAuthorizer.holder_sources`): the users granted any of
    ``roles`` globally (:meth:`GrantStore.holders_by_id`), those whose membership in
    ``group_uuid`` has any of ``group_roles`` (:meth:`MemberStore.holders_by_id`), and
    ``user_uuids`` named one by one. A superset is fine: Locky checks each candidate."""

    roles: frozenset[str] = frozenset()
    group_uuid: str | None = None
    group_roles: frozenset[str] = frozenset()
    user_uuids: frozenset[str] = frozenset()

    def granted(self, storage) -> set[str]:
        """The uuids of the users granted any of ``roles``, read whole
        (:meth:`GrantStore.holders`)."""
        return {uuid for role in self.roles for uuid in storage.grants.holders(role)}

    def members(self, storage) -> set[str]:
        """The uuids of the users whose live membership in ``group_uuid`` has any of
        ``group_roles``, read whole (the group's :meth:`RecordStore.list`)."""
        if self.group_uuid is None:
            return set()
        return {m.user_uuid for role in self.group_roles
                for m in every(storage.members, group_uuid=self.group_uuid, role=role)}

    def uuids(self, storage) -> set[str]:
        """Every user these sources name, read whole: what
        :meth:`ExplainingAuthorizer.explicit_holders` answers with them."""
        return set(self.user_uuids) | self.granted(storage) | self.members(storage)
