"""Pony entities, declared per ``Database`` so that every app owns its own mapping.

"Unique among live rows" is enforced by the database on every engine with the
``del_token`` scheme: 0 while a row is live, its own id once soft-deleted, and a
composite unique key over (value, del_token); MariaDB has no partial indexes, and this
works on all three engines. Emails are stored lowercased, and MySQL/MariaDB tables use
a binary NO PAD collation, so comparisons are exact (and email uniqueness
case-insensitive) on every engine alike: ``Admins``, ``admins`` and ``admins `` are
three group names everywhere, not only on PostgreSQL and SQLite.

Every record table has an index on ``(del_token, id)``: the live rows in id order, so a
keyset page or a count reads an index range rather than the table; each member filter
column has one on ``(column, del_token, id)`` for the same reason. (MariaDB misuses the
first for deep pages: ``reads.py`` tells it to ignore ``idx_<table>__del_token_id`` there.)

The tables are created and changed by the steps of :mod:`.migrations`, never by Pony:
these classes must always describe what the latest step leaves (``Storage.migrate``
checks them against the database after it runs).
"""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

from pony.orm import Json, LongStr, Optional, PrimaryKey, Required, Set, composite_index, composite_key

#: Binary MySQL/MariaDB collations, best first. The NO PAD ones compare trailing spaces
#: as PostgreSQL and SQLite do ("a" and "a " differ); plain ``utf8mb4_bin`` pads.
MYSQL_COLLATIONS = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_bin")
#: The longest passkey credential id kept: WebAuthn's 1023 bytes in unpadded base64url.
CREDENTIAL_ID_MAX = 1364


# Text is stored exactly as given (Pony would strip it by default): what the API
# accepted is what it returns, and "a" and "a " are different names on every engine.

def define_entities(db, dialect: str = "SQLite", collation: str = MYSQL_COLLATIONS[-1]) -> SimpleNamespace:
    """Declare Locky's tables on ``db`` (bound to an engine of ``dialect``) and return
    the entity classes; ``collation`` is the MySQL/MariaDB tables' collation."""
    options = {}
    if dialect == "MySQL":
        # 4-byte UTF-8 and exact comparisons, whatever the database's defaults are.
        options = {"ENGINE": "InnoDB", "DEFAULT CHARSET": "utf8mb4", "COLLATE": collation}

    class UserRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_users"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        name = Required(str, 255, autostrip=False)
        email = Required(str, 254, autostrip=False)
        email_verified = Required(bool, default=False)
        disabled = Required(bool, default=False)
        mfa_enabled = Required(bool, default=False)
        password_hash = Required(str, 255, autostrip=False)
        # A provisioning system's id (SCIM's externalId), not unique; a filter column
        # like the members' (schema step 10).
        external_id = Optional(str, 255, nullable=True, autostrip=False)
        memberships = Set("MemberRow")
        composite_key(email, del_token)
        composite_index(del_token, id)
        composite_index(external_id, del_token, id)

    class GroupRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_groups"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        name = Required(str, 255, autostrip=False)
        description = Optional(str, 1024, default="", autostrip=False)
        external_id = Optional(str, 255, nullable=True, autostrip=False)  # as the users' (step 10)
        memberships = Set("MemberRow")
        composite_key(name, del_token)
        composite_index(del_token, id)
        composite_index(external_id, del_token, id)

    class MemberRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_members"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        group = Required(GroupRow)
        user = Required(UserRow)
        # Denormalised so lists and filters need no join.
        group_uuid = Required(str, 36, autostrip=False)
        user_uuid = Required(str, 36, autostrip=False)
        role = Required(str, 64, autostrip=False)
        composite_key(group, user, del_token)
        composite_index(del_token, id)
        composite_index(group_uuid, del_token, id)
        composite_index(user_uuid, del_token, id)
        composite_index(role, del_token, id)
        composite_index(user_uuid, del_token, group_uuid, role)  # schema step 11
        composite_index(group_uuid, del_token, role, user, user_uuid)  # schema step 13

    class RoleRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_roles"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        name = Required(str, 64, autostrip=False)
        description = Optional(str, 1024, default="", autostrip=False)
        # Left out of Pony's optimistic check, whose SQL MariaDB rejects (CAST AS JSON):
        # two concurrent edits of one role's permissions, the last one wins.
        permissions = Required(Json, optimistic=False)
        builtin = Required(bool, default=False)
        composite_key(name, del_token)
        composite_index(del_token, id)

    class SessionRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_sessions"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        user_uuid = Required(str, 36, index=True, autostrip=False)
        created_at = Required(datetime, precision=6)
        revoked_at = Optional(datetime, precision=6)
        refresh_jti = Required(str, 64, autostrip=False)
        # Logins made through the OpenID provider (schema step 8): the client (NULL for a
        # login of the /v1 API and for an OP session), the granted scope, the OP session
        # it came from (signing out there ends it: indexed) and how the user
        # authenticated (space-separated ``amr`` values).
        client_id = Optional(str, 64, nullable=True, autostrip=False, index="idx_locky_sessions__client_id")
        scope = Optional(str, 1024, nullable=True, autostrip=False)
        op_session_uuid = Optional(str, 36, nullable=True, autostrip=False,
                                   index="idx_locky_sessions__op_session_uuid")
        amr = Optional(str, 255, default="", autostrip=False)

    class ThrottleRow(db.Entity):
        # One login-throttle key (an email or ``ip:<address>``): when its window started,
        # the attempts counted in it, and when the last was counted (its lock runs from
        # there). A quota key (``signup:ip:...``, see LoginThrottle.take) keeps when its
        # window ends instead. Indexed by window start so ended rows are found and pruned
        # cheaply.
        _table_options_ = options
        _table_ = "locky_login_throttle"
        key = PrimaryKey(str, 254)
        window_start = Required(float, index="idx_locky_login_throttle__window_start")
        attempts = Required(int)
        last_attempt = Required(float, default=0.0)

    class GrantRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_grants"
        id = PrimaryKey(int, auto=True, size=64)
        user_uuid = Required(str, 36, autostrip=False)
        role = Required(str, 64, autostrip=False)
        # The id of the user ``user_uuid`` names (schema step 13), for pages of a role's
        # holders by id; none for a grant to a subject that is no user (an OAuth client).
        user_id = Optional(int, size=64)
        composite_key(user_uuid, role)
        composite_index(role, user_id, user_uuid)  # schema step 13 (in place of step 12's)

    class CodeRow(db.Entity):
        # A single-use code, kept only as its SHA-256 hash (see locky.providers.CodeStore).
        _table_options_ = options
        _table_ = "locky_codes"
        id = PrimaryKey(int, auto=True, size=64)
        code_hash = Required(str, 64, unique=True, autostrip=False)
        purpose = Required(str, 16, autostrip=False)
        user_uuid = Required(str, 36, autostrip=False)
        email = Required(str, 254, autostrip=False)
        created_at = Required(datetime, precision=6)
        expires_at = Required(datetime, precision=6, index="idx_locky_codes__expires_at")
        used_at = Optional(datetime, precision=6)
        composite_index(user_uuid, purpose, created_at)

    class LetterRow(db.Entity):
        # A message waiting to be sent; deleted once a mailer took it.
        _table_options_ = options
        _table_ = "locky_outbox"
        id = PrimaryKey(int, auto=True, size=64)
        purpose = Required(str, 16, autostrip=False)
        email = Required(str, 254, autostrip=False)
        user_uuid = Optional(str, 36, default="", autostrip=False)
        created_at = Required(datetime, precision=6)
        due_at = Required(datetime, precision=6, index="idx_locky_outbox__due_at")
        held_until = Optional(datetime, precision=6)
        attempts = Required(int, default=0)

    class TotpRow(db.Entity):
        # A user's TOTP: the secret sealed by the core, the last accepted time step,
        # and the hashes of unused recovery codes (space-separated).
        _table_options_ = options
        _table_ = "locky_totp"
        user_uuid = PrimaryKey(str, 36, autostrip=False)
        secret = Required(str, 255, autostrip=False)
        confirmed = Required(bool, default=False)
        last_step = Required(int, size=64, default=0)
        recovery_hashes = Optional(str, 1024, default="", autostrip=False)
        created_at = Required(datetime, precision=6)

    class KeyRow(db.Entity):
        # A token-signing key: the public JWK, the private half sealed by the core.
        # ``active_alg`` is the key's ``alg`` on the active key of that algorithm's family
        # and NULL on retired ones: a unique key on it lets the database refuse a second
        # active key of one family (NULLs never clash). Schema step 8; before it, one
        # ``active_slot`` for every algorithm.
        _table_options_ = options
        _table_ = "locky_signing_keys"
        id = PrimaryKey(int, auto=True, size=64)
        kid = Required(str, 64, unique=True, autostrip=False)
        alg = Required(str, 16, autostrip=False)
        public_jwk = Required(str, 2048, autostrip=False)
        private_key = Required(str, 8192, autostrip=False)
        created_at = Required(datetime, precision=6)
        retired_at = Optional(datetime, precision=6)
        active_alg = Optional(str, 16, unique=True, nullable=True, autostrip=False)

    class AuditRow(db.Entity):
        # One security event (docs/http/audit.md): appended with its change, never updated.
        _table_options_ = options
        _table_ = "locky_audit"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        created_at = Required(datetime, precision=6, index="idx_locky_audit__created_at")
        event = Required(str, 64, autostrip=False)
        actor_uuid = Optional(str, 36, nullable=True, autostrip=False)
        target_type = Optional(str, 32, nullable=True, autostrip=False)
        target_uuid = Optional(str, 64, nullable=True, autostrip=False)
        ip = Optional(str, 64, default="", autostrip=False)
        request_id = Optional(str, 128, default="", autostrip=False)
        details = Required(Json, optimistic=False)
        composite_index(event, id)
        composite_index(actor_uuid, id)
        composite_index(target_uuid, id)

    class WebhookRow(db.Entity):
        # A webhook subscription; the secret sealed by the core.
        _table_options_ = options
        _table_ = "locky_webhooks"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        url = Required(str, 2048, autostrip=False)
        events = Required(Json, optimistic=False)
        description = Optional(str, 1024, default="", autostrip=False)
        secret = Required(str, 255, autostrip=False)
        created_at = Required(datetime, precision=6)

    class DeliveryRow(db.Entity):
        # One event on its way to one webhook, kept as its history once done.
        _table_options_ = options
        _table_ = "locky_webhook_deliveries"
        id = PrimaryKey(int, auto=True, size=64)
        webhook_id = Required(int, size=64)
        event_uuid = Required(str, 36, autostrip=False)
        event = Required(str, 64, autostrip=False)
        payload = Required(LongStr, autostrip=False, lazy=False)
        status = Required(str, 16, autostrip=False)
        attempts = Required(int, default=0)
        last_status_code = Optional(int, nullable=True)
        last_error = Optional(str, 255, default="", autostrip=False)
        created_at = Required(datetime, precision=6)
        next_attempt_at = Optional(datetime, precision=6, index="idx_locky_webhook_deliveries__next_attempt_at")
        held_until = Optional(datetime, precision=6)
        last_attempt_at = Optional(datetime, precision=6)
        composite_index(webhook_id, id)

    class OAuthClientRow(db.Entity):
        # An OAuth 2 / OpenID Connect client (docs/http/oauth.md), soft-deleted like the
        # records: ``client_id`` is unique among live clients. The lists keep the order
        # the admin gave (JSON arrays). Schema step 9.
        _table_options_ = options
        _table_ = "locky_oauth_clients"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        deleted_at = Optional(datetime, precision=6)
        del_token = Required(int, size=64, default=0)
        client_id = Required(str, 64, autostrip=False)
        name = Required(str, 255, autostrip=False)
        type = Required(str, 16, autostrip=False)
        redirect_uris = Required(Json, optimistic=False)
        post_logout_redirect_uris = Required(Json, optimistic=False)
        grant_types = Required(Json, optimistic=False)
        scopes = Required(Json, optimistic=False)
        id_token_signed_response_alg = Required(str, 16, autostrip=False)
        first_party = Required(bool, default=False)
        secret_hash = Optional(str, 64, nullable=True, autostrip=False)
        token_generation = Required(int, size=64, default=0)
        composite_key(client_id, del_token)
        composite_index(del_token, id)

    class ConsentRow(db.Entity):
        # What one user allowed one client: the sorted scopes (a JSON array). Deleted
        # when the user withdraws it.
        _table_options_ = options
        _table_ = "locky_consents"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        user_uuid = Required(str, 36, autostrip=False)
        client_id = Required(str, 64, autostrip=False)
        scopes = Required(Json, optimistic=False)
        created_at = Required(datetime, precision=6)
        updated_at = Required(datetime, precision=6)
        composite_key(user_uuid, client_id)

    class AuthorizationCodeRow(db.Entity):
        # An authorization code, kept only as its SHA-256 hash, single-use; kept a day
        # after it expired so that a second use is noticed, then pruned by later adds.
        _table_options_ = options
        _table_ = "locky_oauth_codes"
        id = PrimaryKey(int, auto=True, size=64)
        code_hash = Required(str, 64, unique=True, autostrip=False)
        client_id = Required(str, 64, autostrip=False)
        user_uuid = Required(str, 36, autostrip=False)
        redirect_uri = Required(str, 2048, autostrip=False)
        scope = Required(str, 1024, autostrip=False)
        nonce = Optional(str, 1024, nullable=True, autostrip=False)
        code_challenge = Optional(str, 128, nullable=True, autostrip=False)
        code_challenge_method = Optional(str, 16, nullable=True, autostrip=False)
        auth_time = Required(datetime, precision=6)
        amr = Optional(str, 255, default="", autostrip=False)
        op_session_uuid = Optional(str, 36, nullable=True, autostrip=False)
        session_uuid = Required(str, 36, autostrip=False)
        created_at = Required(datetime, precision=6)
        expires_at = Required(datetime, precision=6, index="idx_locky_oauth_codes__expires_at")
        used_at = Optional(datetime, precision=6)

    class PasskeyRow(db.Entity):
        # A user's WebAuthn credential (docs/http/accounts.md#passkeys), deleted when
        # removed. The credential id may be up to 1023 bytes (1364 characters of
        # base64url), longer than MariaDB indexes a utf8mb4 column: it is unique through
        # ``credential_hash``, its SHA-256 (hex), which lookups use. Schema step 10.
        _table_options_ = options
        _table_ = "locky_passkeys"
        id = PrimaryKey(int, auto=True, size=64)
        uuid = Required(str, 36, unique=True, autostrip=False)
        user_uuid = Required(str, 36, autostrip=False, index="idx_locky_passkeys__user_uuid")
        credential_hash = Required(str, 64, unique=True, autostrip=False)
        credential_id = Required(str, CREDENTIAL_ID_MAX, autostrip=False)
        public_key = Required(LongStr, autostrip=False, lazy=False)
        sign_count = Required(int, size=64, default=0)
        name = Optional(str, 255, default="", autostrip=False)
        transports = Required(Json, optimistic=False)
        aaguid = Required(str, 36, autostrip=False)
        backed_up = Required(bool, default=False)
        created_at = Required(datetime, precision=6)
        last_used_at = Optional(datetime, precision=6)

    class MetaRow(db.Entity):
        _table_options_ = options
        _table_ = "locky_meta"
        key = PrimaryKey(str, 64)
        number = Required(int, size=64)

    return SimpleNamespace(
        User=UserRow,
        Group=GroupRow,
        Member=MemberRow,
        Role=RoleRow,
        Session=SessionRow,
        Throttle=ThrottleRow,
        Grant=GrantRow,
        Code=CodeRow,
        Letter=LetterRow,
        Totp=TotpRow,
        Key=KeyRow,
        Audit=AuditRow,
        Webhook=WebhookRow,
        Delivery=DeliveryRow,
        OAuthClient=OAuthClientRow,
        Consent=ConsentRow,
        AuthorizationCode=AuthorizationCodeRow,
        Passkey=PasskeyRow,
        Meta=MetaRow,
    )
