"""A create returns the record built from the values it wrote: one INSERT, no SELECT of
the row back, and the same record a later read finds (``locky_pony.inserts``)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from pony.orm import set_sql_debug

from locky import Permission, utcnow
from locky.testing import make_settings
from locky_pony import PonyStorage


@pytest.fixture
def storage(tmp_path):
    storage = PonyStorage(make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}", mail_dir=str(tmp_path / "mail")))
    storage.migrate()
    yield storage
    storage.close()


class Statements(logging.Handler):
    """The SQL statements Pony sends while it is installed (transaction control aside)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.sql: list[str] = []

    def emit(self, record):
        self.sql.append(record.getMessage().split()[0].upper())

    def __enter__(self):
        logger = logging.getLogger("pony.orm.sql")
        self.saved = logger.level, logger.propagate
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        set_sql_debug(True, show_values=False)
        return self

    def __exit__(self, *exc):
        set_sql_debug(False)
        logger = logging.getLogger("pony.orm.sql")
        logger.removeHandler(self)
        logger.level, logger.propagate = self.saved


def test_creates_write_once_and_read_nothing_back(storage):
    now = utcnow()
    with Statements() as seen:
        user = storage.users.create(name="n", email="a@example.com", password_hash="h")
    # The user; then the cache revision locked and moved (the pages and counts of users
    # the revision bus keeps hold one more): nothing read back.
    assert seen.sql == ["INSERT", "SELECT", "UPDATE"], seen.sql
    with Statements() as seen:
        event = storage.audit.add(uuid="21111111-1111-4111-8111-111111111111", event="user.created",
                                  actor_uuid=None, target_type="user", target_uuid=user.uuid, ip="",
                                  request_id="", details={"a": 1}, created_at=now)
    assert seen.sql == ["INSERT"]
    with Statements() as seen:
        hook = storage.webhooks.create(uuid="31111111-1111-4111-8111-111111111111", url="http://127.0.0.1/x",
                                       events=["user.created"], description="", secret="s", created_at=now)
        delivery = storage.deliveries.queue(webhook_id=hook.id, event_uuid=event.uuid, event=event.event,
                                            payload="{}", created_at=now)
    assert seen.sql == ["INSERT", "INSERT"]
    with Statements() as seen:
        role = storage.roles.create(name="r", description="d", permissions=[Permission("a", "b")])
    assert "INSERT" in seen.sql and seen.sql.count("SELECT") == 1  # the policy revision's row, locked
    with Statements() as seen:
        group = storage.groups.create(name="g", description="", owner_uuid=user.uuid)
    # The owner locked; the group; the cache revision locked (its owner's roles by group
    # may be kept), then written; the owner's membership.
    assert seen.sql == ["SELECT", "INSERT", "SELECT", "UPDATE", "INSERT"], seen.sql
    friend = storage.users.create(name="f", email="f@example.com", password_hash="h")
    with Statements() as seen:
        member = storage.members.create(group_uuid=group.uuid, user_uuid=friend.uuid, role=role.name)
    # Nothing read back after the insert; the cache revision's row, locked before it, is
    # written when the transaction commits.
    assert seen.sql[-2:] == ["INSERT", "UPDATE"], seen.sql

    # What each create answered is what a read finds.
    assert user == storage.users.get(user.id) and user.deleted_at is None and user.email_verified is False
    assert group == storage.groups.get(group.id)
    assert member == storage.members.get(member.id)
    assert role == storage.roles.get(role.id)
    assert storage.audit.list().items == [event] and event.actor_uuid is None and event.details == {"a": 1}
    assert storage.webhooks.get(hook.id) == hook
    assert storage.deliveries.get(delivery.id) == delivery and delivery.last_status_code is None
    letter = storage.outbox.put(purpose="verify", email="a@example.com")
    assert letter.user_uuid == "" and letter.attempts == 0
    assert storage.outbox.claim(now=utcnow() + timedelta(seconds=1), lease=60)[0].id == letter.id
