"""Response headers: token responses are never cached (``Cache-Control: no-store``);
every response, error or not, carries ``X-Content-Type-Options: nosniff`` and the other
security headers; the real server shows no version banner.
"""

from __future__ import annotations

import pytest

from locky.testing import ADMIN_EMAIL, make_settings

from harden import STRONG, account, http, served

SECURITY = {"x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}


@pytest.fixture
def locky_settings(locky_database_url):
    return make_settings(locky_database_url, login_max_failures=2)


def lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def assert_security_headers(headers, where: str) -> None:
    headers = lower(headers)
    for name, value in SECURITY.items():
        assert headers.get(name) == value, (where, name, headers)
    assert headers.get("x-request-id"), where
    assert "x-powered-by" not in headers, where


def assert_no_banner(headers, where: str) -> None:
    server = lower(headers).get("server", "")
    assert server in ("", "locky"), (where, server)


def requests_of_every_kind(send, user_token: str, admin_token: str, user_id: int):
    """``(what, status, headers)`` for responses of every status the API gives."""
    yield "health", *send("GET", "/v1/public/health", None, None)
    yield "list", *send("GET", "/v1/internal/users", None, user_token)
    yield "created", *send("POST", "/v1/private/groups", {"name": "headers"}, user_token)
    yield "bad request", *send("POST", "/v1/private/groups", {"name": ""}, admin_token)
    yield "unauthorized", *send("GET", "/v1/internal/users", None, None)
    yield "forbidden", *send("POST", "/v1/private/roles", {"name": "nope"}, user_token)
    yield "not found", *send("GET", "/v1/internal/users/999999", None, admin_token)
    yield "no route", *send("GET", "/v1/nowhere", None, None)
    yield "method not allowed", *send("PATCH", "/v1/public/health", None, None)
    yield "too large", *send("POST", "/v1/private/groups", {"name": "x" * 70000}, admin_token)
    yield "swagger document", *send("GET", "/swagger/doc.json", None, None)
    yield "swagger ui", *send("GET", "/swagger/index.html", None, None)
    yield "no content", *send("DELETE", f"/v1/private/users/{user_id}", None, user_token)
    for _ in range(3):
        last = send("POST", "/v1/public/users/login", {"email": "locked@example.com", "password": "wrong-password"},
                    None)
    yield "too many requests", *last


def test_headers_in_process(locky_client, locky_admin):
    user = locky_client.account("headers@example.com", STRONG)

    def send(method, path, body, token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        result = locky_client.simulate_request(method, path, json=body, headers=headers)
        return result.status_code, result.headers

    statuses = set()
    for what, status, headers in requests_of_every_kind(send, user.access_token, locky_admin.access_token, user.id):
        statuses.add(status)
        assert_security_headers(headers, what)
        if what.startswith("swagger ui") or what == "swagger document":
            continue
        assert lower(headers).get("cache-control") == "no-store", what
    assert {200, 201, 204, 400, 401, 403, 404, 405, 413, 429} <= statuses


def test_token_responses_are_not_cached(locky_client):
    locky_client.register("tokens@example.com", STRONG)
    login = locky_client.simulate_post("/v1/public/users/login", json={"email": "tokens@example.com", "password": STRONG})
    assert login.status_code == 200 and login.headers["cache-control"] == "no-store"
    refresh = locky_client.simulate_post("/v1/public/users/refresh", json={"refresh_token": login.json["refresh_token"]})
    assert refresh.status_code == 200 and refresh.headers["cache-control"] == "no-store"
    assert "public" not in refresh.headers["cache-control"] and "max-age" not in refresh.headers["cache-control"]


@pytest.mark.server
def test_headers_on_a_real_server(tmp_path):
    with served(tmp_path, f"sqlite:///{tmp_path / 'locky.sqlite'}", workers=1, LOCKY_LOGIN_MAX_FAILURES="2") as server:
        admin = account(server, ADMIN_EMAIL, verified=True)
        user = account(server, "headers@example.com")

        def send(method, path, body, token):
            reply = http(server, method, path, body, token=token)
            return reply.status, reply.headers

        for what, status, headers in requests_of_every_kind(send, user["access_token"], admin["access_token"],
                                                            user["user"]["id"]):
            assert_security_headers(headers, what)
            assert_no_banner(headers, what)
        login = http(server, "POST", "/v1/public/users/login", {"email": ADMIN_EMAIL, "password": STRONG})
        assert login.header("Cache-Control") == "no-store"
        assert login.header("Server") == "locky"
        refresh = http(server, "POST", "/v1/public/users/refresh", {"refresh_token": login.json["refresh_token"]})
        assert refresh.header("Cache-Control") == "no-store"
        # Even gunicorn's own refusals (a request line too long) name no version.
        refused = http(server, "GET", "/v1/internal/users?email=" + "x" * 9000)
        assert 400 <= refused.status < 500
        assert_no_banner(refused.headers, "gunicorn's refusal")
