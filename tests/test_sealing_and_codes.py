"""Secrets at rest (locky.sealing) and single-use codes (locky.accounts.codes)."""

from __future__ import annotations

import pytest

from locky.accounts.codes import hash_code, hash_recovery_code, new_code, new_recovery_code
from locky.sealing import SealError, Sealer

SECRET = "a-test-secret-of-enough-length-0123456789"


def test_a_sealed_value_opens_with_its_secret_and_context_only():
    sealer = Sealer(SECRET, "totp")
    sealed = sealer.seal("JBSWY3DPEHPK3PXP", "user-1")
    assert sealed.startswith("v1.") and "JBSWY3DPEHPK3PXP" not in sealed
    assert sealer.open(sealed, "user-1") == "JBSWY3DPEHPK3PXP"
    assert sealer.seal("JBSWY3DPEHPK3PXP", "user-1") != sealed  # a fresh nonce each time
    with pytest.raises(SealError):
        sealer.open(sealed, "user-2")  # copied onto another account's row
    with pytest.raises(SealError):
        Sealer("another-secret-of-enough-length-9876543210", "totp").open(sealed, "user-1")
    with pytest.raises(SealError):
        Sealer(SECRET, "signing-keys").open(sealed, "user-1")  # purposes have their own keys
    tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    with pytest.raises(SealError):
        sealer.open(tampered, "user-1")
    for garbage in ("", "v1.", "v1.!!!", "plain text", None):
        with pytest.raises(SealError):
            sealer.open(garbage, "user-1")


def test_codes_are_long_random_and_hashed():
    codes = {new_code() for _ in range(1000)}
    assert len(codes) == 1000
    assert all(len(code) == 43 for code in codes)  # 256 bits, URL-safe base64
    code = next(iter(codes))
    assert hash_code(code) == hash_code(code) and len(hash_code(code)) == 64 and code not in hash_code(code)


def test_recovery_codes_ignore_case_spaces_and_dashes():
    code = new_recovery_code()
    assert len(code) == 19 and code.count("-") == 3
    assert hash_recovery_code(code) == hash_recovery_code(code.upper().replace("-", " "))
    assert hash_recovery_code(code) != hash_recovery_code(new_recovery_code())
    assert hash_recovery_code(code) != hash_code(code)  # a recovery code is no other code
