"""Passkeys (WebAuthn, docs/http/accounts.md#passkeys): the ceremonies' options, and the
checks of what a browser answers, on py_webauthn (``webauthn``).

The protocol's checks (client data type, challenge, origin, RP ID hash, flags, the
attestation, the signature) are the library's; this module decides what it is asked to
expect, and keeps what the library leaves to a relying party:

- Challenges are single-use codes of the code store (:mod:`locky.accounts.codes`: only
  their hashes are kept), living :data:`CHALLENGE_TTL`. A registration's is bound to the
  user it was made for (purpose :data:`REGISTER`); a sign-in's (purpose :data:`LOGIN`)
  to the account whose email was given, or to any account (:data:`ANY_USER`) for a
  discoverable credential. The challenge is spent before the answer is checked, so a
  replayed answer fails whatever else it gets right.
- Origins: ``LOCKY_PUBLIC_URL``'s and ``LOCKY_WEBAUTHN_ORIGINS``, exactly; while the RP
  ID is ``localhost``, also any ``http(s)://localhost[:port]``
  (:attr:`locky.settings.Settings.webauthn_allowed_origins`).
- The user handle of a sign-in must be the passkey's user's (the stable bytes of its
  uuid); without one, the challenge must have been made for that user's email.
- The signature counter is decided by storage, atomically
  (:meth:`locky.providers.PasskeyStore.use`): the library is told the stored count is 0
  so that it never refuses on the count itself, and a count that does not move on is
  refused by the one check that also holds under concurrent sign-ins.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import webauthn
from webauthn.helpers import options_to_json_dict, parse_client_data_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.parse_authentication_credential_json import parse_authentication_credential_json
from webauthn.helpers.parse_registration_credential_json import parse_registration_credential_json
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticationCredential,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)
from webauthn.helpers.cose import COSEAlgorithmIdentifier

from locky import events
from locky.accounts.codes import hash_code
from locky.errors import Invalid, NotFound, StateConflict, Unauthorized
from locky.records import Passkey, User, utcnow
from locky.settings import LOCALHOST_ORIGIN

REGISTER = "passkey.register"
LOGIN = "passkey.login"
#: The subject of a sign-in challenge made for no particular account (a discoverable
#: credential): never a user's uuid.
ANY_USER = "*"
#: How long a ceremony's challenge lives (docs/http/accounts.md#passkeys: five minutes); also the
#: ``timeout`` the browser is given.
CHALLENGE_TTL = timedelta(minutes=5)
#: The most passkeys one account keeps: enough for every device of a person, and a
#: bound on what one stolen session can add.
MAX_PER_USER = 20
#: The key algorithms accepted, in the order of preference offered: ES256 (every
#: platform), EdDSA, RS256 (Windows Hello).
ALGORITHMS = [COSEAlgorithmIdentifier.ECDSA_SHA_256, COSEAlgorithmIdentifier.EDDSA,
              COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256]
#: How long a passkey's name may be (characters).
NAME_MAX = 64
#: The longest credential id WebAuthn allows (Level 3, section 5.1: at most 1023 bytes).
CREDENTIAL_ID_MAX = 1023
NOT_VERIFIED = "The passkey could not be verified"
STALE_CHALLENGE = ("The challenge is unknown, used or expired: ask for new options"
                   " (they are single-use and live 5 minutes).")
UNKNOWN_PASSKEY = "No account has this passkey."
COUNTER_MISMATCH = ("The passkey's signature counter did not move on: it may have been copied. Sign in"
                    " another way, and remove this passkey if you did not expect this.")
_TRANSPORTS = {t.value: t for t in AuthenticatorTransport}


def user_handle(user_uuid: str) -> bytes:
    """The WebAuthn user handle of a user: the 16 bytes of its uuid (stable, and
    telling nothing about the person)."""
    return uuid.UUID(user_uuid).bytes


@dataclass(frozen=True)
class Assertion:
    """A sign-in answer read so far: the parsed credential, the spent challenge (its bytes,
    and the subject it was made for) and the passkey it names."""

    credential: AuthenticationCredential
    challenge: bytes
    subject: str
    origin: str
    passkey: Passkey


@dataclass(frozen=True)
class Verified:
    """A sign-in answer that verified: the user verified on the authenticator or not,
    and the signature counter it reported."""

    user_verified: bool
    sign_count: int


class Passkeys:
    """The passkey ceremonies of one app, over its storage, settings and audit trail."""

    def __init__(self, context):
        self.context = context
        self.settings = context.settings

    # -- registration ----------------------------------------------------------------

    def creation_options(self, user: User) -> dict[str, Any]:
        """The options of ``navigator.credentials.create()`` for a new passkey of
        ``user``, in the JSON form browsers take (``parseCreationOptionsFromJSON``): a
        resident key required, user verification preferred, the user's passkeys
        excluded, no attestation. 409 when the user has :data:`MAX_PER_USER`."""
        mine = self._room_for_one_more(user)
        challenge = self._challenge(REGISTER, user.uuid, user.email)
        options = webauthn.generate_registration_options(
            rp_id=self.settings.webauthn_rp, rp_name=self.settings.webauthn_rp_name, user_name=user.email,
            user_id=user_handle(user.uuid), user_display_name=user.name, challenge=challenge,
            timeout=int(CHALLENGE_TTL.total_seconds() * 1000),
            attestation=AttestationConveyancePreference.NONE,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED, require_resident_key=True,
                user_verification=UserVerificationRequirement.PREFERRED),
            exclude_credentials=[_descriptor(passkey) for passkey in mine],
            supported_pub_key_algs=ALGORITHMS)
        return options_to_json_dict(options)

    def register(self, user: User, credential: Any, name: str | None = None) -> Passkey:
        """Keep the passkey ``credential`` (the browser's ``PublicKeyCredential`` JSON) for
        ``user``, with its ``passkey.registered`` event. ``Invalid`` on ``credential``
        (400) when it does not verify or its challenge is not one of ``user``'s live ones;
        ``Conflict`` (400) when any account has it already; 409 past :data:`MAX_PER_USER`."""
        try:
            parsed = parse_registration_credential_json(credential)
            client_data = parse_client_data_json(parsed.response.client_data_json)
        except Exception as exc:  # anything unreadable in it is the client's mistake
            raise _unreadable(exc) from None
        challenge = client_data.challenge
        code = self.context.storage.codes.use(hash_code(_text(challenge)), REGISTER, now=utcnow())
        if code is None or code.user_uuid != user.uuid:
            raise Invalid.one("credential", STALE_CHALLENGE)
        try:
            verified = webauthn.verify_registration_response(
                credential=parsed, expected_challenge=challenge, expected_rp_id=self.settings.webauthn_rp,
                expected_origin=self._origins(client_data.origin), supported_pub_key_algs=ALGORITHMS)
        except Exception as exc:  # the library does no I/O: whatever it raises, the answer is at fault
            raise _unverified(exc) from None
        if len(verified.credential_id) > CREDENTIAL_ID_MAX:
            raise Invalid.one("credential", f"{NOT_VERIFIED}: its credential id is longer than {CREDENTIAL_ID_MAX}"
                                            " bytes.")
        storage = self.context.storage
        with storage.atomic():  # the cap, the passkey and its event, together
            # The user's row locked first (as every writer of a user's credentials does):
            # two registrations racing count one after the other, so the cap holds.
            if storage.users.for_update(user.uuid) is None:
                raise Unauthorized("The account is gone.")
            count = len(storage.passkeys.of_user(user.uuid))
            if count >= MAX_PER_USER:
                raise StateConflict(_full())
            passkey = storage.passkeys.add(
                user_uuid=user.uuid, credential_id=_text(verified.credential_id),
                public_key=_text(verified.credential_public_key), sign_count=verified.sign_count,
                name=name or f"Passkey {count + 1}",
                transports=[t.value for t in (parsed.response.transports or ())],
                aaguid=verified.aaguid, backed_up=verified.credential_backed_up)
            self.context.audit.record(events.PASSKEY_REGISTERED, target_type="passkey", target_uuid=passkey.uuid,
                                      details={"user_uuid": user.uuid, "name": passkey.name}, record=passkey)
        return passkey

    def of_user(self, user: User) -> list[Passkey]:
        return self.context.storage.passkeys.of_user(user.uuid)

    def rename(self, user: User, id: int, name: str) -> Passkey:
        """Rename ``user``'s passkey ``id``; 404 when ``user`` has none of that id."""
        passkey = self.context.storage.passkeys.rename(user.uuid, id, name)
        if passkey is None:
            raise NotFound()
        return passkey

    def remove(self, user: User, id: int) -> Passkey:
        """Delete ``user``'s passkey ``id`` with its ``passkey.removed`` event; 404 when
        ``user`` has none of that id (another user's included)."""
        storage = self.context.storage
        with storage.atomic():
            passkey = storage.passkeys.remove(user.uuid, id)
            if passkey is None:
                raise NotFound()
            self.context.audit.record(events.PASSKEY_REMOVED, target_type="passkey", target_uuid=passkey.uuid,
                                      details={"user_uuid": user.uuid, "name": passkey.name}, record=passkey)
        return passkey

    def _room_for_one_more(self, user: User) -> list[Passkey]:
        mine = self.of_user(user)
        if len(mine) >= MAX_PER_USER:
            raise StateConflict(_full())
        return mine

    # -- sign-in ---------------------------------------------------------------------

    def request_options(self, email: str | None = None) -> dict[str, Any]:
        """The options of ``navigator.credentials.get()`` to sign in, in the JSON form
        browsers take (``parseRequestOptionsFromJSON``).

        Without ``email``: an empty ``allowCredentials``, for a discoverable credential
        (the browser offers the passkeys it holds for the RP ID). With ``email``: that
        account's passkeys, and the challenge is bound to it. An email with no passkeys,
        or no account, is answered alike: one credential id derived from the email with
        the service's secret (the same on every request), so the answer tells nobody
        whether the address has an account."""
        storage = self.context.storage
        if email is None:
            subject, allowed = ANY_USER, None
        else:
            user = storage.users.get_by_email(email)
            passkeys = storage.passkeys.of_user(user.uuid) if user is not None else []
            # An unknown email's challenge is bound to a uuid no user has: nothing answers it.
            subject = user.uuid if user is not None else str(uuid.uuid4())
            allowed = [_descriptor(p) for p in passkeys] or [self._decoy(email)]
        challenge = self._challenge(LOGIN, subject, email or ANY_USER)
        options = webauthn.generate_authentication_options(
            rp_id=self.settings.webauthn_rp, challenge=challenge, timeout=int(CHALLENGE_TTL.total_seconds() * 1000),
            allow_credentials=allowed or [], user_verification=UserVerificationRequirement.PREFERRED)
        return options_to_json_dict(options)

    def read_assertion(self, credential: Any) -> Assertion:
        """Read a sign-in answer, spend its challenge and find its passkey: ``Invalid`` on
        ``credential`` (400) when it cannot be read or its challenge is not live;
        :class:`UnknownPasskey` (also a 400) when no account has the passkey."""
        try:
            parsed = parse_authentication_credential_json(credential)
            client_data = parse_client_data_json(parsed.response.client_data_json)
        except Exception as exc:  # anything unreadable in it is the client's mistake
            raise _unreadable(exc) from None
        storage = self.context.storage
        code = storage.codes.use(hash_code(_text(client_data.challenge)), LOGIN, now=utcnow())
        if code is None:
            raise Invalid.one("credential", STALE_CHALLENGE)
        passkey = storage.passkeys.get_by_credential_id(_text(parsed.raw_id))
        if passkey is None:
            raise UnknownPasskey()
        return Assertion(parsed, client_data.challenge, code.user_uuid, client_data.origin, passkey)

    def verify_assertion(self, assertion: Assertion) -> Verified:
        """Check the answer's signature, origin, RP ID, challenge and user handle against
        its passkey; ``Invalid`` on ``credential`` (400) when any is wrong. The counter
        is left to :meth:`use`."""
        passkey = assertion.passkey
        if assertion.subject not in (ANY_USER, passkey.user_uuid):
            raise Invalid.one("credential", f"{NOT_VERIFIED}: it is not a passkey of the account the options"
                                            " were asked for.")
        handle = assertion.credential.response.user_handle
        expected = user_handle(passkey.user_uuid)
        if handle is None and assertion.subject == ANY_USER:
            raise Invalid.one("credential", f"{NOT_VERIFIED}: it names no user (userHandle).")
        if handle is not None and not hmac.compare_digest(bytes(handle), expected):
            raise Invalid.one("credential", f"{NOT_VERIFIED}: its user handle is not its account's.")
        try:
            verified = webauthn.verify_authentication_response(
                credential=assertion.credential, expected_challenge=assertion.challenge,
                expected_rp_id=self.settings.webauthn_rp, expected_origin=self._origins(assertion.origin),
                credential_public_key=_bytes(passkey.public_key),
                credential_current_sign_count=0)  # the counter is storage's to decide (use)
        except Exception as exc:  # the library does no I/O: whatever it raises, the answer is at fault
            raise _unverified(exc) from None
        return Verified(verified.user_verified, verified.new_sign_count)

    def use(self, assertion: Assertion, verified: Verified) -> Passkey | None:
        """Record the verified sign-in on its passkey (counter, last use); ``None`` when
        the counter did not move on, audited as ``passkey.counter_mismatch``."""
        passkey = assertion.passkey
        used = self.context.storage.passkeys.use(passkey.id, sign_count=verified.sign_count, now=utcnow())
        if used is None:
            self.context.audit.record(events.PASSKEY_COUNTER_MISMATCH, target_type="passkey",
                                      target_uuid=passkey.uuid, actor_uuid=None,
                                      details={"user_uuid": passkey.user_uuid, "name": passkey.name,
                                               "sign_count": verified.sign_count,
                                               "stored_sign_count": passkey.sign_count},
                                      record=passkey)
        return used

    # -- shared ----------------------------------------------------------------------

    def _challenge(self, purpose: str, subject: str, email: str) -> bytes:
        """A new challenge of ``purpose`` for ``subject``, kept (as a hash) in the code store."""
        challenge = uuid.uuid4().bytes + uuid.uuid4().bytes  # 244 random bits
        self.context.storage.codes.add(code_hash=hash_code(_text(challenge)), purpose=purpose, user_uuid=subject,
                                       email=email, expires_at=utcnow() + CHALLENGE_TTL)
        return challenge

    def _origins(self, claimed: str) -> list[str]:
        """The origins to expect of an answer that claims ``claimed``: the configured ones,
        and ``claimed`` itself when it is a localhost origin while the RP ID is localhost."""
        origins = list(self.settings.webauthn_allowed_origins)
        if self.settings.webauthn_rp == "localhost" and isinstance(claimed, str) and LOCALHOST_ORIGIN.fullmatch(claimed):
            origins.append(claimed)
        return origins

    def _decoy(self, email: str) -> PublicKeyCredentialDescriptor:
        """The credential id shown for an email with no passkeys: 32 bytes of a keyed
        digest of the email, so it is the same on every request."""
        digest = hmac.new(self.settings.jwt_secret.encode(), b"passkey-decoy:" + email.encode(),
                          hashlib.sha256).digest()
        return PublicKeyCredentialDescriptor(id=digest, transports=[AuthenticatorTransport.INTERNAL,
                                                                    AuthenticatorTransport.HYBRID])


class UnknownPasskey(Invalid):
    """A sign-in with a passkey no account has (400 on ``credential``, as every other
    refusal of an answer, docs/http/accounts.md#passkeys)."""

    def __init__(self):
        super().__init__({"credential": UNKNOWN_PASSKEY})

    def __reduce__(self):
        return (UnknownPasskey, ())


def _descriptor(passkey: Passkey) -> PublicKeyCredentialDescriptor:
    return PublicKeyCredentialDescriptor(id=_bytes(passkey.credential_id),
                                         transports=[_TRANSPORTS[t] for t in passkey.transports if t in _TRANSPORTS])


def _full() -> str:
    return f"You have {MAX_PER_USER} passkeys, the most an account keeps: remove one first."


def _unreadable(exc: Exception) -> Invalid:
    reason = str(exc) if isinstance(exc, WebAuthnException) else "not a WebAuthn credential in its JSON form"
    return Invalid.one("credential", f"{NOT_VERIFIED}: {reason}.".replace("..", "."))


def _unverified(exc: Exception) -> Invalid:
    """The 400 of an answer the library refused: its reason when it gave one (about the
    answer itself, never a secret), else a general one."""
    if isinstance(exc, WebAuthnException):
        return Invalid.one("credential", f"{NOT_VERIFIED}: {exc}")
    return Invalid.one("credential", f"{NOT_VERIFIED}: it is malformed.")


def _text(data: bytes) -> str:
    """``data`` in unpadded base64url, as WebAuthn's JSON and storage write bytes."""
    return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode()


def _bytes(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
