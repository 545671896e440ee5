"""The password rules (docs/http/records.md and docs/http/accounts.md), the same at registration, at an
own or an admin's change and at a reset: 8-72 bytes of UTF-8 (longer is refused, never
truncated), not a common password of the shipped blocklist (any case), and not containing
the email's local part or the name when those have 4 or more characters (any case).
Each refusal is a 400 ``{"password": "..."}`` that does not echo the password."""

from __future__ import annotations

import pytest

from locky.testing import PASSWORD

from authz_helpers import assert_fields
from lifecycle_helpers import REGISTER, login, put_user, reset, reset_code

COMMON = ["password1", "12345678", "iloveyou1", "qwertyuiop", "PASSWORD1", "QwertyUIOP", "ILoveYou1"]


def register(client, password: str, email: str = "ada@example.com", name: str = "Ada"):
    return client.simulate_post(REGISTER, json={"name": name, "email": email, "password": password})


def refused(result, password: str) -> None:
    assert_fields(result, "password")
    assert password not in result.text


# -- registration ----------------------------------------------------------------------


@pytest.mark.parametrize("password", ["", "1234567", "short", "seven77"], ids=["empty", "digits7", "short5", "mixed7"])
def test_under_8_bytes_is_refused(locky_client, password):
    assert_fields(register(locky_client, password), "password")


@pytest.mark.parametrize("password", ["€" * 25, "x" * 73, "€" * 24 + "x"], ids=["euro75", "ascii73", "bytes73"])
def test_over_72_bytes_is_refused_not_truncated(locky_client, password):
    refused(register(locky_client, password), password)
    # Nothing was registered, and its first 72 bytes are no password of anyone.
    assert login(locky_client, "ada@example.com", password.encode()[:72].decode("utf-8", "ignore")).status_code == 401


@pytest.mark.parametrize("password", ["€" * 24, "q7#Lm2!x"], ids=["euro72", "ascii8"])
def test_8_and_72_bytes_are_fine(locky_client, password):
    result = register(locky_client, password)
    assert result.status_code == 201, result.text
    assert login(locky_client, "ada@example.com", password).status_code == 200


@pytest.mark.parametrize("password", COMMON)
def test_a_common_password_is_refused_in_any_case(locky_client, password):
    refused(register(locky_client, password), password)


@pytest.mark.parametrize("email, name, password", [
    ("zebrafish@example.com", "Ada", "my-zebrafish-pass"),
    ("zebrafish@example.com", "Ada", "MY-ZEBRAFISH-PASS"),
    ("zebrafish@example.com", "Ada", "zebrafish"),
    ("Zebrafish@Example.com", "Ada", "xxzebrafishxx"),
    ("ada@example.com", "Margarethe", "xMARGARETHEx99"),
    ("ada@example.com", "Margarethe", "margarethe"),
    ("ada@example.com", "Lady Margarethe", "hello lady margarethe"),
], ids=["local", "local-upper", "local-equal", "local-email-upper", "name", "name-equal", "name-with-space"])
def test_a_password_with_the_local_part_or_the_name_is_refused(locky_client, email, name, password):
    refused(register(locky_client, password, email=email, name=name), password)


def test_a_3_character_local_part_and_name_are_not_checked(locky_client):
    result = register(locky_client, "bob-likes-long-walks", email="bob@example.com", name="Bob")
    assert result.status_code == 201, result.text
    assert login(locky_client, "bob@example.com", "bob-likes-long-walks").status_code == 200


def test_a_good_password_registers(locky_client):
    result = register(locky_client, PASSWORD, email="zebrafish@example.com", name="Margarethe")
    assert result.status_code == 201, result.text


def test_other_fields_are_still_reported_beside_the_password(locky_client):
    result = locky_client.simulate_post(REGISTER, json={"name": "Ada", "email": "nope", "password": "password1"})
    assert result.status_code == 400
    assert "email" in result.json, result.json


# -- changes and resets -----------------------------------------------------------------------


@pytest.mark.parametrize("password", ["password1", "short", "€" * 25, "xxZEBRAFISHxx", "Margarethe's"])
def test_an_own_change_follows_the_rules(locky_client, password):
    account = locky_client.account("zebrafish@example.com", name="Margarethe")
    result = put_user(locky_client, account, account.id, {"password": password, "current_password": PASSWORD})
    refused(result, password)
    assert login(locky_client, "zebrafish@example.com", PASSWORD).status_code == 200


@pytest.mark.parametrize("password", ["12345678", "zebrafish-zebrafish"])
def test_an_admins_change_follows_the_rules(locky_client, locky_admin, password):
    account = locky_client.account("zebrafish@example.com", name="Margarethe")
    refused(put_user(locky_client, locky_admin, account.id, {"password": password}), password)
    assert login(locky_client, "zebrafish@example.com", PASSWORD).status_code == 200


def test_a_change_checks_the_new_name_and_email_given_with_it(locky_client):
    account = locky_client.account("ada@example.com")
    result = put_user(locky_client, account, account.id, {"name": "Wilhelmina", "password": "i-am-wilhelmina",
                                                          "current_password": PASSWORD})
    refused(result, "i-am-wilhelmina")


@pytest.mark.parametrize("password", ["iloveyou1", "zebrafish rules ok"])
def test_a_reset_follows_the_rules(locky_client, password):
    locky_client.register("zebrafish@example.com", name="Margarethe")
    code = reset_code(locky_client, "zebrafish@example.com")
    refused(reset(locky_client, code, password), password)


def test_a_good_change_is_taken(locky_client):
    account = locky_client.account("zebrafish@example.com", name="Margarethe")
    result = put_user(locky_client, account, account.id, {"password": "a brand new passphrase",
                                                          "current_password": PASSWORD})
    assert result.status_code == 200, result.text
    assert login(locky_client, "zebrafish@example.com", "a brand new passphrase").status_code == 200
