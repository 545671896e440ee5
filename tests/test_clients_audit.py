"""``locky-admin audit list`` and ``locky-admin webhooks ...`` (docs/http/audit.md) against a
real Locky server over a real socket, the way ``tests/test_clients.py`` runs the clients.

The server may send webhooks to private addresses here (``webhook_allow_private``), so
deliveries go to a real receiver on 127.0.0.1 that records what it gets; one test runs a
second server with the shipped default to see such a URL refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from locky.cli.clients import admin, app
from locky.cli.clients.audit_commands import SECRET_NOTE
from locky.testing import ADMIN_EMAIL, make_settings

from clients_fixtures import alice, cli, home, mailbox, root, server  # noqa: F401
from clients_helpers import LiveServer, command_paths

FORBIDDEN = "error: 403: Forbidden: The policy does not allow this operation.\n"
NOT_FOUND = "error: 404: Not Found: No such record.\n"
COMMANDS = {"audit list", "webhooks create", "webhooks list", "webhooks get", "webhooks delete",
            "webhooks deliveries", "webhooks replay"}


@pytest.fixture
def locky_settings(locky_database_url, locky_mail_dir):
    # As clients_fixtures', plus webhooks to 127.0.0.1 (the receiver below).
    return make_settings(locky_database_url, log_requests=False, mail_dir=locky_mail_dir,
                         webhook_allow_private=True)


class Receiver:
    """A webhook receiver on 127.0.0.1: records each POST (headers, body) and answers
    the statuses of ``script`` in order, then 200."""

    def __init__(self, script=()):
        self.script = list(script)
        self.requests: list[tuple[dict[str, str], bytes, int]] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.changed:
                    status = receiver.script.pop(0) if receiver.script else 200
                    receiver.requests.append((dict(self.headers.items()), body, status))
                    receiver.changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def wait(self, count, timeout=20.0):
        """The first ``count`` requests, once they came."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"expected {count} deliveries, got {len(self.requests)}"
                self.changed.wait(left)
            return list(self.requests[:count])

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def rows(text):
    return [line.split() for line in text.splitlines()]


def listing(text):
    return dict((line.split(None, 1) + [""])[:2] for line in text.splitlines())  # "" for an empty value


def events(cli, *argv):
    return cli.ok("admin", "audit", "list", "--json", *argv).json()["events"]


def deliveries_when(cli, webhook_id, done, timeout=20.0):
    """``webhooks deliveries ID --json`` until ``done(deliveries)``; the deliveries then."""
    deadline = time.monotonic() + timeout
    while True:
        found = cli.ok("admin", "webhooks", "deliveries", str(webhook_id), "--json", "--all").json()["deliveries"]
        if done(found):
            return found
        assert time.monotonic() < deadline, f"deliveries never got there: {found}"
        time.sleep(0.1)


# --- the command tree ------------------------------------------------------------------

def test_admin_only_commands():
    assert COMMANDS <= set(command_paths(admin.build_parser()))
    assert not {path for path in command_paths(app.build_parser()) if path.split()[:1] in (["audit"], ["webhooks"])}


@pytest.mark.parametrize("argv, message", [
    (["audit", "list", "--limit", "many"], "argument --limit: invalid int value: 'many'"),
    (["audit", "list", "--event"], "argument --event: expected one argument"),
    (["webhooks", "create", "--url", "https://example.com/hook"], "the following arguments are required: --event"),
    (["webhooks", "create", "--event", "user.*"], "the following arguments are required: --url"),
    (["webhooks", "get"], "the following arguments are required: id"),
    (["webhooks", "get", "x"], "argument id: invalid int value: 'x'"),
    (["webhooks", "delete"], "the following arguments are required: id"),
    (["webhooks", "deliveries", "1", "--after-id", "x"], "argument --after-id: invalid int value: 'x'"),
    (["webhooks", "replay", "1"], "the following arguments are required: DELIVERY_ID"),
    (["webhooks", "replay", "1", "two"], "argument DELIVERY_ID: invalid int value: 'two'"),
])
def test_bad_arguments_exit_2(argv, message, home, capsys):
    assert admin.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: locky-admin ") and f"locky-admin {' '.join(argv[:2])}: error: {message}\n" in err


def test_extra_arguments_exit_2(home, capsys):
    assert admin.main(["webhooks", "list", "7"]) == 2
    assert capsys.readouterr().err.endswith("locky-admin: error: unrecognized arguments: 7\n")


def test_webhooks_create_url_is_the_receiver(home, capsys):
    """On ``webhooks create`` --url names the receiver (the API's field); the server's
    address goes before the command words, and --json works either side."""
    args = admin.build_parser().parse_args(["--url", "http://locky.test:8080", "webhooks", "create", "--json",
                                            "--url", "https://example.com/hook", "--event", "user.*",
                                            "--event", "group.deleted"])
    assert (args.url, args.webhook_url, args.events, args.json) == (
        "http://locky.test:8080", "https://example.com/hook", ["user.*", "group.deleted"], True)
    assert admin.main(["webhooks", "create", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--url URL" in out and "the receiver" in out and "--json" in out
    # every other command keeps --url for the server
    args = admin.build_parser().parse_args(["webhooks", "list", "--url", "http://locky.test:8080"])
    assert args.url == "http://locky.test:8080"


# --- the audit trail --------------------------------------------------------------------

def test_audit_list_shows_what_happened(cli, root, alice):
    group = cli.ok("app", "groups", "create", "--json", "--name", "ops").json()

    [event] = events(cli, "--event", "group.created")
    assert (event["event"], event["actor_uuid"], event["target_type"], event["target_uuid"]) == (
        "group.created", alice["uuid"], "group", group["uuid"])
    assert event["details"] == {"name": "ops", "owner_uuid": alice["uuid"]} and event["ip"] == "127.0.0.1"
    assert set(event) == {"id", "uuid", "created_at", "event", "actor_uuid", "target_type", "target_uuid", "ip",
                          "request_id", "details"}

    # the table: chosen columns, details as sorted JSON
    out = cli.ok("admin", "audit", "list", "--event", "group.created").out.splitlines()
    assert out[0].split() == ["ID", "CREATED_AT", "EVENT", "ACTOR_UUID", "TARGET_TYPE", "TARGET_UUID", "IP", "DETAILS"]
    assert out[1].split() == [str(event["id"]), event["created_at"], "group.created", alice["uuid"], "group",
                              group["uuid"], "127.0.0.1", '{"name":', '"ops",', '"owner_uuid":', f'"{alice["uuid"]}"}}']
    assert len(out) == 2

    # filters: a prefix, the actor, the target, the time
    names = [e["event"] for e in events(cli, "--actor", alice["uuid"])]
    assert names == ["login.succeeded", "group.created"]
    assert {e["event"] for e in events(cli, "--event", "group.*")} == {"group.created"}
    assert [e["event"] for e in events(cli, "--target", group["uuid"])] == ["group.created"]
    assert [e["id"] for e in events(cli, "--since", event["created_at"], "--event", "group.created")] == [event["id"]]
    assert events(cli, "--until", event["created_at"], "--event", "group.created") == []
    registered = events(cli, "--event", "user.registered")
    assert [e["target_uuid"] for e in registered] == [root["uuid"], alice["uuid"]]
    assert all(e["actor_uuid"] is None for e in registered)  # nobody was logged in
    # nothing secret in the trail
    everything = cli.ok("admin", "audit", "list", "--json", "--all").out
    assert "correct horse battery" not in everything and "access_token" not in everything


def test_audit_list_pages(cli, root):
    for name in ("ops", "dev"):
        cli.ok("admin", "groups", "create", "--name", name)
    every = cli.ok("admin", "audit", "list", "--json", "--all").json()
    assert every["next_after_id"] is None and len(every["events"]) == 5
    ids = [e["id"] for e in every["events"]]
    assert ids == sorted(ids)  # oldest first

    first = cli.ok("admin", "audit", "list", "--json", "--limit", "2").json()
    assert first == {"events": every["events"][:2], "next_after_id": ids[1]}
    second = cli.ok("admin", "audit", "list", "--json", "--limit", "2", "--after-id", str(ids[1])).json()
    assert second["events"] == every["events"][2:4]
    result = cli.ok("admin", "audit", "list", "--limit", "2")
    assert result.err == f"(more: add --after-id {ids[1]}, or --all)\n"
    assert len(result.out.splitlines()) == 3

    # --all walks the pages (here two at a time) into one list
    walked = cli.ok("admin", "audit", "list", "--json", "--all", "--limit", "2").json()
    assert [e["id"] for e in walked["events"]][:len(ids)] == ids and walked["next_after_id"] is None
    tail = cli.ok("admin", "audit", "list", "--json", "--all", "--limit", "1", "--after-id", str(ids[1])).json()
    assert [e["id"] for e in tail["events"]][:len(ids) - 2] == ids[2:]
    table_out = cli.ok("admin", "audit", "list", "--all", "--limit", "2")
    assert table_out.err == "" and len(table_out.out.splitlines()) >= 1 + len(ids)


@pytest.mark.parametrize("argv, message", [
    (["--event", "group.made"], "error: 400: event: No event is called group.made:"
                                " see GET /v1/internal/audit for the names.\n"),
    (["--event", "Group Created"], "error: 400: event: Not an event name, a prefix ending in .*, or *.\n"),
    (["--since", "yesterday"], "error: 400: since: Not an RFC 3339 time such as 2026-11-24T08:00:00Z.\n"),
    (["--actor", "nobody"], "error: 400: actor_uuid: "),
    (["--limit", "0"], "error: 400: limit: "),
])
def test_audit_list_bad_filters(cli, root, argv, message):
    result = cli("admin", "audit", "list", *argv)
    assert result.code == 1 and result.out == ""
    assert result.err.startswith(message) and result.err.count("\n") == 1


def test_audit_and_webhooks_are_for_admins(cli, alice, receiver):
    cli.login("admin", "alice@example.com")  # a plain user with the admin client
    for argv in (["audit", "list"], ["audit", "list", "--event", "group.created", "--all"],
                 ["webhooks", "create", "--url", receiver.url, "--event", "user.*"], ["webhooks", "list"],
                 ["webhooks", "get", "1"], ["webhooks", "delete", "1"], ["webhooks", "deliveries", "1"],
                 ["webhooks", "replay", "1", "1"]):
        result = cli("admin", *argv)
        assert (result.code, result.out, result.err) == (1, "", FORBIDDEN), argv
    cli.ok("admin", "logout")
    result = cli("admin", "audit", "list")
    assert (result.code, result.err) == (1, "error: not logged in; run 'locky-admin login' first\n")


# --- webhooks ----------------------------------------------------------------------------

def test_webhooks_round_trip(cli, root, receiver):
    result = cli.ok("admin", "webhooks", "create", "--url", receiver.url, "--event", "group.created",
                    "--event", "group.updated", "--description", "Chat ops")
    created = listing(result.out)
    assert result.err == SECRET_NOTE + "\n"
    assert (created["url"], created["events"], created["description"]) == (receiver.url, "group.created,group.updated",
                                                                            "Chat ops")
    assert created["secret"].startswith("whsec_") and len(created["secret"]) > 30
    assert list(created) == ["id", "uuid", "description", "events", "secret", "url", "created_at"]
    webhook_id, secret = int(created["id"]), created["secret"]
    webhook = cli.ok("admin", "webhooks", "get", str(webhook_id), "--json").json()
    assert webhook == {"id": webhook_id, "uuid": created["uuid"], "url": receiver.url,
                       "events": ["group.created", "group.updated"], "description": "Chat ops",
                       "created_at": created["created_at"]}
    assert "secret" not in cli.ok("admin", "webhooks", "get", str(webhook_id)).out  # shown only once

    # listed, as a table and as JSON
    assert cli.ok("admin", "webhooks", "list", "--json").json() == {"webhooks": [webhook], "next_after_id": None}
    table_out = rows(cli.ok("admin", "webhooks", "list").out)
    assert table_out == [["ID", "UUID", "URL", "EVENTS", "DESCRIPTION", "CREATED_AT"],
                         [str(webhook_id), webhook["uuid"], receiver.url, "group.created,group.updated", "Chat", "ops",
                          webhook["created_at"]]]
    # the subscription is in the trail, without its secret
    [made] = events(cli, "--event", "webhook.created", "--target", webhook["uuid"])
    assert made["actor_uuid"] == root["uuid"] and made["details"]["url"] == receiver.url
    assert secret not in cli.ok("admin", "audit", "list", "--json", "--all").out

    # an event it subscribes to is delivered, signed with the secret
    group = cli.ok("admin", "groups", "create", "--json", "--name", "ops").json()
    [event] = events(cli, "--event", "group.created")
    cli.ok("admin", "groups", "update", str(group["id"]), "--description", "On call")
    [(headers, body, _), (_, updated_body, _)] = receiver.wait(2)
    assert headers["Locky-Event-Id"] == event["uuid"]
    assert json.loads(body)["event"] == "group.created" and json.loads(body)["data"]["target_uuid"] == group["uuid"]
    assert json.loads(updated_body)["event"] == "group.updated"
    stamp, _, mac = headers["Locky-Signature"].partition(",v1=")
    stamp = stamp.removeprefix("t=")
    assert mac == hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()

    done = deliveries_when(cli, webhook_id, lambda found: len(found) == 2 and
                           all(d["status"] == "succeeded" for d in found))
    first = done[0]
    assert (first["event"], first["event_uuid"], first["attempts"], first["last_status_code"],
            first["next_attempt_at"]) == ("group.created", event["uuid"], 1, 200, None)
    out = rows(cli.ok("admin", "webhooks", "deliveries", str(webhook_id)).out)
    assert out[0] == ["ID", "EVENT", "EVENT_UUID", "STATUS", "ATTEMPTS", "LAST_STATUS_CODE", "NEXT_ATTEMPT_AT",
                      "LAST_ERROR"]
    assert out[1] == [str(first["id"]), "group.created", event["uuid"], "succeeded", "1", "200", "-"]
    page = cli.ok("admin", "webhooks", "deliveries", str(webhook_id), "--limit", "1")
    assert page.err == f"(more: add --after-id {first['id']}, or --all)\n" and len(page.out.splitlines()) == 2

    # replay: the same event again, as a new delivery
    result = cli.ok("admin", "webhooks", "replay", str(webhook_id), str(first["id"]))
    again = listing(result.out)
    assert int(again["id"]) > done[-1]["id"] and again["event_uuid"] == event["uuid"]
    assert again["event"] == "group.created" and again["webhook_id"] == str(webhook_id)
    assert result.err == (f"Delivery {first['id']} queued again as delivery {again['id']}. Follow it with: "
                          f"locky-admin webhooks deliveries {webhook_id}\n")
    (replayed_headers, replayed_body, _) = receiver.wait(3)[2]
    assert replayed_headers["Locky-Event-Id"] == event["uuid"] and replayed_body == body
    final = deliveries_when(cli, webhook_id, lambda found: len(found) == 3 and found[2]["status"] == "succeeded")
    assert [d["event_uuid"] for d in final] == [event["uuid"], done[1]["event_uuid"], event["uuid"]]
    replay_json = cli.ok("admin", "webhooks", "replay", "--json", str(webhook_id), str(first["id"]))
    assert replay_json.err == "" and replay_json.json()["event_uuid"] == event["uuid"]

    # unsubscribe
    assert cli.ok("admin", "webhooks", "delete", str(webhook_id)).out == f"Deleted webhook {webhook_id}.\n"
    assert cli.ok("admin", "webhooks", "list", "--json").json() == {"webhooks": [], "next_after_id": None}
    for argv in (["get", str(webhook_id)], ["delete", str(webhook_id)], ["deliveries", str(webhook_id)],
                 ["replay", str(webhook_id), str(first["id"])]):
        result = cli("admin", "webhooks", *argv)
        assert (result.code, result.out, result.err) == (1, "", NOT_FOUND), argv
    [gone] = events(cli, "--event", "webhook.deleted")
    assert (gone["target_uuid"], gone["details"]["id"]) == (webhook["uuid"], webhook_id)


def test_webhooks_json_and_paging(cli, root):
    result = cli.ok("admin", "webhooks", "create", "--json", "--url", "https://example.com/hook", "--event", "*")
    body = result.json()
    assert body["secret"].startswith("whsec_") and body["events"] == ["*"] and body["description"] == ""
    assert result.err == SECRET_NOTE + "\n"
    hooks = [body] + [cli.ok("admin", "webhooks", "create", "--json", "--url", f"https://example.com/hook{i}",
                             "--event", "user.disabled").json() for i in range(3)]
    hooks = [{k: v for k, v in hook.items() if k != "secret"} for hook in hooks]
    first = cli.ok("admin", "webhooks", "list", "--json", "--limit", "3").json()
    assert first == {"webhooks": hooks[:3], "next_after_id": hooks[2]["id"]}
    more = cli.ok("admin", "webhooks", "list", "--limit", "3").err
    assert more == f"(more: add --after-id {hooks[2]['id']}, or --all)\n"
    assert cli.ok("admin", "webhooks", "list", "--json", "--all", "--limit", "1").json() == {
        "webhooks": hooks, "next_after_id": None}
    assert cli.ok("admin", "webhooks", "deliveries", str(hooks[3]["id"]), "--json").json() == {
        "deliveries": [], "next_after_id": None}
    assert cli.ok("admin", "webhooks", "delete", "--json", str(hooks[0]["id"])).json() == {
        "deleted": "webhook", "id": hooks[0]["id"]}


@pytest.mark.slow  # waits out the delivery backoff
def test_failed_attempt_shows_in_deliveries(cli, root):
    receiver = Receiver(script=[503])
    try:
        hook = cli.ok("admin", "webhooks", "create", "--json", "--url", receiver.url, "--event", "group.*").json()
        cli.ok("admin", "groups", "create", "--name", "ops")
        # An attempt counts from its claim; its outcome is written once the answer came.
        [failed] = deliveries_when(cli, hook["id"], lambda found: found and found[0]["last_status_code"] is not None)
        if failed["status"] == "pending":  # the retry (about 2 s later) may not have come yet
            assert (failed["last_status_code"], failed["last_error"]) == (503, "HTTP 503")
            assert failed["next_attempt_at"] is not None
        [done] = deliveries_when(cli, hook["id"], lambda found: found[0]["status"] == "succeeded")
        assert (done["attempts"], done["last_status_code"], done["last_error"]) == (2, 200, "")
        assert [status for _, _, status in receiver.wait(2)] == [503, 200]
    finally:
        receiver.close()


@pytest.mark.parametrize("argv, message", [
    (["--url", "https://example.com/hook", "--event", "group.made"],
     "error: 400: events: No event is called group.made: see GET /v1/internal/audit for the names.\n"),
    (["--url", "https://example.com/hook", "--event", "user.*", "--event", "Nope"],
     "error: 400: events: Not an event name, a prefix ending in .*, or *.\n"),
    (["--url", "ftp://example.com/hook", "--event", "user.*"],
     "error: 400: url: Must be an https:// or http:// URL with a host.\n"),
])
def test_webhooks_create_refused(cli, root, argv, message):
    result = cli("admin", "webhooks", "create", *argv)
    assert (result.code, result.out, result.err) == (1, "", message)
    assert cli.ok("admin", "webhooks", "list", "--json").json()["webhooks"] == []


def test_unknown_ids_are_404(cli, root):
    for argv in (["get", "999"], ["delete", "999"], ["deliveries", "999"], ["replay", "999", "1"]):
        result = cli("admin", "webhooks", *argv)
        assert (result.code, result.out, result.err) == (1, "", NOT_FOUND), argv
    hook = cli.ok("admin", "webhooks", "create", "--json", "--url", "https://example.com/hook", "--event", "*").json()
    result = cli("admin", "webhooks", "replay", str(hook["id"]), "999")
    assert (result.code, result.err) == (1, NOT_FOUND)


def test_private_receivers_refused_by_default(cli, root, locky_app_factory, monkeypatch):
    """With the shipped default, a loopback URL is refused; example.com is accepted."""
    strict = LiveServer(locky_app_factory(log_requests=False, webhook_allow_private=False))
    try:
        monkeypatch.setenv("LOCKY_URL", strict.url)
        cli.login("admin", ADMIN_EMAIL)  # the same database: the same admin
        result = cli("admin", "webhooks", "create", "--url", "http://127.0.0.1:9/hook", "--event", "user.*")
        assert (result.code, result.out) == (1, "")
        assert result.err == ("error: 400: url: Private, loopback and link-local addresses are refused"
                              " (LOCKY_WEBHOOK_ALLOW_PRIVATE allows them).\n")
        hook = cli.ok("admin", "webhooks", "create", "--json", "--url", "https://example.com/hook",
                      "--event", "user.*").json()
        assert hook["url"] == "https://example.com/hook"
    finally:
        strict.stop()
