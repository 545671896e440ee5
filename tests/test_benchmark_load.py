"""``benchmarks/load.py``'s ``send_each_once``, the warm-up that makes every wrk thread
send each of its paths once (the single checks of ``benchmarks.authz_api``' throughput:
every worker reads every user before the steady state is measured), against a server
here that counts what it was asked. Not a timing assertion."""

from __future__ import annotations

import collections
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support.benchmark_modules import benchmark_module


class Counting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive, as wrk's connections are
    disable_nagle_algorithm = True  # the head and the body are two writes
    asked: collections.Counter = collections.Counter()
    tokens: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def do_GET(self):  # noqa: N802 (http.server's name)
        with self.lock:
            self.asked[self.path] += 1
            self.tokens[self.headers.get("Authorization")] += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a connection wrk reset as its thread stopped: expected, not worth a traceback


@pytest.fixture
def counting_url():
    """The address of a server here that counts the paths and tokens it is asked."""
    if shutil.which("wrk") is None:
        pytest.skip("needs wrk (.ci/run installs it)")
    Counting.asked.clear()
    Counting.tokens.clear()
    server = _Server(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.mark.extras  # wrk, an OS package (.ci/run installs it)
def test_a_script_sent_once_stops_each_thread_after_its_paths(counting_url):
    load = benchmark_module("load")
    paths = [f"/check?question={n}" for n in range(200)]
    threads, connections = 2, 4
    result = load.run("once", counting_url, load.get_script(paths, ["a-token"], once=True),
                      connections=connections, threads=threads, seconds=3)
    assert result.errors == 0
    # Each thread went through the list from its start and stopped a few past its end, in
    # a run long enough for many rounds: twice each, and those few twice more at most.
    # The stop ends the thread's event loop after the turn it came in: in that turn each
    # of the thread's other connections may still send one request.
    past = load._ONE_CYCLE_PAST
    others = connections // threads - 1
    assert set(Counting.asked) == set(paths)
    assert {Counting.asked[path] for path in paths[past + 1 + others:]} == {2}
    assert max(Counting.asked.values()) <= 4
    assert sum(Counting.asked.values()) <= threads * (len(paths) + past + others)
    assert Counting.tokens == {"Bearer a-token": sum(Counting.asked.values())}


@pytest.mark.extras
def test_every_wrk_thread_sends_each_path_once_however_fast_the_server(counting_url):
    load = benchmark_module("load")
    paths = [f"/check?question={n}" for n in range(3000)]
    result = load.send_each_once(counting_url, paths, ["a-token"], connections=4, threads=2, bound=60)
    assert result.errors == 0
    # Every path at least twice: each thread of the last run sent the whole list.
    assert set(Counting.asked) == set(paths)
    assert min(Counting.asked.values()) >= 2
    assert Counting.tokens == {"Bearer a-token": sum(Counting.asked.values())}
