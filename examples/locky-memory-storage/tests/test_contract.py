"""The memory storage passes Locky's storage contract, and the whole API runs on it.

Written as any plugin author would: Locky's ``locky.testing`` pytest plugin provides the
fixtures (``locky_settings``, ``locky_client``, ``locky_user``, ``locky_admin``) and the
contract suite to subclass.
"""

from __future__ import annotations

import pytest
from locky_memory_storage import MemoryStorage

from locky.testing import make_settings
from locky.testing.storage_contract import StorageContract


class TestMemoryStorage(StorageContract):
    @pytest.fixture
    def storage(self):
        storage = MemoryStorage()
        yield storage
        storage.close()


@pytest.fixture
def locky_settings(tmp_path):
    # Chosen by name, as an operator would: LOCKY_STORAGE=memory. With no database file
    # the ``file`` mailer would write to ./mail; each test gets its own folder instead.
    return make_settings("sqlite:///:memory:", storage="memory", mail_dir=str(tmp_path / "mail"))


def test_the_app_uses_the_memory_storage(locky_app):
    assert isinstance(locky_app.context.storage, MemoryStorage)


def test_register_login_and_groups(locky_client, locky_user, locky_admin):
    me = locky_client.simulate_get("/v1/internal/users/me", headers=locky_user.headers)
    assert me.status_code == 200 and me.json["email"] == "user@example.com"

    group = locky_client.simulate_post("/v1/private/groups", json={"name": "editors"},
                                       headers=locky_user.headers)
    assert group.status_code == 201, group.text
    members = locky_client.simulate_get("/v1/internal/members", params={"group_uuid": group.json["uuid"]},
                                        headers=locky_user.headers)
    assert [(m["user_uuid"], m["role"]) for m in members.json["members"]] == [(locky_user.uuid, "owner")]

    # The admin (LOCKY_ADMIN_EMAILS) may delete any group; a deleted group is gone.
    deleted = locky_client.simulate_delete(f"/v1/private/groups/{group.json['id']}", headers=locky_admin.headers)
    assert deleted.status_code == 204
    gone = locky_client.simulate_get(f"/v1/internal/groups/{group.json['id']}", headers=locky_user.headers)
    assert gone.status_code == 404

    logout = locky_client.simulate_post("/v1/private/users/logout", headers=locky_user.headers)
    assert logout.status_code == 204
    again = locky_client.simulate_get("/v1/internal/users/me", headers=locky_user.headers)
    assert again.status_code == 401
