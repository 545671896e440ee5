"""``LOCKY_AUTH_CACHE=revision``: each worker serves user records from memory while the
cache revision (read with every request's session) has not moved; every change to a
user's record moves it in its own transaction (issue 18). On SQLite always, on
PostgreSQL and MariaDB when configured:

- an item read runs one statement (the authentication) instead of two, served from
  memory; a change made through another app (another host) is seen on the very next
  request: a rename, a new address verified, a second factor, a disabled account, a
  deletion; so do a page and a count of users, and a new user is in the next ones,
  also while threads count through the other app as the users are registered;
- sessions and roles are read on every request: a logout and a role change made
  through the other app hold at once;
- the roles users hold in groups are served from memory too, and a membership added or
  ended and a group deleted through the other app decide its very next check; a session ended by
  hand in SQL too; a record changed by hand in SQL is served at most ``max_age``;
- a change rolled back moves nothing and leaves nothing in memory;
- a schema upgraded from an earlier step starts the revision (``locky_meta``);
- two ``locky serve`` processes (two workers each) on PostgreSQL: a rename, a new user
  and a deletion made through one are seen by every worker of the other at once.
"""

from __future__ import annotations

import threading
import time
import uuid

import auth_cache_scenarios as scenarios
import pytest
from auth_cache_scenarios import me
from backends import empty_database_url

from locky.cache import CachingStorage, request_ended, request_started
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET, LockyClient, make_settings
from locky.testing.databases import run_sql
from support.server import locky_server, one_service
from locky_pony import open_storage
from locky_pony.migrations import LATEST
from locky_pony.revision_bus import RevisionBus


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgres", id="postgres", marks=pytest.mark.backend),
                        pytest.param("mysql", id="mysql", marks=pytest.mark.backend)])
def database_url(request, tmp_path) -> str:
    return empty_database_url(request, request.param, tmp_path)


@pytest.fixture
def hosts(locky_app_factory, database_url):
    """Two apps (two hosts) on one database, each with its revision cache."""
    first, second = (locky_app_factory(database_url=database_url, auth_cache="revision") for _ in range(2))
    for app in (first, second):
        assert isinstance(app.context.storage.bus, RevisionBus)
    return LockyClient(first), LockyClient(second)


def statements(storage) -> list[str]:
    """The statements ``storage``'s plain-SQL reader runs from now on on this thread (the
    requests' round trips; a background thread of the app, its mail sender reading a
    letter's user, does not count)."""
    reader, ran, thread = storage.inner.reader, [], threading.get_ident()
    select = reader.select

    def counted(statement, params, **options):
        if threading.get_ident() == thread:
            ran.append(statement.direct)
        return select(statement, params, **options)

    reader.select = counted
    return ran


def test_an_item_read_runs_one_statement_and_sees_changes_at_once(hosts):
    a, b = hosts
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    bob = a.account("bob@example.com")
    storage = b.app.context.storage

    def on_b(account=admin) -> dict:
        answer = b.simulate_get(f"/v1/internal/users/{ada.id}", headers=account.headers)
        assert answer.status_code == 200, answer.text
        return answer.json

    on_b()  # the record is read once, and kept
    ran, hits = statements(storage), storage.cache.hits
    for _ in range(5):
        assert on_b()["email"] == "ada@example.com"
    assert storage.cache.hits - hits == 5
    assert len(ran) == 5 and all("locky_sessions" in sql for sql in ran)  # the authentication only

    for round in range(5):
        name = f"Ada {round}"
        assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                              json={"name": name}).status_code == 200
        assert on_b()["name"] == name, f"round {round}"
        assert on_b(bob)["name"] == name
    assert on_b()["email_verified"] is False
    assert a.app.context.storage.users.mark_verified(ada.uuid, "ada@example.com").email_verified
    assert on_b()["email_verified"] is True
    a.app.context.storage.totp.begin(ada.uuid, "JBSWY3DPEHPK3PXP")
    assert a.app.context.storage.totp.confirm(ada.uuid, step=1, recovery_hashes=["x"]).mfa_enabled
    assert on_b()["mfa_enabled"] is True
    assert a.app.context.storage.totp.remove(ada.uuid).mfa_enabled is False
    assert on_b()["mfa_enabled"] is False
    assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                          json={"disabled": True}).status_code == 200
    assert on_b()["disabled"] is True
    assert me(b, ada) == 401  # a disabled user's session ends with it
    assert a.simulate_delete(f"/v1/private/users/{ada.id}", headers=admin.headers).status_code == 204
    assert b.simulate_get(f"/v1/internal/users/{ada.id}", headers=admin.headers).status_code == 404


def test_lists_and_counts_of_users_run_one_statement_and_see_changes_at_once(hosts):
    """Pages and counts of users are kept with the records: a list of users and their
    count cost the authentication alone, and a new user, a rename, a verified address,
    a second factor, a disabled account and a deletion made through the other app are in
    the very next page and count."""
    a, b = hosts
    admin = a.account(ADMIN_EMAIL, verified=True)
    storage = b.app.context.storage

    def on_b() -> tuple[dict[str, dict], int]:
        page = b.simulate_get("/v1/internal/users", params={"limit": 50}, headers=admin.headers)
        count = b.simulate_get("/v1/internal/users/count", headers=admin.headers)
        assert page.status_code == count.status_code == 200, (page.text, count.text)
        return {user["email"]: user for user in page.json["users"]}, count.json["count"]

    assert on_b()[1] == 1  # the page and the count are read once, and kept
    ran, hits = statements(storage), storage.reads.hits
    for _ in range(3):
        users, count = on_b()
        assert set(users) == {ADMIN_EMAIL} and count == 1
    assert storage.reads.hits - hits == 6
    assert len(ran) == 6 and all("locky_sessions" in sql for sql in ran)  # the authentication only

    accounts = []
    for round in range(3):
        accounts.append(a.account(f"ada{round}@example.com"))
        users, count = on_b()
        assert count == round + 2 and f"ada{round}@example.com" in users, f"round {round}"
    ada = accounts[0]
    assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                          json={"name": "Ada L."}).status_code == 200
    assert on_b()[0][ada.email]["name"] == "Ada L."
    assert a.app.context.storage.users.mark_verified(ada.uuid, ada.email).email_verified
    assert on_b()[0][ada.email]["email_verified"] is True
    a.app.context.storage.totp.begin(ada.uuid, "JBSWY3DPEHPK3PXP")
    assert a.app.context.storage.totp.confirm(ada.uuid, step=1, recovery_hashes=["x"]).mfa_enabled
    assert on_b()[0][ada.email]["mfa_enabled"] is True
    assert a.simulate_put(f"/v1/private/users/{ada.id}", headers=admin.headers,
                          json={"disabled": True}).status_code == 200
    assert on_b()[0][ada.email]["disabled"] is True
    assert a.simulate_delete(f"/v1/private/users/{ada.id}", headers=admin.headers).status_code == 204
    users, count = on_b()
    assert ada.email not in users and count == 3


#: Registrations made through one app while the other counts, and its counting threads.
RACE_REGISTRATIONS, RACE_READERS = 40, 3


def test_a_count_begun_after_a_registration_was_answered_includes_it_under_load(hosts):
    """Threads count the users through one app, filling and emptying its kept count,
    while the other app registers users one after another: every count that began after
    a registration was answered includes it (a count kept from before the registration,
    or filled from a read begun before it, would not)."""
    a, b = hosts
    admin = a.account(ADMIN_EMAIL, verified=True)
    answered = [1]  # how many users exist once the last registration was answered
    late: list[tuple[int, int]] = []
    failed: list[str] = []
    done = threading.Event()

    def count_on_b() -> None:
        while not done.is_set():
            at_least = answered[0]
            answer = b.simulate_get("/v1/internal/users/count", headers=admin.headers)
            if answer.status_code != 200:
                failed.append(answer.text)
            elif answer.json["count"] < at_least:
                late.append((answer.json["count"], at_least))

    readers = [threading.Thread(target=count_on_b) for _ in range(RACE_READERS)]
    for reader in readers:
        reader.start()
    try:
        for n in range(RACE_REGISTRATIONS):
            a.register(f"racer{n}@example.com")
            answered[0] = n + 2
    finally:
        done.set()
        for reader in readers:
            reader.join(30)
    assert failed == [] and late == []
    assert b.simulate_get("/v1/internal/users/count", headers=admin.headers).json["count"] == RACE_REGISTRATIONS + 1
    assert b.app.context.storage.reads.hits > 0  # the count was served from memory between registrations


def test_a_group_scoped_check_reads_its_user_and_their_roles_in_one_statement(hosts):
    """A check about a user in a group, when the worker holds neither the user nor their
    roles (new to it, or both aged out together after ``max_age``), runs the
    authentication and one statement more, not two; then the authentication only."""
    a, b = hosts
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    bob = a.account("bob@example.com")
    assert a.simulate_post("/v1/private/roles", headers=admin.headers, json={
        "name": "auditor", "permissions": [{"resource": "reports", "action": "read"}]}).status_code == 201
    groups = [a.simulate_post("/v1/private/groups", json={"name": f"g{i}"}, headers=ada.headers).json
              for i in range(2)]
    assert a.simulate_post("/v1/private/members", headers=ada.headers, json={
        "group_uuid": groups[0]["uuid"], "user_uuid": bob.uuid, "role": "auditor"}).status_code == 201
    storage = b.app.context.storage

    def allowed(group: dict) -> bool:
        answer = b.simulate_get("/v1/internal/authz/check", headers=ada.headers, params={
            "user_uuid": bob.uuid, "resource": "reports", "action": "read", "group_uuid": group["uuid"]})
        assert answer.status_code == 200, answer.text
        return answer.json["allowed"]

    ran = statements(storage)

    def of_bob() -> list[str]:
        """The statements since the last call, but the authentication and bob's global
        roles (read once per policy revision)."""
        found = [sql for sql in ran if "locky_sessions" not in sql and "locky_grants" not in sql]
        del ran[:]
        return found

    storage.cache.max_age = 1.0
    for why in ("new to the worker", "both aged out together"):
        if why == "both aged out together":
            time.sleep(1.1)
        assert allowed(groups[0]), why
        read = of_bob()
        assert len(read) == 1 and "locky_users" in read[0] and "locky_members" in read[0], (why, read)
        assert (allowed(groups[0]), allowed(groups[1])) == (True, False)
        assert of_bob() == [], why  # kept


def test_sessions_and_authorization_are_read_on_every_request(hosts):
    a, b = hosts
    for round in range(5):
        ada = a.account(f"ada{round}@example.com")
        assert me(b, ada) == 200 and me(b, ada) == 200
        assert a.simulate_post("/v1/private/users/logout", headers=ada.headers).status_code == 204
        assert me(b, ada) == 401, f"round {round}"
    scenarios.deletions_and_authorization_changes_hold_at_once(a, b)


def test_memberships_come_from_memory_and_changes_are_seen_at_once(hosts):
    scenarios.memberships_come_from_memory_and_changes_are_seen_at_once(*hosts)


def test_changes_by_hand_in_sql(hosts, database_url):
    """A session ended by hand is refused at once; a record changed by hand is served
    from memory for at most ``max_age`` (a second here)."""
    a, b = hosts
    admin, ada = a.account(ADMIN_EMAIL, verified=True), a.account("ada@example.com")
    cache = b.app.context.storage.cache
    cache.max_age = 1.0

    def name_on_b() -> str:
        answer = b.simulate_get(f"/v1/internal/users/{ada.id}", headers=admin.headers)
        assert answer.status_code == 200, answer.text
        return answer.json["name"]

    assert name_on_b() == name_on_b()
    run_sql(database_url, "UPDATE locky_users SET name = 'by hand' WHERE id = %s", ada.id)
    deadline = time.monotonic() + 3
    while name_on_b() != "by hand":
        assert time.monotonic() < deadline, "a record changed by hand was served past max_age"
        time.sleep(0.05)
    assert me(b, ada) == 200
    run_sql(database_url, "UPDATE locky_sessions SET revoked_at = CURRENT_TIMESTAMP WHERE user_uuid = %s", ada.uuid)
    assert me(b, ada) == 401


def _revision(storage) -> int:
    token = request_started()  # the authentication read tells the bus within a request
    try:
        seen = []
        storage.inner.sessions.watch_cache_revision(seen.append)
        session = storage.sessions.create(uuid=str(uuid.uuid4()), refresh_jti="jti",
                                          user_uuid=storage.users.get_by_email("ada@example.com").uuid)
        storage.sessions.authenticate(session.uuid)
        return seen[-1]
    finally:
        storage.inner.sessions.watch_cache_revision(storage.bus.observe)
        request_ended(token)


def test_a_change_rolled_back_moves_nothing_and_leaves_nothing(database_url):
    storage = open_storage(make_settings(database_url, auth_cache="revision"))
    try:
        assert isinstance(storage, CachingStorage) and storage.caches_only_records
        storage.migrate()
        ada = storage.users.create(email="ada@example.com", password_hash="x", name="Ada")
        before = _revision(storage)

        class Undo(Exception):
            pass

        with pytest.raises(Undo):
            with storage.atomic():
                storage.users.update(ada.id, name="Never")
                raise Undo
        assert _revision(storage) == before
        storage.users.update(ada.id, name="Ada Lovelace")
        assert _revision(storage) == before + 1
        token = request_started()
        try:
            assert storage.users.get(ada.id).name == "Ada Lovelace"
        finally:
            request_ended(token)
    finally:
        storage.close()


def test_a_schema_upgraded_from_step_six_starts_the_revision(tmp_path):
    """Step 7 adds the number to a database of step 6 (as the 1.0.0 upgrade tests carry
    every step, this checks what this step writes)."""
    url = f"sqlite:///{tmp_path / 'six.sqlite'}"
    storage = open_storage(make_settings(url, auth_cache="off"))
    try:
        storage.migrate()
    finally:
        storage.close()
    assert run_sql(url, "SELECT number FROM locky_meta WHERE key = 'cache_revision'") == [(1,)]
    assert run_sql(url, "SELECT number FROM locky_meta WHERE key = 'schema_version'") == [(LATEST,)]


@pytest.mark.server
@pytest.mark.backend
def test_two_servers_see_record_changes_at_once(postgres_database, tmp_path):
    postgres_database.wipe()
    env = one_service(postgres_database.url, tmp_path, LOCKY_AUTH_CACHE="revision", LOCKY_JWT_SECRET=TEST_SECRET,
                      LOCKY_ADMIN_EMAILS=ADMIN_EMAIL, LOCKY_BCRYPT_ROUNDS="4",
                      LOCKY_LOGIN_MAX_FAILURES_PER_IP="1000")
    with locky_server(tmp_path / "a", env=env) as a, locky_server(tmp_path / "b", env=env) as b:
        admin = a.sign_up(ADMIN_EMAIL, PASSWORD, verify=True)
        ada = a.sign_up("ada@example.com", PASSWORD)
        ada_id = a.request("GET", "/v1/internal/users/me", headers=ada)[2]["id"]

        def names_on_b() -> set[str]:
            names = set()
            for _ in range(6):  # both of B's workers, more than once
                status, _, body = b.request("GET", f"/v1/internal/users/{ada_id}", headers=admin)
                assert status == 200, body
                names.add(body["name"])
            return names

        def counts_on_b() -> set[int]:
            counts = set()
            for _ in range(6):
                status, _, body = b.request("GET", "/v1/internal/users/count", headers=admin)
                assert status == 200, body
                counts.add(body["count"])
            return counts

        stale = 0
        for round in range(10):
            names_on_b()
            assert a.request("PUT", f"/v1/private/users/{ada_id}", {"name": f"Ada {round}"}, admin)[0] == 200
            stale += len(names_on_b() - {f"Ada {round}"})
        assert stale == 0
        for round in range(5):  # a new user is counted by every worker of B at once
            assert counts_on_b() == {2 + round}
            a.sign_up(f"new{round}@example.com", PASSWORD)
            assert counts_on_b() == {3 + round}, f"round {round}"
        assert a.request("DELETE", f"/v1/private/users/{ada_id}", headers=admin)[0] == 204
        assert [b.request("GET", f"/v1/internal/users/{ada_id}", headers=admin)[0] for _ in range(6)] == [404] * 6
        assert counts_on_b() == {6}
    assert "Traceback" not in a.log() + b.log()
