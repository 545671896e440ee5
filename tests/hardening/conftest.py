"""Fixtures of the hardening suite; the machinery they use lives in :mod:`harden`."""

from __future__ import annotations

import json
import logging

import pytest

from harden import EVIDENCE, RecordingClient
from locky.audit import event_body
from locky.app import create_app
from locky.paging import every
from locky.testing import LockyClient, make_settings


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
    # The audit trail is scanned too (docs/http/audit.md: no secret in any event's details).
    trail = [event_body(event) for event in every(locky_app.context.storage.audit)]
    EVIDENCE.log("the audit trail", json.dumps(trail))


@pytest.fixture
def app_on(database_url):
    """``app_on(**settings) -> LockyClient``: an app on the test's database (every engine),
    with ``settings`` over the test defaults; closed after the test."""
    apps = []

    def make(**overrides) -> LockyClient:
        app = create_app(make_settings(database_url, log_requests=False, **overrides))
        apps.append(app)
        return LockyClient(app)

    yield make
    for app in reversed(apps):
        app.close()
