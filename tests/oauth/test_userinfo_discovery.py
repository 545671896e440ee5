"""GET|POST /oauth/userinfo and the provider's metadata (docs/http/oauth.md): the claims
of the granted scopes, RFC 6750's refusals, the discovery document with every field of
docs/http/oauth.md and the RFC 8414 document naming the same endpoints; and the transport
decision for an issuer of plain http."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import pytest
from authlib.oauth2.rfc6749 import InsecureTransportError

from locky.oauth.server import insecure_transport
from token_helpers import (
    DISCOVERY, FORM, METADATA, USERINFO, exchange, issue_code, make_client, sign_in, token_request,
)


def tokens(app, client, end_user, scope="openid email profile groups"):
    result = exchange(client_of(app), client, issue_code(app, client, end_user, scope=scope))
    assert result.status_code == 200, result.text
    return result.json


def client_of(app):
    from locky.testing import LockyClient
    return LockyClient(app)


def test_userinfo_answers_the_claims_of_the_granted_scopes(locky_app, locky_client, user, end_user):
    client = make_client(locky_app)
    access = tokens(locky_app, client, end_user)["access_token"]
    expected = {"sub": user.uuid, "email": "ada@example.com", "email_verified": False, "name": "Ada Lovelace",
                "groups": []}
    got = locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {access}"})
    assert got.status_code == 200 and got.json == expected
    assert got.headers["cache-control"] == "no-store"
    posted = locky_client.simulate_post(USERINFO, body=urlencode({"access_token": access}), headers=FORM)
    assert posted.status_code == 200 and posted.json == expected
    header = locky_client.simulate_post(USERINFO, headers={"Authorization": f"Bearer {access}"})
    assert header.json == expected

    only_openid = tokens(locky_app, client, end_user, scope="openid")["access_token"]
    assert locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {only_openid}"}).json == \
        {"sub": user.uuid}


def refused(result, status: int, error: str) -> None:
    assert result.status_code == status, result.text
    assert result.json["error"] == error
    assert result.headers["www-authenticate"].startswith(f'Bearer error="{error}"')


def test_userinfo_refuses_bad_tokens_with_a_bearer_challenge(locky_app, locky_client, user, end_user):
    client = make_client(locky_app)
    access = tokens(locky_app, client, end_user)["access_token"]
    refused(locky_client.simulate_get(USERINFO), 401, "invalid_token")
    refused(locky_client.simulate_get(USERINFO, headers={"Authorization": "Bearer not-a-token"}), 401, "invalid_token")
    refused(locky_client.simulate_get(USERINFO, headers={"Authorization": f"Basic {access}"}), 401, "invalid_token")
    # A login of the /v1 API has no client: not a token of the provider.
    refused(locky_client.simulate_get(USERINFO, headers=user.headers), 401, "invalid_token")
    # Both in the header and in the body.
    both = locky_client.simulate_post(USERINFO, body=urlencode({"access_token": access}),
                                      headers={**FORM, "Authorization": f"Bearer {access}"})
    refused(both, 400, "invalid_request")
    # Without openid.
    no_openid = tokens(locky_app, client, end_user, scope="email")["access_token"]
    refused(locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {no_openid}"}), 403,
            "insufficient_scope")
    # A client_credentials token has no user.
    machine = make_client(locky_app, grant_types=("client_credentials",))
    machine_token = token_request(locky_client, machine, {"grant_type": "client_credentials"}).json["access_token"]
    refused(locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {machine_token}"}), 401,
            "invalid_token")
    # A revoked login, and a disabled user.
    locky_app.context.storage.sessions.end_op_session(end_user.op_session.uuid)
    refused(locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {access}"}), 401, "invalid_token")
    fresh = tokens(locky_app, client, sign_in(locky_app, user.uuid))["access_token"]
    assert locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    result = locky_client.simulate_put(f"/v1/private/users/{user.id}", json={"disabled": True},
                                       headers=locky_client.account("admin@example.com", verified=True).headers)
    assert result.status_code == 200, result.text
    refused(locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {fresh}"}), 401, "invalid_token")


#: What docs/http/oauth.md says the discovery document holds.
DISCOVERY_FIELDS = {
    "issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri", "end_session_endpoint",
    "revocation_endpoint", "introspection_endpoint", "scopes_supported", "response_types_supported",
    "response_modes_supported", "grant_types_supported", "code_challenge_methods_supported",
    "subject_types_supported", "id_token_signing_alg_values_supported", "token_endpoint_auth_methods_supported",
    "claims_supported",
}


def test_the_discovery_document(locky_client, issuer):
    result = locky_client.simulate_get(DISCOVERY, host="elsewhere.test")
    assert result.status_code == 200
    assert result.headers["cache-control"] == "public, max-age=300"
    doc = result.json
    assert DISCOVERY_FIELDS <= set(doc)
    assert doc["issuer"] == issuer == "http://127.0.0.1:8080"  # the settings', never the request's Host
    assert doc["authorization_endpoint"] == issuer + "/oauth/authorize"
    assert doc["token_endpoint"] == issuer + "/oauth/token"
    assert doc["userinfo_endpoint"] == issuer + "/oauth/userinfo"
    assert doc["end_session_endpoint"] == issuer + "/oauth/logout"
    assert doc["jwks_uri"] == issuer + "/.well-known/jwks.json"
    assert doc["introspection_endpoint"] == issuer + "/v1/internal/tokens/introspect"
    assert doc["revocation_endpoint"] == issuer + "/v1/public/tokens/revoke"
    assert doc["response_types_supported"] == ["code"]
    assert doc["grant_types_supported"] == ["authorization_code", "refresh_token", "client_credentials"]
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert doc["subject_types_supported"] == ["public"]
    assert {"RS256", "ES256"} <= set(doc["id_token_signing_alg_values_supported"])
    assert doc["token_endpoint_auth_methods_supported"] == ["client_secret_basic", "client_secret_post", "none"]
    assert doc["scopes_supported"] == ["openid", "profile", "email", "groups", "offline_access"]
    assert {"sub", "email", "email_verified", "name", "groups", "auth_time", "nonce", "amr"} <= \
        set(doc["claims_supported"])
    # Every endpoint it names is served.
    for name in ("token_endpoint", "userinfo_endpoint", "jwks_uri"):
        path = doc[name][len(issuer):]
        assert locky_client.simulate_options(path).status_code != 404, name


def test_the_rfc_8414_document_names_the_same_endpoints_and_grants(locky_client):
    discovery = locky_client.simulate_get(DISCOVERY).json
    metadata = locky_client.simulate_get(METADATA).json
    for name in ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "introspection_endpoint",
                 "revocation_endpoint", "grant_types_supported", "response_types_supported",
                 "code_challenge_methods_supported", "token_endpoint_auth_methods_supported",
                 "scopes_supported"):
        assert metadata[name] == discovery[name], name


def test_the_documents_follow_locky_public_url(locky_app_factory):
    from locky.testing import LockyClient
    client = LockyClient(locky_app_factory(public_url="https://auth.example.com/locky/"))
    doc = client.simulate_get(DISCOVERY).json
    assert doc["issuer"] == "https://auth.example.com/locky"
    assert doc["token_endpoint"] == "https://auth.example.com/locky/oauth/token"


@pytest.mark.parametrize("base, insecure", [
    ("https://auth.example.com", False), ("http://127.0.0.1:8080", False), ("http://localhost:8080", False),
    ("http://[::1]:8080", False), ("http://0.0.0.0:8080", True), ("http://locky.internal", True),
    ("http://10.0.0.5:8080", True),
])
def test_which_bases_are_insecure(base, insecure):
    assert insecure_transport(base) is insecure


def test_an_http_issuer_off_the_loopback_serves_and_warns(locky_app_factory, caplog):
    """Authlib alone would answer such a request 500 (InsecureTransportError, raised
    outside its error handling); Locky serves it and warns once when the server is built."""
    with pytest.raises(InsecureTransportError):
        InsecureTransportError.check("http://locky.internal/oauth/token")
    from locky.testing import LockyClient
    app = locky_app_factory(public_url="http://locky.internal")
    client = LockyClient(app)
    user = client.account("ada@example.com")
    machine = make_client(app, grant_types=("client_credentials",))
    with caplog.at_level(logging.WARNING, logger="locky.oauth"):
        result = token_request(client, machine, {"grant_type": "client_credentials"})
        assert result.status_code == 200, result.text
        token_request(client, machine, {"grant_type": "client_credentials"})
    warnings = [r.getMessage() for r in caplog.records if r.name == "locky.oauth"]
    assert len(warnings) == 1 and "http://locky.internal" in warnings[0] and "LOCKY_PUBLIC_URL" in warnings[0]
    code = issue_code(app, make_client(app), sign_in(app, user.uuid))
    assert code
