"""``locky-anonymous``: the client for people without an account yet (or just one).

Commands: health, register, verify, resend-verification, forgot-password,
reset-password, login (with a second-factor code when the account has one), refresh,
logout, whoami. Its tokens live in ``$XDG_CONFIG_HOME/locky/anonymous.json``.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from .account_commands import add_account_commands
from .commands import new_parser, run
from .session_commands import add_health, add_register, add_session_commands

PROG = "locky-anonymous"
EPILOG = f"""examples:
  {PROG} health
  {PROG} register --name Ada --email ada@example.com
  {PROG} verify TOKEN
  {PROG} resend-verification ada@example.com
  {PROG} forgot-password ada@example.com
  {PROG} reset-password TOKEN
  {PROG} login --email ada@example.com
  {PROG} login --email ada@example.com --code 123456
  {PROG} whoami --json

A TOKEN that starts with "-" goes after "--": {PROG} verify -- -TOKEN
"""


def build_parser() -> argparse.ArgumentParser:
    parser, commands = new_parser(
        PROG, "Locky public commands: check health, register, verify an email, reset a password, log in.", EPILOG
    )
    add_health(commands)
    add_register(commands)
    add_account_commands(commands)
    add_session_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser, "anonymous", argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
