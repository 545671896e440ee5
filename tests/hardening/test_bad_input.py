"""Bad input: hostile bodies, query strings and path ids get the contract's 4xx, a field
map (400) or Falcon's error object (other codes), never a 5xx (docs/http/README.md and docs/http/records.md).

Run on SQLite and PostgreSQL (which refuses NUL in text where SQLite stores it), with
one app per backend for the module, and over a real server for what only travels
through gunicorn (chunked bodies, raw bytes).
"""

from __future__ import annotations

import json

import pytest

from locky.app import create_app
from locky.testing import ADMIN_EMAIL, make_settings

from harden import STRONG, RecordingClient, account, fresh_database, http, served

MAX_BODY = 64 * 1024


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def app(request, tmp_path_factory):
    with fresh_database(request.param, tmp_path_factory.mktemp(request.param)) as url:
        app = create_app(make_settings(url))
        try:
            yield app
        finally:
            app.close()


@pytest.fixture(scope="module")
def admin(app):
    client = RecordingClient(app)
    return client.account(ADMIN_EMAIL, STRONG, verified=True)


@pytest.fixture
def client(app) -> RecordingClient:
    return RecordingClient(app)


def assert_4xx(result, status: int | None = None, field: str | None = None):
    """The contract's client error: a field map for 400, Falcon's object otherwise."""
    code = getattr(result, "status_code", None) or result.status
    body = json.loads(result.text)
    assert 400 <= code < 500, (code, result.text[:300])
    if status is not None:
        assert code == status, (code, result.text[:300])
    assert isinstance(body, dict) and body, body
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in body.items()), body
    if code == 400:
        if field is not None:
            assert field in body, body
    else:
        assert "title" in body and set(body) <= {"title", "description"}, body
    return body


def post_raw(client, path: str, raw: bytes, headers=None, content_type="application/json"):
    return client.simulate_post(path, body=raw, headers={"Content-Type": content_type, **(headers or {})})


# ---------------------------------------------------------------------------
# Bodies
# ---------------------------------------------------------------------------

BODIES = {
    "huge": (json.dumps({"name": "x" * (MAX_BODY + 10)}).encode(), 413, None),
    "huge and nested too deep": (b"[" * (MAX_BODY + 1), 413, None),
    "deeply nested arrays": (b'{"name": ' + b"[" * 30000 + b"]" * 30000 + b"}", 400, "body"),
    "deeply nested objects": (b'{"name": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001, 400, "body"),
    "nested, in parser range": (b'{"name": ' + b"[" * 500 + b"]" * 500 + b"}", 400, "name"),
    "not UTF-8": (b'{"name": "\xff\xfe\xfa"}', 400, "body"),
    "UTF-16": ('{"name": "x"}'.encode("utf-16"), 400, "body"),
    "UTF-8 with a BOM": ('\ufeff{"name": "x"}'.encode(), 400, "body"),
    "not JSON": (b"name=x&description=y", 400, "body"),
    "truncated JSON": (b'{"name": "x"', 400, "body"),
    "empty": (b"", 400, "body"),
    "whitespace": (b"  \n ", 400, "body"),
    "a list": (b'[{"name": "x"}]', 400, "body"),
    "a string": (b'"x"', 400, "body"),
    "null": (b"null", 400, "body"),
    "NaN": (b'{"name": NaN}', 400, "body"),
    "Infinity": (b'{"name": "x", "description": Infinity}', 400, "body"),
    "duplicate keys": (b'{"name": "a", "name": "b"}', 400, "body"),
    "duplicate nested keys": (b'{"name": "a", "x": {"k": 1, "k": 2}}', 400, "body"),
    "2**64": (b'{"name": 18446744073709551616}', 400, "name"),
    "-2**63-1": (b'{"name": "x", "description": -9223372036854775809}', 400, "description"),
    "400 digits": (b'{"name": ' + b"9" * 400 + b"}", 400, "name"),
    "5000 digits": (b'{"name": ' + b"9" * 5000 + b"}", 400, "body"),
    "1e999": (b'{"name": 1e999}', 400, "name"),
    "NUL in a value": (b'{"name": "a\\u0000b"}', 400, "name"),
    "NUL in a key": (b'{"na\\u0000me": "x"}', 400, "body"),
    "NUL deep inside": (b'{"name": "x", "description": ["\\u0000"]}', 400, "description"),
    "lone surrogate": (b'{"name": "\\ud800x"}', 400, "name"),
    "raw control bytes": (b'{"name": "a\x01b"}', 400, "body"),
    "unknown field": (b'{"name": "x", "admin": true}', 400, "admin"),
}


@pytest.mark.parametrize("case", list(BODIES))
def test_bad_group_bodies(client, admin, case):
    raw, status, field = BODIES[case]
    assert_4xx(post_raw(client, "/v1/private/groups", raw, admin.headers), status, field)


@pytest.mark.parametrize("path", ["/v1/public/users/register", "/v1/public/users/login",
                                  "/v1/public/users/refresh", "/v1/private/roles", "/v1/private/members"])
@pytest.mark.parametrize("case", ["huge", "deeply nested arrays", "not UTF-8", "not JSON", "duplicate keys",
                                  "2**64", "NUL in a value", "lone surrogate", "a list"])
def test_bad_bodies_everywhere(client, admin, path, case):
    raw, status, _ = BODIES[case]
    assert_4xx(post_raw(client, path, raw, admin.headers), status)


def test_other_media_types(client, admin):
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/jsonx", "multipart/form-data"):
        assert_4xx(post_raw(client, "/v1/private/groups", b'{"name": "x"}', admin.headers, content_type), 415)


@pytest.mark.parametrize("field,value", [
    ("name", "a\x00b"), ("email", "nul\x00@example.com"), ("password", "pass\x00word-long"),
    ("name", "\ud800"), ("password", "\udfffpassword"), ("email", "x\udc00@example.com"),
])
def test_unstorable_text_in_registration(client, field, value):
    body = {"name": "Nul", "email": "nul@example.com", "password": STRONG, field: value}
    raw = json.dumps(body).encode()  # json.dumps escapes NUL and surrogates as \u sequences
    assert_4xx(post_raw(client, "/v1/public/users/register", raw), 400, field)


@pytest.mark.parametrize("path,body,field", [
    ("/v1/public/users/login", {"email": "a\x00@example.com", "password": STRONG}, "email"),
    ("/v1/public/users/login", {"email": "a@example.com", "password": "x\x00" * 8}, "password"),
    ("/v1/public/users/refresh", {"refresh_token": "eyJ\x00"}, "refresh_token"),
    ("/v1/private/roles", {"name": "r", "permissions": [{"resource": "a\x00", "action": "read"}]}, "permissions"),
    ("/v1/private/roles", {"name": "r\x00"}, "name"),
])
def test_nul_in_other_bodies(client, admin, path, body, field):
    assert_4xx(post_raw(client, path, json.dumps(body).encode(), admin.headers), 400, field)


LOOKALIKES = [
    "\u0430dmin@example.com",  # Cyrillic a
    "admin@ex\u0430mple.com",
    "\uff41dmin@example.com",  # fullwidth a
    "\u212aate@example.com",  # Kelvin sign: lowercases to ASCII k
    "adm\u0131n@example.com",  # dotless i
    "admi\u0307n@example.com",  # combining dot
    "\u0391DMIN@example.com",  # Greek capital alpha
    "admin@example.c\u03bfm",  # Greek omicron
    "ad\u200bmin@example.com",  # zero-width space
    "admin\uff20example.com",  # fullwidth @
]


@pytest.mark.parametrize("email", LOOKALIKES)
def test_lookalike_emails_are_refused(client, admin, email):
    assert_4xx(client.simulate_post("/v1/public/users/register",
                                    json={"name": "Spoof", "email": email, "password": STRONG}), 400, "email")
    assert_4xx(client.simulate_post("/v1/public/users/login", json={"email": email, "password": STRONG}), 400)
    result = client.simulate_put(f"/v1/private/users/{admin.id}", json={"email": email}, headers=admin.headers)
    assert_4xx(result, 400, "email")
    assert_4xx(client.simulate_get("/v1/internal/users", query_string=f"email={email}", headers=admin.headers), 400)


# ---------------------------------------------------------------------------
# Query strings
# ---------------------------------------------------------------------------

QUERY_PATHS = ["/v1/internal/users", "/v1/internal/groups/count", "/v1/internal/members", "/v1/internal/roles",
               "/v1/internal/authz/check"]


@pytest.mark.parametrize("path", QUERY_PATHS)
@pytest.mark.parametrize("query,field", [
    ("limit=1&limit=2", "limit"), ("after_id=1&after_id=1", "after_id"), ("bogus=1", "bogus"),
    ("limit=0", "limit"), ("limit=501", "limit"), ("limit=-1", "limit"), ("limit=1.5", "limit"),
    ("limit=%EF%BC%91", "limit"),  # fullwidth 1
    ("after_id=18446744073709551616", "after_id"),  # 2**64: past the unsigned 64-bit range
    ("after_id=" + "9" * 100, "after_id"), ("after_id=-1", "after_id"), ("after_id=+1", "after_id"),
    ("after_id=1_000", "after_id"), ("after_id=%201", "after_id"), ("limit=%00", "limit"),
    ("name=a%00b", None), ("email=a%00b", None), ("role=%00", None), ("user_uuid=%00", None),
    ("%00=1", None),
])
def test_bad_query_strings(client, admin, path, query, field):
    if path.endswith("/authz/check") and field in ("limit", "after_id"):
        field = None  # no paging there: the unknown parameter is the error
    body = assert_4xx(client.simulate_get(path, query_string=query, headers=admin.headers), 400)
    if field:
        assert field in body, body


@pytest.mark.parametrize("after_id", [2**63 - 1, 2**63, 2**64 - 1])
def test_cursors_past_every_stored_id_are_empty_pages(client, admin, after_id):
    """Ids are unsigned 64-bit: any such cursor is valid, even past what storage assigns."""
    for kind in ("users", "groups", "members", "roles"):
        result = client.simulate_get(f"/v1/internal/{kind}", params={"after_id": str(after_id)}, headers=admin.headers)
        assert result.status_code == 200, result.text
        assert result.json == {kind: [], "next_after_id": None}


@pytest.mark.parametrize("query", ["name=%ED%A0%80", "name=%FF%FE", "email=%C0%AF%40example.com", "role=%80"])
def test_undecodable_query_strings(client, admin, query):
    """Falcon decodes percent-escapes that are not UTF-8 as replacement characters:
    an ordinary value that matches nothing, or a 400, never a 5xx."""
    for path in ("/v1/internal/groups", "/v1/internal/users/count", "/v1/internal/members"):
        result = client.simulate_get(path, query_string=query, headers=admin.headers)
        if result.status_code != 200:
            assert_4xx(result, 400)
        else:
            assert result.json.get("count", 0) == 0 and not result.json.get("groups") and not result.json.get("members")


def test_repeated_authz_parameters(client, admin):
    me = admin.body["uuid"]
    query = f"user_uuid={me}&user_uuid={me}&resource=docs&action=read"
    assert_4xx(client.simulate_get("/v1/internal/authz/check", query_string=query, headers=admin.headers), 400,
               "user_uuid")


# ---------------------------------------------------------------------------
# Path ids
# ---------------------------------------------------------------------------

BAD_IDS = ["1%0A", "0", "-1", "00", "01", "1.0", "1e3", "0x1", "+1", "%201", "%D9%A1",  # Arabic-Indic one
           str(2**63), str(2**64), str(2**64 + 1), "9" * 100, "%00", "1%00"]
ITEM_ROUTES = [("GET", "/v1/internal/users/{}"), ("GET", "/v1/internal/groups/{}"),
               ("GET", "/v1/internal/members/{}"), ("GET", "/v1/internal/roles/{}"),
               ("PUT", "/v1/private/users/{}"), ("PUT", "/v1/private/groups/{}"), ("PUT", "/v1/private/roles/{}"),
               ("DELETE", "/v1/private/users/{}"), ("DELETE", "/v1/private/groups/{}"),
               ("DELETE", "/v1/private/members/{}"), ("DELETE", "/v1/private/roles/{}")]


@pytest.mark.parametrize("method,route", ITEM_ROUTES)
def test_bad_path_ids(client, admin, method, route):
    for bad in BAD_IDS:
        kwargs = {"json": {"name": "x"}} if method == "PUT" else {}
        result = client.simulate_request(method, route.format(bad), headers=admin.headers, **kwargs)
        assert_4xx(result, 404)


def test_largest_id_is_just_not_found(client, admin):
    assert_4xx(client.simulate_get(f"/v1/internal/groups/{2**63 - 1}", headers=admin.headers), 404)


# ---------------------------------------------------------------------------
# Through gunicorn
# ---------------------------------------------------------------------------


@pytest.mark.server
def test_bad_input_through_a_real_server(tmp_path):
    with served(tmp_path, f"sqlite:///{tmp_path / 'locky.sqlite'}", workers=1) as server:
        token = account(server, ADMIN_EMAIL, verified=True)["access_token"]
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        # A huge body without Content-Length (chunked): the limit still holds.
        chunked = {**auth, "Transfer-Encoding": "chunked"}
        payload = json.dumps({"name": "x" * (MAX_BODY * 2)}).encode()
        framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in
                          (payload[i:i + 8192] for i in range(0, len(payload), 8192))) + b"0\r\n\r\n"
        assert_4xx(http(server, "POST", "/v1/private/groups", raw=framed, headers=chunked), 413)
        # ...and a small chunked body is read, not taken for an empty one.
        small = b'{"name": "chunked"}'
        small = b"%x\r\n%s\r\n0\r\n\r\n" % (len(small), small)
        assert http(server, "POST", "/v1/private/groups", raw=small, headers=chunked).status == 201
        as_text = {**chunked, "Content-Type": "text/plain"}
        assert_4xx(http(server, "POST", "/v1/private/groups", raw=small, headers=as_text), 415)
        assert_4xx(http(server, "POST", "/v1/private/groups", raw=b'{"name": "\xff"}', headers=auth), 400, "body")
        assert_4xx(http(server, "POST", "/v1/private/groups", raw=b'{"name": "a\\u0000"}', headers=auth), 400, "name")
        assert_4xx(http(server, "GET", f"/v1/internal/groups/{2**64}", headers=auth), 404)
        assert_4xx(http(server, "GET", "/v1/internal/groups?limit=1&limit=2", headers=auth), 400, "limit")
        # A request line longer than gunicorn takes is refused before the app, not a 5xx.
        long_line = http(server, "GET", "/v1/internal/groups?name=" + "x" * 5000, headers=auth)
        assert 400 <= long_line.status < 500
