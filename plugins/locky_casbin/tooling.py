"""Offline policy tooling (docs/http/authorization.md): check a policy directory, run decision cases
against it, and compare two policies decision by decision.

Everything here decides with the same :class:`~locky_casbin._PolicySnapshot` the
service uses (policy files only: custom roles live in the database, which this never
opens). A request is ``sub, dom, obj, act``; a case's or a difference's *scope* maps to
``dom`` as the authorizer does: ``global`` and ``group`` ask with ``*`` (a group role is
held within its group, and its ``*`` lines apply there), ``self`` with ``self`` (the
record is the caller's own). The subject is a role name, evaluated on its own (with
the roles it inherits through ``g`` lines, and not with ``user`` unless it inherits it).

:func:`open_policy` raises :class:`locky.settings.SettingsError` with the loader's
message when a file is missing or does not parse; the command turns that into exit 1.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from locky import SettingsError

from . import GLOBAL_ROLES, _PolicySnapshot, policy_files
from .policy_files import is_client_subject_name, is_role_name, is_user_uuid

#: A case's or a difference's scope -> the request's ``dom``.
SCOPES = {"global": "*", "group": "*", "self": "self"}
#: Roles Locky's code gives without any policy line naming them.
BUILTIN_ROLES = ("admin", "user")
#: The ``dom`` values Locky's requests carry.
REQUEST_DOMS = ("*", "self")
#: What Locky's own routes ask for (``context.require``), besides ``assign:<role>``:
#: always part of a diff's universe, so that a change of a wildcard line is reported
#: on the concrete requests the service makes.
LOCKY_RESOURCES = ("users", "groups", "members", "roles", "authz", "sessions", "keys", "tokens", "scim")
LOCKY_ACTIONS = ("read", "create", "update", "delete", "write", "disable", "rotate", "introspect")
CASE_FIELDS = ("expect", "subject", "scope", "resource", "action")
EXPECTS = ("allow", "deny")


def rule_text(row: list[str] | tuple[str, ...]) -> str:
    """A policy line as written in ``policy.csv``: ``p, owner, *, members, *``."""
    return ", ".join(row)


def _holdable(name: str) -> bool:
    """Whether some caller can act as ``name``: a role, a user uuid, an email or a
    machine client (``client:<client_id>``)."""
    return is_role_name(name) or is_user_uuid(name) or "@" in name or is_client_subject_name(name)


def _assigned_role(action: str) -> str | None:
    return action.removeprefix("assign:") if action.startswith("assign:") else None


# -- loading ----------------------------------------------------------------------


@dataclass
class Line:
    """One policy line: its number in ``policy.csv``, its text and its parsed row."""

    number: int
    text: str
    row: list[str]


@dataclass
class Policy:
    """A loaded policy directory, its lines with their numbers, and a snapshot to decide with."""

    directory: Path
    files: policy_files.PolicyFiles
    lines: list[Line]
    snapshot: _PolicySnapshot
    numbers: dict[tuple[str, ...], int] = field(default_factory=dict)

    @property
    def csv_path(self) -> Path:
        return self.directory / "policy.csv"

    def rows(self, kind: str) -> list[list[str]]:
        return [line.row for line in self.lines if line.row[0] == kind]

    def roles(self) -> set[str]:
        """Every role name the policy defines (subject of a ``p`` line, either side of a
        ``g`` line) plus the built-ins ``admin`` and ``user``."""
        names = set(BUILTIN_ROLES)
        for row in self.rows("p"):
            names.add(row[1])
        for row in self.rows("g"):
            names.update(row[1:])
        return {name for name in names if is_role_name(name)}

    def subjects(self) -> set[str]:
        """Every subject a decision can be asked for: the roles, and the user uuids and
        emails that ``p`` and ``g`` lines name."""
        names = set(self.roles())
        for row in self.rows("p") + self.rows("g"):
            if _holdable(row[1]):
                names.add(row[1])
        return names

    def number_of(self, rule: list[str], kind: str = "p") -> int | None:
        """The line number of ``rule`` (a ``p`` rule without its ``p``), if it is in the file."""
        return self.numbers.get((kind, *rule))

    def decide(self, subject: str, scope: str, resource: str, action: str) -> bool:
        return self.snapshot.enforce(subject, SCOPES[scope], resource, action)

    def matching(self, subject: str, scope: str, resource: str, action: str) -> list[list[str]]:
        return self.snapshot.matching(subject, SCOPES[scope], resource, action)


def open_policy(directory: str | Path | None) -> Policy:
    """Load and check ``model.conf`` and ``policy.csv`` of ``directory`` (``None``: the
    shipped policy) the way the service does; :class:`SettingsError` when they do not."""
    path = policy_files.policy_dir(str(directory) if directory is not None else None)
    if not path.is_dir():
        raise SettingsError(f"policy directory {path} does not exist (it needs model.conf and policy.csv)")
    files = policy_files.load(str(path))
    lines = _numbered(files, path / "policy.csv")
    numbers: dict[tuple[str, ...], int] = {}
    for line in lines:
        numbers.setdefault(tuple(line.row), line.number)
    return Policy(directory=path, files=files, lines=lines, snapshot=_PolicySnapshot(files, {}), numbers=numbers)


def _numbered(files: policy_files.PolicyFiles, path: Path) -> list[Line]:
    """Pair the rows :func:`policy_files.load` parsed with their line numbers: it keeps
    one row per line that is neither blank nor a comment, in order."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read policy file {path}: {exc}") from None
    numbered = [(number, line.strip()) for number, line in enumerate(text.splitlines(), start=1)
                if line.strip() and not line.strip().startswith("#")]
    if len(numbered) != len(files.rows):
        raise SettingsError(f"policy file {path} changed while it was read; try again")
    return [Line(number, stripped, row) for (number, stripped), row in zip(numbered, files.rows)]


# -- check ------------------------------------------------------------------------


@dataclass
class Problem:
    line: int
    text: str
    problem: str

    def as_dict(self) -> dict:
        return {"line": self.line, "text": self.text, "problem": self.problem}


def check(policy: Policy) -> list[Problem]:
    """What is wrong with a policy that loads: duplicate lines, roles defined nowhere,
    lines that can never match a request Locky makes. In line order."""
    problems: list[Problem] = []
    roles = policy.roles()
    with_lines = {row[1] for row in policy.rows("p")}
    inheriting = {row[1] for row in policy.rows("g")}
    first: dict[tuple[str, ...], int] = {}

    def report(line: Line, message: str) -> None:
        problems.append(Problem(line.number, line.text, message))

    for line in policy.lines:
        row, kind = line.row, line.row[0]
        key = tuple(row)
        if key in first:
            report(line, f"duplicate of line {first[key]}")
            continue
        first[key] = line.number
        if kind in ("p", "g") and not _holdable(row[1]):
            report(line, f"can never match: {row[1]!r} is not a role name (^[a-z][a-z0-9_-]{{0,63}}$),"
                         " a user uuid, an email or client:CLIENT_ID, so no caller ever holds it")
        if kind == "g":
            parent = row[2]
            if (is_role_name(parent) and parent not in BUILTIN_ROLES and parent not in with_lines
                    and parent not in inheriting):
                report(line, f"unknown role {parent!r}: it has no p lines and inherits from no role,"
                             " so this line grants nothing")
        actions = [row[4]] if kind == "p" else row[1:] if kind == "g2" else []
        for action in actions:
            role = _assigned_role(action)
            if role is not None and role != "custom" and role not in roles:
                report(line, f"unknown role {role!r} in {action!r}: no p or g line defines it"
                             " (roles created through the API are covered by assign:custom)")
        if kind == "p":
            problem = _never_matches(policy, row)
            if problem:
                report(line, problem)
    return problems


def _never_matches(policy: Policy, row: list[str]) -> str | None:
    """Why the ``p`` line ``row`` can never allow a request Locky makes, or ``None``."""
    _, subject, dom, obj, act = row
    role = _assigned_role(act)
    if role in GLOBAL_ROLES:
        return (f"can never match: {role!r} is never a membership role, so no request asks for {act!r}")
    if not _holdable(subject):
        return None  # reported already
    # The line's own request, in each dom Locky asks with: the matcher of an operator's
    # model decides, not an assumption about it.
    rule = row[1:]
    # ``_enforce_over`` decides with these lines only (the snapshot's own helper).
    if any(policy.snapshot._enforce_over([rule], subject, d, obj, act) for d in REQUEST_DOMS):
        return None
    if dom not in REQUEST_DOMS:
        return (f"can never match: its scope {dom!r} is neither '*' nor 'self' (Locky asks with '*',"
                " or 'self' for the caller's own records)")
    return "can never match: the model allows no request with these values"


# -- test -------------------------------------------------------------------------


class CaseError(ValueError):
    """A cases file that cannot be run: every message names its line."""

    def __init__(self, messages: list[str]):
        super().__init__("\n".join(messages))
        self.messages = messages


@dataclass
class Case:
    line: int
    expect: str
    subject: str
    scope: str
    resource: str
    action: str


def read_cases(path: str | Path) -> list[Case]:
    """Parse a cases file: ``expect, subject, scope, resource, action`` per line; an
    optional header line with those names; blank lines and ``#`` comments (whole lines,
    or after a space or a comma) are skipped. Raises :class:`CaseError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError([f"cannot read cases file {path}: {exc}"]) from None
    cases: list[Case] = []
    errors: list[str] = []
    header_allowed = True
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        row = [cell.strip() for cell in next(csv.reader([policy_files._without_comment(stripped)],
                                                        skipinitialspace=True))]
        if header_allowed and [cell.lower() for cell in row] == list(CASE_FIELDS):
            header_allowed = False
            continue
        header_allowed = False
        where = f"{path}:{number}"
        if len(row) != len(CASE_FIELDS) or not all(row):
            errors.append(f"{where}: a case has {len(CASE_FIELDS)} non-empty values"
                          f" ({', '.join(CASE_FIELDS)}), got {row}")
            continue
        expect, subject, scope, resource, action = row
        if expect.lower() not in EXPECTS:
            errors.append(f"{where}: expect must be allow or deny, got {expect!r}")
        elif scope.lower() not in SCOPES:
            errors.append(f"{where}: scope must be global, group or self, got {scope!r}")
        else:
            cases.append(Case(number, expect.lower(), subject, scope.lower(), resource, action))
    if errors:
        raise CaseError(errors)
    if not cases:
        raise CaseError([f"{path}: no cases (expected lines of {', '.join(CASE_FIELDS)})"])
    return cases


@dataclass
class Outcome:
    case: Case
    allowed: bool
    matched: list[list[str]]
    roles: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return self.allowed == (self.case.expect == "allow")


def run_cases(policy: Policy, cases: list[Case]) -> list[Outcome]:
    outcomes = []
    for case in cases:
        request = (case.subject, case.scope, case.resource, case.action)
        outcomes.append(Outcome(case, policy.decide(*request), policy.matching(*request),
                                policy.snapshot.closure(case.subject)))
    return outcomes


def nearby_rules(policy: Policy, outcome: Outcome) -> list[list[str]]:
    """For a denied request: the lines of the subject's roles on its resource (or on
    ``*``), the ones a reader compares the request with."""
    resource = outcome.case.resource
    return [rule for role in outcome.roles for rule in policy.snapshot.index.get(role, ())
            if rule[2] in (resource, "*")]


# -- diff -------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Change:
    role: str
    scope: str
    resource: str
    action: str

    def as_dict(self) -> dict:
        return {"role": self.role, "scope": self.scope, "resource": self.resource, "action": self.action}


def scopes_for(subject: str) -> tuple[str, ...]:
    """``admin``, ``user``, uuids and emails are never membership roles: no ``group`` scope."""
    if subject in GLOBAL_ROLES or not is_role_name(subject):
        return ("global", "self")
    return ("global", "group", "self")


def universe(old: Policy, new: Policy) -> tuple[list[str], list[str], list[str]]:
    """Subjects, resources and actions a diff compares: those either policy names
    (``*`` as written, ``g2`` lines' both sides), Locky's own resources and actions,
    and ``assign:<role>`` for every role of either policy."""
    subjects = old.subjects() | new.subjects()
    resources = set(LOCKY_RESOURCES)
    actions = set(LOCKY_ACTIONS)
    for policy in (old, new):
        for row in policy.rows("p"):
            resources.add(row[3])
            actions.add(row[4])
        for row in policy.rows("g2"):
            actions.update(row[1:])
    actions.update(f"assign:{role}" for role in subjects if is_role_name(role) and role not in GLOBAL_ROLES)
    actions.add("assign:custom")
    return sorted(subjects), sorted(resources), sorted(actions)


def diff(old: Policy, new: Policy) -> tuple[list[Change], list[Change]]:
    """``(gained, lost)``: every (role, scope, resource, action) whose decision differs."""
    subjects, resources, actions = universe(old, new)
    gained: list[Change] = []
    lost: list[Change] = []
    for subject in subjects:
        scopes = scopes_for(subject)
        for resource, action in itertools.product(resources, actions):
            decided: dict[str, tuple[bool, bool]] = {}
            for scope in scopes:
                dom = SCOPES[scope]
                if dom not in decided:
                    decided[dom] = (old.snapshot.enforce(subject, dom, resource, action),
                                    new.snapshot.enforce(subject, dom, resource, action))
                before, after = decided[dom]
                if before != after:
                    (gained if after else lost).append(Change(subject, scope, resource, action))
    order = {scope: index for index, scope in enumerate(SCOPES)}

    def key(change: Change):
        return (change.role, order[change.scope], change.resource, change.action)

    return sorted(gained, key=key), sorted(lost, key=key)
