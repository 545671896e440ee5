"""Issue 16: no code, TOTP secret, recovery code or password of the account lifecycle
shows in a log line or an error body, and ``forgot`` takes the same time whether or not
the account exists.

Every flow runs through the recording client, so the suite's autouse scan
(``no_secret_leaks``) reads every body and the whole in-process log for the secrets the
flows handled: passwords, reset and verification codes (learned from the messages too),
``mfa_token``s, TOTP secrets and recovery codes.
"""

from __future__ import annotations

import statistics
import time

import pyotp

from harden import EVIDENCE, OTHER, STRONG, RecordingClient
from locky.testing import MailBox


def code_from_mail(client: RecordingClient, email: str, purpose: str, count: int = 1) -> str:
    code = MailBox.token(client.mailbox.wait(email, purpose, count=count))
    EVIDENCE.learn(code)
    return code


def test_every_lifecycle_flow_keeps_its_secrets_out_of_logs_and_errors(locky_client):
    client = locky_client
    client.register("flow@example.com", STRONG)
    verify = code_from_mail(client, "flow@example.com", "verify")
    assert client.simulate_post("/v1/public/users/verify", json={"token": verify}).status_code == 204
    assert client.simulate_post("/v1/public/users/verify", json={"token": verify}).status_code == 400  # used

    assert client.simulate_post("/v1/public/users/password/forgot", json={"email": "flow@example.com"}).status_code == 202
    reset = code_from_mail(client, "flow@example.com", "reset")
    weak = client.simulate_post("/v1/public/users/password/reset", json={"token": reset, "password": "password1"})
    assert weak.status_code == 400 and set(weak.json) == {"password"}
    assert client.simulate_post("/v1/public/users/password/reset",
                                json={"token": reset, "password": OTHER}).status_code == 204

    tokens = client.login("flow@example.com", OTHER)
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    setup = client.simulate_post("/v1/private/users/me/mfa/totp", headers=headers).json
    totp = pyotp.TOTP(setup["secret"])
    confirmed = client.simulate_post("/v1/private/users/me/mfa/totp/confirm", headers=headers,
                                     json={"code": totp.now()})
    recovery = confirmed.json["recovery_codes"]
    challenge = client.simulate_post("/v1/public/users/login", json={"email": "flow@example.com", "password": OTHER}).json
    wrong = client.simulate_post("/v1/public/users/login/mfa", json={"mfa_token": challenge["mfa_token"], "code": "not-a-code"})
    assert wrong.status_code == 401
    done = client.simulate_post("/v1/public/users/login/mfa", json={"mfa_token": challenge["mfa_token"], "code": recovery[0]})
    assert done.status_code == 200
    again = client.simulate_post("/v1/public/users/login/mfa", json={"mfa_token": challenge["mfa_token"], "code": recovery[1]})
    assert again.status_code == 401  # the mfa_token is spent: its error body must not echo it
    # The secrets learned above are what the autouse scan looks for.
    assert {setup["secret"], recovery[0], reset, verify, challenge["mfa_token"]} <= EVIDENCE.secrets


#: Seconds for the mail sender to handle what one request queued (a few milliseconds).
SETTLE = 0.03


def timed(client: RecordingClient, email: str) -> float:
    start = time.perf_counter()
    result = client.simulate_post("/v1/public/users/password/forgot", json={"email": email})
    elapsed = time.perf_counter() - start
    assert result.status_code == 202 and result.json == {"status": "accepted"}
    return elapsed


def test_forgot_takes_the_same_time_for_known_and_unknown_emails(locky_client):
    known = [f"known{i}@example.com" for i in range(10)]
    for email in known:
        locky_client.register(email, STRONG)
    timed(locky_client, "warm-up@example.com")
    times: dict[str, list[float]] = {"known": [], "unknown": []}
    for round_ in range(3):  # interleaved, so that a busy moment of the machine hits both alike
        for i, email in enumerate(known):
            times["known"].append(timed(locky_client, email))
            # The sender then writes a known address's letter (a code, a message, two
            # commits) in this process, while it drops an unknown one: what it does after
            # a request is not that request's time, so it is let finish before the next.
            time.sleep(SETTLE)
            times["unknown"].append(timed(locky_client, f"nobody{round_}-{i}@example.com"))
            time.sleep(SETTLE)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print("\nforgot medians: " + ", ".join(f"{kind} {value * 1000:.2f} ms" for kind, value in medians.items()))
    slow, fast = max(medians.values()), min(medians.values())
    # The request does the same work either way (one letter queued); the sender decides later.
    assert slow / fast < 1.5, medians
    for email in known[:3]:  # the known ones did get their messages (3 an hour at most)
        assert len(locky_client.mailbox.wait(email, "reset", count=3) and locky_client.mailbox.messages(email, "reset")) == 3
