"""The plugin documentation cannot drift from the code: every hook in
``locky/hookspecs.py`` is on ``docs/hooks.md`` under its exact signature, and the guide
names every hook, every provider slot and every example and contrib package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import locky
from locky import hookspecs
from locky.context import SLOTS
from docs_generators import DOCS, load_generator

REGENERATE = "run `python docs/gen_hooks.py` and commit docs/hooks.md"


gen = load_generator("gen_hooks")
HOOKS = gen.hooks()
PAGE = (DOCS / "hooks.md").read_text()
GUIDE = (DOCS / "plugins.md").read_text()


def documented_section(name: str) -> str:
    """The text of ``docs/hooks.md`` under the heading of hook ``name``."""
    match = re.search(rf"^### `{name}\(.*?(?=^##)|^### `{name}\(.*", PAGE, re.MULTILINE | re.DOTALL)
    assert match, f"hook {name} is not on docs/hooks.md: {REGENERATE}"
    return match.group(0)


def test_every_spec_is_found():
    names = {f.__name__ for f in HOOKS}
    declared = {name for name in dir(hookspecs) if name.startswith("locky_")}
    assert names == declared and len(names) >= 14


@pytest.mark.parametrize("hook", HOOKS, ids=lambda f: f.__name__)
def test_hook_is_documented_under_its_signature(hook):
    section = documented_section(hook.__name__)
    heading = section.splitlines()[0]
    assert heading == f"### `{gen.signature(hook)}`", f"the signature of {hook.__name__} changed: {REGENERATE}"
    assert gen.docstring(hook) in section, f"the docstring of {hook.__name__} changed: {REGENERATE}"
    for option in ("firstresult", "historic"):
        assert (f"*{option}*" in section) == bool(hook.locky_spec.get(option)), REGENERATE


def test_no_hook_is_documented_that_does_not_exist():
    names = {f.__name__ for f in HOOKS}
    on_page = set(re.findall(r"^### `(locky_\w+)\(", PAGE, re.MULTILINE))
    assert on_page == names, REGENERATE


def test_page_is_what_the_generator_writes():
    assert PAGE == gen.render(), REGENERATE


def test_signatures_are_the_source_text():
    """The generator's signature is the one written in hookspecs.py (read with ``ast``)."""
    tree = ast.parse(Path(hookspecs.__file__).read_text())
    written = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("locky_"):
            args = ", ".join(f"{a.arg}: {ast.unparse(a.annotation)}" for a in node.args.args)
            written[node.name] = f"{node.name}({args}) -> {ast.unparse(node.returns)}"
    assert written == {hook.__name__: gen.signature(hook) for hook in HOOKS}


def test_guide_names_every_hook_slot_and_package():
    for hook in HOOKS:
        assert re.search(rf"`{hook.__name__}[`(]", GUIDE), f"docs/plugins.md does not mention {hook.__name__}"
    for slot, hook_name in SLOTS:
        assert f"`{hook_name}`" in GUIDE and f"`{slot}`" in GUIDE
    for package in ("locky-memory-storage", "locky_api_keys", "locky_audit_log", "reports_app",
                    "locky_argon2", "locky_prometheus", "locky_redis"):
        assert package in GUIDE, package
    assert "[hooks](hooks.md)" in GUIDE


def test_guide_names_only_public_api():
    """Every ``locky.X`` or ``from locky import X`` the guide shows is in ``locky.__all__``."""
    imported = set()
    for names in re.findall(r"^from locky import (\([^)]*\)|[^\n]+)", GUIDE, re.MULTILINE):
        imported.update(n.strip(" ()\n") for n in names.split(",") if n.strip(" ()\n"))
    imported.update(re.findall(r"(?<![\w./-])locky\.([A-Za-z_]\w*)\b(?!\.)", GUIDE))
    submodules = {"testing", "hookspecs", "providers", "records", "plugins", "routes", "storage", "client", "__all__"}
    unknown = sorted(n for n in imported if n not in locky.__all__ and n not in submodules)
    assert not unknown, f"docs/plugins.md shows names that locky does not export: {unknown}"


def test_guide_names_only_what_the_storage_kit_holds():
    """Every ``from locky.storage import X`` or ``locky.storage.X`` the guide shows is in
    ``locky.storage.__all__``."""
    import locky.storage

    shown = set(re.findall(r"locky\.storage\.([A-Za-z_]\w*)", GUIDE))
    for names in re.findall(r"^from locky\.storage import ([^\n]+)", GUIDE, re.MULTILINE):
        shown.update(n.strip() for n in names.split(","))
    assert shown and not shown - set(locky.storage.__all__), sorted(shown - set(locky.storage.__all__))


def test_guide_shows_a_plugin_adding_settings_a_command_an_audit_event_and_a_storage():
    for heading in ("### Settings of a plugin", "### A command of your own", "### Recording audit events",
                    "## A worked example: a storage plugin", "## What used to trip plugin authors"):
        assert f"\n{heading}\n" in GUIDE, heading
    for call in ("settings.add_table(", "settings.add_check(", "subparsers.add_parser(", "set_defaults(run=",
                 "context.audit.record(", "registry.add(\"memory\"", "open_storage("):
        assert call in GUIDE, call
