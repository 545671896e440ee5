"""``locky-app``: the client of an authenticated user.

Reads users, groups, members and roles (with filters and paging), updates or deletes
the caller's own account, manages groups and their members, asks policy questions
(``authz check``, ``explain``, ``batch``, ``permissions``, ``subjects``), and turns the
caller's two-factor authentication on or off (``mfa enable``, ``mfa disable``). Its
tokens live in ``$XDG_CONFIG_HOME/locky/app.json``.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from .account_commands import add_mfa_commands
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
  {PROG} authz explain --user-uuid U --resource groups --action update --group-uuid G
  {PROG} authz batch checks.csv          # user_uuid,resource,action[,group_uuid] lines
  {PROG} authz permissions --user-uuid U
  {PROG} authz subjects --resource invoices --action approve --all
  {PROG} mfa enable
  {PROG} mfa disable --code 123456
"""


def build_parser() -> argparse.ArgumentParser:
    parser, commands = new_parser(PROG, "Locky for an authenticated user.", EPILOG)
    add_session_commands(commands)
    add_mfa_commands(commands)
    add_record_commands(commands, admin=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser, "app", argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
