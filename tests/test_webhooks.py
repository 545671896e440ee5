"""Webhooks (docs/http/audit.md), end to end: subscriptions over the API, deliveries POSTed by
the sender thread to a real HTTP receiver on 127.0.0.1 (:mod:`webhook_receiver`),
signatures checked with :func:`locky.client.verify_signature`, retries, replays,
deletion, and at-least-once delivery across a ``kill -9`` of a real ``locky serve`` and
between two servers sharing one PostgreSQL database (each event exactly once)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from locky.webhooks import sender as webhook_sender, targets as webhook_targets
from locky.client import InvalidSignature, verify_signature
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, LockyClient
from support.server import ServerProcess, free_port, locky_server
from webhook_receiver import Receiver, closed_port

WEBHOOKS = "/v1/private/webhooks"
INTERNAL = "/v1/internal/webhooks"
AUDIT = "/v1/internal/audit"
GROUPS = "/v1/private/groups"
ROLES = "/v1/private/roles"
WAIT = 25.0  # seconds any one wait may take before the test fails

WEBHOOK_KEYS = {"id", "uuid", "url", "events", "description", "created_at"}
DELIVERY_KEYS = {"id", "webhook_id", "event_uuid", "event", "status", "attempts", "last_status_code", "last_error",
                 "next_attempt_at", "last_attempt_at", "created_at"}
SIGNATURE = re.compile(r"^t=(\d+),v1=([0-9a-f]{64})$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


# ---------------------------------------------------------------------------------------
# Helpers: in-process apps (Falcon's test client; the sender thread is real)
# ---------------------------------------------------------------------------------------


#: What example.com resolves to in these tests (no DNS server is asked): a public address
#: that no delivery reaches (see ``no_outside_network``).
EXAMPLE_COM = ipaddress.ip_address("93.184.216.34")


@pytest.fixture(autouse=True)
def no_outside_network(monkeypatch):
    """Subscriptions to example.com pass the target check (its name must resolve to a
    public address), and a delivery connects to nothing beyond 127.0.0.1."""
    real_resolve, real_open = webhook_targets.resolve, webhook_sender.open_socket

    def resolve(host):
        return [EXAMPLE_COM] if host.rstrip(".").lower() == "example.com" else real_resolve(host)

    def open_socket(addresses, port, timeout):
        if not all(address.is_loopback for address in addresses):
            raise ConnectionRefusedError("the tests connect to 127.0.0.1 only")
        return real_open(addresses, port, timeout)

    monkeypatch.setattr(webhook_targets, "resolve", resolve)
    monkeypatch.setattr(webhook_sender, "open_socket", open_socket)


@pytest.fixture
def make_client(locky_app_factory) -> Callable[..., LockyClient]:
    """``make_client(**settings)``: a client of a new app on the test's database."""

    def make(**settings: Any) -> LockyClient:
        return LockyClient(locky_app_factory(**settings))

    return make


@pytest.fixture
def hooks(make_client):
    """A client whose app may send to 127.0.0.1, and its (verified) admin."""
    client = make_client(webhook_allow_private=True)
    return client, client.account(ADMIN_EMAIL, verified=True)


@pytest.fixture
def receiver():
    with Receiver() as running:
        yield running


def subscribe(client, admin, url: str, events: list[str], **extra: Any) -> dict:
    result = client.simulate_post(WEBHOOKS, json={"url": url, "events": events, **extra}, headers=admin.headers)
    assert result.status_code == 201, result.text
    assert result.headers["location"] == f"{INTERNAL}/{result.json['id']}"
    return result.json


def new_group(client, admin, name: str) -> dict:
    result = client.simulate_post(GROUPS, json={"name": name}, headers=admin.headers)
    assert result.status_code == 201, result.text
    return result.json


def audit_events(client, admin, **filters: str) -> list[dict]:
    """Every audit event (all pages) matching ``filters``."""
    events, after = [], 0
    while True:
        result = client.simulate_get(AUDIT, params={**filters, "after_id": str(after), "limit": "100"},
                                     headers=admin.headers)
        assert result.status_code == 200, result.text
        events += result.json["events"]
        after = result.json["next_after_id"]
        if after is None:
            return events


def deliveries(client, admin, webhook_id: int) -> list[dict]:
    result = client.simulate_get(f"{INTERNAL}/{webhook_id}/deliveries", params={"limit": "100"},
                                 headers=admin.headers)
    assert result.status_code == 200, result.text
    assert result.json["next_after_id"] is None
    return result.json["deliveries"]


def poll(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float = WAIT, what: str = "") -> Any:
    """``read()`` until ``done`` of it, every 0.1 s; the last value. Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or done}: last {value!r}")
        time.sleep(0.1)


def settled(items: list[dict]) -> bool:
    return bool(items) and all(item["status"] != "pending" for item in items)


def check_signature(secret: str, request) -> None:
    """The signature is good for the body as received, by the client helper and by the
    contract's formula computed here, and refused (raised, never a value to forget to look
    at) for anything else."""
    assert verify_signature(secret, request.headers, request.body) is None
    verify_signature(secret, request.header_dict, request.body)  # a plain dict
    verify_signature(secret, request.headers, request.body.decode())  # str body
    match = SIGNATURE.match(request.headers["Locky-Signature"])
    assert match, request.headers["Locky-Signature"]
    t, v1 = match.groups()
    assert abs(int(t) - time.time()) < 300
    expected = hmac.new(secret.encode(), t.encode() + b"." + request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, v1)
    # Wrong secret, tampered body, missing or garbled header: refused.
    tampered = request.body.replace(b'"event":"', b'"event":"x', 1)
    assert tampered != request.body
    for key, headers, body in ((secret + "x", request.headers, request.body),
                               ("whsec_" + "A" * 43, request.headers, request.body),
                               (secret, request.headers, tampered),
                               (secret, request.headers, request.body + b" "),
                               (secret, {}, request.body),
                               (secret, {"Locky-Signature": f"t={int(t) + 1},v1={v1}"}, request.body),
                               ("", request.headers, request.body)):
        with pytest.raises(InvalidSignature):
            verify_signature(key, headers, body)


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# ---------------------------------------------------------------------------------------
# 1. Delivery, body, headers and signature; which events go where
# ---------------------------------------------------------------------------------------


def test_a_matching_event_is_delivered_signed_and_matches_the_audit_trail(hooks, receiver):
    client, admin = hooks
    created = subscribe(client, admin, receiver.url("/hook/locky?source=test"), ["group.*"],
                        description="Groups to the ledger")
    assert set(created) == WEBHOOK_KEYS | {"secret"}
    assert created["events"] == ["group.*"] and created["description"] == "Groups to the ledger"
    assert created["url"] == receiver.url("/hook/locky?source=test")
    assert UUID4.match(created["uuid"]) and created["secret"]
    secret = created["secret"]

    group = new_group(client, admin, "Ledger")
    [request] = receiver.wait_for(lambda seen: len(seen) >= 1)
    assert request.method == "POST"
    assert request.path == "/hook/locky?source=test"
    assert request.headers.get_content_type() == "application/json"

    body = request.json
    assert set(body) == {"id", "event", "created_at", "data"}
    assert body["event"] == "group.created"
    assert request.event_id == body["id"]
    [event] = audit_events(client, admin, event="group.created")
    assert event["uuid"] == body["id"] and event["target_uuid"] == group["uuid"]
    assert parse_time(body["created_at"]) == parse_time(event["created_at"])
    assert body["created_at"].endswith("Z")
    data = body["data"]
    assert isinstance(data, dict)
    assert data["target_uuid"] == group["uuid"] and data["actor_uuid"] == admin.uuid
    assert data["target_type"] == "group"
    assert secret not in request.body.decode()
    check_signature(secret, request)

    # Not selected by group.*: a role, a member, a user. Then one that is: group.deleted.
    role = client.simulate_post(ROLES, json={"name": "auditor"}, headers=admin.headers)
    assert role.status_code == 201, role.text
    client.account("ada@example.com")
    deleted = client.simulate_delete(f"{GROUPS}/{group['id']}", headers=admin.headers)
    assert deleted.status_code in (200, 204), deleted.text
    seen = receiver.wait_for(lambda seen: len(seen) >= 2)
    [gone] = audit_events(client, admin, event="group.deleted")
    assert seen[1].event_id == gone["uuid"] and seen[1].json["event"] == "group.deleted"
    check_signature(secret, seen[1])
    # The queue is written with each event: the list is complete now. Nothing else came.
    queued = deliveries(client, admin, created["id"])
    assert [(d["event"], d["event_uuid"]) for d in queued] == [("group.created", event["uuid"]),
                                                                ("group.deleted", gone["uuid"])]
    assert len(receiver.quiet(0.5)) == 0
    assert [r.json["event"] for r in receiver.seen()] == ["group.created", "group.deleted"]


def test_star_gets_everything_and_patterns_select_only_their_events(hooks):
    client, admin = hooks
    with Receiver() as everything, Receiver() as exact, Receiver() as prefixes:
        star = subscribe(client, admin, everything.url(), ["*"])
        only = subscribe(client, admin, exact.url(), ["group.created"])
        some = subscribe(client, admin, prefixes.url(), ["role.*", "user.registered"])
        made = {e["target_uuid"]: e for e in audit_events(client, admin, event="webhook.created")}
        mark = made[some["uuid"]]  # the last subscription: every later event goes to "*"

        group = new_group(client, admin, "Platform")
        assert client.simulate_put(f"{GROUPS}/{group['id']}", json={"description": "d"},
                                   headers=admin.headers).status_code == 200
        assert client.simulate_post(ROLES, json={"name": "reader"}, headers=admin.headers).status_code == 201
        client.account("ada@example.com")  # user.registered, login.succeeded
        client.simulate_post("/v1/public/users/login", json={"email": "ada@example.com", "password": "wrong pass"})
        new_group(client, admin, "Data")

        after = [e for e in audit_events(client, admin) if e["id"] > mark["id"]]
        names = {e["event"] for e in after}
        assert {"group.created", "group.updated", "role.created", "user.registered", "login.succeeded",
                "login.failed"} <= names, names
        everything.wait_for_events([e["uuid"] for e in after])
        exact.wait_for_events([e["uuid"] for e in after if e["event"] == "group.created"])
        prefixes.wait_for_events([e["uuid"] for e in after if e["event"] in ("role.created", "user.registered")])

        # "*" got every event after it was made (the next subscriptions' webhook.created
        # too); the others theirs only.
        star_events = [e for e in audit_events(client, admin) if e["id"] > made[star["uuid"]]["id"]]
        assert {d["event_uuid"] for d in deliveries(client, admin, star["id"])} >= {e["uuid"] for e in star_events}
        assert {d["event"] for d in deliveries(client, admin, only["id"])} == {"group.created"}
        assert len(deliveries(client, admin, only["id"])) == 2
        assert {d["event"] for d in deliveries(client, admin, some["id"])} == {"role.created", "user.registered"}
        settle = lambda: [d for h in (star, only, some) for d in deliveries(client, admin, h["id"])]  # noqa: E731
        poll(settle, settled, what="every delivery to end")
        assert {d["status"] for d in settle()} == {"succeeded"}
        assert made[only["uuid"]]["uuid"] in everything.event_ids()
        assert sorted(exact.event_ids()) == sorted(d["event_uuid"] for d in deliveries(client, admin, only["id"]))
        assert {r.json["event"] for r in prefixes.seen()} == {"role.created", "user.registered"}
        for request in everything.seen():
            check_signature(star["secret"], request)
            with pytest.raises(InvalidSignature):  # each has its own secret
                verify_signature(only["secret"], request.headers, request.body)


# ---------------------------------------------------------------------------------------
# 2. Retry after a failure
# ---------------------------------------------------------------------------------------


@pytest.mark.slow  # waits out the delivery backoff
def test_a_failed_attempt_is_retried_with_the_same_event_and_then_succeeds(hooks):
    client, admin = hooks
    with Receiver(script=[500], default=200) as receiver:
        hook = subscribe(client, admin, receiver.url(), ["group.created"])
        new_group(client, admin, "Retry")
        first, second = receiver.wait_for(lambda seen: len(seen) >= 2, what="a retry")
        assert (first.status, second.status) == (500, 200)
        assert first.event_id == second.event_id and first.body == second.body
        check_signature(hook["secret"], first)
        check_signature(hook["secret"], second)
        # The first retry comes after about two seconds (plus up to 25 % jitter).
        assert 1.8 <= second.at - first.at <= 6.0, second.at - first.at

        [delivery] = poll(lambda: deliveries(client, admin, hook["id"]), settled, what="the delivery to succeed")
        assert set(delivery) == DELIVERY_KEYS
        assert delivery["status"] == "succeeded"
        assert delivery["attempts"] == 2
        assert delivery["last_status_code"] == 200
        assert delivery["last_error"] == ""
        assert delivery["next_attempt_at"] is None and delivery["last_attempt_at"] is not None
        assert delivery["webhook_id"] == hook["id"] and delivery["event"] == "group.created"
        assert delivery["event_uuid"] == first.event_id
        assert len(receiver.quiet(0.3)) == 0


# ---------------------------------------------------------------------------------------
# 3. What may be subscribed, and who may
# ---------------------------------------------------------------------------------------


REFUSED_URLS = [
    "http://127.0.0.1/x",
    "http://localhost/x",
    "http://10.0.0.5/x",
    "http://192.168.1.1/x",
    "http://169.254.169.254/latest",
    "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "https://127.0.0.1:8443/x",
    "ftp://example.com/x",
    "not a url",
    "http:///nohost",
    "https://user:pass@example.com/x",
]


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_private_and_malformed_targets_are_refused(locky_client, locky_admin, url):
    result = locky_client.simulate_post(WEBHOOKS, json={"url": url, "events": ["*"]}, headers=locky_admin.headers)
    assert result.status_code == 400, result.text
    assert set(result.json) == {"url"}, result.json
    listed = locky_client.simulate_get(INTERNAL, headers=locky_admin.headers)
    assert listed.json["webhooks"] == []


def test_a_public_https_url_is_accepted_and_so_is_a_name_that_does_not_resolve_yet(locky_client, locky_admin):
    url = "https://example.com/hook"
    result = locky_client.simulate_post(WEBHOOKS, json={"url": url, "events": ["user.*"]},
                                        headers=locky_admin.headers)
    assert result.status_code == 201, result.text
    assert result.json["url"] == url
    # Its DNS may not be there yet, or not seen from here: deliveries are refused while
    # it does not resolve (tests/hardening/test_webhook_rebinding.py).
    result = locky_client.simulate_post(WEBHOOKS, json={"url": "https://hooks.invalid-locky-test.example/x",
                                                        "events": ["user.*"]}, headers=locky_admin.headers)
    assert result.status_code == 201, result.text


@pytest.mark.parametrize("payload, key", [
    ({"url": "https://example.com/h", "events": ["no.such_event"]}, "events"),
    ({"url": "https://example.com/h", "events": ["user.registered", "users.*"]}, "events"),
    ({"url": "https://example.com/h", "events": ["USER.registered"]}, "events"),
    ({"url": "https://example.com/h", "events": []}, "events"),
    ({"url": "https://example.com/h", "events": "user.registered"}, "events"),
    ({"url": "https://example.com/h"}, "events"),
    ({"events": ["*"]}, "url"),
    ({"url": "https://example.com/h", "events": ["*"], "secret": "mine"}, "secret"),
])
def test_bad_subscriptions_are_400_naming_the_field(locky_client, locky_admin, payload, key):
    result = locky_client.simulate_post(WEBHOOKS, json=payload, headers=locky_admin.headers)
    assert result.status_code == 400, result.text
    assert key in result.json, result.json


def test_only_admins_manage_webhooks(locky_client, locky_admin, locky_user):
    hook = locky_client.simulate_post(WEBHOOKS, json={"url": "https://example.com/h", "events": ["*"]},
                                      headers=locky_admin.headers).json
    calls = [
        ("POST", WEBHOOKS, {"url": "https://example.com/x", "events": ["*"]}),
        ("GET", INTERNAL, None),
        ("GET", f"{INTERNAL}/{hook['id']}", None),
        ("GET", f"{INTERNAL}/{hook['id']}/deliveries", None),
        ("DELETE", f"{WEBHOOKS}/{hook['id']}", None),
        ("POST", f"{WEBHOOKS}/{hook['id']}/deliveries/1/replay", None),
        ("GET", AUDIT, None),
    ]
    for method, path, payload in calls:
        kwargs = {"json": payload} if payload is not None else {}
        anonymous = locky_client.simulate_request(method, path, **kwargs)
        assert anonymous.status_code == 401, (method, path, anonymous.text)
        plain = locky_client.simulate_request(method, path, headers=locky_user.headers, **kwargs)
        assert plain.status_code == 403, (method, path, plain.text)
    # Nothing changed.
    assert [h["id"] for h in locky_client.simulate_get(INTERNAL, headers=locky_admin.headers).json["webhooks"]] \
        == [hook["id"]]


def test_allow_private_lets_loopback_targets_in(make_client):
    client = make_client(webhook_allow_private=True)
    admin = client.account(ADMIN_EMAIL, verified=True)
    for url in ("http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::1]:9/x"):
        result = client.simulate_post(WEBHOOKS, json={"url": url, "events": ["*"]}, headers=admin.headers)
        assert result.status_code == 201, (url, result.text)
    # Still https/http with a host only.
    for url in ("ftp://127.0.0.1/x", "not a url"):
        result = client.simulate_post(WEBHOOKS, json={"url": url, "events": ["*"]}, headers=admin.headers)
        assert result.status_code == 400 and "url" in result.json, (url, result.text)


# ---------------------------------------------------------------------------------------
# 4. The secret is shown once
# ---------------------------------------------------------------------------------------


def test_the_secret_is_only_in_the_201_answer(hooks, receiver, locky_database_url):
    client, admin = hooks
    hook = subscribe(client, admin, receiver.url(), ["*"])
    secret = hook["secret"]
    assert len(secret) >= 32
    item = client.simulate_get(f"{INTERNAL}/{hook['id']}", headers=admin.headers)
    assert item.status_code == 200
    assert set(item.json) == WEBHOOK_KEYS
    assert item.json == {k: v for k, v in hook.items() if k != "secret"}
    listed = client.simulate_get(INTERNAL, headers=admin.headers)
    assert listed.json["webhooks"] == [item.json] and listed.json["next_after_id"] is None
    new_group(client, admin, "Secretive")
    receiver.wait_for(lambda seen: len(seen) >= 1)
    texts = [item.text, listed.text, client.simulate_get(AUDIT, headers=admin.headers).text,
             client.simulate_get(f"{INTERNAL}/{hook['id']}/deliveries", headers=admin.headers).text,
             *(r.body.decode() for r in receiver.seen())]
    for text in texts:
        assert secret not in text and '"secret"' not in text
    # Nor is it kept in the clear.
    if locky_database_url.startswith("sqlite:///"):
        database = Path(locky_database_url.removeprefix("sqlite:///"))
        for path in database.parent.glob(database.name + "*"):
            assert secret.encode() not in path.read_bytes(), path
    # A second subscription gets a secret of its own.
    other = subscribe(client, admin, receiver.url("/other"), ["*"])
    assert other["secret"] != secret


# ---------------------------------------------------------------------------------------
# 5. Replay
# ---------------------------------------------------------------------------------------


def test_replay_sends_the_same_event_again(hooks):
    client, admin = hooks
    with Receiver() as receiver, Receiver() as elsewhere:
        hook = subscribe(client, admin, receiver.url(), ["group.created"])
        other = subscribe(client, admin, elsewhere.url(), ["group.created"])
        new_group(client, admin, "Replayed")
        [original] = poll(lambda: deliveries(client, admin, hook["id"]), settled, what="the first delivery")
        [first] = receiver.wait_for(lambda seen: len(seen) >= 1)
        [foreign] = poll(lambda: deliveries(client, admin, other["id"]), settled, what="the other delivery")
        assert original["status"] == "succeeded"

        result = client.simulate_post(f"{WEBHOOKS}/{hook['id']}/deliveries/{original['id']}/replay",
                                      headers=admin.headers)
        assert result.status_code == 202, result.text
        again = result.json
        assert set(again) == DELIVERY_KEYS
        assert again["id"] != original["id"] and again["webhook_id"] == hook["id"]
        assert (again["event_uuid"], again["event"]) == (original["event_uuid"], original["event"])
        assert again["status"] == "pending" and again["attempts"] == 0

        first, second = receiver.wait_for(lambda seen: len(seen) >= 2, what="the replay")
        assert second.event_id == first.event_id == original["event_uuid"]
        assert second.body == first.body
        check_signature(hook["secret"], second)
        done = poll(lambda: deliveries(client, admin, hook["id"]), lambda items: len(items) == 2 and settled(items))
        assert [(d["id"], d["status"], d["attempts"]) for d in done] == [
            (original["id"], "succeeded", 1), (again["id"], "succeeded", 1)]

        # Only the webhook's own deliveries, and only existing ones.
        missing = [
            f"{WEBHOOKS}/{hook['id']}/deliveries/{foreign['id']}/replay",  # another webhook's
            f"{WEBHOOKS}/{other['id']}/deliveries/{original['id']}/replay",
            f"{WEBHOOKS}/{hook['id']}/deliveries/999999/replay",
            f"{WEBHOOKS}/999999/deliveries/{original['id']}/replay",
        ]
        for path in missing:
            result = client.simulate_post(path, headers=admin.headers)
            assert result.status_code == 404, (path, result.text)
        assert len(deliveries(client, admin, hook["id"])) == 2
        assert len(deliveries(client, admin, other["id"])) == 1
        assert len(receiver.quiet(0.3)) == 0 and len(elsewhere.seen()) == 1


# ---------------------------------------------------------------------------------------
# 6. Delete
# ---------------------------------------------------------------------------------------


def test_a_deleted_webhook_is_gone_and_gets_nothing_more(hooks):
    client, admin = hooks
    with Receiver(default=500) as failing, Receiver() as sentinel:
        hook = subscribe(client, admin, failing.url(), ["group.*"])
        witness = subscribe(client, admin, sentinel.url(), ["group.*"])
        new_group(client, admin, "Doomed")
        failing.wait_for(lambda seen: len(seen) >= 1)
        [pending] = poll(lambda: deliveries(client, admin, hook["id"]),
                         lambda items: items and items[0]["attempts"] >= 1 and items[0]["last_status_code"] == 500)
        assert pending["status"] == "pending" and pending["next_attempt_at"] is not None
        retry_at = parse_time(pending["next_attempt_at"])

        result = client.simulate_delete(f"{WEBHOOKS}/{hook['id']}", headers=admin.headers)
        assert result.status_code == 204, result.text
        assert result.text == ""
        for path in (f"{INTERNAL}/{hook['id']}", f"{INTERNAL}/{hook['id']}/deliveries"):
            assert client.simulate_get(path, headers=admin.headers).status_code == 404, path
        for method, path in (("DELETE", f"{WEBHOOKS}/{hook['id']}"),
                             ("POST", f"{WEBHOOKS}/{hook['id']}/deliveries/{pending['id']}/replay")):
            assert client.simulate_request(method, path, headers=admin.headers).status_code == 404, path
        assert [h["id"] for h in client.simulate_get(INTERNAL, headers=admin.headers).json["webhooks"]] \
            == [witness["id"]]
        [event] = [e for e in audit_events(client, admin, event="webhook.deleted")]
        assert event["target_uuid"] == hook["uuid"]

        # New events reach the other subscription only; the pending retry is not made.
        before = len(failing.seen())
        group = new_group(client, admin, "After")
        [created] = [e for e in audit_events(client, admin, event="group.created")
                     if e["target_uuid"] == group["uuid"]]
        sentinel.wait_for_events([created["uuid"]])
        now = datetime.now(timezone.utc)
        wait = max(0.0, (retry_at.replace(tzinfo=timezone.utc) - now).total_seconds()) + 1.5
        assert failing.quiet(wait) == []
        assert len(failing.seen()) == before


# ---------------------------------------------------------------------------------------
# 7. Retries run out
# ---------------------------------------------------------------------------------------


@pytest.mark.slow  # waits out the delivery backoff
def test_a_delivery_that_keeps_failing_ends_failed(make_client):
    client = make_client(webhook_allow_private=True, webhook_retry_seconds=3, webhook_timeout=1)
    admin = client.account(ADMIN_EMAIL, verified=True)
    with Receiver(default=500) as failing, Receiver(default=200, delay=2.5) as slow:
        refusing = subscribe(client, admin, failing.url(), ["group.created"])
        closed = subscribe(client, admin, f"http://127.0.0.1:{closed_port()}/hook", ["group.created"])
        late = subscribe(client, admin, slow.url(), ["group.created"])
        new_group(client, admin, "Hopeless")
        ended = {}
        for hook in (refusing, closed, late):
            [ended[hook["id"]]] = poll(lambda: deliveries(client, admin, hook["id"]), settled, timeout=WAIT,
                                       what=f"webhook {hook['url']} to give up")
        for delivery in ended.values():
            assert delivery["status"] == "failed", delivery
            assert delivery["attempts"] >= 1 and delivery["last_error"], delivery
            assert delivery["next_attempt_at"] is None and delivery["last_attempt_at"] is not None
        assert ended[refusing["id"]]["last_status_code"] == 500
        assert ended[closed["id"]]["last_status_code"] is None
        # Answering after LOCKY_WEBHOOK_TIMEOUT is no success, even with a 200.
        assert ended[late["id"]]["last_error"]
        assert len(failing.seen()) == ended[refusing["id"]]["attempts"]
        assert len(failing.quiet(0.3)) == 0


# ---------------------------------------------------------------------------------------
# Real servers
# ---------------------------------------------------------------------------------------


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    return {
        "LOCKY_DATABASE_URL": database_url,
        "LOCKY_JWT_SECRET": TEST_SECRET,
        "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL,
        "LOCKY_BCRYPT_ROUNDS": "4",
        "LOCKY_POLICY_DIR": "",
        "LOCKY_PLUGINS": "",
        "LOCKY_WEBHOOK_ALLOW_PRIVATE": "true",
        "LOCKY_LOGIN_MAX_FAILURES_PER_IP": "1000",
        **extra,
    }


def call(server: ServerProcess, method: str, path: str, body: Any = None, token: str | None = None,
         expect: int | None = None) -> Any:
    status, _, payload = server.request(method, path, body, {"Authorization": f"Bearer {token}"} if token else {})
    if expect is not None:
        assert status == expect, (server.url, method, path, status, payload)
    return payload


def server_admin(server: ServerProcess) -> str:
    """Register, prove and log in the admin email; its access token."""
    call(server, "POST", "/v1/public/users/register", {"name": "admin", "email": ADMIN_EMAIL, "password": PASSWORD},
         expect=201)
    server.verify(ADMIN_EMAIL)
    return call(server, "POST", "/v1/public/users/login", {"email": ADMIN_EMAIL, "password": PASSWORD},
                expect=200)["access_token"]


def server_deliveries(server: ServerProcess, token: str, webhook_id: int) -> list[dict]:
    items, after = [], 0
    while True:
        page = call(server, "GET", f"{INTERNAL}/{webhook_id}/deliveries?limit=100&after_id={after}", token=token,
                    expect=200)
        items += page["deliveries"]
        after = page["next_after_id"]
        if after is None:
            return items


def server_audit(server: ServerProcess, token: str, event: str) -> list[dict]:
    items, after = [], 0
    while True:
        page = call(server, "GET", f"{AUDIT}?event={event}&limit=100&after_id={after}", token=token, expect=200)
        items += page["events"]
        after = page["next_after_id"]
        if after is None:
            return items


def kill_hard(server: ServerProcess) -> None:
    """``kill -9`` the server: its master and every worker, no shutdown code runs."""
    os.kill(server.process.pid, signal.SIGKILL)  # the master first, then its workers
    try:
        os.killpg(server.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.process.wait(timeout=10)


@pytest.mark.server
@pytest.mark.slow  # a server killed and started again
def test_pending_deliveries_survive_a_kill_9_of_the_server(tmp_path):
    """The receiver is down while events happen; the server is killed with SIGKILL while
    their deliveries wait for a retry; restarted on the same database with the receiver
    up, every event arrives (at least once) and every delivery ends succeeded."""
    workdir = tmp_path / "run"
    env = server_env(f"sqlite:///{tmp_path / 'locky.sqlite'}")
    port, receiver_port = free_port(), closed_port()
    events = 6
    with locky_server(workdir, env=env, workers=2, port=port) as server:
        token = server_admin(server)
        hook = call(server, "POST", WEBHOOKS, {"url": f"http://127.0.0.1:{receiver_port}/hook",
                                               "events": ["group.created"]}, token, expect=201)
        for number in range(events):
            call(server, "POST", GROUPS, {"name": f"crash-{number}"}, token, expect=201)
        expected = {e["uuid"] for e in server_audit(server, token, "group.created")}
        assert len(expected) == events
        # Every delivery was tried once (refused: nothing listens) and waits for a retry.
        # (attempts counts a claim; last_attempt_at is written once the attempt ended,
        # so no delivery is in flight, held by a lease, when the server is killed.)
        tried = poll(lambda: server_deliveries(server, token, hook["id"]),
                     lambda items: len(items) == events and all(d["last_attempt_at"] for d in items),
                     what="a first attempt of every delivery")
        assert {d["status"] for d in tried} == {"pending"}, tried
        assert all(d["last_error"] and d["last_status_code"] is None for d in tried), tried
        assert {d["event_uuid"] for d in tried} == expected
        kill_hard(server)
        killed_log = server.log()
    assert "Traceback" not in killed_log, killed_log
    # The server stays down until every retry is overdue, as after a real crash.
    due = max(parse_time(d["next_attempt_at"]) for d in tried).replace(tzinfo=timezone.utc)
    time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.3)

    with Receiver(port=receiver_port) as receiver:
        assert receiver.port == receiver_port
        restarted = time.monotonic()
        with locky_server(workdir, env=env, workers=2, port=port) as server:
            try:
                receiver.wait_for_events(expected, timeout=WAIT)
            except AssertionError as exc:
                state = [{k: d[k] for k in ("id", "status", "attempts", "last_error", "next_attempt_at",
                                            "last_attempt_at")} for d in server_deliveries(server, token, hook["id"])]
                raise AssertionError(f"{exc}\ndeliveries after the restart: {state}\n"
                                     f"server log:\n{server.log()}") from None
            arrived = time.monotonic() - restarted
            done = poll(lambda: server_deliveries(server, token, hook["id"]), settled, what="every delivery to end")
            assert len(done) == events
            assert {d["status"] for d in done} == {"succeeded"}, done
            assert all(d["last_status_code"] == 200 for d in done)
            assert {d["event_uuid"] for d in done} == expected
        counts = Counter(receiver.event_ids())
        assert set(counts) == expected  # none lost, nothing else
        for request in receiver.seen():
            check_signature(hook["secret"], request)
    print(f"deliveries arrived {arrived:.1f}s after the restart began; received {dict(Counter(counts.values()))}")


@pytest.mark.server
@pytest.mark.backend
def test_two_servers_on_one_postgres_send_each_event_exactly_once(tmp_path, postgres_database):
    """Two ``locky serve`` (two workers each: four sender threads) on one PostgreSQL
    database, with events made through both: the receiver, answering 200 at once, gets
    every event exactly once."""
    postgres_database.wipe()
    env = server_env(postgres_database.url, LOCKY_MAIL_DIR=str(tmp_path / "mail"),  # one outbox, one folder
                     LOCKY_JWT_ISSUER="http://locky.test")
    total = 30
    with Receiver() as receiver, ExitStack() as stack:
        a = stack.enter_context(locky_server(tmp_path / "a", env=env, workers=2))
        b = stack.enter_context(locky_server(tmp_path / "b", env=env, workers=2))
        token = server_admin(a)
        hook = call(b, "POST", WEBHOOKS, {"url": receiver.url(), "events": ["group.created"]}, token, expect=201)

        def create(number: int) -> None:
            call((a, b)[number % 2], "POST", GROUPS, {"name": f"pg-{number}"}, token, expect=201)

        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(create, range(total)))
        expected = {e["uuid"] for e in server_audit(a, token, "group.created")}
        assert len(expected) == total
        receiver.wait_for_events(expected, timeout=WAIT)
        done = poll(lambda: server_deliveries(b, token, hook["id"]), settled, what="every delivery to end")
        assert len(done) == total and {d["status"] for d in done} == {"succeeded"}
        receiver.quiet(1.0)  # a late duplicate would show now
        counts = Counter(receiver.event_ids())
        duplicates = {event: n for event, n in counts.items() if n > 1}
        assert not duplicates, duplicates
        assert set(counts) == expected
        assert all(d["attempts"] == 1 for d in done), done
