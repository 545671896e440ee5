"""The API description (docs/http/README.md, spec section 1 and 9): ``/swagger/doc.json``
is a valid Swagger 2.0 document (checked with openapi-spec-validator) titled ``Locky
API`` version ``1.0.0`` with base path ``/v1``, both schemes, the Bearer security
scheme and the record definitions; it documents every route and method the Falcon
router really serves (walked from the router itself, so the two cannot drift) and no
others; and ``/swagger/index.html`` is Swagger UI served from local files only."""

from __future__ import annotations

import posixpath
import re
import types
from html.parser import HTMLParser
from urllib.parse import urljoin, urlparse

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV2SpecValidator

from locky import Operation, Route, hookimpl

DOC = "/swagger/doc.json"
UI = "/swagger/index.html"
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


@pytest.fixture
def doc(locky_client) -> dict:
    result = locky_client.simulate_get(DOC)
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("application/json")
    return result.json


#: Served under /.well-known but documented with the OpenID provider (docs/http/oauth.md),
#: like its /oauth routes: declared ``in_spec=False``.
OUTSIDE_SPEC = {"/.well-known/openid-configuration"}


def served_routes(app) -> set[tuple[str, str]]:
    """Every (path template, method) under /v1 and /.well-known that a resource of the real
    router implements (HEAD, GET's twin wherever GET is served, is not listed)."""
    found: set[tuple[str, str]] = set()

    def walk(nodes):
        for node in nodes:
            if node.method_map and node.uri_template.startswith(("/v1/", "/.well-known/")) \
                    and node.uri_template not in OUTSIDE_SPEC:
                for method, responder in node.method_map.items():
                    # Falcon fills the other methods with its own 405 and OPTIONS responders;
                    # only the resource's own bound methods are served routes.
                    if getattr(responder, "__self__", None) is node.resource and method != "HEAD":
                        template = re.sub(r"\{(\w+)(:[^}]*)?\}", r"{\1}", node.uri_template)
                        found.add((template, method.lower()))
            walk(node.children)

    walk(app._router._roots)
    return found


def documented_routes(doc: dict) -> set[tuple[str, str]]:
    """(path, method) of every operation, its path resolved against the base path as a
    client does: ``/v1`` + ``/../.well-known/jwks.json`` is ``/.well-known/jwks.json``."""
    return {
        (posixpath.normpath(doc["basePath"] + path), method)
        for path, item in doc["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def operations(doc: dict):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield path, method, operation


# -- the document ------------------------------------------------------------------


def test_the_document_is_valid_swagger_2(doc):
    validate(doc, cls=OpenAPIV2SpecValidator)
    assert doc["swagger"] == "2.0"


def test_a_broken_document_does_fail_the_validator(doc):
    broken = {**doc, "paths": {"/x": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Nope"}}}}}}}
    with pytest.raises(Exception):
        validate(broken, cls=OpenAPIV2SpecValidator)


def test_info_base_path_schemes_and_media_types(doc):
    assert doc["info"]["title"] == "Locky API"
    assert doc["info"]["version"] == "1.0.0"
    assert doc["basePath"] == "/v1"
    assert sorted(doc["schemes"]) == ["http", "https"]
    assert doc["consumes"] == ["application/json"]
    assert doc["produces"] == ["application/json"]


def test_bearer_security_scheme(doc):
    bearer = doc["securityDefinitions"]["Bearer"]
    assert bearer["type"] == "apiKey"
    assert bearer["in"] == "header"
    assert bearer["name"] == "Authorization"


@pytest.mark.parametrize(
    "name", ["User", "UserRequest", "Group", "GroupRequest", "Member", "MemberRequest", "Role", "RoleRequest", "Count"]
)
def test_the_record_definitions_are_present(doc, name):
    definition = doc["definitions"][name]
    assert definition["type"] == "object"
    assert definition["properties"]


@pytest.mark.parametrize("name", ["User", "Group", "Member", "Role"])
def test_records_carry_the_common_properties(doc, name):
    properties = doc["definitions"][name]["properties"]
    assert {"id", "uuid", "created_at", "updated_at", "deleted_at"} <= set(properties)
    assert properties["id"]["type"] == "integer"
    assert properties["uuid"]["type"] == "string"
    for stamp in ("created_at", "updated_at", "deleted_at"):
        assert (properties[stamp]["type"], properties[stamp]["format"]) == ("string", "date-time")


def test_user_definitions_match_the_contract(doc):
    user = doc["definitions"]["User"]["properties"]
    assert set(user) == {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "email",
                         "email_verified", "disabled", "mfa_enabled"}
    assert all(user[flag]["type"] == "boolean" for flag in ("email_verified", "disabled", "mfa_enabled"))
    request = doc["definitions"]["UserRequest"]
    assert set(request["properties"]) == {"name", "email", "password"}
    assert set(request["required"]) == {"name", "email", "password"}
    count = doc["definitions"]["Count"]["properties"]
    assert set(count) == {"count"} and count["count"]["type"] == "integer"
    assert not any("password" in d.get("properties", {}) for n, d in doc["definitions"].items()
                   if n in ("User", "Group", "Member", "Role", "Token"))


def test_definitions_have_descriptions_on_every_field(doc):
    missing = [
        f"{name}.{field}"
        for name, definition in doc["definitions"].items()
        for field, schema in definition.get("properties", {}).items()
        if not schema.get("description")
    ]
    assert not missing, missing


# -- the document against the router -------------------------------------------------


def test_every_served_v1_route_and_method_is_documented(locky_app, doc):
    served = served_routes(locky_app)
    assert ("/v1/public/users/register", "post") in served  # the walk found the routes
    assert len(served) > 20
    missing = served - documented_routes(doc)
    assert not missing, f"served but not in the Swagger document: {sorted(missing)}"


def test_every_documented_operation_is_served(locky_app, doc):
    phantom = documented_routes(doc) - served_routes(locky_app)
    assert not phantom, f"documented but not served: {sorted(phantom)}"


def test_the_well_known_documents_are_in_the_swagger_document(doc):
    """Issue 36: both served outside /v1, shown as paths that resolve to them from the base path."""
    for served, definition in (("/.well-known/jwks.json", "Jwks"),
                               ("/.well-known/oauth-authorization-server", "ServerMetadata")):
        path = "/.." + served
        assert posixpath.normpath(doc["basePath"] + path) == served
        operation = doc["paths"][path]["get"]
        assert "security" not in operation
        assert operation["responses"]["200"]["schema"] == {"$ref": f"#/definitions/{definition}"}
        assert served in operation["description"]
    assert set(doc["definitions"]["Jwks"]["properties"]) == {"keys"}
    assert {"issuer", "jwks_uri", "token_endpoint", "introspection_endpoint", "revocation_endpoint",
            "grant_types_supported"} <= set(doc["definitions"]["ServerMetadata"]["properties"])
    assert doc["info"]["version"] == "1.0.0"


def test_the_metadata_answer_has_only_documented_fields(locky_client, doc):
    metadata = locky_client.simulate_get("/.well-known/oauth-authorization-server").json
    assert set(metadata) <= set(doc["definitions"]["ServerMetadata"]["properties"])
    jwks = locky_client.simulate_get("/.well-known/jwks.json").json
    for key in jwks["keys"]:
        assert set(key) <= set(doc["definitions"]["Jwk"]["properties"])


def test_the_contract_endpoints_are_all_documented(doc):
    expected = {
        ("/public/health", "get"), ("/public/users/register", "post"), ("/public/users/login", "post"),
        ("/public/users/refresh", "post"), ("/private/users/logout", "post"), ("/internal/users/me", "get"),
        ("/internal/authz/check", "get"),
    }
    for kind in ("users", "groups", "members", "roles"):
        expected |= {(f"/internal/{kind}", "get"), (f"/internal/{kind}/count", "get"),
                     (f"/internal/{kind}/{{id}}", "get"), (f"/private/{kind}/{{id}}", "delete")}
    for kind in ("users", "groups", "roles"):
        expected.add((f"/private/{kind}/{{id}}", "put"))
    for kind in ("groups", "members", "roles"):
        expected.add((f"/private/{kind}", "post"))
    documented = {(path, method) for path, method, _ in operations(doc)}
    assert expected <= documented, sorted(expected - documented)


def test_protected_operations_require_bearer_and_public_ones_do_not(doc):
    for path, method, operation in operations(doc):
        if path.startswith(("/public/", "/../.well-known/")):
            assert not operation.get("security"), (path, method)
        else:
            security = operation.get("security", doc.get("security"))
            assert security == [{"Bearer": []}], (path, method)
            assert "401" in operation["responses"], (path, method)


def test_operations_have_unique_ids_and_summaries(doc):
    ids = [operation["operationId"] for _, _, operation in operations(doc)]
    assert len(ids) == len(set(ids))
    assert all(operation.get("summary") for _, _, operation in operations(doc))


def test_id_paths_declare_the_id_parameter(doc):
    seen = set()
    for path, method, operation in operations(doc):
        declared = [p for p in operation.get("parameters", []) if p.get("in") == "path"]
        assert [p["name"] for p in declared] == re.findall(r"\{(\w+)\}", path), (path, method)
        for param in declared:
            if path.startswith(KEYED_PATHS):  # an OAuth client's {id} may be its client_id
                assert (param["type"], param["required"], param["minLength"]) == ("string", True, 1), (path, param)
                continue
            assert (param["type"], param["required"], param.get("minimum")) == ("integer", True, 1), (path, param)
            seen.add(param["name"])
    assert seen == {"id", "delivery_id"}  # /webhooks/{id}/deliveries/{delivery_id}/replay


#: Paths whose parameter names a record by more than its id (docs/http/oauth.md).
KEYED_PATHS = ("/internal/oauth/clients/", "/private/oauth/clients/", "/private/users/me/consents/")


def test_lists_and_counts_declare_their_query_parameters(doc):
    for kind, filters in (("users", {"email"}), ("groups", {"name"}),
                          ("members", {"group_uuid", "user_uuid", "role"}), ("roles", {"name"})):
        for path in (f"/internal/{kind}", f"/internal/{kind}/count"):
            names = {p["name"] for p in doc["paths"][path]["get"]["parameters"] if p["in"] == "query"}
            assert {"limit", "after_id"} | filters <= names, (path, names)


def test_request_bodies_and_400s_are_documented(doc):
    for path, method, operation in operations(doc):
        # Logging out, starting a TOTP setup or a passkey's registration, rotating the keys and
        # replaying a delivery take no body (nor does a client's new secret): the caller and the
        # path are all they need.
        if method in ("post", "put") and path not in ("/private/users/logout", "/private/users/me/mfa/totp",
                                                       "/private/users/me/passkeys/options",
                                                       "/private/keys/rotate",
                                                       "/private/webhooks/{id}/deliveries/{delivery_id}/replay",
                                                       "/private/oauth/clients/{id}/secret"):
            bodies = [p for p in operation["parameters"] if p["in"] == "body"]
            assert len(bodies) == 1, (path, method)
            assert "400" in operation["responses"], (path, method)
    register = doc["paths"]["/public/users/register"]["post"]
    assert register["parameters"][0]["schema"] == {"$ref": "#/definitions/UserRequest"}
    assert register["responses"]["201"]["schema"] == {"$ref": "#/definitions/User"}
    login = doc["paths"]["/public/users/login"]["post"]
    assert "429" in login["responses"] and "401" in login["responses"]


def test_the_served_document_is_the_apps_document(locky_app, doc):
    assert doc == locky_app.swagger


# -- the UI ------------------------------------------------------------------------


class _Assets(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.urls.append(value)


def test_index_html_is_served_as_html(locky_client):
    result = locky_client.simulate_get(UI)
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("text/html")
    assert "swagger-ui" in result.text.lower()


def test_index_html_uses_only_local_assets(locky_client):
    html = locky_client.simulate_get(UI).text
    assert not re.search(r"https?://", html, re.I), "index.html refers to a remote URL"
    assert "//" not in re.sub(r"<!--.*?-->", "", html).replace("<!DOCTYPE", ""), "protocol-relative URL"
    assert "petstore" not in html.lower()
    parser = _Assets()
    parser.feed(html)
    assert parser.urls, "no assets referenced"
    for url in parser.urls:
        parsed = urlparse(url)
        assert not parsed.scheme and not parsed.netloc, url


def test_every_asset_of_index_html_is_served(locky_client):
    parser = _Assets()
    parser.feed(locky_client.simulate_get(UI).text)
    paths = {urlparse(urljoin(UI, url)).path for url in parser.urls}
    assert "/swagger/swagger-ui-bundle.js" in paths and "/swagger/swagger-ui.css" in paths
    for path in paths:
        result = locky_client.simulate_get(path)
        assert result.status_code == 200, path
        assert result.content, path
        if path.endswith(".js"):
            assert "javascript" in result.headers["content-type"], path
        if path.endswith(".css"):
            assert result.headers["content-type"].startswith("text/css"), path


def test_the_initializer_loads_our_document_with_no_online_validator(locky_client):
    parser = _Assets()
    parser.feed(locky_client.simulate_get(UI).text)
    scripts = [urlparse(urljoin(UI, u)).path for u in parser.urls if u.endswith(".js")]
    initializers = []
    for path in scripts:
        text = locky_client.simulate_get(path).text
        if "SwaggerUIBundle(" in text and "dom_id" in text:
            initializers.append(text)
    assert len(initializers) == 1, "exactly one script starts Swagger UI"
    (script,) = initializers
    # Comments may say "no petstore"; the code may not.
    script = re.sub(r"^\s*//[^\n]*", "", re.sub(r"/\*.*?\*/", "", script, flags=re.S), flags=re.M)
    assert re.search(r"validatorUrl\s*:\s*null", script)
    assert not re.search(r"https?://", script)
    assert "petstore" not in script.lower()
    (url,) = re.findall(r"\burl\s*:\s*[\"']([^\"']+)[\"']", script)
    assert urlparse(urljoin(UI, url)).path == DOC


def test_swagger_needs_no_token(locky_client):
    for path in (UI, DOC, "/swagger/swagger-ui-bundle.js"):
        assert locky_client.simulate_get(path).status_code == 200


def test_bare_swagger_redirects_to_the_ui(locky_client):
    result = locky_client.simulate_get("/swagger")
    assert result.status_code in (301, 302, 307, 308)
    assert urlparse(result.headers["location"]).path == UI


@pytest.mark.parametrize("name", ["nope.js", ".hidden", "..", "%2e%2e%2fapp.py", "..%2F..%2Fsettings.py", "NOTICE.bak"])
def test_unknown_or_escaping_asset_names_are_404(locky_client, name):
    result = locky_client.simulate_get(f"/swagger/{name}")
    assert result.status_code == 404
    assert isinstance(result.json, dict) and isinstance(result.json.get("title"), str)


# -- errors every operation can get (issue 13, finding 11) ---------------------------

#: Answered by ``locky serve``'s HTTP server itself, before the app sees the request
#: (locky/cli/worker.py): a malformed request line, header or chunked body (400), a
#: request line too long (414), an Expect it cannot meet (417), header fields too large
#: (431), a transfer coding it does not implement (501).
SERVER_STATUSES = ("400", "414", "417", "431", "501")


def test_every_operation_lists_the_http_servers_own_error_answers(doc):
    for path, method, operation in operations(doc):
        responses = operation["responses"]
        missing = [code for code in SERVER_STATUSES if code not in responses]
        assert not missing, (path, method, missing)
        for code in ("414", "417", "431", "501"):
            assert responses[code]["schema"] == {"$ref": "#/definitions/Error"}, (path, method, code)
            assert responses[code]["description"], (path, method, code)
        # The server's 400 is {"title", "description"}: a valid FieldErrors object too.
        assert responses["400"]["schema"] == {"$ref": "#/definitions/FieldErrors"}, (path, method)
        assert "before the app" in responses["400"]["description"], (path, method)
    assert doc["definitions"]["FieldErrors"]["additionalProperties"] == {"type": "string"}
    assert set(doc["definitions"]["Error"]["properties"]) == {"title", "description"}


def test_every_operation_with_a_body_lists_413_and_415(doc):
    for path, method, operation in operations(doc):
        if any(p["in"] == "body" for p in operation["parameters"]):
            assert {"413", "415"} <= set(operation["responses"]), (path, method)
            assert operation["responses"]["413"]["schema"] == {"$ref": "#/definitions/Error"}


# -- the validation rules the server enforces, as the document states them (finding 12) --

UUID4_EXAMPLE = "3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c"


def rule(doc: dict, definition: str, field: str) -> dict:
    return doc["definitions"][definition]["properties"][field]


def query_rule(doc: dict, path: str, name: str) -> dict:
    (parameter,) = [p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == name]
    return {k: v for k, v in parameter.items() if k not in ("in", "name", "required", "description")}


def documented(schema: dict, value) -> bool:
    """Whether ``value`` is valid by the document, in the regex dialect of JSON Schema
    validators (jsonschema-rs, the one schemathesis checks with: ``$`` ends the value)."""
    import jsonschema_rs

    return jsonschema_rs.Draft4Validator(schema).is_valid(value)


def _edge_strings() -> list[str]:
    """Strings at the edges of the text rules: every control and whitespace character
    (``str.isspace``), some look-alikes that are neither, alone and beside a letter."""
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    chars = sorted({chr(c) for c in range(0x21)} | set(spaces) | {
        "\x7f", "\x80", "\x9f", "\u180e", "\u200b", "\u2060", "\ufeff", "é", "\U0001f600"})
    values = ["", "a", "a" * 255, "a" * 256, " " * 255, "\u3000" * 3 + "x"]
    for ch in chars:
        values += [ch, ch * 2, f"a{ch}b", f"{ch}a", f"a{ch}"]
    return values


def test_the_documented_limits_of_every_request_field(doc):
    for definition in ("UserRequest", "UserUpdateRequest"):
        assert {k: rule(doc, definition, "name")[k] for k in ("minLength", "maxLength")} == {"minLength": 1, "maxLength": 255}
        assert rule(doc, definition, "email")["maxLength"] == 254
        password = rule(doc, definition, "password")
        assert (password["minLength"], password["maxLength"], password["format"]) == (8, 72, "password")
        assert "bytes" in password["description"]
    for definition in ("GroupRequest", "GroupUpdateRequest", "RoleRequest", "RoleUpdateRequest"):
        assert rule(doc, definition, "description")["maxLength"] == 1024
    assert rule(doc, "RoleRequest", "name")["pattern"] == "^[a-z][a-z0-9_-]{0,63}$"
    assert rule(doc, "MemberRequest", "role")["pattern"] == "^[a-z][a-z0-9_-]{0,63}$"
    for field in ("resource", "action"):
        assert rule(doc, "Permission", field)["pattern"] == "^[a-z*][a-z0-9_.:*-]{0,63}$"
    for field in ("group_uuid", "user_uuid"):
        assert documented(rule(doc, "MemberRequest", field), UUID4_EXAMPLE)
        assert documented(rule(doc, "MemberRequest", field), UUID4_EXAMPLE.upper())  # normalized on input
        assert not documented(rule(doc, "MemberRequest", field), UUID4_EXAMPLE.replace("-", ""))
    for path in ("/internal/users", "/internal/groups/count"):
        assert query_rule(doc, path, "limit") | {"default": 50} == {"type": "integer", "default": 50, "minimum": 1, "maximum": 500}
        after_id = query_rule(doc, path, "after_id")
        assert (after_id["minimum"], after_id["maximum"]) == (0, 2**64 - 1)


def test_documented_names_are_the_names_the_server_accepts(doc, locky_client, locky_admin):
    """Names (users, groups; 1-255, no control characters, not only whitespace) and
    descriptions (at most 1024, no control characters): the document's pattern and the
    server's validators agree on every edge string, both ways."""
    group = locky_client.simulate_post("/v1/private/groups", json={"name": "Edge"}, headers=locky_admin.headers).json
    url = f"/v1/private/groups/{group['id']}"
    wrong = []
    for field, definition in (("name", "GroupUpdateRequest"), ("description", "GroupUpdateRequest")):
        schema = rule(doc, definition, field)
        for value in _edge_strings():
            result = locky_client.simulate_put(url, json={field: value}, headers=locky_admin.headers)
            assert result.status_code in (200, 400), result.text
            if documented(schema, value) != (result.status_code == 200):
                wrong.append((field, value, result.status_code, result.text))
    assert not wrong, wrong
    user_name = rule(doc, "UserUpdateRequest", "name")
    assert user_name["pattern"] == rule(doc, "GroupUpdateRequest", "name")["pattern"]
    assert documented(user_name, "Ada Lovelace") and not documented(user_name, " \t ")


def test_documented_filters_are_the_filters_the_server_accepts(doc, locky_client, locky_admin):
    """Query filters (email, uuids, names): a value the document allows gets a 200, one
    it refuses gets a 400. Surrounding spaces of an email are the one difference: the
    server trims them, the document (stricter) does not allow them."""
    domain = "@example.com"
    emails = [
        "ada@example.com", "ADA@Example.COM", "a.b+c@sub.example.org", "a" * (254 - len(domain)) + domain,
        "a" * (255 - len(domain)) + domain, "a@b.c", "a@b", "@example.com", "a@@example.com", "a..b@example.com",
        ".a@example.com", "a.@example.com", "a@-b.com", "a@b-.com", "a@b.c0m", "é@example.com",
        "a b@example.com", "ada@example.com\n", "ada@example.com\x00", "", " ada@example.com ", "\tada@example.com",
    ]
    uuids = [UUID4_EXAMPLE, UUID4_EXAMPLE.upper(), UUID4_EXAMPLE + "\n", UUID4_EXAMPLE.replace("-", ""),
             "3f2b6c1e-8a4d-1e5f-9b7c-2d1e0f9a8b7c", "3f2b6c1e-8a4d-4e5f-cb7c-2d1e0f9a8b7c", "{" + UUID4_EXAMPLE + "}", ""]
    cases = [("/internal/users", "email", value) for value in emails]
    cases += [(path, name, value) for value in uuids
              for path, name in (("/internal/members", "group_uuid"), ("/internal/members", "user_uuid"))]
    cases += [("/internal/groups", "name", value) for value in _edge_strings()]
    cases += [("/internal/roles", "name", value) for value in ("auditor", "a", "Auditor", "auditor\n", "1a", "a" * 65)]
    wrong = []
    for path, name, value in cases:
        result = locky_client.simulate_get("/v1" + path, params={name: value}, headers=locky_admin.headers)
        assert result.status_code in (200, 400), result.text
        allowed, accepted = documented(query_rule(doc, path, name), value), result.status_code == 200
        if allowed != accepted and not (name == "email" and accepted and value != value.strip()):
            wrong.append((path, name, value, result.status_code, result.text))
    assert not wrong, wrong


def test_passwords_are_documented_in_characters_and_checked_in_bytes(doc, locky_client):
    """Swagger 2.0 counts characters; the server counts bytes of UTF-8 (bcrypt's 72). The
    document says both, and the server keeps what the description says."""
    schema = rule(doc, "UserRequest", "password")
    for n, (password, accepted) in enumerate([
        # Not "a" * 8: that one is on the common-password list (docs/http/accounts.md).
        ("zq7#wv2x", True), ("zq7#wv2", False), ("zq7#wv2x" * 9, True), ("zq7#wv2x" * 9 + "y", False),
        ("\U0001f600" * 18, True),  # 18 characters, 72 bytes
        ("\U0001f600" * 19, False),  # 19 characters (valid by maxLength), 76 bytes: the described rule
        ("é" * 4, True),  # 8 bytes, 4 characters: refused by the (stricter) minLength only
        ("a" * 7 + "\x00", False),
    ]):
        result = locky_client.simulate_post("/v1/public/users/register", json={
            "name": f"Password {n}", "email": f"password{n}@example.com", "password": password})
        assert (result.status_code == 201) == accepted, (password, result.text)
        if documented(schema, password):
            assert accepted or len(password.encode()) > 72, password


class Palette:
    def on_get(self, req, resp):
        resp.media = {"colour": "blue"}


def test_apps_of_the_same_routes_share_how_the_document_was_made_not_the_document(locky_app_factory):
    """Apps of one process with the same routes get the document built once, each a copy of
    its own; other routes, or a ``locky_swagger`` hook, get a document of their own."""
    first, second = locky_app_factory(), locky_app_factory()
    assert first.swagger == second.swagger and first.swagger is not second.swagger
    first.swagger["paths"].clear()  # one app's copy changed: not the other's
    assert "/internal/users" in second.swagger["paths"]
    assert "/internal/users" in locky_app_factory().swagger["paths"]

    painting = types.ModuleType("locky_paint")
    painting.locky_routes = hookimpl(lambda context: [
        Route("/v1/palette", Palette(), (Operation("GET", "Palette", "paint"),))])
    painted = locky_app_factory(plugin_objects=[painting])
    assert "/palette" in painted.swagger["paths"] and "/palette" not in second.swagger["paths"]

    titled = types.ModuleType("locky_title")
    titled.locky_swagger = hookimpl(lambda spec, context: spec.components.schema("Colour", {"type": "string"}))
    assert locky_app_factory(plugin_objects=[titled]).swagger["definitions"]["Colour"] == {"type": "string"}
    assert "Colour" not in locky_app_factory().swagger["definitions"]
