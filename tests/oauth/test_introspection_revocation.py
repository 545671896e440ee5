"""RFC 7662 introspection and RFC 7009 revocation (docs/http/tokens.md) for the OpenID
provider's tokens: client authentication (Basic, or client_id and client_secret in the
body), ``client_id`` and ``scope`` in the answer, a client revoking only its own tokens,
and a client_credentials token's revocation ending every token of its client."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from locky import events
from token_helpers import (
    FORM, INTROSPECT, REVOKE, SECRET, USERINFO, basic, claims, events_named, exchange, issue_code, make_client,
    token_request,
)


def login_tokens(app, client, end_user, scope="openid email offline_access"):
    from locky.testing import LockyClient
    result = exchange(LockyClient(app), client, issue_code(app, client, end_user, scope=scope))
    assert result.status_code == 200, result.text
    return result.json


def machine_token(locky_client, machine) -> str:
    result = token_request(locky_client, machine, {"grant_type": "client_credentials", "scope": "groups"})
    assert result.status_code == 200, result.text
    return result.json["access_token"]


def test_a_client_introspects_with_its_secret(locky_app, locky_client, user, end_user):
    machine = make_client(locky_app, grant_types=("client_credentials",))
    web = make_client(locky_app)
    access = login_tokens(locky_app, web, end_user)["access_token"]
    by_basic = locky_client.simulate_post(INTROSPECT, body=urlencode({"token": access}),
                                          headers=basic(machine.client_id))
    assert by_basic.status_code == 200, by_basic.text
    answer = by_basic.json
    assert answer["active"] is True and answer["sub"] == user.uuid and answer["username"] == user.email
    assert answer["client_id"] == web.client_id and answer["scope"] == "openid email offline_access"
    assert answer["aud"] == web.client_id and answer["token_type"] == "access"
    by_post = locky_client.simulate_post(INTROSPECT, headers=FORM, body=urlencode(
        {"token": access, "client_id": machine.client_id, "client_secret": SECRET}))
    assert by_post.status_code == 200 and by_post.json == answer
    # A machine client's own token: its sub is the client_id, and no username.
    own = machine_token(locky_client, machine)
    mine = locky_client.simulate_post(INTROSPECT, body=urlencode({"token": own}), headers=basic(machine.client_id)).json
    assert mine["active"] is True and mine["sub"] == machine.client_id and "username" not in mine
    assert mine["client_id"] == machine.client_id and mine["scope"] == "groups"
    # And a bearer caller (its token the client's own) works as before.
    as_bearer = locky_client.simulate_post(INTROSPECT, json={"token": access},
                                           headers={"Authorization": f"Bearer {own}"})
    assert as_bearer.status_code == 200 and as_bearer.json == answer


def test_wrong_client_credentials_are_invalid_client(locky_app, locky_client, end_user):
    machine = make_client(locky_app, grant_types=("client_credentials",))
    for kwargs in (dict(headers=basic(machine.client_id, "wrong"), body=urlencode({"token": "x"})),
                   dict(headers=FORM, body=urlencode({"token": "x", "client_id": machine.client_id,
                                                      "client_secret": "wrong"})),
                   dict(headers=FORM, body=urlencode({"token": "x", "client_id": "nobody", "client_secret": "x"}))):
        for path in (INTROSPECT, REVOKE):
            result = locky_client.simulate_post(path, **kwargs)
            assert result.status_code == 401, (path, result.text)
            assert result.json["error"] == "invalid_client"
            assert result.headers["www-authenticate"].startswith("Basic")
    # Without any credential, introspection still asks for a bearer token.
    anonymous = locky_client.simulate_post(INTROSPECT, headers=FORM, body=urlencode({"token": "x"}))
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")


def test_a_client_revokes_only_its_own_tokens(locky_app, locky_client, end_user):
    web, other = make_client(locky_app), make_client(locky_app)
    tokens = login_tokens(locky_app, web, end_user)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    # Another client, or nobody, cannot end it.
    for headers, form in ((basic(other.client_id), {"token": tokens["refresh_token"]}),
                          (FORM, {"token": tokens["refresh_token"]})):
        result = locky_client.simulate_post(REVOKE, body=urlencode(form), headers=headers)
        assert result.status_code == 200 and result.json == {}
        assert locky_client.simulate_get(USERINFO, headers=bearer).status_code == 200
    # Its own client can.
    result = locky_client.simulate_post(REVOKE, body=urlencode({"token": tokens["refresh_token"]}),
                                        headers=basic(web.client_id))
    assert result.status_code == 200 and result.json == {}
    assert locky_client.simulate_get(USERINFO, headers=bearer).status_code == 401
    [revoked] = events_named(locky_app, events.TOKEN_REVOKED)
    assert (revoked.target_type, revoked.target_uuid) == ("session", claims(tokens["access_token"])["sid"])


def test_a_public_client_revokes_with_its_client_id(locky_app, locky_client, end_user):
    spa = make_client(locky_app, type="public")
    tokens = login_tokens(locky_app, spa, end_user)
    result = locky_client.simulate_post(REVOKE, headers=FORM, body=urlencode(
        {"token": tokens["access_token"], "client_id": spa.client_id}))
    assert result.status_code == 200
    assert locky_client.simulate_get(USERINFO, headers={"Authorization": f"Bearer {tokens['access_token']}"}
                                     ).status_code == 401


def test_revoking_a_client_credentials_token_ends_every_token_of_the_client(locky_app, locky_client):
    machine = make_client(locky_app, grant_types=("client_credentials",))
    first, second = machine_token(locky_client, machine), machine_token(locky_client, machine)
    inspect = lambda token: locky_client.simulate_post(  # noqa: E731
        INTROSPECT, body=urlencode({"token": token}), headers=basic(machine.client_id)).json["active"]
    assert inspect(first) and inspect(second)
    result = locky_client.simulate_post(REVOKE, body=json.dumps({"token": first}),
                                        headers={**basic(machine.client_id), "Content-Type": "application/json"})
    assert result.status_code == 200 and result.json == {}
    assert not inspect(first) and not inspect(second)
    assert inspect(machine_token(locky_client, machine))  # new tokens work
    [revoked] = events_named(locky_app, events.TOKEN_REVOKED)
    assert (revoked.target_type, revoked.target_uuid) == ("oauth_client", machine.uuid)
    assert revoked.details == {"reason": "revocation endpoint", "client_id": machine.client_id}


def test_a_deleted_clients_tokens_are_inactive(locky_app, locky_client, end_user):
    machine = make_client(locky_app, grant_types=("client_credentials",))
    web = make_client(locky_app)
    own, access = machine_token(locky_client, machine), login_tokens(locky_app, web, end_user)["access_token"]
    locky_app.context.storage.oauth_clients.delete(machine.id)
    checker = make_client(locky_app, grant_types=("client_credentials",))
    inspect = lambda token: locky_client.simulate_post(  # noqa: E731
        INTROSPECT, body=urlencode({"token": token}), headers=basic(checker.client_id)).json
    assert inspect(own) == {"active": False}
    assert inspect(access)["active"] is True
