"""``python -m benchmarks.request_path``: what one read and one write pass through.

For an item read (``GET /v1/internal/users/{id}`` by an admin) and a write (``POST
/v1/private/members``: a group's owner adds a member), on a fresh SQLite database, it
calls the Falcon app in-process as a WSGI server would, once to warm up and once under
``sys.setprofile``, and prints what the second call did:

- **calls**: Python function calls, as the profiler's ``call`` events (a generator or
  coroutine resumed counts again; calls into C, such as ``bcrypt``'s hashing or
  ``sqlite3``, are not counted), split by where the called function lives: ``locky.*``
  (the core), a bundled or contrib plugin package (``locky_*``: ``locky_pony``,
  ``locky_jwt``, ``locky_casbin``, ...), the standard library (``sys.stdlib_module_names``)
  and third-party packages (the rest: falcon, pony, pluggy, casbin, jwt, ...);
- **modules**: the distinct modules those calls ran in, per side (``locky.*`` and plugin
  modules named with ``--list``), by the function's ``__name__`` global;
- **core <-> plugin crossings**: calls into a core or plugin function whose nearest
  calling frame that is core or plugin (third-party and standard-library frames in
  between, such as pluggy's hook caller, are looked through) is on the other side: the
  core calling into a plugin, or a plugin calling back into the core;
- **SQL statements**: every statement SQLite executed on the request's thread, through
  ``sqlite3``'s ``set_trace_callback`` on every connection the process opens
  (``sqlite3.connect`` is wrapped before the app starts), ``BEGIN``/``COMMIT``/``PRAGMA``
  included and counted apart.

Only the request's own thread is measured: what the app hands to background threads
(mail, webhooks) is not. The request is the WSGI call and the reading of its body, not
Falcon's test client around it, nor the making of its environ. These are counts, not
timings: the same from run to run on one checkout, give or take a few third-party calls
(generated ids of other lengths).

It needs only what any checkout of Locky offers (``locky.create_app``,
``locky.testing.make_settings`` and ``LockyClient``), so it can measure another commit::

    git worktree add /tmp/locky-before <commit>
    python benchmarks/request_path.py --checkout /tmp/locky-before
    python -m benchmarks.request_path              # this checkout

``--checkout`` puts that tree's ``locky``, ``plugins/`` and ``contrib/`` first on
``sys.path`` (the installed distribution's entry points name the plugins by module) and
loads ``locky.policies`` from its ``policies/``.
``--list`` prints the modules and the statements; ``--json`` the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

CORE, PLUGIN, STDLIB, THIRD_PARTY = "locky", "plugins", "stdlib", "third-party"
SIDES = (CORE, PLUGIN, THIRD_PARTY, STDLIB)
OWNED = (CORE, PLUGIN)


def side(module: str) -> str:
    """Where a module belongs: the core, a plugin package, the standard library or a third party."""
    top = module.partition(".")[0]
    if top == "locky":
        return CORE
    if top.startswith("locky_"):
        return PLUGIN
    if top in sys.stdlib_module_names or top in ("__main__", "builtins") or top.startswith("_frozen"):
        return STDLIB
    return THIRD_PARTY


def generated_by(filename: str) -> str:
    """The module of code compiled at run time with no ``__name__`` of its own: the one
    its file name gives (``locky.dump`` compiles ``<locky.dump UserSchema>``), else the
    file name itself (``<string>``: Falcon's compiled router), counted as third-party."""
    first = filename.strip("<>").split(" ", 1)[0]
    if first.partition(".")[0] == "locky" or first.startswith("locky_"):
        return first
    return filename


# -- SQL statements ---------------------------------------------------------------------


class StatementLog:
    """Statements SQLite runs on one thread while switched on, from every connection."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.thread: int | None = None

    def record(self, statement: str) -> None:
        if self.thread == threading.get_ident():
            self.statements.append(" ".join(statement.split()))

    def install(self) -> None:
        """Every ``sqlite3.connect`` from now on traces into this log."""
        connect = sqlite3.connect

        def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            connection.set_trace_callback(self.record)
            return connection

        sqlite3.connect = traced_connect


def statement_kinds(statements: list[str]) -> Counter:
    return Counter(s.split(None, 1)[0].upper() if s else "" for s in statements)


# -- calls, modules, crossings ----------------------------------------------------------


@dataclass
class Trace:
    """What one profiled request passed through."""

    calls: Counter = field(default_factory=Counter)  # by side
    modules: dict[str, set[str]] = field(default_factory=lambda: {s: set() for s in SIDES})
    crossings: Counter = field(default_factory=Counter)  # "locky -> plugins", "plugins -> locky"
    statements: list[str] = field(default_factory=list)
    status: str = ""


class Profiler:
    """A ``sys.setprofile`` function counting calls by module and crossings between sides."""

    def __init__(self, ignore: tuple[Any, ...]) -> None:
        self.trace = Trace()
        self.ignore = ignore
        self.names: dict[Any, str] = {}  # code object -> module name

    def module_of(self, frame) -> str:
        code = frame.f_code
        name = self.names.get(code)
        if name is None:
            name = self.names[code] = frame.f_globals.get("__name__") or generated_by(code.co_filename)
        return name

    def __call__(self, frame, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code in self.ignore:
            return
        module = self.module_of(frame)
        where = side(module)
        self.trace.calls[where] += 1
        self.trace.modules[where].add(module)
        if where not in OWNED:
            return
        caller = frame.f_back
        while caller is not None:
            caller_side = side(self.module_of(caller))
            if caller_side in OWNED:
                if caller_side != where:
                    self.trace.crossings[f"{caller_side} -> {where}"] += 1
                return
            caller = caller.f_back


def environ_for(method: str, path: str, headers: dict[str, str], body: Any = None) -> dict[str, Any]:
    """The WSGI environ of one request from 127.0.0.1, as a server would hand it over."""
    from falcon import testing

    data = b"" if body is None else json.dumps(body).encode()
    return testing.create_environ(path=path, method=method, headers={**headers, "Content-Type": "application/json"},
                                  body=data, remote_addr="127.0.0.1")


def wsgi_call(app: Callable, environ: dict[str, Any]) -> tuple[str, bytes]:
    """One request to the WSGI ``app``: ``(status, body)``, the body read whole."""
    started: list[str] = []

    def start_response(status, response_headers, exc_info=None):
        started.append(status)

    result = app(environ, start_response)
    try:
        content = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    return started[0], content


def request(app: Callable, method: str, path: str, headers: dict[str, str], body: Any = None) -> tuple[str, bytes]:
    return wsgi_call(app, environ_for(method, path, headers, body))


def profiled(app: Callable, log: StatementLog, method: str, path: str, headers: dict[str, str],
             body: Any = None) -> Trace:
    environ = environ_for(method, path, headers, body)  # made before: not the app's work
    profiler = Profiler(ignore=(StatementLog.record.__code__,))
    log.statements = []
    log.thread = threading.get_ident()
    sys.setprofile(profiler)
    try:
        status, _ = wsgi_call(app, environ)
    finally:
        sys.setprofile(None)
        log.thread = None
    profiler.trace.statements = list(log.statements)
    profiler.trace.status = status
    return profiler.trace


# -- the two requests -------------------------------------------------------------------


def measure(workdir: Path) -> dict[str, Trace]:
    from locky import create_app
    from locky.testing import ADMIN_EMAIL, LockyClient, make_settings

    log = StatementLog()
    log.install()
    settings = make_settings(f"sqlite:///{workdir / 'locky.sqlite'}", mail_dir=str(workdir / "mail"))
    app = create_app(settings)
    try:
        client = LockyClient(app)
        admin = client.account(ADMIN_EMAIL, verified=True)
        reader = client.account("reader@example.com")
        owner = client.account("owner@example.com")
        newcomers = [client.account(f"newcomer{n}@example.com") for n in range(2)]
        made = client.simulate_post("/v1/private/groups", json={"name": "measured"}, headers=owner.headers)
        assert made.status_code == 201, made.text
        group = made.json

        read_path = f"/v1/internal/users/{reader.id}"
        status, text = request(app, "GET", read_path, admin.headers)  # warm-up
        assert status.startswith("200"), (status, text)
        figures = {"GET /v1/internal/users/{id}": profiled(app, log, "GET", read_path, admin.headers)}

        def member(user) -> dict[str, str]:
            return {"group_uuid": group["uuid"], "user_uuid": user.uuid, "role": "member"}

        status, text = request(app, "POST", "/v1/private/members", owner.headers, member(newcomers[0]))  # warm-up
        assert status.startswith("201"), (status, text)
        figures["POST /v1/private/members"] = profiled(app, log, "POST", "/v1/private/members", owner.headers,
                                                       member(newcomers[1]))
        for name, trace in figures.items():
            assert trace.status[:1] == "2", (name, trace.status)
        return figures
    finally:
        app.close()


def summary(trace: Trace) -> dict[str, Any]:
    kinds = statement_kinds(trace.statements)
    data = sum(kinds[k] for k in ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE"))
    return {
        "status": trace.status,
        "calls": sum(trace.calls.values()),
        "calls_locky_and_plugins": trace.calls[CORE] + trace.calls[PLUGIN],
        "calls_by_side": {s: trace.calls[s] for s in SIDES},
        "modules_locky_and_plugins": len(trace.modules[CORE]) + len(trace.modules[PLUGIN]),
        "modules_by_side": {s: len(trace.modules[s]) for s in SIDES},
        "crossings": sum(trace.crossings.values()),
        "crossings_by_direction": dict(sorted(trace.crossings.items())),
        "sql_statements": len(trace.statements),
        "sql_data_statements": data,
        "sql_by_kind": dict(sorted(kinds.items())),
    }


def report(figures: dict[str, Trace], listing: bool) -> str:
    lines = []
    for name, trace in figures.items():
        s = summary(trace)
        by = s["calls_by_side"]
        mods = s["modules_by_side"]
        lines += [
            f"{name}  ({s['status']})",
            f"  Python calls            {s['calls']:>6}  (locky {by[CORE]}, plugins {by[PLUGIN]},"
            f" third-party {by[THIRD_PARTY]}, stdlib {by[STDLIB]})",
            f"  locky + plugin calls    {s['calls_locky_and_plugins']:>6}",
            f"  modules locky + plugins {s['modules_locky_and_plugins']:>6}  (locky {mods[CORE]},"
            f" plugins {mods[PLUGIN]}; third-party {mods[THIRD_PARTY]}, stdlib {mods[STDLIB]})",
            f"  core <-> plugin         {s['crossings']:>6}  ("
            + ", ".join(f"{k} {v}" for k, v in s["crossings_by_direction"].items()) + ")",
            f"  SQL statements          {s['sql_statements']:>6}  ({s['sql_data_statements']} reading or writing"
            " rows; " + ", ".join(f"{k} {v}" for k, v in s["sql_by_kind"].items()) + ")",
        ]
        if listing:
            for where in (CORE, PLUGIN, THIRD_PARTY):
                lines.append(f"  {where} modules: " + ", ".join(sorted(trace.modules[where])))
            lines += ["  statements:"] + [f"    {statement}" for statement in trace.statements]
        lines.append("")
    return "\n".join(lines)


def use_policy_files(root: Path) -> None:
    """``locky.policies`` from the tree at ``root`` (its ``policies/``, which the package
    build maps there), not the installed distribution's."""
    import importlib.util

    init = root / "policies" / "__init__.py"
    if not init.exists():
        return
    import locky  # the parent package first, from root

    spec = importlib.util.spec_from_file_location("locky.policies", init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["locky.policies"] = module
    spec.loader.exec_module(module)
    locky.policies = module


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, help="measure this tree of Locky instead of the installed one")
    parser.add_argument("--list", action="store_true", help="print the modules and statements too")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args(argv)
    if options.checkout is not None:
        root = options.checkout.resolve()
        if not (root / "locky" / "__init__.py").exists():
            parser.error(f"no Locky checkout at {root}")
        sys.path[:0] = [str(root), str(root / "plugins"), str(root / "contrib")]
        use_policy_files(root)
    with tempfile.TemporaryDirectory(prefix="locky-request-path-") as workdir:
        figures = measure(Path(workdir))
    import locky
    import locky_pony

    where = Path(locky.__file__).resolve().parent.parent
    plugins = Path(locky_pony.__file__).resolve().parent.parent
    if options.json:
        figures_json = {name: summary(trace) for name, trace in figures.items()}
        print(json.dumps({"checkout": str(where), "plugins": str(plugins), **figures_json}, indent=2))
    else:
        print(f"Locky at {where}, plugins at {plugins}; SQLite, one warmed-up request each\n")
        print(report(figures, options.list))


if __name__ == "__main__":
    main()
