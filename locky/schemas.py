"""marshmallow schemas: the one declaration behind request validation, response bodies
and the Swagger definitions. Request schemas reject unknown fields and ignore the
read-only ones; response schemas never carry a password or hash.
"""

from __future__ import annotations

import re

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, pre_load, validate

from locky.records import MAX_ID, ROLE_NAME, UUID4, wire_time

READ_ONLY = ("id", "uuid", "created_at", "updated_at", "deleted_at", "builtin", "email_verified", "mfa_enabled")
# The patterns are also written into the Swagger document, where ``$`` is the true end
# of the value; in Python ``$`` also matches before a final newline, so every check
# here uses ``fullmatch``, never ``match`` (``"<uuid>\n"`` must not pass). The rules of
# stored values (MAX_ID, UUID4, ROLE_NAME) are :mod:`locky.records`'.
PERMISSION_PART = r"^[a-z*][a-z0-9_.:*-]{0,63}$"
MAX_U64 = 2**64 - 1  # the largest id the contract allows a caller to name
#: A uuid as a client may write one (:class:`Uuid`): the hyphenated 8-4-4-4-12 form of
#: RFC 9562, of any version it defines (1-8), its variant, in either case. Wider than
#: :data:`UUID4` (what Locky writes) on purpose: a well-formed uuid that names nothing
#: is "no such record", never "not a uuid".
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$")
# A conservative address check: ASCII only (no look-alike characters), one @, a dotted domain.
EMAIL = re.compile(
    r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$"
)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# The rules below are also written into the Swagger document as JSON Schema patterns, so
# that generated clients (and schemathesis) check what the server checks. They are
# spelled with escapes every regex dialect involved reads alike: Python ``re``,
# ECMA-262 (Swagger UI, most validators) and Rust ``regex`` (jsonschema-rs).
# tests/test_swagger.py checks each pattern against the validator it stands for.
#: The pattern of UUID4: the uuids Locky answers with.
UUID4_PATTERN = UUID4.pattern
#: The pattern of UUID: the uuids Locky accepts (the server checks the same regular expression).
UUID_PATTERN = UUID.pattern
#: An email address, as ``email_address`` checks it (with ``maxLength: 254``).
EMAIL_PATTERN = EMAIL.pattern
_CONTROLS = r"\x00-\x1f\x7f"
#: The characters ``str.strip()`` removes (``str.isspace()``) that are not controls.
_SPACES = r" \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: Free text (``plain_text``): no control characters.
TEXT_PATTERN = rf"^[^{_CONTROLS}]*$"
#: A name (``plain_text`` and ``not_blank``): no control characters, and at least one
#: character that is not a space; "names made only of whitespace are 400".
NAME_PATTERN = rf"^[^{_CONTROLS}]*[^{_CONTROLS}{_SPACES}][^{_CONTROLS}]*$"
#: Any string storage keeps: every body string with a NUL is a 400 (locky.http.media).
NO_NUL_PATTERN = r"^[^\x00]*$"


def d(text: str, **schema) -> dict:
    """Field metadata for the Swagger document: a description, plus JSON Schema keywords
    for rules apispec cannot read off a validator (``pattern``, ``format``...)."""
    return {"metadata": {"description": text, **schema}}


class Timestamp(fields.Field):
    """RFC 3339 in UTC with a ``Z`` suffix and microseconds."""

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else wire_time(value)

    def _jsonschema_type_mapping(self):
        return {"type": "string", "format": "date-time"}


def plain_text(value: str) -> None:
    if CONTROL.search(value):
        raise ValidationError("Must not contain control characters.")


def not_blank(value: str) -> None:
    if value and not value.strip():
        raise ValidationError("Must not be blank.")


#: A display or group name: 1-255 characters, not only spaces, no control characters.
NAME = [validate.Length(1, 255), not_blank, plain_text]
NAME_TEXT = "1-255 characters, no control characters, not only whitespace."
DESCRIPTION_TEXT = "Free text, at most 1024 characters, no control characters."
#: Swagger 2.0 counts characters; bcrypt and the server count bytes.
PASSWORD_TEXT = ("8-72 bytes of UTF-8, checked as bytes: every character outside ASCII takes 2-4"
                 " of them, so 72 characters is the most only for ASCII. Longer is rejected (400),"
                 " never truncated. No NUL characters. Not one of the 100,000+ common passwords"
                 " Locky ships, and not containing the account's name or the part of its email"
                 " before the @ (when those have 4+ characters), in any case.")
PASSWORD_RULES = {"format": "password", "minLength": 8, "maxLength": 72, "pattern": NO_NUL_PATTERN}
#: No ``format: email``: validators read it differently (RFC 5321's 64-character local part,
#: quoted local parts...); the pattern is the rule the server checks, and the whole of it.
EMAIL_RULES = {"maxLength": 254, "pattern": EMAIL_PATTERN}
#: Examples the document shows (and schemathesis' examples phase sends).
EXAMPLE_UUID = "3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c"
EXAMPLE_EMAIL = "ada@example.com"
EXAMPLE_PASSWORD = "correct horse battery staple"


def utf8_bytes(low: int, high: int):
    def check(value: str) -> None:
        size = len(value.encode("utf-8", "surrogatepass"))
        if not low <= size <= high:
            raise ValidationError(f"Must be between {low} and {high} bytes of UTF-8.")

    return check


def email_address(value: str) -> None:
    if len(value) > 254 or not EMAIL.fullmatch(value):
        raise ValidationError("Not a valid email address.")


UUID_TEXT = "A uuid of any RFC 9562 version in any case, hyphenated; read as lowercase."


class Uuid(fields.String):
    """A uuid in a body or a query: the one rule for every uuid a client sends.

    Accepted: the hyphenated 8-4-4-4-12 hex form of RFC 9562, in upper, lower or mixed
    case, of any version the RFC defines (1-8: Locky makes UUID4s, but a storage plugin
    or another system may hand out v1 or v7 ones, and a valid uuid that names nothing
    is "no such record", never "not a uuid"), with the RFC's variant (``8``-``b``).
    The value is lowercased, the canonical form storage keeps and compares, so
    ``3F2B...`` finds ``3f2b...``.

    Refused with ``"Not a valid UUID."`` (400 naming the field, docs/http/records.md): the braced
    (``{...}``) and ``urn:uuid:`` forms and the 32 digits without hyphens (Python's
    ``uuid.UUID`` reads them, most clients never send them, and one spelling keeps
    logs, filters and the Swagger pattern simple); the nil and max uuids (no RFC variant,
    never a record's); surrounding spaces or a final newline.

    The Swagger document states the same rule: ``pattern`` is :data:`UUID_PATTERN`.
    """

    default_error_messages = {"invalid_uuid": "Not a valid UUID."}

    def __init__(self, description: str, *, example: str | None = None, **kwargs):
        # No example by default: Swagger 2.0 has none for query parameters.
        extra = {"example": example} if example else {}
        super().__init__(**kwargs, **d(f"{description} {UUID_TEXT}", pattern=UUID_PATTERN, **extra))

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not UUID.fullmatch(value):
            raise self.make_error("invalid_uuid")
        return value.lower()


class Pattern(validate.Regexp):
    """``validate.Regexp`` matching the whole value: ``re.match`` lets ``$`` match
    before a final newline, which would let ``"admin\n"`` through a name pattern."""

    def __call__(self, value):
        if not isinstance(value, str) or self.regex.fullmatch(value) is None:
            raise ValidationError(self._format_error(value))
        return value


def not_uuid(value: str) -> None:
    # A user's uuid is a policy subject of its own (``g, <uuid>, admin``): a role of
    # that name would grant the user its permissions everywhere, not within a group.
    # Every user's uuid is a UUID4 (docs/http/README.md#bodies); other hex words are ordinary names.
    if isinstance(value, str) and UUID4.fullmatch(value):
        raise ValidationError("Must not have the shape of a UUID.")


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------


class RequestSchema(Schema):
    """Base of request bodies: unknown fields are errors, read-only ones are dropped."""

    class Meta:
        unknown = RAISE

    @pre_load
    def drop_read_only(self, data, **kwargs):
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in READ_ONLY}
        return data


class StrictBoolean(fields.Boolean):
    """JSON ``true`` or ``false`` only: no ``"yes"``, ``1`` or ``"true"``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise ValidationError("Not a valid boolean: use true or false.")
        return value


class Email(fields.String):
    """An email address, trimmed and lowercased before it is checked; ASCII only, checked
    before lowercasing, which maps look-alikes such as the Kelvin sign onto ASCII."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not value.isascii():
            raise ValidationError("Not a valid email address.")
        return value.strip().lower()


class UserRequestSchema(RequestSchema):
    name = fields.String(required=True, validate=NAME, **d("Display name: " + NAME_TEXT, pattern=NAME_PATTERN, example="Ada Lovelace"))
    email = Email(required=True, validate=email_address, **d("Email address, unique among live users; stored trimmed and lowercased.", **EMAIL_RULES, example=EXAMPLE_EMAIL))
    password = fields.String(required=True, validate=utf8_bytes(8, 72), **d("Password; never returned. " + PASSWORD_TEXT, **PASSWORD_RULES, example=EXAMPLE_PASSWORD))


class UserUpdateSchema(UserRequestSchema):
    """The same fields as registration, each optional."""

    name = fields.String(validate=NAME, **d("Display name: " + NAME_TEXT, pattern=NAME_PATTERN, example="Ada King"))
    email = Email(validate=email_address, **d("Email address, unique among live users.", **EMAIL_RULES, example="ada.king@example.com"))
    password = fields.String(validate=utf8_bytes(8, 72), **d("New password. " + PASSWORD_TEXT, **PASSWORD_RULES, example="a new long passphrase"))
    current_password = fields.String(load_only=True, validate=validate.Length(1, 1024), **d("The caller's current password: required to change your own password or email.", format="password", pattern=NO_NUL_PATTERN))
    disabled = StrictBoolean(**d("Admins only: true turns the account off (every login ends; login answers 403 Account disabled), false turns it on again. Nobody disables their own account."))


class LoginRequestSchema(RequestSchema):
    email = Email(required=True, validate=validate.Length(1, 254), **d("The account's email address.", **EMAIL_RULES, example=EXAMPLE_EMAIL))
    password = fields.String(required=True, validate=validate.Length(1, 1024), **d("The account's password.", format="password", pattern=NO_NUL_PATTERN, example=EXAMPLE_PASSWORD))


class CodeField(fields.String):
    """A code or token handed out by Locky: 1-512 printable ASCII characters."""

    def __init__(self, description: str, **kwargs):
        super().__init__(required=True, validate=[validate.Length(1, 512), Pattern(r"^[\x21-\x7e]+$", error="Not a valid code.")],
                         **d(description, pattern=r"^[\x21-\x7e]+$", maxLength=512), **kwargs)


class VerifyRequestSchema(RequestSchema):
    token = CodeField("The code from the verification message (its `Token:` line).")


class EmailRequestSchema(RequestSchema):
    email = Email(required=True, validate=email_address, **d("The account's email address.", **EMAIL_RULES, example=EXAMPLE_EMAIL))


class ResetRequestSchema(RequestSchema):
    token = CodeField("The code from the password-reset message (its `Token:` line).")
    password = fields.String(required=True, validate=utf8_bytes(8, 72), **d("The new password. " + PASSWORD_TEXT, **PASSWORD_RULES, example=EXAMPLE_PASSWORD))


class MfaLoginRequestSchema(RequestSchema):
    mfa_token = CodeField("The mfa_token of the login's first step (5 minutes, single use).")
    code = fields.String(required=True, validate=validate.Length(1, 64), **d("A 6-digit code of the authenticator app, or an unused recovery code.", pattern=NO_NUL_PATTERN, example="123456"))


class ReauthRequestSchema(RequestSchema):
    password = fields.String(required=True, validate=validate.Length(1, 1024), **d("Your current password.", format="password", pattern=NO_NUL_PATTERN, example=EXAMPLE_PASSWORD))


class TotpCodeRequestSchema(RequestSchema):
    code = fields.String(required=True, validate=validate.Length(1, 64), **d("A 6-digit code of the authenticator app (turning TOTP off: or a recovery code).", pattern=NO_NUL_PATTERN, example="123456"))


class RefreshRequestSchema(RequestSchema):
    refresh_token = fields.String(required=True, validate=validate.Length(1, 4096), **d("The refresh token of the last login or refresh.", pattern=NO_NUL_PATTERN))


class GroupRequestSchema(RequestSchema):
    name = fields.String(required=True, validate=NAME, **d("Group name, unique among live groups. " + NAME_TEXT, pattern=NAME_PATTERN, example="Engineering"))
    description = fields.String(load_default="", validate=[validate.Length(0, 1024), plain_text], **d(DESCRIPTION_TEXT, pattern=TEXT_PATTERN, example="The engineering team."))


class GroupUpdateSchema(GroupRequestSchema):
    name = fields.String(validate=NAME, **d("Group name, unique among live groups. " + NAME_TEXT, pattern=NAME_PATTERN))
    description = fields.String(validate=[validate.Length(0, 1024), plain_text], **d(DESCRIPTION_TEXT, pattern=TEXT_PATTERN))


class MemberRequestSchema(RequestSchema):
    group_uuid = Uuid("The live group to join.", required=True, example=EXAMPLE_UUID)
    user_uuid = Uuid("The live user who joins.", required=True, example=EXAMPLE_UUID)
    role = fields.String(load_default="member", validate=Pattern(ROLE_NAME, error="Not a valid role name."), **d("Name of an existing role; default member. admin and user are held globally, client by every machine client: never through a membership (400)."))


class PermissionSchema(Schema):
    class Meta:
        unknown = RAISE

    resource = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid resource."), **d("users, groups, members, roles, or any string of a client application.", example="reports"))
    action = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid action."), **d("read, write, or any string of a client application.", example="read"))


class RoleRequestSchema(RequestSchema):
    name = fields.String(required=True, validate=[Pattern(ROLE_NAME, error="Must match {regex}."), not_uuid], **d("Role name, unique among live roles; not shaped like a UUID.", example="auditor"))
    description = fields.String(load_default="", validate=[validate.Length(0, 1024), plain_text], **d(DESCRIPTION_TEXT, pattern=TEXT_PATTERN, example="Reads the reports."))
    permissions = fields.List(fields.Nested(PermissionSchema), load_default=list, validate=validate.Length(0, 256), **d("What the role allows within the groups where it is held."))


class RoleUpdateSchema(RoleRequestSchema):
    name = fields.String(validate=[Pattern(ROLE_NAME, error="Must match {regex}."), not_uuid], **d("Role name, unique among live roles; not shaped like a UUID."))
    description = fields.String(validate=[validate.Length(0, 1024), plain_text], **d(DESCRIPTION_TEXT, pattern=TEXT_PATTERN))
    permissions = fields.List(fields.Nested(PermissionSchema), validate=validate.Length(0, 256), **d("Replaces the role's permissions."))


# ---------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------


class RecordSchema(Schema):
    id = fields.Integer(dump_only=True, **d("Unique identifier (unsigned 64-bit)."))
    uuid = fields.String(dump_only=True, **d("UUID4, lowercase canonical form.", pattern=UUID4_PATTERN))
    created_at = Timestamp(dump_only=True, **d("Creation time, RFC 3339 UTC."))
    updated_at = Timestamp(dump_only=True, **d("Last update time, RFC 3339 UTC."))
    deleted_at = Timestamp(dump_only=True, allow_none=True, **d("Soft-delete time; null while live."))


class UserSchema(RecordSchema):
    name = fields.String(**d("Display name."))
    email = fields.String(**d("Email address, lowercased."))
    email_verified = fields.Boolean(**d("The account proved it receives mail at `email` (a verification code). False again after every email change."))
    disabled = fields.Boolean(**d("An admin turned the account off: it cannot log in and its tokens are refused."))
    mfa_enabled = fields.Boolean(**d("Login asks for a second factor (TOTP or a recovery code)."))


class GroupSchema(RecordSchema):
    name = fields.String(**d("Group name."))
    description = fields.String(**d("Free text."))


class MemberSchema(RecordSchema):
    group_uuid = fields.String(**d("The group.", pattern=UUID4_PATTERN))
    user_uuid = fields.String(**d("The user.", pattern=UUID4_PATTERN))
    role = fields.String(**d("The role the user holds in the group."))


class RoleSchema(RecordSchema):
    name = fields.String(**d("Role name."))
    description = fields.String(**d("Free text."))
    permissions = fields.List(fields.Nested(PermissionSchema), **d("What the role allows."))
    builtin = fields.Boolean(**d("Defined by the policy files; cannot be changed through the API."))


class CountSchema(Schema):
    count = fields.Integer(**d("How many live records match."))


class HealthSchema(Schema):
    status = fields.String(**d("ok, or unavailable when storage does not answer."))


class TokenSchema(Schema):
    access_token = fields.String(**d("JWT for the Authorization: Bearer header."))
    token_type = fields.String(**d("Always Bearer."))
    expires_in = fields.Integer(**d("Seconds until the access token expires."))
    refresh_token = fields.String(**d("Single-use token for /public/users/refresh."))
    user = fields.Nested(UserSchema, **d("The logged-in user."))


class TokenRequestSchema(RequestSchema):
    token = fields.String(required=True, validate=validate.Length(1, 8192), **d("An access or refresh token.", pattern=NO_NUL_PATTERN))
    token_type_hint = fields.String(validate=validate.Length(1, 64), **d("Optional (RFC 7662, RFC 7009): access_token or refresh_token. Locky reads the type from the token itself.", pattern=NO_NUL_PATTERN))


class JwkSchema(Schema):
    kid = fields.String(**d("Key id: its RFC 7638 thumbprint; tokens name it in their header."))
    kty = fields.String(**d("EC, OKP or RSA."))
    alg = fields.String(**d("ES256, EdDSA or RS256."))
    use = fields.String(**d("Always sig."))
    crv = fields.String(**d("EC and OKP keys: the curve (P-256, Ed25519)."))
    x = fields.String(**d("EC and OKP keys: the public point."))
    y = fields.String(**d("EC keys: the public point."))
    n = fields.String(**d("RSA keys: the modulus."))
    e = fields.String(**d("RSA keys: the exponent."))


class KeyInfoSchema(Schema):
    kid = fields.String(**d("Key id."))
    alg = fields.String(**d("The algorithm it signs with."))
    created_at = Timestamp(**d("When it was made (and began signing)."))
    retired_at = Timestamp(allow_none=True, **d("When a newer key took over; null while it signs."))


class KeyListSchema(Schema):
    keys = fields.List(fields.Nested(KeyInfoSchema), **d("Every stored key, oldest first."))


class JwksSchema(Schema):
    keys = fields.List(fields.Nested(JwkSchema), **d("The active public key and every retired one whose tokens"
                                                     " may still be valid; empty with an HMAC algorithm."))


class ServerMetadataSchema(Schema):
    issuer = fields.String(**d("The tokens' iss: LOCKY_JWT_ISSUER, else LOCKY_PUBLIC_URL, else http://host:port."))
    authorization_endpoint = fields.String(**d("Absolute URL of the OpenID provider's /oauth/authorize."))
    token_endpoint = fields.String(**d("Absolute URL of the OpenID provider's POST /oauth/token."))
    jwks_uri = fields.String(**d("Absolute URL of /.well-known/jwks.json."))
    introspection_endpoint = fields.String(**d("Absolute URL of POST /v1/internal/tokens/introspect."))
    revocation_endpoint = fields.String(**d("Absolute URL of POST /v1/public/tokens/revoke."))
    scopes_supported = fields.List(fields.String(), **d("openid, profile, email, groups, offline_access."))
    response_types_supported = fields.List(fields.String(), **d('["code"].'))
    response_modes_supported = fields.List(fields.String(), **d('["query"].'))
    grant_types_supported = fields.List(fields.String(), **d(
        '["authorization_code", "refresh_token", "client_credentials"].'))
    code_challenge_methods_supported = fields.List(fields.String(), **d('["S256"] (PKCE).'))
    token_endpoint_auth_methods_supported = fields.List(fields.String(), **d(
        '["client_secret_basic", "client_secret_post", "none"].'))
    introspection_endpoint_auth_methods_supported = fields.List(fields.String(), **d(
        '["bearer", "client_secret_basic", "client_secret_post"].'))
    revocation_endpoint_auth_methods_supported = fields.List(fields.String(), **d(
        '["client_secret_basic", "client_secret_post", "none"].'))
    id_token_signing_alg_values_supported = fields.List(fields.String(), **d(
        "The algorithms of ID tokens (a client's id_token_signed_response_alg): RS256, ES256, EdDSA."))


class IntrospectionSchema(Schema):
    active = fields.Boolean(**d("Whether the token is valid now; when false no other field is given."))
    sub = fields.String(**d("The user's uuid."))
    username = fields.String(**d("The user's email."))
    token_type = fields.String(**d("access or refresh."))
    exp = fields.Integer(**d("Expiry, seconds since the epoch."))
    iat = fields.Integer(**d("Issued at, seconds since the epoch."))
    nbf = fields.Integer(**d("Not before, seconds since the epoch."))
    jti = fields.String(**d("The token's id."))
    iss = fields.String(**d("The issuer."))
    aud = fields.String(**d("The audience."))


class EmptySchema(Schema):
    """An empty JSON object."""


class AcceptedSchema(Schema):
    status = fields.String(**d("Always accepted: the answer is the same whether or not the address has an account.", example="accepted"))


class MfaChallengeSchema(Schema):
    mfa_required = fields.Boolean(**d("Always true: the account has a second factor; no token is issued yet."))
    mfa_token = fields.String(**d("Send it with a code to /public/users/login/mfa; lives 5 minutes, single use."))
    methods = fields.List(fields.String(), **d("The second factors accepted: totp, recovery_code."))


class TotpSetupSchema(Schema):
    secret = fields.String(**d("The new TOTP secret (base32), pending until confirmed with a code."))
    otpauth_uri = fields.String(**d("The otpauth://totp/ URI for an authenticator app (show it as a QR code)."))


class RecoveryCodesSchema(Schema):
    recovery_codes = fields.List(fields.String(), **d("Ten single-use codes that stand in for a TOTP code; shown only this once."))


class DecisionSchema(Schema):
    allowed = fields.Boolean(**d("What the policy decides."))


class ErrorSchema(Schema):
    title = fields.String(**d("HTTP status line."))
    description = fields.String(**d("What went wrong."))


def list_schema(key: str, item: type[Schema]) -> type[Schema]:
    """A list body ``{key: [...], "next_after_id": id|null}``."""
    return Schema.from_dict(
        {
            key: fields.List(fields.Nested(item), **d("One page, ascending id.")),
            "next_after_id": fields.Integer(allow_none=True, **d("Pass as after_id for the next page; null on the last page.")),
        },
        name=f"{key.capitalize()}ListSchema",
    )


class QueryInteger(fields.Integer):
    """A non-negative integer written in plain decimal digits (no sign, spaces or ``_``)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 20:
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class ListQuerySchema(Schema):
    """Query parameters shared by every list and count."""

    class Meta:
        unknown = RAISE

    limit = QueryInteger(load_default=50, validate=validate.Range(1, 500), **d("Page size, 1-500."))
    after_id = QueryInteger(load_default=0, validate=validate.Range(0, MAX_U64), **d("Return records with id greater than this (unsigned 64-bit)."))

    @post_load
    def clamp_after_id(self, data, **kwargs):
        # No stored id exceeds MAX_ID: a larger cursor is past the end, an empty page.
        if "after_id" in data:
            data["after_id"] = min(data["after_id"], MAX_ID)
        return data


class UserFilterSchema(ListQuerySchema):
    email = Email(validate=email_address, **d("Exact email (compared lowercased).", **EMAIL_RULES))


class GroupFilterSchema(ListQuerySchema):
    name = fields.String(validate=NAME, **d("Exact name. " + NAME_TEXT, pattern=NAME_PATTERN))


class MemberFilterSchema(ListQuerySchema):
    group_uuid = Uuid("Exact group uuid.")
    user_uuid = Uuid("Exact user uuid.")
    role = fields.String(validate=Pattern(ROLE_NAME, error="Not a valid role name."), **d("Exact role name."))


class RoleFilterSchema(ListQuerySchema):
    name = fields.String(validate=Pattern(ROLE_NAME, error="Not a valid role name."), **d("Exact name."))


class AuthzQuerySchema(Schema):
    class Meta:
        unknown = RAISE

    user_uuid = Uuid("The user to decide for.", required=True)
    resource = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid resource."), **d("The resource."))
    action = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid action."), **d("The action."))
    group_uuid = Uuid("The group whose membership roles apply.")
    explain = fields.Boolean(load_default=False, truthy={"true"}, falsy={"false"}, **d("true: also say which roles the user held and which policy lines allowed it (matched, roles)."))


class AuthzCheckItemSchema(Schema):
    """One question of a batch check: the same fields as the single check's query."""

    class Meta:
        unknown = RAISE

    user_uuid = Uuid("The user to decide for.", required=True)
    resource = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid resource."), **d("The resource."))
    action = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid action."), **d("The action."))
    group_uuid = Uuid("The group whose membership roles apply.")


class AuthzBatchSchema(RequestSchema):
    checks = fields.List(fields.Nested(AuthzCheckItemSchema), required=True, validate=validate.Length(1, 100),
                         **d("1-100 questions, answered in this order."))


class DecisionListSchema(Schema):
    results = fields.List(fields.Nested(lambda: DecisionSchema()), **d("One answer per question, in request order."))


class MatchedRuleSchema(Schema):
    role = fields.String(**d("The role whose line allowed it."))
    scope = fields.String(**d("global, group (a membership role in group_uuid) or self (a line for one's own records)."))
    group_uuid = fields.String(allow_none=True, **d("The group of a group scope; else null."))
    rule = fields.String(**d("The policy line (or stored permission of a custom role), as `p, role, dom, resource, action`."))


class HeldRoleSchema(Schema):
    role = fields.String(**d("A role the user held for the decision (user included)."))
    scope = fields.String(**d("global, or group (through a membership in group_uuid)."))
    group_uuid = fields.String(allow_none=True, **d("The group of a group scope; else null."))


class ExplainedDecisionSchema(Schema):
    allowed = fields.Boolean(**d("What the policy decides."))
    matched = fields.List(fields.Nested(MatchedRuleSchema), **d("What allowed it; empty when denied."))
    roles = fields.List(fields.Nested(HeldRoleSchema), **d("Every role the user held for this decision."))


class PermissionsQuerySchema(ListQuerySchema):
    """A page of a user's groups (docs/http/README.md and docs/http/accounts.md): keyset-paged by membership id."""

    limit = QueryInteger(load_default=50, validate=validate.Range(1, 500), **d("Groups per page, 1-500."))
    after_id = QueryInteger(load_default=0, validate=validate.Range(0, MAX_U64), **d("List the groups of the user's memberships with id greater than this (next_after_id of the page before); 0, the first page, also lists what holds globally."))
    user_uuid = Uuid("The user.", required=True)
    group_uuid = Uuid("Only what holds in this group (global rules included); one page, no paging.")


class GrantedPermissionSchema(Schema):
    resource = fields.String(**d("As written in the policy; * is any."))
    action = fields.String(**d("As written in the policy (* is any), or an action that inherits it through g2."))
    scope = fields.String(**d("global, group or self (the user's own records only)."))
    group_uuid = fields.String(allow_none=True, **d("The group whose membership role grants it (scope group, or self through a membership); null when held globally."))
    via = fields.String(**d("The role that grants it."))


class PermissionListSchema(Schema):
    permissions = fields.List(fields.Nested(GrantedPermissionSchema), **d("Everything the user may do there: globally (first page only) and in this page's groups."))
    next_after_id = fields.Integer(**d("Only when more groups follow: pass it as after_id for the next page of groups."))


class SubjectListSchema(Schema):
    users = fields.List(fields.Nested(lambda: UserSchema()), **d("One page of the users with an explicit grant, ascending id."))
    next_after_id = fields.Integer(allow_none=True, **d("Pass as after_id for the next page; null on the last page."))
    all_users = fields.Boolean(**d("A rule gives it to every authenticated user."))


class SubjectsQuerySchema(ListQuerySchema):
    resource = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid resource."), **d("The resource."))
    action = fields.String(required=True, validate=Pattern(PERMISSION_PART, error="Not a valid action."), **d("The action."))
    group_uuid = Uuid("Decide within this group (its members' roles apply).")


# ---------------------------------------------------------------------------
# Passkeys (docs/http/accounts.md#passkeys)
# ---------------------------------------------------------------------------

PASSKEY_NAME = [validate.Length(1, 64), not_blank, plain_text]
PASSKEY_NAME_TEXT = "1-64 characters, no control characters, not only whitespace."


class Credential(fields.Dict):
    """A WebAuthn ``PublicKeyCredential`` in the JSON form of its ``toJSON()``: read by the
    passkey service, which answers a malformed one with a 400 on ``credential``."""

    def __init__(self, description: str, **kwargs):
        super().__init__(required=True, keys=fields.String(), **d(description), **kwargs)


class PasskeyRequestSchema(RequestSchema):
    credential = Credential("The browser's answer to the creation options: PublicKeyCredential.toJSON() of navigator.credentials.create().")
    name = fields.String(validate=PASSKEY_NAME, **d("What to call the passkey (e.g. the device): " + PASSKEY_NAME_TEXT + " Default: Passkey N.", pattern=NAME_PATTERN, maxLength=64, example="Ada's laptop"))


class PasskeyRenameSchema(RequestSchema):
    name = fields.String(required=True, validate=PASSKEY_NAME, **d("The passkey's new name: " + PASSKEY_NAME_TEXT, pattern=NAME_PATTERN, maxLength=64, example="Work phone"))


class PasskeyLoginOptionsRequestSchema(RequestSchema):
    email = Email(validate=email_address, **d("Optional: the account signing in, whose passkeys the browser may offer. Without it, any discoverable passkey of this site.", **EMAIL_RULES, example=EXAMPLE_EMAIL))


class PasskeyLoginRequestSchema(RequestSchema):
    credential = Credential("The browser's answer to the request options: PublicKeyCredential.toJSON() of navigator.credentials.get().")


class PasskeySchema(Schema):
    id = fields.Integer(dump_only=True, **d("The passkey's id (for renaming and removing it)."))
    uuid = fields.String(dump_only=True, **d("UUID4, lowercase canonical form.", pattern=UUID4_PATTERN))
    name = fields.String(**d("What the user calls it."))
    created_at = Timestamp(dump_only=True, **d("When it was registered, RFC 3339 UTC."))
    last_used_at = Timestamp(dump_only=True, allow_none=True, **d("Its last sign-in, RFC 3339 UTC; null before the first."))


class PasskeyListSchema(Schema):
    passkeys = fields.List(fields.Nested(PasskeySchema), **d("The caller's passkeys, oldest first."))


class PasskeyCreationOptionsSchema(Schema):
    """PublicKeyCredentialCreationOptionsJSON (WebAuthn Level 3): binary values in unpadded base64url."""

    rp = fields.Dict(**d("The relying party: id (LOCKY_WEBAUTHN_RP_ID, or the host of LOCKY_PUBLIC_URL, or localhost) and name."))
    user = fields.Dict(**d("id (the user handle: the 16 bytes of the user's uuid), name (the email), displayName."))
    challenge = fields.String(**d("Single use, 5 minutes."))
    pubKeyCredParams = fields.List(fields.Dict(), **d("ES256, EdDSA, RS256."))
    timeout = fields.Integer(**d("Milliseconds (300000)."))
    excludeCredentials = fields.List(fields.Dict(), **d("The user's passkeys, so an authenticator is not registered twice."))
    authenticatorSelection = fields.Dict(**d("residentKey required, userVerification preferred."))
    attestation = fields.String(**d("none."))
    hints = fields.List(fields.String(), **d("Empty."))


class PasskeyRequestOptionsSchema(Schema):
    """PublicKeyCredentialRequestOptionsJSON (WebAuthn Level 3): binary values in unpadded base64url."""

    challenge = fields.String(**d("Single use, 5 minutes."))
    timeout = fields.Integer(**d("Milliseconds (300000)."))
    rpId = fields.String(**d("The relying party ID."))
    allowCredentials = fields.List(fields.Dict(), **d("Empty for a discoverable passkey; with an email, that account's passkeys."))
    userVerification = fields.String(**d("preferred."))
