"""Locky's bundled password hasher ``bcrypt`` (cost from ``LOCKY_BCRYPT_ROUNDS``, default 12)."""

from __future__ import annotations

import bcrypt

from locky.plugins import hookimpl


class BcryptHasher:
    """Salted bcrypt hashes; passwords are at most 72 bytes (validated before us)."""

    def __init__(self, rounds: int = 12):
        self.rounds = rounds

    def hash(self, password: str) -> str:
        return bcrypt.hashpw(password.encode(), bcrypt.gensalt(self.rounds)).decode()

    def verify(self, password: str, hashed: str) -> bool:
        if len(password.encode()) > 72:  # bcrypt < 5 would silently truncate and match
            return False
        try:
            return bcrypt.checkpw(password.encode(), hashed.encode())
        except ValueError:  # not a bcrypt hash, or a password over 72 bytes
            return False

    def needs_rehash(self, hashed: str) -> bool:
        try:
            return not hashed.startswith("$2") or int(hashed.split("$")[2]) != self.rounds
        except (IndexError, ValueError):
            return True


@hookimpl
def locky_register_password_hashers(registry):
    registry.add("bcrypt", lambda context: BcryptHasher(context.settings.bcrypt_rounds))
