"""The sign-in page's passkey form (docs/http/oauth.md, ``POST /oauth/authorize/passkey``)
through Falcon's test client, with the software authenticator of
tests/support/webauthn_authenticator.py answering what the page's script would ask
(``POST /v1/public/users/login/passkey/options``): the OP session and the code as after a
password, the ``amr`` of a passkey in the ID token's source, the second step for a
passkey without user verification on a TOTP account, and every refusal as the sign-in
page again with the API's words and status (never a 500, never a redirect)."""

from __future__ import annotations

import json

import pyotp
import pytest

from locky.oauth.browser import OP_COOKIE
from locky.oauth.pages import content_security_policy

from pages_helpers import AUTHORIZE, Browser, authorize_params, hidden, make_client, redirect_params
from support.webauthn_authenticator import Authenticator

PASSKEY_FORM = f"{AUTHORIZE}/passkey"


@pytest.fixture
def browser(locky_client):
    return Browser(locky_client)


@pytest.fixture
def client(locky_app):
    return make_client(locky_app, first_party=True)


@pytest.fixture
def authenticator(locky_client, user):
    """An authenticator holding one passkey of ``user`` (registered through the API)."""
    made = Authenticator()
    options = locky_client.simulate_post("/v1/private/users/me/passkeys/options", headers=user.headers)
    assert options.status_code == 200, options.text
    added = locky_client.simulate_post("/v1/private/users/me/passkeys", headers=user.headers,
                                       json={"credential": made.create(options.json), "name": "Laptop"})
    assert added.status_code == 201, added.text
    return made


def answer(locky_client, authenticator: Authenticator, **wrong) -> str:
    """What the page's script posts: the authenticator's answer to discoverable options."""
    options = locky_client.simulate_post("/v1/public/users/login/passkey/options", json={})
    assert options.status_code == 200, options.text
    assert options.json["allowCredentials"] == []
    return json.dumps(authenticator.get(options.json, **wrong))


def post_passkey(browser: Browser, page, credential: str):
    return browser.post(PASSKEY_FORM, {"csrf_token": hidden(page.text, "csrf_token"),
                                       "request": hidden(page.text, "request"), "credential": credential})


def assert_signin_page(result, status: int, words: str) -> None:
    assert result.status_code == status, (result.status, result.text[:600])
    assert result.headers["content-type"].startswith("text/html") and "location" not in result.headers
    assert "<h1>Sign in</h1>" in result.text and words in result.text, result.text[:1200]
    # The refusal is about the passkey, not the (empty) email and password fields.
    assert 'role="alert" id="form-error"' in result.text and "aria-invalid" not in result.text


def test_the_page_offers_the_passkey_form_hidden_until_its_script_shows_it(browser, client):
    page = browser.authorize(authorize_params(client))
    assert page.status_code == 200
    form = '<form method="post" action="/oauth/authorize/passkey" id="passkey-form" class="passkey" hidden>'
    assert form in page.text
    assert '<script type="module" src="/console/signin-passkey.js"></script>' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'; connect-src 'self';" in csp and "default-src 'none'" in csp
    # The other pages still run no script at all.
    assert "script-src" not in content_security_policy("http://127.0.0.1:9999/callback")
    script = browser.request("GET", "/console/signin-passkey.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")


def test_a_passkey_signs_in_and_the_flow_goes_on_to_the_code(browser, client, user, authenticator, locky_client,
                                                             locky_app):
    params = authorize_params(client)
    page = browser.authorize(params)
    result = post_passkey(browser, page, answer(locky_client, authenticator))
    got = redirect_params(result)
    assert got["state"] == params["state"] and got["code"]
    assert OP_COOKIE in browser.cookies
    storage = locky_app.context.storage
    op_session = storage.sessions.identity(browser.cookies[OP_COOKIE].rpartition(".")[0])[0]
    assert op_session.client_id is None and tuple(op_session.amr) == ("hwk", "user", "mfa")
    login = storage.audit.list(event="login.succeeded", limit=100).items[-1]
    assert login.details["method"] == "passkey" and login.details["client_id"] == client.client_id
    # Signed in: the next authorization comes straight back.
    assert redirect_params(browser.authorize(authorize_params(client)))["code"]


def test_a_passkey_without_user_verification_on_a_totp_account_asks_for_the_code(
        browser, client, user, authenticator, locky_client):
    pending = locky_client.simulate_post("/v1/private/users/me/mfa/totp", json={}, headers=user.headers)
    totp = pyotp.TOTP(pending.json["secret"])
    confirmed = locky_client.simulate_post("/v1/private/users/me/mfa/totp/confirm", json={"code": totp.now()},
                                           headers=user.headers)
    assert confirmed.status_code == 200, confirmed.text
    page = browser.authorize(authorize_params(client))
    result = post_passkey(browser, page, answer(locky_client, authenticator, user_verified=False))
    assert result.status_code == 200 and "<h1>Two-step verification</h1>" in result.text, result.text[:600]
    assert 'action="/oauth/authorize/code"' in result.text and hidden(result.text, "mfa_token")
    assert OP_COOKIE not in browser.cookies


@pytest.mark.parametrize("credential", ["", "not json", "[]", '"a string"', "null", "[" * 15_000],
                         ids=["empty", "text", "list", "string", "null", "deep"])
def test_a_missing_or_unreadable_answer_is_the_sign_in_page_with_400(browser, client, credential):
    page = browser.authorize(authorize_params(client))
    assert_signin_page(post_passkey(browser, page, credential), 400, "did not arrive")


def test_an_answer_that_does_not_verify_is_the_sign_in_page_with_the_apis_words(
        browser, client, user, authenticator, locky_client):
    page = browser.authorize(authorize_params(client))
    result = post_passkey(browser, page, answer(locky_client, authenticator, tamper=True))
    assert_signin_page(result, 400, "The passkey could not be verified")
    assert OP_COOKIE not in browser.cookies


def test_a_removed_passkey_signs_in_no_more(browser, client, user, authenticator, locky_client):
    listed = locky_client.simulate_get("/v1/internal/users/me/passkeys", headers=user.headers)
    passkey_id = listed.json["passkeys"][0]["id"]
    removed = locky_client.simulate_delete(f"/v1/private/users/me/passkeys/{passkey_id}", headers=user.headers)
    assert removed.status_code == 204, removed.text
    page = browser.authorize(authorize_params(client))
    assert_signin_page(post_passkey(browser, page, answer(locky_client, authenticator)), 400,
                       "No account has this passkey.")


def test_a_forged_form_is_refused_before_anything_is_read(browser, client, user, authenticator, locky_client):
    page = browser.authorize(authorize_params(client))
    result = browser.post(PASSKEY_FORM, {"csrf_token": "forged", "request": hidden(page.text, "request"),
                                         "credential": answer(locky_client, authenticator)})
    assert result.status_code == 400 and "This form cannot be used" in result.text
    assert OP_COOKIE not in browser.cookies
