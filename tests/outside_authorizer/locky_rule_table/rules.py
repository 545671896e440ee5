"""The rule table: a SQLite file of the plugin's own, made with the default rules.

``rules(role, scope, resource, action)``: ``role`` may do ``action`` on ``resource``,
anywhere it holds the role (``scope`` ``*``) or on the caller's own records only
(``self``); ``*`` as resource or action matches anything, ``write`` covers ``create``,
``update`` and ``delete``, ``assign:custom`` every role made through the API.
``parents(role, parent)``: a role holds its parent's rules too.
``roles(name, description)``: the built-in roles.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

ROLES = {
    "admin": "Everything, everywhere.",
    "user": "Held by every authenticated user: read everything, manage their own account, create groups.",
    "owner": "Owns a group: update and delete it, add and remove its members with any role.",
    "maintainer": "Maintains a group: update it, add and remove members, not as owner.",
    "member": "Belongs to a group; nothing beyond what every user may do.",
    "viewer": "Sees a group; nothing beyond what every user may do.",
    "client": "Held by every machine client: ask the authorization API, introspect tokens.",
}

DEFAULT_RULES = [
    ("admin", "*", "*", "*"),
    ("user", "*", "users", "read"),
    ("user", "*", "groups", "read"),
    ("user", "*", "members", "read"),
    ("user", "*", "roles", "read"),
    ("user", "*", "authz", "read"),
    ("user", "*", "keys", "read"),
    ("user", "*", "tokens", "introspect"),
    ("user", "*", "groups", "create"),
    ("user", "self", "users", "write"),
    ("user", "self", "sessions", "write"),
    ("user", "self", "members", "delete"),
    ("user", "self", "consents", "read"),
    ("user", "self", "consents", "write"),
    ("client", "*", "authz", "read"),
    ("client", "*", "tokens", "introspect"),
    ("maintainer", "*", "groups", "update"),
    ("maintainer", "*", "members", "write"),
    ("maintainer", "*", "members", "assign:maintainer"),
    ("maintainer", "*", "members", "assign:member"),
    ("maintainer", "*", "members", "assign:viewer"),
    ("maintainer", "*", "members", "assign:custom"),
    ("owner", "*", "groups", "write"),
    ("owner", "*", "members", "*"),
]

DEFAULT_PARENTS = [("owner", "maintainer"), ("maintainer", "member"), ("member", "user"), ("viewer", "user")]

SCHEMA = """
CREATE TABLE IF NOT EXISTS roles (name TEXT PRIMARY KEY, description TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rules (
    role TEXT NOT NULL, scope TEXT NOT NULL CHECK (scope IN ('*', 'self')),
    resource TEXT NOT NULL, action TEXT NOT NULL,
    PRIMARY KEY (role, scope, resource, action)
);
CREATE TABLE IF NOT EXISTS parents (role TEXT NOT NULL, parent TEXT NOT NULL, PRIMARY KEY (role, parent));
"""


@dataclass(frozen=True)
class Rule:
    scope: str
    resource: str
    action: str


@dataclass(frozen=True)
class RuleSet:
    """The table as read: rules by role, each role's parents, the built-in roles."""

    rules: dict[str, tuple[Rule, ...]]
    parents: dict[str, tuple[str, ...]]
    descriptions: dict[str, str]


def load(path: str | Path) -> RuleSet:
    """Read the rules file, making it with the defaults when it has no roles yet."""
    connection = sqlite3.connect(str(path))
    try:
        with connection:
            connection.executescript(SCHEMA)
            if connection.execute("SELECT COUNT(*) FROM roles").fetchone()[0] == 0:
                connection.executemany("INSERT INTO roles VALUES (?, ?)", ROLES.items())
                connection.executemany("INSERT OR IGNORE INTO rules VALUES (?, ?, ?, ?)", DEFAULT_RULES)
                connection.executemany("INSERT OR IGNORE INTO parents VALUES (?, ?)", DEFAULT_PARENTS)
        rules: dict[str, list[Rule]] = {}
        for role, scope, resource, action in connection.execute(
                "SELECT role, scope, resource, action FROM rules ORDER BY rowid"):
            rules.setdefault(role, []).append(Rule(scope, resource, action))
        parents: dict[str, list[str]] = {}
        for role, parent in connection.execute("SELECT role, parent FROM parents ORDER BY rowid"):
            parents.setdefault(role, []).append(parent)
        descriptions = dict(connection.execute("SELECT name, description FROM roles ORDER BY rowid"))
    finally:
        connection.close()
    return RuleSet({r: tuple(v) for r, v in rules.items()}, {r: tuple(v) for r, v in parents.items()},
                   descriptions)
