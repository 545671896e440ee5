"""No secret of the account lifecycle shows in a log line or an error body (docs/http/operation.md,
accounts.md and audit.md): one whole flow (register, verify, forgot, reset, TOTP enrolment,
MFA logins with a TOTP and a recovery code, password change, turning TOTP off), with
every ``locky`` logger at DEBUG and a few refusals on the way, leaves no password,
verification or reset code, TOTP secret or code, recovery code, ``mfa_token``, access or
refresh token, nor anything JWT-shaped, in what was logged (message, arguments and
extra fields of every record, from every thread: the mail sender's too) or in a 4xx body."""

from __future__ import annotations

import logging
import re
import time

from authz_helpers import assert_fields
from lifecycle_helpers import (FORGOT, LOGIN, LOGIN_MFA, RESET, TOTP, TOTP_CONFIRM, VERIFY, WRITE, Authenticator,
                               bearer, mail_code)

JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*")
FIRST, SECOND, THIRD = "tulip garden 4471", "orchid meadow 8823", "lotus pond 1930"


class Flow:
    """Runs requests, learning the secrets in them and keeping every error body."""

    def __init__(self, client):
        self.client = client
        self.secrets: set[str] = {FIRST, SECOND, THIRD}
        self.short_codes: set[str] = set()
        self.errors: list[tuple[str, str]] = []

    def call(self, method: str, path: str, body=None, token: str | None = None, expect: int = 200):
        result = self.client.simulate_request(method, path, json=body, headers=bearer(token) if token else None)
        assert result.status_code == expect, (method, path, result.status_code, result.text)
        if result.status_code >= 400:
            self.errors.append((f"{method} {path}", result.text))
        if result.text and result.status_code < 300:
            self.learn(result.json)
        return result.json if result.text else None

    def learn(self, data) -> None:
        if isinstance(data, dict):
            for key, value in data.items():
                if key in ("access_token", "refresh_token", "mfa_token", "secret", "otpauth_uri") and value:
                    self.secrets.add(value)
                elif key == "recovery_codes":
                    self.secrets.update(value)
                else:
                    self.learn(value)
        elif isinstance(data, list):
            for item in data:
                self.learn(item)

    def code(self, to: str, purpose: str, count: int = 1) -> str:
        code = mail_code(self.client, to, purpose, count)
        self.secrets.add(code)
        return code

    def totp(self, authenticator: Authenticator) -> str:
        code = authenticator.code()
        self.short_codes.add(code)
        return code


def run_flow(client) -> Flow:
    flow = Flow(client)
    email = "ada@example.com"
    flow.call("POST", "/v1/public/users/register", {"name": "Ada", "email": email, "password": FIRST}, expect=201)
    verify_code = flow.code(email, "verify")
    flow.call("POST", VERIFY, {"token": verify_code[::-1]}, expect=400)
    flow.call("POST", VERIFY, {"token": verify_code}, expect=204)
    flow.call("POST", VERIFY, {"token": verify_code}, expect=400)

    flow.call("POST", FORGOT, {"email": email}, expect=202)
    reset_code = flow.code(email, "reset")
    flow.call("POST", RESET, {"token": reset_code, "password": "password1"}, expect=400)
    flow.call("POST", RESET, {"token": reset_code, "password": SECOND}, expect=204)
    flow.call("POST", RESET, {"token": reset_code, "password": THIRD}, expect=400)

    flow.call("POST", LOGIN, {"email": email, "password": FIRST}, expect=401)
    tokens = flow.call("POST", LOGIN, {"email": email, "password": SECOND})
    access = tokens["access_token"]
    pending = flow.call("POST", TOTP, {}, token=access)
    authenticator = Authenticator(pending["secret"])
    flow.secrets.add(pending["secret"].lower())
    flow.call("POST", TOTP_CONFIRM, {"code": authenticator.wrong()}, token=access, expect=400)
    recovery = flow.call("POST", TOTP_CONFIRM, {"code": flow.totp(authenticator)}, token=access)["recovery_codes"]

    challenge = flow.call("POST", LOGIN, {"email": email, "password": SECOND})
    flow.call("POST", LOGIN_MFA, {"mfa_token": challenge["mfa_token"], "code": authenticator.wrong()}, expect=401)
    challenge = flow.call("POST", LOGIN, {"email": email, "password": SECOND})
    session = flow.call("POST", LOGIN_MFA, {"mfa_token": challenge["mfa_token"], "code": flow.totp(authenticator)})
    flow.call("POST", LOGIN_MFA, {"mfa_token": challenge["mfa_token"], "code": recovery[0]}, expect=401)
    challenge = flow.call("POST", LOGIN, {"email": email, "password": SECOND})
    flow.call("POST", LOGIN_MFA, {"mfa_token": challenge["mfa_token"], "code": recovery[1]})

    user_id = session["user"]["id"]
    flow.call("PUT", f"{WRITE}/{user_id}", {"password": THIRD, "current_password": FIRST},
              token=session["access_token"], expect=400)
    flow.call("PUT", f"{WRITE}/{user_id}", {"password": THIRD, "current_password": SECOND},
              token=session["access_token"])
    flow.call("DELETE", TOTP, {"code": recovery[2]}, token=session["access_token"], expect=204)
    flow.call("POST", "/v1/public/users/refresh", {"refresh_token": tokens["refresh_token"]}, expect=401)
    return flow


def record_text(record: logging.LogRecord) -> str:
    """Everything a handler could write of ``record``: the message and every attribute."""
    try:
        message = record.getMessage()
    except Exception:  # a bad format string is another test's business
        message = str(record.msg)
    return message + " " + " ".join(f"{k}={v!r}" for k, v in vars(record).items())


def test_a_whole_lifecycle_leaves_no_secret_in_logs_or_error_bodies(locky_client, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="locky")
    access = logging.getLogger("locky.access")
    attached = not access.propagate
    if attached:
        access.addHandler(caplog.handler)
    try:
        flow = run_flow(locky_client)
        # Let the sender finish whatever it logs about the messages.
        time.sleep(1.0)
    finally:
        if attached:
            access.removeHandler(caplog.handler)

    assert len(flow.secrets) >= 14
    # The scan saw the request log of the flow, not an empty log.
    assert any("/v1/public/users/login/mfa" in record.getMessage() for record in caplog.records), caplog.text
    short = [re.compile(rf"(?<![0-9A-Za-z]){code}(?![0-9A-Za-z])") for code in flow.short_codes]
    leaks = []
    for record in caplog.records:
        text = record_text(record)
        leaks += [f"{record.name}: a secret {secret[:6]}... in {text[:300]}" for secret in flow.secrets
                  if secret in text]
        leaks += [f"{record.name}: a TOTP code in {text[:300]}" for pattern in short if pattern.search(text)]
        if JWT_SHAPE.search(text):
            leaks.append(f"{record.name}: a JWT in {text[:300]}")
        if "Token:" in text:
            leaks.append(f"{record.name}: a mail body in {text[:300]}")
    for where, body in flow.errors:
        leaks += [f"a secret {secret[:6]}... in the error body of {where}: {body}" for secret in flow.secrets
                  if secret in body]
        if JWT_SHAPE.search(body):
            leaks.append(f"a JWT in the error body of {where}: {body}")
    assert not leaks, "\n".join(leaks[:20])


def test_the_weak_password_refusals_do_not_echo_the_password(locky_client):
    for password in ("password1", "ada-loves-zebrafish", "€" * 25):
        result = locky_client.simulate_post("/v1/public/users/register",
                                            json={"name": "Zebrafish", "email": "zebrafish@example.com",
                                                  "password": password})
        assert_fields(result, "password")
        assert password not in result.text
