"""The authorization endpoint and its pages (docs/http/oauth.md), through Falcon's test
client with a cookie jar: which requests get a 400 page and which a redirect, the
sign-in, second-factor and consent pages and their refusals (the API's words and
statuses), prompt / max_age / login_hint, CSRF, the pages' headers, and the events."""

from __future__ import annotations

import re
import time
from html.parser import HTMLParser

import pyotp
import pytest

from locky import events
from locky.accounts.codes import hash_code
from locky.accounts.logins import BAD_CODE, BAD_LOGIN
from locky.testing import PASSWORD

from pages_helpers import (
    AUTHORIZE,
    REDIRECT_URI,
    Browser,
    authorize_params,
    hidden,
    make_client,
    redirect_params,
)


@pytest.fixture
def browser(locky_client):
    return Browser(locky_client)


@pytest.fixture
def client(locky_app):
    return make_client(locky_app)


@pytest.fixture
def user(locky_client):
    return locky_client.account("ada@example.com")


def trail(app, name: str) -> list:
    return app.context.storage.audit.list(event=name, limit=100).items


def assert_page(result, status: int) -> None:
    assert result.status_code == status, (result.status, result.text[:600])
    assert result.headers["content-type"].startswith("text/html")
    assert "location" not in result.headers


# -- requests the client cannot be told about: a page, never a redirect ----------------------


@pytest.mark.parametrize("change", [
    {"client_id": "no-such-client"},
    {"redirect_uri": "http://127.0.0.1:9999/elsewhere"},
    {"redirect_uri": None},
])
def test_an_unknown_client_or_an_unregistered_or_missing_redirect_uri_is_a_400_page(browser, client, change):
    result = browser.authorize(authorize_params(client, **change))
    assert_page(result, 400)
    assert "<h1>" in result.text


def test_a_repeated_parameter_is_a_400_page(browser, client):
    query = "&".join(f"{k}={v}" for k, v in authorize_params(client).items()) + "&state=again"
    result = browser.request("GET", AUTHORIZE, query_string=query)
    assert_page(result, 400)


# -- other errors go back to the client -------------------------------------------------------


def test_a_scope_the_client_may_not_ask_is_invalid_scope_redirected_with_state(browser, locky_app):
    narrow = make_client(locky_app, scopes=("openid", "email"))
    params = authorize_params(narrow, scope="openid groups")
    got = redirect_params(browser.authorize(params))
    assert got["error"] == "invalid_scope" and got["state"] == params["state"] and got["error_description"]


def test_prompt_none_without_a_session_is_login_required(browser, client):
    params = authorize_params(client, prompt="none")
    got = redirect_params(browser.authorize(params))
    assert (got["error"], got["state"]) == ("login_required", params["state"])


def test_a_bad_max_age_is_invalid_request(browser, client, user):
    browser.sign_in(authorize_params(client), user.email, PASSWORD)
    got = redirect_params(browser.authorize(authorize_params(client, max_age="soon")))
    assert got["error"] == "invalid_request"


# -- the sign-in page ---------------------------------------------------------------------------


class Outline(HTMLParser):
    """What the accessibility checks read from a page."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str) -> list[dict]:
        return [attrs for name, attrs in self.tags if name == tag]


def outline(text: str) -> Outline:
    parsed = Outline()
    parsed.feed(text)
    return parsed


def test_the_sign_in_page_its_headers_and_its_markup(browser, client):
    result = browser.authorize(authorize_params(client, login_hint='ada"<b>@example.com'))
    assert_page(result, 200)
    csp = result.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "base-uri 'none'" in csp
    assert "form-action 'self' http://127.0.0.1:9999;" in csp, csp
    # The one script is Locky's own, for the passkey button: no inline script, no other origin.
    assert "script-src 'self'; connect-src 'self';" in csp, csp
    assert result.headers["x-frame-options"] == "DENY"
    assert result.headers["cache-control"] == "no-store"
    assert result.headers["referrer-policy"] == "no-referrer"
    page = outline(result.text)
    assert page.all("html")[0]["lang"] == "en"
    assert len(page.all("h1")) == 1
    assert page.all("script") == [{"type": "module", "src": "/console/signin-passkey.js"}]
    assert page.all("link")[-1]["href"] == "/console/console.css"
    inputs = {attrs.get("name"): attrs for attrs in page.all("input")}
    labels = {attrs["for"] for attrs in page.all("label")}
    assert {"email", "password"} <= labels and inputs["email"]["id"] == "email"
    # login_hint pre-fills the email, escaped; the client's name is escaped too.
    assert inputs["email"]["value"] == 'ada"<b>@example.com'
    assert "<b>" not in result.text and "Example &lt;App&gt; &amp; Co" in result.text
    assert inputs["password"]["autocomplete"] == "current-password"
    assert "locky_csrf" in browser.cookies


def test_a_wrong_password_is_the_page_again_with_the_apis_words_and_401(browser, client, user, locky_app):
    result = browser.sign_in(authorize_params(client), user.email, "not the password")
    assert_page(result, 401)
    assert BAD_LOGIN in result.text
    page = outline(result.text)
    (email,) = [a for a in page.all("input") if a.get("name") == "email"]
    assert email["value"] == user.email and email["aria-describedby"] == "form-error"
    assert [a for a in page.all("p") if a.get("id") == "form-error"]
    assert "locky_op" not in browser.cookies
    (failed,) = [e for e in trail(locky_app, events.LOGIN_FAILED) if e.details.get("client_id") == client.client_id]
    assert failed.details["method"] == "password" and failed.details["reason"] == "wrong password"


def test_an_unknown_email_is_401_too(browser, client):
    assert_page(browser.sign_in(authorize_params(client), "nobody@example.com", "whatever it is"), 401)


def test_empty_fields_are_400(browser, client):
    assert_page(browser.sign_in(authorize_params(client), "", ""), 400)


def test_a_disabled_account_is_403(browser, client, user, locky_client):
    admin = locky_client.account("admin@example.com", verified=True)
    assert locky_client.simulate_put(f"/v1/private/users/{user.id}", json={"disabled": True},
                                     headers=admin.headers).status_code == 200
    result = browser.sign_in(authorize_params(client), user.email, PASSWORD)
    assert_page(result, 403)
    assert "disabled" in result.text


def test_an_unverified_account_is_403_when_verification_is_required(locky_app_factory):
    from locky.testing import LockyClient

    app = locky_app_factory(require_verified_email=True)
    client = LockyClient(app)
    client.register("unverified@example.com")
    result = Browser(client).sign_in(authorize_params(make_client(app)), "unverified@example.com", PASSWORD)
    assert_page(result, 403)
    assert "Confirm your email address first" in result.text


def test_the_lockout_holds_through_the_page(browser, client, user, locky_app):
    params = authorize_params(client)
    for _ in range(locky_app.context.settings.login_max_failures):
        assert browser.sign_in(params, user.email, "not the password").status_code == 401
    result = browser.sign_in(params, user.email, PASSWORD)
    assert_page(result, 429)
    assert int(result.headers["retry-after"]) > 0
    assert "Too many failed logins" in result.text
    # The API sees the same lock: one path, one count.
    assert browser.client.simulate_post("/v1/public/users/login", json={"email": user.email, "password": PASSWORD},
                                        remote_addr=browser.address).status_code == 429


# -- CSRF -------------------------------------------------------------------------------------


def test_a_post_without_the_forms_token_or_cookie_is_refused(browser, client, user, locky_app):
    page = browser.authorize(authorize_params(client))
    request = hidden(page.text, "request")
    token = hidden(page.text, "csrf_token")
    forged = [
        {"request": request, "email": user.email, "password": PASSWORD},
        {"request": request, "csrf_token": token[:-2] + "xx", "email": user.email, "password": PASSWORD},
    ]
    for fields in forged:
        assert_page(browser.post(f"{AUTHORIZE}/login", fields), 400)
    # The right token without the cookie it is bound to (another browser) fails too.
    stranger = Browser(browser.client)
    result = stranger.post(f"{AUTHORIZE}/login", {"request": request, "csrf_token": token, "email": user.email,
                                                  "password": PASSWORD})
    assert_page(result, 400)
    assert "locky_op" not in browser.cookies and "locky_op" not in stranger.cookies
    assert not [e for e in trail(locky_app, events.LOGIN_SUCCEEDED) if e.details.get("client_id")]


def test_each_post_validates_the_request_again(browser, client, user, locky_app):
    page = browser.authorize(authorize_params(client))
    locky_app.context.storage.oauth_clients.delete(client.id)
    result = browser.submit(page, "login", email=user.email, password=PASSWORD)
    assert_page(result, 400)
    assert "locky_op" not in browser.cookies


# -- consent, codes and the OP session ----------------------------------------------------------


def test_sign_in_consent_and_the_code(browser, client, user, locky_app):
    params = authorize_params(client, scope="openid email offline_access")
    consent = browser.sign_in(params, user.email, PASSWORD)
    assert_page(consent, 200)
    assert 'action="/oauth/authorize/consent"' in consent.text
    assert "Example &lt;App&gt; &amp; Co" in consent.text and "offline_access" in consent.text
    assert "form-action 'self' http://127.0.0.1:9999;" in consent.headers["content-security-policy"]
    assert "locky_op" in browser.cookies
    got = redirect_params(browser.submit(consent, "consent", decision="allow"))
    assert got["state"] == params["state"] and "error" not in got
    code = locky_app.context.storage.oauth_codes.find(hash_code(got["code"]))
    assert code.user_uuid == user.uuid and code.client_id == client.client_id
    assert code.scope == "openid email offline_access" and list(code.amr) == ["pwd"]
    assert code.code_challenge_method == "S256" and code.redirect_uri == REDIRECT_URI and code.nonce == "n-1"
    stored = locky_app.context.storage.consents.get(user.uuid, client.client_id)
    assert sorted(stored.scopes) == ["email", "offline_access", "openid"]

    (login,) = [e for e in trail(locky_app, events.LOGIN_SUCCEEDED) if e.details.get("client_id")]
    assert login.details["method"] == "password" and login.details["client_id"] == client.client_id
    assert code.op_session_uuid == login.details["session_uuid"]
    (granted,) = trail(locky_app, events.OAUTH_CONSENT_GRANTED)
    assert granted.actor_uuid == user.uuid and granted.details["client_id"] == client.client_id
    (authorized,) = trail(locky_app, events.OAUTH_AUTHORIZED)
    assert authorized.actor_uuid == user.uuid and authorized.details["scope"] == "openid email offline_access"

    # Signed in and consented: a narrower request gets its code at once, even with prompt=none.
    again = redirect_params(browser.authorize(authorize_params(client, scope="openid", prompt="none")))
    assert again["code"] and again["code"] != got["code"]
    # A scope not consented to yet: the consent page; with prompt=none, consent_required.
    assert 'action="/oauth/authorize/consent"' in browser.authorize(authorize_params(client, scope="openid profile")).text
    assert redirect_params(browser.authorize(authorize_params(client, scope="openid profile", prompt="none"))
                           )["error"] == "consent_required"
    # prompt=consent asks again though the consent covers the scopes.
    assert 'action="/oauth/authorize/consent"' in browser.authorize(authorize_params(client, prompt="consent")).text


def test_deny_is_access_denied_with_state(browser, client, user, locky_app):
    params = authorize_params(client)
    consent = browser.sign_in(params, user.email, PASSWORD)
    got = redirect_params(browser.submit(consent, "consent", decision="deny"))
    assert (got["error"], got["state"]) == ("access_denied", params["state"])
    assert locky_app.context.storage.consents.get(user.uuid, client.client_id) is None
    assert trail(locky_app, events.OAUTH_AUTHORIZED) == []


def test_a_first_party_client_skips_consent(browser, locky_app, user):
    first = make_client(locky_app, first_party=True)
    got = redirect_params(browser.sign_in(authorize_params(first), user.email, PASSWORD))
    assert got["code"]
    assert locky_app.context.storage.consents.get(user.uuid, first.client_id) is None


def test_prompt_login_and_max_age_ask_to_sign_in_again(browser, locky_app, user):
    first = make_client(locky_app, first_party=True)
    assert redirect_params(browser.sign_in(authorize_params(first), user.email, PASSWORD))["code"]
    assert "code" in redirect_params(browser.authorize(authorize_params(first, max_age="3600")))
    for forced in ({"prompt": "login"}, {"max_age": "0"}):
        page = browser.authorize(authorize_params(first, **forced))
        assert_page(page, 200)
        assert 'action="/oauth/authorize/login"' in page.text
        got = redirect_params(browser.submit(page, "login", email=user.email, password=PASSWORD))
        assert got["code"], forced
    assert redirect_params(browser.authorize(authorize_params(first, prompt="login none")))["error"] == \
        "invalid_request"


def test_prompt_login_then_consent_does_not_ask_to_sign_in_a_third_time(browser, client, user):
    assert_page(browser.sign_in(authorize_params(client, scope="openid"), user.email, PASSWORD), 200)
    params = authorize_params(client, prompt="login", scope="openid email")
    page = browser.authorize(params)
    consent = browser.submit(page, "login", email=user.email, password=PASSWORD)
    assert 'action="/oauth/authorize/consent"' in consent.text
    assert redirect_params(browser.submit(consent, "consent", decision="allow"))["code"]


def test_consent_after_signing_out_elsewhere_asks_to_sign_in(browser, client, user, locky_app):
    consent = browser.sign_in(authorize_params(client), user.email, PASSWORD)
    op_uuid = browser.cookies["locky_op"].rpartition(".")[0]
    locky_app.context.storage.sessions.end_op_session(op_uuid)
    result = browser.submit(consent, "consent", decision="allow")
    assert 'action="/oauth/authorize/login"' in result.text
    assert locky_app.context.storage.consents.get(user.uuid, client.client_id) is None


def test_a_forged_op_cookie_is_no_session(browser, client, user, locky_client):
    api_login = locky_client.login(user.email)
    from locky.oauth.browser import OP_COOKIE

    browser.cookies[OP_COOKIE] = "0f0e4b3e-0000-4000-8000-000000000000.forged"
    assert 'action="/oauth/authorize/login"' in browser.authorize(authorize_params(client)).text
    assert api_login["access_token"]


def test_the_op_cookie(browser, client, user):
    browser.sign_in(authorize_params(client), user.email, PASSWORD)
    (cookie,) = [c for name, c in browser.last.cookies.items() if name == "locky_op"]
    assert cookie.http_only and cookie.path == "/oauth" and cookie.same_site == "Lax" and not cookie.secure


# -- a second factor -------------------------------------------------------------------------


def with_totp(locky_client, email: str) -> tuple:
    account = locky_client.account(email)
    if time.time() % 30 > 25:
        time.sleep(30 - time.time() % 30 + 0.1)
    started = locky_client.simulate_post("/v1/private/users/me/mfa/totp", json={}, headers=account.headers)
    secret = started.json["secret"]
    confirmed = locky_client.simulate_post("/v1/private/users/me/mfa/totp/confirm",
                                           json={"code": pyotp.TOTP(secret).at(time.time() - 30)},
                                           headers=account.headers)
    assert confirmed.status_code == 200, confirmed.text
    return account, secret, confirmed.json.get("recovery_codes", [])


def test_a_totp_account_signs_in_with_its_code(browser, client, locky_client, locky_app):
    account, secret, _ = with_totp(locky_client, "totp@example.com")
    step = browser.sign_in(authorize_params(client), account.email, PASSWORD)
    assert_page(step, 200)
    assert 'action="/oauth/authorize/code"' in step.text and "locky_op" not in browser.cookies
    fields = {attrs.get("name"): attrs for attrs in outline(step.text).all("input")}
    assert fields["code"]["autocomplete"] == "one-time-code" and fields["code"]["inputmode"] == "numeric"
    assert "form-action 'self' http://127.0.0.1:9999;" in step.headers["content-security-policy"]
    wrong = next(c for c in (f"{n:06d}" for n in range(10 ** 6))
                 if c not in {pyotp.TOTP(secret).at(time.time() + 30 * k) for k in range(-3, 4)})
    refused = browser.submit(step, "code", code=wrong)
    assert_page(refused, 401)
    assert BAD_CODE in refused.text
    consent = browser.submit(refused, "code", code=pyotp.TOTP(secret).now())
    assert 'action="/oauth/authorize/consent"' in consent.text
    got = redirect_params(browser.submit(consent, "consent", decision="allow"))
    code = locky_app.context.storage.oauth_codes.find(hash_code(got["code"]))
    assert list(code.amr) == ["pwd", "otp"]
    (login,) = [e for e in trail(locky_app, events.LOGIN_SUCCEEDED) if e.details.get("client_id")]
    assert login.details["method"] == "totp"
    (failed,) = [e for e in trail(locky_app, events.LOGIN_FAILED) if e.details.get("client_id")]
    assert failed.details["method"] == "totp" and failed.details["reason"] == "wrong second-factor code"


def test_a_recovery_code_works_too(browser, locky_app, locky_client):
    first = make_client(locky_app, first_party=True)
    account, _, recovery = with_totp(locky_client, "recovery@example.com")
    if not recovery:
        pytest.skip("the confirmation answer carries no recovery codes")
    step = browser.sign_in(authorize_params(first), account.email, PASSWORD)
    assert redirect_params(browser.submit(step, "code", code=recovery[0]))["code"]
    (login,) = [e for e in trail(locky_app, events.LOGIN_SUCCEEDED) if e.details.get("client_id")]
    assert login.details["method"] == "recovery_code"


def test_a_forged_mfa_token_is_the_sign_in_page_again(browser, client, locky_client):
    account, secret, _ = with_totp(locky_client, "forger@example.com")
    step = browser.sign_in(authorize_params(client), account.email, PASSWORD)
    fields = {"csrf_token": hidden(step.text, "csrf_token"), "request": hidden(step.text, "request"),
              "mfa_token": "forged.token", "code": pyotp.TOTP(secret).now()}
    result = browser.post(f"{AUTHORIZE}/code", fields)
    assert_page(result, 401)
    assert 'action="/oauth/authorize/login"' in result.text


def test_api_logins_name_their_method(locky_client, locky_app):
    locky_client.account("api@example.com")
    (login,) = trail(locky_app, events.LOGIN_SUCCEEDED)
    assert login.details["method"] == "password" and "client_id" not in login.details
    assert re.fullmatch(r"[0-9a-f-]{36}", login.details["session_uuid"])


def test_behind_an_https_public_url_the_cookies_are_secure(locky_app_factory):
    from locky.testing import LockyClient

    app = locky_app_factory(public_url="https://auth.example.com")
    client = LockyClient(app)
    account = client.account("secure@example.com")
    browser = Browser(client)
    page = browser.authorize(authorize_params(make_client(app, first_party=True)))
    assert page.cookies["locky_csrf"].secure
    result = browser.submit(page, "login", email=account.email, password=PASSWORD)
    assert redirect_params(result)["code"]
    cookie = result.cookies["locky_op"]
    assert cookie.secure and cookie.http_only and cookie.same_site == "Lax"


def test_max_age_reads_the_sign_in_time_as_utc_on_a_host_in_another_zone(browser, locky_app, user, monkeypatch):
    first = make_client(locky_app, first_party=True)
    assert redirect_params(browser.sign_in(authorize_params(first), user.email, PASSWORD))["code"]
    monkeypatch.setenv("TZ", "EST+5")  # five hours behind UTC: a naive UTC time read as local is 5 h late
    time.tzset()
    try:
        page = browser.authorize(authorize_params(first, max_age="0"))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert 'action="/oauth/authorize/login"' in page.text


def test_the_authorization_endpoint_takes_a_form_post(browser, locky_app, user):
    first = make_client(locky_app, first_party=True)
    page = browser.post(AUTHORIZE, authorize_params(first, login_hint=user.email))
    assert_page(page, 200)
    assert f'value="{user.email}"' in page.text
    assert redirect_params(browser.submit(page, "login", email=user.email, password=PASSWORD))["code"]
