"""The authorizer contract suite: one set of tests of :class:`locky.providers.Authorizer`.

It checks what docs/http/authorization.md (and tokens.md, audit.md) ask of the default policy, whatever the
authorizer keeps its rules in: the decision table below, case by case; admin emails
(``admin_emails`` makes an admin only once the address is verified); ``grant-admin``
and ``revoke-admin`` (global grants in ``storage.grants``); ``builtin_roles``; custom
roles stored through the API, in every process at once; and the wiring through HTTP
(a refused request is a 403 with the contract's body).

Subclass :class:`AuthorizerContract` and override ``make_app``: a fixture returning
``make(**settings) -> LockyApp``, an app whose configured authorizer is yours, built
from the test's settings with ``settings`` on top (each call another app on the same
database: another worker process). With ``locky_app_factory`` of :mod:`locky.testing`::

    from locky.testing.authorizer_contract import AuthorizerContract

    import my_authorizer

    class TestMyAuthorizer(AuthorizerContract):
        @pytest.fixture
        def make_app(self, locky_app_factory):
            return lambda **settings: locky_app_factory(
                plugin_objects=[my_authorizer], authorizer="mine", **settings)

The test's settings have ``admin_emails`` = ``("admin@example.com",)`` (see
``locky.testing.make_settings``).

How a case is asked, for a ``subject`` holding its role in a ``scope``: ``user`` is
any authenticated user (no membership, no grant); ``admin`` a user granted ``admin``
(``storage.grants``); a group role (``owner``, ``maintainer``, ``member``,
``viewer``, or :data:`CUSTOM`, a role created through the API) a user whose
membership in group G has that role; ``client`` a machine client (the caller of a
``client_credentials`` token): a :class:`~locky.records.User` made by
:func:`locky.records.client_principal`, whose ``uuid`` is ``client:<client_id>``
(:func:`locky.is_client_subject` tells it), with no email and no membership. A client
holds the built-in role ``client``, never ``user``, and the global grants of its
subject (``storage.grants.grant("client:<client_id>", role)``, ``locky grant-role``). Scope ``global`` asks
``is_allowed(user, resource, action)``; ``group`` adds ``group_uuid=G``; ``self`` adds
``own=True`` (and ``group_uuid=G`` for a group role), as Locky's routes do: see
``docs/authorizers.md`` for what each route asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from locky.app import LockyApp
from locky.providers import Authorizer, BuiltinRole
from locky.records import ROLE_NAME, OAuthClient, Permission, User, client_principal, is_client_subject, utcnow

#: A custom role (created through the API) the table's cases use; its permissions.
CUSTOM = "auditor"
CUSTOM_PERMISSIONS = (Permission("reports", "read"), Permission("groups", "update"))
BUILTIN_NAMES = ("admin", "user", "owner", "maintainer", "member", "viewer", "client")
PASSWORD_HASH = "$2b$04$" + "x" * 53

#: The decisions docs/http/authorization.md (and tokens.md, audit.md) ask of the default policy:
#: ``expect, subject, scope, resource, action``. ``assign:custom`` is asked as
#: ``assign:auditor`` (a custom role's name).
TABLE = """
# any user: every internal (read) endpoint
allow, user, global, users, read
allow, user, global, groups, read
allow, user, global, members, read
allow, user, global, roles, read
allow, user, global, authz, read
allow, user, self, users, read
allow, user, global, keys, read
allow, user, global, tokens, introspect
# PUT/DELETE their own user, not others'; never disable
allow, user, self, users, update
allow, user, self, users, delete
deny, user, global, users, update
deny, user, global, users, delete
deny, user, global, users, disable
deny, user, self, users, disable
# log out
allow, user, self, sessions, delete
deny, user, global, sessions, delete
# create groups, and nothing else on groups
allow, user, global, groups, create
deny, user, global, groups, update
deny, user, global, groups, delete
# leave a group (their own membership), nothing else on members
allow, user, self, members, delete
deny, user, global, members, delete
deny, user, global, members, create
deny, user, self, members, create
deny, user, global, members, assign:member
# no role writes, no keys, no audit trail, no webhooks
deny, user, global, roles, create
deny, user, global, roles, update
deny, user, global, roles, delete
deny, user, global, keys, rotate
deny, user, global, audit, read
deny, user, self, audit, read
deny, user, global, webhooks, create
deny, user, global, webhooks, read
deny, user, global, webhooks, delete
deny, user, global, webhooks, replay
deny, user, global, reports, read

# group owner: update and delete the group, add and remove members with any role
allow, owner, group, groups, update
allow, owner, group, groups, delete
allow, owner, group, members, create
allow, owner, group, members, delete
allow, owner, group, members, assign:owner
allow, owner, group, members, assign:maintainer
allow, owner, group, members, assign:member
allow, owner, group, members, assign:viewer
allow, owner, group, members, assign:custom
allow, owner, group, groups, read
allow, owner, self, members, delete
deny, owner, group, roles, create
deny, owner, group, users, update
deny, owner, group, users, delete
deny, owner, group, keys, rotate
deny, owner, group, audit, read
deny, owner, group, webhooks, delete
deny, owner, global, groups, update
deny, owner, global, members, create

# group maintainer: update the group, add and remove members, not as owner
allow, maintainer, group, groups, update
deny, maintainer, group, groups, delete
allow, maintainer, group, members, create
allow, maintainer, group, members, delete
allow, maintainer, group, members, assign:maintainer
allow, maintainer, group, members, assign:member
allow, maintainer, group, members, assign:viewer
allow, maintainer, group, members, assign:custom
deny, maintainer, group, members, assign:owner
deny, maintainer, group, roles, create
deny, maintainer, group, users, update
deny, maintainer, group, webhooks, replay
deny, maintainer, global, groups, update

# group member and viewer: nothing beyond user
allow, member, group, groups, read
allow, member, self, members, delete
deny, member, group, groups, update
deny, member, group, groups, delete
deny, member, group, members, create
deny, member, group, members, delete
deny, member, group, members, assign:member
deny, member, group, members, assign:viewer
deny, member, group, roles, create
allow, viewer, group, groups, read
allow, viewer, self, members, delete
deny, viewer, group, groups, update
deny, viewer, group, groups, delete
deny, viewer, group, members, create
deny, viewer, group, members, delete
deny, viewer, group, members, assign:viewer
deny, viewer, group, roles, create

# a custom role: its permissions, within its group only
allow, custom, group, reports, read
allow, custom, group, groups, update
allow, custom, group, groups, read
deny, custom, global, reports, read
deny, custom, group, groups, delete
deny, custom, group, members, create

# admin: everything
allow, admin, global, users, update
allow, admin, global, users, delete
allow, admin, global, users, disable
allow, admin, global, groups, update
allow, admin, global, groups, delete
allow, admin, global, members, create
allow, admin, global, members, delete
allow, admin, global, members, assign:owner
allow, admin, global, members, assign:custom
allow, admin, global, roles, create
allow, admin, global, roles, update
allow, admin, global, roles, delete
allow, admin, global, authz, read
allow, admin, self, users, update
allow, admin, self, sessions, delete
allow, admin, global, keys, rotate
allow, admin, global, audit, read
allow, admin, global, webhooks, create
allow, admin, global, webhooks, read
allow, admin, global, webhooks, delete
allow, admin, global, webhooks, replay
allow, admin, global, reports, export

# machine client: the authorization API and introspection, nothing else (not user's rules)
allow, client, global, authz, read
allow, client, global, tokens, introspect
deny, client, global, users, read
deny, client, self, users, read
deny, client, self, users, update
deny, client, global, groups, read
deny, client, global, groups, create
deny, client, global, members, read
deny, client, global, roles, read
deny, client, global, keys, read
deny, client, global, keys, rotate
deny, client, self, sessions, delete
deny, client, global, audit, read
deny, client, global, reports, read
deny, client, self, consents, read
deny, client, global, oauth_clients, read

# OAuth clients: admins only; consents: each user's own
allow, admin, global, oauth_clients, create
allow, admin, global, oauth_clients, read
allow, admin, global, oauth_clients, update
allow, admin, global, oauth_clients, delete
deny, user, global, oauth_clients, read
deny, user, global, oauth_clients, create
deny, owner, group, oauth_clients, update
deny, user, self, oauth_clients, delete
allow, user, self, consents, read
allow, user, self, consents, delete
deny, user, global, consents, read
deny, user, global, consents, delete
"""


def machine_client(client_id: str = "reports-backend") -> User:
    """A machine client as an authorizer sees it (no storage needed: the caller is the
    client's policy subject, ``client:<client_id>``)."""
    now = utcnow()
    return client_principal(OAuthClient(
        id=1, uuid="6f1c1a56-5a7e-4b8e-9c55-0d6f3b8e2a11", client_id=client_id, name="Reports backend",
        type="confidential", redirect_uris=(), post_logout_redirect_uris=(), grant_types=("client_credentials",),
        scopes=(), id_token_signed_response_alg="RS256", first_party=False, created_at=now, updated_at=now))


@dataclass(frozen=True)
class Case:
    expect: bool
    subject: str
    scope: str
    resource: str
    action: str

    @property
    def id(self) -> str:
        return f"{'allow' if self.expect else 'deny'}-{self.subject}-{self.scope}-{self.resource}-{self.action}"


def cases(text: str = TABLE) -> list[Case]:
    """The cases of a table in the ``expect, subject, scope, resource, action`` format
    of ``locky policy test`` (comments and blank lines skipped)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("expect,"):
            continue
        expect, subject, scope, resource, action = (cell.strip() for cell in line.split(","))
        assert expect in ("allow", "deny") and scope in ("global", "group", "self"), line
        found.append(Case(expect == "allow", subject, scope, resource, action))
    return found


class AuthorizerContract:
    """The tests every authorizer must pass. Override :meth:`make_app`."""

    @pytest.fixture
    def make_app(self) -> Callable[..., LockyApp]:
        """``make(**settings)``: an app whose authorizer is the one under test;
        subclasses override this fixture."""
        pytest.fail("an AuthorizerContract subclass must override the `make_app` fixture", pytrace=False)

    @pytest.fixture
    def app(self, make_app) -> LockyApp:
        return make_app()

    @pytest.fixture
    def authorizer(self, app) -> Authorizer:
        return app.context.authorizer

    @pytest.fixture
    def storage(self, app):
        return app.context.storage

    @pytest.fixture
    def admin_email(self, app) -> str:
        emails = app.context.settings.admin_emails
        assert emails, "the contract's app needs an admin email (locky.testing's settings have one)"
        return emails[0].strip().lower()

    # -- helpers ---------------------------------------------------------------------

    @staticmethod
    def user(storage, email: str, *, verified: bool = False) -> User:
        user = storage.users.create(name=email.split("@")[0], email=email, password_hash=PASSWORD_HASH)
        return storage.users.update(user.id, email_verified=True) if verified else user

    @staticmethod
    def fresh(storage, user: User) -> User:
        """The user as Locky reads it for a request (an authorizer decides on that)."""
        return storage.users.get(user.id)

    def group(self, storage, owner: User, name: str):
        return storage.groups.create(name=name, description="", owner_uuid=owner.uuid)

    def holder(self, storage, subject: str, group, n: int = 0) -> User:
        """A user holding ``subject`` as the module docstring says."""
        if subject == "client":
            return machine_client(f"client-{n}")
        user = self.user(storage, f"{subject}{n}@example.com")
        if subject == "admin":
            storage.grants.grant(user.uuid, "admin")
        elif subject != "user":
            role = CUSTOM if subject == "custom" else subject
            storage.members.create(group_uuid=group.uuid, user_uuid=user.uuid, role=role)
        return self.fresh(storage, user)

    @staticmethod
    def ask(authorizer, storage, user: User, case_scope: str, resource: str, action: str, group, *,
            group_role: bool, revision: bool = False) -> bool:
        kwargs = {}
        if case_scope == "group" or (case_scope == "self" and group_role):
            kwargs["group_uuid"] = group.uuid
        if case_scope == "self":
            kwargs["own"] = True
        if revision:
            kwargs["policy_revision"] = storage.revision()
        if action == "assign:custom":
            action = f"assign:{CUSTOM}"
        decision = authorizer.is_allowed(user, resource, action, **kwargs)
        assert isinstance(decision, bool), f"is_allowed returned {decision!r}, not a bool"
        return decision

    @pytest.fixture
    def world(self, storage):
        """A founder's group G (where the table's group roles are held) and the custom role."""
        founder = self.user(storage, "founder@example.com")
        storage.roles.create(name=CUSTOM, description="Reads reports", permissions=CUSTOM_PERMISSIONS)
        return self.group(storage, founder, "G")

    # -- the table ---------------------------------------------------------------------

    @pytest.mark.parametrize("case", cases(), ids=lambda c: c.id)
    def test_decision_table(self, authorizer, storage, world, case):
        group_role = case.subject not in ("user", "admin", "client")
        if case.subject == "owner":
            user = self.user(storage, "owner0@example.com")
            self.group(storage, user, "owned")
            group = storage.groups.list(name="owned").items[0]
        else:
            group = world
            user = self.holder(storage, case.subject, group)
        for revision in (False, True):
            decision = self.ask(authorizer, storage, user, case.scope, case.resource, case.action, group,
                                group_role=group_role, revision=revision)
            assert decision is case.expect, (case, {"policy_revision given": revision})

    @pytest.mark.parametrize("role", ["owner", "maintainer", "custom"])
    def test_group_roles_hold_in_their_group_only(self, authorizer, storage, world, role):
        user = self.holder(storage, role, world)
        other = self.group(storage, self.user(storage, "stranger@example.com"), "other")
        assert self.ask(authorizer, storage, user, "group", "groups", "update", world, group_role=True)
        assert not self.ask(authorizer, storage, user, "group", "groups", "update", other, group_role=True)
        assert not self.ask(authorizer, storage, user, "global", "groups", "update", world, group_role=True)

    # -- machine clients ---------------------------------------------------------------

    def test_a_client_holds_its_grants_and_never_user(self, authorizer, storage, world):
        """``locky grant-role client:ID ROLE`` is ``storage.grants.grant("client:ID", ROLE)``:
        the client holds the role's permissions (a custom role's too) at once; another
        client holds nothing of it."""
        client, other = machine_client("reports-backend"), machine_client("billing")
        assert is_client_subject(client.uuid) and client.uuid == "client:reports-backend"
        assert not self.ask(authorizer, storage, client, "global", "reports", "read", world, group_role=False)
        storage.grants.grant(client.uuid, CUSTOM)
        for revision in (False, True):
            assert self.ask(authorizer, storage, client, "global", "reports", "read", world, group_role=False,
                            revision=revision)
            assert not self.ask(authorizer, storage, other, "global", "reports", "read", world, group_role=False,
                                revision=revision)
            # A grant adds to "client"; it never makes the client a user.
            assert not self.ask(authorizer, storage, client, "global", "users", "read", world, group_role=False,
                                revision=revision)
        storage.grants.grant(client.uuid, "admin")
        assert self.ask(authorizer, storage, client, "global", "keys", "rotate", world, group_role=False)
        storage.grants.revoke(client.uuid, "admin")
        storage.grants.revoke(client.uuid, CUSTOM)
        assert not self.ask(authorizer, storage, client, "global", "reports", "read", world, group_role=False)
        assert not self.ask(authorizer, storage, client, "global", "keys", "rotate", world, group_role=False)

    def test_admin_and_user_are_never_membership_roles(self, authorizer, storage, world):
        """The API refuses them as membership roles (docs/http/authorization.md); one stored before
        that rule, or by another client of the storage, grants nothing."""
        user = self.user(storage, "ada@example.com")
        storage.members.create(group_uuid=world.uuid, user_uuid=user.uuid, role="admin")
        for resource, action in (("groups", "delete"), ("groups", "update"), ("members", "create"),
                                 ("roles", "create"), ("reports", "read")):
            assert not self.ask(authorizer, storage, user, "group", resource, action, world, group_role=True), (
                resource, action)

    def test_an_ended_membership_gives_nothing(self, authorizer, storage, world):
        user = self.holder(storage, "maintainer", world)
        assert self.ask(authorizer, storage, user, "group", "groups", "update", world, group_role=True)
        (membership,) = storage.members.list(group_uuid=world.uuid, user_uuid=user.uuid).items
        storage.members.delete(membership.id)
        assert not self.ask(authorizer, storage, user, "group", "groups", "update", world, group_role=True)

    def test_a_deleted_group_gives_its_owner_nothing(self, authorizer, storage):
        owner = self.user(storage, "owner@example.com")
        group = self.group(storage, owner, "short-lived")
        assert self.ask(authorizer, storage, owner, "group", "groups", "delete", group, group_role=True)
        storage.groups.delete(group.id)
        assert not self.ask(authorizer, storage, owner, "group", "groups", "delete", group, group_role=True)

    # -- custom roles: stored through the API, seen at once -----------------------------------

    def test_custom_role_changes_take_effect_at_once_in_every_process(self, authorizer, storage, make_app):
        other_process = make_app().context.authorizer
        owner = self.user(storage, "owner@example.com")
        group = self.group(storage, owner, "G")
        user = self.user(storage, "ada@example.com")
        for each in (authorizer, other_process):  # warm whatever they cache
            assert not self.ask(each, storage, user, "group", "reports", "export", group, group_role=True)
        role = storage.roles.create(name="exporter", description="", permissions=(Permission("reports", "export"),))
        storage.members.create(group_uuid=group.uuid, user_uuid=user.uuid, role="exporter")
        for each in (authorizer, other_process):
            for revision in (False, True):
                assert self.ask(each, storage, user, "group", "reports", "export", group, group_role=True,
                                revision=revision)
        storage.roles.update(role.id, permissions=(Permission("reports", "read"),))
        for each in (authorizer, other_process):
            for revision in (False, True):
                assert not self.ask(each, storage, user, "group", "reports", "export", group, group_role=True,
                                    revision=revision)
                assert self.ask(each, storage, user, "group", "reports", "read", group, group_role=True,
                                revision=revision)

    def test_wildcard_permissions_of_a_custom_role(self, authorizer, storage):
        owner = self.user(storage, "owner@example.com")
        group = self.group(storage, owner, "G")
        user = self.user(storage, "ada@example.com")
        storage.roles.create(name="reporter", description="", permissions=(Permission("reports", "*"),))
        storage.members.create(group_uuid=group.uuid, user_uuid=user.uuid, role="reporter")
        assert self.ask(authorizer, storage, user, "group", "reports", "export", group, group_role=True)
        assert not self.ask(authorizer, storage, user, "group", "invoices", "export", group, group_role=True)

    # -- admin emails (docs/http/authorization.md and docs/http/accounts.md) ------------------

    def is_admin(self, authorizer, storage, user: User, revision: bool = False) -> bool:
        user = self.fresh(storage, user)
        return self.ask(authorizer, storage, user, "global", "roles", "create", None, group_role=False,
                        revision=revision)

    def test_an_admin_email_makes_an_admin_once_verified(self, authorizer, storage, admin_email):
        user = self.user(storage, admin_email)
        assert not self.is_admin(authorizer, storage, user)
        assert storage.users.mark_verified(user.uuid, admin_email) is not None
        assert self.is_admin(authorizer, storage, user)
        assert self.is_admin(authorizer, storage, user, revision=True)
        assert self.ask(authorizer, storage, self.fresh(storage, user), "global", "users", "disable", None,
                        group_role=False)

    def test_other_addresses_are_no_admins(self, authorizer, storage, admin_email):
        local, domain = admin_email.split("@")
        for email in (f"{local}x@{domain}", f"x{local}@{domain}", f"{local}@{domain}.example.org"):
            assert not self.is_admin(authorizer, storage, self.user(storage, email, verified=True)), email

    def test_moving_to_an_admin_email_needs_a_new_verification(self, authorizer, storage, admin_email):
        user = self.user(storage, "ada@example.com", verified=True)
        assert not self.is_admin(authorizer, storage, user)
        moved = storage.users.update(user.id, email=admin_email)
        assert moved.email_verified is False
        assert not self.is_admin(authorizer, storage, user)
        storage.users.mark_verified(user.uuid, admin_email)
        assert self.is_admin(authorizer, storage, user)

    def test_leaving_the_admin_email_leaves_admin_behind(self, authorizer, storage, admin_email):
        user = self.user(storage, admin_email, verified=True)
        assert self.is_admin(authorizer, storage, user)
        storage.users.update(user.id, email="ada@example.com", email_verified=True)
        assert not self.is_admin(authorizer, storage, user)

    def test_a_new_account_on_a_freed_admin_email_must_verify(self, authorizer, storage, admin_email):
        first = self.user(storage, admin_email, verified=True)
        assert self.is_admin(authorizer, storage, first)
        storage.users.delete(first.id)
        second = self.user(storage, admin_email)
        assert not self.is_admin(authorizer, storage, second)

    # -- grant-admin / revoke-admin (storage.grants) ----------------------------------------

    def test_grant_admin_and_revoke_admin(self, authorizer, storage):
        """``locky grant-admin EMAIL`` is ``storage.grants.grant(uuid, "admin")`` (and
        revoke-admin its ``revoke``): the authorizer sees either at once."""
        user = self.user(storage, "ada@example.com")
        assert not self.is_admin(authorizer, storage, user)
        storage.grants.grant(user.uuid, "admin")
        assert self.is_admin(authorizer, storage, user) and self.is_admin(authorizer, storage, user, revision=True)
        storage.grants.revoke(user.uuid, "admin")
        assert not self.is_admin(authorizer, storage, user)
        assert not self.is_admin(authorizer, storage, user, revision=True)

    def test_a_grant_binds_to_the_account_not_the_address(self, authorizer, storage):
        user = self.user(storage, "ada@example.com", verified=True)
        storage.grants.grant(user.uuid, "admin")
        storage.users.update(user.id, email="ada.l@example.com")  # unverified now
        assert self.is_admin(authorizer, storage, user)
        newcomer = self.user(storage, "ada@example.com", verified=True)
        assert not self.is_admin(authorizer, storage, newcomer)

    def test_a_grant_in_another_process_is_seen_at_once(self, authorizer, storage, make_app):
        other = make_app().context
        user = self.user(storage, "ada@example.com")
        assert not self.is_admin(authorizer, storage, user)
        other.storage.grants.grant(user.uuid, "admin")
        assert self.is_admin(authorizer, storage, user)
        other.storage.grants.revoke(user.uuid, "admin")
        assert not self.is_admin(authorizer, storage, user)

    # -- builtin_roles ---------------------------------------------------------------------

    def test_builtin_roles(self, authorizer):
        roles = authorizer.builtin_roles()
        assert isinstance(roles, list) and all(isinstance(r, BuiltinRole) for r in roles), roles
        names = [r.name for r in roles]
        assert len(names) == len(set(names)), names
        assert set(BUILTIN_NAMES) <= set(names), names
        for role in roles:
            assert ROLE_NAME.fullmatch(role.name), role
            assert isinstance(role.description, str) and role.description, role
            assert isinstance(role.permissions, tuple), role
            assert all(isinstance(p, Permission) for p in role.permissions), role

    def test_builtin_roles_are_stored_at_startup(self, authorizer, storage):
        for role in authorizer.builtin_roles():
            (stored,) = storage.roles.list(name=role.name).items
            assert stored.builtin and stored.permissions == role.permissions, stored

    def test_custom_roles_are_not_builtin(self, authorizer, storage, world):
        assert CUSTOM not in {r.name for r in authorizer.builtin_roles()}

    # -- through HTTP ------------------------------------------------------------------------

    def test_http_decisions(self, app, admin_email):
        """The app asks the authorizer: a group's creator may change it, another user
        gets 403 with Falcon's ``{"title", "description"}`` body, an admin may."""
        from locky.testing import LockyClient

        client = LockyClient(app)
        owner = client.account("owner@example.com")
        other = client.account("other@example.com")
        created = client.simulate_post("/v1/private/groups", json={"name": "G"}, headers=owner.headers)
        assert created.status_code == 201, created.text
        path = f"/v1/private/groups/{created.json['id']}"
        refused = client.simulate_put(path, json={"description": "mine now"}, headers=other.headers)
        assert refused.status_code == 403, refused.text
        assert refused.json["title"] == "403 Forbidden" and isinstance(refused.json.get("description"), str)
        assert set(refused.json) == {"title", "description"}
        assert client.simulate_put(path, json={"description": "ours"}, headers=owner.headers).status_code == 200
        role = {"name": "reporter", "permissions": [{"resource": "reports", "action": "read"}]}
        assert client.simulate_post("/v1/private/roles", json=role, headers=owner.headers).status_code == 403
        admin = client.account(admin_email, verified=True)
        assert client.simulate_post("/v1/private/roles", json=role, headers=admin.headers).status_code == 201
        assert client.simulate_delete(path, headers=admin.headers).status_code == 204
