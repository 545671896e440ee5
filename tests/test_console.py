"""The admin console's files (docs/http/console.md) through Falcon's test client: ``/console/``
answers the page under a strict Content-Security-Policy and the other security headers;
each shipped file has its content type and cache header; a name that is not a shipped
file, traversal included (plain or percent-encoded), is the contract's JSON 404; the page
and its modules load nothing from another origin, carry no inline script, style or event
handler attribute, and never write markup from strings (no innerHTML). The browser
suite, ``tests/test_console_browser.py``, drives the console itself."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from locky.resources.console import CONTENT_SECURITY_POLICY

FILES = Path(__file__).resolve().parent.parent / "locky" / "console"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
MODULES = sorted(path.name for path in FILES.glob("*.js"))


def headers(result) -> dict[str, str]:
    return {name.lower(): value for name, value in result.headers.items()}


def test_the_policy_is_exactly_the_strict_one():
    assert CONTENT_SECURITY_POLICY == CSP
    assert "unsafe" not in CSP


@pytest.mark.parametrize("path", ["/console/", "/console", "/console/index.html"])
def test_the_page_is_served_with_the_security_headers(locky_client, path):
    result = locky_client.simulate_get(path)
    assert result.status_code == 200, result.text
    got = headers(result)
    assert got["content-type"] == "text/html; charset=utf-8"
    assert got["content-security-policy"] == CSP
    assert got["x-frame-options"] == "DENY"
    assert got["x-content-type-options"] == "nosniff"
    assert got["referrer-policy"] == "no-referrer"
    assert got["cache-control"] == "no-store"
    assert "<title>Locky console</title>" in result.text


@pytest.mark.parametrize(("name", "content_type"), [
    ("app.js", "text/javascript; charset=utf-8"),
    ("api.js", "text/javascript; charset=utf-8"),
    ("console.css", "text/css; charset=utf-8"),
    ("favicon.svg", "image/svg+xml"),
])
def test_assets_have_their_content_type_and_are_revalidated(locky_client, name, content_type):
    result = locky_client.simulate_get(f"/console/{name}")
    assert result.status_code == 200
    got = headers(result)
    assert got["content-type"] == content_type
    assert got["content-security-policy"] == CSP
    assert got["x-content-type-options"] == "nosniff"
    assert got["cache-control"] == "no-cache"
    assert result.content == (FILES / name).read_bytes()
    again = locky_client.simulate_get(f"/console/{name}", headers={"If-None-Match": got["etag"]})
    assert again.status_code == 304 and not again.content


def test_every_module_is_served(locky_client):
    assert "app.js" in MODULES and len(MODULES) >= 5
    for name in MODULES:
        assert locky_client.simulate_get(f"/console/{name}").status_code == 200, name


def test_the_console_needs_no_token_and_is_not_an_api_operation(locky_client):
    assert locky_client.simulate_get("/console/app.js", headers={"Authorization": "Bearer nonsense"}).status_code == 200
    doc = locky_client.simulate_get("/swagger/doc.json").json
    assert not any("console" in path for path in doc["paths"])


@pytest.mark.parametrize("path", [
    "/console/nope.js", "/console/missing.html", "/console/.hidden", "/console/__init__.py",
    "/console/..", "/console/%2e%2e", "/console/..%2fapp.py", "/console/..%2F..%2Fapp.py",
    "/console/%2e%2e%2f%2e%2e%2fapp.py", "/console/..%5capp.py", "/console/....//app.py",
    "/console/../resources/console.py", "/console/%252e%252e%252fapp.py", "/console/app.js%00",
    "/console/static/../app.js", "/console/APP.JS",
])
def test_anything_else_is_a_json_404(locky_client, path):
    result = locky_client.simulate_get(path)
    assert result.status_code == 404, (path, result.status_code)
    body = result.json
    assert isinstance(body, dict) and body.get("title")
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in body.items())
    assert "import" not in result.text


def test_traversal_over_a_raw_path_never_reads_a_file(locky_client):
    # The test client does not normalise: the router sees these paths as written.
    for raw in ("/console/../app.py", "/console/./app.js/..", "/console//etc/passwd"):
        result = locky_client.simulate_get(raw)
        assert result.status_code in (404, 301, 308) or result.content == (FILES / "index.html").read_bytes(), raw
        assert b"import " not in result.content and b"root:" not in result.content


def test_other_methods_are_refused(locky_client):
    assert locky_client.simulate_post("/console/", json={}).status_code == 405
    assert locky_client.simulate_delete("/console/app.js").status_code == 405


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if self.tags and self.tags[-1][0] in ("script", "style") and data.strip():
            self.inline_script = True


def test_the_page_holds_no_inline_code_and_no_outside_reference():
    html = (FILES / "index.html").read_text()
    page = Page()
    page.feed(html)
    assert not page.inline_script
    assert not any(tag == "style" for tag, _ in page.tags)
    for tag, attrs in page.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert "style" not in attrs, tag
        for name in ("src", "href", "action", "srcset"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith("/console/"), (tag, name, value)
    assert not re.search(r"(?i)(https?:)?//[a-z0-9]", html)
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "/console/app.js"}]


@pytest.mark.parametrize("name", MODULES + ["console.css"])
def test_the_code_loads_nothing_from_elsewhere_and_writes_no_markup(name):
    text = (FILES / name).read_text()
    assert not re.search(r"(?i)https?://(?!example\.com)", text), name
    for unsafe in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                   "setAttribute(\"style\"", ".cookie", "localStorage", "@import"):
        assert unsafe not in text, (name, unsafe)
    for imported in re.findall(r'from "([^"]+)"', text):
        assert re.fullmatch(r"\./[a-z]+\.js", imported), imported
        assert (FILES / imported[2:]).is_file(), imported


def test_only_the_api_module_talks_to_the_service_and_nothing_pops_up():
    # One place sends requests (and turns a network failure into a sentence); no
    # browser dialog stands in for the console's own questions and notices.
    for name in MODULES:
        text = (FILES / name).read_text()
        assert ("fetch(" in text) == (name == "api.js"), name
        for dialog in ("alert(", "confirm(", "prompt(", "XMLHttpRequest", "sendBeacon"):
            assert not re.search(rf"(?<![A-Za-z]){re.escape(dialog)}", text), (name, dialog)
