"""``locky-app``: the client of an authenticated user.

Reads users, groups, members and roles (with filters and paging), updates or deletes
the caller's own account, manages groups and their members, and asks policy questions
(``authz check``). Its tokens live in ``$XDG_CONFIG_HOME/locky/app.json``.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from .commands import new_parser, run
from .record_commands import add_record_commands
from .session_commands import add_session_commands

PROG = "locky-app"
EPILOG = f"""examples:
  {PROG} login --email ada@example.com
  {PROG} groups create --name ops --description "On-call team"
  {PROG} members add --group-uuid G --user-uuid U --role maintainer
  {PROG} users list --all --json
  {PROG} authz check --user-uuid U --resource groups --action write --group-uuid G
"""


def build_parser() -> argparse.ArgumentParser:
    parser, commands = new_parser(PROG, "Locky for an authenticated user.", EPILOG)
    add_session_commands(commands)
    add_record_commands(commands, admin=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser, "app", argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
