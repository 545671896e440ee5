"""``locky-anonymous``: the client for people without an account yet (or just one).

Commands: health, register, login, refresh, logout, whoami. Its tokens live in
``$XDG_CONFIG_HOME/locky/anonymous.json``.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from .commands import new_parser, run
from .session_commands import add_health, add_register, add_session_commands

PROG = "locky-anonymous"
EPILOG = f"""examples:
  {PROG} health
  {PROG} register --name Ada --email ada@example.com
  {PROG} login --email ada@example.com
  {PROG} whoami --json
"""


def build_parser() -> argparse.ArgumentParser:
    parser, commands = new_parser(PROG, "Locky public commands: check health, register, log in.", EPILOG)
    add_health(commands)
    add_register(commands)
    add_session_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser, "anonymous", argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
