"""Secrets hygiene: passwords, password hashes and tokens never appear in logs or error
bodies, and hashes never in any response (docs/http/records.md and docs/http/operation.md).

Besides the flows below, the autouse fixture ``no_secret_leaks`` (conftest.py) applies
the same scan after every test of this suite: every response body a hardening test got
(in-process, from real servers, from the fuzzer), the captured ``locky`` logs, and the
log of every real server the suite started.
"""

from __future__ import annotations

import json

import pytest

from locky.testing import make_settings

from harden import BCRYPT_HASH, OTHER, http, query, scan_text, served

SECRET_PASSWORD = "s3cret-Password-never-logged"
NEW_PASSWORD = "n3w-Password-never-logged"
LOGIN = "/v1/public/users/login"


@pytest.fixture
def locky_settings(locky_database_url):
    return make_settings(locky_database_url, login_max_failures=3)


def every_user_shape(body) -> list[dict]:
    """The user objects in a response body, wherever they sit."""
    found = []
    if isinstance(body, dict):
        if {"email", "uuid"} <= set(body):
            found.append(body)
        for value in body.values():
            found += every_user_shape(value)
    elif isinstance(body, list):
        for value in body:
            found += every_user_shape(value)
    return found


def flow(send) -> dict:
    """Every account operation, good and bad; ``send(method, path, body, token)`` returns
    ``(status, text)``. Returns the tokens it saw."""
    tokens = {}
    assert send("POST", "/v1/public/users/register",
                {"name": "Secretive", "email": "secretive@example.com", "password": SECRET_PASSWORD}, None)[0] == 201
    send("POST", "/v1/public/users/register",  # taken email, and a password over 72 bytes
         {"name": "Again", "email": "secretive@example.com", "password": SECRET_PASSWORD}, None)
    send("POST", "/v1/public/users/register",
         {"name": "Long", "email": "long@example.com", "password": SECRET_PASSWORD * 4}, None)
    status, text = send("POST", LOGIN, {"email": "secretive@example.com", "password": SECRET_PASSWORD}, None)
    assert status == 200
    login = json.loads(text)
    tokens.update(access=login["access_token"], refresh=login["refresh_token"])
    me = login["user"]
    send("POST", LOGIN, {"email": "secretive@example.com", "password": OTHER}, None)
    send("POST", LOGIN, {"email": "nobody@example.com", "password": SECRET_PASSWORD}, None)
    send("POST", LOGIN, {"email": "secretive@example.com", "password": SECRET_PASSWORD, "extra": 1}, None)
    status, text = send("POST", "/v1/public/users/refresh", {"refresh_token": tokens["refresh"]}, None)
    assert status == 200
    tokens["access2"], tokens["refresh2"] = json.loads(text)["access_token"], json.loads(text)["refresh_token"]
    send("POST", "/v1/public/users/refresh", {"refresh_token": tokens["refresh"]}, None)  # reuse: chain revoked
    send("GET", "/v1/internal/users/me", None, tokens["access2"])  # 401 now
    status, text = send("POST", LOGIN, {"email": "secretive@example.com", "password": SECRET_PASSWORD}, None)
    tokens["access3"] = json.loads(text)["access_token"]
    assert send("PUT", f"/v1/private/users/{me['id']}", {"password": NEW_PASSWORD, "current_password": SECRET_PASSWORD},
                tokens["access3"])[0] == 200
    send("PUT", f"/v1/private/users/{me['id']}", {"password": "short"}, tokens["access3"])
    send("PUT", f"/v1/private/users/{me['id']}", {"password": OTHER, "current_password": SECRET_PASSWORD},
         tokens["access3"])  # no longer the current password: 400
    send("GET", "/v1/internal/users", None, tokens["access3"])
    send("GET", f"/v1/internal/users/{me['id']}", None, tokens["access3"])
    send("GET", "/v1/internal/users/me", None, tokens["access3"] + "x")
    send("GET", "/v1/internal/users/me", None, tokens["refresh2"])  # a refresh token as access token
    for _ in range(4):  # into the lockout
        send("POST", LOGIN, {"email": "secretive@example.com", "password": SECRET_PASSWORD + "!"}, None)
    send("POST", "/v1/private/users/logout", None, tokens["access3"])
    send("GET", "/v1/internal/users/me", None, tokens["access3"])
    return tokens


def scan(texts: dict[str, str], secrets: list[str]) -> list[str]:
    return [leak for where, text in texts.items() for leak in scan_text(where, text, secrets)]


def test_in_process_logs_and_bodies(locky_client, locky_app, caplog, locky_database_url):
    caplog.set_level("DEBUG")
    seen: list[tuple[int, str]] = []

    def send(method, path, body, token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        result = locky_client.simulate_request(method, path, json=body, headers=headers)
        seen.append((result.status_code, result.text))
        return result.status_code, result.text

    tokens = flow(send)
    secrets = [SECRET_PASSWORD, NEW_PASSWORD, SECRET_PASSWORD + "!", *tokens.values()]
    assert "locky.access" in caplog.text and "/v1/public/users/login" in caplog.text  # there was a log to scan
    errors = {f"error body {n}": text for n, (status, text) in enumerate(seen) if status >= 400}
    assert len(errors) >= 10
    assert scan({"the captured log": caplog.text, **errors}, secrets) == []
    hashes = [row[0] for row in query(locky_database_url, "SELECT password_hash FROM locky_users")]
    assert hashes and all(BCRYPT_HASH.fullmatch(h) for h in hashes)
    for status, text in seen:  # no response at all carries a hash or a password field
        assert not any(h in text for h in hashes)
        for user in every_user_shape(json.loads(text) if text else None):
            assert not {"password", "password_hash", "hash"} & set(user), user


def test_real_server_log_and_bodies(tmp_path):
    url = f"sqlite:///{tmp_path / 'locky.sqlite'}"
    seen: list[tuple[int, str]] = []
    with served(tmp_path, url, workers=2, LOCKY_LOGIN_MAX_FAILURES="3") as server:
        def send(method, path, body, token):
            reply = http(server, method, path, body, token=token)
            seen.append((reply.status, reply.text))
            return reply.status, reply.text

        tokens = flow(send)
        log = server.log()
    secrets = [SECRET_PASSWORD, NEW_PASSWORD, SECRET_PASSWORD + "!", *tokens.values()]
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    access_lines = [record for record in records if "request_id" in record]
    assert len(access_lines) >= len(seen)  # one JSON line per request
    assert {"method", "path", "status", "duration_ms", "request_id", "user"} <= set(access_lines[0])
    errors = {f"error body {n}": text for n, (status, text) in enumerate(seen) if status >= 400}
    assert scan({"the server log": log, **errors}, secrets) == []
    hashes = [row[0] for row in query(url, "SELECT password_hash FROM locky_users")]
    assert not any(h in text for h in hashes for _, text in seen)


def test_swagger_document_has_no_password_in_responses(locky_app):
    definitions = locky_app.swagger["definitions"]
    assert "password" not in definitions["User"]["properties"]
    for name, definition in definitions.items():
        if not name.endswith("Request"):
            assert not {"password", "password_hash"} & set(definition.get("properties", {})), name
    assert "password" in definitions["UserRequest"]["properties"]  # write-only, in requests


def test_the_suite_scan_catches_leaks():
    """The scan itself: a body or log carrying a secret is reported (the scan is not blind)."""
    from harden import Evidence

    evidence = Evidence(secrets={SECRET_PASSWORD})
    evidence.response("POST /x", 400, json.dumps({"password": SECRET_PASSWORD}))
    evidence.response("GET /y", 200, json.dumps({"hash": "$2b$04$" + "a" * 53}))
    evidence.log("a log", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    assert len(evidence.leaks()) == 3
