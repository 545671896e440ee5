"""LOCKY_KEY_ROTATION_DAYS (docs/http/tokens.md): a key older than the setting is replaced by the
next process that signs, once, and hosts agree on the new one."""

from __future__ import annotations

import sqlite3
import threading

import jwt
import pytest

from locky.testing import LockyClient
from locky_jwt import keys as signing_keys


def make_key_old(database_path, days: int) -> None:
    with sqlite3.connect(database_path) as db:
        db.execute("UPDATE locky_signing_keys SET created_at = datetime('now', ?) WHERE active_alg IS NOT NULL",
                   (f"-{days} days",))


def kid_of(client: LockyClient, email: str) -> str:
    return jwt.get_unverified_header(client.login(email)["access_token"])["kid"]


@pytest.fixture
def sqlite_path(locky_database_url):
    if not locky_database_url.startswith("sqlite:///"):
        pytest.skip("ages the key through the SQLite file")
    return locky_database_url.removeprefix("sqlite:///")


def test_an_old_key_is_replaced_by_the_next_login(locky_app_factory, sqlite_path, monkeypatch):
    monkeypatch.setattr(signing_keys, "ACTIVE_RECHECK", 0.0)  # read the active key on every signature
    app = locky_app_factory(key_rotation_days=30)
    client = LockyClient(app)
    client.register("ada@example.com")
    first = kid_of(client, "ada@example.com")
    assert kid_of(client, "ada@example.com") == first  # young: kept
    make_key_old(sqlite_path, 31)
    second = kid_of(client, "ada@example.com")
    assert second != first
    listed = {key.kid: key for key in app.context.storage.keys.all()}
    assert listed[first].retired_at is not None and listed[second].retired_at is None
    published = client.simulate_get("/.well-known/jwks.json").json["keys"]
    assert {k["kid"] for k in published if k["alg"] == "ES256"} == {first, second}


def test_hosts_replacing_an_old_key_together_agree_on_one(locky_app_factory, sqlite_path, monkeypatch):
    monkeypatch.setattr(signing_keys, "ACTIVE_RECHECK", 0.0)
    apps = [locky_app_factory(key_rotation_days=30) for _ in range(4)]
    LockyClient(apps[0]).register("ada@example.com")
    make_key_old(sqlite_path, 31)
    kids, barrier = [None] * len(apps), threading.Barrier(len(apps))

    def sign(i):
        barrier.wait()
        kids[i] = kid_of(LockyClient(apps[i]), "ada@example.com")

    threads = [threading.Thread(target=sign, args=(i,)) for i in range(len(apps))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    active = [key for key in apps[0].context.storage.keys.all() if key.retired_at is None]
    assert len(active) == 1 and set(kids) == {active[0].kid}
    assert len(apps[0].context.storage.keys.all()) == 2  # the old key and one new one, not four


def test_zero_days_never_rotates(locky_app_factory, sqlite_path, monkeypatch):
    monkeypatch.setattr(signing_keys, "ACTIVE_RECHECK", 0.0)
    client = LockyClient(locky_app_factory(key_rotation_days=0))
    client.register("ada@example.com")
    first = kid_of(client, "ada@example.com")
    make_key_old(sqlite_path, 3650)
    assert kid_of(client, "ada@example.com") == first
