"""The README's policy example (section "Policy") is a policy that loads and means what
its comments say: exactly that ``csv`` block, written as ``policy.csv`` beside the
shipped ``model.conf``, is read by the loader the service uses (trailing ``# comments``
stripped, ``locky_casbin.policy_files``), and each commented line allows what its comment
claims, and no more than the comments say."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from locky_casbin import tooling

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def readme_policy() -> str:
    """The first ``csv`` block after the README's "## Policy" heading."""
    section = README.split("\n## Policy\n", 1)[1]
    match = re.search(r"^```csv\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert match, "the README's Policy section has no ```csv block"
    return match.group(1)


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> tooling.Policy:
    directory = tmp_path_factory.mktemp("readme-policy")
    shutil.copy(ROOT / "policies" / "model.conf", directory / "model.conf")
    (directory / "policy.csv").write_text(readme_policy())
    return tooling.open_policy(directory)


def test_every_line_of_the_example_has_a_comment_and_loads_without_it(policy):
    lines = [line for line in readme_policy().splitlines() if line.strip()]
    assert len(lines) == 9 and all(" # " in line for line in lines)
    assert [row for row in policy.files.rows] == [
        ["p", "user", "*", "groups", "create"],
        ["p", "user", "self", "users", "write"],
        ["p", "owner", "*", "groups", "write"],
        ["p", "maintainer", "*", "members", "write"],
        ["p", "maintainer", "*", "members", "assign:member"],
        ["p", "maintainer", "*", "members", "assign:custom"],
        ["p", "owner", "*", "members", "*"],
        ["g", "owner", "maintainer"],
        ["g2", "update", "write"],
    ]


def test_the_checker_finds_nothing_but_the_excerpts_missing_member_line(policy):
    """The example is an excerpt of the shipped policy: ``member`` is defined there."""
    problems = tooling.check(policy)
    assert [p.line for p in problems] == [5] and "unknown role 'member'" in problems[0].problem
    assert "g, maintainer, member" in (ROOT / "policies" / "policy.csv").read_text()


# (subject, scope, resource, action, allowed, the comment it proves)
CASES = [
    ("user", "global", "groups", "create", True, "every logged-in user may create groups"),
    ("user", "self", "users", "write", True, "and change or delete their own account"),
    ("user", "self", "users", "update", True, "update is a kind of write"),
    ("user", "global", "users", "write", False, "... their own account only"),
    ("owner", "group", "groups", "write", True, "an owner may update and delete their group"),
    ("owner", "group", "groups", "update", True, "update is a kind of write"),
    ("maintainer", "group", "groups", "write", False, "a maintainer may not update the group here"),
    ("maintainer", "group", "members", "write", True, "a maintainer may add and remove members"),
    ("maintainer", "group", "members", "assign:member", True, "holding the role member"),
    ("maintainer", "group", "members", "assign:custom", True, "or any role made through the API"),
    ("maintainer", "group", "members", "assign:owner", False, "a maintainer cannot make anyone an owner"),
    ("maintainer", "group", "members", "assign:maintainer", False, "nor a maintainer"),
    ("owner", "group", "members", "assign:owner", True, "an owner may give and take every role"),
    ("owner", "group", "members", "assign:custom", True, "owners can do all maintainers can"),
    ("member", "group", "members", "write", False, "a member may not add members"),
    ("member", "group", "groups", "create", False, "no line gives member anything"),
]


@pytest.mark.parametrize("subject, scope, resource, action, allowed, comment", CASES,
                         ids=[f"{c[0]}-{c[3]}-{c[2]}" for c in CASES])
def test_each_commented_rule_decides_as_its_comment_says(policy, subject, scope, resource, action, allowed,
                                                        comment):
    assert policy.decide(subject, scope, resource, action) is allowed, comment


def test_the_maintainer_member_rule_is_the_line_that_allows_it(policy):
    assert ["maintainer", "*", "members", "assign:member"] in policy.matching(
        "maintainer", "group", "members", "assign:member")
    # owners reach the maintainer's lines through "g, owner, maintainer" and have their own wildcard
    matched = policy.matching("owner", "group", "members", "assign:member")
    assert ["owner", "*", "members", "*"] in matched
