"""``locky policy check|test|diff`` (docs/http/authorization.md): offline policy tooling, run as the
operator runs it (``locky.cli.main.main``, and once as a process) on the shipped
policy and on edited copies in ``tmp_path``. Exit status 0 only on success: ``check``
1 on a policy that does not load or has problems; ``test`` 1 on a failing case, 2 on a
bad cases file; ``diff`` 0 whether or not access changes (``--exit-code``: 1 when it
does), 1 when a policy does not load."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from locky.cli.main import main
from locky_casbin import policy_files

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "policies"
CASES = SHIPPED / "cases.csv"
SCOPES = {"user": ("global", "self"), "admin": ("global", "self")}


def scopes(role: str) -> tuple[str, ...]:
    return SCOPES.get(role, ("global", "group", "self"))


@pytest.fixture
def policy(tmp_path) -> Path:
    """A copy of the shipped policy directory (model.conf, policy.csv)."""
    directory = tmp_path / "policy"
    directory.mkdir()
    for name in ("model.conf", "policy.csv"):
        shutil.copy(SHIPPED / name, directory / name)
    return directory


def edit(directory: Path, *, add: str = "", remove: str = "", name: str = "policy.csv") -> None:
    path = directory / name
    text = path.read_text()
    if remove:
        assert remove in text, f"{remove!r} is not in {name}"
        text = text.replace(remove, "", 1)
    path.write_text(text + add)


def line_of(directory: Path, text: str) -> int:
    """The 1-based number of the line of policy.csv that reads ``text``."""
    lines = (directory / "policy.csv").read_text().splitlines()
    return [number for number, line in enumerate(lines, 1) if line.strip() == text][-1]


@pytest.fixture
def locky(capsys, monkeypatch):
    """Run ``locky ARGS`` in this process: (exit status, stdout, stderr)."""
    # Offline: settings play no part, however broken.
    monkeypatch.setenv("LOCKY_DATABASE_URL", "nowhere://at-all")

    def run(*args: str) -> tuple[int, str, str]:
        status = main(list(args))
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return status, out, err

    return run


def run_json(locky, *args: str) -> tuple[int, dict]:
    status, out, err = locky(*args, "--json")
    return status, json.loads(out)


# -- check ------------------------------------------------------------------------


def test_check_passes_on_the_shipped_policy(locky):
    status, out, err = locky("policy", "check")
    assert status == 0, out + err
    # Without DIR: the policy shipped in the installed package (the source tree's
    # policies/ only in an editable install).
    assert "in order" in out and str(policy_files.policy_dir(None)) in out
    assert "admin, client, maintainer, member, owner, provisioner, user, viewer" in out
    status, data = run_json(locky, "policy", "check", str(SHIPPED))
    assert status == 0
    assert data["ok"] is True and data["problems"] == []
    assert data["roles"] == ["admin", "client", "maintainer", "member", "owner", "provisioner", "user", "viewer"]
    assert data["lines"]["p"] > 0 and data["lines"]["g"] > 0


def test_check_passes_on_an_unedited_copy(locky, policy):
    assert locky("policy", "check", str(policy))[0] == 0


def test_check_reports_unknown_roles_duplicates_and_lines_that_never_match(locky, policy):
    edit(policy, add=(
        "\np, user, *, users, read\n"            # an exact duplicate
        "p, user, *, users, read  # again\n"     # the same line with a comment
        "g, maintainer, memebr\n"                # a misspelt role: grants nothing
        "p, maintainer, *, members, assign:ownr\n"  # assigns a role defined nowhere
        "p, maintainer, group, groups, delete\n"  # scope neither * nor self
        "p, Owner, *, groups, read\n"            # no caller holds "Owner"
    ))
    first = line_of(SHIPPED, "p, user, *, users, read")
    status, out, err = locky("policy", "check", str(policy))
    assert status == 1
    csv_path = policy / "policy.csv"
    by_number = {text: line_of(policy, text) for text in (
        "g, maintainer, memebr", "p, maintainer, *, members, assign:ownr", "p, maintainer, group, groups, delete",
        "p, Owner, *, groups, read")}
    assert f"{csv_path}:{by_number['g, maintainer, memebr']}: unknown role 'memebr'" in out
    assert f"{csv_path}:{by_number['p, maintainer, *, members, assign:ownr']}: unknown role 'ownr'" in out
    assert (f"{csv_path}:{by_number['p, maintainer, group, groups, delete']}: can never match:"
            " its scope 'group'") in out
    assert f"{csv_path}:{by_number['p, Owner, *, groups, read']}: can never match: 'Owner'" in out
    assert out.count(f"duplicate of line {first}") == 2
    assert "6 problem(s)" in out

    status, data = run_json(locky, "policy", "check", str(policy))
    assert status == 1 and data["ok"] is False
    assert all(set(p) == {"line", "text", "problem"} for p in data["problems"])
    problems = {(p["line"], p["text"]): p["problem"] for p in data["problems"]}
    assert len(problems) == 6
    duplicates = [p for p in data["problems"] if p["problem"] == f"duplicate of line {first}"]
    assert [p["text"] for p in duplicates] == ["p, user, *, users, read", "p, user, *, users, read  # again"]
    assert problems[(by_number["g, maintainer, memebr"], "g, maintainer, memebr")].startswith(
        "unknown role 'memebr'")


def test_check_accepts_a_new_role_and_an_email_admin(locky, policy):
    # What an operator legitimately adds (tests/test_policy_dir.py): not problems.
    edit(policy, add="\n# role auditor: Reads everything.\np, auditor, *, *, read\ng, auditor, user\n"
                     "g, Ada@Example.com, admin\np, maintainer, *, members, assign:auditor\n")
    status, out, err = locky("policy", "check", str(policy))
    assert status == 0, out + err
    assert "auditor" in out


def test_a_user_uuid_subject_is_a_uuid4(locky, policy):
    # Every user's uuid is a UUID4 (docs/http/README.md#bodies): a line naming one speaks for that
    # user; a uuid of another version names nobody, so the line can never match.
    user, nobody = "3f2b6c1e-8a4d-4e5f-9b7c-2d1e0f9a8b7c", "3f2b6c1e-8a4d-1e5f-9b7c-2d1e0f9a8b7c"
    edit(policy, add=f"\ng, {user}, admin\ng, {nobody}, admin\n")
    status, out, err = locky("policy", "check", str(policy))
    assert status == 1
    assert f"{policy / 'policy.csv'}:{line_of(policy, f'g, {nobody}, admin')}: can never match: {nobody!r}" in out
    assert "1 problem(s)" in out


def test_check_a_model_that_does_not_parse_exits_1_with_the_message(locky, policy):
    (policy / "model.conf").write_text("[request_definition\nr = sub, obj\n")
    status, out, err = locky("policy", "check", str(policy))
    assert status == 1 and out == ""
    assert err.startswith("locky: policy model ") and "model.conf does not parse" in err
    status, data = run_json(locky, "policy", "check", str(policy))
    assert status == 1 and data["ok"] is False and "model.conf does not parse" in data["error"]


def test_check_a_policy_line_that_does_not_parse_names_its_line(locky, policy):
    edit(policy, add="\nq, user, *, users, write\n")
    number = line_of(policy, "q, user, *, users, write")
    status, out, err = locky("policy", "check", str(policy))
    assert status == 1
    assert f"policy.csv:{number}: unknown line type 'q'" in err


def test_check_a_missing_directory_exits_1(locky, tmp_path):
    status, out, err = locky("policy", "check", str(tmp_path / "nowhere"))
    assert status == 1 and "does not exist" in err


def test_the_command_runs_as_a_process_without_settings(tmp_path):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    environ["LOCKY_DATABASE_URL"] = "nowhere://at-all"  # never read: the tooling is offline
    done = subprocess.run([sys.executable, "-m", "locky.cli.main", "policy", "test", str(CASES)],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\d+ passed, 0 failed", done.stdout)


# -- test -------------------------------------------------------------------------


def test_the_shipped_cases_pass_on_the_shipped_policy(locky):
    status, out, err = locky("policy", "test", str(CASES))
    assert status == 0, out + err
    passed = int(re.search(r"(\d+) passed, 0 failed", out).group(1))
    assert passed >= 70 and err == ""
    status, data = run_json(locky, "policy", "test", str(CASES), "--policy", str(SHIPPED))
    assert status == 0
    assert data["passed"] == passed and data["failed"] == 0 and data["failures"] == []


def test_the_shipped_cases_cover_the_contract_table():
    rows = [[c.strip() for c in line.split(",")] for line in CASES.read_text().splitlines()
            if line.strip() and not line.startswith("#")][1:]
    cases = {tuple(row[1:]): row[0] for row in rows}
    assert cases[("maintainer", "group", "members", "assign:owner")] == "deny"
    assert cases[("owner", "group", "members", "assign:owner")] == "allow"
    assert cases[("maintainer", "group", "groups", "delete")] == "deny"
    assert cases[("user", "self", "members", "delete")] == "allow"
    assert cases[("user", "global", "users", "update")] == "deny"
    assert {row[1] for row in rows} == {"admin", "user", "owner", "maintainer", "member", "viewer", "client"}


def test_a_failing_case_prints_the_explanation_and_exits_1(locky, policy):
    edit(policy, remove="p, maintainer, *, members, assign:viewer\n")
    status, out, err = locky("policy", "test", str(CASES), "--policy", str(policy))
    assert status == 1
    number = [n for n, line in enumerate(CASES.read_text().splitlines(), 1)
              if line == "allow, maintainer, group, members, assign:viewer"][0]
    assert (f"FAIL {CASES}:{number}: maintainer group members assign:viewer: expected allow, got deny"
            in out)
    assert "no line matches; maintainer holds maintainer, member, user" in out
    assert f"policy.csv:{line_of(policy, 'p, maintainer, *, members, write')}: p, maintainer, *, members, write" in out
    assert re.search(r"\d+ passed, 1 failed", out)
    assert out.count("FAIL ") == 1


def test_a_case_allowed_against_expectation_names_the_lines_that_allowed_it(locky, tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_text("# header-less, with comments\n\n"
                     "deny, member, group, groups, read   # every user reads groups\n"
                     "allow, member, self, members, delete\n"
                     "allow, maintainer, group, members, assign:owner\n")
    status, out, err = locky("policy", "test", str(cases))
    assert status == 1
    read_line = line_of(SHIPPED, "p, user, *, groups, read")
    assert f"FAIL {cases}:3: member group groups read: expected deny, got allow" in out
    assert f"allowed by (roles held: member, user):\n      policy.csv:{read_line}: p, user, *, groups, read" in out
    assert f"FAIL {cases}:5: maintainer group members assign:owner: expected allow, got deny" in out
    assert "1 passed, 2 failed" in out

    status, data = run_json(locky, "policy", "test", str(cases))
    assert status == 1
    assert data["passed"] == 1 and data["failed"] == 2
    first, second = data["failures"]
    assert {k: first[k] for k in ("line", "expect", "subject", "scope", "resource", "action", "allowed",
                                  "matched")} == {
        "line": 3, "expect": "deny", "subject": "member", "scope": "group", "resource": "groups",
        "action": "read", "allowed": True, "matched": ["p, user, *, groups, read"]}
    assert second["line"] == 5 and second["allowed"] is False and second["matched"] == []
    assert second["roles"] == ["maintainer", "member", "user"]


def test_scope_self_is_the_callers_own_record(locky, tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_text("expect, subject, scope, resource, action\n"
                     "allow, user, self, users, update\n"
                     "allow, user, global, users, update\n")
    status, out, err = locky("policy", "test", str(cases))
    assert status == 1 and f"FAIL {cases}:3:" in out and "1 passed, 1 failed" in out


def test_an_unknown_subject_is_warned_about(locky, tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_text("deny, ownr, group, groups, delete\n")
    status, out, err = locky("policy", "test", str(cases))
    assert status == 0
    assert f"{cases}:1: subject 'ownr' is not a role of this policy" in err


@pytest.mark.parametrize("text, line, message", [
    ("allow, user, global, users\n", 1, "a case has 5 non-empty values"),
    ("expect,subject,scope,resource,action\n# c\nallow, user, global, users, read\nmaybe, user, global, users, read\n",
     4, "expect must be allow or deny, got 'maybe'"),
    ("allow, user, global, users, read\n\nallow, user, world, users, read\n", 3,
     "scope must be global, group or self, got 'world'"),
    ("allow, , global, users, read\n", 1, "a case has 5 non-empty values"),
])
def test_a_bad_case_line_exits_2_with_its_number(locky, tmp_path, text, line, message):
    cases = tmp_path / "cases.csv"
    cases.write_text(text)
    status, out, err = locky("policy", "test", str(cases))
    assert status == 2 and out == ""
    assert f"{cases}:{line}: {message}" in err
    status, data = run_json(locky, "policy", "test", str(cases))
    assert status == 2 and any(f"{cases}:{line}: {message}" in e for e in data["errors"])


def test_a_cases_file_without_cases_or_missing_exits_2(locky, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("# nothing\nexpect, subject, scope, resource, action\n")
    assert locky("policy", "test", str(empty))[0] == 2
    status, out, err = locky("policy", "test", str(tmp_path / "missing.csv"))
    assert status == 2 and "cannot read cases file" in err


def test_cases_against_a_policy_that_does_not_parse_exit_1(locky, policy):
    (policy / "model.conf").write_text("[request_definition\n")
    status, out, err = locky("policy", "test", str(CASES), "--policy", str(policy))
    assert status == 1 and "does not parse" in err


# -- diff -------------------------------------------------------------------------


def changes(out: str) -> tuple[set, set]:
    gained, lost = set(), set()
    for line in out.splitlines():
        if line[:2] in ("+ ", "- "):
            (gained if line[0] == "+" else lost).add(tuple(line[2:].split()))
    return gained, lost


def test_diff_of_a_policy_with_itself_is_empty(locky, policy):
    status, out, err = locky("policy", "diff", str(SHIPPED), str(policy))
    assert status == 0 and changes(out) == (set(), set()) and "no differences" in out
    assert locky("policy", "diff", str(SHIPPED), str(policy), "--exit-code")[0] == 0
    status, data = run_json(locky, "policy", "diff", str(SHIPPED), str(policy))
    assert status == 0 and data["gained"] == [] and data["lost"] == []


def test_diff_names_exactly_what_one_removed_and_one_added_line_change(locky, policy):
    edit(policy, remove="p, user, *, authz, read\n", add="\np, viewer, *, groups, update\n")
    expected_lost = {(role, scope, "authz", "read")
                     for role in ("user", "member", "viewer", "maintainer", "owner") for scope in scopes(role)}
    expected_gained = {("viewer", scope, "groups", "update") for scope in ("global", "group", "self")}
    status, out, err = locky("policy", "diff", str(SHIPPED), str(policy))
    assert status == 0, err
    assert changes(out) == (expected_gained, expected_lost)
    assert all(line[:2] in ("+ ", "- ") for line in out.splitlines())
    # The other way round, gains and losses swap.
    status, out, err = locky("policy", "diff", str(policy), str(SHIPPED))
    assert changes(out) == (expected_lost, expected_gained)

    status, data = run_json(locky, "policy", "diff", str(SHIPPED), str(policy))
    assert status == 0 and set(data) >= {"gained", "lost"}
    keys = ("role", "scope", "resource", "action")
    assert {tuple(item[k] for k in keys) for item in data["gained"]} == expected_gained
    assert {tuple(item[k] for k in keys) for item in data["lost"]} == expected_lost
    assert all(item["matched"] == ["p, viewer, *, groups, update"] for item in data["gained"])
    assert all(item["matched"] == ["p, user, *, authz, read"] for item in data["lost"])

    assert locky("policy", "diff", str(SHIPPED), str(policy), "--exit-code")[0] == 1


def test_diff_reports_a_wildcard_change_on_concrete_actions(locky, policy):
    # Owners lose "members, *": the actions Locky asks for are named, assign:owner among them.
    edit(policy, remove="p, owner, *, members, *\n")
    status, out, err = locky("policy", "diff", str(SHIPPED), str(policy))
    gained, lost = changes(out)
    assert gained == set()
    assert ("owner", "group", "members", "*") in lost
    assert ("owner", "group", "members", "assign:owner") in lost
    # What maintainer lines still give owners (members write, assign:member) is not lost.
    assert ("owner", "group", "members", "create") not in lost
    assert ("owner", "group", "members", "assign:member") not in lost
    assert {change[0] for change in lost} == {"owner"}


def test_diff_with_a_policy_that_does_not_parse_exits_1(locky, policy):
    (policy / "model.conf").write_text("[request_definition\n")
    status, out, err = locky("policy", "diff", str(SHIPPED), str(policy))
    assert status == 1 and "does not parse" in err and out == ""
    assert locky("policy", "diff", str(SHIPPED), str(policy), "--exit-code")[0] == 2
    status, data = run_json(locky, "policy", "diff", str(policy), str(SHIPPED))
    assert status == 1 and "does not parse" in data["error"]
