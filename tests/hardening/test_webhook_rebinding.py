"""Issue 31, finding 8: a webhook connects to the address that was checked.

The name of a subscription is resolved once per attempt; every address is checked and
the connection goes to those addresses, never to a second lookup's answer. A resolver
in this process (``socket.getaddrinfo`` replaced: the sender is under test, not DNS)
answers a public address first and 127.0.0.1 after, as a rebinding name does; a
receiver on 127.0.0.1 must get nothing.

No packet leaves the machine: the fake resolver answers every name itself (none is
sent to a DNS server), and connecting to anything but 127.0.0.1 is refused in this
process before a packet is sent (and recorded, to show where the sender went).
"""

from __future__ import annotations

import ipaddress
import socket
import time

import pytest

from locky.webhooks import sender as webhook_sender, targets as webhook_targets
from locky.testing import ADMIN_EMAIL, LockyClient
from webhook_receiver import Receiver

WEBHOOKS = "/v1/private/webhooks"
INTERNAL = "/v1/internal/webhooks"
#: A public address (globally routed, and not ours): it only ever passes the check,
#: the guard below keeps every connection to it from leaving the process.
PUBLIC = "93.184.216.34"


class Resolver:
    """``socket.getaddrinfo`` for the test: names from ``answers`` (a list per name,
    used one per lookup, the last one kept), numeric hosts as themselves, every other
    name unresolvable. Never asks a DNS server."""

    def __init__(self, real, answers: dict[str, list[str]]):
        self.real = real
        self.answers = answers
        self.lookups: list[tuple[str, str]] = []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else host
        if name in self.answers:
            queue = self.answers[name]
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            self.lookups.append((name, address))
            return self.real(address, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        try:
            ipaddress.ip_address(name.strip("[]") if name else "")
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        return self.real(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)


@pytest.fixture
def network(monkeypatch):
    """The fake resolver, and a guard that lets connections reach 127.0.0.1 only."""
    resolver = Resolver(socket.getaddrinfo, {})
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    attempts: list[str] = []
    real_connect = socket.socket.connect

    def connect(sock, address):
        host = address[0]
        attempts.append(host)
        if not ipaddress.ip_address(host).is_loopback:
            raise ConnectionRefusedError(f"the test lets no connection leave the machine ({host})")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    resolver.attempts = attempts
    return resolver


@pytest.fixture
def admin_client(locky_app_factory):
    client = LockyClient(locky_app_factory(webhook_allow_private=False, webhook_timeout=2))
    return client, client.account(ADMIN_EMAIL, verified=True)


def deliveries(client, admin, hook_id) -> list[dict]:
    return client.simulate_get(f"{INTERNAL}/{hook_id}/deliveries", headers=admin.headers).json["deliveries"]


def test_a_name_that_rebinds_to_loopback_after_the_check_gets_nothing(network, admin_client):
    client, admin = admin_client
    with Receiver() as receiver:
        # The subscription's check, and the first delivery's, see the public address;
        # any lookup after those answers 127.0.0.1.
        network.answers["rebind.locky-test.example"] = [PUBLIC, PUBLIC, "127.0.0.1"]
        url = f"http://rebind.locky-test.example:{receiver.port}/hook"
        made = client.simulate_post(WEBHOOKS, json={"url": url, "events": ["user.registered"]},
                                    headers=admin.headers)
        assert made.status_code == 201, made.text
        client.register("someone@example.com")  # user.registered: one delivery queued
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            rows = deliveries(client, admin, made.json["id"])
            if rows and rows[0]["attempts"] >= 2 or receiver.seen():
                break
            time.sleep(0.2)
        assert receiver.seen() == [], "a signed delivery reached 127.0.0.1 through a rebinding name"
        rows = deliveries(client, admin, made.json["id"])
        assert rows and rows[0]["attempts"] >= 1 and rows[0]["status"] != "succeeded", rows
    # Where the sender connected: only ever the address its check passed.
    assert set(network.attempts) == {PUBLIC}, network.attempts


def test_delivery_connects_to_the_checked_address_and_still_names_the_host(network):
    """The control, allowed to loopback: the connection goes to the address resolved
    once, and the request says the name in its Host header."""
    network.answers["hooks.locky-test.example"] = ["127.0.0.1", "10.9.9.9"]  # a second lookup would go astray
    with Receiver() as receiver:
        where = webhook_targets.target(f"http://hooks.locky-test.example:{receiver.port}/in?x=1",
                                       allow_private=True)
        assert [str(a) for a in where.addresses] == ["127.0.0.1"]
        attempt = webhook_sender.post(where, b"{}", {"Content-Type": "application/json"}, timeout=5)
        assert attempt.succeeded, attempt.error
        (got,) = receiver.seen()
        assert got.path == "/in?x=1"
        assert got.headers["Host"] == f"hooks.locky-test.example:{receiver.port}"
    assert network.attempts == ["127.0.0.1"]
    assert network.lookups == [("hooks.locky-test.example", "127.0.0.1")]


REFUSED_BY_NAME = {
    "sixtofour-loopback.example": "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "sixtofour-private.example": "2002:a00:5::1",  # 6to4 of 10.0.0.5
    "site-local.example": "fec0::1",
    "ietf-protocol.example": "192.0.0.9",
    "one-of-two-private.example": PUBLIC,  # and, below, 127.0.0.1 beside it
}
REFUSED_LITERALS = ["http://[2002:7f00:1::1]/x", "http://[2002:c0a8:101::1]/x", "http://[fec0::1]/x",
                    "http://[fec0:0:0:1::5]/x", "http://192.0.0.9/x", "http://192.0.0.170/x"]


def test_embedded_private_addresses_and_unresolvable_names_are_refused(network, admin_client, monkeypatch):
    client, admin = admin_client
    for name, address in REFUSED_BY_NAME.items():
        network.answers[name] = [address]
    real = network.__call__

    def two_answers(host, port, *args, **kwargs):
        found = real(host, port, *args, **kwargs)
        if host == "one-of-two-private.example":
            found += real("127.0.0.1", port, *args, **kwargs)
        return found

    monkeypatch.setattr(socket, "getaddrinfo", two_answers)
    urls = [f"https://{name}/x" for name in REFUSED_BY_NAME] + REFUSED_LITERALS
    for url in urls:
        result = client.simulate_post(WEBHOOKS, json={"url": url, "events": ["*"]}, headers=admin.headers)
        assert result.status_code == 400 and set(result.json) == {"url"}, (url, result.text)
        assert "Private, loopback" in result.json["url"], (url, result.json)
    # A name that does not resolve yet is taken; its deliveries are refused (below).
    unresolved = client.simulate_post(WEBHOOKS, json={"url": "https://nowhere.locky-test.example/x", "events": ["*"]},
                                      headers=admin.headers)
    assert unresolved.status_code == 201, unresolved.text
    # The control: a name with public addresses only is accepted.
    network.answers["fine.locky-test.example"] = [PUBLIC]
    fine = client.simulate_post(WEBHOOKS, json={"url": "https://fine.locky-test.example/x",
                                                "events": ["group.deleted"]}, headers=admin.headers)
    assert fine.status_code == 201, fine.text
    assert [w["url"] for w in client.simulate_get(INTERNAL, headers=admin.headers).json["webhooks"]] \
        == ["https://nowhere.locky-test.example/x", "https://fine.locky-test.example/x"]


def test_a_name_that_stops_resolving_is_refused_at_delivery(network):
    with pytest.raises(webhook_targets.TargetRefused) as caught:
        webhook_targets.target("https://gone.locky-test.example/x", allow_private=False)
    assert str(caught.value) == webhook_targets.UNRESOLVED
    with pytest.raises(webhook_targets.TargetRefused):
        webhook_targets.target("https://gone.locky-test.example/x", allow_private=True)
    assert network.attempts == []
