"""The webhook sender: POSTs queued deliveries to their subscriptions (docs/http/audit.md).

Deliveries are queued in storage in the transaction of the event they carry
(:mod:`locky.audit`); every server process runs one sender thread that claims due ones
(a lease: never two senders at once, and one that died lets go when it ends) and POSTs
each body, signed (``Locky-Signature``), to the subscription's URL:

- a 2xx answer within ``LOCKY_WEBHOOK_TIMEOUT`` seconds (10) is success;
- anything else is retried after 2, 4, 8 ... seconds (at most an hour), each delay
  with up to a quarter of random jitter so that a receiver coming back is not hit by
  every sender at once, for ``LOCKY_WEBHOOK_RETRY_SECONDS`` (24 hours) from the event;
  then the delivery is ``failed``. Replaying one queues it afresh.

At-least-once: a crash between a receiver's answer and storage recording it sends that
delivery again, so receivers skip a ``Locky-Event-Id`` they have seen. Redirects are not
followed (a 3xx is a failure). Before every attempt the target's name is resolved once
and every address checked again (a name may resolve to a private address later); the
attempt connects to those addresses, not to a second lookup's answer (DNS rebinding),
and still says the name: in the Host header, and for https as the TLS server name the
certificate is verified against.
"""

from __future__ import annotations

import http.client
import logging
import random
import socket
import ssl
import time
from datetime import timedelta

from locky.webhooks import signing as webhook_signing
from locky.audit.retention import DailyPrune
from locky.background import BackgroundWorker
from locky.records import Delivery, Webhook, utcnow
from locky.sealing import Sealer, SealError
from locky.webhooks.targets import UNRESOLVED, Address, Target, TargetRefused, target

log = logging.getLogger("locky.webhooks")

#: Seconds a claimed delivery is held by its sender before another may take it: longer
#: than one attempt can take.
LEASE = 60
#: The first retry's delay, and the longest.
FIRST_DELAY = 2
MAX_DELAY = 3600
USER_AGENT = "Locky-Webhooks/1"


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: doubling from
    two seconds, at most an hour, plus up to 25 % jitter."""
    base = min(MAX_DELAY, FIRST_DELAY * 2 ** min(max(attempts - 1, 0), 16))
    return base * (1 + random.uniform(0, 0.25))


def webhook_sealer(context) -> Sealer:
    """Seals webhook secrets at rest (bound to the subscription's uuid)."""
    sealer = context.state.get("webhook_sealer")
    if sealer is None:
        sealer = context.state["webhook_sealer"] = Sealer(context.settings.jwt_secret, "webhooks")
    return sealer


class Attempt:
    """What one POST came to: ``status_code`` (``None`` without an answer) and ``error``."""

    def __init__(self, status_code: int | None = None, error: str = ""):
        self.status_code = status_code
        self.error = error

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300 and not self.error


def open_socket(addresses: tuple[Address, ...], port: int, timeout: float) -> socket.socket:
    """A TCP connection to the first of ``addresses`` that answers (all checked already):
    an address, never a name, so nothing is looked up again."""
    error: OSError = OSError("no address")
    for address in addresses:
        try:
            return socket.create_connection((str(address), port), timeout)
        except OSError as exc:
            error = exc
    raise error


class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection that says ``target.host`` and connects to ``target.addresses``."""

    def __init__(self, target: Target, timeout: float):
        super().__init__(target.host, target.port, timeout=timeout)
        self.addresses = target.addresses

    def connect(self) -> None:
        self.sock = open_socket(self.addresses, self.port, self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PinnedHTTPSConnection(PinnedHTTPConnection):
    """The same over TLS: the server name (SNI) and the certificate's check are the
    host name's, whatever address was connected to."""

    default_port = http.client.HTTPS_PORT

    def __init__(self, target: Target, timeout: float, context: ssl.SSLContext | None = None):
        super().__init__(target, timeout)
        self.context = context or ssl.create_default_context()

    def connect(self) -> None:
        super().connect()
        self.sock = self.context.wrap_socket(self.sock, server_hostname=self.host)


def post(where: Target, body: bytes, headers: dict[str, str], timeout: float,
         context: ssl.SSLContext | None = None) -> Attempt:
    """POST ``body`` to a checked target; the answer's status, or why there was none. The
    whole exchange, connecting included, must finish within ``timeout`` seconds.
    ``context`` is the TLS context of an https target (default: the system's CAs)."""
    deadline = time.monotonic() + timeout
    if where.scheme == "https":
        connection: http.client.HTTPConnection = PinnedHTTPSConnection(where, timeout, context)
    else:
        connection = PinnedHTTPConnection(where, timeout)
    try:
        connection.request("POST", where.path, body=body, headers=headers)
        connection.sock.settimeout(max(0.1, deadline - time.monotonic()))
        response = connection.getresponse()
        response.read(64 * 1024)  # the answer's body is not kept; read a little to end the exchange
        if time.monotonic() > deadline:
            return Attempt(response.status, "timeout")
        return Attempt(response.status, "" if 200 <= response.status < 300 else f"HTTP {response.status}")
    except socket.timeout:
        return Attempt(None, "timeout")
    except (OSError, http.client.HTTPException) as exc:
        return Attempt(None, type(exc).__name__)
    finally:
        connection.close()


class WebhookSender(BackgroundWorker):
    """One app's webhook sender: a daemon thread per process."""

    name = "locky-webhook-sender"
    poll = 2.0
    log = log

    def __init__(self, context):
        super().__init__(context)
        self.retention = DailyPrune(context)  # the audit trail's retention rides on this thread

    def claim(self, limit: int) -> list[Delivery]:
        self.retention.tick()
        return self.context.storage.deliveries.claim(now=utcnow(), lease=LEASE, limit=limit)

    def handle(self, delivery: Delivery) -> None:
        storage = self.context.storage
        webhook = storage.webhooks.get(delivery.webhook_id)
        if webhook is None:  # deleted while this one was on its way
            storage.deliveries.failed(delivery.id, status_code=None, error="webhook deleted", at=utcnow())
            return
        result = self._send(webhook, delivery)
        now = utcnow()
        if result.succeeded:
            storage.deliveries.succeeded(delivery.id, status_code=result.status_code, at=now)
            log.info("webhook %s: delivery %s (%s) succeeded", webhook.id, delivery.id, delivery.event)
            return
        due = now + timedelta(seconds=retry_delay(delivery.attempts))
        give_up = delivery.created_at + timedelta(seconds=self.settings.webhook_retry_seconds)
        if due > give_up:
            storage.deliveries.failed(delivery.id, status_code=result.status_code, error=result.error, at=now)
            log.warning("webhook %s: delivery %s (%s) failed after %d attempts (%s)", webhook.id, delivery.id,
                        delivery.event, delivery.attempts, result.error)
            return
        storage.deliveries.retry(delivery.id, status_code=result.status_code, error=result.error, at=now, due_at=due)
        log.info("webhook %s: delivery %s (%s) attempt %d failed (%s); next at %sZ", webhook.id, delivery.id,
                 delivery.event, delivery.attempts, result.error, due.isoformat(timespec="seconds"))

    def _send(self, webhook: Webhook, delivery: Delivery) -> Attempt:
        try:
            where = target(webhook.url, allow_private=self.settings.webhook_allow_private)
        except TargetRefused as refused:
            if str(refused) == UNRESOLVED:
                return Attempt(None, "target refused: the host name does not resolve")
            return Attempt(None, "target refused: a private address")
        try:
            secret = webhook_sealer(self.context).open(webhook.secret, webhook.uuid)
        except SealError:
            return Attempt(None, "secret does not open: was LOCKY_JWT_SECRET changed?")
        body = delivery.payload.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            webhook_signing.EVENT_ID_HEADER: delivery.event_uuid,
            webhook_signing.SIGNATURE_HEADER: webhook_signing.header(secret, body),
        }
        return post(where, body, headers, self.settings.webhook_timeout)
