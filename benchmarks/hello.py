"""The reference point: a bare Falcon "hello" app, served like ``locky serve`` (gunicorn
with Locky's worker class, one thread, 5 s keep-alive, no access log), so that ratios
compare Locky with the cost of the same server and the framework alone."""

from __future__ import annotations

import sys

import falcon


class Hello:
    def on_get(self, req, resp):
        resp.media = {"hello": "world"}


def make_app() -> falcon.App:
    app = falcon.App()
    app.add_route("/hello", Hello())
    return app


app = make_app()


def main(argv: list[str]) -> None:
    """``python -m benchmarks.hello HOST PORT WORKERS [THREADS]``: serve it as ``locky
    serve`` would (one thread per worker unless THREADS says otherwise)."""
    from gunicorn.app.base import BaseApplication

    host, port, workers = argv[0], int(argv[1]), int(argv[2])
    threads = int(argv[3]) if len(argv) > 3 else 1

    class HelloServer(BaseApplication):
        def load_config(self):
            self.cfg.set("bind", [f"{host}:{port}"])
            self.cfg.set("workers", workers)
            self.cfg.set("worker_class", "locky.cli.worker.LockyWorker")
            self.cfg.set("threads", threads)
            self.cfg.set("keepalive", 5)
            self.cfg.set("accesslog", None)
            self.cfg.set("graceful_timeout", 10)
            if "control_socket_disable" in self.cfg.settings:
                self.cfg.set("control_socket_disable", True)

        def load(self):
            return make_app()

    HelloServer().run()


if __name__ == "__main__":
    main(sys.argv[1:])
