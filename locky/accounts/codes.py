"""Single-use codes: made here, handed out once, kept by storage only as hashes.

A code is 256 random bits in URL-safe base64 (43 characters): too many to guess, so a
plain SHA-256 of it is safe to keep (a slow hash protects guessable secrets such as
passwords; it adds nothing here). Recovery codes are shorter (80 bits, typed by people)
and normalized before hashing, so spaces, dashes and case do not matter.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

#: Codes handed out for verification, reset and the second login step.
CODE_BYTES = 32
#: Recovery codes: 16 base32 characters (80 bits), shown as four groups of four.
RECOVERY_BYTES = 10


def new_code() -> str:
    """A new code; never one starting with ``-``, which a command line would read as an
    option (``locky-anonymous verify CODE``)."""
    while True:
        code = secrets.token_urlsafe(CODE_BYTES)
        if not code.startswith("-"):
            return code


def hash_code(code: str) -> str:
    """The SHA-256 hex of ``code`` (what storage keeps and looks up)."""
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


def new_recovery_code() -> str:
    text = base64.b32encode(secrets.token_bytes(RECOVERY_BYTES)).decode().lower()
    return "-".join(text[i:i + 4] for i in range(0, 16, 4))


def hash_recovery_code(code: str) -> str:
    """The hash of a recovery code as typed: case, spaces and dashes do not matter."""
    normalized = "".join(ch for ch in code.lower() if ch not in " -\t")
    return hash_code("recovery:" + normalized)
