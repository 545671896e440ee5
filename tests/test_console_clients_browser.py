"""The console's OAuth clients screen and consents (docs/console.md, docs/http/oauth.md) in a
real headless Chromium against a real ``locky serve`` on 127.0.0.1: an admin registers a
confidential client and reads its secret once (the secret the service keeps the hash
of), registers a public one (no secret), is told in words why a redirect URI over plain
http to another host is refused, gives the client a new secret (the stored hash moves to
it) and deletes a client with the keyboard-reachable confirmation; a user who is no
admin sees no clients screen, finds the application they allowed on their own screen and
withdraws the consent (gone from storage). The screen fits a 390 px phone with long names
and URIs, every control is labelled, and the browser logs nothing but the refusal the
test asked for.

Needs Debian's ``chromium`` and ``chromium-driver`` and ``selenium``, like
``tests/test_console_browser.py``; without them the module skips (unless
``LOCKY_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import browser as chromium

from locky.accounts.codes import hash_code
from support.server import locky_server

pytestmark = [pytest.mark.server, pytest.mark.slow]

PASSWORD = "console-password-1"
ADMIN, ALICE = "admin@example.com", "alice@example.com"
WEB = "https://reports.example.com/callback"


chromium.require()

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("console-clients")
    database = f"sqlite:///{workdir / 'locky.sqlite'}"
    env = {"LOCKY_DATABASE_URL": database, "LOCKY_BCRYPT_ROUNDS": "4"}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_") and k != "LOCKY_SCREENSHOTS"]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=1) as running:
            running.workdir, running.env, running.database = workdir, {**os.environ, **env}, database
            for email in (ADMIN, ALICE):
                status, _, body = running.request("POST", "/v1/public/users/register",
                                                  {"name": email.split("@")[0].title(), "email": email,
                                                   "password": PASSWORD})
                assert status == 201, body
            done = subprocess.run([sys.executable, "-m", "locky.cli.main", "grant-admin", ADMIN],
                                  env=running.env, cwd=workdir, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            yield running


@pytest.fixture(scope="module")
def storage(server):
    """The server's storage, through an app of this process on the same database (what a
    second host would see)."""
    from locky.app import create_app
    from locky.settings import Settings

    app = create_app(Settings.from_mapping({"database_url": server.database, "bcrypt_rounds": 4,
                                            "log_requests": False}), background=False)
    try:
        yield app.context.storage
    finally:
        app.close()


class Browser:
    def __init__(self, driver, base: str, shots: Path):
        self.driver, self.base, self.shots = driver, base, shots
        self.console: list[dict] = []

    def wait(self, condition, timeout: float = 10):
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                             ).until(lambda d: condition())

    def find(self, css: str):
        return self.wait(lambda: self.driver.find_element(By.CSS_SELECTOR, css)
                         if self.driver.find_elements(By.CSS_SELECTOR, css) else None)

    def field(self, label: str):
        for element in self.driver.find_elements(By.CSS_SELECTOR, "label"):
            if element.text.strip() == label:
                return self.driver.find_element(By.ID, element.get_attribute("for"))
        raise AssertionError(f"no field labelled {label!r}")

    def fill(self, label: str, value: str) -> None:
        element = self.field(label)
        element.clear()
        element.send_keys(value)

    def click(self, text: str, scope: str = "#screen") -> None:
        def pressed():
            for element in self.driver.find_elements(By.CSS_SELECTOR, f"{scope} button, {scope} a"):
                if element.is_displayed() and text in (element.text.strip(), element.get_attribute("aria-label")):
                    element.click()
                    return True
            return False
        self.wait(pressed)

    def wait_text(self, text: str, css: str = "#screen") -> None:
        self.wait(lambda: any(text in e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)))

    def notice(self) -> str:
        return " ".join(e.text for e in self.driver.find_elements(By.CSS_SELECTOR, "#notice, #screen .notice"))

    def go(self, hash_: str, title: str) -> None:
        self.driver.execute_script("location.hash = arguments[0]", hash_)
        self.wait(lambda: self.driver.title.startswith(title)
                  and not self.driver.find_elements(By.CSS_SELECTOR, "#screen[aria-busy]"))

    def sign_in(self, email: str) -> None:
        """``email`` signed in: whoever is signed in first signs out, as a person would."""
        who = self.driver.find_elements(By.ID, "who")
        if who and who[0].text == email:
            return
        if who:
            self.driver.find_element(By.ID, "signout").click()
        else:
            self.driver.get(self.base + "/console/")
        self.find("form#signin")
        self.fill("Email", email)
        self.fill("Password", PASSWORD)
        self.field("Password").send_keys(Keys.ENTER)
        self.wait(lambda: self.driver.find_elements(By.ID, "who") and self.driver.find_element(By.ID, "who").text == email)

    def nav(self) -> list[str]:
        return [a.text for a in self.driver.find_elements(By.CSS_SELECTOR, "nav a")]

    def unlabelled(self) -> list[str]:
        return self.driver.execute_script("""
            const bad = [];
            for (const el of document.querySelectorAll('input, select, textarea')) {
              if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label')) bad.push(el.outerHTML);
            }
            for (const el of document.querySelectorAll('button, a')) {
              if (!(el.textContent.trim() || el.getAttribute('aria-label'))) bad.push(el.outerHTML);
            }
            return bad;""")

    def rows(self) -> list[str]:
        return [r.text for r in self.driver.find_elements(By.CSS_SELECTOR, "#screen tbody tr")]

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    shots = Path(os.environ.get("LOCKY_SCREENSHOTS") or tmp_path_factory.mktemp("console-clients-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    driver = chromium.chrome(performance_log=False)
    try:
        yield Browser(driver, server.url, shots)
    finally:
        driver.quit()


def test_an_admin_registers_rotates_and_deletes_clients(browser, storage):
    browser.sign_in(ADMIN)
    assert browser.nav()[-1] == "OAuth clients"
    browser.go("#/clients", "OAuth clients")
    browser.find("form#client-create")
    assert browser.unlabelled() == []

    # A confidential client: its secret, shown once, is the one the service keeps the hash of.
    browser.fill("Name", "Reports")
    browser.fill("Redirect URIs", WEB)
    browser.click("Register client")
    secret = browser.find("#client-secret").text
    (client,) = [c for c in storage.oauth_clients.list(limit=500).items if c.name == "Reports"]
    assert client.secret_hash == hash_code(secret) and client.redirect_uris == (WEB,)
    assert client.client_id in browser.notice() + browser.driver.find_element(By.ID, "screen").text
    browser.shot("client-secret")
    browser.click("Done")
    browser.wait(lambda: any("Reports" in r and client.client_id in r for r in browser.rows()))
    assert secret not in browser.driver.find_element(By.TAG_NAME, "body").text

    # A public client: no secret to show.
    browser.find("form#client-create")
    browser.fill("Name", "Single page")
    Select(browser.field("Type")).select_by_value("public")
    browser.fill("Redirect URIs", "http://127.0.0.1:8400/cb")
    browser.click("Register client")
    browser.wait(lambda: "Single page is registered" in browser.notice())
    browser.wait(lambda: any("Single page" in r for r in browser.rows()))
    (spa,) = [c for c in storage.oauth_clients.list(limit=500).items if c.name == "Single page"]
    assert (spa.type, spa.secret_hash) == ("public", None)

    # A refusal reads as the service's words, naming the field.
    browser.find("form#client-create")
    browser.fill("Name", "Plain")
    browser.fill("Redirect URIs", "http://example.com/cb")
    browser.click("Register client")
    browser.wait(lambda: "redirect_uris" in browser.notice() and "loopback" in browser.notice())
    assert storage.oauth_clients.count() == 2

    # A new secret: shown once, and the stored hash follows it.
    browser.go("#/clients", "OAuth clients")
    browser.click("New secret for Reports")
    browser.click("Yes")
    fresh = browser.find("#client-secret").text
    assert fresh != secret
    assert storage.oauth_clients.get(client.id).secret_hash == hash_code(fresh)
    browser.click("Done")

    # Delete, after the question in place.
    browser.find("form#client-create")
    browser.click("Delete Single page")
    browser.click("Yes")
    browser.wait(lambda: "Single page is deleted" in browser.notice())
    browser.wait(lambda: not any("Single page" in r for r in browser.rows()))
    assert storage.oauth_clients.get(spa.id) is None
    browser.shot("clients")
    browser.console += browser.driver.get_log("browser")


def test_the_clients_screen_fits_a_phone(browser, storage):
    long_uri = "https://" + "callback-" * 30 + ".example.com/" + "path" * 60
    storage.oauth_clients.create(client_id="phone-" + "x" * 40, name="An application with a very long name" * 4,
                                 type="confidential", redirect_uris=(long_uri,), post_logout_redirect_uris=(),
                                 grant_types=("authorization_code",), scopes=("openid",),
                                 id_token_signed_response_alg="RS256", first_party=True, secret_hash="0" * 64)
    browser.sign_in(ADMIN)
    driver = browser.driver
    driver.set_window_size(390, 844)
    try:
        browser.go("#/users", "Users")
        browser.go("#/clients", "OAuth clients")
        browser.wait(lambda: any("very long name" in r for r in browser.rows()))
        width = driver.execute_script(
            "return [document.documentElement.scrollWidth, document.body.scrollWidth,"
            " document.documentElement.clientWidth, window.innerWidth]")
        browser.shot("phone-clients")
        assert max(width[:2]) <= width[2] <= width[3] <= 390, width
    finally:
        driver.set_window_size(1280, 900)


def test_a_user_withdraws_a_consent_on_their_own_screen(browser, storage):
    (client,) = [c for c in storage.oauth_clients.list(limit=500).items if c.name == "Reports"]
    alice = storage.users.get_by_email(ALICE)
    storage.consents.grant(alice.uuid, client.client_id, ["openid", "email"])
    browser.sign_in(ALICE)
    assert "OAuth clients" not in browser.nav()
    browser.go(f"#/users/{alice.id}", "Users")
    browser.wait_text("Applications you allowed")
    browser.wait(lambda: any("Reports" in r and "email openid" in r for r in browser.rows()))
    assert browser.unlabelled() == []
    browser.click("Withdraw your consent to Reports")
    browser.click("Yes")
    browser.wait(lambda: "Your consent to Reports is withdrawn" in browser.notice())
    browser.wait(lambda: not any("Reports" in r for r in browser.rows()))
    assert storage.consents.get(alice.uuid, client.client_id) is None
    browser.shot("consents")

    # Nothing logged but the one refusal asked for above (Chrome logs each 4xx answer).
    browser.console += browser.driver.get_log("browser")
    problems = [e for e in browser.console if e["level"] in ("SEVERE", "WARNING")
                and not (e.get("source") == "network" and "/v1/private/oauth/clients - " in e["message"]
                         and "status of 400" in e["message"])]
    assert problems == [], problems
