"""The OpenID provider's pages (docs/http/oauth.md) in a real headless
Chromium against a real ``locky serve`` on 127.0.0.1, with a relying party's callback
served on another port of 127.0.0.1 to receive the redirects.

A user opens a client's authorization URL, signs in on Locky's page with the keyboard
(fields found by their labels), sees the consent page name the client and the scopes,
presses Allow, and the browser arrives at the client's callback with the code and the
state: the redirect that answers the form's post is not blocked by the page's
Content-Security-Policy (Chrome applies ``form-action`` to it), and the code exchanges
for tokens. Signed in, the next authorization goes straight back (single sign-on,
consent remembered); a client the user denies gets ``access_denied``. A wrong password
shows the refusal on the page. A TOTP user gives their code on the second step.
RP-initiated logout comes back to the registered post-logout URI with the state, and
the next authorization asks for the password again; without a post-logout URI Locky
shows its signed-out page. Another site cannot frame the sign-in page. Throughout, the
pages log nothing, run only Locky's own script and load nothing but Locky's own files.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package; without
them the module skips, unless ``LOCKY_REQUIRE_BROWSER=1`` (CI), which makes it fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support import browser as chromium

from support.server import free_port, locky_server

pytestmark = [pytest.mark.server, pytest.mark.slow]

PASSWORD = "sign-in-page-password-1"
ADMIN, ADA, TESS = "admin@example.com", "ada@example.com", "tess@example.com"


chromium.require()

from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException, StaleElementReferenceException, TimeoutException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


# -- the relying party: a callback on 127.0.0.1 ------------------------------------------------


class RelyingParty:
    """An HTTP server on 127.0.0.1 standing in for the client application: it keeps every
    request's path and query, answers a small page, and serves ``/frame`` (a page that
    tries to frame Locky's sign-in page)."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.frame_target = ""
        party = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                path, _, query = self.path.partition("?")
                party.seen.append((path, dict(urllib.parse.parse_qsl(query))))
                if path == "/frame":
                    body = f'<!doctype html><title>Framing</title><iframe src="{party.frame_target}"></iframe>'
                else:
                    body = f"<!doctype html><title>Relying party</title><h1 id='rp'>Back at the application: {path}</h1>"
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def last(self, path: str) -> dict[str, str]:
        matching = [query for seen, query in self.seen if seen == path]
        assert matching, f"the relying party saw no request to {path}: {self.seen}"
        return matching[-1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the provider, its users and clients ------------------------------------------------------


@pytest.fixture(scope="module")
def rp():
    party = RelyingParty()
    yield party
    party.close()


@pytest.fixture(scope="module")
def op(tmp_path_factory, rp):
    workdir = tmp_path_factory.mktemp("oauth-browser")
    port = free_port()
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_PUBLIC_URL": f"http://127.0.0.1:{port}", "LOCKY_ADMIN_EMAILS": ADMIN}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_") and k != "LOCKY_SCREENSHOTS"]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=1, port=port) as server:
            admin = server.sign_up(ADMIN, PASSWORD, verify=True)
            server.sign_up(ADA, PASSWORD, verify=True)
            tess = server.sign_up(TESS, PASSWORD, verify=True)
            import pyotp

            status, _, pending = server.request("POST", "/v1/private/users/me/mfa/totp", {}, headers=tess)
            assert status == 200, pending
            totp = pyotp.TOTP(pending["secret"])
            status, _, body = server.request("POST", "/v1/private/users/me/mfa/totp/confirm", {"code": totp.now()},
                                             headers=tess)
            assert status == 200, body
            clients = {}
            for label, body in {
                "album": {"name": "Photo Album", "type": "confidential", "redirect_uris": [f"{rp.url}/callback"],
                          "post_logout_redirect_uris": [f"{rp.url}/signed-out"]},
                "diary": {"name": "Dear Diary", "type": "public", "redirect_uris": [f"{rp.url}/callback"]},
            }.items():
                status, _, made = server.request("POST", "/v1/private/oauth/clients", body, headers=admin)
                assert status == 201, made
                clients[label] = made
            server.clients, server.totp = clients, totp
            yield server


# -- the browser -------------------------------------------------------------------------------


class Browser:
    """One headless Chromium, with its log entries and request URLs kept."""

    def __init__(self, driver, shots: Path):
        self.driver, self.shots = driver, shots
        self.console: list[dict] = []
        self.requests: list[str] = []

    def drain(self) -> None:
        self.console += self.driver.get_log("browser")
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])

    def wait(self, condition, timeout: float = 10):
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                             ).until(lambda d: condition())

    def field(self, label: str):
        """The input a visible label names, as a user or a screen reader finds it."""
        for element in self.driver.find_elements(By.CSS_SELECTOR, "label"):
            if element.text.strip() == label:
                return self.driver.find_element(By.ID, element.get_attribute("for"))
        raise AssertionError(f"no field labelled {label!r} on {self.driver.current_url}: {self.text()[:300]}")

    def fill(self, label: str, value: str) -> None:
        element = self.field(label)
        element.clear()
        element.send_keys(value)

    def press(self, text: str) -> None:
        for element in self.driver.find_elements(By.CSS_SELECTOR, "button"):
            if element.text.strip() == text:
                element.click()
                return
        raise AssertionError(f"no button {text!r} on {self.driver.current_url}: {self.text()[:300]}")

    def text(self) -> str:
        return self.driver.find_element(By.TAG_NAME, "body").text

    def heading(self, expected: str | None = None) -> str:
        """The page's heading. With ``expected`` (the page a click leads to), once it
        reads that, or what it reads after the wait: until the next page has come, the
        heading read is still the last page's."""
        if expected is not None:
            try:
                self.wait(lambda: self.driver.find_element(By.TAG_NAME, "h1").text == expected)
            except TimeoutException:
                pass  # the assertion that follows says what the page reads instead
        return self.wait(lambda: self.driver.find_element(By.TAG_NAME, "h1").text)

    def arrive(self, url_prefix: str) -> urllib.parse.SplitResult:
        self.wait(lambda: self.driver.current_url.startswith(url_prefix))
        return urllib.parse.urlsplit(self.driver.current_url)

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))

    def csp_reports(self) -> list[str]:
        self.drain()
        return [e["message"] for e in self.console
                if "Content Security Policy" in e["message"] or "Refused to" in e["message"]]


@pytest.fixture(scope="module")
def browser(op, tmp_path_factory):
    shots = Path(os.environ.get("LOCKY_SCREENSHOTS") or tmp_path_factory.mktemp("oauth-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    driver = chromium.chrome()
    try:
        yield Browser(driver, shots)
    finally:
        driver.quit()


@pytest.fixture
def fresh(browser, op):
    """A browser without cookies: no one signed in. (WebDriver's delete_all_cookies
    reaches only the cookies of the page shown, and Locky's live under /oauth.)"""
    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.drain()
    browser.console.clear()
    return browser


class Login:
    """One authorization request of a client: its URL, state and PKCE verifier."""

    def __init__(self, op, rp, label: str, **extra: str):
        self.client = op.clients[label]
        self.state = secrets.token_urlsafe(16)
        self.verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest()).rstrip(b"=").decode()
        query = {"response_type": "code", "client_id": self.client["client_id"], "redirect_uri": f"{rp.url}/callback",
                 "scope": "openid email profile", "state": self.state, "nonce": secrets.token_urlsafe(16),
                 "code_challenge": challenge, "code_challenge_method": "S256", **extra}
        self.url = f"{op.url}/oauth/authorize?{urllib.parse.urlencode(query)}"
        self.redirect_uri = query["redirect_uri"]


def sign_in(browser: Browser, email: str) -> None:
    assert browser.heading() == "Sign in"
    browser.fill("Email", email)
    browser.fill("Password", PASSWORD)
    browser.field("Password").send_keys(Keys.ENTER)  # the keyboard submits the form


def exchange(op, login: Login, code: str) -> dict:
    """The code at the token endpoint, as the client's back end sends it."""
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": login.redirect_uri,
            "code_verifier": login.verifier}
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if login.client.get("client_secret"):
        basic = f"{login.client['client_id']}:{login.client['client_secret']}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(basic).decode()
    else:
        form["client_id"] = login.client["client_id"]
    request = urllib.request.Request(op.url + "/oauth/token", data=urllib.parse.urlencode(form).encode(),
                                     headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


# -- the pages ---------------------------------------------------------------------------------


def test_sign_in_consent_and_the_redirect_to_the_client(fresh, op, rp):
    browser = fresh
    login = Login(op, rp, "album")
    browser.driver.get(login.url)
    assert "Photo Album" in browser.text()
    browser.shot("sign-in")
    sign_in(browser, ADA)

    assert browser.heading("Allow Photo Album?") == "Allow Photo Album?"
    page = browser.text()
    assert "See your email address" in page and "See your name" in page
    browser.shot("consent")
    browser.press("Allow")

    # The post's answer redirects to the client: the page's CSP must let it through.
    back = browser.arrive(rp.url + "/callback")
    query = dict(urllib.parse.parse_qsl(back.query))
    assert query["state"] == login.state
    assert rp.last("/callback")["code"] == query["code"]
    assert browser.csp_reports() == []
    tokens = exchange(op, login, query["code"])
    assert tokens["token_type"].lower() == "bearer" and tokens["id_token"]


def test_signed_in_the_next_authorization_comes_straight_back(browser, op, rp):
    """Single sign-on: the OP session of the test above, and the consent remembered."""
    login = Login(op, rp, "album")
    browser.driver.get(login.url)
    back = browser.arrive(rp.url + "/callback")
    assert dict(urllib.parse.parse_qsl(back.query))["state"] == login.state
    exchange(op, login, dict(urllib.parse.parse_qsl(back.query))["code"])


def test_deny_sends_access_denied_to_the_client(browser, op, rp):
    login = Login(op, rp, "diary")
    browser.driver.get(login.url)
    assert browser.heading() == "Allow Dear Diary?"
    browser.press("Deny")
    back = browser.arrive(rp.url + "/callback")
    query = dict(urllib.parse.parse_qsl(back.query))
    assert query["error"] == "access_denied" and query["state"] == login.state
    assert "code" not in query
    assert browser.csp_reports() == []


def test_logout_comes_back_to_the_client_and_ends_the_sign_in(browser, op, rp):
    login = Login(op, rp, "album")
    browser.driver.get(login.url)
    back = browser.arrive(rp.url + "/callback")
    tokens = exchange(op, login, dict(urllib.parse.parse_qsl(back.query))["code"])
    end = {"id_token_hint": tokens["id_token"], "post_logout_redirect_uri": f"{rp.url}/signed-out", "state": "bye-7"}
    browser.driver.get(f"{op.url}/oauth/logout?{urllib.parse.urlencode(end)}")
    # Locky may ask "Sign out?" first (a form); the answer ends at the client either way.
    if not browser.driver.current_url.startswith(rp.url):
        buttons = [b for b in browser.driver.find_elements(By.CSS_SELECTOR, "button") if b.is_displayed()]
        if buttons:
            buttons[0].click()
    signed_out = browser.arrive(rp.url + "/signed-out")
    assert dict(urllib.parse.parse_qsl(signed_out.query))["state"] == "bye-7"
    assert browser.csp_reports() == []
    # The OP session is gone: the next authorization shows the sign-in page.
    browser.driver.get(Login(op, rp, "album").url)
    assert browser.heading() == "Sign in"


def test_logout_without_a_post_logout_uri_shows_the_signed_out_page(fresh, op, rp):
    browser = fresh
    login = Login(op, rp, "album")
    browser.driver.get(login.url)
    sign_in(browser, ADA)
    back = browser.arrive(rp.url + "/callback")  # Ada allowed Photo Album before
    exchange(op, login, dict(urllib.parse.parse_qsl(back.query))["code"])
    browser.driver.get(f"{op.url}/oauth/logout")
    if browser.heading() != "You are signed out":
        browser.driver.find_element(By.CSS_SELECTOR, "button").click()
    assert browser.heading("You are signed out") == "You are signed out"
    browser.shot("signed-out")
    browser.driver.get(Login(op, rp, "album").url)
    assert browser.heading() == "Sign in"


def test_a_wrong_password_is_refused_on_the_page(fresh, op, rp):
    browser = fresh
    browser.driver.get(Login(op, rp, "album").url)
    browser.fill("Email", ADA)
    browser.fill("Password", "not the password")
    browser.press("Sign in")
    alert = browser.wait(lambda: browser.driver.find_element(By.CSS_SELECTOR, "[role=alert]").text)
    assert alert
    assert browser.heading() == "Sign in"
    assert browser.field("Email").get_attribute("value") == ADA
    assert not browser.driver.current_url.startswith(rp.url)


def test_a_totp_user_gives_their_code_on_the_second_step(fresh, op, rp):
    import time

    browser = fresh
    login = Login(op, rp, "album")
    browser.driver.get(login.url)
    sign_in(browser, TESS)
    assert browser.heading("Two-step verification") == "Two-step verification"
    browser.shot("code")
    # The next step's code: the current step's was spent when TOTP was confirmed.
    browser.fill("Code", op.totp.at(time.time() + 30))
    browser.press("Verify")
    assert browser.heading("Allow Photo Album?") == "Allow Photo Album?", browser.text()
    browser.press("Allow")
    back = browser.arrive(rp.url + "/callback")
    tokens = exchange(op, login, dict(urllib.parse.parse_qsl(back.query))["code"])
    payload = tokens["id_token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert "otp" in claims["amr"]
    assert browser.csp_reports() == []


def test_another_site_cannot_frame_the_sign_in_page(fresh, op, rp):
    browser = fresh
    rp.frame_target = Login(op, rp, "album").url
    browser.driver.get(f"{rp.url}/frame")
    browser.wait(lambda: any("frame-ancestors" in m or "X-Frame-Options" in m for m in browser.csp_reports()))
    frame = browser.driver.find_element(By.TAG_NAME, "iframe")
    browser.driver.switch_to.frame(frame)
    try:
        assert "Sign in" not in browser.driver.find_element(By.TAG_NAME, "body").text
    finally:
        browser.driver.switch_to.default_content()


def test_the_pages_run_only_lockys_script_and_load_only_lockys_files(fresh, op, rp):
    browser = fresh
    browser.driver.get(Login(op, rp, "album").url)
    assert browser.heading() == "Sign in"
    assert [script.get_attribute("src") for script in browser.driver.find_elements(By.TAG_NAME, "script")] == [
        f"{op.url}/console/signin-passkey.js"]
    for element in browser.driver.find_elements(By.CSS_SELECTOR, "input:not([type=hidden])"):
        assert element.get_attribute("id") and browser.driver.find_elements(
            By.CSS_SELECTOR, f"label[for='{element.get_attribute('id')}']"), element.get_attribute("outerHTML")
    browser.drain()
    assert [u for u in browser.requests if not u.startswith((op.url, rp.url, "data:"))] == []
    assert [e for e in browser.console if e["level"] == "SEVERE"] == []
