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

The suite speaks only the ``Storage`` protocol: records in and out are
:mod:`locky.records` dataclasses and errors are :mod:`locky.errors`.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from locky.errors import Conflict, Forbidden, Invalid, NotFound
from locky.providers import BuiltinRole, Migration, SchemaState, Storage
from locky.records import Authenticated, Group, Member, Page, Permission, Role, User

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
BUILTIN = (
    BuiltinRole("owner", "Owns a group", (Permission("groups", "write"), Permission("members", "write"))),
    BuiltinRole("member", "Belongs to a group", ()),
    BuiltinRole("viewer", "Reads a group", (Permission("groups", "read"),)),
)


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (naive ones are taken as UTC)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


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


class StorageContract:
    """The tests every storage provider must pass. Override :meth:`storage`."""

    @pytest.fixture
    def storage(self) -> Storage:
        """An empty storage; subclasses override this fixture."""
        pytest.fail("a StorageContract subclass must override the `storage` fixture", pytrace=False)

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
        assert isinstance(record.id, int) and 0 < record.id < 2**63
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
        for missing in (0, -1, 999_999, 2**63 - 1, 2**63, 2**64):
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
        assert list(caught.value.fields) == ["name"]
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

    def test_group_update(self, storage):
        owner = self.user(storage)
        group = self.group(storage, owner)
        other = self.group(storage, owner, "designers")
        time.sleep(0.002)
        updated = storage.groups.update(group.id, name="builders", description="")
        assert (updated.name, updated.description) == ("builders", "")
        assert updated.updated_at > group.updated_at
        with pytest.raises(Conflict):
            storage.groups.update(other.id, name="builders")
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

    def test_member_authorize_is_not_called_for_a_missing_reference(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        nobody = "00000000-0000-4000-8000-000000000000"
        calls = []
        cases = [
            ({"group_uuid": nobody, "user_uuid": nobody, "role": "no-such-role"}, "group_uuid"),
            ({"group_uuid": group.uuid, "user_uuid": nobody, "role": "no-such-role"}, "user_uuid"),
            ({"group_uuid": group.uuid, "user_uuid": bob.uuid, "role": "no-such-role"}, "role"),
        ]
        for arguments, field in cases:
            with pytest.raises(Invalid) as caught:
                seeded.members.create(**arguments, authorize=lambda: calls.append(1))
            assert caught.value.fields == Invalid.missing(field).fields, arguments
        assert calls == []
        assert seeded.members.count(user_uuid=bob.uuid) == 0

    def test_member_authorize_refusal_propagates_and_writes_nothing(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        refusal = Forbidden("not you")
        calls = []

        def authorize():
            calls.append(1)
            raise refusal

        with pytest.raises(Forbidden) as caught:
            seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member", authorize=authorize)
        assert caught.value is refusal and calls == [1]
        assert seeded.members.count(user_uuid=bob.uuid) == 0
        assert seeded.members.role_of(bob.uuid, group.uuid) is None
        assert seeded.members.count(group_uuid=group.uuid) == 1  # the owner only

    def test_member_authorize_is_called_once_before_the_insert(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        seen = []
        member = seeded.members.create(
            group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer",
            authorize=lambda: seen.append(seeded.members.count(user_uuid=bob.uuid)),
        )
        assert seen == [0]  # called once, with nothing inserted yet
        assert seeded.members.get(member.id) == member and member.role == "viewer"

    def test_one_live_membership_per_group_and_user(self, seeded):
        owner = self.user(seeded)
        bob = self.user(seeded, "bob@example.com", "Bob")
        group = self.group(seeded, owner)
        member = seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="member")
        with pytest.raises(Conflict) as caught:
            seeded.members.create(group_uuid=group.uuid, user_uuid=bob.uuid, role="viewer")
        assert list(caught.value.fields) == ["user_uuid"]
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
        assert list(caught.value.fields) == ["name"]

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
        assert throttle.hit(key, limit=1, window=16) is None
        started = time.monotonic()
        while time.monotonic() - started < 0.8:
            assert throttle.hit(key, limit=1, window=16) == 1
            time.sleep(0.05)
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
