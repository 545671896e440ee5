"""Passkeys through the API (docs/http/accounts.md#passkeys): a user registers,
lists, renames and removes passkeys, and signs in with one, discoverable or named by email.

The browser side is tests/support/webauthn_authenticator.py: a software authenticator
making real attestations and ES256 assertions, each of whose parts a test can make
wrong (origin, RP ID, counter, user verification, user handle, signature). Without a
public URL the RP ID is ``localhost`` and a browser on any ``http://localhost:PORT``
is accepted.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from datetime import datetime, timedelta, timezone

import pyotp
import pytest

from locky.accounts.logins import PageSignIn
from locky.testing import PASSWORD
from locky.testing.databases import run_sql

from support.webauthn_authenticator import Authenticator, b64url

OPTIONS = "/v1/private/users/me/passkeys/options"
PASSKEYS = "/v1/private/users/me/passkeys"
LIST = "/v1/internal/users/me/passkeys"
LOGIN_OPTIONS = "/v1/public/users/login/passkey/options"
LOGIN = "/v1/public/users/login/passkey"
LOGIN_MFA = "/v1/public/users/login/mfa"
ME = "/v1/internal/users/me"
REAUTH = "/v1/private/users/me/reauth"
TOTP = "/v1/private/users/me/mfa/totp"
TOTP_CONFIRM = "/v1/private/users/me/mfa/totp/confirm"


def register(client, account, authenticator: Authenticator, name: str | None = None, **wrong) -> dict:
    """Ask for creation options and register what the authenticator makes of them."""
    options = client.simulate_post(OPTIONS, headers=account.headers)
    assert options.status_code == 200, options.text
    body = {"credential": authenticator.create(options.json, **wrong), **({"name": name} if name else {})}
    return client.simulate_post(PASSKEYS, json=body, headers=account.headers)


def registered(client, account, authenticator: Authenticator, name: str | None = None) -> dict:
    result = register(client, account, authenticator, name)
    assert result.status_code == 201, result.text
    return result.json


def login_options(client, email: str | None = None) -> dict:
    result = client.simulate_post(LOGIN_OPTIONS, json={"email": email} if email else {})
    assert result.status_code == 200, result.text
    return result.json


def sign_in(client, authenticator: Authenticator, email: str | None = None, **wrong):
    return client.simulate_post(LOGIN, json={"credential": authenticator.get(login_options(client, email), **wrong)})


def events(client, name: str) -> list:
    return client.app.context.storage.audit.list(event=name, limit=50).items


def age(client, account, minutes: int = 6) -> None:
    """Make every login of ``account`` ``minutes`` old (no longer a recent authentication)."""
    then = (datetime.now(timezone.utc) - timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f")
    run_sql(client.app.context.settings.database_url,
            "UPDATE locky_sessions SET created_at = %s WHERE user_uuid = %s", then, account.uuid)


def refused(result, words: str) -> None:
    assert result.status_code == 400, result.text
    assert list(result.json) == ["credential"] and words in result.json["credential"], result.json


@pytest.fixture
def ada(locky_client):
    return locky_client.account("ada@example.com", name="Ada Lovelace")


# -- registering and managing ----------------------------------------------------------


def test_creation_options_are_what_a_browser_takes(locky_client, ada):
    options = locky_client.simulate_post(OPTIONS, headers=ada.headers).json
    assert options["rp"] == {"id": "localhost", "name": "Locky"}
    assert options["user"] == {"id": b64url(uuid.UUID(ada.uuid).bytes), "name": "ada@example.com",
                               "displayName": "Ada Lovelace"}
    assert options["authenticatorSelection"] == {"residentKey": "required", "requireResidentKey": True,
                                                 "userVerification": "preferred"}
    assert options["attestation"] == "none"
    assert [p["alg"] for p in options["pubKeyCredParams"]] == [-7, -8, -257]
    assert options["timeout"] == 300_000 and options["excludeCredentials"] == []
    assert len(base64.urlsafe_b64decode(options["challenge"] + "==")) == 32
    # A second call: a new challenge, and the passkey made since is excluded.
    first = registered(locky_client, ada, Authenticator())
    again = locky_client.simulate_post(OPTIONS, headers=ada.headers).json
    assert again["challenge"] != options["challenge"]
    stored = locky_client.app.context.storage.passkeys.of_user(ada.uuid)
    assert [c["id"] for c in again["excludeCredentials"]] == [stored[0].credential_id]
    assert again["excludeCredentials"][0]["transports"] == ["internal", "hybrid"]
    assert first["id"] == stored[0].id


def test_register_list_rename_remove(locky_client, ada):
    client, authenticator = locky_client, Authenticator()
    made = registered(client, ada, authenticator, name="Ada's laptop")
    assert set(made) == {"id", "uuid", "name", "created_at", "last_used_at"}
    assert made["name"] == "Ada's laptop" and made["last_used_at"] is None and made["created_at"].endswith("Z")
    second = registered(client, ada, Authenticator())
    assert second["name"] == "Passkey 2"
    listed = client.simulate_get(LIST, headers=ada.headers)
    assert listed.status_code == 200 and listed.json == {"passkeys": [made, second]}
    stored = client.app.context.storage.passkeys.get_by_credential_id(authenticator.credentials[0].id)
    assert (stored.user_uuid, stored.sign_count, stored.aaguid, stored.backed_up) == (
        ada.uuid, 0, "00000000-0000-0000-0000-000000000000", False)
    assert stored.transports == ("internal", "hybrid")
    [event] = events(client, "passkey.registered")[:1]
    assert (event.actor_uuid, event.target_type) == (ada.uuid, "passkey")
    assert {e.target_uuid: e.details for e in events(client, "passkey.registered")} == {
        made["uuid"]: {"user_uuid": ada.uuid, "name": "Ada's laptop"},
        second["uuid"]: {"user_uuid": ada.uuid, "name": "Passkey 2"}}

    renamed = client.simulate_patch(f"{PASSKEYS}/{second['id']}", json={"name": "Work phone"}, headers=ada.headers)
    assert renamed.status_code == 200 and renamed.json == {**second, "name": "Work phone"}

    assert client.simulate_delete(f"{PASSKEYS}/{made['id']}", headers=ada.headers).status_code == 204
    assert client.simulate_get(LIST, headers=ada.headers).json == {"passkeys": [{**second, "name": "Work phone"}]}
    [removed] = events(client, "passkey.removed")
    assert (removed.target_uuid, removed.actor_uuid, removed.details) == (
        made["uuid"], ada.uuid, {"user_uuid": ada.uuid, "name": "Ada's laptop"})
    # Nothing signs in with it again.
    refused(sign_in(client, authenticator, credential=authenticator.credentials[0]), "No account has this passkey")
    assert client.simulate_delete(f"{PASSKEYS}/{made['id']}", headers=ada.headers).status_code == 404


def test_another_users_passkey_is_not_found(locky_client, ada):
    mine = registered(locky_client, ada, Authenticator())
    eve = locky_client.account("eve@example.com")
    assert locky_client.simulate_delete(f"{PASSKEYS}/{mine['id']}", headers=eve.headers).status_code == 404
    assert locky_client.simulate_patch(f"{PASSKEYS}/{mine['id']}", json={"name": "Mine now"},
                                       headers=eve.headers).status_code == 404
    assert locky_client.simulate_get(LIST, headers=eve.headers).json == {"passkeys": []}
    assert locky_client.simulate_get(LIST, headers=ada.headers).json == {"passkeys": [mine]}


def test_another_users_challenge_registers_nothing(locky_client, ada):
    eve = locky_client.account("eve@example.com")
    options = locky_client.simulate_post(OPTIONS, headers=ada.headers).json
    result = locky_client.simulate_post(PASSKEYS, json={"credential": Authenticator().create(options)},
                                        headers=eve.headers)
    refused(result, "challenge is unknown, used or expired")
    assert locky_client.app.context.storage.passkeys.of_user(eve.uuid) == []


def test_registration_refusals(locky_client, ada):
    client = locky_client
    refused(register(client, ada, Authenticator(), origin="https://evil.example.com"),
            'Unexpected client data origin "https://evil.example.com"')
    refused(register(client, ada, Authenticator(), rp_id="example.com"), "Unexpected RP ID hash")
    # The same answer twice: its challenge is spent.
    authenticator = Authenticator()
    options = client.simulate_post(OPTIONS, headers=ada.headers).json
    credential = authenticator.create(options)
    assert client.simulate_post(PASSKEYS, json={"credential": credential}, headers=ada.headers).status_code == 201
    refused(client.simulate_post(PASSKEYS, json={"credential": credential}, headers=ada.headers),
            "challenge is unknown, used or expired")
    assert len(client.app.context.storage.passkeys.of_user(ada.uuid)) == 1


@pytest.mark.parametrize("body, field", [
    ({}, "credential"),
    ({"credential": "not an object"}, "credential"),
    ({"credential": {}}, "credential"),
    ({"credential": {"id": "x", "rawId": "x", "type": "public-key", "response": {"clientDataJSON": "!!!",
                                                                                 "attestationObject": "AA"}}},
     "credential"),
    ({"credential": {"id": 1, "rawId": [], "response": None}}, "credential"),
    ({"credential": {"id": "x", "rawId": "x", "type": "public-key",
                     "response": {"clientDataJSON": b64url(b"{}"), "attestationObject": b64url(b"\xff")}}},
     "credential"),
    ({"credential": {}, "name": ""}, "name"),
    ({"credential": {}, "name": "x" * 65}, "name"),
    ({"credential": {}, "name": "tab\there"}, "name"),
    ({"credential": {}, "unknown": 1}, "unknown"),
])
def test_malformed_registrations_are_400s(locky_client, ada, body, field):
    result = locky_client.simulate_post(PASSKEYS, json=body, headers=ada.headers)
    assert result.status_code == 400, result.text
    assert field in result.json, result.json


def test_adding_and_removing_need_a_recent_authentication(locky_client, ada):
    client = locky_client
    made = registered(client, ada, Authenticator())
    age(client, ada)
    for result in (client.simulate_post(OPTIONS, headers=ada.headers),
                   client.simulate_post(PASSKEYS, json={"credential": {}}, headers=ada.headers),
                   client.simulate_delete(f"{PASSKEYS}/{made['id']}", headers=ada.headers)):
        assert result.status_code == 403, result.text
        assert result.json["title"] == "Recent authentication required"
        assert 'error="insufficient_user_authentication"' in result.headers["www-authenticate"]
    # Listing and renaming are no change of credentials.
    assert client.simulate_get(LIST, headers=ada.headers).status_code == 200
    assert client.simulate_patch(f"{PASSKEYS}/{made['id']}", json={"name": "Old laptop"},
                                 headers=ada.headers).status_code == 200
    assert client.simulate_post(REAUTH, json={"password": PASSWORD}, headers=ada.headers).status_code == 204
    assert client.simulate_delete(f"{PASSKEYS}/{made['id']}", headers=ada.headers).status_code == 204


def test_a_passkey_sign_in_is_a_recent_authentication(locky_client, ada):
    authenticator = Authenticator()
    registered(locky_client, ada, authenticator)
    age(locky_client, ada)
    tokens = sign_in(locky_client, authenticator).json
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert locky_client.simulate_post(OPTIONS, headers=headers).status_code == 200


def test_the_number_of_passkeys_is_capped(locky_client, ada, monkeypatch):
    from locky.accounts import passkeys

    monkeypatch.setattr(passkeys, "MAX_PER_USER", 2)
    registered(locky_client, ada, Authenticator())
    options = locky_client.simulate_post(OPTIONS, headers=ada.headers).json  # the last one's options
    registered(locky_client, ada, Authenticator())
    full = locky_client.simulate_post(OPTIONS, headers=ada.headers)
    assert full.status_code == 409 and "You have 2 passkeys" in full.json["description"], full.text
    late = locky_client.simulate_post(PASSKEYS, json={"credential": Authenticator().create(options)},
                                      headers=ada.headers)
    assert late.status_code == 409 and "remove one first" in late.json["description"], late.text


# -- signing in ------------------------------------------------------------------------


def test_discoverable_sign_in(locky_client, ada):
    client, authenticator = locky_client, Authenticator()
    made = registered(client, ada, authenticator)
    options = client.simulate_post(LOGIN_OPTIONS)  # no body at all
    assert options.status_code == 200, options.text
    assert options.json["allowCredentials"] == [] and options.json["rpId"] == "localhost"
    assert options.json["userVerification"] == "preferred" and options.json["timeout"] == 300_000
    result = client.simulate_post(LOGIN, json={"credential": authenticator.get(options.json)})
    assert result.status_code == 200, result.text
    assert set(result.json) == {"access_token", "token_type", "expires_in", "refresh_token", "user"}
    assert result.json["user"]["uuid"] == ada.uuid and result.json["token_type"] == "Bearer"
    me = client.simulate_get(ME, headers={"Authorization": f"Bearer {result.json['access_token']}"})
    assert me.status_code == 200 and me.json["email"] == "ada@example.com"
    [succeeded] = [e for e in events(client, "login.succeeded") if e.details.get("method") == "passkey"]
    assert (succeeded.actor_uuid, succeeded.target_uuid) == (ada.uuid, ada.uuid)
    assert succeeded.details["mfa"] is False and succeeded.details["email"] == "ada@example.com"
    listed = client.simulate_get(LIST, headers=ada.headers).json["passkeys"]
    assert listed[0]["last_used_at"] is not None
    assert listed[0]["id"] == made["id"] and client.app.context.storage.passkeys.of_user(ada.uuid)[0].sign_count == 1


def test_sign_in_with_an_email(locky_client, ada):
    client, authenticator = locky_client, Authenticator()
    registered(client, ada, authenticator)
    options = login_options(client, "ADA@example.com")
    assert [c["id"] for c in options["allowCredentials"]] == [authenticator.credentials[0].id]
    result = client.simulate_post(LOGIN, json={"credential": authenticator.get(options, user_handle=None)})
    assert result.status_code == 200, result.text
    assert result.json["user"]["email"] == "ada@example.com"


def test_an_unknown_email_gets_options_of_the_same_shape(locky_client, ada):
    registered(locky_client, ada, Authenticator())
    known = login_options(locky_client, "ada@example.com")
    unknown = login_options(locky_client, "nobody@example.com")
    assert set(unknown) == set(known) and len(unknown["allowCredentials"]) == len(known["allowCredentials"]) == 1
    decoy, real = unknown["allowCredentials"][0], known["allowCredentials"][0]
    assert set(decoy) == set(real) and len(decoy["id"]) == len(real["id"]) and decoy["id"] != real["id"]
    assert login_options(locky_client, "nobody@example.com")["allowCredentials"] == [decoy]  # the same each time
    # An account without passkeys looks the same.
    locky_client.account("bob@example.com")
    assert len(login_options(locky_client, "bob@example.com")["allowCredentials"]) == 1


def test_a_passkey_answering_another_accounts_options_is_refused(locky_client, ada):
    authenticator = Authenticator()
    registered(locky_client, ada, authenticator)
    locky_client.account("bob@example.com")
    refused(sign_in(locky_client, authenticator, "bob@example.com"), "not a passkey of the account")
    refused(sign_in(locky_client, authenticator, "nobody@example.com"), "not a passkey of the account")


def test_a_user_handle_must_be_the_passkeys_users(locky_client, ada):
    authenticator = Authenticator()
    registered(locky_client, ada, authenticator)
    bob = locky_client.account("bob@example.com")
    refused(sign_in(locky_client, authenticator, user_handle=uuid.UUID(bob.uuid).bytes), "user handle")
    refused(sign_in(locky_client, authenticator, user_handle=None), "names no user")


def test_sign_in_refusals(locky_client, ada):
    client, authenticator = locky_client, Authenticator()
    registered(client, ada, authenticator)
    refused(sign_in(client, authenticator, origin="https://evil.example.com"),
            'Unexpected client data origin "https://evil.example.com"')
    refused(sign_in(client, authenticator, origin="http://127.0.0.1:8080"), "Unexpected client data origin")
    refused(sign_in(client, authenticator, rp_id="example.com"), "Unexpected RP ID hash")
    refused(sign_in(client, authenticator, tamper=True), "Could not verify authentication signature")
    refused(sign_in(client, authenticator, challenge=b64url(b"0" * 32)), "challenge is unknown, used or expired")
    refused(sign_in(client, _stranger()), "No account has this passkey")
    failed = [e.details for e in events(client, "login.failed")]
    assert {"email": "ada@example.com", "reason": "passkey not verified", "method": "passkey"} in failed
    assert {"reason": "unknown passkey", "method": "passkey"} in failed
    # Another port of localhost is this machine's browser too (RP ID localhost).
    assert sign_in(client, authenticator, origin="http://localhost:5173").status_code == 200


def _stranger() -> Authenticator:
    """An authenticator holding a passkey no account has."""
    stranger = Authenticator()
    stranger.create({"rp": {"id": "localhost"}, "user": {"id": b64url(b"someone")}, "challenge": b64url(b"x")})
    return stranger


def test_a_replayed_answer_is_refused(locky_client, ada):
    authenticator = Authenticator()
    registered(locky_client, ada, authenticator)
    answer = authenticator.get(login_options(locky_client))
    assert locky_client.simulate_post(LOGIN, json={"credential": answer}).status_code == 200
    refused(locky_client.simulate_post(LOGIN, json={"credential": answer}), "challenge is unknown, used or expired")


def test_a_counter_going_back_is_refused_and_audited(locky_client, ada):
    client, authenticator = locky_client, Authenticator()
    made = registered(client, ada, authenticator)
    assert sign_in(client, authenticator).status_code == 200  # counter 1
    assert sign_in(client, authenticator).status_code == 200  # counter 2
    refused(sign_in(client, authenticator, sign_count=2), "signature counter did not move on")
    refused(sign_in(client, authenticator, sign_count=1), "signature counter did not move on")
    refused(sign_in(client, authenticator, sign_count=0), "signature counter did not move on")
    mismatches = events(client, "passkey.counter_mismatch")
    assert [(e.target_uuid, e.details["sign_count"], e.details["stored_sign_count"]) for e in mismatches] == [
        (made["uuid"], 2, 2), (made["uuid"], 1, 2), (made["uuid"], 0, 2)]
    assert mismatches[0].details["user_uuid"] == ada.uuid
    assert client.app.context.storage.passkeys.of_user(ada.uuid)[0].sign_count == 2
    assert sign_in(client, authenticator).status_code == 200  # counter 3: the real authenticator goes on


def test_an_authenticator_without_a_counter_signs_in_again_and_again(locky_client, ada):
    authenticator = Authenticator(counts=False)
    registered(locky_client, ada, authenticator)
    for _ in range(3):
        assert sign_in(locky_client, authenticator).status_code == 200


@pytest.mark.parametrize("body, field", [
    ({}, "credential"),
    ({"credential": None}, "credential"),
    ({"credential": []}, "credential"),
    ({"credential": {"id": "x"}}, "credential"),
    ({"credential": {"id": "AA", "rawId": "AA", "type": "public-key",
                     "response": {"clientDataJSON": "e30", "authenticatorData": "AA", "signature": "AA"}}},
     "credential"),
    ({"credential": {"id": "AA", "rawId": "AA", "type": "public-key",
                     "response": {"clientDataJSON": "%%%", "authenticatorData": "AA", "signature": "AA"}}},
     "credential"),
    ({"credential": {}, "email": "ada@example.com"}, "email"),
])
def test_malformed_sign_ins_are_400s(locky_client, body, field):
    result = locky_client.simulate_post(LOGIN, json=body)
    assert result.status_code == 400, result.text
    assert field in result.json, result.json


@pytest.mark.parametrize("body", [{"email": "not an email"}, {"email": 5}, {"other": 1}, []])
def test_malformed_sign_in_options_are_400s(locky_client, body):
    assert locky_client.simulate_post(LOGIN_OPTIONS, json=body).status_code == 400


def enable_totp(client, account) -> pyotp.TOTP:
    """TOTP on for ``account``, confirmed with the previous step's code; not started on a
    step about to end (the tests use this step's code and the next one's)."""
    if time.time() % 30 > 25:
        time.sleep(30 - time.time() % 30 + 0.1)
    secret = client.simulate_post(TOTP, headers=account.headers).json["secret"]
    totp = pyotp.TOTP(secret)
    # The previous step's code: each step's code works once, and the tests sign in with later ones.
    earlier = totp.at(datetime.now(timezone.utc) - timedelta(seconds=30))
    confirmed = client.simulate_post(TOTP_CONFIRM, json={"code": earlier}, headers=account.headers)
    assert confirmed.status_code == 200, confirmed.text
    return totp


def test_a_passkey_without_user_verification_is_a_first_factor(locky_client, ada):
    client = locky_client
    authenticator = Authenticator(user_verifying=False)
    registered(client, ada, authenticator)
    totp = enable_totp(client, ada)
    first = sign_in(client, authenticator)
    assert first.status_code == 200 and first.json["mfa_required"] is True, first.text
    assert first.json["methods"] == ["totp", "recovery_code"]
    second = client.simulate_post(LOGIN_MFA, json={"mfa_token": first.json["mfa_token"], "code": totp.now()})
    assert second.status_code == 200 and second.json["user"]["uuid"] == ada.uuid, second.text
    # The same through the sign-in page: the OP session's amr says key, then code.
    accounts = _accounts(client)
    challenge = accounts.sign_in_with_passkey(authenticator.get(login_options(client)), page=PageSignIn("app"))
    assert challenge["mfa_required"] is True
    step = pyotp.TOTP(totp.secret).at(datetime.now(timezone.utc) + timedelta(seconds=30))
    session = accounts.login_mfa(challenge["mfa_token"], step, page=PageSignIn("app"))
    assert session["amr"] == ["hwk", "otp"] and session["user"].uuid == ada.uuid


def test_a_user_verifying_passkey_skips_the_second_step(locky_client, ada):
    client, authenticator = locky_client, Authenticator()
    registered(client, ada, authenticator)
    enable_totp(client, ada)
    result = sign_in(client, authenticator)
    assert result.status_code == 200 and "access_token" in result.json, result.text
    [event] = [e for e in events(client, "login.succeeded") if e.details.get("method") == "passkey"]
    assert event.details["mfa"] is True
    session = _accounts(client).sign_in_with_passkey(authenticator.get(login_options(client)),
                                                     client_address="198.51.100.1", page=PageSignIn("app"))
    assert set(session) == {"user", "session_uuid", "amr"} and session["amr"] == ["hwk", "user", "mfa"]
    [page_event] = [e for e in events(client, "login.succeeded") if e.details.get("client_id") == "app"]
    assert page_event.details["method"] == "passkey" and page_event.details["session_uuid"] == session["session_uuid"]


def test_a_passkey_without_user_verification_alone_is_one_factor(locky_client, ada):
    authenticator = Authenticator(user_verifying=False)
    registered(locky_client, ada, authenticator)
    session = _accounts(locky_client).sign_in_with_passkey(authenticator.get(login_options(locky_client)),
                                                           page=PageSignIn("app"))
    assert session["amr"] == ["hwk"]


def test_a_disabled_account_is_refused(locky_client, locky_admin, ada):
    client, authenticator = locky_client, Authenticator()
    registered(client, ada, authenticator)
    assert client.simulate_put(f"/v1/private/users/{ada.id}", json={"disabled": True},
                               headers=locky_admin.headers).status_code == 200
    result = sign_in(client, authenticator)
    assert result.status_code == 403 and result.json["title"] == "Account disabled", result.text
    assert [e.details["reason"] for e in events(client, "login.failed")][:1] == ["account disabled"]


def test_failed_sign_ins_count_toward_the_login_limits(locky_app_factory):
    from locky.testing import LockyClient

    client = LockyClient(locky_app_factory(login_max_failures=3))
    ada = client.account("ada@example.com")
    authenticator = Authenticator()
    registered(client, ada, authenticator)
    for _ in range(3):
        refused(sign_in(client, authenticator, tamper=True), "Could not verify")
    locked = sign_in(client, authenticator)
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0, locked.text
    # Another address is not locked out by it.
    answer = authenticator.get(login_options(client))
    assert client.simulate_post(LOGIN, json={"credential": answer}, remote_addr="198.51.100.9").status_code == 200


def _accounts(client):
    from locky.accounts.logins import Accounts

    return Accounts(client.app.context)


def test_an_unverified_account_is_refused_when_verification_is_required(locky_app_factory):
    from locky.testing import LockyClient

    client = LockyClient(locky_app_factory(require_verified_email=True))
    bob = client.account("bob@example.com", verified=True)
    authenticator = Authenticator()
    registered(client, bob, authenticator)
    # Bob changes his email: unverified again, so his passkey no longer signs him in.
    changed = client.simulate_put(f"/v1/private/users/{bob.id}", headers=bob.headers,
                                  json={"email": "bob.new@example.com", "current_password": PASSWORD})
    assert changed.status_code == 200 and changed.json["email_verified"] is False, changed.text
    result = sign_in(client, authenticator)
    assert result.status_code == 403 and result.json["title"] == "Email not verified", result.text


def test_a_credential_id_longer_than_webauthn_allows_is_refused(locky_client, ada, monkeypatch):
    """WebAuthn caps credential ids at 1023 bytes: one that long registers, a longer one is a 400."""
    import support.webauthn_authenticator as authenticator_module

    monkeypatch.setattr(authenticator_module.secrets, "token_bytes", lambda _n: os.urandom(1023))
    made = registered(locky_client, ada, Authenticator())
    stored = locky_client.app.context.storage.passkeys.of_user(ada.uuid)
    assert [p.id for p in stored] == [made["id"]] and len(stored[0].credential_id) == 1364
    monkeypatch.setattr(authenticator_module.secrets, "token_bytes", lambda _n: os.urandom(1024))
    refused(register(locky_client, ada, Authenticator()), "longer than 1023 bytes")
    assert len(locky_client.app.context.storage.passkeys.of_user(ada.uuid)) == 1
