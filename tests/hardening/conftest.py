"""Fixtures of the hardening suite; the machinery they use lives in :mod:`harden`."""

from __future__ import annotations

import logging

import pytest

from harden import EVIDENCE, RecordingClient


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
    return RecordingClient(locky_app)

