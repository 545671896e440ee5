"""``locky-admin``: the administrator's client.

Everything ``locky-app`` does (``authz`` questions included), on any record, plus role
management (``roles create``, ``update``, ``delete`` with repeatable ``--permission
RESOURCE:ACTION``), updating or deleting any user, and disabling or enabling accounts
(``users disable``, ``users enable``), the audit trail (``audit list``) and webhooks
(``webhooks create``, ``list``, ``get``, ``delete``, ``deliveries``, ``replay``). Its
tokens live in
``$XDG_CONFIG_HOME/locky/admin.json``.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from .account_commands import add_mfa_commands
from .audit_commands import add_audit_commands
from .commands import new_parser, run
from .record_commands import add_record_commands
from .session_commands import add_session_commands

PROG = "locky-admin"
EPILOG = f"""examples:
  {PROG} login --email admin@example.com
  {PROG} roles create --name auditor --permission users:read --permission groups:read
  {PROG} users update 7 --email new@example.com
  {PROG} users delete 7
  {PROG} users disable 7
  {PROG} users enable 7
  {PROG} authz subjects --resource roles --action write
  {PROG} audit list --event 'login.*' --since 2026-11-24T00:00:00Z --all
  {PROG} webhooks create --url https://hooks.example.com/locky --event 'user.*' --event group.deleted
  {PROG} webhooks deliveries 1
  {PROG} webhooks replay 1 42
"""


def build_parser() -> argparse.ArgumentParser:
    parser, commands = new_parser(PROG, "Locky administration: every record, and roles.", EPILOG)
    add_session_commands(commands)
    add_mfa_commands(commands)
    add_record_commands(commands, admin=True)
    add_audit_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser, "admin", argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
