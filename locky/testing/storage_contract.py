"""The storage contract suite: one set of tests of :class:`locky.providers.Storage`.

Every storage provider runs it, Locky's own on each engine included. Subclass
:class:`StorageContract` in a test module and override its ``storage`` fixture to
return an *empty* storage (a fresh one for every test)::

    from locky.testing.storage_contract import StorageContract

    class TestMyStorage(StorageContract):
        @pytest.fixture
        def storage(self, tmp_path):
            storage = MyStorage(...)
            yield storage
            storage.close()

Uniqueness and the login throttle must also hold across processes sharing one
database (every worker of ``locky serve --workers``, every host). Override
``storage_factory`` to return a *picklable* callable that opens your storage on the
database ``storage`` uses (a module-level function, or ``functools.partial`` of one);
the suite calls it in processes of their own (``multiprocessing``, ``spawn``) and races
them. A storage that lives in one process only (in memory) keeps the default ``None``,
and those tests skip::

        @pytest.fixture
        def storage_factory(self, tmp_path):
            return functools.partial(open_my_storage, f"sqlite:///{tmp_path / 'contract.sqlite'}")

The suite speaks only the ``Storage`` protocol: records in and out are
:mod:`locky.records` dataclasses and errors are :mod:`locky.errors`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from locky.errors import Conflict, Forbidden, Invalid, NotFound
from locky.providers import BuiltinRole, DocumentPages, Migration, SchemaState, Storage
from locky.records import (
    FAILED, MAX_ID, PENDING, SUCCEEDED, UUID4, AuditEvent, Authenticated, AuthorizationCode, Code, Consent, Delivery,
    Group, Letter, Member, OAuthClient, Page, Passkey, Permission, SigningKey, TotpState, User, Webhook, utcnow,
)
from locky.webhooks.patterns import selects

BUILTIN = (
    BuiltinRole("owner", "Owns a group", (Permission("groups", "write"), Permission("members", "write"))),
    BuiltinRole("member", "Belongs to a group", ()),
    BuiltinRole("viewer", "Reads a group", (Permission("groups", "read"),)),
)


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (naive ones are taken as UTC)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def aware_or_none(moment: datetime | None) -> datetime | None:
    """:func:`utc` of ``moment``, ``None`` kept."""
    return None if moment is None else utc(moment)


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def digest(text: str) -> str:
    """A code hash as Locky stores it: SHA-256 hex."""
    return hashlib.sha256(text.encode()).hexdigest()


def run_together(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Run ``call(i)`` for ``i`` in ``range(count)`` in threads released at once;
    return each result or the exception it raised."""
    barrier = threading.Barrier(count)

    def one(i):
        barrier.wait(timeout=30)
        try:
            return call(i)
        except Exception as exc:  # collected, asserted by the caller
            return exc

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


# -- across processes ----------------------------------------------------------------------

#: How many processes race, and how many times.
PROCESSES = 4
ROUNDS = 5
PROCESS_TIMEOUT = 180


def _outcome(call: Callable[[], Any]) -> tuple:
    """What a raced call did, as picklable data: ``("created", id)`` for a record,
    ``("conflict", fields)``, ``("error", text)`` for any other exception, else
    ``("value", result)``."""
    try:
        result = call()
    except Conflict as exc:
        return ("conflict", dict(exc.fields))
    except Exception as exc:  # reported to the parent, which fails the test with it
        return ("error", f"{type(exc).__name__}: {exc}")
    if hasattr(result, "id") and hasattr(result, "uuid"):
        return ("created", result.id)
    return ("value", result)


def _race_worker(factory, job, args, rounds, barrier, results, index) -> None:
    """One racing process: open the storage, then run ``job`` once per round, every
    process released together by ``barrier``."""
    try:
        storage = factory()
    except Exception as exc:
        results.put((index, [("error", f"opening the storage: {type(exc).__name__}: {exc}")]))
        barrier.abort()
        return
    outcomes = []
    try:
        for round_ in range(rounds):
            try:
                barrier.wait(timeout=PROCESS_TIMEOUT)
            except threading.BrokenBarrierError:
                outcomes.append(("error", "another process failed"))
                break
            outcomes.append(_outcome(lambda: job(storage, round_, index, *args)))
    finally:
        results.put((index, outcomes))
        try:
            storage.close()
        except Exception:
            pass


def race_in_processes(factory: Callable[[], Storage], job: Callable[..., Any], *args: Any,
                      processes: int = PROCESSES, rounds: int = ROUNDS) -> list[list[tuple]]:
    """Run ``job(storage, round, index, *args)`` in ``processes`` processes (``spawn``),
    each on a storage of its own from ``factory()``, all released together each round.
    Returns, per round, every process's :func:`_outcome`. ``factory``, ``job`` and
    ``args`` must be picklable (module-level functions)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    results = context.Queue()
    workers = [context.Process(target=_race_worker, args=(factory, job, args, rounds, barrier, results, i),
                               daemon=True) for i in range(processes)]
    for worker in workers:
        worker.start()
    try:
        collected = dict(results.get(timeout=PROCESS_TIMEOUT) for _ in workers)
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    errors = [o for outcomes in collected.values() for o in outcomes if o[0] == "error"]
    assert not errors, errors
    assert all(len(outcomes) == rounds for outcomes in collected.values()), collected
    return [[collected[i][r] for i in range(processes)] for r in range(rounds)]


def assert_one_created_per_round(rounds: list[list[tuple]], conflict: dict[str, str]) -> None:
    """Each round created exactly one record; every other process got ``conflict``."""
    for number, outcomes in enumerate(rounds):
        created = [o for o in outcomes if o[0] == "created"]
        assert len(created) == 1, f"round {number}: {len(created)} records created: {outcomes}"
        assert all(o == ("conflict", conflict) for o in outcomes if o[0] != "created"), outcomes


def register_in_race(storage, round_: int, index: int):
    """A racing process registers ``race<round>@example.com`` (odd processes in upper case)."""
    email = f"race{round_}@example.com"
    return storage.users.create(name=f"racer {index}", email=email.upper() if index % 2 else email,
                                password_hash="$2b$04$" + "x" * 53)


def create_group_in_race(storage, round_: int, index: int, owner_uuid: str):
    return storage.groups.create(name=f"racers {round_}", description="", owner_uuid=owner_uuid)


def use_code_in_race(storage, round_: int, index: int):
    """A racing process exchanges the authorization code ``race-<round>``: whether it won."""
    return storage.oauth_codes.use(digest(f"race-{round_}"), now=utcnow()) is not None


def use_passkey_in_race(storage, round_: int, index: int, passkey_id: int):
    """A racing process signs in with passkey ``passkey_id`` reporting the counter
    ``round + 2``: whether it won."""
    return storage.passkeys.use(passkey_id, sign_count=round_ + 2, now=utcnow()) is not None


def hit_in_race(storage, round_: int, index: int, limit: int):
    return [storage.throttle.hit(f"race{round_}@example.com", limit=limit, window=60) for _ in range(2)]


class StorageContract:
    """The tests every storage provider must pass. Override :meth:`storage`."""

    @pytest.fixture
    def storage(self) -> Storage:
        """An empty storage; subclasses override this fixture."""
        pytest.fail("a StorageContract subclass must override the `storage` fixture", pytrace=False)

    @pytest.fixture
    def storage_factory(self) -> Callable[[], Storage] | None:
        """A picklable callable that opens this storage on the database ``storage`` uses,
        in another process; ``None`` (the default) for a storage that lives in one
        process only: the cross-process tests then skip. Subclasses override it."""
        return None

    @pytest.fixture
    def other_processes(self, storage_factory) -> Callable[[], Storage]:
        if storage_factory is None:
            pytest.skip("this storage lives in one process (storage_factory is None): nothing to share across"
                        " processes")
        return storage_factory

    @pytest.fixture(autouse=True)
    def _migrated(self, request):
        """Every test but those marked ``unmigrated`` gets the storage as an app gets it:
        after ``migrate()`` (the app's startup step)."""
        if request.node.get_closest_marker("unmigrated") is None:
            request.getfixturevalue("storage").migrate()

    # -- helpers ----------------------------------------------------------------

    @pytest.fixture
    def seeded(self, storage) -> Storage:
        """``storage`` with the built-in roles of :data:`BUILTIN`."""
        storage.roles.sync_builtin(BUILTIN)
        return storage

    @staticmethod
    def user(storage, email: str = "ada@example.com", name: str = "Ada") -> User:
        return storage.users.create(name=name, email=email, password_hash="$2b$04$" + "x" * 53)

    @staticmethod
    def group(storage, owner: User, name: str = "engineers") -> Group:
        return storage.groups.create(name=name, description="Builds things", owner_uuid=owner.uuid)

    @staticmethod
    def assert_fresh_record(record, before: datetime) -> None:
        assert isinstance(record.id, int) and 0 < record.id <= MAX_ID
        assert UUID4.fullmatch(record.uuid), record.uuid
        assert record.deleted_at is None
        assert record.created_at == record.updated_at
        now = datetime.now(timezone.utc)
        assert before - timedelta(seconds=2) <= utc(record.created_at) <= now + timedelta(seconds=2)

    # -- storage ----------------------------------------------------------------

    def test_is_a_storage(self, storage):
        assert isinstance(storage, Storage)

    # -- schema -----------------------------------------------------------------

    @pytest.mark.unmigrated
    def test_a_new_storage_names_its_pending_steps(self, storage):
        state = storage.schema()
        assert isinstance(state, SchemaState) and state.latest >= 1 and not state.ahead
        assert [step.version for step in state.pending] == list(range(state.current + 1, state.latest + 1))
        assert all(isinstance(step, Migration) and step.description for step in state.pending)
        # A dry run says the same and changes nothing.
        assert storage.migrate(dry_run=True) == list(state.pending)
        assert storage.schema() == state

    @pytest.mark.unmigrated
    def test_migrate_reaches_the_latest_version_once(self, storage):
        pending = storage.schema().pending
        assert storage.migrate() == list(pending)
        after = storage.schema()
        assert (after.current, after.pending) == (after.latest, ())
        assert storage.migrate() == [] and storage.migrate(dry_run=True) == []

    @pytest.mark.unmigrated
    def test_processes_migrating_together_apply_each_step_once(self, storage):
        pending = storage.schema().pending
        results = run_together(4, lambda i: storage.migrate())
        assert not [r for r in results if isinstance(r, Exception)], results
        applied = sorted(step.version for result in results for step in result)
        assert applied == [step.version for step in pending]
        assert storage.schema().current == storage.schema().latest

    def test_ping(self, storage):
        assert storage.ping() is True

    def test_revision_is_an_integer(self, storage):
        assert isinstance(storage.revision(), int)

    # -- users ------------------------------------------------------------------

    def test_user_create_returns_the_stored_record(self, storage):
        before = datetime.now(timezone.utc)
        user = self.user(storage)
        self.assert_fresh_record(user, before)
        assert (user.name, user.email) == ("Ada", "ada@example.com")
        assert user.password_hash == "$2b$04$" + "x" * 53
        assert storage.users.get(user.id) == user
        assert storage.users.get_by_uuid(user.uuid) == user
        assert storage.users.get_by_email("ada@example.com") == user

    def test_user_timestamps_keep_microseconds(self, storage):
        user = self.user(storage)
        stored = storage.users.get(user.id)
        assert stored.created_at == user.created_at and stored.updated_at == user.updated_at

    def test_ids_grow_and_uuids_differ(self, storage):
        users = [self.user(storage, f"u{i}@example.com") for i in range(5)]
        ids = [u.id for u in users]
        assert ids == sorted(ids) and len(set(ids)) == 5
        assert len({u.uuid for u in users}) == 5

    def test_unknown_and_out_of_range_ids_are_none(self, storage):
        self.user(storage)
        for missing in (0, -1, 999_999, MAX_ID, MAX_ID + 1, 2**64):
            assert storage.users.get(missing) is None
        assert storage.users.get_by_uuid("00000000-0000-4000-8000-000000000000") is None
        assert storage.users.get_by_email("nobody@example.com") is None

    def test_unicode_round_trips(self, storage):
        name = "Zoë 🔒 Łukasz 中文"
        user = self.user(storage, "zoe@example.com", name=name)
        assert storage.users.get(user.id).name == name
        group = storage.groups.create(name="🔐 Ünïcode", description="描述 ✓", owner_uuid=user.uuid)
        assert storage.groups.get(group.id).name == "🔐 Ünïcode"
        assert storage.groups.list(name="🔐 Ünïcode").items == [group]

    def test_duplicate_email_is_a_conflict(self, storage):
        self.user(storage)
        with pytest.raises(Conflict) as caught:
            self.user(storage, name="Other Ada")
        assert caught.value.fields == {"email": "Already registered."}
        assert storage.users.count() == 1

    def test_email_uniqueness_ignores_case(self, storage):
        self.user(storage)
        with pytest.raises(Conflict):
            self.user(storage, "ADA@Example.COM")
        assert storage.users.get_by_email("Ada@Example.com").email == "ada@example.com"
        assert storage.users.count(email="ADA@EXAMPLE.COM") == 1

    def test_concurrent_registrations_of_one_email(self, storage):
        results = run_together(8, lambda i: self.user(storage, "race@example.com", name=f"racer {i}"))
        created = [r for r in results if isinstance(r, User)]
        conflicts = [r for r in results if isinstance(r, Conflict)]
        assert len(created) == 1, results
        assert len(conflicts) == 7, results
        assert all(c.fields == {"email": "Already registered."} for c in conflicts)
        assert storage.users.count(email="race@example.com") == 1

    def test_registrations_racing_across_processes(self, storage, other_processes):
        """Processes of their own (as workers and hosts are) register one email at the
        same moment, in varying case: exactly one succeeds each time. A check-then-insert
        guarded by a lock of one process fails this; a unique index holds."""
        rounds = race_in_processes(other_processes, register_in_race)
        assert_one_created_per_round(rounds, {"email": "Already registered."})
        for number in range(len(rounds)):
            assert storage.users.count(email=f"race{number}@example.com") == 1

    def test_user_update(self, storage):
        user = self.user(storage)
        time.sleep(0.002)
        updated = storage.users.update(user.id, name="Ada L.", email="ada.l@example.com")
        assert (updated.name, updated.email, updated.uuid, updated.created_at) == (
            "Ada L.", "ada.l@example.com", user.uuid, user.created_at)
        assert updated.updated_at > user.updated_at
        assert storage.users.get(user.id) == updated
        assert storage.users.get_by_email("ada@example.com") is None
        password = storage.users.update(user.id, password_hash="new-hash")
        assert password.password_hash == "new-hash" and password.email == "ada.l@example.com"

    def test_user_update_to_a_taken_email_is_a_conflict(self, storage):
        self.user(storage)
        other = self.user(storage, "bob@example.com", "Bob")
        with pytest.raises(Conflict) as caught:
            storage.users.update(other.id, email="ada@example.com")
        assert caught.value.fields == {"email": "Already registered."}
        assert storage.users.get(other.id).email == "bob@example.com"
        assert storage.users.update(other.id, email="bob@example.com").email == "bob@example.com"

    def test_user_update_of_missing_or_deleted_is_not_found(self, storage):
        user = self.user(storage)
        storage.users.delete(user.id)
        for missing in (user.id, user.id + 1000):
            with pytest.raises(NotFound):
                storage.users.update(missing, name="x")

    def test_user_get_many_by_uuid_reads_as_get_by_uuid_does(self, storage):
        ada, bob = self.user(storage), self.user(storage, "bob@example.com", "Bob")
        gone = self.user(storage, "gone@example.com", "Gone")
        storage.users.delete(gone.id)
        nobody = "00000000-0000-4000-8000-000000000000"
        asked = [bob.uuid, ada.uuid, gone.uuid, nobody, None, 7, ada.uuid]
        assert storage.users.get_many_by_uuid(iter(asked)) == {ada.uuid: ada, bob.uuid: bob}
        assert storage.users.get_many_by_uuid([]) == {}
        # More users than fit one list of values.
        many = [self.user(storage, f"u{i}@example.com", f"U{i}") for i in range(140)]
        assert storage.users.get_many_by_uuid([u.uuid for u in many]) == {u.uuid: u for u in many}

    def test_user_delete_is_soft_and_hides_the_user(self, storage):
        user = self.user(storage)
        keep = self.user(storage, "bob@example.com", "Bob")
        deleted = storage.users.delete(user.id)
        assert deleted.id == user.id and deleted.deleted_at is not None
        assert deleted.updated_at == deleted.deleted_at >= user.updated_at
        assert storage.users.get(user.id) is None
        assert storage.users.get_by_uuid(user.uuid) is None
        assert storage.users.get_by_email(user.email) is None
        assert storage.users.list().items == [keep]
        assert storage.users.count() == 1
        assert storage.users.count(email=user.email) == 0
        with pytest.raises(NotFound):
            storage.users.delete(user.id)

    def test_deleted_email_can_register_again(self, storage):
        first = self.user(storage)
        storage.users.delete(first.id)
        second = self.user(storage)
        assert second.id != first.id and second.uuid != first.uuid
        storage.users.delete(second.id)
        third = self.user(storage)
        assert storage.users.get_by_email("ada@example.com") == third

    # -- lists ------------------------------------------------------------------

    def test_list_pages_by_id(self, storage):
        users = [self.user(storage, f"u{i}@example.com") for i in range(7)]
        first = storage.users.list(limit=3)
        assert isinstance(first, Page)
        assert first.items == users[:3] and first.next_after_id == users[2].id
        second = storage.users.list(after_id=first.next_after_id, limit=3)
        assert second.items == users[3:6] and second.next_after_id == users[5].id
        last = storage.users.list(after_id=second.next_after_id, limit=3)
        assert last.items == users[6:] and last.next_after_id is None
        assert storage.users.list(after_id=users[-1].id).items == []

    def test_list_exact_multiple_of_limit_ends_with_none(self, storage):
        users = [self.user(storage, f"u{i}@example.com") for i in range(4)]
        page = storage.users.list(limit=2, after_id=users[1].id)
        assert page.items == users[2:] and page.next_after_id is None
        whole = storage.users.list(limit=4)
        assert whole.items == users and whole.next_after_id is None

    def test_list_defaults_and_after_id_between_ids(self, storage):
        users = [self.user(storage, f"u{i}@example.com") for i in range(3)]
        storage.users.delete(users[1].id)
        assert storage.users.list().items == [users[0], users[2]]
        assert storage.users.list(after_id=users[1].id).items == [users[2]]
        assert storage.users.list(limit=1).next_after_id == users[0].id

    def test_filters_are_exact(self, storage):
        owner = self.user(storage)
        self.user(storage, "ada2@example.com")
        assert [u.email for u in storage.users.list(email="ada@example.com").items] == ["ada@example.com"]
        assert storage.users.list(email="ada").items == []
        assert storage.users.count(email="ada") == 0
        self.group(storage, owner, "Admins")
        self.group(storage, owner, "admins")
        spaced = self.group(storage, owner, " admins ")
        assert [g.name for g in storage.groups.list(name="admins").items] == ["admins"]
        assert storage.groups.count(name="Admins") == 1
        assert storage.groups.list(name=" admins ").items == [spaced]
        assert storage.groups.count() == 3

    def test_text_is_stored_exactly(self, storage):
        owner = self.user(storage, name="  Ada  ")
        assert storage.users.get(owner.id).name == "  Ada  "
        group = storage.groups.create(name="two  spaces ", description="  line one\nline two\n",
                                      owner_uuid=owner.uuid)
        stored = storage.groups.get(group.id)
        assert (stored.name, stored.description) == ("two  spaces ", "  line one\nline two\n")

    def test_none_filters_are_ignored(self, storage):
        self.user(storage)
        assert storage.users.count(email=None) == 1
        assert len(storage.users.list(email=None).items) == 1

    def test_unknown_filters_are_a_value_error(self, seeded):
        owner = self.user(seeded)
        self.group(seeded, owner)
        for store, name in ((seeded.users, "name"), (seeded.groups, "description"), (seeded.members, "id"),
                            (seeded.roles, "builtin"), (seeded.users, "emial")):
            with pytest.raises(ValueError):
                store.list(**{name: "x"})
            with pytest.raises(ValueError):
                store.count(**{name: "x"})

    def test_none_in_updates_changes_nothing(self, seeded):
        user = self.user(seeded)
        assert seeded.users.update(user.id, name=None, email=None, password_hash=None) == user
        changed = seeded.users.update(user.id, name="Ada L.", email=None)
        assert (changed.name, changed.email) == ("Ada L.", user.email)
        group = self.group(seeded, user)
        assert seeded.groups.update(group.id, name=None, description=None) == group
        assert seeded.groups.update(group.id, name=None, description="new").name == "engineers"
        role = seeded.roles.create(name="auditor", description="Reads", permissions=(Permission("r", "read"),))
        kept = seeded.roles.update(role.id, name=None, description=None, permissions=None)
        assert (kept.name, kept.description, kept.permissions) == (role.name, role.description, role.permissions)

    # -- groups -----------------------------------------------------------------

    def test_group_create_makes_the_owner_a_member(self, seeded):
        owner = self.user(seeded)
        before = datetime.now(timezone.utc)
        group = self.group(seeded, owner)
        self.assert_fresh_record(group, before)
        assert (group.name, group.description) == ("engineers", "Builds things")
        assert seeded.groups.get(group.id) == group and seeded.groups.get_by_uuid(group.uuid) == group
        members = seeded.members.list(group_uuid=group.uuid).items
        assert [(m.user_uuid, m.role) for m in members] == [(owner.uuid, "owner")]
        assert seeded.members.role_of(owner.uuid, group.uuid) == "owner"

    def test_group_description_may_be_empty(self, storage):
        owner = self.user(storage)
        group = storage.groups.create(name="quiet", description="", owner_uuid=owner.uuid)
        assert storage.groups.get(group.id).description == ""

    def test_group_name_unique_among_live_groups(self, storage):
        owner = self.user(storage)
        group = self.group(storage, owner)
        with pytest.raises(Conflict) as caught:
            self.group(storage, owner)
        assert caught.value.fields == {"name": "Already exists."}
        storage.groups.delete(group.id)
        again = self.group(storage, owner)
        assert storage.groups.list(name="engineers").items == [again]

    def test_group_names_differ_by_case(self, storage):
        owner = self.user(storage)
        self.group(storage, owner, "Admins")
        self.group(storage, owner, "admins")
        assert storage.groups.count() == 2

    def test_concurrent_group_creation_of_one_name(self, storage):
        owner = self.user(storage)
        results = run_together(6, lambda i: self.group(storage, owner, "racers"))
        assert len([r for r in results if isinstance(r, Group)]) == 1, results
        assert all(list(r.fields) == ["name"] for r in results if not isinstance(r, Group)), results
        assert storage.groups.count(name="racers") == 1

    def test_group_names_racing_across_processes(self, storage, other_processes):
        owner = self.user(storage)
        rounds = race_in_processes(other_processes, create_group_in_race, owner.uuid)
        assert_one_created_per_round(rounds, {"name": "Already exists."})
        for number in range(len(rounds)):
            assert storage.groups.count(name=f"racers {number}") == 1

    def test_group_update(self, storage):
        owner = self.user(storage)
        group = self.group(storage, owner)
        other = self.group(storage, owner, "designers")
        time.sleep(0.002)
        updated = storage.groups.update(group.id, name="builders", description="")
        assert (updated.name, updated.description) == ("builders", "")
        assert updated.updated_at > group.updated_at
        with pytest.raises(Conflict) as caught:
            storage.groups.update(other.id, name="builders")
        assert caught.value.fields == {"name": "Already exists."}
        with pytest.raises(NotFound):
            storage.groups.update(other.id + 1000, name="x")

    def test_group_delete_ends_its_memberships(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        seeded.groups.delete(group.id)
        assert seeded.groups.get(group.id) is None
        assert seeded.members.count(group_uuid=group.uuid) == 0
        assert seeded.members.role_of(bob.uuid, group.uuid) is None
        assert seeded.members.count() == 0

    # -- members ----------------------------------------------------------------

    def test_member_create_and_read(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        before = datetime.now(timezone.utc)
        member = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer")
        self.assert_fresh_record(member, before)
        assert (member.group_uuid, member.user_uuid, member.role) == (group.uuid, bob.uuid, "viewer")
        assert seeded.members.get(member.id) == member
        assert seeded.members.get_by_uuid(member.uuid) == member
        assert seeded.members.role_of(bob.uuid, group.uuid) == "viewer"
        assert seeded.members.list(user_uuid=bob.uuid).items == [member]
        assert seeded.members.count(role="viewer") == 1
        assert seeded.members.count(group_uuid=group.uuid) == 2
        assert seeded.members.count(group_uuid=group.uuid, role="owner") == 1

    def test_member_needs_live_group_user_and_role(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        gone = self.group(seeded, owner, "gone")
        seeded.groups.delete(gone.id)
        nobody = "00000000-0000-4000-8000-000000000000"
        cases = [
            ({"group_uuid": nobody, "user_uuid": bob.uuid, "role": "member"}, "group_uuid"),
            ({"group_uuid": gone.uuid, "user_uuid": bob.uuid, "role": "member"}, "group_uuid"),
            ({"group_uuid": group.uuid, "user_uuid": nobody, "role": "member"}, "user_uuid"),
            ({"group_uuid": group.uuid, "user_uuid": bob.uuid, "role": "no-such-role"}, "role"),
        ]
        for arguments, field in cases:
            with pytest.raises(Invalid) as caught:
                seeded.members.create(**arguments)
            assert not isinstance(caught.value, Conflict)
            assert list(caught.value.fields) == [field], arguments
        seeded.users.delete(bob.id)
        with pytest.raises(Invalid) as caught:
            seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        assert list(caught.value.fields) == ["user_uuid"]

    def test_member_missing_references_are_reported_group_then_user_then_role(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        nobody = "00000000-0000-4000-8000-000000000000"
        cases = [
            ({"group_uuid": nobody, "user_uuid": nobody, "role": "no-such-role"}, "group_uuid"),
            ({"group_uuid": group.uuid, "user_uuid": nobody, "role": "no-such-role"}, "user_uuid"),
            ({"group_uuid": group.uuid, "user_uuid": bob.uuid, "role": "no-such-role"}, "role"),
        ]
        for arguments, field in cases:
            with pytest.raises(Invalid) as caught:
                seeded.members.create(**arguments)
            assert caught.value.fields == Invalid.missing(field).fields, arguments
        assert seeded.members.count(user_uuid=bob.uuid) == 0

    def test_member_create_joins_the_callers_atomic_block(self, seeded):
        # What Locky runs for POST /v1/private/members: the references read and the
        # policy asked, then the insert, in one block; an exception leaving the block
        # (a refusal, a failed audit write) undoes the insert and propagates as it is.
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        refusal = Forbidden("not you")
        with pytest.raises(Forbidden) as caught:
            with seeded.atomic():
                assert seeded.groups.get_by_uuid(group.uuid) == group
                assert seeded.users.get_by_uuid(bob.uuid) == bob
                assert seeded.members.role_of(owner.uuid, group.uuid) == "owner"
                member = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
                assert seeded.members.role_of(bob.uuid, group.uuid) == "member"  # the block sees its insert
                raise refusal
        assert caught.value is refusal
        assert seeded.members.get(member.id) is None and seeded.members.role_of(bob.uuid, group.uuid) is None
        assert seeded.members.count(group_uuid=group.uuid) == 1  # the owner only
        with seeded.atomic():
            kept = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        assert seeded.members.get(kept.id) == kept

    def memberships(self, seeded) -> tuple:
        """A small world of memberships: the owner of groups ``one``, ``two`` and a
        deleted one, ``gone``; bob in ``two`` (member) and then ``one`` (viewer); carol
        left ``two`` and was in ``gone``. With a uuid nobody has."""
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        carol = self.user(seeded, "carol@example.com", "Carol")
        one, two = self.group(seeded, owner, "one"), self.group(seeded, owner, "two")
        gone = self.group(seeded, owner, "gone")
        seeded.members.create(group_uuid=two.uuid, user_uuid=bob.uuid, role="member")
        seeded.members.create(group_uuid=one.uuid, user_uuid=bob.uuid, role="viewer")
        left = seeded.members.create(group_uuid=two.uuid, user_uuid=carol.uuid, role="member")
        seeded.members.delete(left.id)
        seeded.members.create(group_uuid=gone.uuid, user_uuid=carol.uuid, role="member")
        seeded.groups.delete(gone.id)  # ends carol's membership there
        return owner, bob, carol, one, two, gone, "00000000-0000-4000-8000-000000000000"

    def test_member_roles_in_reads_many_pairs_as_role_of_does(self, seeded):
        owner, bob, carol, one, two, gone, nobody = self.memberships(seeded)
        pairs = [(u.uuid, g.uuid) for u in (owner, bob, carol) for g in (one, two, gone)]
        pairs += [(bob.uuid, nobody), (nobody, one.uuid), (bob.uuid, one.uuid), (None, one.uuid), (bob.uuid, 7)]
        expected = {pair: seeded.members.role_of(*pair) for pair in pairs[:9]}
        assert seeded.members.roles_in(iter(pairs)) == {p: r for p, r in expected.items() if r is not None}
        assert seeded.members.roles_in(pairs) == {
            (owner.uuid, one.uuid): "owner", (owner.uuid, two.uuid): "owner",
            (bob.uuid, one.uuid): "viewer", (bob.uuid, two.uuid): "member"}
        assert seeded.members.roles_in([]) == {}
        # Many users and groups at once (more than fit one list of values).
        users = [self.user(seeded, f"u{i}@example.com", f"U{i}") for i in range(140)]
        for user in users[::3]:
            seeded.members.create(group_uuid=one.uuid, user_uuid=user.uuid, role="member")
        wanted = [(u.uuid, one.uuid) for u in users] + [(u.uuid, two.uuid) for u in users]
        assert seeded.members.roles_in(wanted) == {(u.uuid, one.uuid): "member" for u in users[::3]}

    def test_member_roles_by_group_are_role_of_in_every_group_up_to_the_bound(self, seeded):
        owner, bob, carol, one, two, gone, nobody = self.memberships(seeded)
        groups = (one, two, gone)
        for user in (owner, bob, carol):
            expected = {g.uuid: role for g in groups if (role := seeded.members.role_of(user.uuid, g.uuid))}
            assert seeded.members.roles_by_group(user.uuid, 64) == expected
        assert seeded.members.roles_by_group(owner.uuid, 64) == {one.uuid: "owner", two.uuid: "owner"}
        assert seeded.members.roles_by_group(bob.uuid, 64) == {one.uuid: "viewer", two.uuid: "member"}
        assert seeded.members.roles_by_group(carol.uuid, 64) == {}  # left one group, the other deleted
        assert seeded.members.roles_by_group(nobody, 64) == {}
        assert seeded.members.roles_by_group(None, 64) == {} and seeded.members.roles_by_group(7, 64) == {}
        # At the bound the roles are given; past it, None.
        assert seeded.members.roles_by_group(bob.uuid, 2) == {one.uuid: "viewer", two.uuid: "member"}
        assert seeded.members.roles_by_group(bob.uuid, 1) is None
        assert seeded.members.roles_by_group(carol.uuid, 0) == {}
        many = [self.group(seeded, bob, f"g{i}") for i in range(70)]
        found = seeded.members.roles_by_group(bob.uuid, 72)
        assert found == {one.uuid: "viewer", two.uuid: "member", **{g.uuid: "owner" for g in many}}
        assert seeded.members.roles_by_group(bob.uuid, 71) is None

    def test_a_user_with_their_roles_by_group_is_both_reads_in_one(self, seeded):
        owner, bob, carol, one, two, gone, nobody = self.memberships(seeded)
        for user in (owner, bob, carol):
            for at_most in (0, 1, 2, 64):
                assert seeded.members.user_with_roles_by_group(user.uuid, at_most) == (
                    seeded.users.get_by_uuid(user.uuid), seeded.members.roles_by_group(user.uuid, at_most))
        found, roles = seeded.members.user_with_roles_by_group(bob.uuid, 64)
        assert found == bob and roles == {one.uuid: "viewer", two.uuid: "member"}
        assert seeded.members.user_with_roles_by_group(bob.uuid, 1) == (bob, None)  # past the bound
        assert seeded.members.user_with_roles_by_group(carol.uuid, 0) == (carol, {})  # none left
        # No live user: none, whatever memberships the uuid had.
        dan = self.user(seeded, "dan@example.com", "Dan")
        seeded.members.create(group_uuid=one.uuid, user_uuid=dan.uuid, role="member")
        assert seeded.members.user_with_roles_by_group(dan.uuid, 64) == (dan, {one.uuid: "member"})
        seeded.users.delete(dan.id)
        for uuid in (dan.uuid, nobody, None, 7):
            assert seeded.members.user_with_roles_by_group(uuid, 64) == (None, {})
        many = [self.group(seeded, bob, f"g{i}") for i in range(70)]
        assert seeded.members.user_with_roles_by_group(bob.uuid, 72) == (
            bob, {one.uuid: "viewer", two.uuid: "member", **{g.uuid: "owner" for g in many}})
        assert seeded.members.user_with_roles_by_group(bob.uuid, 71) == (bob, None)

    def test_members_of_users_and_of_groups_read_many_at_once_as_lists_do(self, seeded):
        owner, bob, carol, one, two, gone, nobody = self.memberships(seeded)

        def listed(field: str, uuids: list[str]) -> list:
            """What the lists answer, user by user (or group by group), oldest first."""
            return sorted((m for uuid in uuids for m in seeded.members.list(limit=500, **{field: uuid}).items),
                          key=lambda m: m.id)

        asked_users = [bob.uuid, owner.uuid, carol.uuid, nobody, None, 7, bob.uuid]
        mine = seeded.members.of_users(iter(asked_users))
        assert mine == listed("user_uuid", [owner.uuid, bob.uuid])
        assert [(m.user_uuid, m.group_uuid, m.role) for m in mine] == [
            (owner.uuid, one.uuid, "owner"), (owner.uuid, two.uuid, "owner"),
            (bob.uuid, two.uuid, "member"), (bob.uuid, one.uuid, "viewer")]  # oldest first
        asked_groups = [two.uuid, one.uuid, gone.uuid, nobody, None, 7]
        inside = seeded.members.of_groups(iter(asked_groups))
        assert inside == listed("group_uuid", [one.uuid, two.uuid])
        assert [(m.user_uuid, m.group_uuid) for m in inside] == [
            (owner.uuid, one.uuid), (owner.uuid, two.uuid), (bob.uuid, two.uuid), (bob.uuid, one.uuid)]
        assert seeded.members.of_users([]) == [] and seeded.members.of_groups([carol.uuid]) == []
        # More users than fit one list of values, several memberships each.
        users = [self.user(seeded, f"u{i}@example.com", f"U{i}") for i in range(140)]
        for user in users[::2]:
            seeded.members.create(group_uuid=one.uuid, user_uuid=user.uuid, role="member")
            seeded.members.create(group_uuid=two.uuid, user_uuid=user.uuid, role="viewer")
        many = seeded.members.of_users([u.uuid for u in users])
        assert [(m.user_uuid, m.group_uuid) for m in many] == [
            (u.uuid, g.uuid) for u in users[::2] for g in (one, two)]
        assert [m.id for m in many] == sorted(m.id for m in many)

    def test_group_get_many_by_uuid_reads_as_get_by_uuid_does(self, seeded):
        owner = self.user(seeded)
        one, two = self.group(seeded, owner, "one"), self.group(seeded, owner, "two")
        gone = self.group(seeded, owner, "gone")
        seeded.groups.delete(gone.id)
        nobody = "00000000-0000-4000-8000-000000000000"
        asked = [two.uuid, one.uuid, gone.uuid, nobody, None, 7, one.uuid]
        assert seeded.groups.get_many_by_uuid(iter(asked)) == {one.uuid: one, two.uuid: two}
        assert seeded.groups.get_many_by_uuid([]) == {}
        many = [self.group(seeded, owner, f"g{i}") for i in range(140)]
        assert seeded.groups.get_many_by_uuid([g.uuid for g in many]) == {g.uuid: g for g in many}

    def test_one_live_membership_per_group_and_user(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        member = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        with pytest.raises(Conflict) as caught:
            seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer")
        assert caught.value.fields == {"user_uuid": "Already a member of this group."}
        seeded.members.delete(member.id)
        assert seeded.members.role_of(bob.uuid, group.uuid) is None
        again = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer")
        assert seeded.members.role_of(bob.uuid, group.uuid) == "viewer"
        assert seeded.members.list(user_uuid=bob.uuid).items == [again]

    def test_concurrent_memberships_of_one_user(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        results = run_together(6, lambda i: seeded.members.create(
            group_uuid=group.uuid, user_uuid=bob.uuid, role="member"))
        assert len([r for r in results if isinstance(r, Member)]) == 1, results
        assert all(isinstance(r, Conflict) for r in results if not isinstance(r, Member)), results
        assert seeded.members.count(user_uuid=bob.uuid) == 1

    def test_the_last_owner_cannot_leave(self, seeded):
        ada = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, ada)
        (ada_owner,) = seeded.members.list(group_uuid=group.uuid, role="owner").items
        with pytest.raises(Invalid) as caught:
            seeded.members.delete(ada_owner.id)
        assert list(caught.value.fields) == ["role"] and not isinstance(caught.value, Conflict)
        assert seeded.members.get(ada_owner.id) == ada_owner
        bob_owner = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="owner")
        seeded.members.delete(ada_owner.id)  # another owner stays
        assert seeded.members.list(group_uuid=group.uuid).items == [bob_owner]
        with pytest.raises(Invalid):
            seeded.members.delete(bob_owner.id)
        with pytest.raises(NotFound):
            seeded.members.delete(ada_owner.id)

    def test_owners_leaving_together_leave_one(self, seeded):
        users = [self.user(seeded, f"u{i}@example.com") for i in range(4)]
        group = self.group(seeded, users[0])
        for user in users[1:]:
            seeded.members.create(group_uuid=group.uuid, user_uuid=user.uuid, role="owner")
        owners = seeded.members.list(group_uuid=group.uuid).items
        results = run_together(len(owners), lambda i: seeded.members.delete(owners[i].id))
        assert len([r for r in results if isinstance(r, Member)]) == len(owners) - 1, results
        assert all(list(r.fields) == ["role"] for r in results if not isinstance(r, Member)), results
        assert seeded.members.count(group_uuid=group.uuid, role="owner") == 1

    def test_memberships_racing_deletes_end_with_them(self, seeded):
        """A membership added while its group, user or role is deleted: either the add
        fails (missing reference) or the delete ends it (group, user) or refuses
        (role): never a live membership on a deleted record."""
        owner = self.user(seeded)
        for trial in range(3):
            group = self.group(seeded, owner, f"g{trial}")
            users = [self.user(seeded, f"t{trial}-{i}@example.com") for i in range(3)]
            role = seeded.roles.create(name=f"r{trial}", description="", permissions=())
            doomed = self.group(seeded, owner, f"doomed{trial}")
            calls = [
                lambda: seeded.members.create(group_uuid=doomed.uuid, user_uuid=users[0].uuid, role="member"),
                lambda: seeded.groups.delete(doomed.id),
                lambda: seeded.members.create(group_uuid=group.uuid, user_uuid=users[1].uuid, role="member"),
                lambda: seeded.users.delete(users[1].id),
                lambda: seeded.members.create(group_uuid=group.uuid, user_uuid=users[2].uuid, role=role.name),
                lambda: seeded.roles.delete(role.id),
            ]
            results = run_together(len(calls), lambda i: calls[i]())
            assert not [r for r in results if isinstance(r, Exception) and not isinstance(r, Invalid)], results
            assert seeded.members.count(group_uuid=doomed.uuid) == 0
            assert seeded.members.count(user_uuid=users[1].uuid) == 0
            held = seeded.members.count(role=role.name)
            assert held == (0 if seeded.roles.get(role.id) is None else 1), results

    def test_user_delete_ends_memberships_and_sessions(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        seeded.sessions.create(uuid="11111111-1111-4111-8111-111111111111", user_uuid=bob.uuid, refresh_jti="j1")
        seeded.users.delete(bob.id)
        assert seeded.members.count(user_uuid=bob.uuid) == 0
        assert seeded.members.role_of(bob.uuid, group.uuid) is None
        assert seeded.sessions.identity("11111111-1111-4111-8111-111111111111") is None
        assert seeded.members.count(group_uuid=group.uuid) == 1

    # -- roles ------------------------------------------------------------------

    def test_sync_builtin_inserts_updates_and_retires(self, storage):
        storage.roles.sync_builtin(BUILTIN)
        roles = {r.name: r for r in storage.roles.list().items}
        assert set(roles) == {"owner", "member", "viewer"}
        assert all(r.builtin for r in roles.values())
        assert roles["owner"].permissions == (Permission("groups", "write"), Permission("members", "write"))
        storage.roles.sync_builtin(BUILTIN)  # idempotent
        assert storage.roles.count() == 3
        changed = (BuiltinRole("owner", "Runs a group", (Permission("groups", "write"),)), BUILTIN[1])
        storage.roles.sync_builtin(changed)
        roles = {r.name: r for r in storage.roles.list().items}
        assert set(roles) == {"owner", "member"}
        assert roles["owner"].description == "Runs a group"
        assert roles["owner"].permissions == (Permission("groups", "write"),)
        assert storage.roles.list(name="viewer").items == []

    def test_custom_role_lifecycle(self, seeded):
        revision = seeded.revision()
        permissions = (Permission("reports", "read"), Permission("reports", "export"))
        before = datetime.now(timezone.utc)
        role = seeded.roles.create(name="auditor", description="Reads reports", permissions=permissions)
        self.assert_fresh_record(role, before)
        assert (role.name, role.description, role.permissions, role.builtin) == (
            "auditor", "Reads reports", permissions, False)
        assert seeded.roles.get(role.id) == role
        assert seeded.revision() > revision
        assert seeded.roles.custom_permissions() == {"auditor": permissions}
        with pytest.raises(Conflict) as caught:
            seeded.roles.create(name="auditor", description="", permissions=())
        assert caught.value.fields == {"name": "Already exists."}

        revision = seeded.revision()
        updated = seeded.roles.update(role.id, description="Audits", permissions=(Permission("*", "read"),))
        assert updated.permissions == (Permission("*", "read"),) and updated.description == "Audits"
        assert seeded.revision() > revision
        assert seeded.roles.custom_permissions() == {"auditor": (Permission("*", "read"),)}

        revision = seeded.revision()
        seeded.roles.delete(role.id)
        assert seeded.revision() > revision
        assert seeded.roles.custom_permissions() == {}
        assert seeded.roles.create(name="auditor", description="", permissions=()).name == "auditor"

    def test_role_permissions_keep_their_order(self, storage):
        permissions = (Permission("b", "write"), Permission("a", "read"), Permission("b", "read"))
        role = storage.roles.create(name="mixer", description="", permissions=iter(permissions))
        assert role.permissions == permissions
        assert storage.roles.get(role.id).permissions == permissions
        assert storage.roles.list(name="mixer").items == [role]

    def test_builtin_roles_cannot_change(self, seeded):
        owner = seeded.roles.list(name="owner").items[0]
        for call in (lambda: seeded.roles.update(owner.id, description="mine"),
                     lambda: seeded.roles.delete(owner.id)):
            with pytest.raises(Invalid) as caught:
                call()
            assert not isinstance(caught.value, Conflict)
        assert seeded.roles.get(owner.id) == owner

    def test_role_held_by_a_live_membership(self, seeded):
        ada = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, ada)
        role = seeded.roles.create(name="auditor", description="", permissions=())
        member = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="auditor")
        with pytest.raises(Invalid):
            seeded.roles.delete(role.id)
        with pytest.raises(Invalid):
            seeded.roles.update(role.id, name="inspector")
        assert seeded.roles.update(role.id, description="still held").description == "still held"
        seeded.members.delete(member.id)
        assert seeded.roles.update(role.id, name="inspector").name == "inspector"
        seeded.roles.delete(role.id)
        assert seeded.roles.get(role.id) is None

    def test_role_held_by_a_grant(self, seeded):
        ada = self.user(seeded)
        role = seeded.roles.create(name="auditor", description="", permissions=(Permission("reports", "read"),))
        seeded.grants.grant(ada.uuid, "auditor")
        for call in (lambda: seeded.roles.delete(role.id), lambda: seeded.roles.update(role.id, name="inspector")):
            with pytest.raises(Invalid) as caught:
                call()
            assert list(caught.value.fields) == ["name"] and not isinstance(caught.value, Conflict)
        assert seeded.roles.get(role.id) == role
        seeded.grants.revoke(ada.uuid, "auditor")
        seeded.roles.delete(role.id)
        # A new role of the name starts with nobody holding it.
        seeded.roles.create(name="auditor", description="", permissions=())
        assert seeded.grants.roles_of(ada.uuid) == frozenset()
        assert seeded.members.count(role="auditor") == 0

    def test_grant_holders(self, storage):
        ada, bob = self.user(storage), self.user(storage, "bob@example.com", "Bob")
        assert storage.grants.holders("admin") == []
        storage.grants.grant(ada.uuid, "admin")
        storage.grants.grant(bob.uuid, "admin")
        storage.grants.grant(bob.uuid, "auditor")
        assert sorted(storage.grants.holders("admin")) == sorted([ada.uuid, bob.uuid])
        assert storage.grants.holders("auditor") == [bob.uuid]
        storage.grants.revoke(ada.uuid, "admin")
        assert storage.grants.holders("admin") == [bob.uuid]

    def test_grant_holders_by_id_pages_the_holders_of_roles(self, storage):
        users = [self.user(storage, f"holder{i}@example.com", f"Holder {i}") for i in range(6)]
        for user in users[0:5:2]:
            storage.grants.grant(user.uuid, "admin")
        for user in users[1:4]:  # users[2] holds both
            storage.grants.grant(user.uuid, "auditor")
        storage.grants.grant("client:reports", "auditor")  # a client, no user
        pairs = sorted((user.id, user.uuid) for user in users[:5])
        both = ["admin", "auditor"]
        assert storage.grants.holders_by_id(both, 0, 50) == pairs
        assert storage.grants.holders_by_id(iter(both), 0, 2) == pairs[:2]
        assert storage.grants.holders_by_id(both, pairs[1][0], 2) == pairs[2:4]
        assert storage.grants.holders_by_id(both, pairs[3][0], 2) == pairs[4:]
        assert storage.grants.holders_by_id(both, pairs[4][0], 2) == []
        assert storage.grants.holders_by_id(["auditor"], 0, 50) == sorted((u.id, u.uuid) for u in users[1:4])
        assert storage.grants.holders_by_id(["auditor", "auditor"], 0, 1) == [(users[1].id, users[1].uuid)]
        assert storage.grants.holders_by_id([], 0, 50) == []
        assert storage.grants.holders_by_id(["nobody"], 0, 50) == []
        # Many roles at once (a policy whose every custom role allows it): more than
        # SQLite's 500 terms of a compound SELECT, holders at both ends.
        many = [f"role{i:03d}" for i in range(600)]
        storage.grants.grant(users[5].uuid, many[-1])
        storage.grants.grant(users[4].uuid, many[0])
        assert storage.grants.holders_by_id(many, 0, 50) == [(users[4].id, users[4].uuid),
                                                             (users[5].id, users[5].uuid)]
        assert storage.grants.holders_by_id([*many, "auditor"], users[3].id - 1, 2) == [
            (users[3].id, users[3].uuid), (users[4].id, users[4].uuid)]
        storage.grants.revoke(users[2].uuid, "admin")  # still an auditor
        storage.grants.revoke(users[4].uuid, "admin")
        assert storage.grants.holders_by_id(["admin"], 0, 50) == [(users[0].id, users[0].uuid)]
        assert storage.grants.holders_by_id(both, 0, 50) == pairs[:4]

    def test_member_holders_by_id_pages_a_groups_holders_of_roles(self, seeded):
        owner = self.user(seeded)
        group, other = self.group(seeded, owner), self.group(seeded, owner, "others")
        users = [self.user(seeded, f"member{i}@example.com", f"Member {i}") for i in range(4)]
        for user, role in zip(users, ("member", "viewer", "member", "member")):
            seeded.members.create(group_uuid=group.uuid, user_uuid=user.uuid, role=role)
        seeded.members.create(group_uuid=other.uuid, user_uuid=users[1].uuid, role="member")
        left = seeded.members.list(group_uuid=group.uuid, user_uuid=users[3].uuid).items[0]
        seeded.members.delete(left.id)  # no longer a member
        members = [(owner.id, owner.uuid), (users[0].id, users[0].uuid), (users[2].id, users[2].uuid)]
        assert seeded.members.holders_by_id(group.uuid, ["member", "owner"], 0, 50) == members
        assert seeded.members.holders_by_id(group.uuid, iter(["owner", "member"]), 0, 2) == members[:2]
        assert seeded.members.holders_by_id(group.uuid, ["member", "owner"], members[1][0], 2) == members[2:]
        assert seeded.members.holders_by_id(group.uuid, ["viewer"], 0, 50) == [(users[1].id, users[1].uuid)]
        assert seeded.members.holders_by_id(other.uuid, ["member"], 0, 50) == [(users[1].id, users[1].uuid)]
        assert seeded.members.holders_by_id(group.uuid, [], 0, 50) == []
        assert seeded.members.holders_by_id(None, ["member"], 0, 50) == []

    # -- sessions ---------------------------------------------------------------

    SESSION = "22222222-2222-4222-8222-222222222222"

    def test_session_identity_and_revoke(self, storage):
        user = self.user(storage)
        session = storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1")
        assert (session.uuid, session.user_uuid, session.refresh_jti, session.revoked_at) == (
            self.SESSION, user.uuid, "jti-1", None)
        found, owner = storage.sessions.identity(self.SESSION)
        assert found.uuid == self.SESSION and owner == user
        assert storage.sessions.identity("33333333-3333-4333-8333-333333333333") is None
        assert storage.sessions.revoke(self.SESSION) is True
        assert storage.sessions.revoke(self.SESSION) is False
        assert storage.sessions.identity(self.SESSION) is None

    def test_authenticate_reads_session_user_and_revision(self, storage):
        user = self.user(storage)
        session = storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1")
        found = storage.sessions.authenticate(self.SESSION)
        assert isinstance(found, Authenticated)
        assert found == Authenticated(session=session, user=user, policy_revision=storage.revision())
        assert isinstance(found.policy_revision, int) and not isinstance(found.policy_revision, bool)

    def test_authenticate_sees_policy_changes(self, storage):
        user = self.user(storage)
        storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1")
        before = storage.sessions.authenticate(self.SESSION).policy_revision
        storage.roles.create(name="auditor", description="", permissions=(Permission("reports", "read"),))
        after = storage.sessions.authenticate(self.SESSION).policy_revision
        assert after > before and after == storage.revision()
        storage.grants.grant(user.uuid, "admin")
        assert storage.sessions.authenticate(self.SESSION).policy_revision > after

    def test_authenticate_refuses_what_is_not_live(self, storage):
        user = self.user(storage)
        other = self.user(storage, "bob@example.com", "Bob")
        storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1")
        kept = "44444444-4444-4444-8444-444444444444"
        storage.sessions.create(uuid=kept, user_uuid=other.uuid, refresh_jti="jti-2")
        for unknown in ("33333333-3333-4333-8333-333333333333", "", "not a uuid"):
            assert storage.sessions.authenticate(unknown) is None, unknown
        for not_text in (None, 123, b"bytes", [self.SESSION]):
            assert storage.sessions.authenticate(not_text) is None, not_text
        storage.sessions.revoke(self.SESSION)
        assert storage.sessions.authenticate(self.SESSION) is None
        storage.users.delete(other.id)
        assert storage.sessions.authenticate(kept) is None

    def test_revoke_all_keeps_one_session_at_most(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        mine = [f"5555555{i}-5555-4555-8555-555555555555" for i in range(3)]
        for n, uuid in enumerate(mine):
            storage.sessions.create(uuid=uuid, user_uuid=ada.uuid, refresh_jti=f"j{n}")
        other = "66666666-6666-4666-8666-666666666666"
        storage.sessions.create(uuid=other, user_uuid=bob.uuid, refresh_jti="jb")
        storage.sessions.revoke(mine[2])
        assert storage.sessions.revoke_all(ada.uuid, keep=mine[0]) == 1
        assert storage.sessions.authenticate(mine[0]) is not None
        assert storage.sessions.authenticate(mine[1]) is None
        assert storage.sessions.rotate(mine[1], "j1", "j1-next") is False
        assert storage.sessions.authenticate(other) is not None  # another user's
        assert storage.sessions.revoke_all(ada.uuid, keep=mine[0]) == 0
        assert storage.sessions.revoke_all(ada.uuid) == 1
        assert storage.sessions.authenticate(mine[0]) is None
        assert storage.sessions.revoke_all(ada.uuid) == 0
        assert storage.sessions.revoke_all("77777777-7777-4777-8777-777777777777") == 0
        assert storage.sessions.authenticate(other) is not None

    def test_session_rotation_is_single_use(self, storage):
        user = self.user(storage)
        storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1")
        assert storage.sessions.rotate(self.SESSION, "jti-1", "jti-2") is True
        assert storage.sessions.identity(self.SESSION)[0].refresh_jti == "jti-2"
        # The old token again: refused, and the whole session is revoked.
        assert storage.sessions.rotate(self.SESSION, "jti-1", "jti-3") is False
        assert storage.sessions.identity(self.SESSION) is None
        assert storage.sessions.rotate(self.SESSION, "jti-2", "jti-4") is False

    def test_concurrent_rotations_let_one_through(self, storage):
        user = self.user(storage)
        storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1")
        results = run_together(6, lambda i: storage.sessions.rotate(self.SESSION, "jti-1", f"next-{i}"))
        assert results.count(True) == 1, results
        assert all(r in (True, False) for r in results), results

    def test_a_session_of_the_openid_provider_keeps_its_client_scope_and_amr(self, storage):
        user = self.user(storage)
        op = "a0000000-0000-4000-8000-000000000000"
        made = storage.sessions.create(uuid=op, user_uuid=user.uuid, refresh_jti="op-1", amr=["pwd", "otp"])
        assert (made.client_id, made.scope, made.op_session_uuid, made.amr) == (None, None, None, ("pwd", "otp"))
        login = storage.sessions.create(uuid=self.SESSION, user_uuid=user.uuid, refresh_jti="jti-1",
                                        client_id="s6BhdRkqt3", scope="openid email offline_access",
                                        op_session_uuid=op, amr=("pwd",))
        assert (login.uuid, login.user_uuid, login.refresh_jti, login.revoked_at) == (
            self.SESSION, user.uuid, "jti-1", None)
        assert (login.client_id, login.scope, login.op_session_uuid, login.amr) == (
            "s6BhdRkqt3", "openid email offline_access", op, ("pwd",))
        # Read back whole by every read of a session, as created.
        assert storage.sessions.authenticate(self.SESSION).session == login
        assert storage.sessions.identity(self.SESSION) == (login, user)
        assert storage.sessions.authenticate(op).session == made
        # A login of the /v1 API names none of them.
        plain = storage.sessions.create(uuid="b0000000-0000-4000-8000-000000000000", user_uuid=user.uuid,
                                        refresh_jti="jti-2")
        assert (plain.client_id, plain.scope, plain.op_session_uuid, plain.amr) == (None, None, None, ())
        assert storage.sessions.authenticate(plain.uuid).session == plain
        # Rotation keeps them.
        assert storage.sessions.rotate(self.SESSION, "jti-1", "jti-3") is True
        rotated = storage.sessions.authenticate(self.SESSION).session
        assert (rotated.refresh_jti, rotated.client_id, rotated.scope, rotated.op_session_uuid, rotated.amr) == (
            "jti-3", "s6BhdRkqt3", "openid email offline_access", op, ("pwd",))

    def test_ending_an_op_session_ends_the_logins_it_gave(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        op, other_op = "a0000000-0000-4000-8000-000000000000", "a1111111-1111-4111-8111-111111111111"
        storage.sessions.create(uuid=op, user_uuid=ada.uuid, refresh_jti="op", amr=["pwd"])
        storage.sessions.create(uuid=other_op, user_uuid=ada.uuid, refresh_jti="op2", amr=["pwd"])
        given = [f"c000000{i}-0000-4000-8000-000000000000" for i in range(3)]
        for n, uuid in enumerate(given):
            storage.sessions.create(uuid=uuid, user_uuid=ada.uuid, refresh_jti=f"j{n}", client_id=f"client-{n}",
                                    scope="openid", op_session_uuid=op, amr=["pwd"])
        elsewhere = "d0000000-0000-4000-8000-000000000000"  # from the other OP session
        storage.sessions.create(uuid=elsewhere, user_uuid=ada.uuid, refresh_jti="je", client_id="client-0",
                                scope="openid", op_session_uuid=other_op)
        api = "e0000000-0000-4000-8000-000000000000"  # a login of the /v1 API
        storage.sessions.create(uuid=api, user_uuid=ada.uuid, refresh_jti="ja")
        bobs = "f0000000-0000-4000-8000-000000000000"
        storage.sessions.create(uuid=bobs, user_uuid=bob.uuid, refresh_jti="jb", client_id="client-0",
                                scope="openid", op_session_uuid=bobs)
        storage.sessions.revoke(given[2])  # already ended: not counted again
        assert storage.sessions.end_op_session(op) == 3
        for uuid in (op, *given):
            assert storage.sessions.authenticate(uuid) is None, uuid
        assert storage.sessions.rotate(given[0], "j0", "j0-next") is False
        for uuid in (other_op, elsewhere, api, bobs):
            assert storage.sessions.authenticate(uuid) is not None, uuid
        assert storage.sessions.end_op_session(op) == 0
        for unknown in ("99999999-9999-4999-8999-999999999999", "", None, 7):
            assert storage.sessions.end_op_session(unknown) == 0

    def test_revoke_client_ends_its_logins(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        sessions = {
            "a0000000-0000-4000-8000-000000000000": (ada, "app"),
            "a1111111-1111-4111-8111-111111111111": (ada, "app"),
            "b0000000-0000-4000-8000-000000000000": (bob, "app"),
            "c0000000-0000-4000-8000-000000000000": (ada, "other"),
            "d0000000-0000-4000-8000-000000000000": (ada, None),  # the API's, or an OP session
        }
        for n, (uuid, (user, client_id)) in enumerate(sessions.items()):
            storage.sessions.create(uuid=uuid, user_uuid=user.uuid, refresh_jti=f"j{n}", client_id=client_id,
                                    scope=None if client_id is None else "openid")

        def live() -> set[str]:
            return {uuid for uuid in sessions if storage.sessions.authenticate(uuid) is not None}

        # A user withdrawing consent: their logins of that client only.
        assert storage.sessions.revoke_client("app", user_uuid=ada.uuid) == 2
        assert live() == {"b0000000-0000-4000-8000-000000000000", "c0000000-0000-4000-8000-000000000000",
                          "d0000000-0000-4000-8000-000000000000"}
        assert storage.sessions.revoke_client("app", user_uuid=ada.uuid) == 0
        # A deleted client: every user's.
        storage.sessions.create(uuid="e0000000-0000-4000-8000-000000000000", user_uuid=ada.uuid,
                                refresh_jti="je", client_id="app", scope="openid")
        assert storage.sessions.revoke_client("app") == 2
        assert live() == {"c0000000-0000-4000-8000-000000000000", "d0000000-0000-4000-8000-000000000000"}
        assert storage.sessions.revoke_client("app") == 0
        assert storage.sessions.revoke_client("missing") == 0
        for not_text in (None, 5, b"other"):
            assert storage.sessions.revoke_client(not_text) == 0
        assert live() == {"c0000000-0000-4000-8000-000000000000", "d0000000-0000-4000-8000-000000000000"}

    # -- login throttle ---------------------------------------------------------

    def test_throttle_counts_within_the_window(self, storage):
        key = "ada@example.com"
        assert [storage.throttle.hit(key, limit=3, window=60) for _ in range(3)] == [None] * 3
        wait = storage.throttle.hit(key, limit=3, window=60)
        assert isinstance(wait, int) and 1 <= wait <= 61
        assert storage.throttle.hit("bob@example.com", limit=3, window=60) is None
        storage.throttle.reset(key)
        assert storage.throttle.hit(key, limit=3, window=60) is None
        storage.throttle.reset("never-seen@example.com")

    def test_throttle_window_expires(self, storage):
        key = "ada@example.com"
        assert storage.throttle.hit(key, limit=2, window=2) is None
        assert storage.throttle.hit(key, limit=2, window=2) is None
        time.sleep(2.1)
        # A fresh count: two attempts again (a count that went on would lock after one).
        assert [storage.throttle.hit(key, limit=2, window=2) for _ in range(2)] == [None, None]

    def test_throttle_locks_with_backoff_and_the_lock_ends(self, storage):
        throttle, key = storage.throttle, "ada@example.com"
        assert [throttle.hit(key, limit=2, window=16) for _ in range(2)] == [None, None]
        assert throttle.hit(key, limit=2, window=16) == 1  # window / 16
        time.sleep(1.05)
        assert throttle.hit(key, limit=2, window=16) is None  # the lock ended; counted
        assert throttle.hit(key, limit=2, window=16) == 2  # twice as long now
        time.sleep(2.05)
        assert throttle.hit(key, limit=2, window=16) is None
        assert throttle.hit(key, limit=2, window=16) == 4

    def test_throttle_refused_attempts_do_not_extend_the_lock(self, storage):
        throttle, key = storage.throttle, "ada@example.com"
        begun = time.monotonic()  # the lock (window / 16: 1 s) ends no sooner than begun + 1
        assert throttle.hit(key, limit=1, window=16) is None
        started = time.monotonic()  # and no later than started + 1
        refused = 0
        while time.monotonic() - started < 0.8:
            found = throttle.hit(key, limit=1, window=16)
            if time.monotonic() - begun < 1.0:  # answered while the lock held, however slow the machine
                assert found == 1
                refused += 1
            time.sleep(0.05)
        assert refused > 0
        time.sleep(max(0.0, 1.05 - (time.monotonic() - started)))
        assert throttle.hit(key, limit=1, window=16) is None

    def test_throttle_reset_and_forgive(self, storage):
        throttle, key = storage.throttle, "ip:192.0.2.1"
        assert throttle.reset(key) is False
        throttle.forgive(key)  # nothing to forgive: no error, nothing made
        assert [throttle.hit(key, limit=2, window=60) for _ in range(2)] == [None, None]
        throttle.forgive(key)  # one of the two succeeded: one more may try
        assert throttle.hit(key, limit=2, window=60) is None
        assert isinstance(throttle.hit(key, limit=2, window=60), int)
        assert throttle.reset(key) is True
        assert throttle.hit(key, limit=2, window=60) is None

    def test_throttle_reset_prefix(self, storage):
        throttle = storage.throttle
        keys = ["a_b@example.com|ip:192.0.2.1", "a_b@example.com|ip:2001:db8::", "a_b@example.com",
                "axb@example.com|ip:192.0.2.1", "A_B@example.com|ip:192.0.2.9", "ip:192.0.2.1"]
        for key in keys:
            assert throttle.hit(key, limit=1, window=60) is None
            assert throttle.hit(key, limit=1, window=60) is not None  # locked now
        assert throttle.reset_prefix("a_b@example.com|") == 2
        assert throttle.reset_prefix("a_b@example.com|") == 0
        assert throttle.reset_prefix("") == 0
        # Forgotten: counted afresh. Untouched ("_" is no wildcard, case counts): still locked.
        assert throttle.hit("a_b@example.com|ip:192.0.2.1", limit=1, window=60) is None
        for key in keys[2:]:
            assert throttle.hit(key, limit=1, window=60) is not None, key

    def test_throttle_prunes_ended_keys(self, storage):
        throttle = storage.throttle
        for n in range(5):
            assert throttle.hit(f"gone{n}@example.com", limit=5, window=1) is None
        assert throttle.prune(window=1) == 0  # two windows have not passed yet
        time.sleep(2.05)
        assert throttle.prune(window=1, batch=2) == 2
        assert throttle.hit("new@example.com", limit=5, window=1) is None  # prunes the rest itself
        assert throttle.prune(window=1) == 0
        assert throttle.reset("new@example.com") is True  # the live key stayed
        assert throttle.reset("gone4@example.com") is False

    def test_throttle_is_atomic(self, storage):
        results = run_together(8, lambda i: storage.throttle.hit("race@example.com", limit=5, window=60))
        assert results.count(None) == 5, results
        assert all(isinstance(r, int) for r in results if r is not None), results

    def test_quota_lets_limit_through_per_window_without_backoff(self, storage):
        throttle, key = storage.throttle, "signup:ip:192.0.2.1"
        assert [throttle.take(key, limit=3, window=60) for _ in range(3)] == [None] * 3
        wait = throttle.take(key, limit=3, window=60)
        assert isinstance(wait, int) and 55 <= wait <= 60, wait  # until the window ends
        assert throttle.take(key, limit=3, window=60) is not None  # refused, not counted
        assert throttle.take("signup:ip:192.0.2.2", limit=3, window=60) is None  # keys apart
        assert throttle.reset(key) is True
        assert throttle.take(key, limit=3, window=60) is None

    def test_quota_window_ends_and_starts_afresh(self, storage):
        throttle, key = storage.throttle, "recovery:ip:192.0.2.1"
        assert [throttle.take(key, limit=2, window=1) for _ in range(3)][2] == 1
        time.sleep(1.05)
        # A new window: ``limit`` again, no longer lock for having been over.
        assert [throttle.take(key, limit=2, window=1) for _ in range(3)] == [None, None, 1]

    def test_quota_outlives_the_pruning_of_shorter_login_windows(self, storage):
        """A quota of an hour is not forgotten when logins counted in a window of one
        second prune the store (their new keys, and prune()): its requests stay spent."""
        throttle, key = storage.throttle, "signup:ip:192.0.2.1"
        assert [throttle.take(key, limit=2, window=3600) for _ in range(2)] == [None, None]
        assert throttle.hit("old@example.com", limit=5, window=1) is None
        time.sleep(2.05)
        assert throttle.hit("new@example.com", limit=5, window=1) is None  # prunes what ended
        assert throttle.prune(window=1) == 0
        assert throttle.reset("old@example.com") is False  # the ended login key went
        assert throttle.take(key, limit=2, window=3600) is not None

    def test_quota_is_atomic(self, storage):
        results = run_together(8, lambda i: storage.throttle.take("signup:ip:192.0.2.9", limit=5, window=60))
        assert results.count(None) == 5, results
        assert all(isinstance(r, int) for r in results if r is not None), results

    def test_throttle_counts_across_processes(self, storage, other_processes):
        """Failed logins counted by several processes at once: the lock comes after
        exactly ``limit`` attempts, whichever processes made them."""
        limit = 3
        rounds = race_in_processes(other_processes, hit_in_race, limit)
        for number, outcomes in enumerate(rounds):
            hits = [hit for kind, value in outcomes for hit in value]
            assert hits.count(None) == limit, (number, outcomes)
            assert all(isinstance(h, int) and h >= 1 for h in hits if h is not None), (number, outcomes)
            assert storage.throttle.reset(f"race{number}@example.com") is True

    # -- grants -----------------------------------------------------------------

    def test_grants(self, storage):
        user = self.user(storage)
        assert storage.grants.roles_of(user.uuid) == frozenset()
        revision = storage.revision()
        assert storage.grants.grant(user.uuid, "admin") is True
        assert storage.revision() > revision
        assert storage.grants.grant(user.uuid, "admin") is False
        assert storage.grants.roles_of(user.uuid) == frozenset({"admin"})
        revision = storage.revision()
        assert storage.grants.revoke(user.uuid, "admin") is True
        assert storage.revision() > revision
        assert storage.grants.revoke(user.uuid, "admin") is False
        assert storage.grants.roles_of(user.uuid) == frozenset()

    def test_concurrent_grants(self, storage):
        user = self.user(storage)
        results = run_together(6, lambda i: storage.grants.grant(user.uuid, "admin"))
        assert results.count(True) == 1 and results.count(False) == 5, results

    # -- account lifecycle: users (docs/http/accounts.md) ------------------------

    def test_new_users_have_the_lifecycle_flags_off(self, storage):
        user = self.user(storage)
        for found in (user, storage.users.get(user.id), storage.users.get_by_uuid(user.uuid),
                      storage.users.get_by_email(user.email), storage.users.list().items[0]):
            assert (found.email_verified, found.disabled, found.mfa_enabled) == (False, False, False), found

    def test_user_update_sets_email_verified_and_disabled(self, storage):
        user = self.user(storage)
        verified = storage.users.update(user.id, email_verified=True)
        assert (verified.email_verified, verified.disabled) == (True, False)
        assert storage.users.get(user.id).email_verified is True
        disabled = storage.users.update(user.id, disabled=True)
        assert (disabled.email_verified, disabled.disabled, disabled.mfa_enabled) == (True, True, False)
        assert storage.users.get(user.id).disabled is True
        assert storage.users.get_by_email(user.email).disabled is True
        enabled = storage.users.update(user.id, disabled=False, name="Ada L.")
        assert (enabled.name, enabled.email_verified, enabled.disabled) == ("Ada L.", True, False)
        assert storage.users.get(user.id) == enabled

    def test_a_new_email_clears_email_verified(self, storage):
        user = self.user(storage)
        storage.users.update(user.id, email_verified=True)
        # The same address, another field: still verified.
        assert storage.users.update(user.id, email="ada@example.com").email_verified is True
        assert storage.users.update(user.id, name="Ada L.").email_verified is True
        assert storage.users.update(user.id, password_hash="new-hash").email_verified is True
        moved = storage.users.update(user.id, email="ada.l@example.com")
        assert (moved.email, moved.email_verified) == ("ada.l@example.com", False)
        assert storage.users.get(user.id).email_verified is False
        # Unless the same call sets it.
        storage.users.update(user.id, email_verified=True)
        proved = storage.users.update(user.id, email="ada.lovelace@example.com", email_verified=True)
        assert (proved.email, proved.email_verified) == ("ada.lovelace@example.com", True)
        assert storage.users.get(user.id).email_verified is True
        # A change refused as a conflict changes nothing, the flag included.
        self.user(storage, "bob@example.com", "Bob")
        with pytest.raises(Conflict):
            storage.users.update(user.id, email="bob@example.com")
        assert storage.users.get(user.id) == proved

    def test_mark_verified(self, storage):
        user = self.user(storage)
        other = self.user(storage, "bob@example.com", "Bob")
        marked = storage.users.mark_verified(user.uuid, "ada@example.com")
        assert isinstance(marked, User)
        assert (marked.id, marked.uuid, marked.email, marked.email_verified) == (
            user.id, user.uuid, "ada@example.com", True)
        assert storage.users.get(user.id) == marked
        again = storage.users.mark_verified(user.uuid, "ada@example.com")  # a second time: still verified
        assert again is not None and again.email_verified is True
        assert storage.users.get(other.id).email_verified is False

    def test_mark_verified_with_a_stale_email_changes_nothing(self, storage):
        user = self.user(storage)
        moved = storage.users.update(user.id, email="ada.l@example.com")
        assert storage.users.mark_verified(user.uuid, "ada@example.com") is None
        assert storage.users.get(user.id) == moved and moved.email_verified is False
        assert storage.users.mark_verified("00000000-0000-4000-8000-000000000000", "ada.l@example.com") is None
        assert storage.users.mark_verified(user.uuid, "ada.l@example.com").email_verified is True
        storage.users.delete(user.id)
        assert storage.users.mark_verified(user.uuid, "ada.l@example.com") is None

    def test_for_update_reads_the_live_user(self, storage):
        user = self.user(storage)
        assert storage.users.for_update(user.uuid) == user
        moved = storage.users.update(user.id, password_hash="$2b$04$" + "y" * 53, email="ada.l@example.com")
        locked = storage.users.for_update(user.uuid)
        assert locked == moved and locked.password_hash == "$2b$04$" + "y" * 53
        assert storage.users.for_update("00000000-0000-4000-8000-000000000000") is None
        assert storage.users.for_update(7) is None
        storage.users.delete(user.id)
        assert storage.users.for_update(user.uuid) is None

    def test_for_update_holds_other_writes_until_the_block_ends(self, storage):
        """A check on the locked row and the write that follows it are one step: a
        concurrent update of that user waits for the block, and never lands between."""
        user = self.user(storage)
        locked, released = threading.Event(), threading.Event()
        seen: list[str] = []

        def holder():
            with storage.atomic():
                current = storage.users.for_update(user.uuid)
                locked.set()
                released.wait(5)
                time.sleep(0.2)  # the other writer has had time to try
                seen.append(current.name)
                storage.users.update(current.id, name=current.name + " (held)")

        def writer():
            locked.wait(5)
            released.set()
            storage.users.update(user.id, name="Bob")
            seen.append("wrote")

        with ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(holder), pool.submit(writer)]:
                future.result(30)
        assert seen == ["Ada", "wrote"]  # the writer finished after the holder's block
        assert storage.users.get(user.id).name == "Bob"

    def test_group_for_update_reads_the_live_group(self, storage):
        ada = self.user(storage)
        group = self.group(storage, ada)
        assert storage.groups.for_update(group.uuid) == group
        renamed = storage.groups.update(group.id, name="builders")
        assert storage.groups.for_update(group.uuid) == renamed
        assert storage.groups.for_update("00000000-0000-4000-8000-000000000000") is None
        assert storage.groups.for_update(7) is None
        storage.groups.delete(group.id)
        assert storage.groups.for_update(group.uuid) is None

    def test_group_for_update_holds_membership_removals_until_the_block_ends(self, seeded):
        """A decision on the group's memberships (the caller's own role there) and the
        write that follows it are one step: a membership of the group removed meanwhile
        waits for the block."""
        storage = seeded
        ada = self.user(storage)
        group = self.group(storage, ada)
        bob = self.user(storage, "bob@example.com", "Bob")
        member = storage.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        locked, released = threading.Event(), threading.Event()
        seen: list[str] = []

        def holder():
            with storage.atomic():
                storage.groups.for_update(group.uuid)
                locked.set()
                released.wait(5)
                time.sleep(0.2)  # the remover has had time to try
                seen.append(storage.members.role_of(bob.uuid, group.uuid))

        def remover():
            locked.wait(5)
            released.set()
            storage.members.delete(member.id)
            seen.append("removed")

        with ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(holder), pool.submit(remover)]:
                future.result(30)
        assert seen == ["member", "removed"]
        assert storage.members.role_of(bob.uuid, group.uuid) is None

    # -- codes ------------------------------------------------------------------

    def test_code_add_and_find(self, storage):
        user = self.user(storage)
        before = datetime.now(timezone.utc)
        expires = (utcnow() + timedelta(hours=1)).replace(microsecond=0)
        code = storage.codes.add(code_hash=digest("one"), purpose="verify", user_uuid=user.uuid,
                                 email="ada@example.com", expires_at=expires)
        assert isinstance(code, Code)
        assert (code.code_hash, code.purpose, code.user_uuid, code.email, code.used_at) == (
            digest("one"), "verify", user.uuid, "ada@example.com", None)
        assert utc(code.expires_at) == utc(expires)
        assert before - timedelta(seconds=2) <= utc(code.created_at) <= datetime.now(timezone.utc) + timedelta(seconds=2)
        found = storage.codes.find(digest("one"), "verify", now=utcnow())
        assert found == code
        assert storage.codes.find(digest("two"), "verify", now=utcnow()) is None

    def test_code_find_respects_purpose_and_expiry(self, storage):
        user = self.user(storage)
        expires = (utcnow() + timedelta(minutes=30)).replace(microsecond=0)
        storage.codes.add(code_hash=digest("one"), purpose="reset", user_uuid=user.uuid,
                          email=user.email, expires_at=expires)
        assert storage.codes.find(digest("one"), "verify", now=utcnow()) is None
        assert storage.codes.find(digest("one"), "mfa", now=utcnow()) is None
        assert storage.codes.find(digest("one"), "reset", now=expires - timedelta(seconds=1)).purpose == "reset"
        assert storage.codes.find(digest("one"), "reset", now=expires) is None  # it must expire *after* now
        assert storage.codes.find(digest("one"), "reset", now=expires + timedelta(seconds=1)) is None
        assert storage.codes.use(digest("one"), "reset", now=expires + timedelta(seconds=1)) is None
        assert storage.codes.use(digest("one"), "verify", now=utcnow()) is None
        # Neither refused use spent it.
        assert storage.codes.find(digest("one"), "reset", now=utcnow()) is not None

    def test_code_is_used_once(self, storage):
        user = self.user(storage)
        code = storage.codes.add(code_hash=digest("one"), purpose="verify", user_uuid=user.uuid,
                                 email=user.email, expires_at=utcnow() + timedelta(hours=1))
        used = storage.codes.use(digest("one"), "verify", now=utcnow())
        assert isinstance(used, Code) and used.used_at is not None
        assert (used.code_hash, used.purpose, used.user_uuid, used.email) == (
            code.code_hash, code.purpose, code.user_uuid, code.email)
        assert utc(used.expires_at) == utc(code.expires_at)
        assert storage.codes.find(digest("one"), "verify", now=utcnow()) is None
        assert storage.codes.use(digest("one"), "verify", now=utcnow()) is None

    def test_concurrent_uses_of_one_code_let_one_through(self, storage):
        user = self.user(storage)
        storage.codes.add(code_hash=digest("race"), purpose="reset", user_uuid=user.uuid,
                          email=user.email, expires_at=utcnow() + timedelta(hours=1))
        results = run_together(8, lambda i: storage.codes.use(digest("race"), "reset", now=utcnow()))
        assert len([r for r in results if isinstance(r, Code)]) == 1, results
        assert results.count(None) == 7, results

    def test_code_count_since(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        start = utcnow() - timedelta(seconds=1)
        expires = utcnow() + timedelta(hours=1)
        for n, (user, purpose) in enumerate([(ada, "reset"), (ada, "reset"), (ada, "verify"), (bob, "reset")]):
            storage.codes.add(code_hash=digest(f"c{n}"), purpose=purpose, user_uuid=user.uuid,
                              email=user.email, expires_at=expires)
        storage.codes.use(digest("c0"), "reset", now=utcnow())  # used codes count too
        assert storage.codes.count_since(ada.uuid, "reset", start) == 2
        assert storage.codes.count_since(ada.uuid, "verify", start) == 1
        assert storage.codes.count_since(ada.uuid, "mfa", start) == 0
        assert storage.codes.count_since(bob.uuid, "reset", start) == 1
        assert storage.codes.count_since(ada.uuid, "reset", utcnow() + timedelta(minutes=5)) == 0
        assert storage.codes.count_since("00000000-0000-4000-8000-000000000000", "reset", start) == 0

    def test_adding_a_code_prunes_codes_expired_a_day_ago(self, storage):
        user = self.user(storage)
        now = utcnow()
        for name, expires in (("old", now - timedelta(days=2)), ("recent", now - timedelta(hours=1))):
            storage.codes.add(code_hash=digest(name), purpose="verify", user_uuid=user.uuid,
                              email=user.email, expires_at=expires)
        storage.codes.add(code_hash=digest("fresh"), purpose="verify", user_uuid=user.uuid,
                          email=user.email, expires_at=now + timedelta(hours=1))
        # Looked up as of a moment before they expired: the old one is gone, not just expired.
        assert storage.codes.find(digest("old"), "verify", now=now - timedelta(days=3)) is None
        assert storage.codes.find(digest("recent"), "verify", now=now - timedelta(hours=2)) is not None
        assert storage.codes.find(digest("fresh"), "verify", now=now) is not None

    # -- outbox -----------------------------------------------------------------

    def test_outbox_put_and_claim(self, storage):
        user = self.user(storage)
        before = datetime.now(timezone.utc)
        first = storage.outbox.put(purpose="verify", email="ada@example.com", user_uuid=user.uuid)
        second = storage.outbox.put(purpose="reset", email="nobody@example.com")
        assert isinstance(first, Letter) and isinstance(first.id, int) and first.id > 0
        assert (first.purpose, first.email, first.user_uuid, first.attempts) == (
            "verify", "ada@example.com", user.uuid, 0)
        assert (second.purpose, second.email, second.user_uuid, second.attempts) == (
            "reset", "nobody@example.com", "", 0)
        assert second.id != first.id
        assert before - timedelta(seconds=2) <= utc(first.created_at) <= datetime.now(timezone.utc) + timedelta(seconds=2)
        assert storage.outbox.pending() == 2
        claimed = storage.outbox.claim(now=utcnow(), lease=60)
        assert claimed == [dataclasses.replace(first, attempts=1), dataclasses.replace(second, attempts=1)]
        assert storage.outbox.claim(now=utcnow(), lease=60) == []  # both are held
        assert storage.outbox.pending() == 2  # held letters still wait

    def test_outbox_claim_honours_due_at_and_limit(self, storage):
        letters = [storage.outbox.put(purpose="verify", email=f"u{i}@example.com") for i in range(3)]
        # A minute ago none was due yet.
        assert storage.outbox.claim(now=utcnow() - timedelta(minutes=1), lease=60) == []
        now = utcnow()
        assert [l.id for l in storage.outbox.claim(now=now, lease=60, limit=2)] == [l.id for l in letters[:2]]
        assert [l.id for l in storage.outbox.claim(now=now, lease=60, limit=2)] == [letters[2].id]
        assert storage.outbox.claim(now=now, lease=60, limit=2) == []

    def test_outbox_lease_lets_a_letter_go_when_it_ends(self, storage):
        letter = storage.outbox.put(purpose="reset", email="ada@example.com")
        now = utcnow()
        assert [(l.id, l.attempts) for l in storage.outbox.claim(now=now, lease=30)] == [(letter.id, 1)]
        assert storage.outbox.claim(now=now + timedelta(seconds=29), lease=30) == []
        later = now + timedelta(seconds=31)  # the sender died: its lease ended
        assert [(l.id, l.attempts) for l in storage.outbox.claim(now=later, lease=30)] == [(letter.id, 2)]
        assert storage.outbox.claim(now=later, lease=30) == []
        assert [l.attempts for l in storage.outbox.claim(now=later + timedelta(seconds=31), lease=30)] == [3]
        assert storage.outbox.pending() == 1

    def test_outbox_retry_makes_a_letter_due_at_the_given_time(self, storage):
        letter = storage.outbox.put(purpose="verify", email="ada@example.com")
        now = utcnow()
        assert [l.attempts for l in storage.outbox.claim(now=now, lease=30)] == [1]
        storage.outbox.retry(letter.id, due_at=now + timedelta(seconds=120))
        # The lease has ended, but the letter is not due yet.
        assert storage.outbox.claim(now=now + timedelta(seconds=60), lease=30) == []
        assert [(l.id, l.attempts) for l in storage.outbox.claim(now=now + timedelta(seconds=121), lease=300)] == [
            (letter.id, 2)]
        # retry releases the letter: due again at once though the lease would run on.
        storage.outbox.retry(letter.id, due_at=now + timedelta(seconds=122))
        assert [l.attempts for l in storage.outbox.claim(now=now + timedelta(seconds=123), lease=300)] == [3]
        assert storage.outbox.pending() == 1

    def test_outbox_done_forgets_a_letter(self, storage):
        first = storage.outbox.put(purpose="verify", email="ada@example.com")
        second = storage.outbox.put(purpose="verify", email="bob@example.com")
        now = utcnow()
        assert len(storage.outbox.claim(now=now, lease=30)) == 2
        storage.outbox.done(first.id)
        assert storage.outbox.pending() == 1
        assert [l.id for l in storage.outbox.claim(now=now + timedelta(hours=1), lease=30)] == [second.id]
        storage.outbox.done(second.id)
        assert storage.outbox.pending() == 0
        assert storage.outbox.claim(now=now + timedelta(days=1), lease=30) == []

    def test_concurrent_claims_never_share_a_letter(self, storage):
        letters = [storage.outbox.put(purpose="verify", email=f"u{i}@example.com") for i in range(20)]
        now = utcnow()
        results = run_together(8, lambda i: storage.outbox.claim(now=now, lease=60, limit=5))
        assert not [r for r in results if isinstance(r, Exception)], results
        ids = [letter.id for result in results for letter in result]
        assert len(ids) == len(set(ids)), results
        ids += [letter.id for letter in storage.outbox.claim(now=now, lease=60, limit=20)]
        assert sorted(ids) == sorted(letter.id for letter in letters)
        # Each letter was claimed once: its lease is the first, its attempts one.
        again = storage.outbox.claim(now=now + timedelta(seconds=61), lease=60, limit=20)
        assert sorted((l.id, l.attempts) for l in again) == sorted((l.id, 2) for l in letters)

    # -- TOTP -------------------------------------------------------------------

    RECOVERY = tuple(digest(f"recovery-{n}") for n in range(3))

    def confirmed_totp(self, storage, user: User, step: int = 1000) -> User:
        assert storage.totp.begin(user.uuid, "sealed-secret") is True
        return storage.totp.confirm(user.uuid, step=step, recovery_hashes=self.RECOVERY)

    def test_totp_begin_replaces_a_pending_secret(self, storage):
        user = self.user(storage)
        assert storage.totp.get(user.uuid) is None
        assert storage.totp.begin(user.uuid, "sealed-one") is True
        state = storage.totp.get(user.uuid)
        assert isinstance(state, TotpState)
        assert (state.user_uuid, state.secret, state.confirmed, tuple(state.recovery_hashes)) == (
            user.uuid, "sealed-one", False, ())
        assert storage.totp.begin(user.uuid, "sealed-two") is True
        assert (storage.totp.get(user.uuid).secret, storage.totp.get(user.uuid).confirmed) == ("sealed-two", False)
        assert storage.users.get(user.id).mfa_enabled is False

    def test_totp_confirm_enables_mfa(self, storage):
        user = self.user(storage)
        other = self.user(storage, "bob@example.com", "Bob")
        storage.totp.begin(user.uuid, "sealed-secret")
        confirmed = storage.totp.confirm(user.uuid, step=1000, recovery_hashes=iter(self.RECOVERY))
        assert isinstance(confirmed, User)
        assert (confirmed.id, confirmed.uuid, confirmed.mfa_enabled) == (user.id, user.uuid, True)
        assert storage.users.get(user.id).mfa_enabled is True
        assert storage.users.get(user.id) == confirmed
        assert storage.users.get(other.id).mfa_enabled is False
        state = storage.totp.get(user.uuid)
        assert (state.secret, state.confirmed, state.last_step) == ("sealed-secret", True, 1000)
        assert sorted(state.recovery_hashes) == sorted(self.RECOVERY)
        # Confirmed: a new secret is refused and nothing changes; no second confirmation.
        assert storage.totp.begin(user.uuid, "sealed-other") is False
        assert storage.totp.get(user.uuid) == state
        assert storage.totp.confirm(user.uuid, step=2000, recovery_hashes=()) is None
        assert storage.totp.get(user.uuid) == state

    def test_totp_confirm_needs_a_pending_secret(self, storage):
        user = self.user(storage)
        assert storage.totp.confirm(user.uuid, step=1000, recovery_hashes=self.RECOVERY) is None
        assert storage.totp.get(user.uuid) is None
        assert storage.users.get(user.id).mfa_enabled is False

    def test_totp_use_step_accepts_each_step_once(self, storage):
        user = self.user(storage)
        self.confirmed_totp(storage, user, step=1000)
        assert storage.totp.use_step(user.uuid, 1000) is False  # the confirming code
        assert storage.totp.use_step(user.uuid, 999) is False
        assert storage.totp.use_step(user.uuid, 1001) is True
        assert storage.totp.use_step(user.uuid, 1001) is False
        assert storage.totp.use_step(user.uuid, 1003) is True
        assert storage.totp.use_step(user.uuid, 1002) is False  # before the last one
        assert storage.totp.get(user.uuid).last_step == 1003
        nobody = self.user(storage, "bob@example.com", "Bob")
        assert storage.totp.use_step(nobody.uuid, 5000) is False

    def test_concurrent_uses_of_one_step_let_one_through(self, storage):
        user = self.user(storage)
        self.confirmed_totp(storage, user, step=1000)
        results = run_together(8, lambda i: storage.totp.use_step(user.uuid, 1001))
        assert results.count(True) == 1 and results.count(False) == 7, results
        assert storage.totp.get(user.uuid).last_step == 1001

    def test_totp_recovery_codes_work_once(self, storage):
        user = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        assert storage.totp.use_recovery(user.uuid, self.RECOVERY[0]) is False  # no TOTP at all
        self.confirmed_totp(storage, user)
        assert storage.totp.use_recovery(user.uuid, self.RECOVERY[0]) is True
        assert storage.totp.use_recovery(user.uuid, self.RECOVERY[0]) is False
        assert storage.totp.use_recovery(user.uuid, digest("never issued")) is False
        assert storage.totp.use_recovery(bob.uuid, self.RECOVERY[1]) is False  # another user's
        assert sorted(storage.totp.get(user.uuid).recovery_hashes) == sorted(self.RECOVERY[1:])
        assert storage.totp.use_recovery(user.uuid, self.RECOVERY[2]) is True
        assert storage.totp.get(user.uuid).confirmed is True

    def test_concurrent_uses_of_one_recovery_code_let_one_through(self, storage):
        user = self.user(storage)
        self.confirmed_totp(storage, user)
        results = run_together(8, lambda i: storage.totp.use_recovery(user.uuid, self.RECOVERY[1]))
        assert results.count(True) == 1 and results.count(False) == 7, results

    def test_totp_remove_clears_mfa(self, storage):
        user = self.user(storage)
        self.confirmed_totp(storage, user)
        removed = storage.totp.remove(user.uuid)
        assert isinstance(removed, User) and (removed.id, removed.mfa_enabled) == (user.id, False)
        assert storage.users.get(user.id).mfa_enabled is False
        assert storage.totp.get(user.uuid) is None
        assert storage.totp.remove(user.uuid) is None
        assert storage.totp.use_step(user.uuid, 5000) is False
        # A pending secret can be removed too, and a new one begun after.
        assert storage.totp.begin(user.uuid, "sealed-again") is True
        assert storage.totp.remove(user.uuid).mfa_enabled is False
        assert storage.totp.get(user.uuid) is None
        assert storage.totp.begin(user.uuid, "sealed-third") is True

    # -- signing keys -------------------------------------------------------------

    @staticmethod
    def signing_key(kid: str, *, alg: str = "ES256", created_at: datetime | None = None) -> SigningKey:
        """A key as the core makes it: a public JWK as JSON text (keys in the core's order,
        not sorted) and a sealed private half, opaque to storage (a sealed RSA key runs to
        a few kilobytes). ``created_at`` naive UTC, with microseconds."""
        if alg == "RS256":
            jwk = {"kty": "RSA", "kid": kid, "alg": alg, "use": "sig", "n": "u1SU1LfVLPHCozMxH2Mo" * 18, "e": "AQAB"}
        else:
            jwk = {"kty": "EC", "kid": kid, "alg": alg, "use": "sig", "crv": "P-256",
                   "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
        sealed = "locky-sealed:v1:" + digest(kid) + ":" + "gAAAAABmZ-Q3_x9+/k=" * (120 if alg == "RS256" else 16)
        return SigningKey(kid=kid, alg=alg, public_jwk=json.dumps(jwk), private_key=sealed,
                          created_at=created_at if created_at is not None else utcnow())

    @staticmethod
    def key_fields(key: SigningKey) -> tuple:
        """Every field, times as aware UTC (naive and aware ones compare alike)."""
        return (key.kid, key.alg, key.public_jwk, key.private_key, utc(key.created_at),
                None if key.retired_at is None else utc(key.retired_at))

    def test_an_empty_key_store_has_no_key(self, storage):
        for alg in ("ES256", "RS256", "EdDSA"):
            assert storage.keys.active(alg) is None
        assert storage.keys.all() == []
        assert storage.keys.prune(utcnow() + timedelta(days=365)) == 0

    def test_key_rotation_retires_the_replaced_key(self, storage):
        k1 = self.signing_key("k1", created_at=utcnow() - timedelta(days=1))
        first = storage.keys.rotate(k1, replacing=None)
        assert isinstance(first, SigningKey) and self.key_fields(first) == self.key_fields(k1)
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(k1)
        assert [self.key_fields(k) for k in storage.keys.all()] == [self.key_fields(k1)]

        before = datetime.now(timezone.utc)
        k2 = self.signing_key("k2")
        second = storage.keys.rotate(k2, replacing="k1")
        after = datetime.now(timezone.utc)
        assert isinstance(second, SigningKey) and self.key_fields(second) == self.key_fields(k2)
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(k2)
        old, new = storage.keys.all()
        assert self.key_fields(new) == self.key_fields(k2) and new.retired_at is None
        # k1 is kept, retired now (or as of k2's creation): it still verifies what it signed.
        assert old.retired_at is not None
        assert self.key_fields(old)[:5] == self.key_fields(k1)[:5]
        assert before - timedelta(seconds=2) <= utc(old.retired_at) <= after + timedelta(seconds=2)
        assert utc(old.retired_at) >= utc(k1.created_at)

    def test_a_stale_key_rotation_changes_nothing(self, storage):
        k1 = self.signing_key("k1", created_at=utcnow() - timedelta(days=1))
        storage.keys.rotate(k1, replacing=None)
        k2 = self.signing_key("k2")
        storage.keys.rotate(k2, replacing="k1")
        stored = [self.key_fields(k) for k in storage.keys.all()]

        # Another process rotated k1 away already: its key stays, and is the answer.
        stale = storage.keys.rotate(self.signing_key("k3"), replacing="k1")
        assert isinstance(stale, SigningKey) and self.key_fields(stale) == self.key_fields(k2)
        # "No key yet" is stale too once a key is active.
        first = storage.keys.rotate(self.signing_key("kx"), replacing=None)
        assert isinstance(first, SigningKey) and self.key_fields(first) == self.key_fields(k2)
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(k2)
        assert [self.key_fields(k) for k in storage.keys.all()] == stored

    def test_concurrent_key_rotations_agree_on_one_key(self, storage):
        k1 = self.signing_key("k1", created_at=utcnow() - timedelta(days=1))
        storage.keys.rotate(k1, replacing=None)
        candidates = [self.signing_key(f"race-{i}") for i in range(8)]
        results = run_together(8, lambda i: storage.keys.rotate(candidates[i], replacing="k1"))
        assert all(isinstance(r, SigningKey) for r in results), results
        winners = {self.key_fields(r) for r in results}
        assert len(winners) == 1, results  # every host signs with the same key
        winner = results[0]
        assert winner.kid in {c.kid for c in candidates} and winner.retired_at is None
        assert self.key_fields(winner) == self.key_fields(next(c for c in candidates if c.kid == winner.kid))
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(winner)
        stored = storage.keys.all()
        assert [k.kid for k in stored] == ["k1", winner.kid]  # the losers' keys were not kept
        assert [k.retired_at is None for k in stored] == [False, True]

    def test_concurrent_first_key_rotations_agree_on_one_key(self, storage):
        candidates = [self.signing_key(f"first-{i}") for i in range(8)]
        results = run_together(8, lambda i: storage.keys.rotate(candidates[i], replacing=None))
        assert all(isinstance(r, SigningKey) for r in results), results
        assert len({self.key_fields(r) for r in results}) == 1, results
        winner = results[0]
        assert winner.kid in {c.kid for c in candidates} and winner.retired_at is None
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(winner)
        assert [self.key_fields(k) for k in storage.keys.all()] == [self.key_fields(winner)]

    def test_signing_keys_round_trip_oldest_first(self, storage):
        base = utcnow().replace(microsecond=0) - timedelta(days=3)
        keys = [
            self.signing_key("es-1", created_at=base + timedelta(microseconds=123457)),
            self.signing_key("rs-2", alg="RS256", created_at=base + timedelta(days=1, microseconds=1)),
            self.signing_key("es-3", created_at=base + timedelta(days=2, microseconds=999999)),
        ]
        assert storage.keys.rotate(keys[0], replacing=None).kid == "es-1"
        assert storage.keys.rotate(keys[1], replacing=None).kid == "rs-2"  # the first of its family
        assert storage.keys.rotate(keys[2], replacing="es-1").kid == "es-3"
        stored = storage.keys.all()
        assert all(isinstance(k, SigningKey) for k in stored)
        assert [k.kid for k in stored] == ["es-1", "rs-2", "es-3"]
        for made, kept in zip(keys, stored):
            # Texts exactly as handed in (storage never parses or re-serializes them),
            # times to the microsecond.
            assert (kept.kid, kept.alg, kept.public_jwk, kept.private_key) == (
                made.kid, made.alg, made.public_jwk, made.private_key)
            assert utc(kept.created_at) == utc(made.created_at)
        assert len(stored[1].private_key) > 2000
        assert json.loads(stored[0].public_jwk)["kid"] == "es-1"
        assert [k.retired_at is None for k in stored] == [False, True, True]
        # A retired key's retired_at reads back the same each time.
        again = storage.keys.all()
        assert [self.key_fields(k) for k in again] == [self.key_fields(k) for k in stored]
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(stored[2])
        assert self.key_fields(storage.keys.active("RS256")) == self.key_fields(stored[1])

    def test_each_algorithm_has_its_own_active_key(self, storage):
        """Keys come in families, one per ``alg``: rotating one family leaves the others'
        active keys active, and "replacing" speaks of the new key's family only."""
        es1 = storage.keys.rotate(self.signing_key("es-1", created_at=utcnow() - timedelta(days=1)), replacing=None)
        rs1 = storage.keys.rotate(self.signing_key("rs-1", alg="RS256"), replacing=None)
        ed1 = storage.keys.rotate(self.signing_key("ed-1", alg="EdDSA"), replacing=None)
        assert [k.kid for k in (es1, rs1, ed1)] == ["es-1", "rs-1", "ed-1"]
        assert [storage.keys.active(alg).kid for alg in ("ES256", "RS256", "EdDSA")] == ["es-1", "rs-1", "ed-1"]
        assert storage.keys.active("PS256") is None and storage.keys.active("HS256") is None
        # Another family's kid is stale for this one: its active key is the answer.
        stale = storage.keys.rotate(self.signing_key("rs-x", alg="RS256"), replacing="es-1")
        assert self.key_fields(stale) == self.key_fields(rs1)
        assert storage.keys.rotate(self.signing_key("rs-y", alg="RS256"), replacing=None).kid == "rs-1"
        # A rotation of ES256 retires es-1 only.
        assert storage.keys.rotate(self.signing_key("es-2"), replacing="es-1").kid == "es-2"
        assert [storage.keys.active(alg).kid for alg in ("ES256", "RS256", "EdDSA")] == ["es-2", "rs-1", "ed-1"]
        assert [(k.kid, k.retired_at is None) for k in storage.keys.all()] == [
            ("es-1", False), ("rs-1", True), ("ed-1", True), ("es-2", True)]

    def test_concurrent_rotations_of_two_families_each_agree_on_one_key(self, storage):
        storage.keys.rotate(self.signing_key("es-1", created_at=utcnow() - timedelta(days=1)), replacing=None)
        storage.keys.rotate(self.signing_key("rs-1", alg="RS256", created_at=utcnow() - timedelta(days=1)),
                            replacing=None)
        candidates = [self.signing_key(f"race-{i}", alg="ES256" if i % 2 else "RS256") for i in range(8)]
        results = run_together(8, lambda i: storage.keys.rotate(
            candidates[i], replacing="es-1" if i % 2 else "rs-1"))
        assert all(isinstance(r, SigningKey) for r in results), results
        for alg in ("ES256", "RS256"):
            winners = {r.kid for r, c in zip(results, candidates) if c.alg == alg}
            assert len(winners) == 1, results
            assert storage.keys.active(alg).kid == winners.pop()
        assert sorted(k.kid for k in storage.keys.all() if k.retired_at is not None) == ["es-1", "rs-1"]
        assert len(storage.keys.all()) == 4

    def test_key_prune_deletes_only_keys_retired_before(self, storage):
        storage.keys.rotate(self.signing_key("k1", created_at=utcnow() - timedelta(days=2)), replacing=None)
        storage.keys.rotate(self.signing_key("k2"), replacing="k1")
        time.sleep(0.2)
        middle = utcnow()
        time.sleep(0.2)
        storage.keys.rotate(self.signing_key("k3"), replacing="k2")
        k1, k2, k3 = storage.keys.all()
        assert utc(k1.retired_at) < utc(middle) < utc(k2.retired_at) and k3.retired_at is None

        assert storage.keys.prune(middle - timedelta(days=1)) == 0
        # Strictly before: a key retired at the very moment stays.
        assert storage.keys.prune(utc(k1.retired_at).replace(tzinfo=None)) == 0
        assert [k.kid for k in storage.keys.all()] == ["k1", "k2", "k3"]
        assert storage.keys.prune(middle) == 1
        assert [self.key_fields(k) for k in storage.keys.all()] == [self.key_fields(k2), self.key_fields(k3)]
        # However late the moment, the active key is never pruned.
        assert storage.keys.prune(utcnow() + timedelta(days=3650)) == 1
        assert [self.key_fields(k) for k in storage.keys.all()] == [self.key_fields(k3)]
        assert self.key_fields(storage.keys.active("ES256")) == self.key_fields(k3)
        assert storage.keys.prune(utcnow() + timedelta(days=3650)) == 0
        # Rotation goes on from the survivor.
        assert storage.keys.rotate(self.signing_key("k4"), replacing="k3").kid == "k4"

    def test_atomic_undoes_a_key_rotation(self, storage):
        k1 = self.signing_key("k1", created_at=utcnow() - timedelta(days=1))
        storage.keys.rotate(k1, replacing=None)
        with pytest.raises(RuntimeError):
            with storage.atomic():
                assert storage.keys.rotate(self.signing_key("k2"), replacing="k1").kid == "k2"
                assert storage.keys.active("ES256").kid == "k2"  # the block reads its own writes
                raise RuntimeError("the block fails")
        assert [self.key_fields(k) for k in storage.keys.all()] == [self.key_fields(k1)]
        assert storage.keys.rotate(self.signing_key("k2"), replacing="k1").kid == "k2"

    # -- audit trail --------------------------------------------------------------

    @staticmethod
    def audit_event(storage, event: str = "user.registered", *, at: datetime | None = None, **fields) -> AuditEvent:
        """Add an event as the core does: a fresh uuid4, ``created_at`` naive UTC (now,
        with its microseconds, unless ``at`` says otherwise)."""
        values = dict(uuid=new_uuid(), event=event, actor_uuid=None, target_type=None, target_uuid=None,
                      ip="203.0.113.7", request_id=new_uuid(), details={},
                      created_at=at if at is not None else utcnow())
        values.update(fields)
        return storage.audit.add(**values)

    @staticmethod
    def audit_fields(event: AuditEvent) -> tuple:
        """Every field, ``created_at`` as aware UTC (naive and aware ones compare alike)."""
        return (event.id, event.uuid, utc(event.created_at), event.event, event.actor_uuid, event.target_type,
                event.target_uuid, event.ip, event.request_id, event.details)

    @staticmethod
    def ids(page: Page) -> list[int]:
        return [item.id for item in page.items]

    def test_audit_add_returns_the_stored_event(self, storage):
        actor, target, event_uuid, request_id = new_uuid(), new_uuid(), new_uuid(), new_uuid()
        at = utcnow().replace(microsecond=123457) - timedelta(seconds=5)
        made = storage.audit.add(uuid=event_uuid, event="member.added", actor_uuid=actor, target_type="group",
                                 target_uuid=target, ip="2001:db8::1", request_id=request_id,
                                 details={"role": "viewer", "user_uuid": actor}, created_at=at)
        assert isinstance(made, AuditEvent) and isinstance(made.id, int) and 0 < made.id <= MAX_ID
        assert self.audit_fields(made)[1:] == (
            event_uuid, utc(at), "member.added", actor, "group", target, "2001:db8::1", request_id,
            {"role": "viewer", "user_uuid": actor})
        page = storage.audit.list()
        assert isinstance(page, Page) and page.next_after_id is None
        assert all(isinstance(e, AuditEvent) for e in page.items)
        # Stored as handed in, created_at to the microsecond.
        assert [self.audit_fields(e) for e in page.items] == [self.audit_fields(made)]

    def test_audit_ids_grow_and_the_list_follows_them(self, storage):
        # Ids give the order, not created_at (an operator's command may bring an older time).
        base = utcnow()
        events = [self.audit_event(storage, f"user.e{i}", at=base - timedelta(minutes=i)) for i in range(5)]
        ids = [e.id for e in events]
        assert ids == sorted(ids) and len(set(ids)) == 5
        assert len({e.uuid for e in events}) == 5
        assert self.ids(storage.audit.list()) == ids
        assert [e.event for e in storage.audit.list().items] == [f"user.e{i}" for i in range(5)]

    def test_audit_list_pages_by_id(self, storage):
        events = [self.audit_event(storage) for _ in range(7)]
        first = storage.audit.list(limit=3)
        assert isinstance(first, Page)
        assert self.ids(first) == [e.id for e in events[:3]] and first.next_after_id == events[2].id
        second = storage.audit.list(after_id=first.next_after_id, limit=3)
        assert self.ids(second) == [e.id for e in events[3:6]] and second.next_after_id == events[5].id
        last = storage.audit.list(after_id=second.next_after_id, limit=3)
        assert self.ids(last) == [events[6].id] and last.next_after_id is None
        assert storage.audit.list(after_id=events[-1].id) == Page(items=[], next_after_id=None)
        # A page that ends exactly at the last event says no more follow.
        exact = storage.audit.list(after_id=events[2].id, limit=4)
        assert self.ids(exact) == [e.id for e in events[3:]] and exact.next_after_id is None
        whole = storage.audit.list()
        assert self.ids(whole) == [e.id for e in events] and whole.next_after_id is None
        assert storage.audit.list(limit=1).next_after_id == events[0].id

    def test_audit_list_filters(self, storage):
        u1, u2, g1 = new_uuid(), new_uuid(), new_uuid()
        add = self.audit_event
        e1 = add(storage, "user.registered", actor_uuid=None, target_type="user", target_uuid=u1)
        e2 = add(storage, "user.login", actor_uuid=u1, target_type="user", target_uuid=u1)
        e3 = add(storage, "group.created", actor_uuid=u1, target_type="group", target_uuid=g1)
        e4 = add(storage, "member.added", actor_uuid=u2, target_type="group", target_uuid=g1)
        e5 = add(storage, "users.imported", actor_uuid=u2)
        e6 = add(storage, "user.deleted", actor_uuid=u2, target_type="user", target_uuid=u1)
        e7 = add(storage, "group.member_added", actor_uuid=u2, target_type="group", target_uuid=g1)
        e8 = add(storage, "group.memberXadded", actor_uuid=u2, target_type="group", target_uuid=g1)
        every = [e1, e2, e3, e4, e5, e6, e7, e8]

        def found(**filters) -> list[AuditEvent]:
            page = storage.audit.list(**filters)
            assert page.next_after_id is None
            return [e.id for e in page.items]

        def of(*events) -> list[int]:
            return [e.id for e in events]

        # The event name exactly.
        assert found(event="user.login") == of(e2)
        assert found(event="user") == [] and found(event="user.") == [] and found(event="User.login") == []
        # Names starting with the prefix, taken literally (no wildcard characters).
        assert found(event_prefix="user.") == of(e1, e2, e6)
        assert found(event_prefix="group.") == of(e3, e7, e8)
        assert found(event_prefix="group.member_") == of(e7)
        assert found(event_prefix="%") == [] and found(event_prefix="_") == []
        assert found(event_prefix="user.login") == of(e2)
        # Actor and target exactly.
        assert found(actor_uuid=u1) == of(e2, e3)
        assert found(actor_uuid=u2) == of(e4, e5, e6, e7, e8)
        assert found(actor_uuid=g1) == []
        assert found(target_uuid=u1) == of(e1, e2, e6)
        assert found(target_uuid=g1) == of(e3, e4, e7, e8)
        assert found(target_uuid=u1[:8]) == []
        # Every filter given applies.
        assert found(event_prefix="user.", actor_uuid=u2) == of(e6)
        assert found(event="member.added", target_uuid=g1) == of(e4)
        assert found(event="user.login", actor_uuid=u2) == []
        assert found(event="user.login", event_prefix="user.") == of(e2)
        assert found(event="user.login", event_prefix="group.") == []
        assert found(actor_uuid=u1, target_uuid=u1) == of(e2)
        # Filters given as None are not filters.
        assert found(event=None, event_prefix=None, actor_uuid=None, target_uuid=None, since=None,
                     until=None) == of(*every)
        # Keyset paging under a filter: pages of the matching events only.
        first = storage.audit.list(event_prefix="user.", limit=2)
        assert self.ids(first) == of(e1, e2) and first.next_after_id == e2.id
        rest = storage.audit.list(event_prefix="user.", limit=2, after_id=first.next_after_id)
        assert self.ids(rest) == of(e6) and rest.next_after_id is None
        assert found(actor_uuid=u2, after_id=e4.id) == of(e5, e6, e7, e8)
        page = storage.audit.list(target_uuid=g1, limit=2, after_id=e3.id)
        assert self.ids(page) == of(e4, e7) and page.next_after_id == e7.id
        # The client address exactly (every event above came from 203.0.113.7).
        e9 = add(storage, "user.login", actor_uuid=u1, target_type="user", target_uuid=u1, ip="2001:db8::7")
        assert found(ip="2001:db8::7") == of(e9)
        assert found(ip="203.0.113.7", event="user.login") == of(e2)
        assert found(ip="2001:db8::") == [] and found(ip="203.0.113.") == []

    def test_audit_list_time_bounds(self, storage):
        t = utcnow().replace(microsecond=250001) - timedelta(hours=1)
        events = [self.audit_event(storage, "user.login", at=t + timedelta(seconds=i)) for i in range(4)]
        second = timedelta(seconds=1)
        tick = timedelta(microseconds=1)

        def found(**filters) -> list[int]:
            return self.ids(storage.audit.list(**filters))

        def of(*indexes) -> list[int]:
            return [events[i].id for i in indexes]

        # since <= created_at: inclusive, to the microsecond.
        assert found(since=t + second) == of(1, 2, 3)
        assert found(since=t + second + tick) == of(2, 3)
        assert found(since=t - second) == of(0, 1, 2, 3)
        assert found(since=t + 4 * second) == []
        # created_at < until: exclusive, to the microsecond.
        assert found(until=t + 2 * second) == of(0, 1)
        assert found(until=t + 2 * second + tick) == of(0, 1, 2)
        assert found(until=t) == []
        assert found(until=t + 10 * second) == of(0, 1, 2, 3)
        # Both: a half-open window.
        assert found(since=t + second, until=t + 3 * second) == of(1, 2)
        assert found(since=t + second, until=t + second) == []
        assert found(since=t + 2 * second, until=t + second) == []
        # With the other filters and paging.
        assert found(since=t, until=t + 3 * second, event="user.login", after_id=events[0].id) == of(1, 2)
        assert found(since=t, event="user.logout") == []
        page = storage.audit.list(since=t + second, limit=2)
        assert self.ids(page) == of(1, 2) and page.next_after_id == events[2].id
        page = storage.audit.list(since=t + second, limit=2, after_id=page.next_after_id)
        assert self.ids(page) == of(3) and page.next_after_id is None

    def test_audit_details_and_empty_fields_round_trip(self, storage):
        details = {
            "name": "Zoë 🔒 Łukasz 中文",
            "changes": {"email": {"from": "ada@example.com", "to": "ada@example.org"}, "roles": ["viewer", "owner"]},
            "count": 3, "ratio": 0.5, "on": True, "off": False, "nothing": None,
            "empty": {}, "none": [], "nested": [{"a": [1, 2, {"b": "ü\n\"quoted\" \\ slash"}]}],
            "ключ 🔑": "значение",
        }
        expected = json.loads(json.dumps(details))
        anonymous = self.audit_event(storage, "user.registered", actor_uuid=None, target_type=None,
                                     target_uuid=None, ip="", request_id="", details=details)
        bare = self.audit_event(storage, "locky.started", details={})
        assert anonymous.details == expected
        assert (anonymous.actor_uuid, anonymous.target_type, anonymous.target_uuid, anonymous.ip,
                anonymous.request_id) == (None, None, None, "", "")
        # The caller's dict changing afterwards changes no stored event.
        details["name"] = "changed"
        details["changes"]["roles"].append("admin")
        stored = storage.audit.list().items
        assert [self.audit_fields(e) for e in stored] == [self.audit_fields(anonymous), self.audit_fields(bare)]
        assert stored[0].details == expected and stored[1].details == {}
        assert isinstance(stored[0].details, dict)
        # Nor does a reader changing what it was handed: events never change.
        stored[0].details["name"] = "changed by a reader"
        stored[0].details["nested"].clear()
        assert storage.audit.list().items[0].details == expected
        # A None filter filters nothing; an actor filter never finds an anonymous event.
        assert self.ids(storage.audit.list(actor_uuid=None, target_uuid=None)) == [anonymous.id, bare.id]
        assert storage.audit.list(actor_uuid=new_uuid()).items == []

    def test_audit_prune_deletes_only_older_events_in_batches(self, storage):
        t = utcnow() - timedelta(days=30)
        day = timedelta(days=1)
        # Added out of time order: prune goes by created_at, not by id.
        a = self.audit_event(storage, "e.a", at=t + 3 * day)
        b = self.audit_event(storage, "e.b", at=t)
        c = self.audit_event(storage, "e.c", at=t + 2 * day)
        d = self.audit_event(storage, "e.d", at=t + day)
        e = self.audit_event(storage, "e.e", at=t + 5 * day)
        assert storage.audit.prune(t) == 0  # strictly before: the event at t stays
        assert storage.audit.prune(t - day) == 0
        assert storage.audit.prune(t + 2 * day, batch=1) == 1
        assert storage.audit.prune(t + 2 * day, batch=1) == 1
        assert storage.audit.prune(t + 2 * day, batch=1) == 0
        assert [self.audit_fields(x) for x in storage.audit.list().items] == [
            self.audit_fields(a), self.audit_fields(c), self.audit_fields(e)]
        assert storage.audit.prune(utcnow() + day, batch=2) == 2
        assert self.ids(storage.audit.list()) == [e.id]
        assert storage.audit.prune(utcnow() + day) == 1
        assert storage.audit.prune(utcnow() + day) == 0
        assert storage.audit.list() == Page(items=[], next_after_id=None)
        # The trail goes on, with ids larger than every earlier event's.
        later = self.audit_event(storage)
        assert later.id > max(x.id for x in (a, b, c, d, e))
        assert self.ids(storage.audit.list()) == [later.id]

    # -- webhooks -----------------------------------------------------------------

    #: A webhook secret as the core seals it (``v1.`` + URL-safe base64), opaque to storage.
    SEALED_SECRET = "v1." + "q9Zb-7Xw_3kPzR2mLcYt0NvH" * 4

    def webhook(self, storage, *events: str, url: str = "https://hooks.example.com/locky",
                description: str = "", at: datetime | None = None) -> Webhook:
        return storage.webhooks.create(uuid=new_uuid(), url=url, events=events or ("*",), description=description,
                                       secret=self.SEALED_SECRET, created_at=at if at is not None else utcnow())

    @staticmethod
    def webhook_fields(hook: Webhook) -> tuple:
        return (hook.id, hook.uuid, hook.url, hook.events, hook.description, hook.secret, utc(hook.created_at))

    def test_webhook_create_get_and_list(self, storage):
        hook_uuid = new_uuid()
        at = utcnow().replace(microsecond=654321)
        url = "https://hooks.example.com/locky/in?tenant=ünï&x=1"
        made = storage.webhooks.create(uuid=hook_uuid, url=url, events=["user.*", "group.created", "*"],
                                       description="Zoë's 🔔 hook\nline two ", secret=self.SEALED_SECRET,
                                       created_at=at)
        assert isinstance(made, Webhook) and isinstance(made.id, int) and 0 < made.id <= MAX_ID
        # Events come back as a tuple, in the order given.
        assert self.webhook_fields(made)[1:] == (hook_uuid, url, ("user.*", "group.created", "*"),
                                                 "Zoë's 🔔 hook\nline two ", self.SEALED_SECRET, utc(at))
        stored = storage.webhooks.get(made.id)
        assert isinstance(stored, Webhook) and self.webhook_fields(stored) == self.webhook_fields(made)
        for missing in (0, -1, 999_999):
            assert storage.webhooks.get(missing) is None

        second, third = self.webhook(storage, "user.login"), self.webhook(storage)
        assert made.id < second.id < third.id
        page = storage.webhooks.list(limit=2)
        assert isinstance(page, Page) and all(isinstance(h, Webhook) for h in page.items)
        assert [self.webhook_fields(h) for h in page.items] == [self.webhook_fields(made), self.webhook_fields(second)]
        assert page.next_after_id == second.id
        page = storage.webhooks.list(limit=2, after_id=page.next_after_id)
        assert self.ids(page) == [third.id] and page.next_after_id is None
        assert self.ids(storage.webhooks.list()) == [made.id, second.id, third.id]
        assert storage.webhooks.list().next_after_id is None
        page = storage.webhooks.list(after_id=made.id, limit=2)  # exactly the rest
        assert self.ids(page) == [second.id, third.id] and page.next_after_id is None
        assert storage.webhooks.list(after_id=third.id) == Page(items=[], next_after_id=None)

    def test_webhook_matching(self, storage):
        assert storage.webhooks.matching("user.registered") == []
        exact = self.webhook(storage, "user.registered")
        prefix = self.webhook(storage, "user.*")
        everything = self.webhook(storage, "*")
        groups = self.webhook(storage, "group.created", "group.deleted")
        plural = self.webhook(storage, "users.*")
        twice = self.webhook(storage, "user.*", "user.registered")  # found once all the same
        hooks = [exact, prefix, everything, groups, plural, twice]

        def matching(event: str) -> list[int]:
            found = storage.webhooks.matching(event)
            assert all(isinstance(h, Webhook) for h in found)
            assert all(self.webhook_fields(h) == self.webhook_fields(storage.webhooks.get(h.id)) for h in found)
            return sorted(h.id for h in found)

        def of(*chosen: Webhook) -> list[int]:
            return sorted(h.id for h in chosen)

        assert matching("user.registered") == of(exact, prefix, everything, twice)
        assert matching("user.deleted") == of(prefix, everything, twice)
        assert matching("group.deleted") == of(everything, groups)
        assert matching("group.updated") == of(everything)
        assert matching("users.imported") == of(everything, plural)
        assert matching("user") == of(everything)
        assert matching("userx.registered") == of(everything)
        for event in ("user.registered", "user.login", "group.created", "users.x", "member.added", "a", "user."):
            assert matching(event) == of(*(h for h in hooks if selects(h.events, event))), event
        # Creates and deletes show at once.
        assert storage.webhooks.delete(everything.id) is not None
        assert matching("member.added") == []
        members = self.webhook(storage, "member.*")
        assert matching("member.added") == of(members)
        assert matching("user.registered") == of(exact, prefix, twice)

    def test_webhook_delete_removes_it_and_its_pending_deliveries(self, storage):
        hook, other = self.webhook(storage, "user.*"), self.webhook(storage, "*")
        now = utcnow()
        done = self.delivery(storage, hook, at=now - timedelta(seconds=3))
        gave_up = self.delivery(storage, hook, at=now - timedelta(seconds=2))
        held = self.delivery(storage, hook, at=now - timedelta(seconds=1))
        assert [d.id for d in storage.deliveries.claim(now=now, lease=30)] == [done.id, gave_up.id, held.id]
        storage.deliveries.succeeded(done.id, status_code=200, at=now)
        storage.deliveries.failed(gave_up.id, status_code=410, error="Gone", at=now)
        waiting = self.delivery(storage, hook, at=now + timedelta(seconds=1))
        elsewhere = self.delivery(storage, other, at=now + timedelta(seconds=2))
        assert storage.deliveries.pending() == 3

        removed = storage.webhooks.delete(hook.id)
        assert isinstance(removed, Webhook) and self.webhook_fields(removed) == self.webhook_fields(hook)
        assert storage.webhooks.get(hook.id) is None
        assert self.ids(storage.webhooks.list()) == [other.id]
        assert [h.id for h in storage.webhooks.matching("user.login")] == [other.id]
        assert storage.webhooks.delete(hook.id) is None
        assert storage.webhooks.delete(999_999) is None
        # Its pending deliveries went with it, held or not; no sender gets them again.
        assert storage.deliveries.get(waiting.id) is None and storage.deliveries.get(held.id) is None
        assert storage.deliveries.pending() == 1
        later = now + timedelta(minutes=5)
        assert [d.id for d in storage.deliveries.claim(now=later, lease=30)] == [elsewhere.id]
        # A sender finishing a delivery that went meanwhile neither fails nor brings it back.
        storage.deliveries.retry(held.id, status_code=503, error="Service Unavailable", at=later, due_at=later)
        storage.deliveries.succeeded(waiting.id, status_code=200, at=later)
        storage.deliveries.failed(held.id, status_code=None, error="timed out", at=later)
        assert storage.deliveries.get(waiting.id) is None and storage.deliveries.get(held.id) is None
        assert [(d.id, d.attempts) for d in storage.deliveries.claim(now=later + timedelta(minutes=5), lease=30)] == [
            (elsewhere.id, 2)]
        assert storage.deliveries.pending() == 1

    # -- webhook deliveries -------------------------------------------------------

    @staticmethod
    def delivery(storage, hook: Webhook, *, at: datetime | None = None, event: str = "user.registered",
                 payload: str | None = None) -> Delivery:
        event_uuid = new_uuid()
        if payload is None:
            payload = json.dumps({"uuid": event_uuid, "event": event, "details": {}}, separators=(",", ":"))
        return storage.deliveries.queue(webhook_id=hook.id, event_uuid=event_uuid, event=event, payload=payload,
                                        created_at=at if at is not None else utcnow())

    @staticmethod
    def delivery_fields(delivery: Delivery) -> tuple:
        """Every field, times as aware UTC."""
        return (delivery.id, delivery.webhook_id, delivery.event_uuid, delivery.event, delivery.payload,
                delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error,
                utc(delivery.created_at), aware_or_none(delivery.next_attempt_at),
                aware_or_none(delivery.last_attempt_at))

    @staticmethod
    def state(delivery: Delivery) -> tuple:
        """Where a delivery stands: status, attempts, last status code and error, next and
        last attempt (aware UTC)."""
        return (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error,
                aware_or_none(delivery.next_attempt_at), aware_or_none(delivery.last_attempt_at))

    def test_delivery_queue_and_get(self, storage):
        hook = self.webhook(storage)
        event_uuid = new_uuid()
        at = utcnow().replace(microsecond=987654) - timedelta(seconds=1)
        # The body is signed as it is: kept exactly (key order, spacing, escapes), however long.
        payload = ('{"event": "user.registered", "uuid": "%s", "details": {"name": "Zoë 🔒 中文", "z": 1, "a": [%s]}}'
                   % (event_uuid, ", ".join(f'"item-{i}"' for i in range(400))))
        assert len(payload) > 4000
        made = storage.deliveries.queue(webhook_id=hook.id, event_uuid=event_uuid, event="user.registered",
                                        payload=payload, created_at=at)
        assert isinstance(made, Delivery) and isinstance(made.id, int) and 0 < made.id <= MAX_ID
        assert self.delivery_fields(made)[1:] == (
            hook.id, event_uuid, "user.registered", payload, PENDING, 0, None, "", utc(at), utc(at), None)
        stored = storage.deliveries.get(made.id)
        assert isinstance(stored, Delivery) and self.delivery_fields(stored) == self.delivery_fields(made)
        for missing in (0, -1, 999_999):
            assert storage.deliveries.get(missing) is None
        assert storage.deliveries.pending() == 1
        assert [self.delivery_fields(d) for d in storage.deliveries.list(hook.id).items] == [self.delivery_fields(made)]

    def test_delivery_claim_honours_due_time_limit_and_age(self, storage):
        hook = self.webhook(storage)
        base = utcnow()
        due = [self.delivery(storage, hook, at=base - timedelta(seconds=3 - i)) for i in range(3)]
        future = self.delivery(storage, hook, at=base + timedelta(seconds=60))
        assert storage.deliveries.claim(now=base - timedelta(seconds=4), lease=60) == []
        first = storage.deliveries.claim(now=base, lease=60, limit=2)
        assert all(isinstance(d, Delivery) for d in first)
        # Oldest first, attempts counted up; the rest as queued.
        assert [(d.id, d.attempts, d.status) for d in first] == [(d.id, 1, PENDING) for d in due[:2]]
        assert [(d.webhook_id, d.event_uuid, d.event, d.payload, utc(d.created_at)) for d in first] == [
            (d.webhook_id, d.event_uuid, d.event, d.payload, utc(d.created_at)) for d in due[:2]]
        assert [(d.id, d.attempts) for d in storage.deliveries.claim(now=base, lease=60, limit=2)] == [(due[2].id, 1)]
        assert storage.deliveries.claim(now=base, lease=60) == []  # the rest are held or not due
        assert storage.deliveries.claim(now=base + timedelta(seconds=59), lease=60) == []
        assert storage.deliveries.pending() == 4  # held deliveries still wait
        # The leases ended and the last one is due: all four, oldest first.
        again = storage.deliveries.claim(now=base + timedelta(seconds=61), lease=60)
        assert [(d.id, d.attempts) for d in again] == [(d.id, 2) for d in due] + [(future.id, 1)]
        assert [d.attempts for d in storage.deliveries.list(hook.id).items] == [2, 2, 2, 1]

    def test_delivery_lease_lets_a_delivery_go_when_it_ends(self, storage):
        delivery = self.delivery(storage, self.webhook(storage))
        now = utcnow()
        assert [(d.id, d.attempts) for d in storage.deliveries.claim(now=now, lease=30)] == [(delivery.id, 1)]
        assert storage.deliveries.claim(now=now + timedelta(seconds=29), lease=30) == []
        later = now + timedelta(seconds=31)  # the sender died: its lease ended
        assert [(d.id, d.attempts) for d in storage.deliveries.claim(now=later, lease=30)] == [(delivery.id, 2)]
        assert storage.deliveries.claim(now=later, lease=30) == []
        assert [d.attempts for d in storage.deliveries.claim(now=later + timedelta(seconds=31), lease=30)] == [3]
        assert self.state(storage.deliveries.get(delivery.id))[:2] == (PENDING, 3)
        assert storage.deliveries.pending() == 1

    def test_delivery_succeeded(self, storage):
        hook = self.webhook(storage)
        base = utcnow()
        delivery = self.delivery(storage, hook, at=base)
        assert [d.attempts for d in storage.deliveries.claim(now=base + timedelta(seconds=1), lease=30)] == [1]
        storage.deliveries.succeeded(delivery.id, status_code=204, at=base + timedelta(seconds=2))
        stored = storage.deliveries.get(delivery.id)
        assert self.state(stored) == (SUCCEEDED, 1, 204, "", None, utc(base + timedelta(seconds=2)))
        assert self.delivery_fields(stored)[:5] == self.delivery_fields(delivery)[:5]
        assert utc(stored.created_at) == utc(base)
        assert [self.delivery_fields(d) for d in storage.deliveries.list(hook.id).items] == [
            self.delivery_fields(stored)]
        assert storage.deliveries.pending() == 0
        assert storage.deliveries.claim(now=base + timedelta(days=1), lease=30) == []
        # Success after a retry.
        second = self.delivery(storage, hook, at=base)
        storage.deliveries.claim(now=base, lease=30)
        storage.deliveries.retry(second.id, status_code=500, error="Internal Server Error", at=base,
                                 due_at=base + timedelta(seconds=10))
        assert [d.attempts for d in storage.deliveries.claim(now=base + timedelta(seconds=10), lease=30)] == [2]
        storage.deliveries.succeeded(second.id, status_code=200, at=base + timedelta(seconds=11))
        status, attempts, code, _, next_at, last_at = self.state(storage.deliveries.get(second.id))
        assert (status, attempts, code, next_at, last_at) == (
            SUCCEEDED, 2, 200, None, utc(base + timedelta(seconds=11)))
        assert storage.deliveries.pending() == 0

    def test_delivery_retry_makes_it_due_at_the_given_time(self, storage):
        hook = self.webhook(storage)
        base = utcnow()
        delivery = self.delivery(storage, hook, at=base)
        second = timedelta(seconds=1)
        assert [d.attempts for d in storage.deliveries.claim(now=base, lease=30)] == [1]
        storage.deliveries.retry(delivery.id, status_code=503, error="Service Unavailable", at=base + second,
                                 due_at=base + 120 * second)
        assert self.state(storage.deliveries.get(delivery.id)) == (
            PENDING, 1, 503, "Service Unavailable", utc(base + 120 * second), utc(base + second))
        assert [self.state(d) for d in storage.deliveries.list(hook.id).items] == [
            self.state(storage.deliveries.get(delivery.id))]
        assert storage.deliveries.pending() == 1
        # The lease has ended, but the delivery is not due yet.
        assert storage.deliveries.claim(now=base + 60 * second, lease=30) == []
        assert storage.deliveries.claim(now=base + 120 * second - timedelta(microseconds=1), lease=30) == []
        assert [(d.id, d.attempts) for d in storage.deliveries.claim(now=base + 120 * second, lease=300)] == [
            (delivery.id, 2)]
        # retry releases the delivery: due again at once though the lease would run on.
        # No status code: the receiver never answered.
        storage.deliveries.retry(delivery.id, status_code=None, error="ConnectTimeout: timed out",
                                 at=base + 121 * second, due_at=base + 122 * second)
        assert self.state(storage.deliveries.get(delivery.id)) == (
            PENDING, 2, None, "ConnectTimeout: timed out", utc(base + 122 * second), utc(base + 121 * second))
        assert [d.attempts for d in storage.deliveries.claim(now=base + 123 * second, lease=300)] == [3]
        assert storage.deliveries.pending() == 1

    def test_delivery_failed(self, storage):
        hook = self.webhook(storage)
        base = utcnow()
        delivery = self.delivery(storage, hook, at=base)
        storage.deliveries.claim(now=base, lease=30)
        storage.deliveries.retry(delivery.id, status_code=None, error="connection refused", at=base,
                                 due_at=base + timedelta(seconds=5))
        assert [d.attempts for d in storage.deliveries.claim(now=base + timedelta(seconds=5), lease=30)] == [2]
        storage.deliveries.failed(delivery.id, status_code=500, error="Internal Server Error",
                                  at=base + timedelta(seconds=6))
        stored = storage.deliveries.get(delivery.id)
        assert self.state(stored) == (FAILED, 2, 500, "Internal Server Error", None, utc(base + timedelta(seconds=6)))
        assert self.delivery_fields(stored)[:5] == self.delivery_fields(delivery)[:5]
        assert [self.delivery_fields(d) for d in storage.deliveries.list(hook.id).items] == [
            self.delivery_fields(stored)]
        assert storage.deliveries.pending() == 0
        assert storage.deliveries.claim(now=base + timedelta(days=1), lease=30) == []
        # Failing without an answer keeps no status code.
        other = self.delivery(storage, hook, at=base)
        storage.deliveries.claim(now=base, lease=30)
        storage.deliveries.failed(other.id, status_code=None, error="TLS handshake failed", at=base)
        assert self.state(storage.deliveries.get(other.id)) == (FAILED, 1, None, "TLS handshake failed", None, utc(base))

    def test_delivery_pending_counts_only_pending_ones(self, storage):
        hook = self.webhook(storage)
        now = utcnow()
        assert storage.deliveries.pending() == 0
        ok, bad, again, held = (self.delivery(storage, hook, at=now) for _ in range(4))
        assert storage.deliveries.pending() == 4
        assert len(storage.deliveries.claim(now=now, lease=60)) == 4
        storage.deliveries.succeeded(ok.id, status_code=200, at=now)
        storage.deliveries.failed(bad.id, status_code=400, error="Bad Request", at=now)
        storage.deliveries.retry(again.id, status_code=429, error="Too Many Requests", at=now,
                                 due_at=now + timedelta(minutes=1))
        self.delivery(storage, hook, at=now + timedelta(hours=1))  # not due yet: waits all the same
        assert storage.deliveries.pending() == 3
        assert [d.status for d in storage.deliveries.list(hook.id).items] == [
            SUCCEEDED, FAILED, PENDING, PENDING, PENDING]
        assert held.id in [d.id for d in storage.deliveries.claim(now=now + timedelta(hours=2), lease=60)]

    def test_concurrent_claims_never_share_a_delivery(self, storage):
        hooks = [self.webhook(storage), self.webhook(storage, "user.*")]
        now = utcnow()
        deliveries = [self.delivery(storage, hooks[i % 2], at=now - timedelta(seconds=1)) for i in range(20)]
        results = run_together(8, lambda i: storage.deliveries.claim(now=now, lease=60, limit=5))
        assert not [r for r in results if isinstance(r, Exception)], results
        ids = [d.id for result in results for d in result]
        assert len(ids) == len(set(ids)), results
        ids += [d.id for d in storage.deliveries.claim(now=now, lease=60, limit=20)]
        assert sorted(ids) == sorted(d.id for d in deliveries)
        # Each delivery was claimed once: its lease is the first, its attempts one.
        again = storage.deliveries.claim(now=now + timedelta(seconds=61), lease=60, limit=20)
        assert sorted((d.id, d.attempts) for d in again) == sorted((d.id, 2) for d in deliveries)

    def test_delivery_list_pages_per_webhook(self, storage):
        a, b = self.webhook(storage), self.webhook(storage)
        now = utcnow()
        queued = {a.id: [], b.id: []}
        for n, hook in enumerate((a, b, a, a, b, a, a)):
            queued[hook.id].append(self.delivery(storage, hook, at=now - timedelta(seconds=10 - n)))
        mine = queued[a.id]
        page = storage.deliveries.list(a.id, limit=2)
        assert isinstance(page, Page) and all(isinstance(d, Delivery) for d in page.items)
        assert [self.delivery_fields(d) for d in page.items] == [self.delivery_fields(d) for d in mine[:2]]
        assert page.next_after_id == mine[1].id
        page = storage.deliveries.list(a.id, limit=2, after_id=page.next_after_id)
        assert self.ids(page) == [d.id for d in mine[2:4]] and page.next_after_id == mine[3].id
        page = storage.deliveries.list(a.id, limit=2, after_id=page.next_after_id)
        assert self.ids(page) == [mine[4].id] and page.next_after_id is None
        whole = storage.deliveries.list(a.id, limit=5)
        assert self.ids(whole) == [d.id for d in mine] and whole.next_after_id is None
        assert self.ids(storage.deliveries.list(a.id)) == [d.id for d in mine]
        assert self.ids(storage.deliveries.list(b.id)) == [d.id for d in queued[b.id]]
        assert storage.deliveries.list(b.id).next_after_id is None
        assert storage.deliveries.list(a.id, after_id=mine[-1].id) == Page(items=[], next_after_id=None)
        assert storage.deliveries.list(999_999) == Page(items=[], next_after_id=None)
        # What happened to each shows in the list.
        storage.deliveries.claim(now=now, lease=30, limit=2)  # a's first, then b's first
        storage.deliveries.succeeded(mine[0].id, status_code=202, at=now)
        listed = storage.deliveries.list(a.id, limit=1)
        assert [self.delivery_fields(d) for d in listed.items] == [
            self.delivery_fields(storage.deliveries.get(mine[0].id))]
        assert listed.items[0].status == SUCCEEDED and listed.next_after_id == mine[0].id
        assert [d.attempts for d in storage.deliveries.list(b.id).items] == [1, 0]

    # -- OpenID provider: clients, consents, authorization codes -------------------------

    @staticmethod
    def oauth_client(storage, client_id: str = "s6BhdRkqt3Zm1xP0", **changes) -> OAuthClient:
        """A client as the core registers one: a confidential app with a secret hash."""
        values = dict(client_id=client_id, name="Example app", type="confidential",
                      redirect_uris=("https://app.example.com/callback", "http://127.0.0.1:8080/cb"),
                      post_logout_redirect_uris=("https://app.example.com/",),
                      grant_types=("authorization_code", "refresh_token"), scopes=("openid", "email", "offline_access"),
                      id_token_signed_response_alg="RS256", first_party=False, secret_hash=digest("secret"))
        values.update(changes)
        return storage.oauth_clients.create(**values)

    @staticmethod
    def record_fields(record) -> tuple:
        """Every field of a record, times as aware UTC (engines differ in what they give back)."""
        return tuple(aware_or_none(v) if isinstance(v, datetime) else v
                     for v in (getattr(record, f.name) for f in dataclasses.fields(record)))

    def test_oauth_client_create_returns_the_stored_record(self, storage):
        before = datetime.now(timezone.utc)
        client = self.oauth_client(storage)
        assert isinstance(client, OAuthClient)
        self.assert_fresh_record(client, before)
        assert (client.client_id, client.name, client.type, client.id_token_signed_response_alg, client.first_party,
                client.secret_hash, client.token_generation) == (
            "s6BhdRkqt3Zm1xP0", "Example app", "confidential", "RS256", False, digest("secret"), 0)
        # The lists as tuples, in the order given.
        assert client.redirect_uris == ("https://app.example.com/callback", "http://127.0.0.1:8080/cb")
        assert client.post_logout_redirect_uris == ("https://app.example.com/",)
        assert client.grant_types == ("authorization_code", "refresh_token")
        assert client.scopes == ("openid", "email", "offline_access")
        for found in (storage.oauth_clients.get(client.id), storage.oauth_clients.get_by_uuid(client.uuid),
                      storage.oauth_clients.get_by_client_id(client.client_id)):
            assert self.record_fields(found) == self.record_fields(client)
        # A public client (no secret, empty lists), a first-party one, other lists as lists.
        public = self.oauth_client(storage, "spa-client-0000001", type="public", secret_hash=None,
                                   post_logout_redirect_uris=[], grant_types=["authorization_code"],
                                   scopes=["openid"], first_party=True, id_token_signed_response_alg="ES256")
        assert (public.type, public.secret_hash, public.post_logout_redirect_uris, public.grant_types,
                public.scopes, public.first_party, public.id_token_signed_response_alg) == (
            "public", None, (), ("authorization_code",), ("openid",), True, "ES256")
        assert self.record_fields(storage.oauth_clients.get_by_client_id("spa-client-0000001")) == \
            self.record_fields(public)
        assert public.id > client.id and public.uuid != client.uuid
        for unknown in ("nobody", "", None, 7, b"s6BhdRkqt3Zm1xP0", ["s6BhdRkqt3Zm1xP0"]):
            assert storage.oauth_clients.get_by_client_id(unknown) is None, unknown

    def test_oauth_client_id_is_unique_among_live_clients(self, storage):
        first = self.oauth_client(storage)
        with pytest.raises(Conflict) as taken:
            self.oauth_client(storage, name="Another app")
        assert "client_id" in taken.value.fields
        assert self.oauth_client(storage, "S6BHDRKQT3ZM1XP0").client_id == "S6BHDRKQT3ZM1XP0"  # case matters
        deleted = storage.oauth_clients.delete(first.id)
        assert deleted.deleted_at is not None and deleted.client_id == first.client_id
        assert storage.oauth_clients.get(first.id) is None
        assert storage.oauth_clients.get_by_uuid(first.uuid) is None
        assert storage.oauth_clients.get_by_client_id(first.client_id) is None
        assert storage.oauth_clients.count() == 1
        assert [c.client_id for c in storage.oauth_clients.list().items] == ["S6BHDRKQT3ZM1XP0"]
        with pytest.raises(NotFound):
            storage.oauth_clients.delete(first.id)
        # Its client_id is free again once it is deleted.
        again = self.oauth_client(storage, name="Again")
        assert again.id != first.id and storage.oauth_clients.get_by_client_id(first.client_id).id == again.id

    def test_concurrent_oauth_clients_of_one_client_id(self, storage):
        results = run_together(6, lambda i: self.oauth_client(storage, "racing-client-00001", name=f"app {i}"))
        made = [r for r in results if isinstance(r, OAuthClient)]
        assert len(made) == 1, results
        assert all(isinstance(r, Conflict) for r in results if not isinstance(r, OAuthClient)), results
        assert storage.oauth_clients.count() == 1

    def test_oauth_client_update(self, storage):
        client = self.oauth_client(storage)
        time.sleep(0.01)
        updated = storage.oauth_clients.update(
            client.id, name="Renamed", redirect_uris=["https://b.example.com/cb", "https://a.example.com/cb"],
            post_logout_redirect_uris=(), grant_types=("authorization_code",), scopes=["openid"],
            id_token_signed_response_alg="EdDSA", first_party=True, secret_hash=digest("rotated"))
        assert (updated.id, updated.uuid, updated.client_id, updated.type, updated.token_generation) == (
            client.id, client.uuid, client.client_id, client.type, 0)
        assert (updated.name, updated.redirect_uris, updated.post_logout_redirect_uris, updated.grant_types,
                updated.scopes, updated.id_token_signed_response_alg, updated.first_party, updated.secret_hash) == (
            "Renamed", ("https://b.example.com/cb", "https://a.example.com/cb"), (), ("authorization_code",),
            ("openid",), "EdDSA", True, digest("rotated"))
        assert utc(updated.updated_at) > utc(client.updated_at) and utc(updated.created_at) == utc(client.created_at)
        assert self.record_fields(storage.oauth_clients.get(client.id)) == self.record_fields(updated)
        # None changes nothing; neither does the same value.
        same = storage.oauth_clients.update(client.id, name=None, secret_hash=None, scopes=None)
        assert self.record_fields(same) == self.record_fields(updated)
        # What identifies a client, and what storage keeps, never changes.
        for field, value in (("client_id", "other"), ("type", "public"), ("token_generation", 5),
                             ("uuid", new_uuid()), ("created_at", utcnow()), ("deleted_at", utcnow())):
            with pytest.raises(ValueError):
                storage.oauth_clients.update(client.id, **{field: value})
        assert self.record_fields(storage.oauth_clients.get(client.id)) == self.record_fields(updated)
        with pytest.raises(NotFound):
            storage.oauth_clients.update(MAX_ID, name="x")
        storage.oauth_clients.delete(client.id)
        with pytest.raises(NotFound):
            storage.oauth_clients.update(client.id, name="x")

    def test_oauth_clients_list_and_count(self, storage):
        made = [self.oauth_client(storage, f"client-{i:02d}-0000000000", name=f"app {i}") for i in range(5)]
        storage.oauth_clients.delete(made[1].id)
        live = [c.id for c in made if c.id != made[1].id]
        first = storage.oauth_clients.list(limit=2)
        assert [c.id for c in first.items] == live[:2] and first.next_after_id == live[1]
        rest = storage.oauth_clients.list(after_id=first.next_after_id, limit=2)
        assert [c.id for c in rest.items] == live[2:] and rest.next_after_id is None
        assert all(isinstance(c, OAuthClient) for c in first.items + rest.items)
        assert storage.oauth_clients.count() == 4
        with pytest.raises(ValueError):
            storage.oauth_clients.list(client_id="client-00-0000000000")
        if isinstance(storage.oauth_clients, DocumentPages):  # optional: the same pages as documents
            fields = (("id", "value"), ("client_id", "value"), ("first_party", "bool"), ("deleted_at", "timestamp"))
            documents = storage.oauth_clients.list_documents(fields, limit=2)
            assert documents.items == [{"id": c.id, "client_id": c.client_id, "first_party": False, "deleted_at": None}
                                       for c in first.items]
            assert documents.next_after_id == first.next_after_id

    def test_revoke_tokens_moves_the_generation_on_by_one(self, storage):
        client = self.oauth_client(storage)
        other = self.oauth_client(storage, "another-client-000001")
        moved = storage.oauth_clients.revoke_tokens(client.id)
        assert isinstance(moved, OAuthClient) and moved.token_generation == 1
        assert storage.oauth_clients.revoke_tokens(client.id).token_generation == 2
        assert storage.oauth_clients.get_by_client_id(client.client_id).token_generation == 2
        assert storage.oauth_clients.get(other.id).token_generation == 0
        # Nothing else of the client changes.
        kept = self.record_fields(storage.oauth_clients.get(client.id))
        assert kept[:-1] == self.record_fields(client)[:-1]
        storage.oauth_clients.delete(client.id)
        assert storage.oauth_clients.revoke_tokens(client.id) is None
        assert storage.oauth_clients.revoke_tokens(MAX_ID) is None
        assert storage.oauth_clients.revoke_tokens(0) is None

    def test_concurrent_token_revocations_each_count(self, storage):
        client = self.oauth_client(storage)
        for round_ in range(1, 4):
            results = run_together(6, lambda i: storage.oauth_clients.revoke_tokens(client.id))
            assert all(isinstance(r, OAuthClient) for r in results), results
            # Each call moved it by one: every answer is a different generation.
            assert sorted(r.token_generation for r in results) == list(range(6 * round_ - 5, 6 * round_ + 1))
            assert storage.oauth_clients.get(client.id).token_generation == 6 * round_

    # consents

    ADA_APP = "consenting-client-001"

    def test_consent_grant_adds_scopes(self, storage):
        ada = self.user(storage)
        assert storage.consents.get(ada.uuid, self.ADA_APP) is None
        before = datetime.now(timezone.utc)
        first = storage.consents.grant(ada.uuid, self.ADA_APP, ["openid", "email", "openid"])
        assert isinstance(first, Consent)
        assert isinstance(first.id, int) and UUID4.fullmatch(first.uuid)
        assert (first.user_uuid, first.client_id, first.scopes) == (ada.uuid, self.ADA_APP, ("email", "openid"))
        assert first.created_at == first.updated_at
        assert before - timedelta(seconds=2) <= utc(first.created_at) <= datetime.now(timezone.utc) + timedelta(seconds=2)
        assert storage.consents.get(ada.uuid, self.ADA_APP) == first
        # Allowing what is allowed already changes nothing.
        assert storage.consents.grant(ada.uuid, self.ADA_APP, ("email",)) == first
        time.sleep(0.01)
        grown = storage.consents.grant(ada.uuid, self.ADA_APP, ["profile", "groups"])
        assert (grown.id, grown.uuid, grown.scopes) == (first.id, first.uuid, ("email", "groups", "openid", "profile"))
        assert utc(grown.created_at) == utc(first.created_at) and utc(grown.updated_at) > utc(first.updated_at)
        assert storage.consents.get(ada.uuid, self.ADA_APP) == grown
        # Another user's, another client's: not this one.
        assert storage.consents.get(ada.uuid, "another-client") is None
        assert storage.consents.get(new_uuid(), self.ADA_APP) is None
        for not_text in (None, 5, b"x"):
            assert storage.consents.get(not_text, self.ADA_APP) is None
            assert storage.consents.get(ada.uuid, not_text) is None

    def test_consents_of_a_user_and_withdrawing_one(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        mine = [storage.consents.grant(ada.uuid, f"client-{n}", ["openid"]) for n in (3, 1, 2)]
        storage.consents.grant(bob.uuid, "client-1", ["openid", "email"])
        assert storage.consents.of_user(ada.uuid) == mine  # oldest first
        assert [c.client_id for c in storage.consents.of_user(bob.uuid)] == ["client-1"]
        assert storage.consents.of_user(new_uuid()) == []
        assert storage.consents.withdraw(ada.uuid, "client-1") is True
        assert storage.consents.withdraw(ada.uuid, "client-1") is False
        assert storage.consents.get(ada.uuid, "client-1") is None
        assert [c.client_id for c in storage.consents.of_user(ada.uuid)] == ["client-3", "client-2"]
        assert storage.consents.get(bob.uuid, "client-1").scopes == ("email", "openid")  # bob's stays
        assert storage.consents.withdraw(new_uuid(), "client-3") is False
        assert storage.consents.withdraw(None, "client-3") is False
        # Allowing again starts afresh.
        again = storage.consents.grant(ada.uuid, "client-1", ["email"])
        assert again.scopes == ("email",) and again.uuid != mine[1].uuid
        assert [c.client_id for c in storage.consents.of_user(ada.uuid)] == ["client-3", "client-2", "client-1"]

    def test_concurrent_first_consents_make_one(self, storage):
        ada = self.user(storage)
        scopes = ["openid", "email", "profile", "groups", "offline_access", "openid"]
        results = run_together(6, lambda i: storage.consents.grant(ada.uuid, self.ADA_APP, [scopes[i]]))
        assert all(isinstance(r, Consent) for r in results), results
        assert len({r.uuid for r in results}) == 1, results
        assert storage.consents.get(ada.uuid, self.ADA_APP).scopes == tuple(sorted(set(scopes)))
        assert len(storage.consents.of_user(ada.uuid)) == 1

    # authorization codes

    def authorization_code(self, storage, name: str = "code", *, expires_at: datetime | None = None,
                           **changes) -> AuthorizationCode:
        values = dict(code_hash=digest(name), client_id="s6BhdRkqt3Zm1xP0", user_uuid="5f3a1c2e-0000-4000-8000-00000000000a",
                      redirect_uri="https://app.example.com/callback?tenant=a&x=%20y", scope="openid email",
                      nonce="n-0S6_WzA2Mj", code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                      code_challenge_method="S256", auth_time=(utcnow() - timedelta(minutes=3)).replace(microsecond=123456),
                      amr=["pwd", "otp"], op_session_uuid="a0000000-0000-4000-8000-000000000000",
                      session_uuid=new_uuid(), expires_at=expires_at or utcnow() + timedelta(minutes=1))
        values.update(changes)
        return storage.oauth_codes.add(**values)

    def test_authorization_code_add_and_find(self, storage):
        before = datetime.now(timezone.utc)
        auth_time = (utcnow() - timedelta(minutes=3)).replace(microsecond=123456)
        expires = (utcnow() + timedelta(minutes=1)).replace(microsecond=654321)
        code = self.authorization_code(storage, auth_time=auth_time, expires_at=expires,
                                       session_uuid="c0000000-0000-4000-8000-000000000000")
        assert isinstance(code, AuthorizationCode) and isinstance(code.id, int) and code.id > 0
        assert (code.code_hash, code.client_id, code.user_uuid, code.redirect_uri, code.scope, code.nonce,
                code.code_challenge, code.code_challenge_method, code.amr, code.op_session_uuid, code.session_uuid,
                code.used_at) == (
            digest("code"), "s6BhdRkqt3Zm1xP0", "5f3a1c2e-0000-4000-8000-00000000000a",
            "https://app.example.com/callback?tenant=a&x=%20y", "openid email", "n-0S6_WzA2Mj",
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "S256", ("pwd", "otp"),
            "a0000000-0000-4000-8000-000000000000", "c0000000-0000-4000-8000-000000000000", None)
        assert utc(code.auth_time) == utc(auth_time) and utc(code.expires_at) == utc(expires)
        assert before - timedelta(seconds=2) <= utc(code.created_at) <= datetime.now(timezone.utc) + timedelta(seconds=2)
        assert self.record_fields(storage.oauth_codes.find(digest("code"))) == self.record_fields(code)
        # What may be missing: no nonce, no PKCE, no OP session, no amr.
        bare = self.authorization_code(storage, "bare", nonce=None, code_challenge=None, code_challenge_method=None,
                                       op_session_uuid=None, amr=())
        assert (bare.nonce, bare.code_challenge, bare.code_challenge_method, bare.op_session_uuid, bare.amr) == (
            None, None, None, None, ())
        assert self.record_fields(storage.oauth_codes.find(digest("bare"))) == self.record_fields(bare)
        assert storage.oauth_codes.find(digest("unknown")) is None
        for not_text in (None, 5, b"x"):
            assert storage.oauth_codes.find(not_text) is None

    def test_authorization_code_is_used_once_and_stays_findable(self, storage):
        code = self.authorization_code(storage)
        moment = utcnow()
        used = storage.oauth_codes.use(digest("code"), now=moment)
        assert isinstance(used, AuthorizationCode) and utc(used.used_at) == utc(moment)
        assert self.record_fields(used)[:-1] == self.record_fields(code)[:-1]
        assert storage.oauth_codes.use(digest("code"), now=utcnow()) is None
        # Still findable, used: a second exchange is noticed.
        found = storage.oauth_codes.find(digest("code"))
        assert found is not None and utc(found.used_at) == utc(moment)
        assert storage.oauth_codes.use(digest("unknown"), now=utcnow()) is None
        assert storage.oauth_codes.use(None, now=utcnow()) is None

    def test_an_expired_authorization_code_is_refused_and_not_spent(self, storage):
        expires = (utcnow() + timedelta(minutes=1)).replace(microsecond=0)
        self.authorization_code(storage, expires_at=expires)
        assert storage.oauth_codes.use(digest("code"), now=expires) is None  # it must expire *after* now
        assert storage.oauth_codes.use(digest("code"), now=expires + timedelta(seconds=1)) is None
        assert storage.oauth_codes.find(digest("code")).used_at is None
        assert storage.oauth_codes.use(digest("code"), now=expires - timedelta(seconds=1)) is not None

    def test_concurrent_exchanges_of_one_code_let_one_through(self, storage):
        for round_ in range(10):
            self.authorization_code(storage, f"race-{round_}")
            results = run_together(2 if round_ % 2 else 6,
                                   lambda i: storage.oauth_codes.use(digest(f"race-{round_}"), now=utcnow()))
            assert len([r for r in results if isinstance(r, AuthorizationCode)]) == 1, (round_, results)
            assert all(r is None for r in results if not isinstance(r, AuthorizationCode)), (round_, results)

    def test_exchanges_racing_across_processes_let_one_through(self, storage, other_processes):
        for round_ in range(ROUNDS):
            self.authorization_code(storage, f"race-{round_}")
        rounds = race_in_processes(other_processes, use_code_in_race)
        for number, outcomes in enumerate(rounds):
            assert sorted(outcomes) == [("value", False)] * (PROCESSES - 1) + [("value", True)], (number, outcomes)

    def test_adding_an_authorization_code_prunes_codes_expired_a_day_ago(self, storage):
        now = utcnow()
        self.authorization_code(storage, "old", expires_at=now - timedelta(days=2))
        self.authorization_code(storage, "recent", expires_at=now - timedelta(hours=1))
        storage.oauth_codes.use(digest("recent"), now=now - timedelta(hours=2))
        self.authorization_code(storage, "fresh")
        assert storage.oauth_codes.find(digest("old")) is None
        assert storage.oauth_codes.find(digest("recent")).used_at is not None  # kept for a day: reuse is noticed
        assert storage.oauth_codes.find(digest("fresh")) is not None

    def test_atomic_undoes_the_openid_providers_writes(self, storage):
        ada = self.user(storage)
        client = self.oauth_client(storage)
        self.authorization_code(storage, "kept")
        with pytest.raises(RuntimeError):
            with storage.atomic():
                self.oauth_client(storage, "made-in-the-block-01")
                storage.oauth_clients.update(client.id, name="Renamed")
                storage.oauth_clients.revoke_tokens(client.id)
                storage.consents.grant(ada.uuid, client.client_id, ["openid"])
                self.authorization_code(storage, "made")
                assert storage.oauth_codes.use(digest("kept"), now=utcnow()) is not None
                storage.sessions.create(uuid=self.SESSION, user_uuid=ada.uuid, refresh_jti="j", client_id="x",
                                        scope="openid", op_session_uuid=None, amr=["pwd"])
                raise RuntimeError("the block fails")
        assert storage.oauth_clients.get_by_client_id("made-in-the-block-01") is None
        assert self.record_fields(storage.oauth_clients.get(client.id)) == self.record_fields(client)
        assert storage.consents.get(ada.uuid, client.client_id) is None
        assert storage.oauth_codes.find(digest("made")) is None
        assert storage.oauth_codes.find(digest("kept")).used_at is None
        assert storage.sessions.authenticate(self.SESSION) is None
        with storage.atomic():
            storage.consents.grant(ada.uuid, client.client_id, ["openid"])
            storage.oauth_codes.use(digest("kept"), now=utcnow())
        assert storage.consents.get(ada.uuid, client.client_id).scopes == ("openid",)
        assert storage.oauth_codes.find(digest("kept")).used_at is not None

    # -- provisioning ids and ownerless groups (SCIM) ----------------------------

    OKTA_ID = "00ujl29u0le5T6Aj10h7"

    def test_user_external_id_is_kept_updated_and_cleared(self, storage):
        plain = self.user(storage, "plain@example.com", "Plain")
        assert plain.external_id is None and storage.users.get(plain.id).external_id is None
        user = storage.users.create(name="Ada", email="ada@example.com", password_hash="x", external_id=self.OKTA_ID)
        assert user.external_id == self.OKTA_ID
        assert storage.users.get(user.id) == user and storage.users.get_by_email("ada@example.com") == user
        time.sleep(0.002)
        changed = storage.users.update(user.id, external_id="okta|2 ü")
        assert (changed.external_id, changed.name, changed.email) == ("okta|2 ü", "Ada", "ada@example.com")
        assert changed.updated_at > user.updated_at
        assert storage.users.get(user.id) == changed
        assert storage.users.update(user.id, external_id=None) == changed  # None: as stored
        assert storage.users.update(user.id, external_id="okta|2 ü") == changed  # no change, no new updated_at
        cleared = storage.users.update(user.id, external_id="")  # "" clears it
        assert cleared.external_id is None and storage.users.get(user.id) == cleared
        assert storage.users.count(external_id="okta|2 ü") == 0
        # An empty id given to create is none at all.
        empty = storage.users.create(name="Eve", email="eve@example.com", password_hash="x", external_id="")
        assert storage.users.get(empty.id).external_id is None

    def test_users_filter_by_external_id_exactly(self, storage):
        ada = storage.users.create(name="Ada", email="ada@example.com", password_hash="x", external_id="ext-A")
        bob = storage.users.create(name="Bob", email="bob@example.com", password_hash="x", external_id="ext-A")
        carol = storage.users.create(name="Carol", email="carol@example.com", password_hash="x", external_id="ext-a")
        self.user(storage, "dan@example.com", "Dan")
        # Not unique: a provisioning system's id is kept as given.
        assert storage.users.list(external_id="ext-A").items == [ada, bob]
        assert storage.users.count(external_id="ext-A") == 2
        assert storage.users.list(external_id="ext-a").items == [carol]  # compared exactly
        assert storage.users.list(external_id="ext-A ").items == [] and storage.users.count(external_id="ext") == 0
        page = storage.users.list(external_id="ext-A", limit=1)
        assert page.items == [ada] and page.next_after_id == ada.id
        assert storage.users.list(external_id="ext-A", after_id=ada.id).items == [bob]
        assert storage.users.list(external_id="ext-A", email="bob@example.com").items == [bob]
        assert storage.users.count(external_id=None) == 4
        storage.users.delete(bob.id)
        assert storage.users.list(external_id="ext-A").items == [ada]

    def test_group_external_id_is_kept_updated_and_cleared(self, storage):
        owner = self.user(storage)
        plain = self.group(storage, owner)
        assert plain.external_id is None and storage.groups.get(plain.id).external_id is None
        group = storage.groups.create(name="designers", description="", owner_uuid=owner.uuid,
                                      external_id=self.OKTA_ID)
        assert group.external_id == self.OKTA_ID and storage.groups.get(group.id) == group
        twin = storage.groups.create(name="twins", description="", owner_uuid=owner.uuid, external_id=self.OKTA_ID)
        assert storage.groups.list(external_id=self.OKTA_ID).items == [group, twin]
        assert storage.groups.count(external_id=self.OKTA_ID) == 2
        assert storage.groups.count(external_id=self.OKTA_ID.lower()) == 0
        time.sleep(0.002)
        changed = storage.groups.update(group.id, external_id="g-2")
        assert (changed.external_id, changed.name) == ("g-2", "designers") and changed.updated_at > group.updated_at
        assert storage.groups.get(group.id) == changed
        assert storage.groups.update(group.id, external_id=None, name=None) == changed
        cleared = storage.groups.update(group.id, external_id="")
        assert cleared.external_id is None and storage.groups.get(group.id) == cleared
        assert storage.groups.list(external_id=self.OKTA_ID).items == [twin]
        storage.groups.delete(twin.id)
        assert storage.groups.count(external_id=self.OKTA_ID) == 0

    def test_a_group_may_be_made_without_an_owner(self, seeded):
        before = datetime.now(timezone.utc)
        group = seeded.groups.create(name="provisioned", description="From the directory", owner_uuid=None,
                                     external_id="grp-1")
        self.assert_fresh_record(group, before)
        assert (group.name, group.description, group.external_id) == ("provisioned", "From the directory", "grp-1")
        assert seeded.groups.get(group.id) == group
        assert seeded.members.count(group_uuid=group.uuid) == 0 and seeded.members.count() == 0
        # Its members come later; its name is as unique as any group's.
        ada = self.user(seeded)
        member = seeded.members.create(group_uuid=group.uuid, user_uuid=ada.uuid, role="member")
        assert seeded.members.list(group_uuid=group.uuid).items == [member]
        assert seeded.members.role_of(ada.uuid, group.uuid) == "member"
        with pytest.raises(Conflict) as caught:
            seeded.groups.create(name="provisioned", description="", owner_uuid=None)
        assert caught.value.fields == {"name": "Already exists."}
        # An owner that is given must still exist.
        with pytest.raises(Invalid) as invalid:
            seeded.groups.create(name="other", description="", owner_uuid=new_uuid())
        assert list(invalid.value.fields) == ["owner_uuid"]
        assert seeded.groups.count() == 1
        seeded.groups.delete(group.id)
        assert seeded.members.count(group_uuid=group.uuid) == 0

    # -- passkeys ----------------------------------------------------------------------

    #: A credential id and COSE key as a browser hands them over (unpadded base64url).
    CREDENTIAL = "mXw3qKx0T0aQpF8lZ7bq_8Zb0hHq1A-2rJm4h2Zt9sE"
    COSE_KEY = ("pQECAyYgASFYIPgJ0wFHS3o5d2K1zQ9y4OqJfFqNq3Vd5lGxjS0eTzVdIlggJ3b5nQ0lq8Zy3Y5k8m0GJH7mH1c"
                "X4r2b7cH0mJ6uX9k")
    AAGUID = "adce0002-35bc-c60a-648b-0b25f1f05503"

    def passkey(self, storage, user: User, credential_id: str | None = None, **changes) -> Passkey:
        values = dict(user_uuid=user.uuid, credential_id=credential_id or self.CREDENTIAL, public_key=self.COSE_KEY,
                      sign_count=0, name="MacBook Touch ID", transports=["internal", "hybrid"], aaguid=self.AAGUID,
                      backed_up=True)
        values.update(changes)
        return storage.passkeys.add(**values)

    def test_passkey_add_returns_the_stored_record(self, storage):
        ada = self.user(storage)
        before = datetime.now(timezone.utc)
        made = self.passkey(storage, ada, sign_count=7)
        assert isinstance(made, Passkey) and isinstance(made.id, int) and 0 < made.id <= MAX_ID
        assert UUID4.fullmatch(made.uuid), made.uuid
        assert (made.user_uuid, made.credential_id, made.public_key, made.sign_count, made.name, made.transports,
                made.aaguid, made.backed_up, made.last_used_at) == (
            ada.uuid, self.CREDENTIAL, self.COSE_KEY, 7, "MacBook Touch ID", ("internal", "hybrid"), self.AAGUID,
            True, None)
        assert before - timedelta(seconds=2) <= utc(made.created_at) <= datetime.now(timezone.utc) + timedelta(
            seconds=2)
        assert self.record_fields(storage.passkeys.get_by_credential_id(self.CREDENTIAL)) == self.record_fields(made)
        assert [self.record_fields(p) for p in storage.passkeys.of_user(ada.uuid)] == [self.record_fields(made)]
        # The longest credential id WebAuthn allows (1023 bytes), a long key, no transports,
        # a name in any script, an authenticator that does not say what it is.
        longest = "A" * 1363 + "Q"
        big = self.passkey(storage, ada, longest, public_key="k" * 3000, transports=(), name="Clé «Ⅱ» 🔑",
                           aaguid="00000000-0000-0000-0000-000000000000", backed_up=False, sign_count=2**32 - 1)
        assert (big.credential_id, big.public_key, big.transports, big.name, big.backed_up, big.sign_count) == (
            longest, "k" * 3000, (), "Clé «Ⅱ» 🔑", False, 2**32 - 1)
        assert self.record_fields(storage.passkeys.get_by_credential_id(longest)) == self.record_fields(big)
        assert made.uuid != big.uuid and big.id > made.id

    def test_a_credential_id_is_registered_once_across_users(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        kept = self.passkey(storage, ada)
        for owner in (ada, bob):
            with pytest.raises(Conflict) as caught:
                self.passkey(storage, owner, name="Again")
            assert caught.value.fields == {"credential": "Already registered."}
        assert [p.id for p in storage.passkeys.of_user(ada.uuid)] == [kept.id]
        assert storage.passkeys.of_user(bob.uuid) == []
        # Credential ids are case-sensitive (base64url): another case is another credential.
        other = self.passkey(storage, bob, self.CREDENTIAL.swapcase())
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL.swapcase()).id == other.id
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL).id == kept.id

    def test_concurrent_registrations_of_one_credential_keep_one(self, storage):
        users = [self.user(storage, f"u{i}@example.com", f"U{i}") for i in range(6)]
        results = run_together(6, lambda i: self.passkey(storage, users[i], "raced-credential"))
        made = [r for r in results if isinstance(r, Passkey)]
        assert len(made) == 1, results
        assert all(isinstance(r, Conflict) and r.fields == {"credential": "Already registered."}
                   for r in results if not isinstance(r, Passkey)), results
        assert storage.passkeys.get_by_credential_id("raced-credential").id == made[0].id
        assert sum(len(storage.passkeys.of_user(u.uuid)) for u in users) == 1

    def test_passkeys_of_a_user_oldest_first(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        mine = [self.passkey(storage, ada, f"ada-{n}", name=f"key {n}") for n in (3, 1, 2)]
        bobs = self.passkey(storage, bob, "bob-1")
        assert [p.id for p in storage.passkeys.of_user(ada.uuid)] == [p.id for p in mine]
        assert [p.name for p in storage.passkeys.of_user(ada.uuid)] == ["key 3", "key 1", "key 2"]
        assert [p.id for p in storage.passkeys.of_user(bob.uuid)] == [bobs.id]
        assert storage.passkeys.of_user(new_uuid()) == []
        for not_text in (None, 5, b"x"):
            assert storage.passkeys.of_user(not_text) == []

    def test_an_unknown_credential_id_finds_nothing(self, storage):
        self.passkey(storage, self.user(storage))
        assert storage.passkeys.get_by_credential_id("unknown") is None
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL + " ") is None
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL[:-1]) is None
        for not_text in (None, 5, b"x", [self.CREDENTIAL]):
            assert storage.passkeys.get_by_credential_id(not_text) is None

    def test_passkey_use_moves_the_counter_forward_only(self, storage):
        made = self.passkey(storage, self.user(storage), sign_count=10)
        first = utcnow().replace(microsecond=123456)
        used = storage.passkeys.use(made.id, sign_count=11, now=first)
        assert isinstance(used, Passkey) and used.sign_count == 11 and utc(used.last_used_at) == utc(first)
        # Nothing else changed.
        unchanged = ("id", "uuid", "user_uuid", "credential_id", "public_key", "name", "transports", "aaguid",
                     "backed_up", "created_at")
        assert [getattr(used, f) for f in unchanged] == [getattr(made, f) for f in unchanged[:-1]] + [used.created_at]
        assert utc(used.created_at) == utc(made.created_at)
        assert self.record_fields(storage.passkeys.get_by_credential_id(self.CREDENTIAL)) == self.record_fields(used)
        # The same count again, a lower one, or 0 once it counted: refused, nothing changed.
        for count in (11, 10, 3, 0):
            assert storage.passkeys.use(made.id, sign_count=count, now=utcnow()) is None, count
        assert self.record_fields(storage.passkeys.get_by_credential_id(self.CREDENTIAL)) == self.record_fields(used)
        later = storage.passkeys.use(made.id, sign_count=500, now=first + timedelta(minutes=1))
        assert later.sign_count == 500 and utc(later.last_used_at) == utc(first + timedelta(minutes=1))
        # No such passkey.
        assert storage.passkeys.use(made.id + 1000, sign_count=1000, now=utcnow()) is None
        for not_an_id in (None, "1", 0, -1, MAX_ID + 1):
            assert storage.passkeys.use(not_an_id, sign_count=1000, now=utcnow()) is None

    def test_a_passkey_without_a_counter_stays_at_zero(self, storage):
        made = self.passkey(storage, self.user(storage), sign_count=0)
        first = utcnow()
        once = storage.passkeys.use(made.id, sign_count=0, now=first)
        assert once.sign_count == 0 and utc(once.last_used_at) == utc(first)
        again = storage.passkeys.use(made.id, sign_count=0, now=first + timedelta(seconds=5))
        assert again.sign_count == 0 and utc(again.last_used_at) == utc(first + timedelta(seconds=5))
        # Used again at the same moment (two sign-ins in one clock tick): nothing in the
        # row changes, and the use is still good (a storage that counts changed rows
        # rather than matched ones would refuse it).
        same = storage.passkeys.use(made.id, sign_count=0, now=first + timedelta(seconds=5))
        assert same is not None and same.sign_count == 0
        assert utc(same.last_used_at) == utc(first + timedelta(seconds=5))
        # An authenticator that starts counting counts on from there, never back to 0.
        counted = storage.passkeys.use(made.id, sign_count=1, now=utcnow())
        assert counted.sign_count == 1
        assert storage.passkeys.use(made.id, sign_count=0, now=utcnow()) is None
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL).sign_count == 1

    def test_concurrent_uses_with_one_count_let_one_through(self, storage):
        made = self.passkey(storage, self.user(storage), sign_count=1)
        for round_ in range(10):
            count = round_ + 2
            results = run_together(2 if round_ % 2 else 6,
                                   lambda i: storage.passkeys.use(made.id, sign_count=count, now=utcnow()))
            assert len([r for r in results if isinstance(r, Passkey)]) == 1, (round_, results)
            assert all(r is None for r in results if not isinstance(r, Passkey)), (round_, results)
            assert storage.passkeys.get_by_credential_id(self.CREDENTIAL).sign_count == count

    def test_uses_racing_across_processes_let_one_through(self, storage, other_processes):
        made = self.passkey(storage, self.user(storage), sign_count=1)
        rounds = race_in_processes(other_processes, use_passkey_in_race, made.id)
        for number, outcomes in enumerate(rounds):
            assert sorted(outcomes) == [("value", False)] * (PROCESSES - 1) + [("value", True)], (number, outcomes)
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL).sign_count == ROUNDS + 1

    def test_only_its_owner_renames_or_removes_a_passkey(self, storage):
        ada = self.user(storage)
        bob = self.user(storage, "bob@example.com", "Bob")
        made = self.passkey(storage, ada)
        bobs = self.passkey(storage, bob, "bob-credential")
        assert storage.passkeys.rename(bob.uuid, made.id, "Mine now") is None
        assert storage.passkeys.remove(bob.uuid, made.id) is None
        assert self.record_fields(storage.passkeys.get_by_credential_id(self.CREDENTIAL)) == self.record_fields(made)
        for user_uuid, id in ((new_uuid(), made.id), (None, made.id), (ada.uuid, made.id + 1000),
                              (ada.uuid, None), (ada.uuid, str(made.id))):
            assert storage.passkeys.rename(user_uuid, id, "x") is None
            assert storage.passkeys.remove(user_uuid, id) is None
        renamed = storage.passkeys.rename(ada.uuid, made.id, "YubiKey 5 «NFC»")
        assert renamed.name == "YubiKey 5 «NFC»"
        assert self.record_fields(renamed)[:6] + self.record_fields(renamed)[7:] == \
            self.record_fields(made)[:6] + self.record_fields(made)[7:]
        assert self.record_fields(storage.passkeys.get_by_credential_id(self.CREDENTIAL)) == self.record_fields(renamed)
        removed = storage.passkeys.remove(ada.uuid, made.id)
        assert self.record_fields(removed) == self.record_fields(renamed)
        assert storage.passkeys.of_user(ada.uuid) == []
        assert storage.passkeys.get_by_credential_id(self.CREDENTIAL) is None
        assert storage.passkeys.remove(ada.uuid, made.id) is None
        assert storage.passkeys.use(made.id, sign_count=50, now=utcnow()) is None
        assert [p.id for p in storage.passkeys.of_user(bob.uuid)] == [bobs.id]  # bob's stays
        # Removed is deleted: the credential may be registered again, as a new passkey.
        again = self.passkey(storage, bob)
        assert again.id != made.id and again.uuid != made.uuid

    def test_atomic_undoes_passkey_writes(self, storage):
        ada = self.user(storage)
        kept = self.passkey(storage, ada, sign_count=3)
        with pytest.raises(RuntimeError):
            with storage.atomic():
                self.passkey(storage, ada, "made-in-the-block")
                assert storage.passkeys.use(kept.id, sign_count=4, now=utcnow()) is not None
                storage.passkeys.rename(ada.uuid, kept.id, "renamed")
                assert len(storage.passkeys.of_user(ada.uuid)) == 2  # the block reads its own writes
                assert storage.passkeys.remove(ada.uuid, kept.id) is not None
                raise RuntimeError("the block fails")
        assert storage.passkeys.get_by_credential_id("made-in-the-block") is None
        assert [self.record_fields(p) for p in storage.passkeys.of_user(ada.uuid)] == [self.record_fields(kept)]

    # -- atomic blocks ------------------------------------------------------------

    def test_atomic_keeps_the_writes_of_every_store(self, storage):
        with storage.atomic():
            user = self.user(storage)
            letter = storage.outbox.put(purpose="verify", email=user.email, user_uuid=user.uuid)
            assert storage.users.get(user.id) == user  # the block reads its own writes
        assert storage.users.get(user.id) == user
        assert storage.outbox.pending() == 1
        assert [l.id for l in storage.outbox.claim(now=utcnow(), lease=30)] == [letter.id]

    def test_atomic_undoes_every_write_when_the_block_raises(self, storage):
        ada = self.user(storage)
        storage.outbox.put(purpose="verify", email=ada.email, user_uuid=ada.uuid)
        pending = storage.outbox.pending()
        failure = RuntimeError("the block fails")
        with pytest.raises(RuntimeError) as caught:
            with storage.atomic():
                bob = self.user(storage, "bob@example.com", "Bob")
                storage.outbox.put(purpose="verify", email=bob.email, user_uuid=bob.uuid)
                storage.users.update(ada.id, name="Changed", disabled=True)
                storage.codes.add(code_hash=digest("atomic"), purpose="verify", user_uuid=bob.uuid,
                                  email=bob.email, expires_at=utcnow() + timedelta(hours=1))
                raise failure
        assert caught.value is failure
        assert storage.users.get_by_email("bob@example.com") is None
        assert storage.users.count() == 1
        assert storage.users.get(ada.id) == ada
        assert storage.outbox.pending() == pending
        assert storage.codes.find(digest("atomic"), "verify", now=utcnow()) is None
        # The storage works on, and the email is free.
        assert self.user(storage, "bob@example.com", "Bob").email == "bob@example.com"

    def test_atomic_lets_a_conflict_propagate_and_undoes_the_block(self, storage):
        self.user(storage)
        with pytest.raises(Conflict) as caught:
            with storage.atomic():
                self.user(storage, "carol@example.com", "Carol")
                self.user(storage, "ada@example.com", "Another Ada")
        assert caught.value.fields == {"email": "Already registered."}
        assert storage.users.get_by_email("carol@example.com") is None
        assert storage.users.count() == 1

    def test_nested_atomic_blocks_join_the_outer_one(self, storage):
        with storage.atomic():
            with storage.atomic():
                kept = self.user(storage)
            storage.outbox.put(purpose="verify", email=kept.email)
        assert storage.users.get(kept.id) == kept and storage.outbox.pending() == 1
        with pytest.raises(RuntimeError):
            with storage.atomic():
                with storage.atomic():
                    self.user(storage, "bob@example.com", "Bob")
                    storage.outbox.put(purpose="verify", email="bob@example.com")
                raise RuntimeError("the outer block fails")
        # The inner block's writes went with the outer one's.
        assert storage.users.get_by_email("bob@example.com") is None
        assert storage.outbox.pending() == 1

    def test_atomic_undoes_audit_events_with_their_change(self, storage):
        ada = self.user(storage)
        registered = self.audit_event(storage, "user.registered", actor_uuid=ada.uuid, target_type="user",
                                      target_uuid=ada.uuid)
        old = self.audit_event(storage, "user.login", at=utcnow() - timedelta(days=400))
        failure = RuntimeError("the block fails")
        with pytest.raises(RuntimeError) as caught:
            with storage.atomic():
                group = self.group(storage, ada)
                created = self.audit_event(storage, "group.created", actor_uuid=ada.uuid, target_type="group",
                                           target_uuid=group.uuid, details={"name": group.name})
                assert storage.audit.prune(utcnow() - timedelta(days=365)) == 1
                # The block reads its own writes.
                assert self.ids(storage.audit.list()) == [registered.id, created.id]
                assert self.ids(storage.audit.list(event="group.created")) == [created.id]
                raise failure
        assert caught.value is failure
        # Neither the change nor its event was kept, and the pruned event is back.
        assert storage.groups.get(group.id) is None and storage.groups.count() == 0
        assert [self.audit_fields(e) for e in storage.audit.list().items] == [
            self.audit_fields(registered), self.audit_fields(old)]
        assert storage.audit.list(event="group.created").items == []
        # A block that ends well keeps both.
        with storage.atomic():
            group = self.group(storage, ada)
            created = self.audit_event(storage, "group.created", actor_uuid=ada.uuid, target_type="group",
                                       target_uuid=group.uuid)
        assert storage.groups.get(group.id) == group
        assert self.ids(storage.audit.list()) == [registered.id, old.id, created.id]
        assert created.id > old.id

    def test_atomic_undoes_webhooks_and_deliveries(self, storage):
        existing = self.webhook(storage, "user.*")
        waiting = self.delivery(storage, existing)
        with pytest.raises(RuntimeError):
            with storage.atomic():
                added = self.webhook(storage, "*")
                event = self.audit_event(storage, "user.login")
                queued = [self.delivery(storage, hook, event="user.login") for hook in (existing, added)]
                assert sorted(h.id for h in storage.webhooks.matching("user.login")) == [existing.id, added.id]
                assert storage.deliveries.pending() == 3
                assert storage.webhooks.delete(existing.id) is not None
                assert storage.deliveries.get(waiting.id) is None  # the block reads its own writes
                assert [h.id for h in storage.webhooks.matching("user.login")] == [added.id]
                raise RuntimeError("the block fails")
        # The subscription deleted in the block is back with its pending delivery; what the
        # block made is gone.
        assert self.webhook_fields(storage.webhooks.get(existing.id)) == self.webhook_fields(existing)
        assert storage.webhooks.get(added.id) is None
        assert self.ids(storage.webhooks.list()) == [existing.id]
        assert [h.id for h in storage.webhooks.matching("user.login")] == [existing.id]
        assert storage.webhooks.matching("group.created") == []
        assert storage.audit.list().items == [] and storage.audit.list(event=event.event).items == []
        assert all(storage.deliveries.get(d.id) is None for d in queued)
        assert self.delivery_fields(storage.deliveries.get(waiting.id)) == self.delivery_fields(waiting)
        assert storage.deliveries.pending() == 1
        assert [d.id for d in storage.deliveries.claim(now=utcnow(), lease=30)] == [waiting.id]
        assert self.ids(storage.deliveries.list(existing.id)) == [waiting.id]
        # A block that ends well keeps them all.
        with storage.atomic():
            added = self.webhook(storage, "group.*")
            kept = self.delivery(storage, added, event="group.created")
        assert self.webhook_fields(storage.webhooks.get(added.id)) == self.webhook_fields(added)
        assert [h.id for h in storage.webhooks.matching("group.created")] == [added.id]
        assert self.delivery_fields(storage.deliveries.get(kept.id)) == self.delivery_fields(kept)
        assert storage.deliveries.pending() == 2
