"""Input that slipped past validation into a 500, or a 200 it should not have had
(issue 13, finding 8).

- A uuid with a trailing newline passed the uuid check (Python's ``$`` matches before a
  final ``\\n``) and then broke storage (a 37-character uuid: 500) or matched nothing
  (a filter answering 200 where the value is invalid): it is a 400 field map now.
- A malformed chunked body made gunicorn's body reader raise inside the app: 500. It is
  a 400 ``{"body": ...}`` now, tried against a real ``locky serve`` over a raw socket.
"""

from __future__ import annotations

import json
import socket

import pytest

from locky.testing import ADMIN_EMAIL

from harden import EVIDENCE, STRONG, served

NL = "%0A"  # a newline, percent-encoded in a query string


def assert_field_400(result, field: str) -> None:
    assert result.status_code == 400, (result.status_code, result.text[:300])
    assert field in result.json, result.json
    assert all(isinstance(v, str) for v in result.json.values()), result.json


@pytest.fixture
def admin(locky_client):
    return locky_client.account(ADMIN_EMAIL, STRONG, verified=True)


@pytest.fixture
def group(locky_client, admin) -> dict:
    result = locky_client.simulate_post("/v1/private/groups", json={"name": "newline"}, headers=admin.headers)
    assert result.status_code == 201, result.text
    return result.json


@pytest.mark.parametrize("field", ["group_uuid", "user_uuid"])
@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "\x00"], ids=["LF", "CRLF", "space", "NUL"])
def test_a_member_uuid_with_a_trailing_newline_is_a_400(locky_client, admin, group, field, suffix):
    joiner = locky_client.register("joiner@example.com", STRONG)
    body = {"group_uuid": group["uuid"], "user_uuid": joiner["uuid"], "role": "member"}
    body[field] += suffix
    result = locky_client.simulate_post("/v1/private/members", json=body, headers=admin.headers)
    assert_field_400(result, field)
    # Nothing was written: the same membership without the newline is still new.
    body[field] = body[field].removesuffix(suffix)
    assert locky_client.simulate_post("/v1/private/members", json=body, headers=admin.headers).status_code == 201


@pytest.mark.parametrize("field", ["user_uuid", "group_uuid"])
def test_an_authz_check_uuid_with_a_trailing_newline_is_a_400(locky_client, admin, group, field):
    values = {"user_uuid": admin.body["uuid"], "group_uuid": group["uuid"]}
    query = "&".join(f"{k}={v}{NL if k == field else ''}" for k, v in values.items()) + "&resource=groups&action=read"
    result = locky_client.simulate_get("/v1/internal/authz/check", query_string=query, headers=admin.headers)
    assert_field_400(result, field)


@pytest.mark.parametrize("path", ["/v1/internal/members", "/v1/internal/members/count"])
@pytest.mark.parametrize("field", ["group_uuid", "user_uuid"])
def test_a_uuid_filter_with_a_trailing_newline_is_a_400(locky_client, admin, group, path, field):
    value = group["uuid"] if field == "group_uuid" else admin.body["uuid"]
    result = locky_client.simulate_get(path, query_string=f"{field}={value}{NL}", headers=admin.headers)
    assert_field_400(result, field)
    # The control: the same filter without the newline finds the owner's membership.
    result = locky_client.simulate_get(path, query_string=f"{field}={value}", headers=admin.headers)
    assert result.status_code == 200
    assert result.json.get("count", len(result.json.get("members", []))) == 1


@pytest.mark.parametrize("path,body,field", [
    ("/v1/private/roles", {"name": "auditor\n"}, "name"),
    ("/v1/private/roles", {"name": "auditor", "permissions": [{"resource": "docs\n", "action": "read"}]},
     "permissions"),
    ("/v1/private/roles", {"name": "auditor", "permissions": [{"resource": "docs", "action": "read\n"}]},
     "permissions"),
])
def test_every_pattern_refuses_a_trailing_newline(locky_client, admin, path, body, field):
    assert_field_400(locky_client.simulate_post(path, json=body, headers=admin.headers), field)


@pytest.mark.parametrize("path,field", [("/v1/internal/members", "role"), ("/v1/internal/roles", "name"),
                                        ("/v1/internal/authz/check", "resource"),
                                        ("/v1/internal/authz/check", "action")])
def test_pattern_filters_refuse_a_trailing_newline(locky_client, admin, path, field):
    params = {"user_uuid": admin.body["uuid"], "resource": "groups", "action": "read"} \
        if path.endswith("check") else {}
    params[field] = params.get(field, "owner") + "\n"
    result = locky_client.simulate_get(path, params=params, headers=admin.headers)
    assert_field_400(result, field)


# ---------------------------------------------------------------------------
# Malformed chunked bodies, through a real server
# ---------------------------------------------------------------------------

BROKEN_CHUNKS = {
    "a chunk size that is not hex": b"zz\r\n{}\r\n0\r\n\r\n",
    "a negative chunk size": b"-2\r\n{}\r\n0\r\n\r\n",
    "a chunk without its CRLF": b'2\r\n{}XX0\r\n\r\n',
    "no last chunk before the connection ends": b"2\r\n{}",
    "a chunk cut short by the end of the connection": b'20\r\n{"email":',
}


def raw_exchange(port: int, path: str, framed: bytes) -> tuple[int, dict[str, str], str]:
    """Send one chunked POST over a raw socket, end the sending side, read the answer."""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head + framed)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head_text, _, body = received.partition(b"\r\n\r\n")
    lines = head_text.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    text = body.decode("utf-8", "replace")
    EVIDENCE.response(f"POST {path} (raw chunked)", status, text)
    return status, headers, text


@pytest.mark.server
def test_malformed_chunked_bodies_are_400s_on_public_routes(tmp_path):
    with served(tmp_path, f"sqlite:///{tmp_path / 'locky.sqlite'}", workers=1) as server:
        port = int(server.url.rsplit(":", 1)[1])
        for path in ("/v1/public/users/login", "/v1/public/users/register", "/v1/public/users/refresh"):
            for case, framed in BROKEN_CHUNKS.items():
                status, headers, text = raw_exchange(port, path, framed)
                assert status == 400, (path, case, status, text[:300])
                assert headers.get("content-type", "").startswith("application/json"), (path, case, headers)
                assert list(json.loads(text)) == ["body"], (path, case, text)
        # The control: a well-framed chunked login is read (a 401 for an unknown account).
        body = json.dumps({"email": "nobody@example.com", "password": STRONG}).encode()
        status, _, text = raw_exchange(port, "/v1/public/users/login",
                                       b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        assert status == 401, text
        assert "unhandled error" not in server.log()
