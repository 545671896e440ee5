"""Test helpers for Locky and its plugin authors; a pytest plugin (entry point ``pytest11``).

Fixtures:

- ``locky_database_url``: the database a test app uses, empty at the start of each
  test. SQLite in ``tmp_path`` by default. ``LOCKY_TEST_DATABASE_URL`` set to a
  ``postgres://`` or ``mysql://`` URL runs the whole suite on that server instead: the
  run gets its own fresh database beside the one the URL names (never that one),
  emptied before every test and dropped at the end (:mod:`locky.testing.databases`).
- ``locky_settings``: fast, test-friendly :class:`~locky.Settings` (bcrypt cost 4,
  a fixed secret, ``admin@example.com`` as admin). Override it to change one.
- ``locky_plugins``: extra plugin objects for the app (empty by default).
- ``locky_app``: the app, closed after the test.
- ``locky_client``: a :class:`LockyClient` over Falcon's test client.
- ``locky_user`` / ``locky_admin``: a registered, logged-in plain user and admin (the
  admin's address verified: an admin email makes an admin only then).
- Mail: the ``file`` mailer writes to ``tmp_path / "mail"``; ``locky_client.mailbox`` is
  a :class:`MailBox` over it and ``locky_client.verify(email)`` proves an address with
  the code sent to it.
- ``locky_app_factory``: ``make(plugin_objects=None, **settings)`` builds more apps in one test
  from the test's ``locky_settings`` with ``settings`` on top (on the test's database
  unless ``database_url`` is given), closed after it: two apps on one database stand
  for two hosts, or for a restart with other settings.

Contract suites, one per provider slot, for plugin authors to subclass in their tests:
:class:`locky.testing.storage_contract.StorageContract`,
:class:`locky.testing.authorizer_contract.AuthorizerContract`,
:class:`locky.testing.token_backend_contract.TokenBackendContract` and
:class:`locky.testing.password_hasher_contract.PasswordHasherContract`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
from falcon import testing

from locky.app import LockyApp, create_app
from locky.settings import Settings
from locky.testing.mail import MailBox

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

    @property
    def mailbox(self) -> MailBox:
        """The messages the app's ``file`` mailer wrote."""
        return MailBox(self.app.context.settings.mail_path)

    def verify(self, email: str, timeout: float = 10.0) -> None:
        """Prove ``email`` with the code of the newest verification message sent to it."""
        message = self.mailbox.wait(email, "verify", timeout=timeout)
        result = self.simulate_post("/v1/public/users/verify", json={"token": MailBox.token(message)})
        assert result.status_code == 204, result.text

    def account(self, email: str, password: str = PASSWORD, name: str | None = None,
                verified: bool = False) -> Account:
        """Register ``email`` (and prove it, when ``verified``), then log it in."""
        user = self.register(email, password, name)
        if verified:
            self.verify(email)
            user = {**user, "email_verified": True}
        tokens = self.login(email, password)
        return Account(
            id=user["id"], uuid=user["uuid"], email=user["email"], password=password,
            access_token=tokens["access_token"], refresh_token=tokens["refresh_token"], body=user,
        )


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "unmigrated: a storage contract test that gets the storage before `migrate()`"
    )


def make_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings for a test app: quick hashing, a fixed secret, one admin email, and no
    hourly limit on registrations and recovery requests per client address worth the
    name (every request of a test comes from one address; a test of those limits sets
    its own)."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "jwt_secret": TEST_SECRET,
        "bcrypt_rounds": 4,
        "admin_emails": (ADMIN_EMAIL,),
        "signup_max_per_ip": 1_000_000,
        "recovery_max_per_ip": 1_000_000,
    }
    values.update(overrides)
    settings = Settings.from_mapping(values)
    if not settings.mail_dir and settings.sqlite_path is None:
        # Mail of an app on a server database (or SQLite in memory) goes to a folder of
        # its own, never to ./mail of whoever runs the tests.
        mail_dir = tempfile.mkdtemp(prefix="locky-test-mail-")
        atexit.register(shutil.rmtree, mail_dir, True)  # gone with the test run, not left in /tmp
        settings = settings.replace(mail_dir=mail_dir)
    return settings


@pytest.fixture(scope="session")
def locky_scratch_database() -> Iterator[Any]:
    """The run's own database on the server ``LOCKY_TEST_DATABASE_URL`` names, or ``None``."""
    url = os.environ.get("LOCKY_TEST_DATABASE_URL", "")
    if not url or url.startswith("sqlite:"):
        yield None
        return
    from locky.testing.databases import scratch_database, unreachable

    reason = unreachable(url)
    if reason:
        pytest.fail(f"LOCKY_TEST_DATABASE_URL: {reason}", pytrace=False)
    with scratch_database(url) as scratch:
        yield scratch


@pytest.fixture
def locky_database_url(tmp_path, locky_scratch_database) -> str:
    if locky_scratch_database is None:
        return f"sqlite:///{tmp_path / 'locky.sqlite'}"
    locky_scratch_database.wipe()
    return locky_scratch_database.url


@pytest.fixture
def locky_mail_dir(tmp_path) -> str:
    """Where the test apps' ``file`` mailer writes."""
    return str(tmp_path / "mail")


@pytest.fixture
def locky_settings(locky_database_url, locky_mail_dir) -> Settings:
    return make_settings(locky_database_url, mail_dir=locky_mail_dir)


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
    return locky_client.account(ADMIN_EMAIL, verified=True)


@pytest.fixture
def locky_app_factory(locky_settings, locky_plugins) -> Iterator[Any]:
    """``make(plugin_objects=None, **settings) -> LockyApp``: more apps for one test.

    Each app's settings are the test's ``locky_settings`` (so an override of that
    fixture holds for these apps too) with ``settings`` applied on top: the same
    database unless ``database_url`` is given, ``plugins=("module",)`` loads plugin
    modules by name, as ``LOCKY_PLUGINS`` does. ``plugin_objects`` defaults to
    ``locky_plugins``. Every app made is closed after the test, newest first.
    """
    apps: list[LockyApp] = []

    def make(plugin_objects: Any = None, **overrides: Any) -> LockyApp:
        settings = locky_settings.replace(**overrides) if overrides else locky_settings
        app = create_app(settings, plugins=locky_plugins if plugin_objects is None else plugin_objects)
        apps.append(app)
        return app

    try:
        yield make
    finally:
        for app in reversed(apps):
            app.close()
