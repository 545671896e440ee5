"""Registration over HTTP, ``POST /v1/public/users/register`` (docs/http/records.md
and 3): 201 with the User and its ``Location``, never a password or hash; every
field required and validated (name 1-255 characters, email trimmed, lowercased, at
most 254 characters and unique among live users regardless of case, password 8-72
bytes of UTF-8 counted in bytes and never truncated); unknown fields rejected and
read-only ones ignored; every failure a flat 400 map of field to one string."""

from __future__ import annotations

import pytest

from authz_helpers import TIMESTAMP, UUID4, assert_fields

REGISTER = "/v1/public/users/register"
LOGIN = "/v1/public/users/login"
USER_KEYS = {"id", "uuid", "created_at", "updated_at", "deleted_at", "name", "email",
             "email_verified", "disabled", "mfa_enabled"}


def register(client, **fields):
    body = {"name": "Ada", "email": "ada@example.com", "password": "password-1"}
    body.update(fields)
    return client.simulate_post(REGISTER, json={k: v for k, v in body.items() if v is not ...})


def login(client, email: str, password: str):
    return client.simulate_post(LOGIN, json={"email": email, "password": password})


# -- success -------------------------------------------------------------------


def test_register_returns_201_the_user_and_its_location(locky_client):
    result = register(locky_client, name="Ada Lovelace", email="ada@example.com")
    assert result.status_code == 201, result.text
    user = result.json
    assert set(user) == USER_KEYS
    assert user["name"] == "Ada Lovelace"
    assert user["email"] == "ada@example.com"
    assert isinstance(user["id"], int) and user["id"] > 0
    assert UUID4.match(user["uuid"])
    assert TIMESTAMP.match(user["created_at"]) and TIMESTAMP.match(user["updated_at"])
    assert user["deleted_at"] is None
    assert result.headers["location"].endswith(f"/v1/internal/users/{user['id']}")

    token = login(locky_client, "ada@example.com", "password-1").json["access_token"]
    fetched = locky_client.simulate_get(
        "/v1/internal/users/" + str(user["id"]), headers={"Authorization": f"Bearer {token}"}
    )
    assert fetched.status_code == 200
    assert fetched.json == user


def test_register_never_returns_the_password_or_a_hash(locky_client):
    result = register(locky_client, password="s3cret-Passw0rd")
    assert result.status_code == 201
    assert "s3cret-Passw0rd" not in result.text
    assert "$2" not in result.text  # no bcrypt hash either
    assert not {"password", "password_hash", "hash"} & set(result.json)


def test_ids_and_uuids_are_distinct_per_user(locky_client):
    first = register(locky_client, email="one@example.com").json
    second = register(locky_client, email="two@example.com").json
    assert second["id"] > first["id"]
    assert second["uuid"] != first["uuid"]


def test_register_is_public_and_ignores_any_authorization_header(locky_client):
    result = locky_client.simulate_post(
        REGISTER,
        json={"name": "Ada", "email": "ada@example.com", "password": "password-1"},
        headers={"Authorization": "Bearer garbage"},
    )
    assert result.status_code == 201


def test_email_is_stored_trimmed_and_lowercased(locky_client):
    result = register(locky_client, email="  Mixed.Case+Tag@Example.COM \t")
    assert result.status_code == 201, result.text
    assert result.json["email"] == "mixed.case+tag@example.com"
    assert login(locky_client, "mixed.case+tag@example.com", "password-1").status_code == 200
    assert login(locky_client, " MIXED.case+tag@EXAMPLE.com ", "password-1").status_code == 200


def test_email_is_unique_regardless_of_case_and_spaces(locky_client):
    assert register(locky_client, email="taken@example.com").status_code == 201
    for variant in ("taken@example.com", "TAKEN@Example.com", "  taken@example.com  "):
        assert_fields(register(locky_client, email=variant), email="Already registered.")


def test_read_only_fields_are_ignored(locky_client):
    result = register(
        locky_client,
        id=999,
        uuid="00000000-0000-4000-8000-000000000000",
        created_at="2000-01-01T00:00:00Z",
        updated_at="2000-01-01T00:00:00Z",
        deleted_at="2000-01-01T00:00:00Z",
        builtin=True,
    )
    assert result.status_code == 201, result.text
    user = result.json
    assert set(user) == USER_KEYS
    assert user["id"] != 999
    assert user["uuid"] != "00000000-0000-4000-8000-000000000000"
    assert not user["created_at"].startswith("2000")
    assert user["deleted_at"] is None


@pytest.mark.parametrize("field", ["role", "admin", "password_hash", "is_admin", "Name", "groups"])
def test_unknown_fields_are_400(locky_client, field):
    assert_fields(register(locky_client, **{field: "x"}), field)


# -- required fields -------------------------------------------------------------


@pytest.mark.parametrize("missing", ["name", "email", "password"])
def test_each_field_is_required(locky_client, missing):
    assert_fields(register(locky_client, **{missing: ...}), missing)


def test_an_empty_object_names_all_three_fields(locky_client):
    assert_fields(locky_client.simulate_post(REGISTER, json={}), "name", "email", "password")


@pytest.mark.parametrize("field", ["name", "email", "password"])
@pytest.mark.parametrize("value", [None, 12345678, True, ["x" * 10], {"x": "y" * 10}])
def test_fields_must_be_strings(locky_client, field, value):
    assert_fields(register(locky_client, **{field: value}), field)


# -- name ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["A", "n" * 255, "\u00e9" * 255, "Zo\u00eb O'Brien-\u5c71\u7530"])
def test_names_of_1_to_255_characters_are_accepted(locky_client, name):
    result = register(locky_client, name=name)
    assert result.status_code == 201, result.text
    assert result.json["name"] == name


@pytest.mark.parametrize("name", ["", "n" * 256, "\u00e9" * 256])
def test_names_outside_1_to_255_characters_are_400(locky_client, name):
    assert_fields(register(locky_client, name=name), "name")


@pytest.mark.parametrize("name", [" ", "   ", "\u3000"])
def test_a_name_of_only_spaces_is_400(locky_client, name):
    assert assert_fields(register(locky_client, name=name), "name") == {"name": "Must not be blank."}


# -- email -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "email",
    ["plainaddress", "@example.com", "user@", "user@@example.com", "user name@example.com",
     "user@example", "", "   ", "user@exa mple.com", "user@.example.com"],
)
def test_invalid_emails_are_400(locky_client, email):
    assert_fields(register(locky_client, email=email), email="Not a valid email address.")


def test_emails_of_254_characters_are_accepted_and_255_are_not(locky_client):
    domain = "b" * 63 + "." + "c" * 63 + "." + "d" * 57 + ".com"
    ok = "a" * 64 + "@" + domain
    assert len(ok) == 254
    result = register(locky_client, email=ok.upper())
    assert result.status_code == 201, result.text
    assert result.json["email"] == ok
    too_long = "a" * 65 + "@" + domain
    assert_fields(register(locky_client, email=too_long), email="Not a valid email address.")


# -- password --------------------------------------------------------------------


@pytest.mark.parametrize(
    "password",
    [
        "zq7#wv2x",  # not "p" * 8: a common password (docs/http/accounts.md)
        "p" * 72,
        "\u00e9" * 4,  # 4 characters, 8 bytes
        "\u00e9" * 36,  # 72 bytes
        "\u20ac" * 24,  # 72 bytes, 3 per character
        "\U0001f600" * 18,  # 72 bytes, 4 per character
        "        ",  # spaces are characters like any other
    ],
)
def test_passwords_of_8_to_72_utf8_bytes_register_and_log_in(locky_client, password):
    result = register(locky_client, password=password)
    assert result.status_code == 201, result.text
    assert login(locky_client, "ada@example.com", password).status_code == 200


@pytest.mark.parametrize(
    "password",
    [
        "",
        "p" * 7,
        "\u00e9" * 3 + "a",  # 7 bytes
        "p" * 73,
        "p" * 1000,
        "\u00e9" * 36 + "a",  # 37 characters but 73 bytes
        "\u20ac" * 25,  # 25 characters, 75 bytes
        "\U0001f600" * 18 + "x",  # 19 characters, 73 bytes
    ],
)
def test_passwords_outside_8_to_72_bytes_are_rejected_not_truncated(locky_client, password):
    assert_fields(register(locky_client, password=password), "password")
    # Nothing was stored, under this password or a truncated one.
    prefix = password.encode()[:72].decode(errors="ignore")
    for attempt in {password or "x", prefix or "x"}:
        assert login(locky_client, "ada@example.com", attempt).status_code == 401


def test_a_failed_registration_leaves_the_email_free(locky_client):
    assert_fields(register(locky_client, email="later@example.com", password="short"), "password")
    assert register(locky_client, email="later@example.com").status_code == 201


def test_several_bad_fields_are_reported_together(locky_client):
    body = assert_fields(register(locky_client, name="", email="nope", password="short", extra=1),
                         "name", "email", "password", "extra")
    assert body["email"] == "Not a valid email address."
