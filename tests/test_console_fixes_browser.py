"""The console's fixes of issue 36 item 5, in a real headless Chromium against a real
``locky serve`` on 127.0.0.1 (a server of this module's own, so the order of the other
browser module's tour does not matter here).

Sign-in and two-step fields are one line tall; no signed-in page scrolls when its
content fits the window; the user search finds parts of addresses and names (any case),
pages through what it found and says how much it searched; a failed search or audit
filter leaves no stale results under its message; a notice lasts until the next action
or screen; the audit trail lists newest first, with an order switch, takes Since/Until
as UTC whatever the browser's zone, names the operator's command-line events, and
explains an unknown event name without pointing at the API; refusals read as sentences,
never "401 Unauthorized: …"; a non-admin sent away from ``#/audit`` is told why; a
column of actions is not shown empty; and a plain user does not see the MFA or
verification status of other accounts (docs/console.md says why).

Needs Debian's ``chromium`` and ``chromium-driver`` and ``selenium``; without them the
module skips, unless ``LOCKY_REQUIRE_BROWSER=1``, which makes it fail. Screenshots go to
``$LOCKY_SCREENSHOTS`` or a pytest temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from support import browser as chromium

pytestmark = [pytest.mark.server, pytest.mark.slow]

# The helpers of the console's main browser module (which skips, or fails under
# LOCKY_REQUIRE_BROWSER=1, without a browser: so does this one, on importing it).
from test_console_browser import PASSWORD, Browser, login, register, rows  # noqa: E402

from support.server import locky_server  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402

BOSS, DEPUTY, PAT, MIA = "boss@example.com", "deputy@example.com", "pat@example.com", "mia@example.com"
CREW = [f"crew-{n:02d}@example.org" for n in range(1, 26)]
#: Far from UTC: a console reading Since/Until in the browser's zone misses by 14 hours.
ZONE = "Pacific/Kiritimati"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("console-fixes")
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4"}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_") and k != "LOCKY_SCREENSHOTS"]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=1) as running:
            running.workdir, running.env = workdir, {**os.environ, **env}
            yield running


def operator(server, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "locky.cli.main", *args], env=server.env, cwd=server.workdir,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def accounts(server):
    users = {email: register(server, email) for email in (BOSS, DEPUTY, PAT, MIA)}
    for n, email in enumerate(CREW, 1):
        status, _, user = server.request("POST", "/v1/public/users/register",
                                         {"name": f"Crew Member {n:02d}", "email": email, "password": PASSWORD})
        assert status == 201, user
    operator(server, "grant-admin", BOSS)
    operator(server, "grant-admin", DEPUTY)
    import pyotp

    _, tokens = login(server, MIA)
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    status, _, pending = server.request("POST", "/v1/private/users/me/mfa/totp", {}, headers=headers)
    assert status == 200, pending
    status, _, body = server.request("POST", "/v1/private/users/me/mfa/totp/confirm",
                                     {"code": pyotp.TOTP(pending["secret"]).now()}, headers=headers)
    assert status == 200, body
    for email in CREW:  # a trail of more than two pages of 50
        assert login(server, email)[0] == 200
    # A failed login: an event without an actor that no operator made.
    assert login(server, PAT.replace("pat", "nobody"))[0] == 401
    return users


@pytest.fixture(scope="module")
def browser(server, accounts, tmp_path_factory):
    shots = Path(os.environ.get("LOCKY_SCREENSHOTS") or tmp_path_factory.mktemp("console-fixes-shots"))
    shots.mkdir(parents=True, exist_ok=True)
    driver = chromium.chrome()
    driver.set_window_size(1280, 900)
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ZONE})
    try:
        yield Browser(driver, server.url, shots)
    finally:
        driver.quit()


def sign_in(browser: Browser, email: str) -> None:
    """``email`` (without TOTP) signed in, from a fresh load of the console."""
    browser.driver.get(browser.base + "/console/")
    browser.driver.execute_script("sessionStorage.clear()")
    browser.driver.get(browser.base + "/console/")
    browser.find("form#signin")
    browser.fill("Email", email)
    browser.fill("Password", PASSWORD)
    browser.field("Password").send_keys(Keys.ENTER)
    browser.wait(lambda: browser.driver.find_elements(By.ID, "who") and browser.text("#who") == email)


def signed_in_as(browser: Browser, email: str) -> None:
    who = browser.driver.find_elements(By.ID, "who")
    if not (who and who[0].text == email):
        sign_in(browser, email)


def go(browser: Browser, hash_: str, title: str) -> None:
    """Draw the screen at ``hash_`` afresh (leaving it first when it is shown)."""
    driver = browser.driver
    if driver.execute_script("return location.hash") == hash_:
        driver.execute_script("location.hash = '#/'")
        browser.wait(lambda: driver.execute_script("return location.hash") != "#/")
    driver.execute_script("location.hash = arguments[0]", hash_)
    browser.wait(lambda: driver.title.startswith(title) and not driver.find_elements(By.CSS_SELECTOR, "#screen[aria-busy]")
                 and driver.find_elements(By.CSS_SELECTOR, "#screen h1[tabindex]"))


def heights(browser: Browser, css: str) -> list[float]:
    return browser.driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.getBoundingClientRect().height)", css)


def overflow(browser: Browser) -> dict[str, int]:
    return browser.driver.execute_script(
        "const d = document.documentElement;"
        "return {scrollWidth: d.scrollWidth, clientWidth: d.clientWidth, scrollHeight: d.scrollHeight,"
        " clientHeight: d.clientHeight}")


def column(browser: Browser, index: int, css: str = "#audit-list tbody tr") -> list[str]:
    return [r.find_elements(By.CSS_SELECTOR, "td")[index].text
            for r in browser.driver.find_elements(By.CSS_SELECTOR, css)]


def headings(browser: Browser, css: str = "#screen thead th") -> list[str]:
    return [th.text for th in browser.driver.find_elements(By.CSS_SELECTOR, css)]


# -- layout ----------------------------------------------------------------------------------


def test_sign_in_and_two_step_fields_are_one_line_tall(browser, accounts):
    driver = browser.driver
    driver.get(browser.base + "/console/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(browser.base + "/console/")
    browser.find("form#signin")
    assert all(20 < h < 50 for h in heights(browser, "#signin input")), heights(browser, "#signin input")
    form = driver.find_element(By.ID, "signin").rect
    assert form["height"] < 500, form  # a compact card (passkey button included), not 192 px per field
    assert overflow(browser)["scrollHeight"] <= overflow(browser)["clientHeight"]
    browser.shot("fixes-sign-in")

    browser.fill("Email", MIA)
    browser.fill("Password", PASSWORD)
    browser.field("Password").send_keys(Keys.ENTER)
    browser.find("form#mfa")
    assert all(20 < h < 50 for h in heights(browser, "#mfa input")), heights(browser, "#mfa input")
    browser.shot("fixes-two-step")
    browser.click("Start over", "main")
    browser.find("form#signin")


@pytest.mark.parametrize("size", [(1280, 900), (390, 844)])
def test_a_signed_in_page_scrolls_only_when_its_content_needs_it(browser, size):
    signed_in_as(browser, BOSS)
    browser.driver.set_window_size(*size)
    try:
        # Short screens: nothing to scroll, down or sideways (it was 11 px down on each).
        for hash_, title in (("#/keys", "Signing keys"), ("#/webhooks", "Webhooks"), ("#/access", "Access checker")):
            go(browser, hash_, title)
            seen = overflow(browser)
            assert seen["scrollWidth"] <= seen["clientWidth"], (hash_, seen)
            if size[0] > 800:  # at phone width the navigation alone may be taller than the window
                assert seen["scrollHeight"] <= seen["clientHeight"], (hash_, seen)
        # Long screens scroll down, never sideways.
        for hash_, title in (("#/users", "Users"), ("#/audit", "Audit trail"), ("#/roles", "Roles")):
            go(browser, hash_, title)
            seen = overflow(browser)
            assert seen["scrollWidth"] <= seen["clientWidth"], (hash_, seen)
        if size[0] > 800:
            go(browser, "#/keys", "Signing keys")
            browser.shot("fixes-keys")
    finally:
        browser.driver.set_window_size(1280, 900)


# -- users ---------------------------------------------------------------------------------------


def search(browser: Browser, text: str) -> None:
    """Search for ``text`` and wait for the answer (the line saying what matched)."""
    browser.driver.execute_script("const f = document.getElementById('users-found'); if (f) f.textContent = '';")
    browser.fill("Email", text, "#user-search")
    browser.click("Search")
    browser.wait(lambda: browser.text("#users-found") or browser.notice())


def test_the_user_search_finds_parts_of_addresses_and_names(browser):
    signed_in_as(browser, BOSS)
    go(browser, "#/users", "Users")
    assert "Any part of an address or a name" in browser.text("#user-search")

    search(browser, "crew-1")  # crew-10 … crew-19
    assert browser.text("#users-found").startswith("10 accounts match “crew-1”"), browser.text("#users-found")
    assert sorted(column(browser, 1, "#users-list tbody tr")) == CREW[9:19]
    browser.shot("fixes-users-search")

    search(browser, "MEMBER 07")  # a name, in another case
    assert column(browser, 1, "#users-list tbody tr") == [CREW[6]]

    search(browser, PAT)  # a whole address: exactly that account
    assert column(browser, 1, "#users-list tbody tr") == [PAT]
    assert browser.text("#users-found") == f"1 account matches “{PAT}” (every account was searched)."

    # More matches than a page: the search pages through what it found.
    search(browser, "@example.org")
    assert browser.text("#users-found").startswith("25 accounts match")
    assert len(rows(browser, "#users-list tbody tr")) == 20 and "Page 1 of 2" in browser.text("#screen .pager")
    browser.click("Next")
    browser.wait(lambda: "Page 2 of 2" in browser.text("#screen .pager"))
    assert sorted(column(browser, 1, "#users-list tbody tr")) == sorted(CREW)[20:]

    search(browser, "no-such-person")
    assert rows(browser, "#users-list tbody tr") == ["Nothing here."]
    assert browser.text("#users-found").startswith("0 accounts match")

    browser.click("Clear")  # back to every account, paged by the service
    browser.wait(lambda: BOSS in browser.text("#users-list") and not browser.text("#users-found"))


def test_a_failed_search_leaves_no_stale_results(browser):
    driver = browser.driver
    signed_in_as(browser, BOSS)
    go(browser, "#/users", "Users")
    search(browser, "crew")
    assert rows(browser, "#users-list tbody tr")
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/v1/internal/users*"]})
    try:
        browser.fill("Email", "crew-2", "#user-search")
        browser.click("Search")
        browser.wait_text("could not be reached", "#notice")
        assert driver.find_element(By.ID, "users-list").text == ""
        assert driver.find_element(By.ID, "users-found").text == ""
        assert not driver.find_elements(By.CSS_SELECTOR, "#screen .pager button")
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})

    # The audit filter too: an unknown event name, said without pointing at the API.
    go(browser, "#/audit", "Audit trail")
    browser.wait(lambda: rows(browser, "#audit-list tbody tr"))
    browser.fill("Event", "user.nosuch")
    browser.click("Apply filters")
    browser.wait_text("No event is called user.nosuch", "#notice")
    assert "GET /v1" not in browser.notice() and "see " not in browser.notice()
    assert "user.disabled" in browser.notice() and "user.*" in browser.notice()
    assert driver.find_element(By.ID, "audit-list").text == ""
    browser.shot("fixes-audit-error")


def test_a_notice_lasts_until_the_next_action_or_screen(browser):
    signed_in_as(browser, BOSS)
    go(browser, "#/users", "Users")
    search(browser, CREW[0])
    browser.click(f"Disable {CREW[0]}")
    browser.wait_text(f"{CREW[0]} is disabled.", "#notice")
    search(browser, CREW[1])  # the next action: the notice of the last one goes
    assert browser.text("#notice") == ""

    search(browser, CREW[0])
    browser.click(f"Enable {CREW[0]}")
    browser.wait_text(f"{CREW[0]} is enabled.", "#notice")
    browser.driver.find_element(By.ID, "nav-groups").click()  # another screen
    browser.wait(lambda: browser.driver.title.startswith("Groups"))
    assert browser.text("#notice") == ""
    browser.driver.back()
    browser.wait(lambda: browser.driver.title.startswith("Users"))
    assert browser.text("#notice") == ""


# -- the audit trail -----------------------------------------------------------------------------


def test_the_audit_trail_lists_newest_first_with_an_order_switch(browser, server):
    signed_in_as(browser, BOSS)
    go(browser, "#/audit", "Audit trail")
    assert "When (UTC)" in headings(browser)
    assert Select(browser.field("Order")).first_selected_option.text == "Newest first"
    browser.wait(lambda: len(rows(browser, "#audit-list tbody tr")) == 50)
    first = column(browser, 0)
    assert first == sorted(first, reverse=True)
    browser.shot("fixes-audit-newest")
    browser.click("Older")
    browser.wait(lambda: "Page 2" in browser.text("#screen .pager"))
    second = column(browser, 0)
    assert second == sorted(second, reverse=True) and second[0] <= first[-1]
    browser.click("Newer")
    browser.wait(lambda: "Page 1" in browser.text("#screen .pager"))
    assert column(browser, 0) == first

    Select(browser.field("Order")).select_by_visible_text("Oldest first")
    browser.wait(lambda: column(browser, 1)[:1] == ["user.registered"])
    oldest = column(browser, 0)
    assert oldest == sorted(oldest) and oldest[0] <= first[-1]
    assert column(browser, 3)[0].startswith("user ")
    assert "Next" in browser.text("#screen .pager")


def test_since_and_until_are_utc_whatever_the_browsers_zone(browser, server):
    signed_in_as(browser, BOSS)
    # The browser runs 14 hours ahead of UTC; the event's time is UTC on the wire and on screen.
    assert browser.driver.execute_script("return Intl.DateTimeFormat().resolvedOptions().timeZone") == ZONE
    _, tokens = login(server, BOSS)
    status, _, page = server.request("GET", "/v1/internal/audit?event=admin.granted&limit=1",
                                     headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert status == 200 and page["events"], page
    at = datetime.fromisoformat(page["events"][0]["created_at"].replace("Z", "+00:00")).astimezone(timezone.utc)
    go(browser, "#/audit", "Audit trail")
    assert browser.field("Since (UTC)") and browser.field("Until (UTC)")
    stamp = "%Y-%m-%dT%H:%M:%S"
    browser.driver.execute_script("arguments[0].value = arguments[1]; arguments[2].value = arguments[3];",
                                  browser.field("Since (UTC)"), (at - timedelta(seconds=1)).strftime(stamp),
                                  browser.field("Until (UTC)"), (at + timedelta(seconds=2)).strftime(stamp))
    browser.fill("Event", "admin.*")
    browser.click("Apply filters")
    browser.wait(lambda: "admin.granted" in browser.text("#audit-list"))
    # As shown: the same UTC time the API gave, to the second.
    assert column(browser, 0)[-1] == at.strftime("%Y-%m-%d %H:%M:%SZ")


def test_operator_commands_and_anonymous_events_are_named(browser, accounts):
    signed_in_as(browser, BOSS)
    go(browser, "#/audit", "Audit trail")
    browser.fill("Event", "admin.granted")
    browser.click("Apply filters")
    browser.wait(lambda: len(rows(browser, "#audit-list tbody tr")) == 2 and "admin.granted" in browser.text("#audit-list"))
    assert column(browser, 2) == ["operator (command line)"] * 2
    browser.shot("fixes-audit-operator")
    browser.fill("Event", "login.failed")
    browser.click("Apply filters")
    browser.wait(lambda: "login.failed" in browser.text("#audit-list"))
    assert set(column(browser, 2)) == {"not signed in"}
    assert "anonymous" not in browser.text("#audit-list")


# -- refusals in words -----------------------------------------------------------------------------


def test_refusals_read_as_sentences(browser, server):
    driver = browser.driver
    driver.get(browser.base + "/console/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(browser.base + "/console/")
    browser.find("form#signin")
    browser.fill("Email", PAT)
    browser.fill("Password", "not-the-password-1")
    browser.click("Sign in", "main")
    browser.wait_text("Invalid email or password.", "#signin-error")
    assert "401" not in browser.text("#signin-error") and "Unauthorized" not in browser.text("#signin-error")
    browser.shot("fixes-sign-in-refused")

    # An admin loses the grant while the page is open: the next change is a real 403.
    sign_in(browser, DEPUTY)
    go(browser, "#/users", "Users")
    search(browser, CREW[2])
    operator(server, "revoke-admin", DEPUTY)
    try:
        browser.click(f"Disable {CREW[2]}")
        browser.wait(lambda: browser.text("#notice"))
        said = browser.text("#notice")
        assert "403" not in said and "Forbidden" not in said and "policy does not allow" in said, said
    finally:
        operator(server, "grant-admin", DEPUTY)


# -- a plain user ---------------------------------------------------------------------------------


def test_a_non_admin_sent_away_from_the_audit_trail_is_told_why(browser):
    sign_in(browser, PAT)
    browser.driver.get(browser.base + "/console/#/audit")
    browser.wait(lambda: browser.driver.title.startswith("Users") and browser.text("#notice"))
    assert "may not open the audit trail" in browser.text("#notice")
    assert browser.driver.execute_script("return location.hash") == "#/users"
    browser.shot("fixes-non-admin-audit")
    # The next screen leaves that notice behind.
    browser.driver.find_element(By.ID, "nav-groups").click()
    browser.wait(lambda: browser.driver.title.startswith("Groups"))
    assert browser.text("#notice") == ""
    browser.driver.execute_script("location.hash = '#/nowhere'")
    browser.wait(lambda: "no screen at #/nowhere" in browser.text("#notice"))


def test_a_plain_user_sees_no_other_accounts_second_factor_or_verification(browser):
    signed_in_as(browser, PAT)
    go(browser, "#/users", "Users")
    search(browser, "example.com")
    table = {r.find_elements(By.CSS_SELECTOR, "td")[1].text: " ".join(r.find_elements(By.CSS_SELECTOR, "td")[2].text.split())
             for r in browser.driver.find_elements(By.CSS_SELECTOR, "#users-list tbody tr")}
    assert table[MIA] == "active"  # no "MFA", no "unverified"
    assert table[PAT] == "active unverified you"  # one's own account says it all
    browser.shot("fixes-non-admin-users")
    browser.click(f"Details of {MIA}")
    browser.wait_text("Registered")
    assert "MFA" not in browser.text("#screen dl") and "verified" not in browser.text("#screen dl")

    # The admin sees them.
    sign_in(browser, BOSS)
    go(browser, "#/users", "Users")
    search(browser, MIA)
    assert "MFA" in browser.text("#users-list") and "unverified" in browser.text("#users-list")


def test_no_empty_actions_column_for_a_plain_user(browser, server):
    signed_in_as(browser, BOSS)
    _, tokens = login(server, BOSS)
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert server.request("POST", "/v1/private/roles", {"name": "reader", "permissions": []}, headers=headers)[0] == 201
    status, _, group = server.request("POST", "/v1/private/groups", {"name": "Boss crew"}, headers=headers)
    assert status == 201, group

    go(browser, "#/roles", "Roles")
    assert headings(browser)[-1] == "Actions"  # the admin may edit the custom role
    sign_in(browser, PAT)
    go(browser, "#/roles", "Roles")
    browser.wait_text("reader")
    assert "Actions" not in headings(browser)
    go(browser, f"#/groups/{group['id']}", "Groups")
    browser.wait_text(BOSS)
    assert "Actions" not in headings(browser)
    browser.shot("fixes-non-admin-roles")


def test_no_console_errors_and_no_request_leaves_the_server(browser):
    browser.drain()
    # Chrome logs each 4xx answer; those the tests caused on purpose (a wrong password, a
    # refused change, an unknown event name, the blocked requests) are not problems.
    expected = ("status of 401", "status of 403", "status of 400")
    problems = [e for e in browser.console if e["level"] in ("SEVERE", "WARNING")
                and "ERR_BLOCKED_BY_CLIENT" not in e["message"]
                and not (e.get("source") == "network" and any(x in e["message"] for x in expected))]
    assert problems == [], problems
    assert [url for url in browser.requests if not url.startswith(browser.base + "/") and not url.startswith("data:")] == []
