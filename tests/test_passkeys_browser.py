"""Passkeys in a real browser (docs/http/accounts.md#passkeys, docs/passkeys.md): headless Chromium with its
virtual authenticator (WebDriver's ``addVirtualAuthenticator``: a platform authenticator
that keeps discoverable credentials and verifies its user) against a real ``locky serve``.

The server listens on 127.0.0.1 and the browser opens it as ``http://localhost:PORT``,
its public URL: browsers refuse an IP address as the relying party ID, and treat
localhost as a secure context, so the RP ID is ``localhost``.

An admin signs in on the console with their password (a recent authentication), adds a
passkey under a name on their own page, sees it listed and renames it; signs out and
signs in again with the passkey alone, no email typed. Through the OpenID provider's
sign-in page an authorization-code flow signs in with the passkey, and the ID token's
``amr`` says it was a hardware-bound key with its user verified. Removed on the console,
after the console asked for the password (its sign-in no longer recent), the passkey
signs in nowhere: not on the console, not on the sign-in page. Last, under a policy
that lets users read only their own account (no Users screen), a user adds a passkey on
the console's My account. Throughout, the pages break none of their
Content-Security-Policy.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package; without
them the module skips, unless ``LOCKY_REQUIRE_BROWSER=1`` (CI), which makes it fail.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support import browser as chromium
from support.server import free_port, locky_server

pytestmark = [pytest.mark.server, pytest.mark.slow]

PASSWORD = "passkey-browser-password-1"
ADA = "ada@example.com"
CLEO = "cleo@example.com"
POLICIES = Path(__file__).resolve().parents[1] / "policies"

chromium.require()

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


# -- the relying party's callback, the provider, its user and client ----------------------------


class Callback:
    """The client application's redirect URI on 127.0.0.1: keeps what arrives."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                data = b"<!doctype html><title>Relying party</title><h1>Back at the application</h1>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def rp():
    callback = Callback()
    yield callback
    callback.close()


@contextlib.contextmanager
def localhost_server(workdir: Path, **settings: str):
    """``locky serve`` on SQLite in ``workdir`` with ``settings`` and nothing of this
    process's ``LOCKY_*``, listening on 127.0.0.1 only; the browser reaches it as
    localhost, its public URL (``server.public``)."""
    port = free_port()
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_PUBLIC_URL": f"http://localhost:{port}", **settings}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_") and k != "LOCKY_SCREENSHOTS"]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=1, port=port) as server:
            server.public, server.database_url = env["LOCKY_PUBLIC_URL"], env["LOCKY_DATABASE_URL"]
            yield server


@pytest.fixture(scope="module")
def op(tmp_path_factory, rp):
    with localhost_server(tmp_path_factory.mktemp("passkeys-browser"), LOCKY_ADMIN_EMAILS=ADA) as server:
        admin = server.sign_up(ADA, PASSWORD, verify=True)
        status, _, me = server.request("GET", "/v1/internal/users/me", headers=admin)
        assert status == 200, me
        status, _, client = server.request("POST", "/v1/private/oauth/clients", {
            "name": "Photo Album", "type": "confidential", "redirect_uris": [f"{rp.url}/callback"],
            "first_party": True}, headers=admin)
        assert status == 201, client
        server.me, server.client, server.admin = me, client, admin
        yield server


def token_of(op) -> dict[str, str]:
    status, _, body = op.request("POST", "/v1/public/users/login", {"email": ADA, "password": PASSWORD})
    assert status == 200, body
    return {"Authorization": f"Bearer {body['access_token']}"}


def age_logins(op, minutes: int = 6) -> None:
    """Make every login of the user ``minutes`` old: no longer a recent authentication."""
    from datetime import datetime, timedelta, timezone

    from locky.testing.databases import run_sql

    then = (datetime.now(timezone.utc) - timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f")
    run_sql(op.database_url, "UPDATE locky_sessions SET created_at = %s WHERE user_uuid = %s", then, op.me["uuid"])


def audit(op, event: str) -> list[dict]:
    # The admin's token of the fixture: a login of its own here would add an event.
    status, _, page = op.request("GET", f"/v1/internal/audit?event={event}&limit=100", headers=op.admin)
    assert status == 200, page
    return page["events"]


# -- the browser and its authenticator ----------------------------------------------------------


class Browser:
    def __init__(self, driver, base: str, shots: Path):
        self.driver, self.base, self.shots = driver, base, shots
        self.console: list[dict] = []

    def wait(self, condition, timeout: float = 15):
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                             ).until(lambda d: condition())

    def find(self, css: str):
        return self.wait(lambda: next(iter(e for e in self.driver.find_elements(By.CSS_SELECTOR, css)
                                           if e.is_displayed()), None))

    def labelled(self, label: str):
        """The input a visible label names, or ``None`` (not drawn yet)."""
        for element in self.driver.find_elements(By.CSS_SELECTOR, "label"):
            if element.is_displayed() and element.text.strip() == label:
                return self.driver.find_element(By.ID, element.get_attribute("for"))
        return None

    def field(self, label: str):
        found = self.labelled(label)
        assert found is not None, f"no field labelled {label!r} on {self.driver.current_url}"
        return found

    def fill(self, label: str, value: str) -> None:
        element = self.wait(lambda: self.labelled(label))
        element.clear()
        element.send_keys(value)

    def press(self, text: str) -> None:
        """Press the visible button showing ``text`` (or with that aria-label)."""
        def pressed():
            for element in self.driver.find_elements(By.CSS_SELECTOR, "button"):
                if element.is_displayed() and text in (element.text.strip(), element.get_attribute("aria-label")):
                    element.click()
                    return True
            return False
        self.wait(pressed)

    def text(self) -> str:
        return self.driver.find_element(By.TAG_NAME, "body").text

    def wait_text(self, text: str) -> None:
        self.wait(lambda: text in self.text())

    def csp_reports(self) -> list[str]:
        self.console += self.driver.get_log("browser")
        return [e["message"] for e in self.console
                if "Content Security Policy" in e["message"] or "Refused to" in e["message"]]

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"passkeys-{name}.png"))


@pytest.fixture(scope="module")
def browser(op, tmp_path_factory):
    shots = Path(os.environ.get("LOCKY_SCREENSHOTS") or tmp_path_factory.mktemp("passkeys-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    driver = chromium.chrome(performance_log=False)
    try:
        driver.add_virtual_authenticator(VirtualAuthenticatorOptions(
            protocol=VirtualAuthenticatorOptions.Protocol.CTAP2,
            transport=VirtualAuthenticatorOptions.Transport.INTERNAL,
            has_resident_key=True, has_user_verification=True, is_user_verified=True))
        yield Browser(driver, op.public, shots)
    finally:
        driver.quit()


def console_sign_in_with_password(browser: Browser) -> None:
    browser.driver.get(f"{browser.base}/console")
    browser.fill("Email", ADA)
    browser.fill("Password", PASSWORD)
    browser.find("#signin button[type=submit]").click()
    browser.wait(lambda: browser.driver.find_element(By.ID, "who").text == ADA)


def open_my_page(browser: Browser, op) -> None:
    browser.driver.get(f"{browser.base}/console#/users/{op.me['id']}")
    browser.wait(lambda: "Passkeys" in [h.text for h in browser.driver.find_elements(By.CSS_SELECTOR, "#screen h2")])


def passkey_rows(browser: Browser) -> list[list[str]]:
    """The cells of the Passkeys section's rows, once the section is drawn (a change
    draws the page anew)."""
    drawn: list[list[list[str]]] = []

    def section() -> bool:
        for panel in browser.driver.find_elements(By.CSS_SELECTOR, "#screen section.panel"):
            if panel.find_element(By.TAG_NAME, "h2").text == "Passkeys":
                drawn[:] = [[[cell.text for cell in tr.find_elements(By.TAG_NAME, "td")]
                             for tr in panel.find_elements(By.CSS_SELECTOR, "tbody tr")
                             if not tr.find_elements(By.CSS_SELECTOR, "td.empty")]]
                return True
        return False
    browser.wait(section)
    return drawn[0]


def wait_rows(browser: Browser, check) -> list[list[str]]:
    """The rows once ``check(rows)`` holds."""
    found = []

    def holds():
        found[:] = [passkey_rows(browser)]
        return check(found[0])
    browser.wait(holds)
    return found[0]


def sign_out_of_the_console(browser: Browser) -> None:
    browser.find("#signout").click()
    browser.wait_text("You are signed out.")


class Authorization:
    """One authorization-code request with PKCE, as the client's back end makes it."""

    def __init__(self, op, rp):
        self.state, self.nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        self.verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest()).rstrip(b"=").decode()
        self.redirect_uri = f"{rp.url}/callback"
        query = {"response_type": "code", "client_id": op.client["client_id"], "redirect_uri": self.redirect_uri,
                 "scope": "openid email", "state": self.state, "nonce": self.nonce, "code_challenge": challenge,
                 "code_challenge_method": "S256"}
        self.url = f"{op.public}/oauth/authorize?{urllib.parse.urlencode(query)}"

    def exchange(self, op, code: str) -> dict:
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
                "code_verifier": self.verifier}
        basic = f"{op.client['client_id']}:{op.client['client_secret']}".encode()
        request = urllib.request.Request(op.url + "/oauth/token", data=urllib.parse.urlencode(form).encode(),
                                         headers={"Content-Type": "application/x-www-form-urlencoded",
                                                  "Authorization": "Basic " + base64.b64encode(basic).decode()},
                                         method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())


def claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


# -- the tests, in order: one browser, one authenticator, one passkey ----------------------------


def test_a_passkey_is_added_on_the_console_listed_and_renamed(browser, op):
    console_sign_in_with_password(browser)
    open_my_page(browser, op)
    assert passkey_rows(browser) == []
    browser.fill("Passkey name", "Test laptop")
    browser.press("Add a passkey")
    browser.wait_text("Test laptop is added")
    rows = wait_rows(browser, lambda rows: len(rows) == 1)
    assert rows[0][0] == "Test laptop" and rows[0][2] == "never", rows
    # The authenticator holds it as a discoverable credential for the RP ID localhost.
    held = browser.driver.get_credentials()
    assert len(held) == 1 and held[0].is_resident_credential and held[0].rp_id == "localhost"
    registered = audit(op, "passkey.registered")
    assert [e["details"]["name"] for e in registered] == ["Test laptop"]
    browser.shot("added")

    browser.press("Rename Test laptop")
    name = browser.find("form.rename input")
    name.clear()
    name.send_keys("Work laptop")
    browser.find("form.rename button[type=submit]").click()
    browser.wait_text("The passkey is now called Work laptop.")
    wait_rows(browser, lambda rows: [row[0] for row in rows] == ["Work laptop"])
    status, _, listed = op.request("GET", "/v1/internal/users/me/passkeys", headers=token_of(op))
    assert status == 200 and [p["name"] for p in listed["passkeys"]] == ["Work laptop"], listed
    assert browser.csp_reports() == []


def test_signed_out_the_console_signs_in_with_the_passkey_alone(browser, op):
    sign_out_of_the_console(browser)
    assert browser.field("Email").get_attribute("value") == ""
    browser.shot("console-sign-in")
    browser.press("Sign in with a passkey")  # no email typed: a discoverable credential
    browser.wait(lambda: browser.driver.find_element(By.ID, "who").text == ADA)
    succeeded = audit(op, "login.succeeded")
    assert succeeded[-1]["details"]["method"] == "passkey", succeeded[-1]
    open_my_page(browser, op)
    rows = wait_rows(browser, lambda rows: len(rows) == 1)
    assert rows[0][0] == "Work laptop" and rows[0][2] not in ("", "never"), rows
    assert browser.csp_reports() == []


def test_the_sign_in_page_signs_in_with_the_passkey_and_the_id_token_says_so(browser, op, rp):
    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    login = Authorization(op, rp)
    browser.driver.get(login.url)
    browser.wait(lambda: browser.driver.find_element(By.TAG_NAME, "h1").text == "Sign in")
    browser.shot("sign-in-page")
    browser.press("Sign in with a passkey")
    browser.wait(lambda: browser.driver.current_url.startswith(rp.url + "/callback"))
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(browser.driver.current_url).query))
    assert query["state"] == login.state and "code" in query, query
    tokens = login.exchange(op, query["code"])
    id_token = claims(tokens["id_token"])
    assert id_token["nonce"] == login.nonce and id_token["sub"] == op.me["uuid"]
    # A key held by the authenticator ("hwk") that verified its user: no password, no TOTP.
    assert "hwk" in id_token["amr"] and "pwd" not in id_token["amr"], id_token["amr"]
    page_login = audit(op, "login.succeeded")[-1]["details"]
    assert page_login["method"] == "passkey" and page_login["client_id"] == op.client["client_id"], page_login
    assert browser.csp_reports() == []


def test_without_javascript_the_sign_in_page_is_the_password_form_alone(browser, op, rp):
    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.driver.get(Authorization(op, rp).url)
        browser.wait(lambda: browser.driver.find_element(By.TAG_NAME, "h1").text == "Sign in")
        assert not browser.driver.find_element(By.ID, "passkey-form").is_displayed()
        assert browser.field("Email").is_displayed() and browser.field("Password").is_displayed()
        assert "passkey" not in browser.text().lower()
    finally:
        browser.driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def test_a_removed_passkey_signs_in_nowhere(browser, op, rp):
    browser.driver.get(f"{browser.base}/console")
    browser.wait(lambda: browser.driver.find_element(By.ID, "who").text == ADA)
    open_my_page(browser, op)
    # The console's sign-in was minutes ago: removing asks for the password first.
    age_logins(op)
    browser.press("Remove Work laptop")
    browser.find("button[data-confirm=yes]").click()
    browser.fill("Your password", "not the password")
    browser.press("Confirm")
    browser.wait(lambda: browser.driver.find_element(By.CSS_SELECTOR, "#reauth [role=alert]").text)
    assert [row[0] for row in passkey_rows(browser)] == ["Work laptop"]
    browser.shot("reauth")
    browser.fill("Your password", PASSWORD)
    browser.press("Confirm")
    browser.wait_text("Work laptop is removed.")
    wait_rows(browser, lambda rows: rows == [])
    assert [e["details"]["name"] for e in audit(op, "passkey.removed")] == ["Work laptop"]

    # The authenticator still offers it; Locky no longer knows it.
    sign_out_of_the_console(browser)
    browser.press("Sign in with a passkey")
    alert = browser.find("#signin [role=alert]")
    assert "passkey" in alert.text.lower(), alert.text
    assert not browser.driver.find_elements(By.ID, "who")

    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.driver.get(Authorization(op, rp).url)
    browser.wait(lambda: browser.driver.find_element(By.TAG_NAME, "h1").text == "Sign in")
    browser.press("Sign in with a passkey")
    alert = browser.wait(lambda: browser.driver.find_element(By.CSS_SELECTOR, "#form-error").text)
    assert "passkey" in alert.lower(), alert
    assert browser.driver.find_element(By.TAG_NAME, "h1").text == "Sign in"
    assert not browser.driver.current_url.startswith(rp.url)
    assert browser.csp_reports() == []


# -- My account: a user whose policy gives no Users screen manages their own passkeys -----------


@pytest.fixture(scope="module")
def self_only(tmp_path_factory):
    """A server whose policy lets a user read their own account only (``self``), not
    every account (``*``): its console shows them no Users screen."""
    workdir = tmp_path_factory.mktemp("passkeys-self-only")
    policies = workdir / "policies"
    shutil.copytree(POLICIES, policies)
    lines = (policies / "policy.csv").read_text().splitlines()
    assert "p, user, *, users, read" in lines
    (policies / "policy.csv").write_text("\n".join(
        "p, user, self, users, read" if line == "p, user, *, users, read" else line for line in lines) + "\n")
    with localhost_server(workdir, LOCKY_POLICY_DIR=str(policies)) as server:
        server.cleo = server.sign_up(CLEO, PASSWORD, verify=True)
        yield server


def test_my_account_manages_the_users_own_passkeys_without_the_users_screen(browser, self_only):
    status, _, listed = self_only.request("GET", "/v1/internal/users", headers=self_only.cleo)
    assert status == 403, listed  # the policy gives no one's list but their own account
    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.driver.get(f"{self_only.public}/console")
    browser.fill("Email", CLEO)
    browser.fill("Password", PASSWORD)
    browser.find("#signin button[type=submit]").click()
    browser.wait(lambda: browser.driver.find_element(By.ID, "who").text == CLEO)
    links = [a.text for a in browser.driver.find_elements(By.CSS_SELECTOR, "nav a")]
    assert "Users" not in links and "My account" not in links, links  # My account is in the header

    browser.find("#account").click()
    browser.wait(lambda: browser.driver.execute_script("return location.hash") == "#/account")
    browser.wait(lambda: [h.text for h in browser.driver.find_elements(By.CSS_SELECTOR, "#screen h2")] == [
        "Profile", "Passkeys", "Applications you allowed"])
    assert CLEO in browser.find("#screen dl.facts").text
    assert browser.find("#account").get_attribute("aria-current") == "page"
    assert passkey_rows(browser) == []
    browser.fill("Passkey name", "Cleo's phone")
    browser.press("Add a passkey")
    browser.wait_text("Cleo's phone is added")
    wait_rows(browser, lambda rows: [row[0] for row in rows] == ["Cleo's phone"])
    status, _, mine = self_only.request("GET", "/v1/internal/users/me/passkeys", headers=self_only.cleo)
    assert status == 200 and [p["name"] for p in mine["passkeys"]] == ["Cleo's phone"], mine
    browser.shot("my-account")

    # An address of a screen the policy does not give lands on an open one, saying why.
    browser.driver.get(f"{self_only.public}/console#/users/1")
    browser.wait_text("Your account may not open the users")
    assert browser.driver.execute_script("return location.hash") != "#/users/1"
    assert browser.csp_reports() == []
