"""OAuth clients and consents over the ``/v1`` API (docs/http/oauth.md): registration with
the secret shown once, the redirect-URI and grant rules as 400 field maps, admins only,
keyset paging, update, soft delete ending the client's logins, secret rotation, and a
user's consents listed and withdrawn, each change in the audit trail."""

from __future__ import annotations

import base64
import re
import uuid

import pytest

from authz_helpers import TIMESTAMP, UUID4, assert_fields, assert_forbidden, assert_not_found
from locky.accounts.codes import hash_code

CREATE = "/v1/private/oauth/clients"
LIST = "/v1/internal/oauth/clients"
PRIVATE = "/v1/private/oauth/clients"
CONSENTS = "/v1/internal/users/me/consents"
WITHDRAW = "/v1/private/users/me/consents"
AUDIT = "/v1/internal/audit"
RECORD_KEYS = {"id", "uuid", "created_at", "updated_at", "deleted_at", "client_id", "name", "type", "redirect_uris",
               "post_logout_redirect_uris", "grant_types", "scopes", "id_token_signed_response_alg", "first_party"}
CLIENT_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")  # 16 random bytes, URL-safe base64
WEB = "https://app.example.com/callback"


def register(client, admin, **fields):
    body = {"name": "Reports", "type": "confidential", "redirect_uris": [WEB], **fields}
    result = client.simulate_post(CREATE, json=body, headers=admin.headers)
    assert result.status_code == 201, result.text
    return result.json


def events(client, admin, name: str) -> list[dict]:
    result = client.simulate_get(AUDIT, params={"event": name, "limit": "500"}, headers=admin.headers)
    assert result.status_code == 200, result.text
    return result.json["events"]


def open_login(storage, user_uuid: str, client_id: str | None) -> str:
    """A login session of the user (given to ``client_id``), as the token endpoint makes one."""
    session_uuid = str(uuid.uuid4())
    storage.sessions.create(uuid=session_uuid, user_uuid=user_uuid, refresh_jti=str(uuid.uuid4()),
                            client_id=client_id, scope="openid" if client_id else None)
    return session_uuid


# -- create --------------------------------------------------------------------------------


def test_a_confidential_client_gets_its_secret_once_and_defaults(locky_client, locky_admin):
    result = locky_client.simulate_post(CREATE, json={"name": "Reports", "type": "confidential",
                                                      "redirect_uris": [WEB]}, headers=locky_admin.headers)
    assert result.status_code == 201, result.text
    made = result.json
    assert set(made) == RECORD_KEYS | {"client_secret"}
    assert CLIENT_ID.fullmatch(made["client_id"]) and UUID4.match(made["uuid"])
    assert len(made["client_secret"]) >= 43  # 256 bits
    assert TIMESTAMP.match(made["created_at"]) and made["updated_at"] == made["created_at"]
    assert made["deleted_at"] is None
    assert made["grant_types"] == ["authorization_code", "refresh_token"]
    assert made["scopes"] == ["openid", "profile", "email", "groups", "offline_access"]
    assert (made["id_token_signed_response_alg"], made["first_party"]) == ("RS256", False)
    assert made["post_logout_redirect_uris"] == []
    assert result.headers["location"] == f"{LIST}/{made['id']}"

    stored = locky_client.app.context.storage.oauth_clients.get(made["id"])
    assert stored.secret_hash == hash_code(made["client_secret"])  # only its hash is kept
    fetched = locky_client.simulate_get(result.headers["location"], headers=locky_admin.headers)
    assert fetched.status_code == 200
    assert fetched.json == {k: v for k, v in made.items() if k != "client_secret"}
    assert made["client_secret"] not in fetched.text

    (event,) = events(locky_client, locky_admin, "oauth.client.created")
    assert (event["actor_uuid"], event["target_type"], event["target_uuid"]) == \
        (locky_admin.uuid, "oauth_client", made["uuid"])
    assert event["details"]["client_id"] == made["client_id"]
    assert made["client_secret"] not in str(event)


def test_a_public_client_has_no_secret(locky_client, locky_admin):
    made = register(locky_client, locky_admin, type="public", redirect_uris=["http://127.0.0.1:8400/cb"])
    assert "client_secret" not in made
    assert made["type"] == "public"
    assert locky_client.app.context.storage.oauth_clients.get(made["id"]).secret_hash is None


def test_every_field_given(locky_client, locky_admin):
    made = register(locky_client, locky_admin, name="Native", type="public",
                    redirect_uris=["http://localhost/cb", "http://[::1]:9000/cb", "https://a.example/x?y=1"],
                    post_logout_redirect_uris=["https://a.example/bye"], grant_types=["authorization_code"],
                    scopes=["openid", "email"], id_token_signed_response_alg="EdDSA", first_party=True)
    assert made["redirect_uris"] == ["http://localhost/cb", "http://[::1]:9000/cb", "https://a.example/x?y=1"]
    assert made["post_logout_redirect_uris"] == ["https://a.example/bye"]
    assert (made["grant_types"], made["scopes"]) == (["authorization_code"], ["openid", "email"])
    assert (made["id_token_signed_response_alg"], made["first_party"]) == ("EdDSA", True)


def test_a_machine_client_needs_no_redirect_uri(locky_client, locky_admin):
    made = register(locky_client, locky_admin, redirect_uris=[], grant_types=["client_credentials"])
    assert made["grant_types"] == ["client_credentials"] and "client_secret" in made


@pytest.mark.parametrize("uri, words", [
    ("https://app.example.com/cb#frag", "fragment"),
    ("/callback", "absolute"),
    ("app.example.com/callback", "absolute"),
    ("http://app.example.com/cb", "loopback"),
    ("http://10.0.0.1/cb", "loopback"),
    ("https://*.example.com/cb", "wildcard"),
    ("https://app.example.com/*", "wildcard"),
    ("ftp://app.example.com/cb", "https"),
    ("javascript:alert(1)", "absolute"),
    ("https://user:pw@app.example.com/cb", "user"),
    ("https://app.example.com/c b", "spaces"),
])
def test_a_bad_redirect_uri_is_a_field_map(locky_client, locky_admin, uri, words):
    for field in ("redirect_uris", "post_logout_redirect_uris"):
        body = {"name": "Bad", "type": "confidential", "redirect_uris": [WEB], field: [uri]}
        result = locky_client.simulate_post(CREATE, json=body, headers=locky_admin.headers)
        message = assert_fields(result, field)[field]
        assert words in message.lower(), message
    assert locky_client.app.context.storage.oauth_clients.count() == 0


@pytest.mark.parametrize("uri", ["http://127.0.0.1/cb", "http://127.8.9.10:1234/cb", "http://[::1]/cb",
                                 "http://localhost:3000/cb", "https://app.example.com/cb?x=1"])
def test_loopback_http_and_https_are_allowed(locky_client, locky_admin, uri):
    assert register(locky_client, locky_admin, redirect_uris=[uri])["redirect_uris"] == [uri]


@pytest.mark.parametrize("body, field", [
    ({"type": "public", "grant_types": ["client_credentials"]}, "grant_types"),
    ({"type": "public", "grant_types": ["authorization_code", "client_credentials"]}, "grant_types"),
    ({"redirect_uris": []}, "redirect_uris"),
    ({"grant_types": ["implicit"]}, "grant_types"),
    ({"grant_types": []}, "grant_types"),
    ({"grant_types": ["refresh_token", "refresh_token"]}, "grant_types"),
    ({"scopes": ["admin"]}, "scopes"),
    ({"type": "secret"}, "type"),
    ({"type": None}, "type"),
    ({"id_token_signed_response_alg": "HS256"}, "id_token_signed_response_alg"),
    ({"id_token_signed_response_alg": "none"}, "id_token_signed_response_alg"),
    ({"first_party": "yes"}, "first_party"),
    ({"name": ""}, "name"),
    ({"name": "   "}, "name"),
    ({"redirect_uris": "https://app.example.com/cb"}, "redirect_uris"),
    ({"client_secret": "mine"}, "client_secret"),
    ({"surprise": 1}, "surprise"),
])
def test_rules_of_registration(locky_client, locky_admin, body, field):
    request = {"name": "Rules", "type": "confidential", "redirect_uris": [WEB], **body}
    result = locky_client.simulate_post(CREATE, json=request, headers=locky_admin.headers)
    assert_fields(result, field)


def test_name_and_type_are_required(locky_client, locky_admin):
    result = locky_client.simulate_post(CREATE, json={"redirect_uris": [WEB]}, headers=locky_admin.headers)
    assert_fields(result, "name", "type")


def test_a_public_client_with_client_credentials_is_refused_in_words(locky_client, locky_admin):
    result = locky_client.simulate_post(CREATE, json={"name": "SPA", "type": "public", "redirect_uris": [WEB],
                                                      "grant_types": ["client_credentials"]},
                                        headers=locky_admin.headers)
    assert "public client" in assert_fields(result, "grant_types")["grant_types"]


# -- who may --------------------------------------------------------------------------------


def test_users_get_403_everywhere(locky_client, locky_admin, locky_user):
    made = register(locky_client, locky_admin)
    headers = locky_user.headers
    assert_forbidden(locky_client.simulate_post(CREATE, json={"name": "X", "type": "public",
                                                              "redirect_uris": [WEB]}, headers=headers))
    assert_forbidden(locky_client.simulate_get(LIST, headers=headers))
    assert_forbidden(locky_client.simulate_get(f"{LIST}/{made['id']}", headers=headers))
    assert_forbidden(locky_client.simulate_put(f"{PRIVATE}/{made['id']}", json={"name": "Mine"}, headers=headers))
    assert_forbidden(locky_client.simulate_delete(f"{PRIVATE}/{made['id']}", headers=headers))
    assert_forbidden(locky_client.simulate_post(f"{PRIVATE}/{made['id']}/secret", headers=headers))
    assert locky_client.app.context.storage.oauth_clients.get(made["id"]).name == "Reports"


def test_without_a_token_401(locky_client):
    for method, path in (("POST", CREATE), ("GET", LIST), ("GET", f"{LIST}/1"), ("PUT", f"{PRIVATE}/1"),
                         ("DELETE", f"{PRIVATE}/1"), ("POST", f"{PRIVATE}/1/secret"), ("GET", CONSENTS),
                         ("DELETE", f"{WITHDRAW}/abc")):
        result = locky_client.simulate_request(method, path, json={} if method in ("POST", "PUT") else None)
        assert result.status_code == 401, (method, path, result.text)
        assert result.headers["www-authenticate"].startswith("Bearer")


# -- read ---------------------------------------------------------------------------------


def test_one_client_by_id_uuid_or_client_id(locky_client, locky_admin):
    made = register(locky_client, locky_admin)
    record = {k: v for k, v in made.items() if k != "client_secret"}
    for key in (made["id"], made["uuid"], made["uuid"].upper(), made["client_id"]):
        result = locky_client.simulate_get(f"{LIST}/{key}", headers=locky_admin.headers)
        assert result.status_code == 200, (key, result.text)
        assert result.json == record
    for key in ("0", "999999", "18446744073709551616", str(uuid.uuid4()), "no-such-client"):
        assert_not_found(locky_client.simulate_get(f"{LIST}/{key}", headers=locky_admin.headers))


def test_the_list_pages_by_id(locky_client, locky_admin):
    made = [register(locky_client, locky_admin, name=f"App {n}") for n in range(5)]
    seen, after = [], 0
    while True:
        result = locky_client.simulate_get(LIST, params={"limit": "2", "after_id": str(after)},
                                           headers=locky_admin.headers)
        assert result.status_code == 200, result.text
        assert set(result.json) == {"clients", "next_after_id"}
        page = result.json["clients"]
        assert len(page) <= 2
        assert all(set(item) == RECORD_KEYS for item in page)
        seen += page
        if result.json["next_after_id"] is None:
            break
        after = result.json["next_after_id"]
        assert after == page[-1]["id"]
    assert [c["client_id"] for c in seen] == [c["client_id"] for c in made]
    assert "client_secret" not in str(seen)


@pytest.mark.parametrize("params, field", [({"limit": "0"}, "limit"), ({"limit": "501"}, "limit"),
                                           ({"after_id": "-1"}, "after_id"), ({"name": "x"}, "name")])
def test_a_bad_list_query_is_a_field_map(locky_client, locky_admin, params, field):
    assert_fields(locky_client.simulate_get(LIST, params=params, headers=locky_admin.headers), field)


# -- update -------------------------------------------------------------------------------


def test_put_changes_only_the_fields_sent(locky_client, locky_admin):
    made = register(locky_client, locky_admin)
    result = locky_client.simulate_put(f"{PRIVATE}/{made['client_id']}",
                                       json={"name": "Reports 2", "redirect_uris": [WEB, "https://b.example/cb"],
                                             "first_party": True}, headers=locky_admin.headers)
    assert result.status_code == 200, result.text
    updated = result.json
    assert set(updated) == RECORD_KEYS
    assert (updated["name"], updated["first_party"]) == ("Reports 2", True)
    assert updated["redirect_uris"] == [WEB, "https://b.example/cb"]
    assert updated["scopes"] == made["scopes"] and updated["client_id"] == made["client_id"]
    assert updated["updated_at"] > made["updated_at"]
    stored = locky_client.app.context.storage.oauth_clients.get(made["id"])
    assert stored.secret_hash == hash_code(made["client_secret"])  # the secret still works
    (event,) = events(locky_client, locky_admin, "oauth.client.updated")
    assert event["details"]["changed"] == ["first_party", "name", "redirect_uris"]


def test_a_record_sent_back_as_read_is_accepted(locky_client, locky_admin):
    made = register(locky_client, locky_admin)
    record = locky_client.simulate_get(f"{LIST}/{made['id']}", headers=locky_admin.headers).json
    result = locky_client.simulate_put(f"{PRIVATE}/{made['id']}", json={**record, "name": "Again"},
                                       headers=locky_admin.headers)
    assert result.status_code == 200, result.text
    assert result.json["name"] == "Again"


@pytest.mark.parametrize("body, field", [
    ({"redirect_uris": ["http://app.example.com/cb"]}, "redirect_uris"),
    ({"redirect_uris": []}, "redirect_uris"),  # still an authorization_code client
    ({"type": "public"}, "type"),
    ({"name": ""}, "name"),
    ({"client_secret": "x"}, "client_secret"),
])
def test_put_keeps_the_rules(locky_client, locky_admin, body, field):
    made = register(locky_client, locky_admin)
    assert_fields(locky_client.simulate_put(f"{PRIVATE}/{made['id']}", json=body, headers=locky_admin.headers),
                  field)


def test_a_public_client_cannot_be_given_client_credentials(locky_client, locky_admin):
    made = register(locky_client, locky_admin, type="public")
    result = locky_client.simulate_put(f"{PRIVATE}/{made['id']}", json={"grant_types": ["client_credentials"]},
                                       headers=locky_admin.headers)
    assert_fields(result, "grant_types")


# -- delete -------------------------------------------------------------------------------


def test_delete_is_204_then_404_and_ends_the_clients_logins(locky_client, locky_admin, locky_user):
    made = register(locky_client, locky_admin)
    other = register(locky_client, locky_admin, name="Other")
    storage = locky_client.app.context.storage
    given = open_login(storage, locky_user.uuid, made["client_id"])
    kept = open_login(storage, locky_user.uuid, other["client_id"])

    result = locky_client.simulate_delete(f"{PRIVATE}/{made['id']}", headers=locky_admin.headers)
    assert result.status_code == 204 and not result.content
    assert storage.sessions.identity(given) is None
    assert storage.sessions.identity(kept) is not None
    assert locky_client.simulate_get("/v1/internal/users/me", headers=locky_user.headers).status_code == 200
    for key in (made["id"], made["uuid"], made["client_id"]):
        assert_not_found(locky_client.simulate_get(f"{LIST}/{key}", headers=locky_admin.headers))
    assert_not_found(locky_client.simulate_delete(f"{PRIVATE}/{made['id']}", headers=locky_admin.headers))
    assert_not_found(locky_client.simulate_put(f"{PRIVATE}/{made['id']}", json={"name": "Back"},
                                               headers=locky_admin.headers))
    assert_not_found(locky_client.simulate_post(f"{PRIVATE}/{made['id']}/secret", headers=locky_admin.headers))
    listed = locky_client.simulate_get(LIST, headers=locky_admin.headers).json["clients"]
    assert [c["client_id"] for c in listed] == [other["client_id"]]
    (event,) = events(locky_client, locky_admin, "oauth.client.deleted")
    assert (event["target_uuid"], event["details"]["sessions_ended"]) == (made["uuid"], 1)


# -- secret -------------------------------------------------------------------------------


def test_rotating_gives_a_new_secret_and_the_old_one_stops(locky_client, locky_admin):
    made = register(locky_client, locky_admin)
    result = locky_client.simulate_post(f"{PRIVATE}/{made['uuid']}/secret", headers=locky_admin.headers)
    assert result.status_code == 200, result.text
    assert set(result.json) == {"client_secret"}
    secret = result.json["client_secret"]
    assert secret != made["client_secret"] and len(secret) >= 43
    stored = locky_client.app.context.storage.oauth_clients.get(made["id"])
    assert stored.secret_hash == hash_code(secret) != hash_code(made["client_secret"])
    (event,) = events(locky_client, locky_admin, "oauth.client.secret_rotated")
    assert secret not in str(event) and event["details"]["client_id"] == made["client_id"]


def test_a_public_client_has_no_secret_to_rotate(locky_client, locky_admin):
    made = register(locky_client, locky_admin, type="public")
    assert_fields(locky_client.simulate_post(f"{PRIVATE}/{made['id']}/secret", headers=locky_admin.headers), "type")


# -- at the token endpoint ----------------------------------------------------------------


def client_credentials(client, client_id: str, secret: str):
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return client.simulate_post("/oauth/token", body="grant_type=client_credentials",
                                headers={"Authorization": f"Basic {basic}",
                                         "Content-Type": "application/x-www-form-urlencoded"})


def test_the_secret_and_the_tokens_of_a_machine_client_at_the_token_endpoint(locky_client, locky_admin):
    made = register(locky_client, locky_admin, redirect_uris=[], grant_types=["client_credentials"])
    issued = client_credentials(locky_client, made["client_id"], made["client_secret"])
    assert issued.status_code == 200, issued.text
    bearer = {"Authorization": f"Bearer {issued.json['access_token']}"}
    check = {"user_uuid": locky_admin.uuid, "resource": "reports", "action": "read"}
    assert locky_client.simulate_get("/v1/internal/authz/check", params=check, headers=bearer).status_code == 200

    rotated = locky_client.simulate_post(f"{PRIVATE}/{made['id']}/secret", headers=locky_admin.headers).json
    refused = client_credentials(locky_client, made["client_id"], made["client_secret"])
    assert refused.status_code == 401 and refused.json["error"] == "invalid_client"  # the old secret, at once
    assert client_credentials(locky_client, made["client_id"], rotated["client_secret"]).status_code == 200
    # A new secret does not end the tokens issued before.
    assert locky_client.simulate_get("/v1/internal/authz/check", params=check, headers=bearer).status_code == 200

    assert locky_client.simulate_delete(f"{PRIVATE}/{made['id']}", headers=locky_admin.headers).status_code == 204
    assert locky_client.simulate_get("/v1/internal/authz/check", params=check, headers=bearer).status_code == 401
    assert client_credentials(locky_client, made["client_id"], rotated["client_secret"]).status_code == 401


# -- consents -----------------------------------------------------------------------------


def test_a_user_lists_and_withdraws_their_consents(locky_client, locky_admin, locky_user):
    storage = locky_client.app.context.storage
    reports = register(locky_client, locky_admin)
    wiki = register(locky_client, locky_admin, name="Wiki")
    storage.consents.grant(locky_user.uuid, reports["client_id"], ["openid", "email"])
    storage.consents.grant(locky_user.uuid, wiki["client_id"], ["openid"])
    storage.consents.grant(locky_admin.uuid, reports["client_id"], ["openid"])  # another user's
    login = open_login(storage, locky_user.uuid, reports["client_id"])
    admins_login = open_login(storage, locky_admin.uuid, reports["client_id"])

    result = locky_client.simulate_get(CONSENTS, headers=locky_user.headers)
    assert result.status_code == 200, result.text
    consents = result.json["consents"]
    assert [(c["client_id"], c["client_name"], c["scopes"]) for c in consents] == \
        [(reports["client_id"], "Reports", ["email", "openid"]), (wiki["client_id"], "Wiki", ["openid"])]
    assert all(set(c) == {"client_id", "client_name", "scopes", "created_at", "updated_at"} for c in consents)
    assert all(TIMESTAMP.match(c["created_at"]) for c in consents)

    result = locky_client.simulate_delete(f"{WITHDRAW}/{reports['client_id']}", headers=locky_user.headers)
    assert result.status_code == 204 and not result.content
    assert [c["client_id"] for c in
            locky_client.simulate_get(CONSENTS, headers=locky_user.headers).json["consents"]] == [wiki["client_id"]]
    assert storage.sessions.identity(login) is None  # the user's login of that client ended
    assert storage.sessions.identity(admins_login) is not None  # nobody else's
    assert storage.consents.get(locky_admin.uuid, reports["client_id"]) is not None
    assert_not_found(locky_client.simulate_delete(f"{WITHDRAW}/{reports['client_id']}", headers=locky_user.headers))
    assert_not_found(locky_client.simulate_delete(f"{WITHDRAW}/nothing-here", headers=locky_user.headers))

    (event,) = events(locky_client, locky_admin, "oauth.consent.revoked")
    assert (event["actor_uuid"], event["target_type"], event["target_uuid"]) == (locky_user.uuid, "user",
                                                                                 locky_user.uuid)
    assert event["details"] == {"client_id": reports["client_id"], "scopes": ["email", "openid"],
                                "sessions_ended": 1}


def test_no_consents_is_an_empty_list(locky_client, locky_user):
    result = locky_client.simulate_get(CONSENTS, headers=locky_user.headers)
    assert result.status_code == 200 and result.json == {"consents": []}


def test_a_consent_to_a_deleted_client_shows_no_name(locky_client, locky_admin, locky_user):
    made = register(locky_client, locky_admin)
    locky_client.app.context.storage.consents.grant(locky_user.uuid, made["client_id"], ["openid"])
    assert locky_client.simulate_delete(f"{PRIVATE}/{made['id']}", headers=locky_admin.headers).status_code == 204
    (consent,) = locky_client.simulate_get(CONSENTS, headers=locky_user.headers).json["consents"]
    assert (consent["client_id"], consent["client_name"]) == (made["client_id"], None)


# -- the Swagger document -------------------------------------------------------------------


def test_the_routes_are_in_the_swagger_document(locky_client):
    doc = locky_client.simulate_get("/swagger/doc.json").json
    paths = doc["paths"]
    assert set(paths["/private/oauth/clients"]) == {"post"}
    assert set(paths["/internal/oauth/clients"]) == {"get"}
    assert set(paths["/internal/oauth/clients/{id}"]) == {"get"}
    assert set(paths["/private/oauth/clients/{id}"]) == {"put", "delete"}
    assert set(paths["/private/oauth/clients/{id}/secret"]) == {"post"}
    assert set(paths["/internal/users/me/consents"]) == {"get"}
    assert set(paths["/private/users/me/consents/{client_id}"]) == {"delete"}
    (key,) = paths["/internal/oauth/clients/{id}"]["get"]["parameters"]
    assert (key["name"], key["type"]) == ("id", "string")
    created = paths["/private/oauth/clients"]["post"]["responses"]["201"]["schema"]["$ref"]
    assert "client_secret" in doc["definitions"][created.rsplit("/", 1)[1]]["properties"]
    record = paths["/internal/oauth/clients/{id}"]["get"]["responses"]["200"]["schema"]["$ref"]
    assert "client_secret" not in doc["definitions"][record.rsplit("/", 1)[1]]["properties"]
