"""``locky clients`` (docs/http/oauth.md#locky-clients): the operator registers, lists,
deletes OAuth clients and rotates a secret on the database directly, with the rules of
the API (a refused value exits 2 naming the field), ``--json`` for scripts, the secret
printed once and kept hashed, and every change in the audit trail with a null actor and
``details.actor`` ``"cli"``."""

from __future__ import annotations

import json
import os

import pytest

from locky.accounts.codes import hash_code
from locky.cli import main as operator
from locky.testing import TEST_SECRET

WEB = "https://app.example.com/callback"


@pytest.fixture
def locky(locky_app, locky_settings, monkeypatch, capsys):
    """``locky(*args) -> (exit status, stdout, stderr)``, run in this process on the test
    app's database (made by ``locky_app``), with no settings of the caller's."""
    for name in [k for k in os.environ if k.startswith("LOCKY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LOCKY_DATABASE_URL", locky_settings.database_url)
    monkeypatch.setenv("LOCKY_JWT_SECRET", TEST_SECRET)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = operator.main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def trail(app, name: str) -> list:
    return app.context.storage.audit.list(event=name, limit=500).items


def test_create_prints_the_client_and_its_secret_once(locky, locky_app):
    status, out, err = locky("clients", "create", "Reports", "--redirect-uri", WEB, "--json")
    assert status == 0, err
    made = json.loads(out)
    assert made["name"] == "Reports" and made["type"] == "confidential"
    assert made["redirect_uris"] == [WEB]
    assert made["grant_types"] == ["authorization_code", "refresh_token"]
    assert made["scopes"] == ["openid", "profile", "email", "groups", "offline_access"]
    stored = locky_app.context.storage.oauth_clients.get_by_client_id(made["client_id"])
    assert stored.secret_hash == hash_code(made["client_secret"])

    (event,) = trail(locky_app, "oauth.client.created")
    assert (event.actor_uuid, event.target_uuid) == (None, stored.uuid) and not event.request_id
    assert event.details["actor"] == "cli" and event.details["client_id"] == made["client_id"]
    assert made["client_secret"] not in json.dumps(event.details)

    status, out, _ = locky("clients", "list", "--json")
    assert status == 0
    (listed,) = json.loads(out)
    assert listed == {k: v for k, v in made.items() if k != "client_secret"}


def test_create_with_every_option_in_lines(locky, locky_app):
    status, out, err = locky("clients", "create", "Native", "--redirect-uri", "http://127.0.0.1:8765/cb",
                             "http://localhost/cb", "--public", "--grant", "authorization_code", "--first-party",
                             "--post-logout-redirect-uri", "https://native.example/bye", "--scope", "openid",
                             "email", "--id-token-alg", "ES256")
    assert status == 0, err
    assert out.startswith("client_id: ") and "client_secret" not in out
    client_id = out.split()[1]
    client = locky_app.context.storage.oauth_clients.get_by_client_id(client_id)
    assert (client.type, client.first_party, client.id_token_signed_response_alg) == ("public", True, "ES256")
    assert client.redirect_uris == ("http://127.0.0.1:8765/cb", "http://localhost/cb")
    assert client.post_logout_redirect_uris == ("https://native.example/bye",)
    assert (client.grant_types, client.scopes) == (("authorization_code",), ("openid", "email"))
    assert client.secret_hash is None


def test_a_machine_client_needs_no_redirect_uri(locky, locky_app):
    status, out, err = locky("clients", "create", "Backend", "--grant", "client_credentials")
    assert status == 0, err
    assert "client_secret: " in out


@pytest.mark.parametrize("args, field", [
    (("--redirect-uri", "http://app.example.com/cb"), "redirect_uris"),
    (("--redirect-uri", "https://app.example.com/cb#top"), "redirect_uris"),
    (("--redirect-uri", "/relative"), "redirect_uris"),
    (("--redirect-uri", "https://*.example.com/cb"), "redirect_uris"),
    ((), "redirect_uris"),  # authorization_code needs one
    (("--redirect-uri", WEB, "--public", "--grant", "client_credentials"), "grant_types"),
    (("--redirect-uri", WEB, "--post-logout-redirect-uri", "http://example.com/"), "post_logout_redirect_uris"),
])
def test_the_rules_of_the_api_hold(locky, locky_app, args, field):
    status, out, err = locky("clients", "create", "Bad", *args)
    assert status == 2 and not out
    assert err.startswith(f"locky: {field}: "), err
    assert locky_app.context.storage.oauth_clients.count() == 0


def test_a_grant_or_scope_it_does_not_know_is_a_usage_error(locky):
    with pytest.raises(SystemExit) as exit_:
        locky("clients", "create", "Bad", "--redirect-uri", WEB, "--grant", "password")
    assert exit_.value.code == 2


def test_rotate_secret_prints_a_new_one_and_the_old_one_stops(locky, locky_app):
    made = json.loads(locky("clients", "create", "Reports", "--redirect-uri", WEB, "--json")[1])
    status, out, err = locky("clients", "rotate-secret", made["client_id"], "--json")
    assert status == 0, err
    answer = json.loads(out)
    assert answer["client_id"] == made["client_id"] and answer["client_secret"] != made["client_secret"]
    stored = locky_app.context.storage.oauth_clients.get_by_client_id(made["client_id"])
    assert stored.secret_hash == hash_code(answer["client_secret"])
    (event,) = trail(locky_app, "oauth.client.secret_rotated")
    assert (event.actor_uuid, event.details["actor"]) == (None, "cli")

    status, out, _ = locky("clients", "rotate-secret", made["client_id"])
    assert status == 0 and out.startswith("client_secret: ")


def test_a_public_client_has_no_secret_to_rotate(locky):
    made = json.loads(locky("clients", "create", "SPA", "--redirect-uri", WEB, "--public", "--json")[1])
    status, _, err = locky("clients", "rotate-secret", made["client_id"])
    assert status == 2 and err.startswith("locky: type: ")


def test_delete_then_it_is_gone(locky, locky_app):
    made = json.loads(locky("clients", "create", "Reports", "--redirect-uri", WEB, "--json")[1])
    kept = json.loads(locky("clients", "create", "Wiki", "--redirect-uri", WEB, "--json")[1])
    status, out, err = locky("clients", "delete", made["client_id"])
    assert status == 0, err
    assert made["client_id"] in out
    assert locky_app.context.storage.oauth_clients.get_by_client_id(made["client_id"]) is None
    status, out, _ = locky("clients", "list")
    assert status == 0
    assert out.splitlines() == [f"{kept['client_id']}  confidential  authorization_code,refresh_token  Wiki"]
    (event,) = trail(locky_app, "oauth.client.deleted")
    assert (event.actor_uuid, event.details["actor"], event.details["sessions_ended"]) == (None, "cli", 0)

    status, out, err = locky("clients", "delete", made["client_id"])
    assert status == 1 and not out and "no live client" in err
    status, _, err = locky("clients", "delete", made["client_id"], "--json")
    assert status == 1


def test_an_empty_list(locky):
    assert locky("clients", "list") == (0, "", "")
    assert locky("clients", "list", "--json")[:2] == (0, "[]\n")


def test_a_missing_database_file_is_an_error_not_a_new_database(locky, tmp_path, monkeypatch):
    missing = tmp_path / "nowhere" / "locky.sqlite"
    monkeypatch.setenv("LOCKY_DATABASE_URL", f"sqlite:///{missing}")
    status, _, err = locky("clients", "list")
    assert status == 2 and "no database at" in err
    assert not missing.exists()
