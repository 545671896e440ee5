"""Locky's worker with gunicorn's hand-off kept, for ``benchmarks.servers`` to run beside
``locky serve``: every complete request goes to a request thread and its answer back to
the poller (gunicorn's ``gthread``), even with one thread. The difference between the two
is what serving on the poller's thread saves."""

from __future__ import annotations

from gunicorn.workers.gthread import ThreadWorker

from locky.cli.worker import LockyWorker


class HandOffWorker(LockyWorker):
    def enqueue_req(self, conn):
        ThreadWorker.enqueue_req(self, conn)
