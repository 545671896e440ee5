"""Health and the wire basics every endpoint shares (docs/http/README.md#bodies and the
error shapes of section 2): ``GET /v1/public/health`` (200, and 503 when the database
truly cannot be opened), ``X-Request-ID`` echoing, JSON bodies only (415), the 64 KiB
body limit (413), ``{"body": ...}`` 400s for anything but one JSON object, JSON error
objects of strings for unknown routes and methods, and the record formats (RFC 3339
UTC timestamps ending in ``Z``, lowercase UUID4s, positive integer ids)."""

from __future__ import annotations

import functools
import json
import operator
import os
import uuid

import pytest

from authz_helpers import TIMESTAMP, UUID4, assert_error, assert_fields

HEALTH = "/v1/public/health"
REGISTER = "/v1/public/users/register"
JSON = {"Content-Type": "application/json"}


def assert_fresh_request_id(result, sent: str | None = None) -> None:
    given = result.headers["x-request-id"]
    assert given != sent
    assert UUID4.match(given), given
    assert str(uuid.UUID(given)) == given and uuid.UUID(given).version == 4


# -- health ------------------------------------------------------------------


def test_health_is_public_and_ok(locky_client):
    result = locky_client.simulate_get(HEALTH)
    assert result.status_code == 200
    assert result.json == {"status": "ok"}
    assert result.headers["content-type"].startswith("application/json")


def test_health_ignores_a_bad_token(locky_client):
    result = locky_client.simulate_get(HEALTH, headers={"Authorization": "Bearer not-a-token"})
    assert result.status_code == 200
    assert result.json == {"status": "ok"}


def test_health_is_503_while_the_database_cannot_be_opened_and_recovers(locky_client, locky_app, locky_settings):
    path = locky_settings.sqlite_path
    if path is None:
        pytest.skip("needs the SQLite test database")
    assert locky_client.simulate_get(HEALTH).status_code == 200
    # Drop the open connection and put a directory where the database file was:
    # the next connection attempt fails for real (even as root).
    locky_app.context.storage.close()
    os.rename(path, f"{path}.aside")
    os.mkdir(path)
    try:
        down = locky_client.simulate_get(HEALTH)
        assert down.status_code == 503
        assert down.json == {"status": "unavailable"}
        # Other endpoints say so too, with the standard error object.
        register = locky_client.simulate_post(
            REGISTER, json={"name": "a", "email": "a@example.com", "password": "password-1"}
        )
        assert_error(register, 503, "503 Service Unavailable")
    finally:
        os.rmdir(path)
        os.rename(f"{path}.aside", path)
    up = locky_client.simulate_get(HEALTH)
    assert up.status_code == 200
    assert up.json == {"status": "ok"}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_health_other_methods_are_405_with_a_json_error(locky_client, method):
    result = locky_client.simulate_request(method, HEALTH)
    assert_error(result, 405, "405 Method Not Allowed")
    assert "GET" in result.headers["allow"]


# -- HEAD ----------------------------------------------------------------------


@pytest.mark.parametrize("path", [HEALTH, "/console/", "/console", "/swagger/index.html", "/swagger/doc.json",
                                  "/.well-known/jwks.json", "/.well-known/oauth-authorization-server"])
def test_head_answers_like_get_without_a_body(locky_client, path):
    got = locky_client.simulate_get(path)
    head = locky_client.simulate_head(path)
    assert (head.status_code, got.status_code) == (200, 200)
    assert head.content == b""
    assert head.headers["content-length"] == str(len(got.content))
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers.get("cache-control") == got.headers.get("cache-control")


def test_head_needs_what_get_needs(locky_client, locky_user):
    """A protected GET is a protected HEAD: 401 without a token, 200 (no body) with one."""
    refused = locky_client.simulate_head("/v1/internal/users/me")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.content == b""
    allowed = locky_client.simulate_head("/v1/internal/users/me", headers=locky_user.headers)
    assert allowed.status_code == 200 and allowed.content == b""
    assert allowed.headers["content-length"] == str(len(
        locky_client.simulate_get("/v1/internal/users/me", headers=locky_user.headers).content))


def test_head_where_no_get_is_served_stays_405(locky_client):
    result = locky_client.simulate_head(REGISTER)
    assert result.status_code == 405
    assert "HEAD" not in result.headers["allow"] and "POST" in result.headers["allow"]
    assert "HEAD" in locky_client.simulate_post(HEALTH).headers["allow"]


# -- request ids -------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc-123", "x", "~" * 128, "req id with spaces and !#$%&'()*+,-./:;<=>?@[]^_`{|}~"])
def test_a_printable_request_id_of_1_to_128_chars_is_echoed(locky_client, value):
    result = locky_client.simulate_get(HEALTH, headers={"X-Request-ID": value})
    assert result.headers["x-request-id"] == value


@pytest.mark.parametrize("value", ["a" * 129, "tab\there", "bell\x07", "del\x7f", "caf\u00e9"])
def test_an_unacceptable_request_id_is_replaced_with_a_fresh_uuid4(locky_client, value):
    result = locky_client.simulate_get(HEALTH, headers={"X-Request-ID": value})
    assert result.status_code == 200
    assert_fresh_request_id(result, value)


def test_without_a_request_id_each_response_gets_its_own(locky_client):
    first, second = locky_client.simulate_get(HEALTH), locky_client.simulate_get(HEALTH)
    assert_fresh_request_id(first)
    assert_fresh_request_id(second)
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


def test_fresh_request_ids_are_canonical_random_uuid4s():
    from locky.http.middleware import new_request_id

    drawn = [new_request_id() for _ in range(2000)]
    assert len(set(drawn)) == len(drawn)
    for given in drawn:
        parsed = uuid.UUID(given)
        assert UUID4.match(given) and str(parsed) == given
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # Every one of the 122 random bits takes both values.
    random_bits = [uuid.UUID(given).int & ~(0xF << 76) & ~(0x3 << 62) for given in drawn]
    assert functools.reduce(operator.or_, random_bits) == ~(0xF << 76) & ~(0x3 << 62) & (2**128 - 1)
    assert functools.reduce(operator.and_, random_bits) == 0


@pytest.mark.parametrize(
    "method, path, kwargs, status",
    [
        ("GET", "/v1/no/such/route", {}, 404),
        ("DELETE", HEALTH, {}, 405),
        ("GET", "/v1/internal/users/me", {}, 401),
        ("POST", REGISTER, {"body": "x", "headers": {"Content-Type": "text/plain"}}, 415),
        ("POST", REGISTER, {"body": "[]", "headers": JSON}, 400),
        ("POST", REGISTER, {"body": " " * (64 * 1024 + 1), "headers": JSON}, 413),
    ],
)
def test_errors_carry_the_request_id_too(locky_client, method, path, kwargs, status):
    headers = {**kwargs.get("headers", {}), "X-Request-ID": "trace-me"}
    body = {k: v for k, v in kwargs.items() if k != "headers"}
    result = locky_client.simulate_request(method, path, headers=headers, **body)
    assert result.status_code == status
    assert result.headers["x-request-id"] == "trace-me"


# -- unknown routes ------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/", "/v1", "/v1/public", "/v2/public/health", "/v1/internal/nothing", "/v1/private/users"]
)
def test_unknown_routes_are_404_json_objects_of_strings(locky_client, path):
    assert_error(locky_client.simulate_get(path), 404, "404 Not Found")


def test_unknown_routes_need_no_token_to_be_404(locky_client):
    assert_error(locky_client.simulate_post("/v1/private/nothing", json={}), 404, "404 Not Found")


def test_a_trailing_slash_reaches_the_same_route(locky_client):
    result = locky_client.simulate_get(HEALTH + "/")
    assert result.status_code == 200
    assert result.json == {"status": "ok"}


# -- bodies: media type, size, shape -------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml",
     "application/jsonx", "text/json"],
)
def test_a_body_of_another_media_type_is_415(locky_client, content_type):
    body = json.dumps({"name": "a", "email": "a@example.com", "password": "password-1"})
    result = locky_client.simulate_post(REGISTER, body=body, headers={"Content-Type": content_type})
    assert_error(result, 415, "415 Unsupported Media Type")
    assert locky_client.simulate_post("/v1/public/users/login", body=body,
                                      headers={"Content-Type": content_type}).status_code == 415


def test_a_body_without_a_content_type_is_415(locky_client):
    body = json.dumps({"name": "a", "email": "a@example.com", "password": "password-1"}).encode()
    result = locky_client.simulate_post(REGISTER, body=body)
    assert_error(result, 415, "415 Unsupported Media Type")


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8"])
def test_json_with_parameters_or_any_case_is_accepted(locky_client, content_type):
    body = json.dumps({"name": "a", "email": "a@example.com", "password": "password-1"})
    result = locky_client.simulate_post(REGISTER, body=body, headers={"Content-Type": content_type})
    assert result.status_code == 201, result.text


def _padded_registration(size: int) -> bytes:
    """A registration body of exactly ``size`` bytes whose name is far too long."""
    template = {"name": "", "email": "big@example.com", "password": "password-1"}
    padding = size - len(json.dumps(template).encode())
    body = json.dumps({**template, "name": "n" * padding}).encode()
    assert len(body) == size
    return body


def test_a_body_of_exactly_64_kib_is_read_and_validated(locky_client):
    result = locky_client.simulate_post(REGISTER, body=_padded_registration(64 * 1024), headers=JSON)
    assert_fields(result, "name")


def test_a_body_one_byte_over_64_kib_is_413(locky_client):
    result = locky_client.simulate_post(REGISTER, body=_padded_registration(64 * 1024 + 1), headers=JSON)
    assert_error(result, 413, "413 Content Too Large")


def test_a_huge_body_is_413_on_every_writing_endpoint(locky_client, locky_user):
    big = b'{"name": "' + b"x" * (200 * 1024) + b'"}'
    for path, headers in [
        (REGISTER, JSON),
        ("/v1/public/users/login", JSON),
        ("/v1/public/users/refresh", JSON),
        (f"/v1/private/users/{locky_user.id}", {**JSON, **locky_user.headers}),
    ]:
        method = "PUT" if path.startswith("/v1/private/users/") else "POST"
        result = locky_client.simulate_request(method, path, body=big, headers=headers)
        assert_error(result, 413, "413 Content Too Large")


@pytest.mark.parametrize(
    "raw",
    [b"[]", b'[{"name": "a"}]', b'"a string"', b"42", b"true", b"null", b"{", b"{'name': 'a'}",
     b'{"name": "a",}', b"\xff\xfe\x00", b"", b"   ", b"NaN", b'{"name": NaN}', b'{"a": 1} {"b": 2}'],
)
def test_a_body_that_is_not_one_json_object_is_400_body(locky_client, raw):
    result = locky_client.simulate_post(REGISTER, body=raw, headers=JSON)
    assert_fields(result, "body")


def test_a_post_without_any_body_is_400_body(locky_client):
    # No body at all (hence no content type) is a missing JSON object, not a 415.
    assert_fields(locky_client.simulate_post(REGISTER), "body")
    assert_fields(locky_client.simulate_post("/v1/public/users/login"), "body")


def test_every_field_error_is_one_string(locky_client):
    result = locky_client.simulate_post(
        REGISTER, json={"name": ["list"], "email": 5, "password": {"x": 1}, "extra": None}
    )
    assert_fields(result, "name", "email", "password", "extra")


def test_nested_json_too_deep_is_400_body_not_500(locky_client):
    raw = b'{"name": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"  # under 64 KiB
    result = locky_client.simulate_post(REGISTER, body=raw, headers=JSON)
    assert result.status_code == 400, result.text
    assert set(result.json) <= {"body", "name"}


# -- record formats ------------------------------------------------------------


def test_records_use_positive_ids_lowercase_uuid4s_and_utc_timestamps(locky_client):
    result = locky_client.simulate_post(
        REGISTER, json={"name": "Format", "email": "format@example.com", "password": "password-1"}
    )
    assert result.status_code == 201
    user = result.json
    assert isinstance(user["id"], int) and not isinstance(user["id"], bool) and user["id"] > 0
    assert UUID4.match(user["uuid"]) and user["uuid"] == user["uuid"].lower()
    assert uuid.UUID(user["uuid"]).version == 4
    for key in ("created_at", "updated_at"):
        assert TIMESTAMP.match(user[key]), user[key]
        assert user[key].endswith("Z")
    assert user["deleted_at"] is None


def test_responses_are_json_with_utf8(locky_client, locky_user):
    for result in (
        locky_client.simulate_get(HEALTH),
        locky_client.simulate_get("/v1/internal/users/me", headers=locky_user.headers),
        locky_client.simulate_get("/v1/nothing"),
    ):
        assert result.headers["content-type"] == "application/json; charset=utf-8"
        json.loads(result.content.decode("utf-8"))


def test_every_json_body_names_utf8_errors_and_swagger_included(locky_client, locky_user):
    for result in (
        locky_client.simulate_get("/v1/internal/users"),  # 401
        locky_client.simulate_delete(HEALTH),  # 405
        locky_client.simulate_post("/v1/public/users/register", json={}),  # 400
        locky_client.simulate_get("/v1/internal/users/999999", headers=locky_user.headers),  # 404
        locky_client.simulate_get("/swagger/doc.json"),
    ):
        assert result.headers["content-type"] == "application/json; charset=utf-8", result.status_code
