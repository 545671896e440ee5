"""The end-session endpoint (docs/http/oauth.md), after a real sign-in through the pages
and a code exchanged at the token endpoint: it ends the OP session and the logins it
gave clients, and returns to the client only at a registered post_logout_redirect_uri
named with an ID token we signed."""

from __future__ import annotations

import base64
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from locky import events
from locky.testing import PASSWORD

from pages_helpers import (
    LOGOUT_URI,
    REDIRECT_URI,
    SECRET,
    VERIFIER,
    Browser,
    authorize_params,
    make_client,
    redirect_params,
)

LOGOUT = "/oauth/logout"


@pytest.fixture
def user(locky_client):
    return locky_client.account("grace@example.com")


@pytest.fixture
def client(locky_app):
    return make_client(locky_app, first_party=True)


def basic(client_id: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{SECRET}".encode()).decode()


def signed_in(browser: Browser, client, user) -> dict:
    """Sign in on the pages and exchange the code: the token endpoint's answer."""
    got = redirect_params(browser.sign_in(authorize_params(client, scope="openid email"), user.email, PASSWORD))
    result = browser.client.simulate_post("/oauth/token", body=urlencode({
        "grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT_URI,
        "code_verifier": VERIFIER}), headers={"Authorization": basic(client.client_id),
                                               "Content-Type": "application/x-www-form-urlencoded"})
    assert result.status_code == 200, result.text
    assert result.json["id_token"]
    return result.json


def userinfo_status(locky_client, access_token: str) -> int:
    return locky_client.simulate_get("/oauth/userinfo", headers={"Authorization": f"Bearer {access_token}"}).status_code


def assert_signed_out(browser: Browser, client, tokens: dict) -> None:
    assert "locky_op" not in browser.cookies
    assert userinfo_status(browser.client, tokens["access_token"]) == 401, "the client's login ended with it"
    page = browser.authorize(authorize_params(client))
    assert 'action="/oauth/authorize/login"' in page.text, "the OP session ended"


def test_logout_with_a_registered_uri_returns_there_with_state(locky_client, locky_app, client, user):
    browser = Browser(locky_client)
    tokens = signed_in(browser, client, user)
    assert userinfo_status(locky_client, tokens["access_token"]) == 200
    result = browser.request("GET", LOGOUT, query_string=urlencode({
        "id_token_hint": tokens["id_token"], "post_logout_redirect_uri": LOGOUT_URI, "state": "bye-1"}))
    assert result.status_code == 303, result.text
    location = result.headers["location"]
    assert location.startswith(LOGOUT_URI + "?") and parse_qs(urlsplit(location).query) == {"state": ["bye-1"]}
    assert result.headers["cache-control"] == "no-store"
    assert_signed_out(browser, client, tokens)
    (event,) = locky_app.context.storage.audit.list(event=events.OAUTH_LOGOUT).items
    assert event.actor_uuid == user.uuid and event.details["client_id"] == client.client_id
    assert event.details["sessions_ended"] == 2  # the OP session and the client's login


def test_logout_by_post_works_too(locky_client, client, user):
    browser = Browser(locky_client)
    tokens = signed_in(browser, client, user)
    result = browser.post(LOGOUT, {"id_token_hint": tokens["id_token"], "post_logout_redirect_uri": LOGOUT_URI})
    assert result.status_code == 303 and result.headers["location"] == LOGOUT_URI
    assert_signed_out(browser, client, tokens)


@pytest.mark.parametrize("case", ["unregistered uri", "no hint", "forged hint", "another client's hint"])
def test_without_a_valid_return_address_the_signed_out_page(locky_client, locky_app, client, user, case):
    browser = Browser(locky_client)
    tokens = signed_in(browser, client, user)
    params = {"id_token_hint": tokens["id_token"], "post_logout_redirect_uri": LOGOUT_URI, "state": "s"}
    if case == "unregistered uri":
        params["post_logout_redirect_uri"] = "http://127.0.0.1:9999/elsewhere"
    elif case == "no hint":
        del params["id_token_hint"]
    elif case == "forged hint":
        head, body, signature = tokens["id_token"].split(".")
        params["id_token_hint"] = f"{head}.{body}.{signature[::-1]}"
    else:
        params["client_id"] = make_client(locky_app, first_party=True).client_id
    result = browser.request("GET", LOGOUT, query_string=urlencode(params))
    assert result.status_code == 200 and "location" not in result.headers
    assert "You are signed out" in result.text
    assert "frame-ancestors 'none'" in result.headers["content-security-policy"]
    assert_signed_out(browser, client, tokens)


def test_an_expired_hint_still_names_the_return_address(locky_client, locky_app, client, user):
    browser = Browser(locky_client)
    signed_in(browser, client, user)
    now = int(time.time())
    hint = locky_app.context.tokens.sign_id_token(
        {"iss": locky_app.context.settings.issuer, "sub": user.uuid, "aud": client.client_id,
         "iat": now - 7200, "exp": now - 3600}, alg="RS256")
    result = browser.request("GET", LOGOUT, query_string=urlencode({
        "id_token_hint": hint, "post_logout_redirect_uri": LOGOUT_URI}))
    assert result.status_code == 303 and result.headers["location"] == LOGOUT_URI


def test_without_the_cookie_the_hint_names_the_op_session(locky_client, client, user):
    browser = Browser(locky_client)
    tokens = signed_in(browser, client, user)
    elsewhere = Browser(locky_client)  # the client's back channel: no cookie, the ID token only
    result = elsewhere.request("GET", LOGOUT, query_string=urlencode({"id_token_hint": tokens["id_token"]}))
    assert result.status_code == 200
    assert userinfo_status(locky_client, tokens["access_token"]) == 401
    assert 'action="/oauth/authorize/login"' in browser.authorize(authorize_params(client)).text


def test_signing_out_with_no_session_is_the_signed_out_page(locky_client, locky_app):
    result = Browser(locky_client).request("GET", LOGOUT)
    assert result.status_code == 200 and "You are signed out" in result.text
    assert locky_app.context.storage.audit.list(event=events.OAUTH_LOGOUT).items == []


def test_the_id_tokens_times_are_utc_on_a_host_in_another_zone(locky_client, client, user, monkeypatch):
    import jwt

    browser = Browser(locky_client)
    monkeypatch.setenv("TZ", "EST+5")  # five hours behind UTC
    time.tzset()
    try:
        tokens = signed_in(browser, client, user)
    finally:
        monkeypatch.undo()
        time.tzset()
    claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
    for name in ("iat", "auth_time"):
        assert abs(claims[name] - time.time()) < 60, (name, claims[name] - time.time())


def test_an_access_token_is_no_hint(locky_client, client, user):
    """Access tokens carry ``typ`` and may be signed by a published key too: as a hint one
    names no return address and ends no login (an API login's session among them)."""
    browser = Browser(locky_client)
    tokens = signed_in(browser, client, user)
    elsewhere = Browser(locky_client)
    for token in (tokens["access_token"], user.access_token):
        result = elsewhere.request("GET", LOGOUT, query_string=urlencode({
            "id_token_hint": token, "post_logout_redirect_uri": LOGOUT_URI, "client_id": client.client_id}))
        assert result.status_code == 200 and "location" not in result.headers
    assert userinfo_status(locky_client, tokens["access_token"]) == 200
    assert locky_client.simulate_get("/v1/internal/users/me", headers=user.headers).status_code == 200


def test_signing_out_ends_the_sessions_signing_in_again_replaced(locky_client, locky_app, client, user):
    """``prompt=login`` makes a new OP session; the logins the earlier one gave clients end
    with it at logout all the same."""
    browser = Browser(locky_client)
    first = signed_in(browser, client, user)
    got = redirect_params(browser.sign_in(authorize_params(client, prompt="login"), user.email, PASSWORD))
    second = browser.client.simulate_post("/oauth/token", body=urlencode({
        "grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT_URI,
        "code_verifier": VERIFIER}), headers={"Authorization": basic(client.client_id),
                                               "Content-Type": "application/x-www-form-urlencoded"}).json
    assert userinfo_status(locky_client, first["access_token"]) == 200
    result = browser.request("GET", LOGOUT, query_string=urlencode({"id_token_hint": second["id_token"]}))
    assert result.status_code == 200
    for tokens in (first, second):
        assert userinfo_status(locky_client, tokens["access_token"]) == 401
    (event,) = locky_app.context.storage.audit.list(event=events.OAUTH_LOGOUT).items
    assert event.details["sessions_ended"] == 4  # two OP sessions, two client logins
