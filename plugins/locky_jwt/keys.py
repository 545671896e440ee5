"""Signing keys of the asymmetric algorithms (docs/http/tokens.md): made here, kept in storage,
shared by every worker and host, rotated, published as a JWKS.

- The private half is PEM sealed with a key derived from ``LOCKY_JWT_SECRET``
  (:mod:`locky.sealing`, bound to the key's ``kid``): a database dump alone reveals no
  private key. The public half is a JWK (RFC 7517) whose ``kid`` is its RFC 7638
  thumbprint.
- Keys come in families, one per algorithm (:class:`KeyRing`): the configured
  ``LOCKY_JWT_ALGORITHM``'s (access and refresh tokens), RS256's always (ID tokens, which
  every OpenID relying party must accept), and ES256's or EdDSA's once an ID token of
  that algorithm is asked for. The JWKS publishes every family; a rotation rotates
  every family. A family only ever verifies tokens of its own algorithm.
- One key of each family is active. ``Storage.keys.rotate`` lets exactly one of the
  processes rotating a family at once win; the others take the winner's key. A process re-reads the active key
  every :data:`ACTIVE_RECHECK` seconds, so all hosts sign with the new key soon after a
  rotation anywhere, and every key keeps verifying until no token it signed can still be
  valid (``retired_at`` + the longest token lifetime): only then it leaves the JWKS and
  is pruned.
- An unknown ``kid`` reloads the keys from storage at most once per
  :data:`RELOAD_INTERVAL` (a key made by another host moments ago), so tokens with
  made-up kids cannot make every request a storage read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from locky import ProviderError, SigningKey, utcnow
from locky.storage import KEYS, Sealer, SealError, Watcher

log = logging.getLogger("locky.keys")

#: Seconds between two reads of the active key (another host may have rotated).
ACTIVE_RECHECK = 30.0
#: Seconds between two reloads of every key on an unknown ``kid``: short, so a token of
#: a key another host made moments ago is refused for at most this long, and still a
#: limit on the storage reads that tokens with made-up kids can cause.
RELOAD_INTERVAL = 0.1
#: The JWK members RFC 7638 hashes for each key type.
THUMBPRINT_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x"), "RSA": ("e", "kty", "n")}
JWK_OF = {"ES256": ECAlgorithm, "EdDSA": OKPAlgorithm, "RS256": RSAAlgorithm}
#: What :class:`SigningKeys` keeps of stored values, and what makes it stale: the writes
#: of ``storage.keys`` (``locky.cache.declared.STORES``). They are not announced: every
#: process re-reads the keys on a timer, and at once after its own rotation.
KEY_CACHE = Watcher(
    "signing keys", frozenset({KEYS}),
    f"the active key re-read every {ACTIVE_RECHECK:g} s, every key on an unknown kid at most every"
    f" {RELOAD_INTERVAL:g} s",
)


#: The family every key ring has, whatever the configured algorithm: ID tokens are
#: RS256 unless a client asks for another (OpenID Connect Core 1.0, section 15.1).
ID_TOKEN_ALGORITHM = "RS256"


def _generate(alg: str):
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    if alg == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"no keys for {alg}")


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: the SHA-256 of the key's required members, base64url."""
    members = {name: jwk[name] for name in THUMBPRINT_MEMBERS[jwk["kty"]]}
    digest = hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True)
class LoadedKey:
    """A stored key ready to use: its record, public key object and public JWK."""

    record: SigningKey
    public: Any
    jwk: dict[str, Any]


class StoredKeys:
    """``storage.keys.all()`` read at most once per :data:`RELOAD_INTERVAL` for all the
    families of a key ring (one read serves the JWKS of every family)."""

    def __init__(self, storage):
        self.storage = storage
        self._lock = threading.Lock()
        self._records: list[SigningKey] = []
        self._read_at: float | None = None

    def all(self, *, force: bool = False) -> list[SigningKey]:
        now = time.monotonic()
        with self._lock:
            if force or self._read_at is None or now - self._read_at >= RELOAD_INTERVAL:
                # Storage down: this raises (503) and the next call reads again.
                self._records = self.storage.keys.all()
                self._read_at = now
            return self._records

    def forget(self) -> None:
        """The next :meth:`all` reads storage (a key was just made here)."""
        with self._lock:
            self._read_at = None


class SigningKeys:
    """The keys of one family (one algorithm) of one app, over ``storage.keys``.

    ``primary``: the family of the configured algorithm, the one access tokens are
    signed with (only its first key warns about the users' older HS256 tokens)."""

    def __init__(self, storage, *, algorithm: str, secret: str, rotation_days: int, token_lifetime: int,
                 stored: StoredKeys | None = None, primary: bool = True):
        self.storage = storage
        self.stored = stored or StoredKeys(storage)
        self.primary = primary
        self.algorithm = algorithm
        self.sealer = Sealer(secret, "signing-keys")
        self.rotation = timedelta(days=rotation_days) if rotation_days else None
        self.lifetime = timedelta(seconds=token_lifetime)
        self._lock = threading.Lock()
        self._known: dict[str, LoadedKey] = {}
        self._active: tuple[str, Any] | None = None  # (kid, private key object)
        self._active_read = 0.0
        self._reloaded = 0.0

    # -- signing ---------------------------------------------------------------------

    def signing_key(self) -> tuple[str, Any]:
        """The active key's ``kid`` and private key: made when there is none, rotated
        when older than ``LOCKY_KEY_ROTATION_DAYS``, re-read now and then."""
        now = time.monotonic()
        active = self._active
        if active is not None and now - self._active_read < ACTIVE_RECHECK:
            return active
        with self._lock:
            if self._active is not None and now - self._active_read < ACTIVE_RECHECK:
                return self._active
            record = self.storage.keys.active(self.algorithm)
            if record is None or record.alg != self.algorithm:
                record = self._rotate(record, reason="first key" if record is None else f"algorithm now {self.algorithm}")
            elif self.rotation is not None and utcnow() - record.created_at >= self.rotation:
                record = self._rotate(record, reason="LOCKY_KEY_ROTATION_DAYS reached")
            self._active = (record.kid, self._private(record))
            self._active_read = now
            return self._active

    def rotate(self) -> SigningKey:
        """Make a new active key now (``locky keys rotate``, ``POST .../keys/rotate``)."""
        with self._lock:
            record = self._rotate(self.storage.keys.active(self.algorithm), reason="asked for")
            self._active = (record.kid, self._private(record))
            self._active_read = time.monotonic()
            self._reloaded = 0.0  # the JWKS shows the new key at once
            return record

    def _rotate(self, current: SigningKey | None, *, reason: str) -> SigningKey:
        new = self._new_key()
        record = self.storage.keys.rotate(new, replacing=current.kid if current else None)
        if record.kid == new.kid:
            log.info("made signing key %s (%s; %s)", new.kid, self.algorithm, reason)
            self.stored.forget()
            if current is None and self.primary and self.storage.users.count() > 0:
                # An upgraded database (or a switch from HS256): say what happens to the
                # tokens its users hold.
                log.warning("the first %s signing key was made for a database that has accounts: tokens"
                            " issued before (HS256 with LOCKY_JWT_SECRET) are no longer accepted, so"
                            " every user logs in again. Set LOCKY_JWT_ALGORITHM=HS256 to keep them.",
                            self.algorithm)
            self.storage.keys.prune(utcnow() - self.lifetime - timedelta(minutes=1))
        return record

    def _new_key(self) -> SigningKey:
        private = _generate(self.algorithm)
        jwk = json.loads(JWK_OF[self.algorithm].to_jwk(private.public_key()))
        jwk.pop("key_ops", None)  # PyJWT adds it to RSA keys; RFC 7517 §4.3: not with "use"
        kid = thumbprint(jwk)
        jwk.update(kid=kid, alg=self.algorithm, use="sig")
        pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        return SigningKey(kid=kid, alg=self.algorithm, public_jwk=json.dumps(jwk, sort_keys=True),
                          private_key=self.sealer.seal(pem, kid), created_at=utcnow())

    def _private(self, record: SigningKey):
        try:
            pem = self.sealer.open(record.private_key, record.kid)
        except SealError:
            raise ProviderError(
                f"signing key {record.kid} does not open with this LOCKY_JWT_SECRET: the secret is not"
                " the one the keys were sealed with; start with that secret (docs/operating.md)") from None
        return serialization.load_pem_private_key(pem.encode(), password=None)

    # -- verifying and publishing ------------------------------------------------------

    def verifying_key(self, kid: str) -> Any | None:
        """The public key of ``kid`` while tokens it signed may still be valid, or ``None``."""
        found = self._known.get(kid)
        if found is None or time.monotonic() - self._reloaded >= ACTIVE_RECHECK:
            # An unknown kid (a key another host made), or keys read a while ago (another
            # host may have retired one): read them again.
            self._reload(force=False)
            found = self._known.get(kid)
        if found is None or not self._publishable(found.record):
            return None
        return found.public

    def published(self) -> list[dict[str, Any]]:
        """The JWKS's keys: the active one and every retired one still verifying (read
        from storage at most once per :data:`RELOAD_INTERVAL`)."""
        self._reload(force=False)
        return [key.jwk for key in self._known.values() if self._publishable(key.record)]

    def listing(self) -> list[SigningKey]:
        """Every stored key, oldest first (``GET /v1/internal/keys``)."""
        return self.storage.keys.all()

    def _publishable(self, record: SigningKey) -> bool:
        return record.retired_at is None or record.retired_at + self.lifetime > utcnow()

    def _reload(self, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._reloaded < RELOAD_INTERVAL:
            return
        known = {}
        # Storage down: this raises (503) and the next request reads again; only a
        # successful read starts the interval.
        for record in self.stored.all(force=force):
            if record.alg != self.algorithm:
                continue  # a key of another algorithm never verifies (no alg confusion)
            jwk = json.loads(record.public_jwk)
            known[record.kid] = LoadedKey(record, JWK_OF[record.alg].from_jwk(record.public_jwk), jwk)
        self._known = known
        self._reloaded = now


class KeyRing:
    """Every key family of one app: ``primary`` (the configured algorithm; ``None`` with
    an HMAC one), RS256 always, ES256 or EdDSA made on first need (:meth:`family`).

    A family another host made (a client asking for EdDSA ID tokens there) is found in
    storage: the JWKS publishes it and a rotation rotates it here as well."""

    def __init__(self, storage, *, primary: str | None, secret: str, rotation_days: int, token_lifetime: int):
        self.storage = storage
        self.primary = primary
        self.stored = StoredKeys(storage)
        self._settings = {"secret": secret, "rotation_days": rotation_days, "token_lifetime": token_lifetime}
        self._lock = threading.Lock()
        self._families: dict[str, SigningKeys] = {}
        #: The families every app has: their first keys are made on first need.
        self.standing = tuple(dict.fromkeys(alg for alg in (primary, ID_TOKEN_ALGORITHM) if alg))

    def family(self, alg: str) -> SigningKeys:
        """The keys of ``alg`` (``ES256``, ``EdDSA`` or ``RS256``); its first key is made
        by its first ``signing_key()``. ``ValueError`` for any other algorithm."""
        found = self._families.get(alg)
        if found is not None:
            return found
        if alg not in JWK_OF:
            raise ValueError(f"no signing keys for {alg!r}: use one of {', '.join(JWK_OF)}")
        with self._lock:
            found = self._families.get(alg)
            if found is None:
                found = SigningKeys(self.storage, algorithm=alg, stored=self.stored, primary=alg == self.primary,
                                    **self._settings)
                self._families[alg] = found
            return found

    def families(self) -> list[SigningKeys]:
        """The standing families (their first keys made now when missing), then every
        other family storage holds an active key of."""
        for alg in self.standing:
            self.family(alg).signing_key()
        stored = {record.alg for record in self.stored.all() if record.retired_at is None and record.alg in JWK_OF}
        return [self.family(alg) for alg in (*self.standing, *sorted(stored - set(self.standing)))]

    def published(self) -> list[dict[str, Any]]:
        """The JWKS's keys: those of every family, the configured algorithm's first."""
        return [jwk for family in self.families() for jwk in family.published()]

    def listing(self) -> list[SigningKey]:
        """Every stored key of every family, oldest first (``GET /v1/internal/keys``)."""
        self.families()
        return self.storage.keys.all()

    def rotate(self) -> list[SigningKey]:
        """A new active key for every family, the configured algorithm's first (RS256's
        first with an HMAC algorithm). Call inside ``storage.atomic()`` to keep them and
        their events together."""
        return [family.rotate() for family in self.families()]


def public_jwk(record: SigningKey) -> dict[str, Any]:
    return json.loads(record.public_jwk)
