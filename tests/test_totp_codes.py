"""Locky's TOTP (locky.accounts.totp) against RFC 6238's own test vectors (appendix B, SHA-1).

The RFC lists 8-digit values; a 6-digit code is the same truncation modulo 10**6, so its
last six digits. ``step_of`` must find each code at its time, within ±1 step and no further.
"""

from __future__ import annotations

import base64

import pytest

from locky.accounts.totp import TotpCodes

RFC_SECRET = base64.b32encode(b"12345678901234567890").decode()
RFC_VECTORS = [
    (59, "94287082"),
    (1111111109, "07081804"),
    (1111111111, "14050471"),
    (1234567890, "89005924"),
    (2000000000, "69279037"),
    (20000000000, "65353130"),
]


@pytest.mark.parametrize("at, eight_digits", RFC_VECTORS)
def test_rfc_6238_vectors(at, eight_digits):
    code = eight_digits[-6:]
    step = at // 30
    assert TotpCodes.step_of(RFC_SECRET, code, at=at) == step
    assert TotpCodes.step_of(RFC_SECRET, code, at=at + 30) == step  # one step late: accepted
    assert TotpCodes.step_of(RFC_SECRET, code, at=at - 30) == step  # one step early: accepted
    assert TotpCodes.step_of(RFC_SECRET, code, at=at + 90) is None  # three steps late: refused


@pytest.mark.parametrize("code", ["", "12345", "1234567", "abcdef", "28708２", None, 287082])
def test_malformed_codes_match_nothing(code):
    assert TotpCodes.step_of(RFC_SECRET, code, at=59) is None


def test_secrets_are_160_bits_and_the_uri_names_the_account():
    secret = TotpCodes.new_secret()
    assert len(base64.b32decode(secret)) == 20
    uri = TotpCodes.uri(secret, "ada@example.com")
    assert uri.startswith("otpauth://totp/Locky:ada%40example.com?") and f"secret={secret}" in uri
    assert "issuer=Locky" in uri
