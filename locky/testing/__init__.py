"""Test helpers for Locky and its plugin authors; a pytest plugin (entry point ``pytest11``).

Fixtures:

- ``locky_database_url``: the database a test app uses. SQLite in ``tmp_path`` by
  default; ``LOCKY_TEST_DATABASE_URL`` points the whole API suite at another engine.
- ``locky_settings``: fast, test-friendly :class:`~locky.Settings` (bcrypt cost 4,
  a fixed secret, ``admin@example.com`` as admin). Override it to change one.
- ``locky_plugins``: extra plugin objects for the app (empty by default).
- ``locky_app``: the app, closed after the test.
- ``locky_client``: a :class:`LockyClient` over Falcon's test client.
- ``locky_user`` / ``locky_admin``: a registered, logged-in plain user and admin.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
from falcon import testing

from locky.app import LockyApp, create_app
from locky.settings import Settings

TEST_SECRET = "locky-test-secret-0123456789-abcdefghijklmnop"
ADMIN_EMAIL = "admin@example.com"
PASSWORD = "correct horse battery"


@dataclass
class Account:
    """A registered, logged-in user as a test sees it."""

    id: int
    uuid: str
    email: str
    password: str
    access_token: str
    refresh_token: str
    body: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"}


class LockyClient(testing.TestClient):
    """Falcon's test client with shortcuts for Locky's account flows."""

    def register(self, email: str, password: str = PASSWORD, name: str | None = None) -> dict[str, Any]:
        result = self.simulate_post(
            "/v1/public/users/register",
            json={"name": name or email.split("@")[0], "email": email, "password": password},
        )
        assert result.status_code == 201, result.text
        return result.json

    def login(self, email: str, password: str = PASSWORD) -> dict[str, Any]:
        result = self.simulate_post("/v1/public/users/login", json={"email": email, "password": password})
        assert result.status_code == 200, result.text
        return result.json

    def account(self, email: str, password: str = PASSWORD, name: str | None = None) -> Account:
        """Register ``email`` and log it in."""
        user = self.register(email, password, name)
        tokens = self.login(email, password)
        return Account(
            id=user["id"], uuid=user["uuid"], email=user["email"], password=password,
            access_token=tokens["access_token"], refresh_token=tokens["refresh_token"], body=user,
        )


def make_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings for a test app: quick hashing, a fixed secret, one admin email."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "jwt_secret": TEST_SECRET,
        "bcrypt_rounds": 4,
        "admin_emails": (ADMIN_EMAIL,),
    }
    values.update(overrides)
    return Settings.from_mapping(values)


@pytest.fixture
def locky_database_url(tmp_path) -> str:
    return os.environ.get("LOCKY_TEST_DATABASE_URL") or f"sqlite:///{tmp_path / 'locky.sqlite'}"


@pytest.fixture
def locky_settings(locky_database_url) -> Settings:
    return make_settings(locky_database_url)


@pytest.fixture
def locky_plugins() -> list[Any]:
    return []


@pytest.fixture
def locky_app(locky_settings, locky_plugins) -> Iterator[LockyApp]:
    app = create_app(locky_settings, plugins=locky_plugins)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def locky_client(locky_app) -> LockyClient:
    return LockyClient(locky_app)


@pytest.fixture
def locky_user(locky_client) -> Account:
    return locky_client.account("user@example.com")


@pytest.fixture
def locky_admin(locky_client) -> Account:
    return locky_client.account(ADMIN_EMAIL)
