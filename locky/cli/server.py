"""``locky serve``: the app under gunicorn, one app (and one database pool) per worker process,
requests on a few threads each."""

from __future__ import annotations

import errno
import logging
import socket

from gunicorn.glogging import Logger

from locky.cli.logs import JsonFormatter, configure_logging
from locky.settings import Settings, SettingsError

__all__ = ["GunicornLogger", "configure_logging", "serve"]
log = logging.getLogger("locky")


class GunicornLogger(Logger):
    """gunicorn's logger whose handlers write :class:`~locky.cli.logs.JsonFormatter`
    lines (boot, worker and error messages), so ``locky serve`` speaks one format."""

    def setup(self, cfg):
        super().setup(cfg)
        formatter = JsonFormatter()
        for handlers in (self.error_log.handlers, self.access_log.handlers):
            for handler in handlers:
                handler.setFormatter(formatter)


def serve(settings: Settings) -> None:
    """Check the settings once in this process, then serve with ``settings.workers`` processes."""
    import gunicorn.http.wsgi
    from gunicorn.app.base import BaseApplication

    from locky.app import create_app
    from locky.cli.worker import LockyWorker, start_app

    gunicorn.http.wsgi.SERVER = "locky"  # no server version banner

    settings = settings.with_secret()  # made once, before the workers fork
    _require_free_port(settings.host, settings.port)
    create_app(settings, background=False).close()  # fail fast: schema, policy files, plugins

    # The poller gathers bodies up to the app's limit; a larger one is refused unread.
    LockyWorker.body_limit = settings.max_body_bytes

    class LockyServer(BaseApplication):
        def load_config(self):
            self.cfg.set("bind", [f"{_host(settings.host)}:{settings.port}"])
            self.cfg.set("workers", settings.workers)
            # Threads behind a poller: slow and idle clients wait in the poller, not in a
            # worker (see locky/cli/worker.py).
            self.cfg.set("worker_class", "locky.cli.worker.LockyWorker")
            self.cfg.set("threads", settings.threads)
            self.cfg.set("keepalive", 5)
            # A request waits at most a few database timeouts (LOCKY_DB_TIMEOUT); the
            # worker is killed only well after that.
            self.cfg.set("timeout", max(30, settings.db_timeout * 6))
            self.cfg.set("accesslog", None)
            self.cfg.set("logger_class", "locky.cli.server.GunicornLogger")  # JSON lines, as Locky's
            self.cfg.set("graceful_timeout", 10)
            # gunicorn's 8190-byte default would answer an oversized Authorization header
            # with its own HTML 431; this lets it reach the app, which answers the
            # contract's 401 (tokens over 4 KiB are refused there).
            self.cfg.set("limit_request_field_size", 16384)
            self.cfg.set("proc_name", "locky")
            if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 24: no shared ~/.gunicorn socket
                self.cfg.set("control_socket_disable", True)

        def load(self):
            # A worker (re)started while the database is away serves 503s until it
            # answers, instead of failing to boot (which stops the whole server).
            return start_app(lambda: create_app(settings))

    log.info("locky serving on http://%s:%s with %s worker(s)", settings.host, settings.port, settings.workers)
    LockyServer().run()


def _require_free_port(host: str, port: int) -> None:
    """Raise :class:`SettingsError` (``locky serve`` exits 2) when the address cannot be
    listened on: a port another process holds is said as such, at once, instead of
    gunicorn's five retries and "Can't connect to ...". The probe binds as gunicorn
    does (``SO_REUSEADDR``: a port whose old connections linger is free) and lets go."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as exc:
            where = f"{_host(host)}:{port}"
            if exc.errno == errno.EADDRINUSE:
                raise SettingsError(f"cannot listen on {where}: the port is in use by another process;"
                                    " stop it, or choose another port (LOCKY_PORT or --port)") from None
            raise SettingsError(f"cannot listen on {where}: {exc.strerror or exc} (LOCKY_HOST, LOCKY_PORT,"
                                " or --host and --port)") from None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
