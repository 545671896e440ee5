"""Driving a server with ``wrk`` (a separate C process) and reading its report, with
the CPU the server's processes spent meanwhile (:func:`cpu_seconds`); and Python
threads for the loads ``wrk`` cannot make (:func:`in_threads`)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


@dataclass
class Result:
    name: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int  # non-2xx/3xx responses plus socket errors (timeouts, resets)
    #: CPU (user + system) of the server's processes per answered request, in µs
    #: (:func:`run` with ``master_pid``); NaN when not measured.
    cpu_us: float = float("nan")

    def row(self) -> str:
        return f"{self.name:<44} {self.rps:>9.1f} {self.p50_ms:>8.2f} {self.p99_ms:>8.2f} {self.errors:>7}"


def need_wrk() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")
    return path


def _lua_list(values) -> str:
    return "{" + ",".join(json.dumps(v) for v in values) + "}"


def _close(close: bool) -> str:
    """Lua header entry asking the server to close the connection after each answer."""
    return ', ["Connection"] = "close"' if close else ""


#: A wrk ``response`` that stops its thread once it has sent each of ``paths`` once: when
#: it stops, its other connections may each have a request made (``i`` counted) and not
#: yet sent, so it goes this many past the end (about as many connections as a thread has).
_ONE_CYCLE_PAST = 32
_STOP_AFTER_ONE_CYCLE = f"""response = function()
  if i >= #paths + {_ONE_CYCLE_PAST} then wrk.thread:stop() end
end
"""


def get_script(paths: list[str], tokens: list[str] | None, *, close: bool = False, once: bool = False) -> str:
    """Requests cycling through ``paths`` and bearer ``tokens`` (each wrk thread on its
    own; none without tokens); with ``close``, a new connection for every request; with
    ``once``, each wrk thread stops when it has sent every path once (the run's duration
    is then only a bound)."""
    bearer = '["Authorization"] = "Bearer " .. tokens[(i * 7 % #tokens) + 1]' if tokens else ""
    headers = ", ".join(h for h in (bearer, _close(close).lstrip(", ")) if h)
    return f"""
local paths = {_lua_list(paths)}
local tokens = {_lua_list(tokens or [])}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1], {{{headers}}})
end
{_STOP_AFTER_ONE_CYCLE if once else ""}"""


def post_script(path: str, bodies: list[dict]) -> str:
    return f"""
local bodies = {_lua_list([json.dumps(b) for b in bodies])}
local i = 0
request = function()
  i = i + 1
  return wrk.format("POST", "{path}", {{["Content-Type"] = "application/json"}}, bodies[(i % #bodies) + 1])
end
"""


def plain_script(path: str, *, close: bool = False) -> str:
    headers = "{" + _close(close).lstrip(", ") + "}" if close else "nil"
    return f'request = function() return wrk.format("GET", "{path}", {headers}) end\n'


def cpu_seconds(master_pid: int) -> dict[int, float]:
    """User + system CPU seconds of the gunicorn master and each of its workers."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == master_pid or ppid == master_pid:
            found[pid] = (int(fields[11]) + int(fields[12])) / tick
    return found


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two :func:`cpu_seconds` readings of one server."""
    return sum(after[pid] - before.get(pid, 0.0) for pid in after)


def run(name: str, url: str, script: str, *, connections: int = 32, threads: int = 2, seconds: float = 10,
        timeout: float = 10, master_pid: int | None = None) -> Result:
    """One wrk run; bounded by ``seconds``. With ``master_pid`` (the server's gunicorn
    master), its ``cpu_us`` is what the master and its workers spent per answered request."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        lua = f.name
    before = cpu_seconds(master_pid) if master_pid is not None else None
    try:
        out = subprocess.run(
            [need_wrk(), f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
             f"--timeout={int(timeout)}s", "--latency", "-s", lua, url],
            capture_output=True, text=True, timeout=seconds + timeout + 30,
        )
    finally:
        Path(lua).unlink(missing_ok=True)
    spent = cpu_spent(before, cpu_seconds(master_pid)) if before is not None else None
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr}\n{out.stdout}")
    result = parse(name, out.stdout)
    answered = result.requests - result.errors
    if spent is not None and answered > 0:
        result.cpu_us = spent * 1e6 / answered
    return result


def send_each_once(url: str, paths: list[str], tokens: list[str] | None, *, connections: int = 32, threads: int = 2,
                   bound: float = 60.0) -> Result:
    """Every wrk thread sends each of ``paths`` once, and a few past the end again (a
    warm-up that reaches them all, however fast the server is): a run of a second gives the
    rate, then a run long enough for the whole list at that rate, again twice as long while
    one fell short (the machine slowed down), at most ``bound`` seconds. Each thread stops
    when it is through, but wrk ends only at its duration, so the duration is worked out."""
    script = get_script(paths, tokens, once=True)
    whole = len(paths) * threads
    result = run("rate", url, script, connections=connections, threads=threads, seconds=1)
    seconds = min(bound, math.ceil(1.2 * whole / max(result.rps, 1.0)))
    while result.requests < whole:
        result = run("each once", url, script, connections=connections, threads=threads, seconds=seconds)
        if seconds >= bound:
            break
        seconds = min(bound, seconds * 2)
    return result


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise ValueError(f"unreadable wrk latency {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def parse(name: str, text: str) -> Result:
    requests = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", text)
    if not requests:
        raise RuntimeError(f"unreadable wrk output:\n{text}")
    count = int(requests.group(1))
    seconds = _ms(requests.group(2) + requests.group(3)) / 1000
    p50 = re.search(r"^\s+50%\s+(\S+)", text, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", text, re.M)
    errors = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        errors += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        # gunicorn's sync workers close every connection after the response; wrk counts
        # some of those closes as read errors, which are not failed requests.
        errors += int(m.group(1)) + int(m.group(3)) + int(m.group(4))
    return Result(name, count, seconds, count / seconds if seconds else 0.0,
                  _ms(p50.group(1)) if p50 else float("nan"), _ms(p99.group(1)) if p99 else float("nan"), errors)


def in_threads(work: Callable[[int], object], threads: int) -> float:
    """Run ``work(0)`` to ``work(threads - 1)`` at once, each on a thread of its own;
    the seconds until the last one ended."""
    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.monotonic() - started
