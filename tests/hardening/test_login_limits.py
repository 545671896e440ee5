"""Lockout is no weapon (issue 31, finding 6): the guess counts of ``locky.login_limits``.

Before, failures were counted per account: one wrong password each time the lock ended
kept the owner out (2 logins in 126 tries). Now they are counted per account *and*
client address, so whoever guesses locks out their own address only; and an account's
guesses over every address are bounded (``LOCKY_LOGIN_MAX_GUESSES_PER_HOUR``), past
which only addresses that signed in to it in the last 30 days are heard.

Over HTTP on SQLite, PostgreSQL and MariaDB; addresses are the peer's.
"""

from __future__ import annotations

import time

from locky.testing import PASSWORD

LOGIN = "/v1/public/users/login"
OWNER, ATTACKER = "203.0.113.20", "198.51.100.7"
RESET_PASSWORD = "a new and long passphrase"


def attempt(client, password: str, peer: str, email: str = "ada@example.com"):
    return client.simulate_post(LOGIN, json={"email": email, "password": password}, remote_addr=peer)


def test_an_attacker_keeping_the_lock_up_never_keeps_the_owner_out(app_on):
    """The reported weapon: a wrong password each time the lock ends. The owner, at
    her own address, logs in every time; the attacker's address stays locked."""
    client = app_on(login_window=16, login_max_failures=2)  # the first lock: 1 s, then 2 s, ...
    client.register("ada@example.com")
    for _ in range(2):
        assert attempt(client, "wrong password", ATTACKER).status_code == 401
    for round in range(2):
        locked = attempt(client, PASSWORD, ATTACKER)  # the right password too: locked
        assert locked.status_code == 429, (round, locked.text)
        assert attempt(client, PASSWORD, OWNER).status_code == 200, round
        time.sleep(int(locked.headers["retry-after"]) + 0.1)
        assert attempt(client, "wrong password", ATTACKER).status_code == 401  # the lock again, doubled
    assert attempt(client, PASSWORD, OWNER).status_code == 200


def test_guesses_from_many_addresses_are_bounded_and_the_owner_still_gets_in(app_on):
    client = app_on(login_max_guesses_per_hour=4)
    client.register("ada@example.com")
    assert attempt(client, PASSWORD, OWNER).status_code == 200  # the owner's address is known now
    for n in range(4):  # one guess from each of four addresses: each is checked
        assert attempt(client, "wrong password", f"198.51.100.{n + 1}").status_code == 401
    # The account's guesses are spent: a new address is not heard, even with the password ...
    refused = attempt(client, PASSWORD, "198.51.100.99")
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 60
    assert attempt(client, "wrong password", "198.51.100.1").status_code == 429
    # ... while the owner, at an address that signed in within 30 days, is.
    assert attempt(client, "wrong password", OWNER).status_code == 401  # checked: a typo is no lock
    assert attempt(client, PASSWORD, OWNER).status_code == 200
    # Another account is not affected.
    client.register("bob@example.com")
    assert attempt(client, PASSWORD, "198.51.100.99", "bob@example.com").status_code == 200


def test_a_password_reset_lifts_the_lock_of_every_address(app_on):
    client = app_on(login_max_failures=2)
    client.register("ada@example.com")
    for peer in (OWNER, ATTACKER):
        for _ in range(2):
            assert attempt(client, "wrong password", peer).status_code == 401
        assert attempt(client, PASSWORD, peer).status_code == 429
    assert client.simulate_post("/v1/public/users/password/forgot", json={"email": "ada@example.com"},
                                remote_addr=OWNER).status_code == 202
    code = client.mailbox.token(client.mailbox.wait("ada@example.com", purpose="reset"))
    reset = client.simulate_post("/v1/public/users/password/reset", remote_addr=OWNER,
                                 json={"token": code, "password": RESET_PASSWORD})
    assert reset.status_code == 204, reset.text
    for peer in (OWNER, ATTACKER):
        assert attempt(client, RESET_PASSWORD, peer).status_code == 200, peer
