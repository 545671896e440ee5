"""The admin console (docs/http/console.md) in a real headless Chromium against a real
``locky serve`` on 127.0.0.1: an admin signs in, creates a group, adds a member with a
role, renames the group and deletes it with the keyboard alone, makes a custom role,
edits its permissions and deletes another, asks the access checker and reads its
explanation, finds those actions in the audit trail, adds webhooks, sees a delivery reach
a real receiver signed with the secret the console showed, replays it and deletes the
webhook, rotates the signing key and sees the new one listed as the active key, disables
a user and deletes another, and signs out (the session is revoked). Access tokens live
10 s on this server: the console renews an expired one without signing anyone out, and
several calls at once trade the single-use refresh token only once. A 503, a proxy's
HTML error page, an outage during a refresh and a network failure each show a sentence
(never a bare "Failed to fetch" or an uncaught rejection) and leave the session intact.
Every screen fits a 390 px phone without sideways scrolling, long unbroken names
included. A non-admin with TOTP signs in with their code and sees only what the policy
lets them do; a group's maintainer is offered only the roles the policy lets them
assign, and no removal of the owner. The keyboard reaches the navigation with a visible
focus ring, and the real server answers the console and refuses traversal. Throughout,
the browser logs no error of the console's own and sends no request anywhere but the
server.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package; without
them the module skips, unless ``LOCKY_REQUIRE_BROWSER=1`` (CI), which makes it fail.
A screenshot of each screen goes to ``$LOCKY_SCREENSHOTS`` or a pytest temporary folder.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import browser as chromium

from support.server import free_port, locky_server
from webhook_receiver import Receiver

pytestmark = [pytest.mark.server, pytest.mark.slow]

PASSWORD = "console-password-1"
ADMIN, ALICE, BOB, CAROL = "admin@example.com", "alice@example.com", "bob@example.com", "carol@example.com"
DAVE = "dave@example.com"
GROUP, ROLE = "Console crew", "auditor"
#: Access tokens live 10 s on the test server (the least the settings allow; the service
#: allows 5 s of clock skew besides), so the console must refresh them as it goes.
ACCESS_TTL, LEEWAY = 10, 5


chromium.require()

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


# -- the server and its accounts ---------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("console")
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_WEBHOOK_ALLOW_PRIVATE": "true", "LOCKY_ACCESS_TTL": str(ACCESS_TTL)}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_") and k not in ("LOCKY_SCREENSHOTS",)]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=1) as running:
            running.workdir, running.env = workdir, {**os.environ, **env}
            yield running


def register(server, email: str) -> dict:
    status, _, user = server.request("POST", "/v1/public/users/register",
                                     {"name": email.split("@")[0].title(), "email": email, "password": PASSWORD})
    assert status == 201, user
    return user


def login(server, email: str) -> tuple[int, dict]:
    status, _, body = server.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
    return status, body


def auth(server, email: str) -> dict[str, str]:
    """A fresh bearer header of ``email`` (good for the next few seconds only)."""
    status, body = login(server, email)
    assert status == 200, body
    return {"Authorization": f"Bearer {body['access_token']}"}


def claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.fixture(scope="module")
def accounts(server):
    users = {email: register(server, email) for email in (ADMIN, ALICE, BOB, CAROL)}
    done = subprocess.run([sys.executable, "-m", "locky.cli.main", "grant-admin", ADMIN], env=server.env,
                          cwd=server.workdir, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Carol turns on TOTP: the console must ask for her code.
    import pyotp

    _, tokens = login(server, CAROL)
    auth = {"Authorization": f"Bearer {tokens['access_token']}"}
    status, _, pending = server.request("POST", "/v1/private/users/me/mfa/totp", {}, headers=auth)
    assert status == 200, pending
    totp = pyotp.TOTP(pending["secret"])
    status, _, confirmed = server.request("POST", "/v1/private/users/me/mfa/totp/confirm",
                                          {"code": totp.now()}, headers=auth)
    assert status == 200, confirmed
    return {"users": users, "totp": totp}


# -- the browser ---------------------------------------------------------------------------


class Browser:
    """One headless Chromium, with every log entry and request URL it produced kept."""

    def __init__(self, driver, base: str, shots: Path):
        self.driver, self.base, self.shots = driver, base, shots
        self.console: list[dict] = []
        self.requests: list[str] = []

    def drain(self) -> None:
        self.console += self.driver.get_log("browser")
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])
            elif message["method"] == "Network.webSocketCreated":
                self.requests.append(message["params"]["url"])

    def wait(self, condition, timeout: float = 10):
        # The screens redraw after each answer: an element read mid-redraw is retried.
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                             ).until(lambda d: condition())

    def find(self, css: str):
        return self.wait(lambda: self.driver.find_element(By.CSS_SELECTOR, css)
                         if self.driver.find_elements(By.CSS_SELECTOR, css) else None)

    def text(self, css: str = "body") -> str:
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def wait_text(self, text: str, css: str = "#screen") -> None:
        self.wait(lambda: any(text in e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)))

    def field(self, label: str, scope: str = "body"):
        """The input that a visible label names (as a user or a screen reader finds it)."""
        for element in self.driver.find_elements(By.CSS_SELECTOR, f"{scope} label"):
            if element.text.strip() == label:
                return self.driver.find_element(By.ID, element.get_attribute("for"))
        raise AssertionError(f"no field labelled {label!r} in {scope}")

    def fill(self, label: str, value: str, scope: str = "body") -> None:
        element = self.field(label, scope)
        element.clear()
        element.send_keys(value)

    def click(self, text: str, scope: str = "#screen") -> None:
        """Press the button or link showing ``text`` (or with that aria-label)."""
        def pressed():
            for element in self.driver.find_elements(By.CSS_SELECTOR, f"{scope} button, {scope} a"):
                if element.is_displayed() and text in (element.text.strip(), element.get_attribute("aria-label")):
                    element.click()  # a redraw in between makes it stale: found again and retried
                    return True
            return False
        self.wait(pressed)

    def screen(self, name: str, title: str) -> None:
        link = self.driver.find_element(By.ID, f"nav-{name}")
        # A detail screen (#/groups/7) already has its list's title and is not busy: the
        # shown screen's content is marked, and the console has drawn the new one once the
        # mark is gone (it replaces the content when it starts). Clicking the link of the
        # screen shown draws nothing new, so nothing is marked then.
        self.driver.execute_script(
            "const shown = document.querySelector('#screen > *');"
            "if (shown && location.hash !== arguments[0]) shown.setAttribute('data-left', '')",
            link.get_dom_attribute("href"))
        link.click()
        self.wait(lambda: self.driver.title.startswith(title)
                  and not self.driver.find_elements(By.CSS_SELECTOR, "#screen[aria-busy], #screen [data-left]"))

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.driver.execute_script("window.scrollTo(0, 0)")
        self.driver.save_screenshot(str(path))
        return path

    def held(self) -> dict | None:
        """The tokens the console keeps in this tab's sessionStorage."""
        return json.loads(self.driver.execute_script(
            "return sessionStorage.getItem('locky.console.tokens') || 'null'"))

    def rerender(self) -> None:
        """Draw the current screen again from fresh answers (as a revisit would)."""
        self.driver.execute_script("window.dispatchEvent(new HashChangeEvent('hashchange'))")

    def notice(self) -> str:
        return " ".join(e.text for e in self.driver.find_elements(By.CSS_SELECTOR, "#notice, #screen .notice"))

    def unlabelled(self) -> list[str]:
        """Inputs without a label, buttons or links without a name, links that go nowhere
        and controls taken out of (or forced into) the keyboard's order: none may be left."""
        return self.driver.execute_script("""
            const bad = [];
            for (const el of document.querySelectorAll('a:not([href]), [role=button], [onclick], [tabindex]')) {
              // Only landing spots the console moves focus to (not controls) may carry tabindex -1.
              const landing = (el.tagName === 'MAIN' || el.matches('#screen > h1')) && el.getAttribute('tabindex') === '-1';
              if (!landing) bad.push(el.outerHTML);
            }
            for (const el of document.querySelectorAll('input, select, textarea')) {
              if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label')) bad.push(el.outerHTML);
            }
            for (const el of document.querySelectorAll('button, a')) {
              if (!(el.textContent.trim() || el.getAttribute('aria-label'))) bad.push(el.outerHTML);
            }
            return bad;""")


@pytest.fixture(scope="module")
def browser(server, accounts, tmp_path_factory):
    shots = Path(os.environ.get("LOCKY_SCREENSHOTS") or tmp_path_factory.mktemp("console-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    driver = chromium.chrome()
    driver.set_window_size(1280, 900)
    try:
        yield Browser(driver, server.url, shots)
    finally:
        driver.quit()


def sign_in(browser: Browser, email: str) -> None:
    browser.driver.get(browser.base + "/console/")
    browser.find("form#signin")
    browser.fill("Email", email)
    browser.fill("Password", PASSWORD)
    browser.field("Password").send_keys(Keys.ENTER)  # the keyboard submits the form


def signed_in_as(browser: Browser, email: str) -> None:
    """Make sure ``email`` (without TOTP) is the one signed in."""
    who = browser.driver.find_elements(By.ID, "who")
    if who and who[0].text == email:
        return
    if who:
        browser.driver.find_element(By.ID, "signout").click()
    sign_in(browser, email)
    browser.wait(lambda: browser.driver.find_elements(By.ID, "who") and browser.text("#who") == email)


@pytest.fixture
def admin(browser, accounts) -> None:
    """The admin signed in (already, when the tests run in order), so that a step of the
    admin's tour that needs nothing else (the signing keys, disabling a user) also runs
    alone (``-k``). Steps that look at what earlier steps made (the group the access
    checker asks about, the audit trail of those actions) still need them first."""
    signed_in_as(browser, ADMIN)


def rows(browser: Browser, css: str = "#screen tbody tr") -> list[str]:
    return [r.text for r in browser.driver.find_elements(By.CSS_SELECTOR, css)]


def nav(browser: Browser) -> list[str]:
    return [a.text for a in browser.driver.find_elements(By.CSS_SELECTOR, "nav a")]


# -- the admin's tour ------------------------------------------------------------------------


def test_the_admin_signs_in_and_sees_every_screen(browser, accounts):
    started = time.monotonic()
    sign_in(browser, ADMIN)
    browser.wait(lambda: browser.driver.find_elements(By.ID, "who") and browser.text("#who") == ADMIN)
    assert nav(browser) == ["Users", "Groups", "Roles", "Access checker", "Audit trail", "Webhooks", "Signing keys",
                            "OAuth clients"]
    browser.wait_text(BOB)
    assert browser.driver.find_elements(By.CSS_SELECTOR, "#screen button.danger")  # Delete offered
    assert browser.unlabelled() == []
    browser.shot("users")
    # The token lives in this tab's sessionStorage, never in a cookie.
    assert browser.driver.execute_script("return document.cookie") == ""
    assert browser.driver.execute_script("return sessionStorage.getItem('locky.console.tokens')")
    assert time.monotonic() - started < 30


@pytest.mark.usefixtures("admin")
def test_the_keyboard_reaches_the_navigation_and_shows_focus(browser):
    body = browser.driver.find_element(By.TAG_NAME, "body")
    browser.driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
    reached = []
    for _ in range(12):
        body.send_keys(Keys.TAB) if not reached else browser.driver.switch_to.active_element.send_keys(Keys.TAB)
        focused = browser.driver.switch_to.active_element
        reached.append(focused.text or focused.get_attribute("aria-label") or focused.tag_name)
        if focused.text == "Signing keys":
            outline = focused.value_of_css_property("outline-style")
            assert outline not in ("none", ""), outline  # :focus-visible draws a ring
    assert "Skip to content" in reached and "Sign out" in reached, reached
    assert {"Users", "Groups", "Roles", "Signing keys"} <= set(reached), reached


@pytest.mark.usefixtures("admin")
def test_following_a_screen_link_puts_the_keyboard_on_its_heading(browser):
    def focused() -> tuple[str, str]:
        element = browser.driver.switch_to.active_element
        return element.tag_name, element.text

    browser.driver.find_element(By.ID, "nav-roles").send_keys(Keys.ENTER)
    browser.wait(lambda: focused() == ("h1", "Roles"))
    browser.driver.find_element(By.ID, "nav-users").send_keys(Keys.ENTER)
    browser.wait(lambda: focused() == ("h1", "Users"))


@pytest.mark.usefixtures("admin")
def test_the_admin_creates_a_group_and_adds_a_member_with_a_role(browser, accounts):
    browser.screen("groups", "Groups")
    browser.fill("New group name", GROUP)
    browser.fill("Description", "Made in the console", "#group-create")
    browser.click("Create group")
    browser.wait(lambda: any(GROUP == h2.text for h2 in browser.driver.find_elements(By.CSS_SELECTOR, "#screen h2")))
    browser.wait_text(ADMIN)  # the creator is its owner
    browser.fill("User email", ALICE)
    role = Select(browser.field("Role"))
    offered = [option.text for option in role.options]
    assert "owner" in offered and "maintainer" in offered and "admin" not in offered and "user" not in offered
    role.select_by_visible_text("maintainer")
    browser.click("Add member")
    browser.wait_text(f"{ALICE} is a maintainer of {GROUP}.", "#notice")
    browser.wait(lambda: any(ALICE in r.text and "maintainer" in r.text
                             for r in browser.driver.find_elements(By.CSS_SELECTOR, "#screen tbody tr")))
    browser.wait(lambda: browser.driver.find_elements(By.ID, "member-add"))
    assert browser.unlabelled() == []
    browser.shot("group")


@pytest.mark.usefixtures("admin")
def test_the_admin_renames_a_group_and_deletes_it_with_the_keyboard(browser, server):
    browser.screen("groups", "Groups")
    browser.fill("New group name", "Scratch crew")
    browser.click("Create group")
    browser.wait(lambda: browser.driver.find_elements(By.ID, "group-edit"))
    assert browser.field("Name", "#group-edit").get_attribute("value") == "Scratch crew"
    browser.fill("Name", "Renamed crew", "#group-edit")
    browser.fill("Description", "Renamed in the console", "#group-edit")
    browser.click("Save group")
    browser.wait_text("The group is saved.", "#notice")
    browser.wait(lambda: [h2.text for h2 in browser.driver.find_elements(By.CSS_SELECTOR, "#screen h2")][:1]
                 == ["Renamed crew"])
    browser.wait_text("Renamed in the console")
    _, _, found = server.request("GET", "/v1/internal/groups?name=Renamed+crew", headers=auth(server, ADMIN))
    assert [g["description"] for g in found["groups"]] == ["Renamed in the console"]

    # Delete with the keyboard alone: Enter on the button, then Enter on the focused "Yes".
    delete = browser.wait(lambda: next(b for b in browser.driver.find_elements(By.CSS_SELECTOR, "#screen button")
                                       if b.text == "Delete group"))
    delete.send_keys(Keys.ENTER)
    browser.wait(lambda: browser.driver.switch_to.active_element.text == "Yes")
    assert "Delete Renamed crew and its memberships?" in browser.text("#screen")
    browser.driver.switch_to.active_element.send_keys(Keys.ENTER)
    browser.wait_text("Group Renamed crew is deleted.", "#notice")
    browser.wait(lambda: browser.driver.title.startswith("Groups") and GROUP in browser.text("#groups-list"))
    assert "Renamed crew" not in browser.text("#groups-list")
    _, _, found = server.request("GET", "/v1/internal/groups?name=Renamed+crew", headers=auth(server, ADMIN))
    assert found["groups"] == []


@pytest.mark.usefixtures("admin")
def test_the_admin_makes_a_custom_role_and_edits_its_permissions(browser):
    browser.screen("roles", "Roles")
    browser.fill("Role name", ROLE)
    browser.fill("Description", "Reads the reports", "#role-create")
    browser.fill("Resource", "reports", "#role-create")
    browser.fill("Action", "read", "#role-create")
    browser.click("Create role")
    browser.wait_text(f"Role {ROLE} is created.", "#notice")
    browser.wait_text("reports × read")
    browser.click(f"Edit {ROLE}")
    browser.click("Add permission", "#role-edit")
    resources = browser.driver.find_elements(By.CSS_SELECTOR, "#role-edit input[name=resource]")
    actions = browser.driver.find_elements(By.CSS_SELECTOR, "#role-edit input[name=action]")
    resources[-1].send_keys("reports")
    actions[-1].send_keys("export")
    browser.click("Save role", "#role-edit")
    browser.wait_text(f"Role {ROLE} is saved.", "#notice")
    browser.wait_text("reports × export")
    assert browser.unlabelled() == []
    browser.shot("roles")


@pytest.mark.usefixtures("admin")
def test_the_admin_rewrites_a_roles_permissions_and_deletes_the_role(browser, server):
    browser.screen("roles", "Roles")
    browser.fill("Role name", "reviewer")
    browser.fill("Description", "Reads reports", "#role-create")
    browser.fill("Resource", "reports", "#role-create")
    browser.fill("Action", "read", "#role-create")
    browser.click("Add permission", "#role-create")
    resources = browser.driver.find_elements(By.CSS_SELECTOR, "#role-create input[name=resource]")
    actions = browser.driver.find_elements(By.CSS_SELECTOR, "#role-create input[name=action]")
    resources[-1].send_keys("reports")
    actions[-1].send_keys("comment")
    browser.click("Create role")
    browser.wait_text("Role reviewer is created.", "#notice")
    browser.wait_text("reports × comment")

    browser.click("Edit reviewer")
    browser.find("#role-edit")
    browser.fill("Description", "Reviews reports", "#role-edit")
    # Drop "reports × read" (the first row), add "reports × approve".
    browser.driver.find_elements(By.CSS_SELECTOR, "#role-edit .permission button")[0].click()
    browser.click("Add permission", "#role-edit")
    browser.driver.find_elements(By.CSS_SELECTOR, "#role-edit input[name=resource]")[-1].send_keys("reports")
    browser.driver.find_elements(By.CSS_SELECTOR, "#role-edit input[name=action]")[-1].send_keys("approve")
    browser.click("Save role", "#role-edit")
    browser.wait_text("Role reviewer is saved.", "#notice")
    browser.wait_text("reports × approve")
    [line] = [r for r in rows(browser) if r.startswith("reviewer")]
    assert "Reviews reports" in line and "reports × comment" in line and "reports × read" not in line, line
    _, _, found = server.request("GET", "/v1/internal/roles?name=reviewer", headers=auth(server, ADMIN))
    assert found["roles"][0]["permissions"] == [{"resource": "reports", "action": "comment"},
                                                {"resource": "reports", "action": "approve"}]

    browser.click("Delete reviewer")
    assert "Delete reviewer?" in browser.text("#screen")
    browser.click("Yes")
    browser.wait_text("Role reviewer is deleted.", "#notice")
    # The list drawn again: the others stay.
    browser.wait(lambda: (lambda now: any(r.startswith(ROLE) for r in now) and not any(r.startswith("reviewer") for r in now))(
        rows(browser)))
    _, _, found = server.request("GET", "/v1/internal/roles?name=reviewer", headers=auth(server, ADMIN))
    assert found["roles"] == []


@pytest.mark.usefixtures("admin")
def test_the_access_checker_decides_and_explains(browser):
    browser.screen("access", "Access checker")
    browser.fill("User (email or uuid)", ALICE)
    browser.fill("Resource", "members")
    browser.fill("Action", "create")
    Select(browser.field("In group")).select_by_visible_text(GROUP)
    browser.click("Check access")
    browser.wait_text("Allowed", "#access-result")
    result = browser.text("#access-result")
    assert "maintainer" in result and "group" in result and "members" in result, result
    assert browser.unlabelled() == []
    browser.shot("access")

    browser.fill("Action", "delete-everything")
    Select(browser.field("In group")).select_by_visible_text("No group (global)")
    browser.click("Check access")
    browser.wait_text("Denied", "#access-result")


@pytest.mark.usefixtures("admin")
def test_the_audit_trail_holds_those_actions(browser, accounts):
    browser.screen("audit", "Audit trail")
    browser.fill("Actor", ADMIN)
    browser.click("Apply filters")
    for event in ("group.created", "member.added", "role.created", "role.updated"):
        browser.wait_text(event, "#audit-list")
    browser.fill("Event", "member.*")
    browser.click("Apply filters")
    browser.wait(lambda: "role.created" not in browser.text("#audit-list"))
    assert "member.added" in browser.text("#audit-list")
    assert browser.unlabelled() == []
    browser.shot("audit")


@pytest.mark.usefixtures("admin")
def test_webhooks_and_their_deliveries(browser, accounts):
    browser.screen("webhooks", "Webhooks")
    browser.fill("URL", f"http://127.0.0.1:{free_port()}/hook")
    browser.fill("Events", "user.*")
    browser.click("Add webhook")
    browser.wait_text("shown only now")
    secret = browser.text("code.secret")
    assert secret.startswith("whsec_")
    browser.shot("webhook-secret")
    browser.click("Done")
    browser.wait_text("/hook")
    assert secret not in browser.text("#screen")
    browser.shot("webhooks")
    browser.click("Deliveries")
    browser.wait_text("Deliveries to")
    assert browser.unlabelled() == []


@pytest.mark.usefixtures("admin")
def test_a_webhook_made_in_the_console_delivers_replays_and_is_deleted(browser, server):
    with Receiver() as receiver:
        url = receiver.url("/console-hook")
        browser.screen("webhooks", "Webhooks")
        browser.fill("URL", url)
        browser.fill("Events", "group.created")
        browser.fill("Description", "Made by the browser test", "#webhook-create")
        browser.click("Add webhook")
        browser.wait_text("shown only now")
        secret = browser.text("code.secret")
        browser.click("Done")
        browser.wait_text(url)

        # An event it subscribes to: a group made through the API.
        status, _, made = server.request("POST", "/v1/private/groups", {"name": "Hooked crew"},
                                         headers=auth(server, ALICE))
        assert status == 201, made
        [first] = receiver.wait_for(lambda seen: len(seen) >= 1, timeout=15)
        assert first.json["event"] == "group.created" and first.json["data"]["target_uuid"] == made["uuid"], first.json
        t, v1 = (part.split("=", 1)[1] for part in first.headers["Locky-Signature"].split(","))
        assert hmac.compare_digest(v1, hmac.new(secret.encode(), f"{t}.".encode() + first.body,
                                                hashlib.sha256).hexdigest())  # the secret the console showed

        browser.click(f"Deliveries to {url}")
        browser.wait_text(f"Deliveries to {url}")

        def shown(count: int) -> bool:
            if len([r for r in rows(browser) if "succeeded" in r]) == count:
                return True
            time.sleep(0.3)
            browser.rerender()  # the sender marks it after the receiver's answer
            return False

        browser.wait(lambda: shown(1), timeout=15)
        browser.click("Replay")
        browser.wait_text("The delivery is queued again.", "#notice")
        seen = receiver.wait_for(lambda seen: len(seen) >= 2, timeout=15)
        assert seen[1].event_id == first.event_id and seen[1].json == first.json  # the same event again
        browser.wait(lambda: shown(2), timeout=15)
        assert all("group.created" in r for r in rows(browser))
        assert browser.unlabelled() == []

        browser.click("← All webhooks")
        browser.click(f"Delete the webhook to {url}")
        browser.click("Yes")
        browser.wait_text("The webhook is deleted.", "#notice")
        browser.wait(lambda: url not in browser.text("#screen") and "/hook" in browser.text("#screen"))  # drawn again
        _, _, hooks = server.request("GET", "/v1/internal/webhooks", headers=auth(server, ADMIN))
        assert url not in [hook["url"] for hook in hooks["webhooks"]]


@pytest.mark.usefixtures("admin")
def test_the_admin_rotates_the_signing_key_and_sees_the_new_one_listed(browser, server):
    browser.screen("keys", "Signing keys")
    browser.wait_text("active")
    before = rows(browser)
    browser.click("Rotate signing key")
    browser.click("Yes")
    browser.wait_text("A new key is active", "#notice")
    kid = browser.text("#notice").split("A new key is active: ", 1)[1].rstrip(".")
    browser.wait(lambda: any(kid in r for r in rows(browser)))
    listed = rows(browser)
    active = [r for r in listed if r.endswith("active")]
    assert any(kid in r for r in active), listed  # the new key signs
    # every family (the configured algorithm's and RS256's for ID tokens) rotated: one active each
    assert len(active) == sum(r.endswith("active") for r in before), listed
    assert not any(kid in r for r in before)
    assert sum(r.endswith("retired") for r in listed) == len(before), listed
    _, _, jwks = server.request("GET", "/.well-known/jwks.json")
    assert kid in [key["kid"] for key in jwks["keys"]]
    browser.shot("keys")


@pytest.mark.usefixtures("admin")
def test_the_admin_disables_a_user(browser, server, accounts):
    browser.screen("users", "Users")
    browser.fill("Email", BOB, "#user-search")
    browser.click("Search")
    browser.wait(lambda: len(browser.driver.find_elements(By.CSS_SELECTOR, "#users-list tbody tr")) == 1)
    browser.click(f"Disable {BOB}")
    browser.wait_text(f"{BOB} is disabled.", "#notice")
    browser.wait_text("disabled", "#users-list")
    status, body = login(server, BOB)
    assert status == 403 and body["title"] == "Account disabled", body
    browser.click(f"Details of {BOB}")
    browser.wait_text("Sign-ins (last 30 days)")
    browser.shot("user")


@pytest.mark.usefixtures("admin")
def test_the_admin_deletes_a_user(browser, server):
    register(server, DAVE)
    browser.screen("users", "Users")
    browser.fill("Email", DAVE, "#user-search")
    browser.click("Search")
    browser.wait(lambda: len(rows(browser, "#users-list tbody tr")) == 1 and DAVE in browser.text("#users-list"))
    browser.click(f"Delete {DAVE}")
    assert f"Delete {DAVE}?" in browser.text("#users-list")
    browser.click("Cancel")  # asked again, and nothing happens on Cancel
    browser.wait(lambda: browser.driver.switch_to.active_element.get_attribute("aria-label") == f"Delete {DAVE}")
    assert login(server, DAVE)[0] == 200
    browser.click(f"Delete {DAVE}")
    browser.click("Yes")
    browser.wait_text(f"{DAVE} is deleted.", "#notice")
    browser.wait(lambda: rows(browser, "#users-list tbody tr") == ["Nothing here."])
    status, body = login(server, DAVE)
    assert status == 401, body
    browser.click("Clear")
    browser.wait_text(ALICE, "#users-list")
    assert DAVE not in browser.text("#users-list")


@pytest.mark.usefixtures("admin")
def test_an_expired_access_token_is_refreshed_and_the_admin_stays_signed_in(browser, server):
    browser.screen("users", "Users")
    old = browser.held()
    expired_at = claims(old["access"])["exp"] + LEEWAY + 0.5
    assert claims(old["access"])["exp"] - claims(old["access"])["iat"] == ACCESS_TTL
    time.sleep(max(0.0, expired_at - time.time()))
    assert server.request("GET", "/v1/internal/users/me",
                          headers={"Authorization": f"Bearer {old['access']}"})[0] == 401  # expired for real

    # The next screen's call gets a 401, trades the refresh token and goes on.
    browser.screen("groups", "Groups")
    browser.wait_text(GROUP, "#groups-list")
    new = browser.held()
    assert new["access"] != old["access"] and new["refresh"] != old["refresh"]
    assert browser.text("#who") == ADMIN and not browser.notice()
    # (Presenting the old refresh token now would be reuse, and end this whole session.)

    # Several calls at once with a dead access token trade the refresh token once (a
    # second trade of a single-use token would end the whole session).
    browser.driver.execute_script(
        "const t = JSON.parse(sessionStorage.getItem('locky.console.tokens'));"
        "t.access = 'expired.' + t.access.split('.')[1] + '.x';"
        "sessionStorage.setItem('locky.console.tokens', JSON.stringify(t));")
    answers = browser.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/console/api.js').then(({ api }) => Promise.all([
          api('GET', '/v1/internal/users/me'), api('GET', '/v1/internal/groups'),
          api('GET', '/v1/internal/roles'), api('GET', '/v1/internal/keys'),
        ])).then((all) => done(all.map((a) => Object.keys(a).sort().join(','))), (e) => done('failed: ' + e.message));""")
    assert isinstance(answers, list) and len(answers) == 4, answers
    last = browser.held()
    assert last["refresh"] != new["refresh"]
    assert server.request("GET", "/v1/internal/users/me", headers={"Authorization": f"Bearer {last['access']}"})[0] == 200
    _, _, events = server.request("GET", "/v1/internal/audit?event=token.reuse_detected", headers=auth(server, ADMIN))
    assert events["events"] == []
    browser.screen("users", "Users")  # still signed in, in the same session
    browser.wait_text(ALICE, "#users-list")
    assert browser.held()["refresh"] == last["refresh"]
    # The four refused calls are in the browser's log as failed loads (the browser's
    # doing); no error of the console's own is.
    browser.drain()
    refused = [e for e in browser.console if e["source"] == "network" and "status of 401" in e["message"]]
    assert 1 <= len(refused) <= 4, browser.console
    browser.console = [e for e in browser.console if e not in refused]


FAKE_503 = ("window.fetch = () => Promise.resolve(new Response(JSON.stringify("
            "{title: 'Service Unavailable', description: 'Storage is not answering.'}),"
            " {status: 503, headers: {'Content-Type': 'application/json'}}));")
FAKE_502_HTML = ("window.fetch = () => Promise.resolve(new Response("
                 "'<html><body><h1>502 Bad Gateway</h1></body></html>', {status: 502, headers: {'Content-Type': 'text/html'}}));")
# Every call is refused as unauthenticated and the refresh finds the service down: an
# outage must not sign anyone out.
FAKE_401_THEN_503 = ("window.fetch = (url) => Promise.resolve(String(url).includes('/users/refresh')"
                     " ? new Response('{\"status\": \"unavailable\"}', {status: 503})"
                     " : new Response('{\"title\": \"Unauthorized\"}', {status: 401}));")


@pytest.mark.usefixtures("admin")
def test_an_outage_or_a_network_failure_says_so_in_words(browser):
    driver = browser.driver
    browser.screen("users", "Users")
    browser.wait_text(ALICE, "#users-list")
    held = browser.held()
    driver.execute_script("window.realFetch = window.realFetch || window.fetch;")
    try:
        driver.execute_script(FAKE_503)
        driver.find_element(By.ID, "nav-roles").click()
        browser.wait_text("Service Unavailable: Storage is not answering.")
        driver.execute_script(FAKE_502_HTML)
        driver.find_element(By.ID, "nav-groups").click()
        browser.wait_text("The Locky service is unavailable right now (502); try again in a moment.", "#notice")
        assert "<" not in browser.text("main")
        driver.execute_script(FAKE_401_THEN_503)
        driver.find_element(By.ID, "nav-keys").click()
        browser.wait_text("The Locky service is unavailable right now (503)")
        assert browser.held() == held and browser.text("#who") == ADMIN  # still signed in
    finally:
        driver.execute_script("window.fetch = window.realFetch;")

    # The network fails (the browser blocks the API): an action says so in words.
    browser.screen("users", "Users")
    browser.wait_text(ALICE, "#users-list")
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/v1/*"]})
    try:
        browser.click(f"Disable {ALICE}")  # a button's action
        browser.wait_text("The Locky service could not be reached; check the connection and try again.", "#notice")
        driver.find_element(By.ID, "nav-roles").click()  # a screen
        browser.wait(lambda: driver.title.startswith("Roles"))
        browser.wait_text("could not be reached", "#screen .notice.error")
        # The page loaded again while the service cannot be reached: a screen that says so.
        driver.refresh()
        browser.find("#retry")
        assert "could not be reached" in browser.text("main")
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    driver.find_element(By.ID, "retry").send_keys(Keys.ENTER)
    browser.wait(lambda: browser.driver.find_elements(By.ID, "who") and browser.text("#who") == ADMIN)
    browser.wait_text(ROLE)  # back on the screen it was showing
    assert driver.title.startswith("Roles") and not browser.notice()

    browser.drain()
    # (Some browsers log the blocked loads; those are the test's doing.)
    browser.console = [e for e in browser.console if "ERR_BLOCKED_BY_CLIENT" not in e["message"]]
    assert not [e for e in browser.console if "Uncaught" in e["message"] or e["source"] == "javascript"], \
        browser.console


# Each screen at phone width: nothing makes the page itself scroll sideways, not even
# records with long unbroken names (a heading or a sentence wraps; a table scrolls in its box).
PHONE_SCREENS = ["users", "user", "groups", "group", "roles", "access", "audit", "webhooks", "deliveries", "keys"]
LONG_EMAIL = "a" * 60 + "@example.com"
LONG_GROUP = "Crew" + "_abcdefghij" * 12
LONG_URL = f"http://127.0.0.1:{free_port()}/" + "deliveries/" * 12 + "hook"
LONG_PART = "r" + "x" * 63


@pytest.fixture(scope="module")
def long_records(server):
    status, _, user = server.request("POST", "/v1/public/users/register",
                                     {"name": "N" * 120, "email": LONG_EMAIL, "password": PASSWORD})
    assert status == 201, user
    headers = auth(server, ADMIN)
    status, _, group = server.request("POST", "/v1/private/groups", {"name": LONG_GROUP}, headers=headers)
    assert status == 201, group
    status, _, member = server.request("POST", "/v1/private/members", {"group_uuid": group["uuid"],
                                       "user_uuid": user["uuid"], "role": "viewer"}, headers=headers)
    assert status == 201, member
    status, _, hook = server.request("POST", "/v1/private/webhooks", {"url": LONG_URL, "events": ["group.*"]},
                                     headers=headers)
    assert status == 201, hook
    # A delivery to show (to a closed port: it stays pending).
    assert server.request("PUT", f"/v1/private/groups/{group['id']}", {"description": "x"}, headers=headers)[0] == 200


@pytest.mark.parametrize("name", PHONE_SCREENS)
def test_every_screen_fits_a_phone(browser, long_records, name):
    driver = browser.driver
    signed_in_as(browser, ADMIN)
    driver.set_window_size(390, 844)
    try:
        base = {"user": "users", "group": "groups", "deliveries": "webhooks"}.get(name, name)
        driver.execute_script("location.hash = '#/'")  # leave, so the screen is drawn afresh
        browser.wait(lambda: driver.title.startswith("Users"))
        driver.execute_script(f"location.hash = '#/{base}'")
        browser.wait(lambda: not driver.find_elements(By.CSS_SELECTOR, "#screen[aria-busy]")
                     and driver.find_elements(By.CSS_SELECTOR, f"a[aria-current=page][href='#/{base}']"))
        if name == "user":
            browser.click(f"Details of {LONG_EMAIL}")
            browser.wait_text("Sign-ins (last 30 days)")
        elif name == "group":
            browser.click(LONG_GROUP)
            browser.find("#member-add")
        elif name == "deliveries":
            browser.click(f"Deliveries to {LONG_URL}")
            browser.wait_text("group.updated")
        elif name == "access":
            browser.fill("User (email or uuid)", LONG_EMAIL)
            browser.fill("Resource", LONG_PART)
            browser.fill("Action", LONG_PART)
            Select(browser.field("In group")).select_by_visible_text(LONG_GROUP)
            browser.click("Check access")
            browser.wait_text("Roles the user held", "#access-result")
        browser.wait(lambda: not driver.find_elements(By.CSS_SELECTOR, "#screen[aria-busy]"))
        assert browser.unlabelled() == []
        # The page itself never scrolls sideways (a wide table scrolls in its own box); the
        # visible width leaves out the vertical scroll bar.
        width = driver.execute_script(
            "return [document.documentElement.scrollWidth, document.body.scrollWidth,"
            " document.documentElement.clientWidth, window.innerWidth]")
        browser.shot(f"phone-{name}")
        assert max(width[:2]) <= width[2] <= width[3] <= 390, (name, width)
    finally:
        driver.set_window_size(1280, 900)


def test_the_admin_signs_out_and_the_session_ends(browser, server):
    signed_in_as(browser, ADMIN)
    held = browser.held()
    browser.driver.find_element(By.ID, "signout").click()
    browser.find("form#signin")
    browser.wait_text("You are signed out.", "main")
    assert browser.held() is None
    status, _, _ = server.request("GET", "/v1/internal/users/me", headers={"Authorization": f"Bearer {held['access']}"})
    assert status == 401
    # The refresh token is revoked with it (the access token may have expired by itself).
    status, _, _ = server.request("POST", "/v1/public/users/refresh", {"refresh_token": held["refresh"]})
    assert status == 401


def test_the_real_server_serves_the_console_and_no_other_file(server):
    import http.client

    def get(path: str) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=10)
        connection.putrequest("GET", path, skip_accept_encoding=True)  # the path goes out as written
        connection.endheaders()
        answer = connection.getresponse()
        try:
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
        finally:
            connection.close()

    for path in ("/console/", "/console"):
        status, headers, body = get(path)
        assert status == 200 and b'src="/console/app.js"' in body
        assert headers["content-security-policy"].startswith("default-src 'self'")
    for path in ("/console/../../app.py", "/console/%2e%2e/resources/console.py", "/console/..%2f..%2fapp.py",
                 "/console/%252e%252e%252fapp.py", "/console/..\\app.py", "/console/../../../../etc/passwd"):
        status, headers, body = get(path)
        assert status in (400, 404), (path, status)
        assert b"import " not in body and b"root:" not in body, path
        if status == 404:
            assert json.loads(body)["title"], path


# -- a non-admin -------------------------------------------------------------------------------


def test_a_non_admin_signs_in_with_totp_and_sees_only_what_the_policy_allows(browser, accounts):
    sign_in(browser, CAROL)
    browser.find("form#mfa")
    browser.shot("sign-in-totp")
    # The code of the next 30 s step: the one of this step was spent confirming TOTP.
    browser.fill("Authentication code", accounts["totp"].at(time.time() + 30))
    browser.click("Verify", "main")
    browser.wait(lambda: browser.driver.find_elements(By.ID, "who") and browser.text("#who") == CAROL)
    assert nav(browser) == ["Users", "Groups", "Roles", "Access checker", "Signing keys"]
    browser.wait_text(BOB)
    # Every user may read the users, but neither disable nor delete them.
    assert not browser.driver.find_elements(By.CSS_SELECTOR, "#users-list button")
    browser.shot("non-admin-users")

    browser.screen("roles", "Roles")
    browser.wait_text(ROLE)
    assert not browser.driver.find_elements(By.ID, "role-create")
    assert not browser.driver.find_elements(By.CSS_SELECTOR, "#screen button")

    browser.screen("keys", "Signing keys")
    assert not browser.driver.find_elements(By.ID, "rotate")

    browser.screen("groups", "Groups")
    assert browser.driver.find_elements(By.ID, "group-create")  # every user may create groups
    browser.click(GROUP)
    browser.wait_text(ALICE)
    assert not browser.driver.find_elements(By.ID, "member-add")  # not a member: no one to assign
    assert not browser.driver.find_elements(By.CSS_SELECTOR, "#screen button")
    browser.shot("non-admin-group")

    # Typed addresses of the admin screens lead back to what Carol may see.
    browser.driver.get(browser.base + "/console/#/audit")
    browser.wait(lambda: browser.driver.title.startswith("Users"))
    assert "Audit" not in browser.text("body")


def test_a_group_maintainer_may_assign_only_the_roles_the_policy_gives_them(browser):
    browser.driver.find_element(By.ID, "signout").click()
    sign_in(browser, ALICE)
    browser.wait(lambda: browser.driver.find_elements(By.ID, "who") and browser.text("#who") == ALICE)
    browser.screen("groups", "Groups")
    browser.click(GROUP)
    browser.find("#member-add")
    offered = [option.text for option in Select(browser.field("Role")).options]
    assert sorted(offered) == sorted(["maintainer", "member", "viewer", ROLE]), offered  # never owner
    rows = {r.find_element(By.CSS_SELECTOR, "td").text: r.text
            for r in browser.driver.find_elements(By.CSS_SELECTOR, "#screen tbody tr")}
    assert "Leave" in rows[ALICE]  # her own membership
    assert "Remove" not in rows[ADMIN]  # the owner's: removing it needs assign:owner
    browser.shot("maintainer-group")


#: Chrome logs every 4xx answer as a "network" error. A 401 from the session check or
#: the refresh is the console learning that a session has ended (signed out elsewhere,
#: user disabled or deleted by an earlier test): it then shows the sign-in screen, which
#: the flows above check. Whether such a request is in flight when a test ends depends
#: on timing, so these two are not problems; every other entry is.
SESSION_ENDED = ("/v1/internal/users/me - ", "/v1/public/users/refresh - ")


def _session_ended(entry: dict) -> bool:
    message = entry.get("message", "")
    return (entry.get("source") == "network" and "status of 401" in message
            and any(path in message for path in SESSION_ENDED))


def test_no_console_errors_and_no_request_leaves_the_server(browser):
    browser.drain()
    problems = [entry for entry in browser.console
                if entry["level"] in ("SEVERE", "WARNING") and not _session_ended(entry)]
    assert problems == [], json.dumps(problems, indent=1)
    assert browser.requests, "the performance log recorded no request"
    outside = [url for url in browser.requests
               if not url.startswith(browser.base + "/") and not url.startswith("data:")]
    assert outside == []
    assert any(url.startswith(browser.base + "/console/app.js") for url in browser.requests)
    assert any("/v1/internal/authz/check" in url for url in browser.requests)
