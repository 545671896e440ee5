"""Webhooks, deliveries, TOTP states, codes and the active signing key read through the
Pony backend's read layer (``locky_pony.reads``) exactly as its entity layer would build
them, on every engine (MySQL/MariaDB's packed rows included)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pony.orm import db_session

from locky import SigningKey, utcnow
from locky.testing import make_settings
from locky_pony import PonyStorage
from locky_pony.audit import delivery_record, webhook_record
from locky_pony.lifecycle import code_record, key_record, totp_record

#: Quotes, a backslash, control characters, separators, accents, a character outside the BMP.
TRICKY = 'a "quoted" \\ back\tslash\nline \u2028 \u00fc \U0001F511 end'


@pytest.fixture
def storage(database_url, tmp_path):
    storage = PonyStorage(make_settings(database_url, mail_dir=str(tmp_path / "mail")))
    storage.migrate()
    yield storage
    storage.close()


def test_the_read_layer_builds_what_the_entity_layer_would(storage):
    e = storage.entities
    now = utcnow()
    hooks = [storage.webhooks.create(uuid=f"31111111-1111-4111-8111-{i:012d}", url=f"http://127.0.0.1/{i}",
                                     events=["user.*", TRICKY] if i else ["*"], description=TRICKY * i,
                                     secret="s", created_at=now) for i in range(3)]
    deliveries = [storage.deliveries.queue(webhook_id=hooks[1].id, event_uuid=f"41111111-1111-4111-8111-{i:012d}",
                                           event="user.created", payload=TRICKY, created_at=now) for i in range(3)]
    storage.deliveries.retry(deliveries[1].id, status_code=None, error=TRICKY, at=now, due_at=now)
    storage.deliveries.succeeded(deliveries[2].id, status_code=204, at=now)
    user = storage.users.create(name="n", email="n@example.com", password_hash="h")
    storage.totp.begin(user.uuid, "sealed secret")
    storage.codes.add(code_hash="c" * 64, purpose="verify", user_uuid=user.uuid, email=user.email,
                      expires_at=now + timedelta(hours=1))
    key = storage.keys.rotate(SigningKey(kid="k1", alg="ES256", public_jwk="{}", private_key=TRICKY,
                                         created_at=now), replacing=None)

    with db_session:
        assert [storage.webhooks.get(h.id) for h in hooks] == [webhook_record(e.Webhook[h.id]) for h in hooks]
        assert storage.webhooks.list(limit=2).items == [webhook_record(e.Webhook[h.id]) for h in hooks[:2]]
        assert [h.uuid for h in storage.webhooks.matching("user.created")] == [h.uuid for h in hooks]
        assert [h.uuid for h in storage.webhooks.matching("group.created")] == [hooks[0].uuid]
        assert storage.deliveries.list(hooks[1].id).items == [delivery_record(e.Delivery[d.id]) for d in deliveries]
        assert storage.deliveries.list(hooks[0].id).items == []
        assert storage.deliveries.pending() == 2
        assert storage.totp.get(user.uuid) == totp_record(e.Totp[user.uuid])
        assert storage.codes.find("c" * 64, "verify", now=now) == code_record(e.Code.get(code_hash="c" * 64))
        assert storage.keys.active("ES256") == key_record(e.Key.get(kid="k1")) == key
    # And outside a session, on the reader's own connections.
    assert storage.webhooks.get(hooks[2].id) == hooks[2]
    assert storage.deliveries.get(deliveries[1].id).last_error == TRICKY
    assert storage.totp.get(user.uuid).recovery_hashes == ()
    assert storage.totp.get("no such user") is None
    assert storage.codes.find("c" * 64, "reset", now=now) is None
    assert storage.keys.active("ES256").private_key == TRICKY


def test_reads_of_many_rows_give_the_same_records_as_reads_of_one(storage):
    """``get_many_by_uuid`` reads many users in one statement, TRICKY text included, and
    builds what ``get_by_uuid`` builds."""
    users = [storage.users.create(name=TRICKY + str(i), email=f"u{i}@example.com", password_hash="h" * (i + 1))
             for i in range(5)]
    storage.users.update(users[1].id, external_id=TRICKY)
    many = storage.users.get_many_by_uuid([u.uuid for u in users])
    assert many == {u.uuid: storage.users.get_by_uuid(u.uuid) for u in users}
    assert many[users[1].uuid].external_id == TRICKY


def test_an_answer_of_many_rows_cut_short_is_read_again_row_by_row(storage):
    """MariaDB cuts ``JSON_ARRAYAGG`` at ``group_concat_max_len``: the reader then runs
    the same statement with a row per row."""
    reader = storage.reader
    if reader.dialect != "MySQL":
        pytest.skip("only MariaDB/MySQL cut an aggregated answer")
    made = sorted(storage.users.create(name=f"n{i}", email=f"cut{i}@example.com", password_hash="h").uuid
                  for i in range(3))
    whole = reader.many_rows("uuid", "SELECT {} FROM locky_users ORDER BY uuid")
    cut = reader.statement("SELECT LEFT(JSON_ARRAYAGG(JSON_ARRAY(uuid)), 20) FROM locky_users")
    cut = cut._replace(aggregated=True, plain=whole.plain)
    assert [row[0] for row in reader.select(whole, ())] == made
    assert [row[0] for row in reader.select(cut, ())] == made
