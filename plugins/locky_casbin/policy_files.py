"""Finding, reading and checking the Casbin policy files (``model.conf``, ``policy.csv``)."""

from __future__ import annotations

import csv
import re
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import casbin

from locky import ROLE_NAME, UUID4, SettingsError

DESCRIPTION = re.compile(r"^#\s*role\s+([a-z][a-z0-9_-]{0,63})\s*:\s*(.+)\Z")
#: Where a trailing comment starts: a ``#`` after a space or a comma. Role names,
#: scopes, resources, actions and uuids hold no ``#``; an email may (``a#b@example.com``)
#: but never after a space or a comma, so the rule is unambiguous.
TRAILING_COMMENT = re.compile(r"(?<=[\s,])#.*\Z")
ARITY = {"p": 5, "g": 3, "g2": 3}
TRIAL_SUBJECTS = 32
#: Held around every Casbin decision in the process. Casbin parses its matcher with
#: ``ast.parse`` on each ``enforce``, and CPython 3.11 raises ``SystemError: AST
#: constructor recursion depth mismatch`` when two threads build ASTs at once while a
#: third runs a finalizer (the AST state is per interpreter, not per thread). Two apps
#: starting in one process hit it in CI. The snapshot also swaps its ``p`` lines for the
#: length of a call, which the lock makes safe.
EVALUATION = threading.Lock()


def is_user_uuid(subject: str) -> bool:
    """Whether a ``g``/``p`` line's subject is a user's uuid (every user's uuid is a
    UUID4, and no role may take that shape)."""
    return UUID4.fullmatch(subject) is not None


#: A machine client's subject as a policy line names it: ``client:<client_id>``
#: (client_ids are URL-safe: docs/http/oauth.md).
CLIENT_SUBJECT = re.compile(r"^client:[A-Za-z0-9._~-]{1,128}$")


def is_client_subject_name(subject: str) -> bool:
    """Whether a ``g``/``p`` line's subject names a machine client."""
    return CLIENT_SUBJECT.fullmatch(subject) is not None


def is_role_name(name: str) -> bool:
    """Whether a name in a policy line is a role: a valid role name, not a user's uuid."""
    return ROLE_NAME.fullmatch(name) is not None and not is_user_uuid(name)


@dataclass
class PolicyFiles:
    """The parsed policy: model text, policy rows by section, role descriptions."""

    model_text: str
    rows: list[list[str]] = field(default_factory=list)
    descriptions: dict[str, str] = field(default_factory=dict)
    source: str = ""


def policy_dir(configured: str | None) -> Path:
    """The operator's directory, or the one shipped inside the package."""
    if configured:
        return Path(configured).expanduser().resolve()
    try:
        return Path(str(resources.files("locky.policies")))
    except ModuleNotFoundError:  # a source checkout without an install
        return Path(__file__).resolve().parents[2] / "policies"


def load(configured: str | None) -> PolicyFiles:
    """Read and check both files; any problem raises :class:`SettingsError`."""
    directory = policy_dir(configured)
    model_path, policy_path = directory / "model.conf", directory / "policy.csv"
    model_text = _read(model_path)
    try:
        model = casbin.Model()
        model.load_model_from_text(model_text)
        for section in ("r", "p", "e", "m"):
            if section not in model.keys():
                raise ValueError(f"section {section!r} is missing")
    except Exception as exc:
        raise SettingsError(f"policy model {model_path} does not parse: {exc}") from None
    files = PolicyFiles(model_text=model_text, source=str(directory))
    text = _read(policy_path)
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            match = DESCRIPTION.match(stripped)
            if match:
                files.descriptions[match.group(1)] = match.group(2).strip()
            continue
        row = [cell.strip() for cell in next(csv.reader([_without_comment(stripped)], skipinitialspace=True))]
        kind = row[0]
        if kind not in ARITY:
            raise SettingsError(f"{policy_path}:{number}: unknown line type {kind!r} (expected p, g or g2)")
        if len(row) != ARITY[kind] or not all(row):
            raise SettingsError(
                f"{policy_path}:{number}: a {kind} line has {ARITY[kind] - 1} non-empty values, got {row[1:]}"
            )
        for cell in row[1:]:
            if "#" in cell and "@" not in cell:
                raise SettingsError(
                    f"{policy_path}:{number}: {cell!r} holds a '#': a comment after the values needs a"
                    " space before it (p, user, *, groups, read  # why)"
                )
        if kind in ("p", "g") and "@" in row[1]:
            # Emails are stored lowercased: an upper-case subject would never match.
            row[1] = row[1].lower()
        files.rows.append(row)
    _trial(files, directory)
    return files


def _without_comment(line: str) -> str:
    """``line`` without its trailing ``# comment``."""
    return TRAILING_COMMENT.sub("", line).rstrip()


def _trial(files: PolicyFiles, directory: Path) -> None:
    """Decide a few requests with both files loaded, so that what Casbin only notices
    when it enforces (a matcher that does not compile or names something unknown, an
    unsupported effect, request or policy definitions not shaped ``sub, dom, obj,
    act``, a ``g2`` line without a ``g2`` definition) stops startup instead of failing
    every request."""
    try:
        model = casbin.Model()
        model.load_model_from_text(files.model_text)
        enforcer = casbin.Enforcer(model)
        # One p line of each of the first subjects (bounded, so a long file does not
        # slow startup), and every g/g2 line.
        first_lines: dict[str, list[str]] = {}
        for row in files.rows:
            if row[0] == "p" and len(first_lines) < TRIAL_SUBJECTS:
                first_lines.setdefault(row[1], row)
        firsts = list(first_lines.values())
        for row in firsts + [row for row in files.rows if row[0] != "p"]:
            enforcer.model.add_policy(row[0][0], row[0], row[1:])
        enforcer.build_role_links()
        with EVALUATION:
            enforcer.enforce("user", "*", "users", "read")
            for row in firsts:  # one request each of these lines matches
                enforcer.enforce(*row[1:])
    except Exception as exc:
        raise SettingsError(
            f"policy files in {directory} do not work with Locky's requests (sub, dom, obj, act):"
            f" {type(exc).__name__}: {exc}"
        ) from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read policy file {path}: {exc}") from None
