"""Secrets at rest, sealed with a key derived from ``LOCKY_JWT_SECRET``.

What storage keeps of a TOTP secret (and of any other secret Locky must read back) is
AES-256-GCM ciphertext under a key derived with HKDF-SHA256 from ``LOCKY_JWT_SECRET``:
a database dump alone reveals none of them. Each sealed value is bound to what it
belongs to (``context``, e.g. the user's uuid): a value copied onto another row does
not open there.

Format: ``v1.`` + URL-safe base64 (no padding) of a 12-byte random nonce and the
ciphertext with its tag.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "v1."


class SealError(ValueError):
    """A sealed value that does not open: another secret, another context, or damaged."""


class Sealer:
    """Seals and opens short secrets for one purpose (``purpose`` keeps keys apart:
    TOTP secrets and signing keys never share one)."""

    def __init__(self, secret: str, purpose: str):
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"locky-sealing",
                   info=f"locky seal v1 {purpose}".encode()).derive(secret.encode())
        self._aead = AESGCM(key)

    def seal(self, plaintext: str, context: str) -> str:
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, plaintext.encode(), context.encode())
        return PREFIX + base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def open(self, sealed: str, context: str) -> str:
        if not isinstance(sealed, str) or not sealed.startswith(PREFIX):
            raise SealError("not a sealed value")
        raw = sealed[len(PREFIX):]
        try:
            data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
            return self._aead.decrypt(data[:12], data[12:], context.encode()).decode()
        except (ValueError, InvalidTag):
            raise SealError("the sealed value does not open with this secret and context") from None
