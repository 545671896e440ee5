"""Mail leaves through the outbox (docs/http/accounts.md): a request only queues a letter; the
background sender delivers it, and an SMTP server that is down, or a process that dies
before sending, only delays the message."""

from __future__ import annotations

import email
import email.policy
import socket
import time

import pytest
from aiosmtpd.controller import Controller
from pony.orm import db_session

from locky import hookimpl
from locky.testing import PASSWORD, LockyClient, MailBox

#: Each waits out an outage or a process restart; the lifecycle tests send mail every run.
pytestmark = pytest.mark.slow


class Collector:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} after {timeout} s"
        time.sleep(0.05)


def test_a_message_waits_out_an_smtp_outage(locky_app_factory):
    port = free_port()  # nothing listens here yet: the server is "down"
    app = locky_app_factory(mailer="smtp", smtp_url=f"smtp://127.0.0.1:{port}", smtp_timeout=2)
    client = LockyClient(app)
    client.register("ada@example.com")
    started = time.monotonic()
    answer = client.simulate_post("/v1/public/users/password/forgot", json={"email": "ada@example.com"})
    assert answer.status_code == 202 and time.monotonic() - started < 1.0  # the request did not wait
    # Both letters (verification, reset) fail and wait for their next attempt.
    wait_for(lambda: app.context.storage.outbox.pending() == 2 and _attempted(app), 5, "no attempt made")
    collector = Collector()
    controller = Controller(collector, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        wait_for(lambda: len(collector.messages) == 2, 20, "the messages did not arrive once the server was up")
        purposes = sorted(m["X-Locky-Purpose"] for m in collector.messages)
        assert purposes == ["reset", "verify"]
        assert all(m["To"] == "ada@example.com" for m in collector.messages)
        # The codes of the failed attempts were spent; the delivered ones work.
        reset = next(m for m in collector.messages if m["X-Locky-Purpose"] == "reset")
        result = client.simulate_post("/v1/public/users/password/reset",
                                      json={"token": MailBox.token(reset), "password": "a brand new passphrase"})
        assert result.status_code == 204, result.text
        # The reset ends with its notice to the address.
        wait_for(lambda: len(collector.messages) == 3, 20, "the reset's notice did not arrive")
    finally:
        controller.stop()
    assert collector.messages[-1]["X-Locky-Purpose"] == "reset-done"
    assert app.context.storage.outbox.pending() == 0


def _attempted(app) -> bool:
    """Every queued letter was tried and failed (released, waiting for its retry): read
    from the Pony tables, since the outbox interface has no read of a letter's state."""
    entities = app.context.storage.entities
    with db_session:
        return all(row.attempts >= 1 and row.held_until is None for row in entities.Letter.select())


class BrokenMailer:
    def send(self, message):
        raise ConnectionError("the mail server is unreachable")


class BrokenMail:
    @hookimpl
    def locky_register_mailers(self, registry):
        registry.add("broken", lambda context: BrokenMailer())


def test_a_letter_outlives_the_process_that_queued_it(locky_app_factory, locky_mail_dir):
    first = locky_app_factory(plugin_objects=[BrokenMail()], mailer="broken")
    LockyClient(first).register("bo@example.com")
    wait_for(lambda: _attempted(first), 5, "the first app made no attempt")
    assert MailBox(locky_mail_dir).messages() == []
    first.close()  # the process "dies" with the letter unsent
    # The letter is due again only after its retry delay; a restart sends it then.
    second = locky_app_factory()
    message = LockyClient(second).mailbox.wait("bo@example.com", "verify", timeout=15)
    code = MailBox.token(message)
    assert LockyClient(second).simulate_post("/v1/public/users/verify", json={"token": code}).status_code == 204
    assert LockyClient(second).login("bo@example.com", PASSWORD)["user"]["email_verified"] is True
