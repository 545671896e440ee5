"""``locky_argon2``: Argon2id hashing chosen by name, reading the bcrypt hashes made before
it and replacing each at its user's next login."""

from __future__ import annotations

import bcrypt
import pytest

from locky import SettingsError
from locky.testing import PASSWORD, LockyClient

pytestmark = pytest.mark.extras
locky_argon2 = pytest.importorskip("locky_argon2", reason="pip install 'locky[argon2]'")
Argon2Hasher = locky_argon2.Argon2Hasher

FAST = {"time_cost": 1, "memory_cost": 1024, "parallelism": 1}  # tests only
ARGON2 = {"plugins": ("locky_argon2",), "password_hasher": "argon2", "extra": {"argon2": FAST}}


def test_hashes_are_argon2id_and_verify():
    hasher = Argon2Hasher(**FAST)
    hashed = hasher.hash(PASSWORD)
    assert hashed.startswith("$argon2id$v=19$m=1024,t=1,p=1$")
    assert hasher.hash(PASSWORD) != hashed  # salted
    assert hasher.verify(PASSWORD, hashed) is True
    assert hasher.verify(PASSWORD + "!", hashed) is False
    assert hasher.needs_rehash(hashed) is False


def test_reads_bcrypt_hashes_and_asks_to_replace_them():
    hasher = Argon2Hasher(**FAST)
    old = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    assert hasher.verify(PASSWORD, old) is True
    assert hasher.verify("wrong password", old) is False
    assert hasher.needs_rehash(old) is True


def test_other_parameters_and_unreadable_hashes():
    stronger = Argon2Hasher(time_cost=2, memory_cost=2048, parallelism=1)
    assert stronger.needs_rehash(Argon2Hasher(**FAST).hash(PASSWORD)) is True
    for garbage in ("", "plain text", "$argon2id$v=19$m=1024,t=1,p=1$broken", "$2b$04$short", "$argon2i$x"):
        assert stronger.verify(PASSWORD, garbage) is False
        assert stronger.needs_rehash(garbage) is True


def test_settings_are_checked_at_startup():
    assert Argon2Hasher.from_settings({}).hash("x").startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    for options, message in (({"time_cost": 0}, "positive integer"), ({"memory_cost": "lots"}, "positive integer"),
                             ({"memory_cost": 1, "parallelism": 4}, "not usable"), ({"rounds": 3}, "unknown key")):
        with pytest.raises(SettingsError, match=message):
            Argon2Hasher.from_settings(options)


def test_chosen_by_name_only(locky_app_factory):
    assert type(locky_app_factory(plugins=("locky_argon2",)).context.password_hasher).__name__ == "BcryptHasher"
    with pytest.raises(SettingsError, match="unknown password hasher provider 'argon2'; known: bcrypt"):
        locky_app_factory(password_hasher="argon2")


def test_bcrypt_users_log_in_and_are_rehashed(locky_app_factory):
    before = LockyClient(locky_app_factory())  # bcrypt, as a deployment is today
    ada = before.account("ada@example.com")
    old_hash = before.app.context.storage.users.get(ada.id).password_hash
    assert old_hash.startswith("$2b$04$")

    app = locky_app_factory(**ARGON2)  # the same database after switching
    client, users = LockyClient(app), app.context.storage.users
    assert client.simulate_post("/v1/public/users/login",
                                json={"email": ada.email, "password": "wrong password"}).status_code == 401
    assert users.get(ada.id).password_hash == old_hash  # a failed login changes nothing
    client.login(ada.email)
    new_hash = users.get(ada.id).password_hash
    assert new_hash.startswith("$argon2id$")
    client.login(ada.email)  # and again, now against the argon2 hash
    assert users.get(ada.id).password_hash == new_hash

    bob = client.account("bob@example.com")
    assert users.get(bob.id).password_hash.startswith("$argon2id$")
    changed = client.simulate_put(f"/v1/private/users/{bob.id}",
                                  json={"password": "another secret", "current_password": bob.password},
                                  headers=bob.headers)
    assert changed.status_code == 200
    assert users.get(bob.id).password_hash.startswith("$argon2id$")
    client.login(bob.email, "another secret")
