"""``docs/authorizers.md`` cannot drift from the routes: its table of what each route asks
the authorizer is what ``docs/gen_authorizers.py`` records from real requests, every
operation of the route table is on it, and the page names what an authorizer author
needs (the interface, the roles, registration, the contract suite)."""

from __future__ import annotations

import re
import tempfile

import pytest

from docs_generators import DOCS, load_generator
from locky.testing.authorizer_contract import AuthorizerContract

REGENERATE = "run `python docs/gen_authorizers.py` and commit docs/authorizers.md"


gen = load_generator("gen_authorizers")
PAGE = (DOCS / "authorizers.md").read_text()


@pytest.fixture(scope="module")
def operations():
    with tempfile.TemporaryDirectory() as directory:
        app = gen.build_app(directory)
        try:
            yield gen.operations(app)
        finally:
            app.close()


def test_page_is_what_the_generator_writes():
    assert gen.render(PAGE, gen.table()) == PAGE, REGENERATE


def test_every_operation_is_on_the_page(operations):
    for method, path, public in operations:
        shown = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)
        row = re.search(rf"^\| {method} \| `{re.escape(shown)}` \| (.+) \|$", PAGE, re.MULTILINE)
        assert row, f"{method} {shown} is not on docs/authorizers.md: {REGENERATE}"
        if public:
            assert row.group(1) == "public: no check"
        else:
            assert "×" in row.group(1), f"{method} {shown} asks nothing of the authorizer"


def test_every_protected_operation_has_a_sample_and_no_sample_is_stale(operations):
    protected = {(method, path) for method, path, public in operations if not public}
    assert protected - set(gen.SAMPLES) == set(), "add sample requests to docs/gen_authorizers.py"
    assert set(gen.SAMPLES) - protected == set(), "samples for operations that no longer exist"


@pytest.mark.parametrize("needed", [
    "is_allowed", "builtin_roles", "BuiltinRole", "group_uuid", "own", "policy_revision",
    "members.role_of", "grants.roles_of", "admin_emails", "email_verified", "custom_permissions",
    "storage.revision()", "locky grant-admin", "locky revoke-admin", "locky_register_authorizers",
    "registry.add", "[project.entry-points.locky]", "LOCKY_AUTHORIZER", "AuthorizerContract", "make_app",
    "locky_app_factory", "assign:<role>", "ExplainingAuthorizer", "403 Forbidden",
])
def test_page_names_what_an_author_needs(needed):
    assert needed in PAGE, needed


def test_the_contract_suite_is_shown_as_it_is_used():
    """The page's example overrides the fixture the suite really has."""
    assert "make_app" in vars(AuthorizerContract)
    assert "locky.testing.authorizer_contract" in PAGE


def test_guide_links_the_page():
    assert "(authorizers.md)" in (DOCS / "plugins.md").read_text()
