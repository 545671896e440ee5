"""``locky policy check|test|diff``: the offline policy tooling (docs/http/authorization.md), added to
the ``locky`` command by this plugin's ``locky_add_commands``.

None of these reads settings or opens the database: they work on policy directories
(``model.conf`` + ``policy.csv``) alone, the shipped one when none is given. Exit status:

- ``check``: 0 when the policy loads and has no problems, 1 otherwise.
- ``test``: 0 when every case passes, 1 when one fails or the policy does not load,
  2 when the cases file cannot be read or has a bad line.
- ``diff``: 0 when both policies load (differences or not), 1 when one does not; with
  ``--exit-code`` (as ``diff(1)``), 0 without differences, 1 with, 2 when one does not load.

``--json`` prints one JSON object on stdout instead of text (errors included, as
``{"error": ...}`` besides the command's usual keys).
"""

from __future__ import annotations

import argparse
import json
import sys

from locky import SettingsError

from . import tooling

EPILOG = {
    "check": "exit status: 0 when the policy is in order; 1 when it does not load or has problems",
    "test": "exit status: 0 when every case passes; 1 when a case fails or the policy does not load;"
            " 2 when the cases file cannot be read or has a bad line",
    "diff": "exit status: 0 when both policies load; 1 when one does not. With --exit-code: 0 without"
            " differences, 1 with differences, 2 when a policy does not load",
}


def add_parser(sub) -> None:
    """Declare ``policy`` and its commands on ``locky``'s subparsers: offline, run by :func:`run`."""
    policy = sub.add_parser(
        "policy", help="check, test and compare policy files (offline)",
        description="Policy tooling: works on policy directories (model.conf, policy.csv) only;"
                    " no settings, no database.")
    policy.set_defaults(run=run, offline=True)  # no settings, no database
    commands = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION", help="what to do")

    check = commands.add_parser(
        "check", help="load a policy and report unknown roles, duplicate lines and lines that never match",
        epilog=EPILOG["check"])
    check.add_argument("dir", nargs="?", metavar="DIR", help="policy directory (default: the shipped policy)")

    test = commands.add_parser(
        "test", help="run decision cases (expect, subject, scope, resource, action) against a policy",
        epilog=EPILOG["test"],
        description="CASES is a CSV file of lines `expect, subject, scope, resource, action`: expect is"
                    " allow or deny, subject a role name (decided as that role and the roles it inherits),"
                    " scope global, group or self. A header line, blank lines and # comments are allowed.")
    test.add_argument("cases", metavar="CASES", nargs="?",
                      help="the cases file (default: the shipped cases.csv, the default-policy table of docs/http/authorization.md)")
    test.add_argument("--policy", metavar="DIR", help="policy directory (default: the shipped policy)")

    diff = commands.add_parser(
        "diff", help="list every role x scope x resource x action that gains (+) or loses (-) access",
        epilog=EPILOG["diff"])
    diff.add_argument("old", metavar="OLD_DIR", help="the policy directory before the change")
    diff.add_argument("new", metavar="NEW_DIR", help="the policy directory after the change")
    diff.add_argument("--exit-code", action="store_true",
                      help="exit 1 when there are differences, 2 on errors (like diff(1))")

    for command in (check, test, diff):
        command.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace, settings=None) -> int:
    """Run ``locky policy ACTION``; ``settings`` is ``None`` (the command is offline)."""
    return {"check": _check, "test": _test, "diff": _diff}[args.policy_command](args)


def _emit(data: dict) -> None:
    print(json.dumps(data, indent=2))


def _error(args, message: str, status: int, **data) -> int:
    if args.json:
        _emit({**data, "error": message})
    else:
        print(f"locky: {message}", file=sys.stderr)
    return status


def _check(args) -> int:
    try:
        policy = tooling.open_policy(args.dir)
    except SettingsError as exc:
        return _error(args, str(exc), 1, ok=False, problems=[])
    problems = tooling.check(policy)
    counts = {kind: len(policy.rows(kind)) for kind in ("p", "g", "g2")}
    roles = sorted(policy.roles())
    if args.json:
        _emit({"ok": not problems, "directory": str(policy.directory),
               "problems": [p.as_dict() for p in problems], "lines": counts, "roles": roles})
        return 1 if problems else 0
    for problem in problems:
        print(f"{policy.csv_path}:{problem.line}: {problem.problem}\n    {problem.text}")
    if problems:
        print(f"locky: {len(problems)} problem(s) in the policy in {policy.directory}")
        return 1
    print(f"locky: the policy in {policy.directory} is in order: {counts['p']} p, {counts['g']} g and"
          f" {counts['g2']} g2 lines; roles {', '.join(roles)}")
    return 0


def shipped_cases():
    """The cases shipped in the package (``locky/policies/cases.csv``): what the shipped
    policy must decide, a starting point for the cases of a policy of one's own."""
    from importlib import resources

    return resources.files("locky.policies") / "cases.csv"


def _test(args) -> int:
    if args.cases is None:
        args.cases = str(shipped_cases())
    try:
        cases = tooling.read_cases(args.cases)
    except tooling.CaseError as exc:
        if args.json:
            _emit({"error": str(exc), "errors": exc.messages})
        else:
            for message in exc.messages:
                print(f"locky: {message}", file=sys.stderr)
        return 2
    try:
        policy = tooling.open_policy(args.policy)
    except SettingsError as exc:
        return _error(args, str(exc), 1)
    outcomes = tooling.run_cases(policy, cases)
    failures = [o for o in outcomes if not o.passed]
    # A deny case for a misspelt role passes: say so, without failing.
    known = policy.subjects()
    warnings = [f"{args.cases}:{case.line}: subject {case.subject!r} is not a role of this policy"
                " (it holds nothing)" for case in cases if case.subject not in known]
    if args.json:
        _emit({
            "directory": str(policy.directory),
            "warnings": warnings,
            "passed": len(outcomes) - len(failures),
            "failed": len(failures),
            "failures": [{
                "line": o.case.line, "expect": o.case.expect, "subject": o.case.subject, "scope": o.case.scope,
                "resource": o.case.resource, "action": o.case.action, "allowed": o.allowed,
                "matched": [tooling.rule_text(["p", *rule]) for rule in o.matched],
                "roles": list(o.roles),
            } for o in failures],
        })
        return 1 if failures else 0
    for warning in warnings:
        print(f"locky: warning: {warning}", file=sys.stderr)
    for outcome in failures:
        _print_failure(args.cases, policy, outcome)
    print(f"locky: {len(outcomes) - len(failures)} passed, {len(failures)} failed"
          f" (policy in {policy.directory})")
    return 1 if failures else 0


def _print_failure(cases_path: str, policy, outcome) -> None:
    case = outcome.case
    got = "allow" if outcome.allowed else "deny"
    print(f"FAIL {cases_path}:{case.line}: {case.subject} {case.scope} {case.resource} {case.action}:"
          f" expected {case.expect}, got {got}")
    held = ", ".join(outcome.roles)

    def where(rule) -> str:
        number = policy.number_of(rule)
        return f"{policy.csv_path.name}:{number}: " if number else ""

    if outcome.matched:
        print(f"    allowed by (roles held: {held}):")
        for rule in outcome.matched:
            print(f"      {where(rule)}{tooling.rule_text(['p', *rule])}")
    elif outcome.allowed:  # an operator's model whose effect is not "some allow"
        print(f"    allowed, though no single line allows it (roles held: {held})")
    else:
        print(f"    no line matches; {case.subject} holds {held}")
        nearby = tooling.nearby_rules(policy, outcome)
        if nearby:
            print(f"    their lines on {case.resource} or *:")
            for rule in nearby:
                print(f"      {where(rule)}{tooling.rule_text(['p', *rule])}")
        else:
            print(f"    none of them has a line on {case.resource} or *")


def _diff(args) -> int:
    failure = 2 if args.exit_code else 1
    try:
        old = tooling.open_policy(args.old)
        new = tooling.open_policy(args.new)
    except SettingsError as exc:
        return _error(args, str(exc), failure, gained=[], lost=[])
    gained, lost = tooling.diff(old, new)
    changed = 1 if args.exit_code and (gained or lost) else 0
    if args.json:
        def item(change, policy):
            rules = policy.matching(change.role, change.scope, change.resource, change.action)
            return {**change.as_dict(), "matched": [tooling.rule_text(["p", *rule]) for rule in rules]}

        _emit({"old": str(old.directory), "new": str(new.directory),
               "gained": [item(c, new) for c in gained], "lost": [item(c, old) for c in lost]})
        return changed
    for sign, changes in (("+", gained), ("-", lost)):
        for change in changes:
            print(f"{sign} {change.role} {change.scope} {change.resource} {change.action}")
    if not gained and not lost:
        print("locky: no differences in access")
    return changed
