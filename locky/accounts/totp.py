"""TOTP second factor (RFC 6238: SHA-1, 6 digits, 30-second steps, ±1 step), on pyotp.

Secrets are 160 random bits in base32 (RFC 4226's recommended length), sealed before
they reach storage (:mod:`locky.sealing`, bound to the user's uuid). A code is matched
against the steps around now and answered with the step it belongs to, so storage can
accept each step once (a code cannot be replayed, not even within its 30 seconds).
"""

from __future__ import annotations

import hmac
import time

import pyotp

from locky.sealing import Sealer

DIGITS = 6
INTERVAL = 30
#: Steps before and after now whose codes are accepted (clock drift, typing time).
DRIFT = 1
ISSUER = "Locky"


class TotpCodes:
    """Secrets and codes of the TOTP second factor for one app."""

    def __init__(self, secret: str):
        self.sealer = Sealer(secret, "totp")

    @staticmethod
    def new_secret() -> str:
        return pyotp.random_base32(32)

    @staticmethod
    def uri(secret: str, email: str) -> str:
        """The ``otpauth://totp/...`` URI an authenticator app reads (from a QR code)."""
        return pyotp.TOTP(secret, digits=DIGITS, interval=INTERVAL).provisioning_uri(name=email, issuer_name=ISSUER)

    def seal(self, secret: str, user_uuid: str) -> str:
        return self.sealer.seal(secret, user_uuid)

    def open(self, sealed: str, user_uuid: str) -> str:
        return self.sealer.open(sealed, user_uuid)

    @staticmethod
    def step_of(secret: str, code: str, at: float | None = None) -> int | None:
        """The time step within ±``DRIFT`` of ``at`` (now) whose code is ``code``, or ``None``."""
        # ASCII digits only: str.isdigit() also passes "２" and "²".
        if not isinstance(code, str) or len(code) != DIGITS or not (code.isascii() and code.isdigit()):
            return None
        totp = pyotp.TOTP(secret, digits=DIGITS, interval=INTERVAL)
        now_step = int((time.time() if at is None else at) // INTERVAL)
        found = None
        for step in range(max(0, now_step - DRIFT), now_step + DRIFT + 1):
            if hmac.compare_digest(totp.generate_otp(step), code):
                found = step  # keep looping: the same work whichever step matches
        return found
