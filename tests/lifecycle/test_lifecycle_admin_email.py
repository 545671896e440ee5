"""Admins by email only after verification (docs/http/authorization.md and docs/http/accounts.md): an address
listed in ``admin_emails`` (or in a ``g, EMAIL, admin`` policy line) makes its account
admin only once the account has verified that address. An email change never carries
admin status over (to a listed address: not admin until the new address is verified;
away from it: admin no more), and a new account on a listed address (after the old one
was deleted) must verify before it is admin. Admin status is read from the live state on
every request, so the same tokens gain and lose it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from locky.testing import ADMIN_EMAIL, PASSWORD

from authz_helpers import assert_fields, assert_forbidden, unique
from lifecycle_helpers import is_admin, mail_code, me, put_user, verified_account, verify

BOSS = "boss@example.com"
SHIPPED = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture
def boss_client(make_client):
    """A client whose app lists boss@example.com beside the kit's admin address."""
    return make_client(admin_emails=(ADMIN_EMAIL, BOSS))


@pytest.fixture
def admin(boss_client):
    return verified_account(boss_client, ADMIN_EMAIL)


def can_delete_someone(client, account) -> int:
    """The status of ``account`` deleting a fresh plain user (204 for admins, else 403)."""
    victim = client.register(f"{unique('victim')}@example.com")
    result = client.simulate_delete(f"/v1/private/users/{victim['id']}", headers=account.headers)
    assert result.status_code in (204, 403), result.text
    if result.status_code == 403:
        assert_forbidden(result)
    return result.status_code


def test_the_kits_unverified_admin_address_is_no_admin(boss_client):
    """The control: the testing kit's admin address is admin only once verified too."""
    plain = boss_client.account(ADMIN_EMAIL)
    other = boss_client.account("other@example.com")
    assert is_admin(boss_client, other, plain.uuid) is False
    boss_client.verify(ADMIN_EMAIL)
    assert is_admin(boss_client, other, plain.uuid) is True


def test_a_listed_address_is_admin_only_after_verifying(boss_client, admin):
    boss = boss_client.account(BOSS)
    assert me(boss_client, boss)["email_verified"] is False
    assert is_admin(boss_client, admin, boss.uuid) is False
    assert can_delete_someone(boss_client, boss) == 403
    assert_forbidden(boss_client.simulate_post("/v1/private/roles", json={"name": "bossy"}, headers=boss.headers))
    boss_client.verify(BOSS)
    # The same login is admin now.
    assert is_admin(boss_client, admin, boss.uuid) is True
    assert can_delete_someone(boss_client, boss) == 204
    assert boss_client.simulate_post("/v1/private/roles", json={"name": "bossy"}, headers=boss.headers).status_code == 201


def test_changing_to_a_listed_address_needs_verifying_it(boss_client, admin):
    carol = verified_account(boss_client, "carol@example.com")
    result = put_user(boss_client, carol, carol.id, {"email": BOSS, "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    assert result.json["email_verified"] is False
    assert is_admin(boss_client, admin, carol.uuid) is False
    assert can_delete_someone(boss_client, carol) == 403
    assert verify(boss_client, mail_code(boss_client, BOSS, "verify")).status_code == 204
    assert is_admin(boss_client, admin, carol.uuid) is True


def test_an_old_addresses_code_does_not_make_a_listed_address_admin(boss_client, admin):
    """The escalation: take a code at your own address, move to a listed address, use it."""
    mallory = boss_client.account("mallory@example.com")
    own_code = mail_code(boss_client, "mallory@example.com", "verify")
    result = put_user(boss_client, mallory, mallory.id, {"email": BOSS, "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    answer = verify(boss_client, own_code)
    assert me(boss_client, mallory)["email_verified"] is False
    assert is_admin(boss_client, admin, mallory.uuid) is False
    assert can_delete_someone(boss_client, mallory) == 403
    assert_fields(answer, "token")


def test_changing_away_from_a_listed_address_loses_admin(boss_client, admin):
    boss = verified_account(boss_client, BOSS)
    assert is_admin(boss_client, admin, boss.uuid) is True
    result = put_user(boss_client, boss, boss.id, {"email": "former-boss@example.com", "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    assert is_admin(boss_client, admin, boss.uuid) is False
    assert can_delete_someone(boss_client, boss) == 403
    # Verifying the new, unlisted address does not bring it back.
    assert verify(boss_client, mail_code(boss_client, "former-boss@example.com", "verify")).status_code == 204
    assert is_admin(boss_client, admin, boss.uuid) is False


def test_an_admin_moving_a_boss_away_also_ends_admin(boss_client, admin):
    boss = verified_account(boss_client, BOSS)
    assert put_user(boss_client, admin, boss.id, {"email": "elsewhere@example.com"}).status_code == 200
    assert is_admin(boss_client, admin, boss.uuid) is False


def test_a_new_account_on_a_listed_address_must_verify_again(boss_client, admin):
    first = verified_account(boss_client, BOSS)
    assert is_admin(boss_client, admin, first.uuid) is True
    assert boss_client.simulate_delete(f"/v1/private/users/{first.id}", headers=admin.headers).status_code == 204
    second = boss_client.account(BOSS, password="someone else entirely")
    assert second.uuid != first.uuid
    assert is_admin(boss_client, admin, second.uuid) is False
    assert can_delete_someone(boss_client, second) == 403
    # The first account's tokens are dead with it; the new one becomes admin by verifying.
    assert boss_client.simulate_get("/v1/internal/users/me", headers=first.headers).status_code == 401
    code = mail_code(boss_client, BOSS, "verify", count=2)
    assert verify(boss_client, code).status_code == 204
    assert is_admin(boss_client, admin, second.uuid) is True


def test_the_first_accounts_unused_code_does_not_verify_the_new_account(boss_client, admin):
    first = boss_client.account(BOSS)
    old_code = mail_code(boss_client, BOSS, "verify")
    assert boss_client.simulate_delete(f"/v1/private/users/{first.id}", headers=first.headers).status_code == 204
    second = boss_client.account(BOSS, password="someone else entirely")
    mail_code(boss_client, BOSS, "verify", count=2)
    answer = verify(boss_client, old_code)
    assert me(boss_client, second)["email_verified"] is False
    assert is_admin(boss_client, admin, second.uuid) is False
    assert_fields(answer, "token")


# -- the same through a policy line --------------------------------------------------------


@pytest.fixture
def policy_client(tmp_path, make_client):
    directory = tmp_path / "policy"
    directory.mkdir()
    for name in ("model.conf", "policy.csv"):
        shutil.copy(SHIPPED / name, directory / name)
    with (directory / "policy.csv").open("a") as policy:
        policy.write(f"\ng, {BOSS}, admin\n")
    return make_client(policy_dir=str(directory))


def test_a_policy_line_address_is_admin_only_after_verifying(policy_client):
    admin = verified_account(policy_client, ADMIN_EMAIL)
    boss = policy_client.account(BOSS)
    assert is_admin(policy_client, admin, boss.uuid) is False
    assert can_delete_someone(policy_client, boss) == 403
    policy_client.verify(BOSS)
    assert is_admin(policy_client, admin, boss.uuid) is True
    assert can_delete_someone(policy_client, boss) == 204


def test_a_policy_line_address_changed_to_needs_verifying_and_changed_away_loses_it(policy_client):
    admin = verified_account(policy_client, ADMIN_EMAIL)
    carol = verified_account(policy_client, "carol@example.com")
    assert put_user(policy_client, carol, carol.id, {"email": BOSS, "current_password": PASSWORD}).status_code == 200
    assert is_admin(policy_client, admin, carol.uuid) is False
    assert verify(policy_client, mail_code(policy_client, BOSS, "verify")).status_code == 204
    assert is_admin(policy_client, admin, carol.uuid) is True
    assert put_user(policy_client, carol, carol.id, {"email": "carol@example.com",
                                                     "current_password": PASSWORD}).status_code == 200
    assert is_admin(policy_client, admin, carol.uuid) is False
