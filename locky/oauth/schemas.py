"""Bodies of the OAuth client and consent routes under ``/v1`` (docs/http/oauth.md): the
registration request, its update, the client record (never its secret or hash), the
answers that show a secret once, and a user's consents. Each field's rule is
:mod:`locky.oauth.clients`'; the rules between fields are checked there too, so the
routes, the console and ``locky clients`` refuse alike."""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, pre_load, validate

from locky.oauth import clients as rules
from locky.schemas import NAME, NAME_PATTERN, NAME_TEXT, NO_NUL_PATTERN, RecordSchema, RequestSchema, StrictBoolean, Timestamp, d


def redirect_uri(value: str) -> None:
    problem = rules.redirect_uri_problem(value)
    if problem is not None:
        raise ValidationError(problem)


def each_once(values: list) -> None:
    if len(set(values)) != len(values):
        raise ValidationError("Give each value once.")


URI_TEXT = ("Absolute, without fragment or wildcard: https://, or http:// only to a loopback host (127.0.0.0/8,"
            " [::1], localhost); matched exactly.")


def uri_list(text: str, **kwargs) -> fields.List:
    # Each URI's rules are in words: no regular expression says what urlsplit reads a URI as.
    item = fields.String(validate=redirect_uri, metadata={"minLength": 1, "maxLength": rules.MAX_URI_LENGTH,
                                                          "pattern": NO_NUL_PATTERN})
    return fields.List(item, validate=[validate.Length(0, rules.MAX_URIS), each_once], **kwargs,
                       **d(f"{text} {URI_TEXT} At most {rules.MAX_URIS}, each once.", uniqueItems=True))


def choices(options: tuple[str, ...], text: str, **kwargs) -> fields.List:
    return fields.List(fields.String(validate=validate.OneOf(options, error="Must be one of: {choices}.")),
                       validate=[validate.Length(1, len(options)), each_once], **kwargs,
                       **d(f"{text} Any of {', '.join(options)}, each once.", uniqueItems=True))


def one_of(options: tuple[str, ...], text: str, **kwargs) -> fields.String:
    return fields.String(validate=validate.OneOf(options, error="Must be one of: {choices}."), **kwargs,
                         **d(f"{text} One of {', '.join(options)}.", enum=list(options)))


class OAuthClientRequestSchema(RequestSchema):
    name = fields.String(required=True, validate=NAME, **d("The application's name, shown on the consent page. " + NAME_TEXT, pattern=NAME_PATTERN, example="Reports"))
    redirect_uris = uri_list("Where the authorization endpoint may send the user back (at least one for authorization_code).", load_default=list)
    post_logout_redirect_uris = uri_list("Where the end-session endpoint may send the user after signing out.", load_default=list)
    type = one_of(rules.CLIENT_TYPES, "confidential holds a secret (a server); public holds none (a browser or native app, PKCE only).", required=True)
    grant_types = choices(rules.GRANT_TYPES, "The grants it may use; default authorization_code and refresh_token. A public client cannot have client_credentials.")
    scopes = choices(rules.SCOPES, "The scopes it may ask for; default all of them.")
    id_token_signed_response_alg = one_of(rules.ID_TOKEN_ALGS, "The algorithm of its ID tokens; default RS256.")
    first_party = StrictBoolean(**d("true: the user is not asked to consent (an application of the operator's own); default false."))


class OAuthClientUpdateSchema(OAuthClientRequestSchema):
    """The fields of registration, each optional; ``type`` may be sent, unchanged."""

    name = fields.String(validate=NAME, **d("The application's name. " + NAME_TEXT, pattern=NAME_PATTERN))
    redirect_uris = uri_list("Replaces the redirect URIs.")
    post_logout_redirect_uris = uri_list("Replaces the post-logout redirect URIs.")
    type = one_of(rules.CLIENT_TYPES, "Cannot change (400 when it differs): register a new client instead.")
    grant_types = choices(rules.GRANT_TYPES, "Replaces the grants.")
    scopes = choices(rules.SCOPES, "Replaces the allowed scopes.")

    @pre_load
    def drop_client_id(self, data, **kwargs):
        # A record read back and sent again carries its client_id: read-only, like its id.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k != "client_id"}
        return data


class OAuthClientSchema(RecordSchema):
    client_id = fields.String(**d("The client's public identifier (client_id at the OAuth endpoints)."))
    name = fields.String(**d("The application's name."))
    type = fields.String(**d("confidential or public."))
    redirect_uris = fields.List(fields.String(), **d("Registered redirect URIs, matched exactly."))
    post_logout_redirect_uris = fields.List(fields.String(), **d("Registered post-logout redirect URIs."))
    grant_types = fields.List(fields.String(), **d("The grants it may use."))
    scopes = fields.List(fields.String(), **d("The scopes it may ask for."))
    id_token_signed_response_alg = fields.String(**d("RS256, ES256 or EdDSA."))
    first_party = fields.Boolean(**d("Users are not asked to consent."))


class OAuthClientCreatedSchema(OAuthClientSchema):
    client_secret = fields.String(**d("Confidential clients only: the secret, shown only in this answer (stored hashed)."))


class ClientSecretSchema(Schema):
    client_secret = fields.String(**d("The new secret, shown only in this answer; the old one no longer works."))


class OAuthClientListSchema(Schema):
    clients = fields.List(fields.Nested(OAuthClientSchema), **d("One page, ascending id."))
    next_after_id = fields.Integer(allow_none=True, **d("Pass as after_id for the next page; null on the last page."))


class ConsentSchema(Schema):
    client_id = fields.String(**d("The client the user allowed."))
    client_name = fields.String(allow_none=True, **d("Its name; null when the client was deleted since."))
    scopes = fields.List(fields.String(), **d("The scopes allowed."))
    created_at = Timestamp(**d("When the user first allowed it."))
    updated_at = Timestamp(**d("When the user last allowed more."))


class ConsentListSchema(Schema):
    consents = fields.List(fields.Nested(ConsentSchema), **d("The caller's consents, oldest first."))
