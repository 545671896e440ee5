"""Fixtures shared by the command-line client tests: a real server on a socket, a
home directory of the test's own, and the clients driven in-process.

Test modules import them by name (pytest finds fixtures imported into a module).
"""

from __future__ import annotations

import pytest

from locky.testing import ADMIN_EMAIL, MailBox, make_settings

from clients_helpers import Cli, LiveServer


@pytest.fixture
def locky_settings(locky_database_url, locky_mail_dir):
    # No request log lines: stderr belongs to the client under test.
    return make_settings(locky_database_url, log_requests=False, mail_dir=locky_mail_dir)


@pytest.fixture
def server(locky_app):
    live = LiveServer(locky_app)
    yield live
    live.stop()


@pytest.fixture
def mailbox(locky_app):
    return MailBox(locky_app.context.settings.mail_path)


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    for proxy in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    return home


@pytest.fixture
def cli(server, home, capsys, monkeypatch):
    monkeypatch.setenv("LOCKY_URL", server.url)
    return Cli(capsys, monkeypatch)


@pytest.fixture
def alice(cli):
    """A plain user, logged in with locky-app."""
    user = cli.register("Alice", "alice@example.com")
    cli.login("app", "alice@example.com")
    return user


def token_file(home, audience):
    return home / "xdg" / "locky" / f"{audience}.json"


@pytest.fixture
def root(cli, mailbox):
    """The admin, its address verified (an admin email makes an admin only then), logged in with locky-admin."""
    user = cli.register("Root", ADMIN_EMAIL)
    cli.ok("anonymous", "verify", "--", MailBox.token(mailbox.wait(ADMIN_EMAIL, purpose="verify")))
    cli.login("admin", ADMIN_EMAIL)
    return user
