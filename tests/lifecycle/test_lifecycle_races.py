"""Single-use under concurrency (docs/http/accounts.md): the same verification code,
reset code, TOTP code, recovery code or ``mfa_token`` sent by several requests at once is
taken by exactly one of them; the others get the answer of a used code."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from locky.testing import PASSWORD

from lifecycle_helpers import (LOGIN_MFA, RESET, TOTP, TOTP_CONFIRM, VERIFY, Authenticator, login, mail_code,
                               reset_code)

RACERS = 6


def race(client, path: str, bodies: list[dict]) -> list[int]:
    """POST every body at once (released together by a barrier): the statuses."""
    barrier = threading.Barrier(len(bodies))

    def one(body):
        barrier.wait()
        return client.simulate_post(path, json=body)

    with ThreadPoolExecutor(len(bodies)) as pool:
        results = list(pool.map(one, bodies))
    return sorted(result.status_code for result in results)


def test_one_verify_code_verifies_once(locky_client):
    locky_client.register("ada@example.com")
    code = mail_code(locky_client, "ada@example.com", "verify")
    assert race(locky_client, VERIFY, [{"token": code}] * RACERS) == [204] + [400] * (RACERS - 1)


def test_one_reset_code_resets_once(locky_client):
    locky_client.register("ada@example.com")
    code = reset_code(locky_client, "ada@example.com")
    passwords = [f"racing passphrase {n}" for n in range(RACERS)]
    statuses = race(locky_client, RESET, [{"token": code, "password": p} for p in passwords])
    assert statuses == [204] + [400] * (RACERS - 1)
    # Exactly one of the passwords is the account's now. (Asked of the stored hash, not by
    # logging in with each: five wrong ones would lock the account before the right one.)
    stored = locky_client.app.context.storage.users.get_by_email("ada@example.com").password_hash
    hasher = locky_client.app.context.password_hasher
    assert sum(hasher.verify(p, stored) for p in passwords) == 1


def enrol(client):
    account = client.account("ada@example.com")
    authenticator = Authenticator(client.simulate_post(TOTP, json={}, headers=account.headers).json["secret"])
    result = client.simulate_post(TOTP_CONFIRM, json={"code": authenticator.code()}, headers=account.headers)
    assert result.status_code == 200, result.text
    return authenticator, result.json["recovery_codes"]


def challenges(client, n: int) -> list[str]:
    tokens = []
    for _ in range(n):
        result = login(client, "ada@example.com", PASSWORD)
        assert result.status_code == 200 and result.json["mfa_required"] is True, result.text
        tokens.append(result.json["mfa_token"])
    return tokens


def test_one_totp_code_logs_in_once(locky_client):
    authenticator, _ = enrol(locky_client)
    code = authenticator.code()
    bodies = [{"mfa_token": token, "code": code} for token in challenges(locky_client, 4)]
    assert race(locky_client, LOGIN_MFA, bodies) == [200, 401, 401, 401]


def test_one_recovery_code_logs_in_once(locky_client):
    _, recovery = enrol(locky_client)
    bodies = [{"mfa_token": token, "code": recovery[0]} for token in challenges(locky_client, 4)]
    assert race(locky_client, LOGIN_MFA, bodies) == [200, 401, 401, 401]


def test_one_mfa_token_logs_in_once(locky_client):
    _, recovery = enrol(locky_client)
    (token,) = challenges(locky_client, 1)
    bodies = [{"mfa_token": token, "code": code} for code in recovery[:4]]
    assert race(locky_client, LOGIN_MFA, bodies) == [200, 401, 401, 401]
