"""Building the Swagger 2.0 document from the route table and the marshmallow schemas."""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any, Iterable, Iterator

import orjson
from apispec import APISpec
from apispec.exceptions import DuplicateComponentNameError
from apispec.ext.marshmallow import MarshmallowPlugin

from locky.audit import schemas as audit_schemas
from locky import schemas as s
from locky.routes import BASE_PATH, ID_PARAMETER, Route
from locky.settings import SettingsError

TITLE = "Locky API"
#: The API document's version, "1.0.0" as the contract says, whatever the package's own
#: (``locky.__version__``, which ``locky --version`` prints).
VERSION = "1.0.0"

DEFINITIONS = {
    "User": s.UserSchema,
    "UserRequest": s.UserRequestSchema,
    "UserUpdateRequest": s.UserUpdateSchema,
    "LoginRequest": s.LoginRequestSchema,
    "RefreshRequest": s.RefreshRequestSchema,
    "VerifyRequest": s.VerifyRequestSchema,
    "EmailRequest": s.EmailRequestSchema,
    "ResetRequest": s.ResetRequestSchema,
    "MfaLoginRequest": s.MfaLoginRequestSchema,
    "TotpCodeRequest": s.TotpCodeRequestSchema,
    "Token": s.TokenSchema,
    "Group": s.GroupSchema,
    "GroupRequest": s.GroupRequestSchema,
    "GroupUpdateRequest": s.GroupUpdateSchema,
    "Member": s.MemberSchema,
    "MemberRequest": s.MemberRequestSchema,
    "Permission": s.PermissionSchema,
    "Role": s.RoleSchema,
    "RoleRequest": s.RoleRequestSchema,
    "RoleUpdateRequest": s.RoleUpdateSchema,
    "Count": s.CountSchema,
    "Health": s.HealthSchema,
    "Decision": s.DecisionSchema,
    "ExplainedDecision": s.ExplainedDecisionSchema,
    "AuthzBatchRequest": s.AuthzBatchSchema,
    "DecisionList": s.DecisionListSchema,
    "PermissionList": s.PermissionListSchema,
    "SubjectList": s.SubjectListSchema,
    "Accepted": s.AcceptedSchema,
    "TokenRequest": s.TokenRequestSchema,
    "Jwk": s.JwkSchema,
    "KeyList": s.KeyListSchema,
    "Jwks": s.JwksSchema,
    "ServerMetadata": s.ServerMetadataSchema,
    "Introspection": s.IntrospectionSchema,
    "Empty": s.EmptySchema,
    "MfaChallenge": s.MfaChallengeSchema,
    "TotpSetup": s.TotpSetupSchema,
    "RecoveryCodes": s.RecoveryCodesSchema,
    "Error": s.ErrorSchema,
    **audit_schemas.DEFINITIONS,
}
ERROR_TEXT = {
    400: "Invalid input: each offending field mapped to one message. Also a request that"
         " conflicts with stored records (an email or name in use, a built-in role, a role"
         " still held, a reference to no live record).",
    401: "No usable bearer token (missing, malformed, expired, revoked) or bad credentials.",
    403: "The policy does not allow this operation (login: the account is disabled, or its email is"
         " not verified while LOCKY_REQUIRE_VERIFIED_EMAIL is on; the title says which).",
    404: "No such live record.",
    501: "The configured authorizer cannot answer this (it has no explanation, permissions or subjects).",
    409: "The record is not in a state for this (TOTP already on when setting it up, off when turning it off).",
    413: "The body is larger than the limit.",
    415: "The body is not application/json.",
    429: "Too many failed logins; retry after the given seconds.",
    503: "Storage is not answering.",
}
#: Locky's own scheme. Plugins add theirs in ``locky_swagger`` with
#: ``spec.components.security_scheme(name, definition)``; every protected operation
#: then lists each of them in its ``security`` (:func:`build`).
BEARER = {
    "type": "apiKey",
    "name": "Authorization",
    "in": "header",
    "description": "Authorization: Bearer <access_token> from /public/users/login.",
}
STATUS_TEXT = {200: "OK", 201: "Created", 202: "Accepted", 204: "No content"}
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
#: What the HTTP server of ``locky serve`` answers itself, before the app sees the request
#: (locky/cli/worker.py): the JSON ``Error`` object with the usual headers. Any request
#: can get them, so every operation lists them; a 400 of the server is a field map like
#: every 400, keyed ``request``.
SERVER_ERROR_TEXT = {
    400: "The request could not be read as HTTP (a malformed request line, header or chunked"
         " body): answered by the server before the app, as {\"request\": message}.",
    414: "The request line (method, path and query string) is longer than the server reads.",
    417: "An Expect header other than 100-continue.",
    431: "A header field, or all of them together, larger than the server reads.",
    501: "A Transfer-Encoding the server does not implement (only chunked is).",
}


#: Documents built in this process, as JSON, by what they were built from
#: (:func:`_made_from`); the most kept at once.
_BUILT: dict[tuple, bytes] = {}
_MOST_BUILT = 8


def build(routes: Iterable[Route], hook=None, context=None) -> dict[str, Any]:
    """The Swagger 2.0 document of ``routes`` (``locky_swagger`` hooks may add to it).

    Without a ``locky_swagger`` hook implemented, the document depends on the routes'
    descriptions alone: one built from the same descriptions earlier in this process is
    given again (a copy of its own; building costs as much as the rest of an app), so a
    process making many apps (the tests, ``locky check`` then ``serve``) builds it once."""
    routes = list(routes)
    if hook is not None and hook.locky_swagger.get_hookimpls():
        return _build(routes, hook, context)
    key = _made_from(routes)
    made = _BUILT.get(key)
    if made is None:
        made = orjson.dumps(_build(routes))
        if len(_BUILT) >= _MOST_BUILT:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = made
    return orjson.loads(made)


def _made_from(routes: list[Route]) -> tuple:
    """What the document of ``routes`` is made from: every field of each route but its
    resource, and of each of its operations (schema classes by identity)."""
    return tuple(
        tuple(_frozen(getattr(route, f.name)) for f in fields(route) if f.name != "resource")
        for route in routes)


def _frozen(value: Any) -> Any:
    """``value`` as a key: dicts, lists and dataclasses (an :class:`Operation`) as tuples."""
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value), *(_frozen(getattr(value, f.name)) for f in fields(value)))
    return value


def _build(routes: list[Route], hook=None, context=None) -> dict[str, Any]:
    marshmallow = MarshmallowPlugin()
    spec = APISpec(
        title=TITLE,
        version=VERSION,
        openapi_version="2.0",
        plugins=[marshmallow],
        info={"description": "Users, groups, members and roles; JWT login; policy decisions."},
        basePath=BASE_PATH,
        schemes=["http", "https"],
        consumes=["application/json"],
        produces=["application/json"],
    )
    spec.components.security_scheme("Bearer", BEARER)
    # Our own field class: apispec cannot tell it is a date-time string without this.
    marshmallow.map_to_openapi_type(s.Timestamp, "string", "date-time")
    marshmallow.map_to_openapi_type(audit_schemas.Rfc3339, "string", "date-time")
    for name, schema in DEFINITIONS.items():
        spec.components.schema(name, schema=schema)
    spec.components.schema(
        "FieldErrors",
        {"type": "object", "additionalProperties": {"type": "string"},
         "description": "Each offending field mapped to one message."},
    )
    protected: set[tuple[str, str]] = set()
    for route in routes:
        if route.in_spec:
            with _one_name_per_schema(f"the route {route.path}"):
                spec.path(path=route.spec_path,
                          operations={op.method: _operation(route, op) for op in route.operations})
            protected.update((route.spec_path, op.method) for op in route.operations if not op.public)
    if hook is not None:
        with _one_name_per_schema("a locky_swagger hook"):
            hook.locky_swagger(spec=spec, context=context)
    document = spec.to_dict()
    schemes = list(document.get("securityDefinitions", {}))
    # After the plugins' hook, so that their operations list the server's answers too.
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            if (path, method) in protected:
                _list_schemes(operation, schemes)
            operation["responses"] = _with_server_errors(operation["responses"])
    return document


@contextmanager
def _one_name_per_schema(where: str) -> Iterator[None]:
    """Stop startup when a plugin's schema would take a definition name already taken.

    apispec names a marshmallow schema class after itself (``UserSchema`` is ``User``) and,
    when that name is taken, renames it ``User1`` with only a warning: the document would
    then describe a plugin's body under a name a client cannot guess, or a plugin would
    believe it answers with Locky's ``User``. Registering a taken name outright
    (``spec.components.schema``) raises apispec's own error, told here in Locky's words."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Multiple schemas resolved to the name", category=UserWarning)
        try:
            yield
        except UserWarning as exc:
            name = re.search(r"the name (\S+)\.", str(exc))
            taken = name.group(1) if name else "?"
            raise SettingsError(
                f"{where}: a schema resolves to the Swagger definition name {taken!r}, which another schema"
                " already has; rename the schema class (apispec names UserSchema \"User\"), or register it"
                " under a name of its own in locky_swagger with spec.components.schema(name, schema=...)"
                " and refer to it by that name") from None
        except DuplicateComponentNameError as exc:
            raise SettingsError(f"{where}: {str(exc).rstrip('.')}; Swagger definition names are shared by Locky and every"
                                " plugin: choose a name of your own (e.g. prefixed with your plugin's)") from None


def _list_schemes(operation: dict[str, Any], schemes: list[str]) -> None:
    """A protected operation accepts every scheme in ``securityDefinitions``: Locky asks
    every ``locky_authenticate`` plugin, then checks a bearer token, on every protected
    request, so a scheme a plugin adds in ``locky_swagger`` is an alternative
    (``security`` is a list of alternatives) wherever Bearer is."""
    operation["security"] = [{name: []} for name in schemes]
    challenge = operation["responses"].get("401", {}).get("headers", {}).get("WWW-Authenticate")
    if challenge is not None and len(schemes) > 1:
        others = ", ".join(name for name in schemes if name != "Bearer")
        challenge["description"] = f"Bearer, or the challenge of the scheme used ({others})."


def _ref(schema) -> Any:
    return {"$ref": f"#/definitions/{schema}"} if isinstance(schema, str) else schema


def _operation(route: Route, op) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = []
    for name in re.findall(r"\{(\w+)\}", route.spec_path):  # {id}, and others as {delivery_id}
        if name in route.parameters:  # not a record's id: the route says what it is
            parameters.append(dict(route.parameters[name]))
            continue
        parameters.append(dict(ID_PARAMETER) if name == "id" else
                          {**ID_PARAMETER, "name": name, "description": f"The {name.removesuffix('_id')}'s id."})
    if op.query is not None:
        parameters.append({"in": "query", "schema": op.query})
    if op.body is not None:
        parameters.append({"in": "body", "name": "body", "required": op.body_required, "schema": _ref(op.body)})
    success: dict[str, Any] = {"description": STATUS_TEXT.get(op.status, "Success")}
    if op.response is not None:
        success["schema"] = _ref(op.response)
    if op.headers:
        success["headers"] = {name: {"type": "string", "description": text} for name, text in op.headers.items()}
    responses: dict[str, Any] = {str(op.status): success}
    for code in op.errors:
        if code == 503 and route.spec_path == "/public/health":
            responses["503"] = {"description": "Storage is not answering.", "schema": _ref("Health")}
            continue
        response = {"description": ERROR_TEXT[code], "schema": _ref("FieldErrors" if code == 400 else "Error")}
        if code == 401:
            response["headers"] = {"WWW-Authenticate": {"type": "string", "description": "Bearer"}}
        if code == 429:
            response["headers"] = {"Retry-After": {"type": "integer", "description": "Seconds to wait."}}
        responses[str(code)] = response
    operation: dict[str, Any] = {
        "summary": op.summary,
        "tags": [op.tag],
        "operationId": _operation_id(op.method, route.spec_path),
        "parameters": parameters,
        "responses": responses,
    }
    if op.description:
        operation["description"] = op.description
    if not op.public:
        operation["security"] = [{"Bearer": []}]
    return operation


def _with_server_errors(responses: dict[str, Any]) -> dict[str, Any]:
    """One operation's responses plus the HTTP server's own (``SERVER_ERROR_TEXT``), by status."""
    responses = dict(responses)
    for code, text in SERVER_ERROR_TEXT.items():
        own = responses.get(str(code))
        if own is None:
            responses[str(code)] = {"description": text, "schema": _ref("FieldErrors" if code == 400 else "Error")}
        elif code == 400 and text not in own.get("description", ""):
            responses["400"] = {**own, "description": f"{own.get('description', '')} Or: {text}".strip()}
    return dict(sorted(responses.items()))


def _operation_id(method: str, path: str) -> str:
    words = [w for p in path.strip("/").split("/") if p != ".." for w in re.split(r"[{}.-]+", p) if w]
    return method + "".join(w[:1].upper() + w[1:] for w in words)
