"""Abuse limits of the anonymous routes over HTTP (docs/http/accounts.md, issue 31 finding 13).

Per client address and hour: ``LOCKY_SIGNUP_MAX_PER_IP`` registrations, and
``LOCKY_RECOVERY_MAX_PER_IP`` password-forgot and verification-resend requests together;
past them 429 with ``Retry-After`` and nothing done (no account, no hash, no event, no
letter). The client address is the peer, or ``X-Forwarded-For`` only from a trusted
proxy. One mail address gets at most 3 verification messages an hour, whatever sends
them, and no message opens with text the registrant chose.

The fixtures' own accounts register from the test client's default address
(127.0.0.1); the limits here are exercised from documentation addresses (RFC 5737), so
the two never share a count. Several apps on one database stand for worker processes.
"""

from __future__ import annotations

import pytest

from locky.settings import Settings, SettingsError
from locky.testing import PASSWORD

from authz_helpers import assert_error
from lifecycle_helpers import ACCEPTED, FORGOT, REGISTER, RESEND, assert_mail_settles

LIMIT = 3
ADDRESS, OTHER = "203.0.113.10", "203.0.113.20"
PROXY = "10.0.0.7"


def register(client, email: str, address: str = ADDRESS, name: str | None = None, headers=None):
    return client.simulate_post(REGISTER, json={"name": name or email.split("@")[0], "email": email,
                                                "password": PASSWORD},
                                remote_addr=address, headers=headers)


def recovery(client, path: str, email: str, address: str = ADDRESS):
    return client.simulate_post(path, json={"email": email}, remote_addr=address)


def assert_limited(result) -> int:
    """A 429 in Falcon's ``{"title", "description"}`` shape, with a ``Retry-After`` of at
    most the hour; the seconds it gives."""
    assert_error(result, 429, "429 Too Many Requests")
    retry_after = result.headers.get("retry-after")
    assert retry_after is not None and retry_after.isdigit(), result.headers
    assert 1 <= int(retry_after) <= 3600, retry_after
    return int(retry_after)


def users_named(client, admin, email: str) -> list:
    listed = client.simulate_get("/v1/internal/users", params={"email": email}, headers=admin.headers)
    assert listed.status_code == 200, listed.text
    return listed.json["users"]


def audited(client, admin, event: str) -> list:
    found = client.simulate_get("/v1/internal/audit", params={"event": event, "limit": 100}, headers=admin.headers)
    assert found.status_code == 200, found.text
    return found.json["events"]


# -- registrations per client address -----------------------------------------------------


def test_registrations_over_the_limit_are_429_and_create_nothing(make_client, locky_admin):
    client = make_client(signup_max_per_ip=LIMIT)
    for n in range(LIMIT):
        assert register(client, f"ok{n}@example.com").status_code == 201
    registered = len(audited(client, locky_admin, "user.registered"))
    for n in range(3):
        assert_limited(register(client, f"over{n}@example.com"))
        assert users_named(client, locky_admin, f"over{n}@example.com") == []
    # Refused before anything was written: no account, no event, no letter.
    assert len(audited(client, locky_admin, "user.registered")) == registered
    assert_mail_settles(client, "over0@example.com", None, 0)
    # Another address still registers.
    assert register(client, "elsewhere@example.com", address=OTHER).status_code == 201


def test_the_count_is_shared_by_every_process(make_client, locky_admin):
    first, second = make_client(signup_max_per_ip=LIMIT), make_client(signup_max_per_ip=LIMIT)
    assert register(first, "p1@example.com").status_code == 201
    assert register(second, "p2@example.com").status_code == 201
    assert register(first, "p3@example.com").status_code == 201
    assert_limited(register(second, "p4@example.com"))
    assert_limited(register(first, "p5@example.com"))


def test_a_weak_password_is_refused_before_it_counts(make_client):
    """The cheap checks come first: a 400 spends nothing of the address's hour."""
    client = make_client(signup_max_per_ip=1)
    weak = client.simulate_post(REGISTER, json={"name": "ada", "email": "ada@example.com", "password": "password"},
                                remote_addr=ADDRESS)
    assert weak.status_code == 400, weak.text
    assert register(client, "ada@example.com").status_code == 201
    assert_limited(register(client, "bob@example.com"))


def test_the_defaults_are_thirty_an_hour_and_the_range_is_checked():
    settings = Settings.load(environ={})
    assert (settings.signup_max_per_ip, settings.recovery_max_per_ip) == (30, 30)
    assert Settings.load(environ={"LOCKY_SIGNUP_MAX_PER_IP": "5"}).signup_max_per_ip == 5
    for name in ("LOCKY_SIGNUP_MAX_PER_IP", "LOCKY_RECOVERY_MAX_PER_IP"):
        with pytest.raises(SettingsError, match=f"{name} must be between 1 and"):
            Settings.load(environ={name: "0"})


# -- password-forgot and verification-resend, together ---------------------------------------


def test_forgot_and_resend_share_one_count(make_client):
    client = make_client(recovery_max_per_ip=LIMIT)
    assert recovery(client, FORGOT, "a@example.com").json == ACCEPTED
    assert recovery(client, RESEND, "b@example.com").json == ACCEPTED
    assert recovery(client, FORGOT, "c@example.com").status_code == 202
    # The fourth, whichever route and whatever email: refused.
    assert_limited(recovery(client, RESEND, "d@example.com"))
    assert_limited(recovery(client, FORGOT, "e@example.com"))
    # Another address has its own count; registrations are counted apart.
    assert recovery(client, FORGOT, "a@example.com", address=OTHER).status_code == 202
    assert register(client, "f@example.com").status_code == 201


def test_a_refused_forgot_queues_no_letter_and_records_no_event(make_client, locky_admin):
    client = make_client(recovery_max_per_ip=1)
    assert register(client, "ada@example.com", address=OTHER).status_code == 201
    assert recovery(client, FORGOT, "nobody@example.com").status_code == 202
    requested = len(audited(client, locky_admin, "password.reset_requested"))
    assert_limited(recovery(client, FORGOT, "ada@example.com"))
    assert len(audited(client, locky_admin, "password.reset_requested")) == requested
    assert_mail_settles(client, "ada@example.com", "reset", 0)


# -- the client address: X-Forwarded-For only from a trusted proxy -----------------------


def test_x_forwarded_for_is_ignored_from_an_untrusted_peer(make_client):
    client = make_client(signup_max_per_ip=2)
    for n in range(2):
        result = register(client, f"x{n}@example.com", address=PROXY, headers={"X-Forwarded-For": f"198.51.100.{n}"})
        assert result.status_code == 201, result.text
    # A new forged client address each time does not make a new count.
    assert_limited(register(client, "x2@example.com", address=PROXY, headers={"X-Forwarded-For": "198.51.100.9"}))


def test_x_forwarded_for_names_the_client_behind_a_trusted_proxy(make_client):
    client = make_client(signup_max_per_ip=2, trusted_proxies=("10.0.0.0/8",))
    for n in range(2):
        result = register(client, f"t{n}@example.com", address=PROXY, headers={"X-Forwarded-For": "198.51.100.1"})
        assert result.status_code == 201, result.text
    assert_limited(register(client, "t2@example.com", address=PROXY, headers={"X-Forwarded-For": "198.51.100.1"}))
    # Another client behind the same proxy has its own count.
    result = register(client, "t3@example.com", address=PROXY, headers={"X-Forwarded-For": "198.51.100.2"})
    assert result.status_code == 201, result.text


# -- verification mail to one address ------------------------------------------------------


def test_one_address_gets_at_most_three_verification_messages_an_hour(make_client):
    """Whatever sends them: a registration, an email change, a resend, from accounts
    that each stay within their own limits (the address passes from one to the next)."""
    client = make_client()
    victim = "victim@example.com"

    def delivered(count: int) -> None:
        client.mailbox.wait(victim, "verify", count=count)

    def account(email: str):
        client.register(email)
        return client.login(email)

    def change_email(tokens, email: str) -> None:
        headers = {"Authorization": f"Bearer {tokens['access_token']}"}
        result = client.simulate_put(f"/v1/private/users/{tokens['user']['id']}", headers=headers,
                                     json={"email": email, "current_password": PASSWORD})
        assert result.status_code == 200, result.text

    a = account(victim)                      # 1: a registration
    delivered(1)
    change_email(a, "a-moved@example.com")
    b = account("b@example.com")
    change_email(b, victim)                  # 2: an email change
    delivered(2)
    assert recovery(client, RESEND, victim).status_code == 202  # 3: a resend
    delivered(3)
    change_email(b, "b-moved@example.com")
    c = account("c@example.com")
    change_email(c, victim)                  # would be the 4th
    assert recovery(client, RESEND, victim).status_code == 202  # the 5th
    client.mailbox.wait("b-moved@example.com", "verify")
    assert_mail_settles(client, victim, "verify", 3)
    # Other addresses are not held back by it.
    assert client.mailbox.wait("a-moved@example.com", "verify")


def test_no_message_opens_with_the_name_a_registrant_chose(make_client):
    client = make_client()
    bait = "URGENT: your bank account is locked, call +1 555 0100"
    assert register(client, "ada@example.com", name=bait).status_code == 201
    assert recovery(client, FORGOT, "ada@example.com").status_code == 202
    for purpose in ("verify", "reset"):
        message = client.mailbox.wait("ada@example.com", purpose)
        text = message.get_content()
        assert text.splitlines()[0] == "Hello,", text
        assert "URGENT" not in text and "555" not in text, text
        assert "URGENT" not in str(message), message


# -- the Swagger document ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/public/users/register", "/public/users/password/forgot",
                                  "/public/users/verify/resend"])
def test_the_swagger_document_lists_the_429_and_the_limit(locky_client, path):
    doc = locky_client.simulate_get("/swagger/doc.json").json
    operation = doc["paths"][path]["post"]
    assert "429" in operation["responses"], operation["responses"]
    setting = "LOCKY_SIGNUP_MAX_PER_IP" if path.endswith("register") else "LOCKY_RECOVERY_MAX_PER_IP"
    assert setting in operation["description"], operation["description"]
