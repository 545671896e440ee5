"""A background worker thread per process: the mail sender's and the webhook sender's loop.

A worker runs :meth:`BackgroundWorker.work` (one pass: :meth:`~BackgroundWorker.claim`
what is due, for a lease, and :meth:`~BackgroundWorker.handle` each item) over and over: at once again while a pass found work, else after :attr:`poll` seconds or
when :meth:`wake` is called. A pass that fails (storage down) is tried again after 2, 4,
8 ... seconds, at most 30. The thread is a daemon, started on first use and again in a
forked child (a pre-forking server), never in a stopped worker.
"""

from __future__ import annotations

import logging
import os
import threading


class BackgroundWorker:
    """Subclasses set :attr:`name` and :attr:`poll` and implement :meth:`claim` and
    :meth:`handle`."""

    name = "locky-worker"
    #: Seconds between passes when nothing woke the worker.
    poll = 5.0
    log = logging.getLogger("locky")

    def __init__(self, context):
        self.context = context
        self.settings = context.settings
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def claim(self, limit: int) -> list:
        """Up to ``limit`` items due now, held for this worker for a lease."""
        raise NotImplementedError

    def handle(self, item) -> None:
        """Do one claimed item's work (and record how it went)."""
        raise NotImplementedError

    def work(self, limit: int = 10) -> int:
        """One pass: claim what is due and handle it; how many items were claimed (0:
        nothing was due)."""
        if self._stop.is_set():
            return 0
        claimed = self.claim(limit)
        for item in claimed:
            if self._stop.is_set():
                break  # the lease lets it go; another process or the next start takes it
            self.handle(item)
        return len(claimed)

    def start(self) -> None:
        """Run the thread in this process (again after a fork), unless stopped."""
        if self._stop.is_set() or (self._pid == os.getpid() and self._thread is not None):
            return
        with self._lock:
            if self._stop.is_set() or (self._pid == os.getpid() and self._thread is not None):
                return
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Something was queued: look now."""
        self.start()
        self._wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                handled = self.work()
                failures = 0
            except Exception as exc:  # storage down: look again later
                failures += 1
                handled = 0
                if failures == 1:
                    self.log.warning("%s: cannot read its queue (%s); retrying", self.name, type(exc).__name__)
            if handled:
                continue
            self._wake.wait(self.poll if not failures else min(30.0, 2.0 ** failures))
            self._wake.clear()
