"""Machine clients and the OpenID provider's tokens as callers of Locky's own API
(docs/http/oauth.md): a ``client_credentials`` token (``sub`` the client_id, ``sid``
``client:<client uuid>:<token generation>``) acts as its client, whose policy subject is
``client:<client_id>``: the shipped policy lets it ask the authorization API and
introspect tokens, nothing else, until its tokens are revoked or it is deleted. A token
the OpenID provider issued to a user (``aud`` the client_id) acts as that user's login.

The tokens are issued through the app's own token backend for a client stored in the
app's storage, as the token endpoint does."""

from __future__ import annotations

import uuid

import pytest

from locky.testing import LockyClient

ADMIN = "admin@example.com"
CHECK = "/v1/internal/authz/check"
INTROSPECT = "/v1/internal/tokens/introspect"


@pytest.fixture
def world(locky_app):
    client = LockyClient(locky_app)
    ada = client.account("ada@example.com")
    return locky_app, client, ada


def stored_client(app, client_id: str = "reports-backend", grants=("client_credentials",)):
    return app.context.storage.oauth_clients.create(
        client_id=client_id, name="Reports backend", type="confidential", redirect_uris=(),
        post_logout_redirect_uris=(), grant_types=grants, scopes=("openid",), id_token_signed_response_alg="RS256",
        first_party=False, secret_hash="0" * 64)


def client_token(app, client) -> str:
    """A client_credentials token of ``client`` as it is now (its token generation)."""
    return app.context.tokens.issue(user_uuid=client.client_id, session_uuid=f"client:{client.uuid}:"
                                    f"{client.token_generation}", kind="access", client_id=client.client_id,
                                    scope="").token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def check(http, token: str, user_uuid: str, resource: str = "groups", action: str = "read"):
    return http.simulate_get(CHECK, params={"user_uuid": user_uuid, "resource": resource, "action": action},
                             headers=bearer(token))


def test_a_client_credentials_token_asks_the_authorization_api_and_introspects(world):
    app, http, ada = world
    token = client_token(app, stored_client(app))
    result = check(http, token, ada.uuid)
    assert result.status_code == 200, result.text
    assert result.json == {"allowed": True}
    assert check(http, token, ada.uuid, "groups", "delete").json == {"allowed": False}
    batch = http.simulate_post(CHECK, json={"checks": [{"user_uuid": ada.uuid, "resource": "users",
                                                        "action": "read"}]}, headers=bearer(token))
    assert batch.status_code == 200 and batch.json == {"results": [{"allowed": True}]}
    permissions = http.simulate_get("/v1/internal/authz/permissions", params={"user_uuid": ada.uuid},
                                    headers=bearer(token))
    assert permissions.status_code == 200 and permissions.json["permissions"]
    introspected = http.simulate_post(INTROSPECT, json={"token": ada.access_token}, headers=bearer(token))
    assert introspected.status_code == 200, introspected.text
    assert introspected.json["active"] is True and introspected.json["sub"] == ada.uuid


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1/internal/users"),
    ("GET", "/v1/internal/users/me"),
    ("GET", "/v1/internal/groups"),
    ("GET", "/v1/internal/roles"),
    ("GET", "/v1/internal/keys"),
    ("GET", "/v1/internal/audit"),
    ("POST", "/v1/private/groups"),
    ("POST", "/v1/private/keys/rotate"),
    ("GET", "/v1/internal/oauth/clients"),
])
def test_a_client_is_refused_everything_else_with_403(world, method, path):
    app, http, _ = world
    token = client_token(app, stored_client(app))
    body = {"name": "Ops", "description": ""} if path == "/v1/private/groups" else None
    result = http.simulate_request(method, path, json=body, headers=bearer(token))
    assert result.status_code == 403, (path, result.status_code, result.text)


def test_a_role_granted_to_the_client_applies_at_once(world):
    app, http, _ = world
    client = stored_client(app)
    token = client_token(app, client)
    assert http.simulate_get("/v1/internal/users", headers=bearer(token)).status_code == 403
    app.context.storage.grants.grant(f"client:{client.client_id}", "admin")
    assert http.simulate_get("/v1/internal/users", headers=bearer(token)).status_code == 200
    app.context.storage.grants.revoke(f"client:{client.client_id}", "admin")
    assert http.simulate_get("/v1/internal/users", headers=bearer(token)).status_code == 403


def test_revoking_the_clients_tokens_stops_every_one_issued_before(world):
    app, http, ada = world
    client = stored_client(app)
    before = [client_token(app, client) for _ in range(2)]
    moved = app.context.storage.oauth_clients.revoke_tokens(client.id)
    assert moved.token_generation == client.token_generation + 1
    for token in before:
        result = check(http, token, ada.uuid)
        assert result.status_code == 401 and result.json["description"] == "The token has been revoked."
    assert check(http, client_token(app, moved), ada.uuid).status_code == 200  # issued after: works


def test_a_deleted_client_s_tokens_stop(world):
    app, http, ada = world
    client = stored_client(app)
    token = client_token(app, client)
    assert check(http, token, ada.uuid).status_code == 200
    app.context.storage.oauth_clients.delete(client.id)
    assert check(http, token, ada.uuid).status_code == 401
    # A new client taking the same client_id does not inherit the old one's tokens.
    stored_client(app)
    assert check(http, token, ada.uuid).status_code == 401


def test_a_client_without_the_grant_any_more_is_refused(world):
    app, http, ada = world
    client = stored_client(app, grants=("client_credentials", "authorization_code"))
    token = client_token(app, client)
    assert check(http, token, ada.uuid).status_code == 200
    app.context.storage.oauth_clients.update(client.id, grant_types=["authorization_code"])
    assert check(http, token, ada.uuid).status_code == 401


@pytest.mark.parametrize("sid", ["client:{uuid}:x", "client:{uuid}", "client:{uuid}:0:0", "client:{other}:0"])
def test_a_malformed_or_foreign_client_sid_is_refused(world, sid):
    app, http, ada = world
    client = stored_client(app)
    token = app.context.tokens.issue(user_uuid=client.client_id, kind="access", client_id=client.client_id,
                                     session_uuid=sid.format(uuid=client.uuid, other=uuid.uuid4()), scope="").token
    assert check(http, token, ada.uuid).status_code == 401


def test_a_client_sid_naming_another_client_is_refused(world):
    """``sub`` and the ``client_id`` claim must name the client the ``sid`` names."""
    app, http, ada = world
    first, second = stored_client(app, "first"), stored_client(app, "second")
    token = app.context.tokens.issue(user_uuid=second.client_id, kind="access", client_id=second.client_id,
                                     session_uuid=f"client:{first.uuid}:0", scope="").token
    assert check(http, token, ada.uuid).status_code == 401
    token = app.context.tokens.issue(user_uuid=first.client_id, kind="access", client_id=second.client_id,
                                     session_uuid=f"client:{first.uuid}:0", scope="").token
    assert check(http, token, ada.uuid).status_code == 401


def test_a_token_issued_to_a_user_through_a_client_acts_as_that_login(world):
    """The OpenID provider's access token for a user: ``aud`` the client_id, a session
    of its own; it works like any login until that login ends."""
    app, http, ada = world
    client = stored_client(app, "wiki", grants=("authorization_code",))
    session_uuid = str(uuid.uuid4())
    app.context.storage.sessions.create(uuid=session_uuid, user_uuid=ada.uuid, refresh_jti=uuid.uuid4().hex,
                                        client_id=client.client_id, scope="openid email")
    token = app.context.tokens.issue(user_uuid=ada.uuid, session_uuid=session_uuid, kind="access",
                                     client_id=client.client_id, scope="openid email").token
    me = http.simulate_get("/v1/internal/users/me", headers=bearer(token))
    assert me.status_code == 200 and me.json["uuid"] == ada.uuid
    assert app.context.storage.sessions.revoke_client(client.client_id) == 1
    assert http.simulate_get("/v1/internal/users/me", headers=bearer(token)).status_code == 401


def test_a_policy_line_names_a_client(locky_app_factory, tmp_path):
    """``g, client:<client_id>, ROLE`` in the operator's policy gives that client the role."""
    from pathlib import Path

    import locky.policies as policies

    shipped = Path(policies.__file__).parent
    (tmp_path / "model.conf").write_text((shipped / "model.conf").read_text())
    (tmp_path / "policy.csv").write_text((shipped / "policy.csv").read_text() + "\ng, client:reports-backend, admin\n")
    app = locky_app_factory(policy_dir=str(tmp_path))
    http = LockyClient(app)
    ada = http.account("ada@example.com")
    chosen, other = stored_client(app), stored_client(app, "billing")
    assert http.simulate_get("/v1/internal/users", headers=bearer(client_token(app, chosen))).status_code == 200
    assert http.simulate_get("/v1/internal/users", headers=bearer(client_token(app, other))).status_code == 403
    assert check(http, client_token(app, other), ada.uuid).status_code == 200


# -- locky grant-role / revoke-role ---------------------------------------------------------


def run_role_command(settings, capsys, *words: str) -> tuple[int, str, str]:
    """``locky grant-role|revoke-role SUBJECT ROLE [--json]`` in this process."""
    from locky.cli import main as cli

    namespace = cli._parser().parse_args(list(words))
    code = cli.COMMANDS[namespace.command](settings, namespace)
    out, err = capsys.readouterr()
    return code, out, err


def test_grant_role_gives_a_machine_client_a_role_and_revoke_role_takes_it_back(locky_app, locky_settings, capsys):
    import json

    app, http = locky_app, LockyClient(locky_app)
    client = stored_client(app)
    token = client_token(app, client)
    subject = f"client:{client.client_id}"
    assert http.simulate_get("/v1/internal/users", headers=bearer(token)).status_code == 403
    code, out, _ = run_role_command(locky_settings, capsys, "grant-role", subject, "admin", "--json")
    assert code == 0 and json.loads(out) == {"subject": subject, "role": "admin", "granted": True, "changed": True}
    assert app.context.storage.grants.roles_of(subject) == {"admin"}
    assert http.simulate_get("/v1/internal/users", headers=bearer(token)).status_code == 200
    code, out, _ = run_role_command(locky_settings, capsys, "grant-role", subject, "admin")
    assert code == 0 and out == f"{subject}: nothing to change\n"
    code, out, _ = run_role_command(locky_settings, capsys, "revoke-role", subject, "admin")
    assert code == 0 and out == f"{subject} no longer holds role admin\n"
    assert http.simulate_get("/v1/internal/users", headers=bearer(token)).status_code == 403
    trail = app.context.storage.audit.list(event_prefix="role.").items
    assert [(e.event, e.actor_uuid, e.target_type, e.target_uuid, e.details) for e in trail] == [
        ("role.granted", None, "oauth_client", client.uuid,
         {"subject": subject, "role": "admin", "client_id": client.client_id, "actor": "cli"}),
        ("role.revoked", None, "oauth_client", client.uuid,
         {"subject": subject, "role": "admin", "client_id": client.client_id, "actor": "cli"}),
    ]


def test_grant_role_to_a_user_by_email(locky_app, locky_settings, capsys):
    app, http = locky_app, LockyClient(locky_app)
    ada = http.account("ada@example.com")
    assert http.simulate_post("/v1/private/groups", json={"name": "Ops"}, headers=ada.headers).status_code == 201
    code, out, _ = run_role_command(locky_settings, capsys, "grant-role", "Ada@Example.com", "member")
    assert code == 0 and out == "ada@example.com now holds role member\n"
    assert app.context.storage.grants.roles_of(ada.uuid) == {"member"}
    [event] = app.context.storage.audit.list(event="role.granted").items
    assert (event.actor_uuid, event.target_type, event.target_uuid) == (None, "user", ada.uuid)
    assert event.details == {"subject": ada.uuid, "role": "member", "email": "ada@example.com", "actor": "cli"}


@pytest.mark.parametrize("subject, role, message", [
    ("nobody@example.com", "admin", "no live user with email nobody@example.com"),
    ("client:unknown", "admin", "no live OAuth client with client_id unknown"),
    ("client:reports-backend", "no-such-role", "no role named 'no-such-role'"),
])
def test_grant_role_refuses_an_unknown_subject_or_role(locky_app, locky_settings, capsys, subject, role, message):
    stored_client(locky_app)
    for command in ("grant-role", "revoke-role"):
        code, out, err = run_role_command(locky_settings, capsys, command, subject, role)
        assert code == 1 and out == "" and message in err
    assert locky_app.context.storage.grants.roles_of("client:reports-backend") == frozenset()
    assert locky_app.context.storage.audit.list(event_prefix="role.").items == []
