"""Schema step 10 (passkeys, provisioning ids) carries a database at version 9, on every
engine: the users and groups it had read back with no ``external_id`` and keep their
memberships, gain one, are listed by it; the new passkeys table takes the longest
credential id WebAuthn allows, keeps one credential once, and its counter check works."""

from __future__ import annotations

import pytest
from pony.orm import db_session

from locky import Conflict, utcnow
from locky.testing import make_settings
from locky_pony import PonyStorage
from locky_pony.migrations import LATEST

from test_pony_oauth_schema import storage_at

#: The version before passkeys and provisioning ids.
BEFORE = 9


def test_step_10_keeps_the_users_and_groups_a_database_had(tableless_url):
    with storage_at(tableless_url, BEFORE) as storage:
        # Rows as the version 9 schema takes them: no external_id column yet.
        now = utcnow()
        with db_session:
            for table, uuid, name in (("locky_users", "11111111-1111-4111-8111-111111111111", "Ada"),
                                      ("locky_groups", "22222222-2222-4222-8222-222222222222", "engineers")):
                extra = ", email, password_hash" if table == "locky_users" else ", description"
                values = ", 'ada@example.com', 'x'" if table == "locky_users" else ", 'Builds things'"
                storage.db.execute(f"INSERT INTO {table} (uuid, created_at, updated_at, del_token, name{extra})"
                                   f" VALUES ($uuid, $now, $now, 0, $name{values})",
                                   {"uuid": uuid, "now": now, "name": name})

        assert [step.version for step in storage.migrate()] == list(range(BEFORE + 1, LATEST + 1))
        assert storage.schema().current == LATEST

        ada = storage.users.get_by_email("ada@example.com")
        group = storage.groups.list(name="engineers").items[0]
        assert (ada.name, ada.external_id, group.description, group.external_id) == (
            "Ada", None, "Builds things", None)
        assert storage.users.count(external_id="okta-1") == 0
        given = storage.users.update(ada.id, external_id="okta-1")
        assert storage.users.list(external_id="okta-1").items == [given]
        assert storage.groups.update(group.id, external_id="grp-1").external_id == "grp-1"
        assert storage.groups.list(external_id="grp-1").items[0].name == "engineers"
        assert storage.groups.create(name="empty", description="", owner_uuid=None).external_id is None

        longest = "A" * 1363 + "Q"  # 1023 bytes in unpadded base64url
        made = storage.passkeys.add(user_uuid=ada.uuid, credential_id=longest, public_key="k" * 4000, sign_count=0,
                                    name="Key", transports=["usb"], aaguid="00000000-0000-0000-0000-000000000000",
                                    backed_up=False)
        with pytest.raises(Conflict):
            storage.passkeys.add(user_uuid=group.uuid, credential_id=longest, public_key="k", sign_count=0,
                                 name="Again", transports=[], aaguid="x", backed_up=False)
        assert storage.passkeys.get_by_credential_id(longest).id == made.id
        assert storage.passkeys.use(made.id, sign_count=3, now=utcnow()).sign_count == 3
        assert storage.passkeys.use(made.id, sign_count=3, now=utcnow()) is None


def test_step_10_on_mariadb_indexes_the_external_ids(server_url):
    """MariaDB keeps index keys within 3072 bytes: the filter indexes exist there too."""
    if not server_url.startswith("mysql"):
        pytest.skip("MariaDB's index key limit")
    storage = PonyStorage(make_settings(server_url))
    try:
        storage.migrate()
        with db_session:
            rows = storage.db.select(
                "SELECT table_name, index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index)"
                " FROM information_schema.statistics WHERE table_schema = DATABASE()"
                " AND index_name IN ('idx_locky_users__external_id_del_token_id',"
                " 'idx_locky_groups__external_id_del_token_id', 'unq_locky_passkeys__credential_hash',"
                " 'credential_hash') GROUP BY table_name, index_name ORDER BY table_name, index_name")
        assert [tuple(row)[0] for row in rows] == ["locky_groups", "locky_passkeys", "locky_users"]
        assert [tuple(row)[2] for row in rows] == ["external_id,del_token,id", "credential_hash",
                                                   "external_id,del_token,id"]
    finally:
        storage.close()
