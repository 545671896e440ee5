"""Plumbing shared by the three clients: parsers, the per-run context, error reporting.

:func:`new_parser` makes a top-level parser with ``--url``, ``--json`` and
``--version``; :func:`add_command` adds a sub-command that accepts ``--url``,
``--json`` and ``--version`` too, so options work before or after the command words. :func:`run`
parses, dispatches to the command's handler and turns every failure into one
``error: ...`` line on stderr and a non-zero exit status, never a traceback.

Exit statuses: 0 success, 1 any failure (server error, connection, not logged in),
2 bad usage, 3 ``authz check``/``explain``/``batch --exit-status`` denied, 130
interrupted.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TextIO

from locky import __version__

from .http import ApiError, ClientError, HttpClient
from .output import Printer
from .tokens import AuthSession, TokenStore

DEFAULT_URL = "http://127.0.0.1:8080"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_DENIED = 0, 1, 2, 3

Handler = Callable[["Context", argparse.Namespace], "int | None"]


def version() -> str:
    """The package's version, read from the code (an editable install's metadata may be
    older than the checkout)."""
    return __version__


class UsageError(ClientError):
    """The command line is incomplete in a way argparse cannot express."""


@dataclass
class Context:
    """What a command handler needs: its arguments resolved into collaborators."""

    prog: str
    audience: str
    url: str
    printer: Printer
    stdin: TextIO
    stderr: TextIO
    store: TokenStore = field(init=False)
    client: HttpClient = field(init=False)
    session: AuthSession = field(init=False)

    def __post_init__(self) -> None:
        self.store = TokenStore(self.audience)
        self.client = HttpClient(self.url, user_agent=f"{self.prog}/{version()}")
        self.session = AuthSession(self.client, self.store, f"{self.prog} login")

    def note(self, text: str) -> None:
        """A remark for people, on stderr so it never mixes with output scripts parse."""
        self.stderr.write(text + "\n")

    def read_password(self, args: argparse.Namespace, prompt: str = "Password: ", confirm: bool = False) -> str:
        """From one line of stdin with ``--password-stdin``, else prompted without echo."""
        if getattr(args, "password_stdin", False):
            password = self.stdin.readline().rstrip("\r\n")
            if not password:
                raise UsageError("--password-stdin given but standard input has no password line")
            return password
        try:
            password = getpass.getpass(prompt)
            if confirm and password and getpass.getpass("Repeat password: ") != password:
                raise UsageError("the two passwords differ")
        except EOFError:
            raise UsageError("no password given (use --password-stdin in scripts)") from None
        if not password:
            raise UsageError("the password must not be empty")
        return password

    def interactive(self) -> bool:
        """Whether standard input is a terminal a person types at."""
        isatty = getattr(self.stdin, "isatty", None)
        return bool(isatty and isatty())

    def read_code(self, args: argparse.Namespace, prompt: str) -> str:
        """A one-time code (TOTP or recovery code): ``--code`` when given; else the next
        line of standard input when it is not a terminal (with ``--password-stdin``, the
        line after the password); else typed at the prompt (on stderr)."""
        given = getattr(args, "code", None)
        if given is not None:
            if not given.strip():
                raise UsageError("--code must not be empty")
            return given.strip()
        if self.interactive():
            self.stderr.write(prompt)
            self.stderr.flush()
        line = self.stdin.readline()
        code = line.strip()
        if not code:
            if self.interactive():
                raise UsageError("no code given")
            raise UsageError("no code given: use --code, or give it on the next line of standard input")
        return code

    def with_code(
        self,
        args: argparse.Namespace,
        prompt: str,
        attempt: Callable[[str], Any],
        retry: Callable[[ApiError], bool],
        tries: int = 3,
    ) -> Any:
        """``attempt(code)`` with a code from :meth:`read_code`. A person typing at a
        terminal may try again after a wrong code (``retry(error)`` says which errors are
        wrong codes), up to ``tries`` times; scripts get one attempt."""
        if getattr(args, "code", None) is not None or not self.interactive():
            tries = 1
        for left in range(tries - 1, -1, -1):
            code = self.read_code(args, prompt)
            try:
                return attempt(code)
            except ApiError as exc:
                if not left or not retry(exc):
                    raise
                self.note(f"{exc.message} Try again.")
        raise AssertionError("unreachable")  # pragma: no cover

    def ask(self, value: str | None, prompt: str, option: str) -> str:
        """``value`` when given, else a line typed at the terminal."""
        if value:
            return value
        if not self.stdin.isatty():
            raise UsageError(f"{option} is required")
        try:
            answer = input(prompt).strip()
        except EOFError:
            answer = ""
        if not answer:
            raise UsageError(f"{option} is required")
        return answer


class VersionAction(argparse.Action):
    """``--version`` at any level: prints ``PROG VERSION`` (the client's name, not the
    sub-command's) on stdout and exits 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(f"{parser.prog.split()[0]} {version()}\n", sys.stdout)
        parser.exit()


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version`` on ``parser`` (each command has it; see :class:`VersionAction`)."""
    parser.add_argument("--version", action=VersionAction, help="print the client's version and exit")


def _common(suppress: bool) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_version(common)
    default: Any = argparse.SUPPRESS
    common.add_argument(
        "--url",
        metavar="URL",
        default=default if suppress else None,
        help=f"server address (default: $LOCKY_URL, else {DEFAULT_URL})",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=default if suppress else False,
        help="print the server's JSON (sorted keys) instead of tables",
    )
    return common


_SUB_COMMON = _common(suppress=True)


def new_parser(prog: str, description: str, epilog: str | None = None) -> tuple[argparse.ArgumentParser, Any]:
    """The top-level parser and its sub-command set."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=epilog,
        parents=[_common(suppress=False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True,
                                     help="what to do (COMMAND --help for its options)")
    return parser, commands


def add_group(commands: Any, name: str, help: str) -> Any:
    """A command word with sub-commands of its own (``users list``)."""
    parser = commands.add_parser(name, help=help, description=help, parents=[_SUB_COMMON])
    return parser.add_subparsers(title="commands", dest=f"{name}_command", metavar="COMMAND", required=True,
                                 help="what to do (COMMAND --help for its options)")


def add_command(commands: Any, name: str, help: str, handler: Handler, **kwargs: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name, help=help, description=kwargs.pop("description", help), parents=[_SUB_COMMON], **kwargs
    )
    parser.set_defaults(handler=handler)
    return parser


def add_password_stdin(parser: argparse.ArgumentParser, what: str = "the password") -> None:
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help=f"read {what} from the first line of standard input (otherwise it is prompted for, without echo)",
    )


def add_code_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--code",
        metavar="CODE",
        help=f"{what} (otherwise asked for at the terminal, or read from the next line of standard input"
        " when that is not a terminal)",
    )


def resolve_url(explicit: str | None) -> str:
    url = (explicit or os.environ.get("LOCKY_URL") or DEFAULT_URL).strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https:// (got {url!r})")
    return url


def run(
    build: Callable[[], argparse.ArgumentParser],
    audience: str,
    argv: Sequence[str] | None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Parse ``argv``, run the chosen handler, and return the exit status."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        ctx = Context(
            prog=parser.prog,
            audience=audience,
            url=resolve_url(args.url),
            printer=Printer(stdout, args.json),
            stdin=stdin or sys.stdin,
            stderr=stderr,
        )
        status = args.handler(ctx, args)
        stdout.flush()
        return EXIT_OK if status is None else status
    except UsageError as exc:
        stderr.write(f"{parser.prog}: error: {exc}\n")
        return EXIT_USAGE
    except ClientError as exc:
        stderr.write(f"error: {' '.join(str(exc).split())}\n")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:  # `locky-app users list | head`: not worth a message
        _silence_stdout()
        return EXIT_FAILURE
    except OSError as exc:  # the token file or its directory, typically
        stderr.write(f"error: {exc}\n")
        return EXIT_FAILURE


def _silence_stdout() -> None:
    # Python flushes stdout again at exit; point it at /dev/null so that flush is quiet.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
