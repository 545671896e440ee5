"""Lockout is no weapon: login failures lock out whoever guesses, never the account's
owner, and the counts of ``locky.accounts.login_limits`` stay bounded.

Found twice. Five cheap attempts per window kept any account locked for the whole
window, the right password included, again and again (issue 13, finding 5); then,
counted per account, one wrong password each time the lock ended still kept the owner
out (2 logins in 126 tries; issue 31, finding 6). What holds now (docs/http/tokens.md and docs/http/audit.md,
README "lockout"), over HTTP on SQLite, PostgreSQL and MariaDB:

- after ``LOCKY_LOGIN_MAX_FAILURES`` failures from one address the account is locked
  for that address for a sixteenth of ``LOCKY_LOGIN_WINDOW``, doubling per further
  failure up to the window; the owner at another address is not locked out;
- attempts while locked answer 429 and are not counted: they do not extend the lock;
- an account's guesses over every address are bounded
  (``LOCKY_LOGIN_MAX_GUESSES_PER_HOUR``), past which only addresses that signed in to
  it in the last 30 days are heard; a password reset lifts the lock of every address;
- one client address gets ``LOCKY_LOGIN_MAX_FAILURES_PER_IP`` failures per window over
  all emails, then 429; its own successful logins do not wipe its failures;
- the client address is the peer, or ``X-Forwarded-For`` behind ``LOCKY_TRUSTED_PROXIES``;
- ``locky unlock EMAIL`` ends a lock;
- throttle rows of ended windows are deleted, not kept for ever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from locky.testing import PASSWORD, make_settings
from locky.testing.databases import run_sql

LOGIN = "/v1/public/users/login"
ATTACKER, OWNER = "198.51.100.7", "203.0.113.20"
RESET_PASSWORD = "a new and long passphrase"
LOCKY = Path(sys.executable).with_name("locky")  # the installed console script


def attempt(client, email: str, password: str, peer: str = ATTACKER, forwarded_for: str | None = None):
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for is not None else None
    return client.simulate_post(LOGIN, json={"email": email, "password": password}, remote_addr=peer,
                                headers=headers)


def fail(client, email: str, times: int, peer: str = ATTACKER, forwarded_for: str | None = None) -> None:
    for n in range(times):
        result = attempt(client, email, "wrong password", peer, forwarded_for)
        assert result.status_code == 401, (n, result.status_code, result.text)


def locked_for(result) -> int:
    """The Retry-After of a 429 answer."""
    assert result.status_code == 429, (result.status_code, result.text)
    assert "access_token" not in result.text
    return int(result.headers["retry-after"])


# -- the email's lock ends ------------------------------------------------------------


def test_an_attackers_five_failures_do_not_keep_the_owner_out(app_on):
    client = app_on(login_window=16)  # the first lock: 16 / 16 = 1 second
    client.register("ada@example.com")
    fail(client, "ada@example.com", 5)
    # Locked for the attacker's address, the right password included (the 429) ...
    retry = locked_for(attempt(client, "ada@example.com", PASSWORD))
    assert retry == 1
    # ... never for the owner's (the count is per account and address): she gets in now.
    assert attempt(client, "ada@example.com", PASSWORD, peer=OWNER).status_code == 200
    # And only for the backoff, not for the window, at the attacker's address too.
    time.sleep(retry + 0.1)
    assert attempt(client, "ada@example.com", PASSWORD).status_code == 200


def test_attempts_during_the_lock_do_not_extend_it(app_on):
    client = app_on(login_max_failures=2, login_window=16)
    client.register("ada@example.com")
    fail(client, "ada@example.com", 2)
    locked_at = time.monotonic()
    refused = 0
    while time.monotonic() - locked_at < 0.7:  # an attacker hammering the locked account
        assert locked_for(attempt(client, "ada@example.com", "wrong password")) == 1
        refused += 1
    assert refused >= 3
    time.sleep(max(0.0, 1.1 - (time.monotonic() - locked_at)))
    assert attempt(client, "ada@example.com", PASSWORD, peer=OWNER).status_code == 200


def test_each_further_failure_doubles_the_lock(app_on):
    client = app_on(login_max_failures=2, login_window=16)
    client.register("ada@example.com")
    fail(client, "ada@example.com", 2)
    assert locked_for(attempt(client, "ada@example.com", "wrong password")) == 1
    time.sleep(1.1)
    fail(client, "ada@example.com", 1)  # the lock ended: this one is checked, and counted
    assert locked_for(attempt(client, "ada@example.com", PASSWORD)) == 2


# -- guesses from many addresses, the owner's way back ------------------------------


def test_an_attacker_keeping_the_lock_up_never_keeps_the_owner_out(app_on):
    """The reported weapon: a wrong password each time the lock ends. The owner, at
    her own address, logs in every time; the attacker's address stays locked."""
    client = app_on(login_window=16, login_max_failures=2)  # the first lock: 1 s, then 2 s, ...
    client.register("ada@example.com")
    for _ in range(2):
        assert attempt(client, "ada@example.com", "wrong password", ATTACKER).status_code == 401
    for round in range(2):
        locked = attempt(client, "ada@example.com", PASSWORD, ATTACKER)  # the right password too: locked
        assert locked.status_code == 429, (round, locked.text)
        assert attempt(client, "ada@example.com", PASSWORD, OWNER).status_code == 200, round
        time.sleep(int(locked.headers["retry-after"]) + 0.1)
        # The lock again, doubled.
        assert attempt(client, "ada@example.com", "wrong password", ATTACKER).status_code == 401
    assert attempt(client, "ada@example.com", PASSWORD, OWNER).status_code == 200


def test_guesses_from_many_addresses_are_bounded_and_the_owner_still_gets_in(app_on):
    client = app_on(login_max_guesses_per_hour=4)
    client.register("ada@example.com")
    assert attempt(client, "ada@example.com", PASSWORD, OWNER).status_code == 200  # the owner's address is known now
    for n in range(4):  # one guess from each of four addresses: each is checked
        assert attempt(client, "ada@example.com", "wrong password", f"198.51.100.{n + 1}").status_code == 401
    # The account's guesses are spent: a new address is not heard, even with the password ...
    refused = attempt(client, "ada@example.com", PASSWORD, "198.51.100.99")
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 60
    assert attempt(client, "ada@example.com", "wrong password", "198.51.100.1").status_code == 429
    # ... while the owner, at an address that signed in within 30 days, is.
    assert attempt(client, "ada@example.com", "wrong password", OWNER).status_code == 401  # checked: a typo is no lock
    assert attempt(client, "ada@example.com", PASSWORD, OWNER).status_code == 200
    # Another account is not affected.
    client.register("bob@example.com")
    assert attempt(client, "bob@example.com", PASSWORD, "198.51.100.99").status_code == 200


def test_a_password_reset_lifts_the_lock_of_every_address(app_on):
    client = app_on(login_max_failures=2)
    client.register("ada@example.com")
    for peer in (OWNER, ATTACKER):
        for _ in range(2):
            assert attempt(client, "ada@example.com", "wrong password", peer).status_code == 401
        assert attempt(client, "ada@example.com", PASSWORD, peer).status_code == 429
    assert client.simulate_post("/v1/public/users/password/forgot", json={"email": "ada@example.com"},
                                remote_addr=OWNER).status_code == 202
    code = client.mailbox.token(client.mailbox.wait("ada@example.com", purpose="reset"))
    reset = client.simulate_post("/v1/public/users/password/reset", remote_addr=OWNER,
                                 json={"token": code, "password": RESET_PASSWORD})
    assert reset.status_code == 204, reset.text
    for peer in (OWNER, ATTACKER):
        assert attempt(client, "ada@example.com", RESET_PASSWORD, peer).status_code == 200, peer


# -- per client address ---------------------------------------------------------------


def test_one_address_failing_on_many_accounts_is_stopped(app_on):
    client = app_on(login_max_failures_per_ip=4)
    client.register("mallory@example.com")
    client.register("ada@example.com")
    fail(client, "one@example.com", 1)
    fail(client, "two@example.com", 1)
    # The attacker's own successful login takes back only its own attempt.
    assert attempt(client, "mallory@example.com", PASSWORD).status_code == 200
    fail(client, "three@example.com", 1)
    fail(client, "four@example.com", 1)
    # Four failures from this address: every further attempt gets 429, on any email,
    # the right password included, and no email's count grows.
    assert locked_for(attempt(client, "five@example.com", "wrong password")) >= 1
    assert locked_for(attempt(client, "ada@example.com", PASSWORD)) >= 1
    # No account was locked by it: Ada logs in from her own address.
    assert attempt(client, "ada@example.com", PASSWORD, peer=OWNER).status_code == 200


def test_the_default_per_address_limit_is_50_failures(app_on):
    client = app_on()
    for n in range(10):
        fail(client, f"victim{n}@example.com", 5)  # 5 each: no email locked yet
    client.register("ada@example.com")
    assert locked_for(attempt(client, "ada@example.com", PASSWORD)) >= 1
    assert attempt(client, "ada@example.com", PASSWORD, peer=OWNER).status_code == 200


def test_x_forwarded_for_is_ignored_from_an_untrusted_peer(app_on):
    client = app_on(login_max_failures_per_ip=2)
    client.register("ada@example.com")
    fail(client, "one@example.com", 1, forwarded_for="192.0.2.1")
    fail(client, "two@example.com", 1, forwarded_for="192.0.2.2")
    # A new forged address each time changes nothing: the peer is the client.
    locked_for(attempt(client, "ada@example.com", PASSWORD, forwarded_for="192.0.2.3"))


def test_x_forwarded_for_names_the_client_behind_a_trusted_proxy(app_on):
    client = app_on(login_max_failures_per_ip=2, trusted_proxies="10.0.0.0/8")
    proxy = "10.1.2.3"
    client.register("ada@example.com")
    fail(client, "one@example.com", 1, peer=proxy, forwarded_for=ATTACKER)
    fail(client, "two@example.com", 1, peer=proxy, forwarded_for=f"{ATTACKER}, 10.9.9.9")  # two proxies
    # The attacker is locked out, even when it prepends a forged address ...
    locked_for(attempt(client, "ada@example.com", PASSWORD, peer=proxy, forwarded_for=ATTACKER))
    locked_for(attempt(client, "ada@example.com", PASSWORD, peer=proxy, forwarded_for=f"192.0.2.9, {ATTACKER}"))
    # ... while another client behind the same proxy logs in.
    assert attempt(client, "ada@example.com", PASSWORD, peer=proxy, forwarded_for=OWNER).status_code == 200


# -- locky unlock ---------------------------------------------------------------------


def unlock(database_url: str, email: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    env.update(LOCKY_DATABASE_URL=database_url, LOCKY_JWT_SECRET=make_settings(database_url).jwt_secret,
               LOCKY_BCRYPT_ROUNDS="4")
    return subprocess.run([str(LOCKY), "unlock", email], env=env, capture_output=True, text=True, timeout=120)


def test_locky_unlock_ends_the_lock(app_on, database_url):
    client = app_on()
    client.register("ada@example.com")
    fail(client, "ada@example.com", 5)
    assert locked_for(attempt(client, "ada@example.com", PASSWORD)) >= 50  # about a minute

    done = unlock(database_url, " ADA@example.com ")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ada@example.com: failed logins cleared, the account is unlocked"
    assert attempt(client, "ada@example.com", PASSWORD).status_code == 200

    again = unlock(database_url, "ada@example.com")
    assert (again.returncode, again.stdout.strip()) == (0, "ada@example.com: no failed logins to clear")

    unknown = unlock(database_url, "nobody@example.com")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "locky: no live user with email nobody@example.com"


# -- ended rows are deleted -----------------------------------------------------------


def throttle_keys(database_url: str) -> set[str]:
    return {row[0] for row in run_sql(database_url, "SELECT * FROM locky_login_throttle")}


def test_rows_of_ended_windows_are_pruned(app_on, database_url):
    client = app_on(login_window=2)
    randoms = {f"random{n}@example.com" for n in range(30)}
    for email in sorted(randoms):  # random emails, as a scanner sends them: two rows each
        fail(client, email, 1)
    pairs = {f"{email}|ip:{ATTACKER}" for email in randoms}
    assert throttle_keys(database_url) == {f"ip:{ATTACKER}"} | randoms | pairs
    time.sleep(4.1)  # two windows: every count and lock is over
    fail(client, "late1@example.com", 1)
    fail(client, "late2@example.com", 1)
    # What remains: the address's count, the two new ones, and each account's quota of
    # guesses over every address (LOCKY_LOGIN_MAX_GUESSES_PER_HOUR), kept for its hour.
    assert throttle_keys(database_url) == {f"ip:{ATTACKER}", "late1@example.com", "late2@example.com",
                                           f"late1@example.com|ip:{ATTACKER}",
                                           f"late2@example.com|ip:{ATTACKER}"} | randoms
