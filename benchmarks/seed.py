"""Seeding a benchmark database through Locky's own storage interface.

Users, groups, memberships and custom roles are written with the public store methods
(``storage.users.create`` ...), so the data is exactly what the API would have written;
on the Pony storage they are batched into a few large transactions to keep seeding fast.
Access tokens are issued the way a login issues them (a stored session plus a signed
token), without paying one bcrypt check per token.

A seeded database is then *settled* (:func:`settle`): its planner statistics are
gathered, as the server's own background work does within a minute of a load
(PostgreSQL's autovacuum, InnoDB's statistics recalculation). Measured straight after a
load, a PostgreSQL database has none: the planner guesses, and autovacuum wakes in the
middle of a measured run to analyze and vacuum the new rows, on the cores the
benchmark shares. Locky's figures are meant for a database in its steady state.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

from locky.app import create_app
from locky.records import Permission
from locky.settings import Settings
from locky.testing.databases import connect, engine

PASSWORD = "benchmark password 1"
CUSTOM_ROLES = 10  # the policy lines in storage are spread over this many custom roles
BUILTIN_MEMBER_ROLES = ("member", "viewer", "maintainer")


@dataclass
class Seeded:
    user_ids: list[int]
    emails: list[str]
    tokens: list[str]
    role_ids: list[int]
    memberships: int
    seconds: float
    extra: dict = field(default_factory=dict)


@contextmanager
def _batch(storage):
    """One transaction around many store calls when the storage is Pony's (its store
    methods join an enclosing ``db_session``); plain calls otherwise."""
    db = getattr(storage, "db", None)
    if db is None:
        yield
        return
    from pony.orm import db_session

    with db_session:
        yield


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def seed(settings: Settings, *, users: int = 2000, groups: int = 500, memberships: int = 10_000,
         tokens: int = 64, policy_lines: int = 10, settled: bool = True) -> Seeded:
    """Fill an empty database; return what the load generator needs. The database is
    :func:`settle`-d unless ``settled`` is false (to measure it as loaded)."""
    if memberships > groups * 20 or groups > users:
        raise ValueError("need memberships <= 20 * groups and groups <= users")
    started = time.perf_counter()
    app = create_app(settings.replace(log_requests=False))
    try:
        storage, hasher, issuer = app.context.storage, app.context.password_hasher, app.context.tokens
        password_hash = hasher.hash(PASSWORD)  # one hash at the configured cost, shared by all
        user_rows = []
        for chunk in _chunks(users, 500):
            with _batch(storage):
                for i in chunk:
                    user_rows.append(storage.users.create(
                        name=f"bench user {i}", email=f"bench{i}@example.com", password_hash=password_hash))
        roles = []
        with _batch(storage):
            for r in range(CUSTOM_ROLES):
                roles.append(storage.roles.create(
                    name=f"bench-r{r}", description="benchmark role", permissions=_permissions(r, 1)))
        role_names = [r.name for r in roles] + list(BUILTIN_MEMBER_ROLES)
        group_rows = []
        for chunk in _chunks(groups, 500):
            with _batch(storage):
                for g in chunk:  # the creator (user g) becomes its owner: one membership each
                    group_rows.append(storage.groups.create(
                        name=f"bench group {g}", description="", owner_uuid=user_rows[g].uuid))
        extra = memberships - groups
        for chunk in _chunks(extra, 1000):
            with _batch(storage):
                for k in chunk:
                    g, j = k % groups, k // groups + 1  # j in 1..19: user (g + 97 j) is never g
                    storage.members.create(
                        group_uuid=group_rows[g].uuid, user_uuid=user_rows[(g + 97 * j) % users].uuid,
                        role=role_names[k % len(role_names)])
        issued = []
        with _batch(storage):
            for user in user_rows[:tokens]:
                session_uuid = str(uuid.uuid4())
                refresh = issuer.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="refresh")
                storage.sessions.create(uuid=session_uuid, user_uuid=user.uuid, refresh_jti=refresh.jti)
                issued.append(issuer.issue(user_uuid=user.uuid, session_uuid=session_uuid, kind="access").token)
        seeded = Seeded(
            user_ids=[u.id for u in user_rows], emails=[u.email for u in user_rows], tokens=issued,
            role_ids=[r.id for r in roles], memberships=memberships, seconds=0.0,
        )
    finally:
        app.close()
    if policy_lines != CUSTOM_ROLES:
        set_policy_lines(settings, seeded, policy_lines)
    if settled:
        settle(settings)
    seeded.seconds = time.perf_counter() - started
    return seeded


def settle(settings: Settings) -> None:
    """Gather the planner statistics of every table of ``settings``' database (PostgreSQL:
    ``VACUUM ANALYZE``; MySQL/MariaDB: ``ANALYZE TABLE``; SQLite: ``ANALYZE``), as the
    server would soon after a load (see the module docstring)."""
    if settings.sqlite_path is not None:
        connection = sqlite3.connect(settings.sqlite_path)
        try:
            connection.execute("ANALYZE")
        finally:
            connection.close()
        return
    kind = engine(settings.database_url)
    if kind == "sqlite":
        return  # in memory
    connection = connect(settings.database_url)
    try:
        cursor = connection.cursor()
        if kind == "postgres":
            cursor.execute("VACUUM ANALYZE")
            return
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        for (table,) in cursor.fetchall():
            cursor.execute(f"ANALYZE TABLE `{table}`")
            cursor.fetchall()
    finally:
        connection.close()


def _permissions(role: int, count: int) -> list[Permission]:
    return [Permission(f"app{role}.res{i}", "read") for i in range(count)]


def set_policy_lines(settings: Settings, seeded: Seeded, lines: int) -> None:
    """Give the custom roles ``lines`` policy lines in all (``p`` lines in storage),
    through ``storage.roles.update``: every running worker sees the new revision."""
    per_role = max(1, lines // CUSTOM_ROLES)
    app = create_app(settings.replace(log_requests=False))
    try:
        for r, role_id in enumerate(seeded.role_ids):
            app.context.storage.roles.update(role_id, permissions=_permissions(r, per_role))
    finally:
        app.close()

