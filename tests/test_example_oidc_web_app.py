"""examples/oidc-web-app: a web application that signs its users in with Locky through
Authlib's OpenID Connect client, run as a separate process against a real ``locky
serve`` on 127.0.0.1. A user (a ``requests`` session standing in for the browser, posting
the pages' forms with their hidden fields) opens the app, is sent to Locky's sign-in
page, signs in, allows the app on the consent page, comes back signed in and sees their
name, email and groups (from the ID token the app validated against Locky's JWKS); signs
out through Locky's end-session endpoint and is back at the app, and Locky asks for the
password again on the next sign-in. A forged callback (a code without the state this
browser was given) signs no one in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from support.server import free_port, locky_server, stop

pytestmark = [pytest.mark.server, pytest.mark.slow]

requests = pytest.importorskip("requests", reason="the example's client needs requests (pip install '.[test]')")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "oidc-web-app" / "app.py"
ADMIN, ADA, PASSWORD = "admin@example.com", "ada@example.com", "example-app-password-1"


class Forms(HTMLParser):
    """Every form of a page: action, method, hidden inputs, the names of fields and buttons."""

    def __init__(self, html: str):
        super().__init__()
        self.forms: list[dict] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get").lower(),
                               "hidden": {}, "names": set()})
        elif tag in ("input", "button", "select", "textarea") and self.forms and a.get("name"):
            self.forms[-1]["names"].add(a["name"])
            if a.get("type", "").lower() == "hidden":
                self.forms[-1]["hidden"][a["name"]] = a.get("value", "")


def submit(browser, answer, **values):
    """Post the page's form that has every field of ``values`` (hidden fields come along)."""
    form = next((f for f in Forms(answer.text).forms if f["method"] == "post" and set(values) <= f["names"]), None)
    assert form is not None, f"no form with {sorted(values)} on {answer.url} ({answer.status_code}): {answer.text[:500]}"
    return browser.post(urllib.parse.urljoin(answer.url, form["action"] or answer.url),
                        data={**form["hidden"], **values}, timeout=30)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("oidc-web-app")
    port, app_port = free_port(), free_port()
    app_url = f"http://127.0.0.1:{app_port}"
    env = {"LOCKY_DATABASE_URL": f"sqlite:///{workdir / 'locky.sqlite'}", "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_PUBLIC_URL": f"http://127.0.0.1:{port}", "LOCKY_ADMIN_EMAILS": ADMIN}
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("LOCKY_")]:
            mp.delenv(key)
        with locky_server(workdir, env=env, workers=2, port=port) as server:
            admin = server.sign_up(ADMIN, PASSWORD, verify=True)
            ada = server.sign_up(ADA, PASSWORD, verify=True)
            status, _, group = server.request("POST", "/v1/private/groups", {"name": "Reporting"}, headers=ada)
            assert status == 201, group
            status, _, client = server.request("POST", "/v1/private/oauth/clients", {
                "name": "Reports web app", "type": "confidential", "redirect_uris": [f"{app_url}/callback"],
                "post_logout_redirect_uris": [f"{app_url}/"]}, headers=admin)
            assert status == 201, client
            app_env = {**os.environ, "LOCKY_URL": server.url, "OIDC_CLIENT_ID": client["client_id"],
                       "OIDC_CLIENT_SECRET": client["client_secret"], "APP_URL": app_url}
            log = (workdir / "app.log").open("wb")
            app = subprocess.Popen([sys.executable, str(EXAMPLE)], env=app_env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
            try:
                _wait(app_url, app, workdir / "app.log")
                yield {"server": server, "app_url": app_url, "app_log": workdir / "app.log"}
            finally:
                stop(app)
                log.close()


def _wait(url: str, process: subprocess.Popen, log: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the example exited with {process.returncode}:\n{log.read_text()}")
        try:
            requests.get(url + "/", timeout=2)
            return
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the example did not answer in {timeout}s:\n{log.read_text()}") from None
            time.sleep(0.1)


def test_a_user_signs_in_sees_their_groups_and_signs_out(setup):
    app_url, locky_url = setup["app_url"], setup["server"].url
    browser = requests.Session()
    browser.trust_env = False  # straight to 127.0.0.1, never a proxy from the environment

    home = browser.get(app_url + "/", timeout=30)
    assert "not signed in" in home.text

    sign_in = browser.get(app_url + "/login", timeout=30)
    assert sign_in.url.startswith(locky_url + "/"), sign_in.url  # Locky's own page, not the app's
    assert sign_in.status_code == 200
    consent = submit(browser, sign_in, email=ADA, password=PASSWORD)
    assert "Reports web app" in consent.text, consent.text[:500]
    signed_in = submit(browser, consent, decision="allow")
    assert signed_in.url == app_url + "/", (signed_in.url, setup["app_log"].read_text()[-2000:])
    assert '<strong id="name">ada</strong>' in signed_in.text, signed_in.text
    assert f'<span id="email">{ADA}</span>' in signed_in.text
    assert "<li>Reporting</li>" in signed_in.text

    signed_out = submit(browser, signed_in, **{})  # the page's only post form: Sign out
    assert signed_out.url.startswith(app_url + "/"), signed_out.url
    assert "not signed in" in signed_out.text
    # Locky's sign-in ended too: the next sign-in asks for the password again.
    again = browser.get(app_url + "/login", timeout=30)
    assert again.url.startswith(locky_url + "/") and "password" in {n for f in Forms(again.text).forms for n in f["names"]}


def test_a_callback_without_this_browsers_state_signs_no_one_in(setup):
    app_url = setup["app_url"]
    browser = requests.Session()
    browser.trust_env = False
    browser.get(app_url + "/login", timeout=30, allow_redirects=False)  # a sign-in started, state kept
    forged = browser.get(app_url + "/callback", params={"code": "stolen-code", "state": "not-the-state"}, timeout=30)
    assert forged.status_code == 400
    assert "not signed in" in browser.get(app_url + "/", timeout=30).text
