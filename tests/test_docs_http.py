"""The HTTP reference (``docs/http/``) cannot drift from the route table: every route the
app serves (its own, the Swagger UI's and the console's, and ``/metrics`` of the
``locky_prometheus`` contrib plugin) has a heading ``### `METHOD /path``` on one page,
no heading names a route that is not served, each route's section states its success
status, and every link between the pages lands on a page and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from locky.resources import console, swagger
from docs_generators import DOCS

HTTP_DOCS = DOCS / "http"
PAGES = sorted(HTTP_DOCS.glob("*.md"))
ROUTE_HEADING = re.compile(r"^### `([A-Z]+) (/\S*)`$")
#: Routes served only with a plugin loaded, and which plugin module serves them.
PLUGIN_ROUTES = {("GET", "/metrics"): "locky_prometheus"}


def served(app) -> dict[tuple[str, str], int]:
    """``(METHOD, path)`` -> success status of every operation the app mounts, paths written
    as the docs write them (``{id}``, not Falcon's ``{id:id}``)."""
    mounted = app.routes + swagger.routes(app.swagger) + console.routes()
    return {(op.method.upper(), re.sub(r"\{(\w+):[^}]*\}", r"{\1}", route.path)): op.status
            for route in mounted for op in route.operations}


def sections() -> dict[tuple[str, str], tuple[Path, str]]:
    """Each documented route and (its page, the text under its heading). Consecutive route
    headings share the text that follows them (one section for the four list routes)."""
    found: dict[tuple[str, str], tuple[Path, str]] = {}
    for page in PAGES:
        pending: list[tuple[str, str]] = []
        text: list[str] = []

        def close():
            for key in pending:
                assert key not in found, f"{key} has two headings: {found[key][0].name} and {page.name}"
                found[key] = (page, "\n".join(text))

        for line in page.read_text().splitlines() + ["## end"]:
            heading = ROUTE_HEADING.match(line)
            if heading and not any(t.strip() for t in text):
                pending.append((heading.group(1), heading.group(2)))
            elif heading or line.startswith("#"):
                close()
                pending, text = ([(heading.group(1), heading.group(2))] if heading else []), []
            else:
                text.append(line)
    return found


@pytest.fixture
def app(locky_app_factory):
    pytest.importorskip("prometheus_client", reason="pip install 'locky[metrics]'")
    return locky_app_factory(plugins=tuple(sorted(set(PLUGIN_ROUTES.values()))))


def test_pages_exist():
    names = {page.name for page in PAGES}
    assert {"README.md", "records.md", "tokens.md", "users.md", "groups.md", "authorization.md",
            "accounts.md", "audit.md", "operation.md", "console.md"} <= names


def test_every_served_route_is_documented(locky_app):
    missing = sorted(set(served(locky_app)) - set(sections()))
    assert not missing, f"routes of the app that docs/http does not document: {missing}"


def test_every_documented_route_is_served(app):
    stale = sorted(set(sections()) - set(served(app)))
    assert not stale, f"docs/http documents routes the app does not serve: {stale}"
    assert set(PLUGIN_ROUTES) <= set(served(app))


def test_each_section_states_the_success_status(app):
    documented = sections()
    wrong = sorted(f"{method} {path} ({documented[(method, path)][0].name}): **{status}**"
                   for (method, path), status in served(app).items()
                   if (method, path) in documented and f"**{status}**" not in documented[(method, path)][1])
    assert not wrong, f"sections that do not state their route's success status: {wrong}"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text: lowercased, punctuation dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            base = anchor(line.lstrip("#"))
            result.add(f"{base}-{seen[base]}" if base in seen else base)
            seen[base] = seen.get(base, 0) + 1
    return result


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_land(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page.name} links to pages or headings that do not exist: {broken}"


def test_index_links_every_page():
    index = (HTTP_DOCS / "README.md").read_text()
    for page in PAGES:
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/http/README.md does not link {page.name}"
