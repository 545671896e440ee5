"""The reference point: a bare Falcon "hello" app, served like ``locky serve`` (gunicorn
with Locky's worker class, one thread, 5 s keep-alive, no access log), so that ratios
compare Locky with the cost of the same server and the framework alone."""

from __future__ import annotations

import sys
from typing import Callable

import falcon


class Hello:
    def on_get(self, req, resp):
        resp.media = {"hello": "world"}


def make_app() -> falcon.App:
    app = falcon.App()
    app.add_route("/hello", Hello())
    return app


app = make_app()


WORKER_CLASS = "locky.cli.worker.LockyWorker"


def serve(make: Callable[[], Callable], host: str, port: int, workers: int, threads: int = 1,
          worker_class: str = WORKER_CLASS) -> None:
    """Serve the WSGI app ``make()`` builds (in each worker) as ``locky serve`` serves
    Locky: gunicorn with Locky's worker class (or ``worker_class``), 5 s keep-alive, no
    access log."""
    from gunicorn.app.base import BaseApplication

    class Server(BaseApplication):
        def load_config(self):
            self.cfg.set("bind", [f"{host}:{port}"])
            self.cfg.set("workers", workers)
            self.cfg.set("worker_class", worker_class)
            self.cfg.set("threads", threads)
            self.cfg.set("keepalive", 5)
            self.cfg.set("accesslog", None)
            self.cfg.set("graceful_timeout", 10)
            if "control_socket_disable" in self.cfg.settings:
                self.cfg.set("control_socket_disable", True)

        def load(self):
            return make()

    Server().run()


def main(argv: list[str]) -> None:
    """``python -m benchmarks.hello HOST PORT WORKERS [THREADS [WORKER_CLASS]]``: serve it as
    ``locky serve`` would (one thread per worker unless THREADS says otherwise)."""
    serve(make_app, argv[0], int(argv[1]), int(argv[2]), int(argv[3]) if len(argv) > 3 else 1,
          argv[4] if len(argv) > 4 else WORKER_CLASS)


if __name__ == "__main__":
    main(sys.argv[1:])
