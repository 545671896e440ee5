"""POST /oauth/token (docs/http/oauth.md): the code exchange with PKCE and the ID token,
refresh rotation and reuse detection, client_credentials, client authentication and
RFC 6749's errors, and what each step leaves in the audit trail."""

from __future__ import annotations

import uuid
from datetime import timedelta
from urllib.parse import urlencode

import jwt
import pytest

from locky import events
from locky.accounts.codes import hash_code
from locky.records import utcnow
from token_helpers import (
    FORM, REDIRECT_URI, SECRET, TOKEN, USERINFO, authorize, basic, claims, events_named, exchange, issue_code,
    make_client, token_request, verified_id_token,
)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- authorization_code ---------------------------------------------------------------


@pytest.mark.parametrize("post", [False, True], ids=["client_secret_basic", "client_secret_post"])
def test_a_code_is_exchanged_for_tokens_and_an_id_token(locky_app, locky_client, user, end_user, issuer, post):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user, scope="openid email profile offline_access", nonce="n-42")
    result = exchange(locky_client, client, code, post=post)
    assert result.status_code == 200, result.text
    assert result.headers["cache-control"] == "no-store"
    body = result.json
    assert body["token_type"] == "Bearer" and body["expires_in"] == locky_app.context.settings.access_ttl
    assert body["scope"] == "openid email profile offline_access"
    assert set(body) == {"access_token", "token_type", "expires_in", "scope", "id_token", "refresh_token"}

    access = claims(body["access_token"])
    assert access["aud"] == client.client_id and access["client_id"] == client.client_id
    assert access["sub"] == user.uuid and access["typ"] == "access" and access["scope"] == body["scope"]
    login = locky_app.context.storage.sessions.identity(access["sid"])[0]
    assert (login.client_id, login.scope, login.op_session_uuid) == (client.client_id, body["scope"],
                                                                    end_user.op_session.uuid)
    assert login.amr == ("pwd",)

    id_token = verified_id_token(locky_client, body["id_token"], client.client_id, issuer)
    assert id_token["sub"] == user.uuid and id_token["azp"] == client.client_id
    assert id_token["nonce"] == "n-42" and id_token["amr"] == ["pwd"]
    assert id_token["auth_time"] == int(end_user.op_session.created_at.timestamp())
    assert id_token["sid"] == end_user.op_session.uuid
    assert id_token["email"] == "ada@example.com" and id_token["email_verified"] is False
    assert id_token["name"] == "Ada Lovelace" and "groups" not in id_token
    assert 0 < id_token["exp"] - id_token["iat"] <= locky_app.context.settings.access_ttl
    assert id_token["at_hash"]

    issued = events_named(locky_app, events.OAUTH_TOKEN_ISSUED)
    assert [(e.target_type, e.target_uuid, e.actor_uuid) for e in issued] == [("session", access["sid"], user.uuid)]
    assert issued[0].details == {"client_id": client.client_id, "grant_type": "authorization_code",
                                 "scope": body["scope"], "user_uuid": user.uuid}


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_the_id_token_is_signed_with_the_clients_algorithm(locky_app, locky_client, end_user, issuer, alg):
    client = make_client(locky_app, alg=alg)
    body = exchange(locky_client, client, issue_code(locky_app, client, end_user)).json
    assert verified_id_token(locky_client, body["id_token"], client.client_id, issuer)["sub"] == end_user.uuid
    assert jwt.get_unverified_header(body["id_token"])["alg"] == alg


def test_without_offline_access_there_is_no_refresh_token(locky_app, locky_client, end_user):
    client = make_client(locky_app)
    body = exchange(locky_client, client, issue_code(locky_app, client, end_user, scope="openid")).json
    assert "refresh_token" not in body and body["scope"] == "openid"
    assert set(claims(body["id_token"])) >= {"iss", "sub", "aud", "exp", "iat", "auth_time", "amr", "azp", "at_hash"}
    assert "email" not in claims(body["id_token"])


def test_without_openid_there_is_no_id_token(locky_app, locky_client, end_user):
    client = make_client(locky_app)
    body = exchange(locky_client, client, issue_code(locky_app, client, end_user, scope="email", nonce=None)).json
    assert "id_token" not in body and body["scope"] == "email"


def test_the_groups_scope_names_the_users_live_groups(locky_app, locky_client, user, end_user, issuer):
    for name in ("staff", "gone", "admins"):
        result = locky_client.simulate_post("/v1/private/groups", json={"name": name}, headers=user.headers)
        assert result.status_code == 201, result.text
        if name == "gone":
            assert locky_client.simulate_delete(f"/v1/private/groups/{result.json['id']}",
                                                headers=user.headers).status_code == 204
    client = make_client(locky_app)
    body = exchange(locky_client, client, issue_code(locky_app, client, end_user, scope="openid groups")).json
    assert verified_id_token(locky_client, body["id_token"], client.client_id, issuer)["groups"] == ["admins", "staff"]


def test_a_public_client_uses_pkce_without_a_secret(locky_app, locky_client, end_user):
    client = make_client(locky_app, type="public")
    code = issue_code(locky_app, client, end_user)
    assert exchange(locky_client, client, code, verifier="v" * 50).json["error"] == "invalid_grant"
    # A wrong verifier does not spend the code.
    result = exchange(locky_client, client, code)
    assert result.status_code == 200, result.text
    assert claims(result.json["access_token"])["client_id"] == client.client_id


def test_a_public_client_must_send_an_s256_challenge(locky_app, end_user):
    client = make_client(locky_app, type="public")
    refused = authorize(locky_app, client, end_user, code_challenge=None, code_challenge_method=None)
    assert refused["error"] == "invalid_request" and refused["state"] == "st-1"
    assert "code_challenge" in refused["error_description"]
    plain = authorize(locky_app, client, end_user, code_challenge="p" * 50, code_challenge_method="plain")
    assert plain["error"] == "invalid_request" and "S256" in plain["error_description"]
    # A confidential client's challenge must be S256 too; without one it may go on.
    confidential = make_client(locky_app)
    assert authorize(locky_app, confidential, end_user, code_challenge_method=None)["error"] == "invalid_request"
    assert "code" in authorize(locky_app, confidential, end_user, code_challenge=None, code_challenge_method=None)


def test_a_challenged_code_needs_its_verifier(locky_app, locky_client, end_user):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    missing = exchange(locky_client, client, code, verifier=None)
    assert missing.status_code == 400 and missing.json["error"] == "invalid_request"
    assert exchange(locky_client, client, code).status_code == 200


def test_a_second_use_of_a_code_ends_the_login_the_first_made(locky_app, locky_client, user, end_user):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user, scope="openid offline_access")
    first = exchange(locky_client, client, code).json
    assert locky_client.simulate_get(USERINFO, headers=bearer(first["access_token"])).status_code == 200

    again = exchange(locky_client, client, code)
    assert again.status_code == 400 and again.json["error"] == "invalid_grant"
    assert locky_client.simulate_get(USERINFO, headers=bearer(first["access_token"])).status_code == 401
    refreshed = token_request(locky_client, client, {"grant_type": "refresh_token",
                                                     "refresh_token": first["refresh_token"]})
    assert refreshed.json["error"] == "invalid_grant"
    [reuse] = events_named(locky_app, events.OAUTH_CODE_REUSE_DETECTED)
    assert (reuse.target_type, reuse.target_uuid) == ("session", claims(first["access_token"])["sid"])
    assert reuse.details == {"client_id": client.client_id, "user_uuid": user.uuid}


def test_a_code_is_bound_to_its_client_and_redirect_uri(locky_app, locky_client, end_user):
    client, other = make_client(locky_app), make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    assert exchange(locky_client, other, code).json["error"] == "invalid_grant"
    wrong_uri = exchange(locky_client, client, code, redirect_uri="http://127.0.0.1:9999/other")
    assert wrong_uri.json["error"] == "invalid_grant"
    assert exchange(locky_client, client, code).status_code == 200  # none of those spent it


def test_a_code_lives_sixty_seconds(locky_app, locky_client, user, end_user):
    client = make_client(locky_app)
    storage = locky_app.context.storage
    record = storage.oauth_codes.find(hash_code(issue_code(locky_app, client, end_user)))
    assert timedelta(seconds=59) <= record.expires_at - record.created_at <= timedelta(seconds=61)
    # A code stored as one made a minute ago: expired, refused.
    expired = "expired-code-" + "e" * 40
    storage.oauth_codes.add(
        code_hash=hash_code(expired), client_id=client.client_id, user_uuid=user.uuid, redirect_uri=REDIRECT_URI,
        scope="openid", nonce=None, code_challenge=None, code_challenge_method=None,
        auth_time=end_user.op_session.created_at, amr=("pwd",), op_session_uuid=end_user.op_session.uuid,
        session_uuid=str(uuid.uuid4()), expires_at=utcnow() - timedelta(seconds=1))
    result = exchange(locky_client, client, expired, verifier=None)
    assert result.status_code == 400 and result.json["error"] == "invalid_grant"


def test_codes_are_kept_only_as_hashes(locky_app, end_user):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    assert len(code) >= 43  # 256 bits
    assert locky_app.context.storage.oauth_codes.find(code) is None
    assert locky_app.context.storage.oauth_codes.find(hash_code(code)).client_id == client.client_id


def test_a_disabled_users_code_gives_no_tokens(locky_app, locky_client, user, end_user):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    locky_app.context.storage.users.update(user.id, disabled=True)
    result = exchange(locky_client, client, code)
    assert result.status_code == 400 and result.json["error"] == "invalid_grant"


def test_a_code_of_an_ended_op_session_gives_no_tokens(locky_app, locky_client, end_user):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    locky_app.context.storage.sessions.end_op_session(end_user.op_session.uuid)
    assert exchange(locky_client, client, code).json["error"] == "invalid_grant"


# -- refresh_token ----------------------------------------------------------------------


def test_refresh_rotates_and_a_reused_refresh_token_ends_the_login(locky_app, locky_client, user, end_user):
    client = make_client(locky_app)
    first = exchange(locky_client, client, issue_code(locky_app, client, end_user,
                                                      scope="openid email offline_access")).json
    refresh = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    second = token_request(locky_client, client, refresh)
    assert second.status_code == 200, second.text
    body = second.json
    assert set(body) == {"access_token", "token_type", "expires_in", "scope", "refresh_token"}
    assert body["refresh_token"] != first["refresh_token"] and body["scope"] == "openid email offline_access"
    sid = claims(first["access_token"])["sid"]
    assert claims(body["access_token"])["sid"] == sid and claims(body["refresh_token"])["sid"] == sid
    [refreshed] = events_named(locky_app, events.TOKEN_REFRESHED)
    assert (refreshed.target_uuid, refreshed.actor_uuid) == (sid, user.uuid)
    assert refreshed.details == {"user_uuid": user.uuid, "client_id": client.client_id}

    reused = token_request(locky_client, client, refresh)
    assert reused.status_code == 400 and reused.json["error"] == "invalid_grant"
    assert events_named(locky_app, events.TOKEN_REUSE_DETECTED)[0].target_uuid == sid
    # The reuse ended the login: the rotated token and the access token are dead too.
    assert token_request(locky_client, client, {"grant_type": "refresh_token",
                                                "refresh_token": body["refresh_token"]}).status_code == 400
    assert locky_client.simulate_get(USERINFO, headers=bearer(body["access_token"])).status_code == 401


def test_a_refresh_may_narrow_the_scope_but_not_widen_it(locky_app, locky_client, end_user):
    client = make_client(locky_app)
    first = exchange(locky_client, client, issue_code(locky_app, client, end_user,
                                                      scope="openid email offline_access")).json
    wider = token_request(locky_client, client, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                                 "scope": "openid email profile offline_access"})
    assert wider.status_code == 400 and wider.json["error"] == "invalid_scope"
    narrower = token_request(locky_client, client, {"grant_type": "refresh_token",
                                                    "refresh_token": first["refresh_token"],
                                                    "scope": "openid offline_access"})
    assert narrower.status_code == 200 and narrower.json["scope"] == "openid offline_access"


def test_a_refresh_token_works_only_for_its_client(locky_app, locky_client, end_user, user):
    client, other = make_client(locky_app), make_client(locky_app)
    first = exchange(locky_client, client, issue_code(locky_app, client, end_user,
                                                      scope="openid offline_access")).json
    stolen = token_request(locky_client, other,
                           {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]})
    assert stolen.status_code == 400 and stolen.json["error"] == "invalid_grant"
    # Nor does a login of the /v1 API refresh here.
    api = token_request(locky_client, client, {"grant_type": "refresh_token", "refresh_token": user.refresh_token})
    assert api.status_code == 400 and api.json["error"] == "invalid_grant"


# -- client_credentials -----------------------------------------------------------------


def test_client_credentials_give_the_client_a_token_of_its_own(locky_app, locky_client):
    client = make_client(locky_app, grant_types=("client_credentials",))
    result = token_request(locky_client, client, {"grant_type": "client_credentials", "scope": "groups"})
    assert result.status_code == 200, result.text
    body = result.json
    assert set(body) == {"access_token", "token_type", "expires_in", "scope"} and body["scope"] == "groups"
    access = claims(body["access_token"])
    assert access["sub"] == client.client_id == access["aud"] == access["client_id"]
    assert access["sid"] == f"client:{client.uuid}:{client.token_generation}"
    [issued] = events_named(locky_app, events.OAUTH_TOKEN_ISSUED)
    assert (issued.target_type, issued.target_uuid, issued.actor_uuid) == ("oauth_client", client.uuid, None)
    assert issued.details == {"client_id": client.client_id, "grant_type": "client_credentials", "scope": "groups"}
    # client_secret_post works as well.
    assert token_request(locky_client, client, {"grant_type": "client_credentials"}, post=True).status_code == 200


def test_client_credentials_need_the_grant_and_a_confidential_client(locky_app, locky_client):
    without = make_client(locky_app)
    refused = token_request(locky_client, without, {"grant_type": "client_credentials"})
    assert refused.status_code == 400 and refused.json["error"] == "unauthorized_client"
    public = make_client(locky_app, type="public")
    as_public = token_request(locky_client, public, {"grant_type": "client_credentials"})
    assert as_public.status_code == 401 and as_public.json["error"] == "invalid_client"


# -- client authentication and errors ------------------------------------------------------


def test_a_wrong_secret_is_invalid_client_with_a_challenge(locky_app, locky_client, end_user):
    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    for post in (False, True):
        result = exchange(locky_client, client, code, secret="not-the-secret", post=post)
        assert result.status_code == 401 and result.json["error"] == "invalid_client"
        assert result.headers["www-authenticate"].startswith('Basic error="invalid_client"')
        assert result.headers["cache-control"] == "no-store"
    # A confidential client cannot leave its secret out (method none).
    assert exchange(locky_client, client, code, secret=None).status_code == 401
    assert exchange(locky_client, client, code).status_code == 200  # the code was not spent


def test_a_deleted_client_is_unknown(locky_app, locky_client, end_user):
    client = make_client(locky_app, grant_types=("authorization_code", "client_credentials"))
    code = issue_code(locky_app, client, end_user)
    locky_app.context.storage.oauth_clients.delete(client.id)
    for result in (exchange(locky_client, client, code),
                   token_request(locky_client, client, {"grant_type": "client_credentials"})):
        assert result.status_code == 401 and result.json["error"] == "invalid_client"


def test_errors_are_rfc_6749_json_never_the_field_map(locky_app, locky_client):
    client = make_client(locky_app)
    cases = [
        (dict(json={"grant_type": "client_credentials"}), 400, "unsupported_grant_type"),
        (dict(body="grant_type=password&username=a&password=b", headers=basic(client.client_id)),
         400, "unsupported_grant_type"),
        (dict(body="grant_type=authorization_code&grant_type=authorization_code&code=x",
              headers=basic(client.client_id)), 400, "invalid_request"),
        (dict(body="grant_type=authorization_code", headers=basic(client.client_id)), 400, "invalid_request"),
        (dict(body="grant_type=authorization_code&code=nope&redirect_uri=x", headers=basic(client.client_id)),
         400, "invalid_grant"),
        (dict(body="grant_type=client_credentials&no-equals-sign", headers=FORM), 400, "invalid_request"),
        (dict(body="grant_type=x&pad=" + "a" * 70_000, headers=FORM), 413, "invalid_request"),
        (dict(body="", headers={"Content-Type": "text/plain"}), 400, "unsupported_grant_type"),
        # Parameters come from the body only: a query string is not read.
        (dict(query_string=f"client_id={client.client_id}&client_secret={SECRET}",
              body="grant_type=client_credentials", headers=FORM), 401, "invalid_client"),
    ]
    for kwargs, status, error in cases:
        result = locky_client.simulate_post(TOKEN, **kwargs)
        assert (result.status_code, result.json["error"]) == (status, error), (kwargs.get("body", "")[:60], result.text)
        assert "error" in result.json and set(result.json) <= {"error", "error_description"}
        assert result.headers["cache-control"] == "no-store"
        assert result.headers["content-type"].startswith("application/json")


def test_the_token_endpoint_takes_only_post(locky_client):
    assert locky_client.simulate_get(TOKEN).status_code == 405


def test_an_unknown_client_is_401_however_it_authenticates(locky_app, locky_client):
    for headers, form in ((basic("nobody"), {"grant_type": "client_credentials"}),
                          (FORM, {"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "x"}),
                          (FORM, {"grant_type": "client_credentials"})):
        result = locky_client.simulate_post(TOKEN, body=urlencode(form), headers=headers)
        assert result.status_code == 401 and result.json["error"] == "invalid_client", result.text
        assert result.headers["www-authenticate"].startswith('Basic error="invalid_client"')


def test_concurrent_exchanges_of_one_code_issue_one_login_and_end_it(locky_app, locky_client, end_user):
    """The code is spent by one compare-and-set: of exchanges racing, one gets tokens and
    every other is a second use, which ends the login the first made."""
    import threading

    client = make_client(locky_app)
    code = issue_code(locky_app, client, end_user)
    results, start = [], threading.Barrier(6)

    def exchange_once():
        start.wait()
        results.append(exchange(locky_client, client, code))

    threads = [threading.Thread(target=exchange_once) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    issued = [r for r in results if r.status_code == 200]
    assert len(issued) == 1 and all(r.json["error"] == "invalid_grant" for r in results if r.status_code != 200)
    access = issued[0].json["access_token"]
    assert locky_client.simulate_get(USERINFO, headers=bearer(access)).status_code == 401
    assert len(events_named(locky_app, events.OAUTH_TOKEN_ISSUED)) == 1
    assert events_named(locky_app, events.OAUTH_CODE_REUSE_DETECTED)
