"""The second factor against a stolen access token (issue 31, finding 7).

A thief holding only an access token could enrol an authenticator of their own (and
nothing undid it: a reset kept TOTP, no admin could remove it), and could guess at the
code that removes TOTP without limit or trace (1,446 wrong codes, no 429). Now:

- setting TOTP up, confirming it and removing it need a recent authentication of the
  login (a password or code checked within five minutes: the login itself, or
  ``POST /v1/private/users/me/reauth``), else 403 "Recent authentication required"
  carrying RFC 9470's ``insufficient_user_authentication`` challenge;
- the removal code is counted like a login's password: wrong ones are failed logins in
  the trail, then 429;
- an admin removes a user's second factors (``DELETE /v1/private/users/{id}/mfa``),
  audited as ``mfa.disabled`` with the admin as actor.

A login is made old by moving its session's ``created_at`` back six minutes in SQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from locky.testing import ADMIN_EMAIL, PASSWORD
from locky.testing.databases import run_sql

from lifecycle_helpers import ME, TOTP, TOTP_CONFIRM, Authenticator, login

REAUTH = "/v1/private/users/me/reauth"


def age(client, account, minutes: int = 6) -> None:
    """Make every login of ``account`` ``minutes`` old."""
    then = (datetime.now(timezone.utc) - timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f")
    run_sql(client.app.context.settings.database_url,
            "UPDATE locky_sessions SET created_at = %s WHERE user_uuid = %s", then, account.uuid)


def assert_stale(result) -> None:
    assert result.status_code == 403, result.text
    assert result.json["title"] == "Recent authentication required"
    challenge = result.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="insufficient_user_authentication"' in challenge, challenge
    assert "max_age=300" in challenge
    assert set(result.json) == {"title", "description"} and "/v1/private/users/me/reauth" in result.json["description"]


def enrol(client, account) -> tuple[Authenticator, list[str]]:
    begun = client.simulate_post(TOTP, headers=account.headers)
    assert begun.status_code == 200, begun.text
    authenticator = Authenticator(begun.json["secret"])
    confirmed = client.simulate_post(TOTP_CONFIRM, json={"code": authenticator.code()}, headers=account.headers)
    assert confirmed.status_code == 200, confirmed.text
    return authenticator, confirmed.json["recovery_codes"]


def test_an_old_login_cannot_enrol_an_authenticator(locky_client):
    client = locky_client
    account = client.account("ada@example.com")
    age(client, account)
    assert_stale(client.simulate_post(TOTP, headers=account.headers))
    # The thief's token still reads: only the second factor's changes ask for more.
    assert client.simulate_get(ME, headers=account.headers).status_code == 200
    # The password proves the owner: then enrolment works, for five minutes.
    assert client.simulate_post(REAUTH, json={"password": PASSWORD}, headers=account.headers).status_code == 204
    enrol(client, account)


def test_an_old_login_cannot_confirm_or_remove_totp(locky_client):
    client = locky_client
    account = client.account("ada@example.com")
    authenticator, recovery = enrol(client, account)
    age(client, account)
    assert_stale(client.simulate_delete(TOTP, json={"code": recovery[0]}, headers=account.headers))
    assert client.simulate_get(ME, headers=account.headers).json["mfa_enabled"] is True
    assert client.simulate_post(REAUTH, json={"password": PASSWORD}, headers=account.headers).status_code == 204
    assert client.simulate_delete(TOTP, json={"code": recovery[0]}, headers=account.headers).status_code == 204


def test_reauth_takes_only_the_right_password_and_counts_it_like_a_login(make_client):
    client = make_client(login_max_failures=3)
    account = client.account("ada@example.com")
    for _ in range(3):
        wrong = client.simulate_post(REAUTH, json={"password": "not the password"}, headers=account.headers)
        assert wrong.status_code == 400 and wrong.json == {"password": "Does not match your current password."}
    locked = client.simulate_post(REAUTH, json={"password": PASSWORD}, headers=account.headers)
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) >= 1
    assert login(client, "ada@example.com").status_code == 429  # one count: the login's too
    assert client.simulate_post(REAUTH, json={}, headers=account.headers).json == {"password": "Missing data for required field."}
    assert client.simulate_post(REAUTH, json={"password": PASSWORD}).status_code == 401


def test_wrong_removal_codes_are_failed_logins_and_end_in_429(make_client):
    client = make_client(login_max_failures=4)
    account = client.account("ada@example.com")
    authenticator, recovery = enrol(client, account)
    for _ in range(4):
        wrong = client.simulate_delete(TOTP, json={"code": authenticator.wrong()}, headers=account.headers)
        assert wrong.status_code == 400 and wrong.json == {"code": "Invalid code."}
    refused = client.simulate_delete(TOTP, json={"code": recovery[0]}, headers=account.headers)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert client.simulate_get(ME, headers=account.headers).json["mfa_enabled"] is True
    trail = client.app.context.storage.audit.list(event="login.failed", target_uuid=account.uuid, limit=50).items
    assert [e.details["reason"] for e in trail] == ["wrong code removing TOTP"] * 4


def test_an_admin_removes_a_users_second_factors(locky_client):
    client = locky_client
    admin = client.account(ADMIN_EMAIL, verified=True)
    account = client.account("ada@example.com")
    enrol(client, account)
    mallory = client.account("mallory@example.com")
    path = f"/v1/private/users/{account.id}/mfa"
    assert client.simulate_delete(path, headers=mallory.headers).status_code == 403
    assert client.simulate_delete(path, headers=account.headers).status_code == 403  # not even one's own
    assert client.simulate_delete(path).status_code == 401
    assert client.simulate_delete(path, headers=admin.headers).status_code == 204
    assert client.simulate_get(ME, headers=account.headers).json["mfa_enabled"] is False
    first = login(client, "ada@example.com")
    assert first.status_code == 200 and "access_token" in first.json  # no second step any more
    again = client.simulate_delete(path, headers=admin.headers)
    assert again.status_code == 409 and again.json["description"] == "The user has no second factor."
    assert client.simulate_delete("/v1/private/users/999999/mfa", headers=admin.headers).status_code == 404
    events = client.app.context.storage.audit.list(event="mfa.disabled", target_uuid=account.uuid).items
    assert [(e.actor_uuid, e.details) for e in events] == [(admin.uuid, {"method": "totp", "by": "admin"})]
