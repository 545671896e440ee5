"""A software WebAuthn authenticator for the tests: it makes what a browser hands a relying
party, ``PublicKeyCredential.toJSON()`` of ``navigator.credentials.create()`` and
``.get()``, with real keys and signatures.

Test equipment, not the protocol under test: Locky verifies what it makes with py_webauthn
(``webauthn``). Attestation is of the ``none`` format; the credential key is an EC2 P-256
key (ES256) made with ``cryptography`` and written as a COSE key with ``cbor2`` (both are
dependencies of ``webauthn``). Everything a relying party must check can be made wrong on
purpose: the origin, the RP ID, the challenge, the signature counter, the user-verified
flag, the user handle.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass, field

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

ORIGIN = "http://localhost:8080"
RP_ID = "localhost"
#: Flags of authenticatorData (WebAuthn section 6.1).
UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Credential:
    """One passkey the authenticator holds: its id, key, RP ID, user handle and counter."""

    credential_id: bytes
    private_key: ec.EllipticCurvePrivateKey
    rp_id: str
    user_handle: bytes
    sign_count: int = 0

    @property
    def id(self) -> str:
        return b64url(self.credential_id)

    def cose_public_key(self) -> bytes:
        numbers = self.private_key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})


@dataclass
class Authenticator:
    """A resident-key authenticator. ``counts``: whether it keeps a signature counter (each
    assertion moves it one on); ``user_verifying``: whether it sets the UV flag."""

    origin: str = ORIGIN
    counts: bool = True
    user_verifying: bool = True
    aaguid: bytes = bytes(16)
    credentials: list[Credential] = field(default_factory=list)

    def create(self, options: dict, *, origin: str | None = None, rp_id: str | None = None,
               challenge: str | None = None, user_verified: bool | None = None) -> dict:
        """``navigator.credentials.create({publicKey: options})``, as JSON. The keyword
        arguments make the answer wrong where a test wants it to be."""
        rp_id = rp_id or options["rp"]["id"]
        credential = Credential(secrets.token_bytes(32), ec.generate_private_key(ec.SECP256R1()), rp_id,
                                unb64url(options["user"]["id"]))
        attested = (self.aaguid + len(credential.credential_id).to_bytes(2, "big") + credential.credential_id
                    + credential.cose_public_key())
        flags = UP | AT | (UV if self._uv(user_verified) else 0)
        auth_data = hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + (0).to_bytes(4, "big") + attested
        client_data = self._client_data("webauthn.create", challenge or options["challenge"], origin)
        self.credentials.append(credential)
        return {
            "id": credential.id,
            "rawId": credential.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})),
                "transports": ["internal", "hybrid"],
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def get(self, options: dict, credential: Credential | None = None, *, origin: str | None = None,
            rp_id: str | None = None, challenge: str | None = None, sign_count: int | None = None,
            user_verified: bool | None = None, user_handle: bytes | None | bool = True,
            tamper: bool = False) -> dict:
        """``navigator.credentials.get({publicKey: options})``, as JSON, with ``credential``
        (default: the last one made). ``sign_count`` reports that count instead of the
        next one; ``user_handle`` ``None`` leaves it out, bytes replace it; ``tamper``
        spoils the signature."""
        credential = credential or self.credentials[-1]
        if sign_count is None:
            if self.counts:
                credential.sign_count += 1
            sign_count = credential.sign_count
        flags = UP | (UV if self._uv(user_verified) else 0)
        auth_data = (hashlib.sha256((rp_id or options.get("rpId") or credential.rp_id).encode()).digest()
                     + bytes([flags]) + sign_count.to_bytes(4, "big"))
        client_data = self._client_data("webauthn.get", challenge or options["challenge"], origin)
        signature = credential.private_key.sign(auth_data + hashlib.sha256(client_data).digest(),
                                                ec.ECDSA(hashes.SHA256()))
        if tamper:
            signature = signature[:-1] + bytes([signature[-1] ^ 1])
        handle = credential.user_handle if user_handle is True else user_handle
        response = {"clientDataJSON": b64url(client_data), "authenticatorData": b64url(auth_data),
                    "signature": b64url(signature)}
        if handle is not None:
            response["userHandle"] = b64url(handle)
        return {"id": credential.id, "rawId": credential.id, "type": "public-key", "response": response,
                "clientExtensionResults": {}, "authenticatorAttachment": "platform"}

    def _uv(self, user_verified: bool | None) -> bool:
        return self.user_verifying if user_verified is None else user_verified

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": origin or self.origin,
                           "crossOrigin": False}, separators=(",", ":")).encode()
