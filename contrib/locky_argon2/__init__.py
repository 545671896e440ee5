"""Argon2id password hashing for Locky: the password hasher ``argon2``.

Install the extra and choose it by name::

    pip install 'locky[argon2]'
    LOCKY_PLUGINS=locky_argon2 LOCKY_PASSWORD_HASHER=argon2 locky serve

Loading the plugin only offers the name ``argon2``; bcrypt stays in use until
``password_hasher`` says otherwise. Switching an existing deployment is seamless: the
hasher still verifies the bcrypt hashes already stored, and says they need a rehash, so
Locky replaces each one with an Argon2id hash the next time its user logs in.

Cost parameters come from the TOML settings (defaults: argon2-cffi's, which follow
RFC 9106's second recommended profile: t=3, m=64 MiB, p=4)::

    [plugins.argon2]
    time_cost = 3
    memory_cost = 65536   # KiB
    parallelism = 4

A stored hash made with other parameters is rehashed at its next login as well.
"""

from __future__ import annotations

from typing import Any, Mapping

import argon2
import bcrypt

from locky import SettingsError, hookimpl

__all__ = ["Argon2Hasher", "locky_register_password_hashers"]

PARAMETERS = ("time_cost", "memory_cost", "parallelism")


class Argon2Hasher:
    """Argon2id hashes; reads (and asks to replace) the bcrypt hashes made before it."""

    def __init__(self, time_cost: int | None = None, memory_cost: int | None = None, parallelism: int | None = None):
        given = {"time_cost": time_cost, "memory_cost": memory_cost, "parallelism": parallelism}
        self._hasher = argon2.PasswordHasher(
            type=argon2.Type.ID, **{k: v for k, v in given.items() if v is not None}
        )

    @classmethod
    def from_settings(cls, options: Mapping[str, Any]) -> "Argon2Hasher":
        unknown = sorted(set(options) - set(PARAMETERS))
        if unknown:
            raise SettingsError(
                f"[plugins.argon2] has unknown key(s): {', '.join(unknown)}; known: {', '.join(PARAMETERS)}"
            )
        values = {}
        for name in PARAMETERS:
            if name in options:
                value = options[name]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise SettingsError(f"[plugins.argon2] {name} must be a positive integer")
                values[name] = value
        hasher = cls(**values)
        try:
            hasher.hash("parameter check")  # fail at startup, not at the first login
        except (argon2.exceptions.HashingError, argon2.exceptions.UnsupportedParametersError) as exc:
            raise SettingsError(f"[plugins.argon2] parameters are not usable: {exc}") from None
        return hasher

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, password: str, hashed: str) -> bool:
        if hashed.startswith("$argon2"):
            try:
                return self._hasher.verify(hashed, password)
            except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
                return False
        if hashed.startswith("$2"):  # bcrypt, from before the switch
            try:
                return bcrypt.checkpw(password.encode(), hashed.encode())
            except ValueError:
                return False
        return False

    def needs_rehash(self, hashed: str) -> bool:
        if not hashed.startswith("$argon2id$"):
            return True  # bcrypt, or argon2i/argon2d
        try:
            return self._hasher.check_needs_rehash(hashed)
        except argon2.exceptions.InvalidHashError:
            return True


@hookimpl
def locky_register_password_hashers(registry):
    registry.add("argon2", lambda context: Argon2Hasher.from_settings(context.settings.extra.get("argon2", {})))
