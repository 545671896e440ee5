"""Locky's bundled password hasher ``bcrypt`` (cost from ``LOCKY_BCRYPT_ROUNDS``, default 12)."""

from __future__ import annotations

import secrets

import bcrypt

from locky import hookimpl


def _cost(hashed: str) -> int | None:
    """The cost of a bcrypt hash (``$2b$12$...`` is 12), or ``None`` for anything else."""
    parts = hashed.split("$")
    if len(parts) != 4 or not parts[1].startswith("2") or not (parts[2].isascii() and parts[2].isdigit()):
        return None
    return int(parts[2])


class BcryptHasher:
    """Salted bcrypt hashes; passwords are at most 72 bytes (validated before us).

    Every check costs the configured cost, so the time of a failed login does not tell
    which accounts exist (the login's dummy check for unknown emails costs the configured
    rounds). A hash made with fewer rounds, ``c`` (an account not logged in since
    ``LOCKY_BCRYPT_ROUNDS`` was raised), is checked, then one throwaway check at each cost
    from ``c`` to the configured one less one: 2^c + (2^c + ... + 2^(r-1)) = 2^r, the
    work of one check at the configured cost ``r``. One that is no bcrypt hash at all
    costs one check at ``r``. Login rehashes such hashes on success.
    """

    def __init__(self, rounds: int = 12):
        self.rounds = rounds
        self._equalizers: dict[int, bytes] = {}  # by cost, made on first need: startup stays cheap

    def hash(self, password: str) -> str:
        return bcrypt.hashpw(password.encode(), bcrypt.gensalt(self.rounds)).decode()

    def verify(self, password: str, hashed: str) -> bool:
        encoded = password.encode()
        cost = _cost(hashed) if isinstance(hashed, str) else None
        # Over 72 bytes never matches: bcrypt < 5 would silently truncate and match.
        usable = cost is not None and len(encoded) <= 72
        if not usable:
            self._spend(self.rounds)
            return False
        for cheaper in range(max(cost, 4), self.rounds):
            self._spend(cheaper)
        try:
            return bcrypt.checkpw(encoded, hashed.encode())
        except ValueError:  # a malformed salt
            return False

    def _spend(self, cost: int) -> None:
        """One check at ``cost`` whose result is thrown away."""
        equalizer = self._equalizers.get(cost)
        if equalizer is None:
            equalizer = self._equalizers[cost] = bcrypt.hashpw(secrets.token_urlsafe(16).encode(),
                                                               bcrypt.gensalt(cost))
        bcrypt.checkpw(b"not the password", equalizer)

    def needs_rehash(self, hashed: str) -> bool:
        return _cost(hashed) != self.rounds


@hookimpl
def locky_add_settings(settings):
    settings.add("bcrypt_rounds", 12, type="int", bounds=(4, 31),
                 help="the bcrypt cost of new hashes (LOCKY_BCRYPT_ROUNDS); older ones are rehashed at login")


@hookimpl
def locky_register_password_hashers(registry):
    registry.add("bcrypt", lambda context: BcryptHasher(context.settings.bcrypt_rounds))
