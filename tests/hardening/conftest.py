"""Fixtures of the hardening suite; the machinery they use lives in :mod:`harden`."""

from __future__ import annotations

import json
import logging

import pytest

from harden import EVIDENCE, RecordingClient
from locky.audit import event_body
from locky.paging import every


@pytest.fixture(autouse=True)
def no_secret_leaks(caplog):
    """Scan what each test saw, in bodies and logs, for passwords, hashes and tokens."""
    caplog.set_level(logging.DEBUG, logger="locky")
    # `locky serve`'s logging setup (if it ran in this process) stops propagation.
    access = logging.getLogger("locky.access")
    attached = not access.propagate
    if attached:
        access.addHandler(caplog.handler)
    start = EVIDENCE.mark()
    yield
    if attached:
        access.removeHandler(caplog.handler)
    EVIDENCE.log("the in-process log (caplog)", caplog.text)
    leaks = EVIDENCE.leaks(start)
    assert not leaks, "secrets leaked:\n" + "\n".join(leaks[:20])


@pytest.fixture
def locky_client(locky_app) -> RecordingClient:
    yield RecordingClient(locky_app)
    # The audit trail is scanned too (CONTRACT §12: no secret in any event's details).
    trail = [event_body(event) for event in every(locky_app.context.storage.audit)]
    EVIDENCE.log("the audit trail", json.dumps(trail))

