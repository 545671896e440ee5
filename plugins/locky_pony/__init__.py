"""Locky's bundled storage: Pony ORM on SQLite, PostgreSQL or MariaDB/MySQL.

Registered as the storage provider ``pony``; the engine is chosen by
``LOCKY_DATABASE_URL`` alone.
"""

from __future__ import annotations

from pony.orm import db_session

from locky.plugins import hookimpl

from .database import bind_arguments, open_database
from .fast import FastAuthentication, FastCollection, Reads
from .sessions import GrantStore, LoginThrottle, SessionStore
from .guard import transaction
from .stores import (
    GroupStore, MemberStore, RoleStore, UserStore,
    group_record, member_record, role_record, user_record,
)


class PonyStorage:
    """The ``pony`` storage provider: one Pony ``Database`` per app."""

    def __init__(self, settings):
        self.db, e = open_database(settings)
        self.entities = e
        self.users = UserStore(e, e.User, user_record)
        self.groups = GroupStore(e, e.Group, group_record)
        self.members = MemberStore(e, e.Member, member_record)
        self.roles = RoleStore(e, e.Role, role_record)
        self.sessions = SessionStore(e)
        self.throttle = LoginThrottle(e)
        self.grants = GrantStore(e)
        # The per-request reads in plain SQL (same results; see fast.py).
        self._reads = Reads(self.db, bind_arguments(settings))
        for store, entity in ((self.users, e.User), (self.groups, e.Group),
                              (self.members, e.Member), (self.roles, e.Role)):
            reader = FastCollection(self._reads, entity, store)
            store.get, store.list = reader.get, reader.list
        self.authenticate = FastAuthentication(self._reads, e).authenticate

    @transaction
    def revision(self) -> int:
        return self.entities.Meta["policy_revision"].number

    def ping(self) -> bool:
        try:
            with db_session:
                self.db.select("SELECT 1")
            return True
        except Exception:
            return False

    def close(self) -> None:
        self._reads.close()
        self.db.disconnect()


@hookimpl
def locky_register_storage(registry):
    registry.add("pony", lambda context: PonyStorage(context.settings))
