"""Properties of the authorization API (docs/http/authorization.md) over random policies.

Each example writes a random policy directory (``p`` lines over a few roles, resources
and actions, ``*`` included, scopes ``*`` and ``self``; ``g`` lines between roles and
from users' uuids and emails to roles; ``g2`` lines between actions), creates random
custom roles, users with random global grants, group memberships, verified addresses
and deletions, and then asks the API. The single check (``GET .../check``) is the
oracle everything else is held to:

(a) explain: denied ⇒ ``matched`` empty; allowed ⇒ every matched line allows the request
    on its own, and a policy with all the matched lines removed (policy file rewritten,
    stored permissions of custom roles taken away, a new app on a copy of the
    database) denies; ``roles`` holds ``user`` and every role held directly.
(b) permissions: for every concrete (resource, action) of the universe and every
    context (no group, each group, an unknown group), the check allows ⇔ a listed
    permission with scope ``global`` (or ``group`` in that group) has resource in
    {r, *} and action in {a, *} (listed actions include their ``g2`` children).
(c) subjects: for every user, the check allows ⇔ listed or ``all_users``; ``all_users``
    ⇔ a user holding nothing but the role ``user`` is allowed; such a user is never
    listed; pages follow ``next_after_id``.
(d) batch: a random list of checks answers exactly what the single checks answer.

Apps are built inside the tests (``locky.create_app``) in a fresh temporary directory
per example.
"""

from __future__ import annotations

import itertools
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from locky import create_app
from locky.records import Permission
from locky.testing import ADMIN_EMAIL, LockyClient, make_settings

#: Random exploration, as the fuzzers are: `pytest --all` runs it; the fixed cases of the same
#: API (test_authz_api, test_authz_check, test_authz_table) run in every plain `pytest`.
pytestmark = pytest.mark.slow

SHIPPED = Path(__file__).resolve().parents[1] / "policies"
CHECK = "/v1/internal/authz/check"
PERMISSIONS = "/v1/internal/authz/permissions"
SUBJECTS = "/v1/internal/authz/subjects"
NOBODY = "00000000-0000-4000-8000-000000000000"  # a well-formed uuid4 naming nothing

ROLES = ("user", "admin", "owner", "r1", "r2")  # roles of the policy file
GLOBAL_ROLES = ("user", "admin")  # never membership roles
CUSTOM = ("c1", "c2")  # roles stored through the API (never named by the policy file)
LINE_RESOURCES = ("docs", "*")
LINE_ACTIONS = ("read", "write", "delete", "*")
DOMS = ("*", "self")
RESOURCES = ("docs", "files")  # what is asked: files only through "*"
ACTIONS = ("read", "write", "delete", "approve")  # approve only through "*" or g2
PAIRS = tuple(itertools.product(RESOURCES, ACTIONS))
MAX_USERS = 3
PLACEHOLDERS = tuple(f"U{i}" for i in range(MAX_USERS))  # a user's uuid or email in a policy line
FIXED_LINES = (("p", "user", "*", "authz", "read"),)  # the caller may ask

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEWER = settings(SETTINGS, max_examples=15)  # the explanations test asks twice as much per example


# -- generating worlds ------------------------------------------------------------------


@dataclass
class Spec:
    p_lines: list[tuple[str, str, str, str]]
    g_lines: list[tuple[str, str]]
    g2_lines: list[tuple[str, str]]
    custom: dict[str, list[tuple[str, str]]]
    users: list[dict]
    admin_email: bool  # user 0's address is LOCKY_ADMIN_EMAILS' address
    as_email: dict[str, bool]  # placeholder -> written as the email (else the uuid)
    delete_group: bool  # the second group is deleted (its memberships with it)


def builtin_names(p_lines, g_lines) -> set[str]:
    """The roles the policy file makes (what memberships may hold, with custom roles)."""
    names = {line[0] for line in p_lines} | {name for line in g_lines for name in line}
    return {name for name in names if name in ROLES}


@st.composite
def specs(draw) -> Spec:
    subject = st.sampled_from(ROLES + PLACEHOLDERS)
    p_lines = draw(st.lists(st.tuples(subject, st.sampled_from(DOMS), st.sampled_from(LINE_RESOURCES),
                                      st.sampled_from(LINE_ACTIONS)), max_size=8))
    g_lines = draw(st.lists(st.tuples(subject, st.sampled_from(ROLES)).filter(lambda g: g[0] != g[1]),
                            max_size=4))
    g2_lines = draw(st.lists(st.tuples(st.sampled_from(ACTIONS), st.sampled_from(ACTIONS))
                             .filter(lambda g: g[0] != g[1]), max_size=3))
    custom = {name: draw(st.lists(st.tuples(st.sampled_from(LINE_RESOURCES), st.sampled_from(LINE_ACTIONS)),
                                  max_size=3, unique=True))
              for name in CUSTOM}
    membership_roles = sorted((builtin_names(p_lines, g_lines) - set(GLOBAL_ROLES)) | set(CUSTOM))
    users = []
    for _ in range(draw(st.integers(1, MAX_USERS))):
        users.append({
            "grants": draw(st.lists(st.sampled_from(ROLES + CUSTOM), max_size=2, unique=True)),
            "groups": [draw(st.none() | st.sampled_from(membership_roles)) for _ in range(2)],
            "verified": draw(st.booleans()),
            "deleted": draw(st.integers(0, 5)) == 0,
        })
    return Spec(p_lines, g_lines, g2_lines, custom, users, admin_email=draw(st.booleans()),
                as_email={p: draw(st.booleans()) for p in PLACEHOLDERS}, delete_group=draw(st.booleans()))


# -- building apps ----------------------------------------------------------------------


@dataclass
class Person:
    uuid: str
    id: int
    email: str
    verified: bool = False
    deleted: bool = False
    grants: tuple[str, ...] = ()
    groups: dict[str, str] = field(default_factory=dict)  # live group uuid -> membership role


@dataclass
class World:
    spec: Spec
    directory: Path
    database: Path
    rows: list[tuple[str, ...]]  # the policy file's lines, placeholders resolved
    app: object
    client: LockyClient
    headers: dict[str, str]
    caller: Person
    plain: Person  # holds nothing but the role user
    people: list[Person]  # caller, plain, then the generated users
    groups: list[str]  # uuids; the second may be deleted
    live_groups: set[str]
    role_ids: dict[str, int]
    apps: list = field(default_factory=list)

    @property
    def contexts(self) -> list[str | None]:
        return [None, *self.groups, NOBODY]

    def close(self) -> None:
        for app in reversed(self.apps):
            app.close()

    def subject_of(self, placeholder: str) -> str:
        """What a policy line names for the placeholder: user i's uuid or email (a uuid
        or email of nobody when this example made fewer users)."""
        i = PLACEHOLDERS.index(placeholder)
        as_email = self.spec.as_email[placeholder]
        if i >= len(self.spec.users):
            return f"nobody{i}@example.com" if as_email else f"0000000{i}-0000-4000-8000-000000000000"
        person = self.people[2 + i]
        return person.email if as_email else person.uuid


def write_policy(directory: Path, rows) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SHIPPED / "model.conf", directory / "model.conf")
    (directory / "policy.csv").write_text("".join(", ".join(row) + "\n" for row in rows))
    return directory


def new_app(directory: Path, database: Path, policy: Path):
    return create_app(make_settings(f"sqlite:///{database}", policy_dir=str(policy), mail_dir=str(directory / "mail"),
                                    log_requests=False))


def resolve(spec: Spec, subject_of=None) -> list[tuple[str, ...]]:
    """The policy file's rows; lines naming users are left out while ``subject_of``
    (placeholder -> the user's uuid or email) is None."""
    def name(subject: str) -> str | None:
        if subject not in PLACEHOLDERS:
            return subject
        return None if subject_of is None else subject_of(subject)

    rows = list(FIXED_LINES)
    for subject, dom, obj, act in spec.p_lines:
        if name(subject) is not None:
            rows.append(("p", name(subject), dom, obj, act))
    for child, parent in spec.g_lines:
        if name(child) is not None:
            rows.append(("g", name(child), parent))
    rows.extend(("g2", child, parent) for child, parent in spec.g2_lines)
    return rows


def build(spec: Spec) -> World:
    directory = Path(tempfile.mkdtemp(prefix="locky-authz-prop-"))
    database = directory / "locky.sqlite"
    apps = []
    try:
        # First an app whose policy names no user yet: it makes the users (and their uuids).
        first = new_app(directory, database, write_policy(directory / "policy0", resolve(spec)))
        apps.append(first)
        client = LockyClient(first)
        account = client.account("caller@example.com")
        storage = first.context.storage
        caller = Person(account.uuid, account.id, account.email)
        made = storage.users.create(name="plain", email="plain@example.com", password_hash="x" * 60)
        plain = Person(made.uuid, made.id, made.email)
        people = [caller, plain]
        for i, wanted in enumerate(spec.users):
            email = ADMIN_EMAIL if i == 0 and spec.admin_email else f"u{i}@example.com"
            made = storage.users.create(name=f"u{i}", email=email, password_hash="x" * 60)
            if wanted["verified"]:
                storage.users.mark_verified(made.uuid, email)
            people.append(Person(made.uuid, made.id, email, verified=wanted["verified"]))
        role_ids = {}
        for name, permissions in spec.custom.items():
            role_ids[name] = storage.roles.create(
                name=name, description="", permissions=[Permission(r, a) for r, a in permissions]).id
        groups = [storage.groups.create(name=f"g{k}", description="", owner_uuid=caller.uuid) for k in range(2)]

        world = World(spec, directory, database, [], None, client, account.headers, caller, plain, people,
                      [g.uuid for g in groups], {g.uuid for g in groups}, role_ids, apps)
        world.rows = resolve(spec, world.subject_of)
        app = new_app(directory, database, write_policy(directory / "policy1", world.rows))
        apps.append(app)
        world.app, world.client = app, LockyClient(app)
        storage = app.context.storage
        for person, wanted in zip(people[2:], spec.users):
            for k, role in enumerate(wanted["groups"]):
                if role is not None:
                    storage.members.create(group_uuid=groups[k].uuid, user_uuid=person.uuid, role=role)
                    person.groups[groups[k].uuid] = role
            for role in wanted["grants"]:
                storage.grants.grant(person.uuid, role)
            person.grants = tuple(wanted["grants"])
        for person, wanted in zip(people[2:], spec.users):
            if wanted["deleted"]:
                storage.users.delete(person.id)
                person.deleted, person.groups = True, {}
        caller.groups = {g.uuid: "owner" for g in groups}
        if spec.delete_group:
            storage.groups.delete(groups[1].id)
            world.live_groups.discard(groups[1].uuid)
            for person in people:
                person.groups.pop(groups[1].uuid, None)
        return world
    except BaseException:
        for app in reversed(apps):
            app.close()
        shutil.rmtree(directory, ignore_errors=True)
        raise


class built:
    """``with built(spec) as world``: the world, closed and removed afterwards."""

    def __init__(self, spec: Spec):
        self.spec = spec

    def __enter__(self) -> World:
        self.world = build(self.spec)
        return self.world

    def __exit__(self, *exc) -> None:
        self.world.close()
        shutil.rmtree(self.world.directory, ignore_errors=True)


# -- asking -----------------------------------------------------------------------------


def get(world: World, path: str, **params) -> dict:
    params = {k: v for k, v in params.items() if v is not None}
    result = world.client.simulate_get(path, params=params, headers=world.headers)
    assert result.status_code == 200, (path, params, result.status_code, result.text)
    return result.json


def check(world: World, user_uuid: str, resource: str, action: str, group_uuid: str | None) -> bool:
    body = get(world, CHECK, user_uuid=user_uuid, resource=resource, action=action, group_uuid=group_uuid)
    assert set(body) == {"allowed"}, body
    return body["allowed"]


def explain(world: World, user_uuid: str, resource: str, action: str, group_uuid: str | None) -> dict:
    body = get(world, CHECK, user_uuid=user_uuid, resource=resource, action=action, group_uuid=group_uuid,
               explain="true")
    assert set(body) == {"allowed", "matched", "roles"}, body
    return body


def decisions(world: World) -> dict[tuple, bool]:
    """The single check's answer for every person, pair and context."""
    return {(person.uuid, r, a, ctx): check(world, person.uuid, r, a, ctx)
            for person in world.people for r, a in PAIRS for ctx in world.contexts}


def batch_decisions(world: World) -> dict[tuple, bool]:
    """The same answers as :func:`decisions`, asked 100 at a time."""
    keys = [(person.uuid, r, a, ctx) for person in world.people for r, a in PAIRS for ctx in world.contexts]
    found = {}
    for start in range(0, len(keys), 100):
        chunk = keys[start:start + 100]
        result = world.client.simulate_post(CHECK, headers=world.headers, json={"checks": [
            {"user_uuid": u, "resource": r, "action": a, **({"group_uuid": g} if g else {})} for u, r, a, g in chunk]})
        assert result.status_code == 200, result.text
        found.update(zip(chunk, (answer["allowed"] for answer in result.json["results"])))
    return found


def describe(world: World) -> str:
    """What the example is, for failure messages."""
    people = [f"  {p.email} {p.uuid} verified={p.verified} deleted={p.deleted} grants={p.grants} groups="
              f"{ {world.groups.index(g): role for g, role in p.groups.items()} }" for p in world.people]
    custom = {name: permissions for name, permissions in world.spec.custom.items()}
    return ("policy:\n" + "".join("  " + ", ".join(row) + "\n" for row in world.rows)
            + f"custom roles: {custom}\ngroups: {world.groups} (live {sorted(world.live_groups)})\n"
            + "people:\n" + "\n".join(people))


def g2_reaches(world: World, action: str, target: str) -> bool:
    """``action`` is ``target`` or a kind of it through the g2 lines."""
    seen, todo = {action}, [action]
    while todo:
        current = todo.pop()
        if current == target:
            return True
        for child, parent in world.spec.g2_lines:
            if child == current and parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return False


def role_closure(world: World, names: set[str]) -> set[str]:
    found, todo = set(names), list(names)
    while todo:
        current = todo.pop()
        for row in world.rows:
            if row[0] == "g" and row[1] == current and row[2] not in found:
                found.add(row[2])
                todo.append(row[2])
    return found


def held_directly(world: World, person: Person, ctx: str | None) -> tuple[set[str], set[str]]:
    """(global, group) roles the person holds for a decision in ``ctx``, before role
    inheritance: ``user``, grants, ``admin`` by a verified admin address, the roles the
    policy's g lines give the uuid (or the verified email); the membership role."""
    names = {person.uuid} | ({person.email} if person.verified else set())
    global_roles = {"user", *person.grants}
    if person.verified and person.email == ADMIN_EMAIL:
        global_roles.add("admin")
    global_roles |= {row[2] for row in world.rows if row[0] == "g" and row[1] in names}
    role = person.groups.get(ctx) if ctx is not None else None
    group_roles = {role} if role is not None and role not in GLOBAL_ROLES else set()
    return global_roles, group_roles


# -- (a) explain ------------------------------------------------------------------------


def without_lines(world: World, rules: set[str], index: int) -> tuple[object, LockyClient]:
    """A new app on a copy of the database whose policy lacks ``rules`` (file lines and
    custom roles' stored permissions)."""
    copy = world.directory / f"copy{index}.sqlite"
    source, target = sqlite3.connect(world.database), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    rows = [row for row in world.rows if ", ".join(row) not in rules]
    app = new_app(world.directory, copy, write_policy(world.directory / f"policy-without{index}", rows))
    world.apps.append(app)
    for name, permissions in world.spec.custom.items():
        kept = [Permission(r, a) for r, a in permissions if f"p, {name}, *, {r}, {a}" not in rules]
        if len(kept) != len(permissions):
            app.context.storage.roles.update(world.role_ids[name], permissions=kept)
    return app, LockyClient(app)


@FEWER
@given(spec=specs(), data=st.data())
def test_explanations_name_exactly_what_allowed(spec, data):
    with built(spec) as world:
        people = {p.uuid: p for p in world.people}
        known_rules = {", ".join(row) for row in world.rows if row[0] == "p"}
        known_rules |= {f"p, {name}, *, {r}, {a}" for name, perms in spec.custom.items() for r, a in perms}
        allowed_cases = []
        plain = batch_decisions(world)  # the answers without explain (batch == single: test (d))
        for person in world.people:
            for (resource, action), ctx in itertools.product(PAIRS, world.contexts):
                body = explain(world, person.uuid, resource, action, ctx)
                where = f"{person.email} {resource} {action} in {ctx}\n{describe(world)}\nanswer {body}"
                assert body["allowed"] == plain[(person.uuid, resource, action, ctx)], where
                if not body["allowed"]:
                    assert body["matched"] == [], where
                else:
                    assert body["matched"], where  # something allowed it
                    allowed_cases.append((person, resource, action, ctx, body))
                for m in body["matched"]:
                    assert set(m) == {"role", "scope", "group_uuid", "rule"}, where
                    assert m["rule"] in known_rules, where
                    _, role, dom, obj, act = m["rule"].split(", ")
                    assert m["role"] == role, where
                    # The line allows this request on its own.
                    assert dom == "*" and obj in (resource, "*"), where
                    assert act == "*" or g2_reaches(world, action, act), where
                    if m["scope"] == "group":
                        assert ctx is not None and m["group_uuid"] == ctx, where
                    else:
                        assert m["scope"] == "global" and m["group_uuid"] is None, where
                if person.deleted:
                    assert body["allowed"] is False, where
                    continue
                global_roles, group_roles = held_directly(world, people[person.uuid], ctx)
                roles = {(r["role"], r["scope"], r["group_uuid"]) for r in body["roles"]}
                assert len(roles) == len(body["roles"]), where
                assert ("user", "global", None) in roles, where
                lower = {(r, "global", None) for r in global_roles} | {(r, "group", ctx) for r in group_roles}
                upper = {(r, "global", None) for r in role_closure(world, global_roles)} | \
                        {(r, "group", ctx) for r in role_closure(world, group_roles)}
                assert lower <= roles <= upper, where

        # Take away everything matched: the same question is then denied.
        if allowed_cases:
            picks = data.draw(st.lists(st.sampled_from(range(len(allowed_cases))), min_size=1, max_size=2,
                                       unique=True), label="removed")
            for index in picks:
                person, resource, action, ctx, body = allowed_cases[index]
                rules = {m["rule"] for m in body["matched"]}
                _, client = without_lines(world, rules, index)
                result = client.simulate_get(CHECK, headers=world.headers, params={
                    k: v for k, v in {"user_uuid": person.uuid, "resource": resource, "action": action,
                                      "group_uuid": ctx, "explain": "true"}.items() if v is not None})
                assert result.status_code == 200, result.text
                assert result.json["allowed"] is False, (
                    f"{person.email} {resource} {action} in {ctx}: still allowed without {sorted(rules)}:"
                    f" {result.json}\n{describe(world)}")


# -- (b) permissions --------------------------------------------------------------------


def grants_pair(entry: dict, resource: str, action: str, ctx: str | None) -> bool:
    in_scope = entry["scope"] == "global" or (entry["scope"] == "group" and ctx is not None
                                              and entry["group_uuid"] == ctx)
    return in_scope and entry["resource"] in (resource, "*") and entry["action"] in (action, "*")


@SETTINGS
@given(spec=specs())
def test_permissions_list_exactly_what_the_check_allows(spec):
    with built(spec) as world:
        decided = decisions(world)
        for person in world.people:
            everywhere = get(world, PERMISSIONS, user_uuid=person.uuid)["permissions"]
            if person.deleted:
                assert everywhere == [], person
            for entry in everywhere:
                assert set(entry) == {"resource", "action", "scope", "group_uuid", "via"}, entry
                assert entry["scope"] in ("global", "group", "self"), entry
                if entry["scope"] == "group":
                    assert entry["group_uuid"] in person.groups, (entry, describe(world))
                elif entry["scope"] == "global":
                    assert entry["group_uuid"] is None, entry
                else:  # a "self" line: held globally, or through the membership of that group
                    assert entry["group_uuid"] is None or entry["group_uuid"] in person.groups, entry
            for ctx in world.contexts:
                listings = {"everywhere": everywhere}
                if ctx is not None:
                    listings["in ctx"] = in_ctx = get(world, PERMISSIONS, user_uuid=person.uuid,
                                                      group_uuid=ctx)["permissions"]
                    assert all(e["scope"] != "group" or e["group_uuid"] == ctx for e in in_ctx), in_ctx
                for (resource, action) in PAIRS:
                    allowed = decided[(person.uuid, resource, action, ctx)]
                    for name, listed in listings.items():
                        listed_allows = any(grants_pair(e, resource, action, ctx) for e in listed)
                        assert allowed == listed_allows, (
                            f"{person.email}: check {resource} {action} in {ctx} is {allowed}, permissions"
                            f" ({name}) say {listed_allows}: {listed}\n{describe(world)}")


# -- (c) subjects -----------------------------------------------------------------------


def all_subjects(world: World, resource: str, action: str, ctx: str | None, limit: int) -> tuple[list, bool]:
    users, after, flags = [], 0, set()
    for _ in range(100):
        body = get(world, SUBJECTS, resource=resource, action=action, group_uuid=ctx, limit=limit, after_id=after)
        assert set(body) == {"users", "next_after_id", "all_users"}, body
        assert len(body["users"]) <= limit, body
        users.extend(body["users"])
        flags.add(body["all_users"])
        if body["next_after_id"] is None:
            break
        assert body["users"] and body["next_after_id"] == body["users"][-1]["id"], body
        after = body["next_after_id"]
    else:
        raise AssertionError("subjects never reached its last page")
    ids = [user["id"] for user in users]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
    assert len(flags) == 1, flags
    return users, flags.pop()


def one_user_named_by_a_p_line(as_email: bool) -> Spec:
    """``p, <u0's uuid or verified email>, *, docs, read``: the check allows u0 (the
    model checks the user's own uuid and verified email as subjects), so subjects must
    list u0 (the minimal example hypothesis found)."""
    return Spec(p_lines=[("U0", "*", "docs", "read")], g_lines=[], g2_lines=[], custom={"c1": [], "c2": []},
                users=[{"grants": [], "groups": [None, None], "verified": as_email, "deleted": False}],
                admin_email=False, as_email={p: as_email for p in PLACEHOLDERS}, delete_group=False)


@SETTINGS
@example(spec=one_user_named_by_a_p_line(as_email=False), limit=50)
@example(spec=one_user_named_by_a_p_line(as_email=True), limit=50)
@given(spec=specs(), limit=st.sampled_from([1, 2, 50]))
def test_subjects_list_exactly_who_the_check_allows(spec, limit):
    with built(spec) as world:
        decided = decisions(world)
        for (resource, action), ctx in itertools.product(PAIRS, world.contexts):
            users, everyone = all_subjects(world, resource, action, ctx, limit)
            listed = {user["uuid"] for user in users}
            where = f"subjects {resource} {action} in {ctx}: all_users={everyone} {sorted(listed)}\n{describe(world)}"
            assert everyone == decided[(world.plain.uuid, resource, action, ctx)], where
            assert world.plain.uuid not in listed, where
            assert listed <= {p.uuid for p in world.people if not p.deleted}, where
            for person in world.people:
                allowed = decided[(person.uuid, resource, action, ctx)]
                if person.deleted:  # no longer an authenticated user: allowed nothing, never listed
                    assert not allowed and person.uuid not in listed, f"{person.email} (deleted); {where}"
                    continue
                assert allowed == (person.uuid in listed or everyone), f"{person.email} allowed={allowed}; {where}"


# -- (d) batch --------------------------------------------------------------------------


@SETTINGS
@given(spec=specs(), data=st.data())
def test_batch_equals_single_checks(spec, data):
    with built(spec) as world:
        who = st.sampled_from([p.uuid for p in world.people] + [NOBODY])
        items = data.draw(st.lists(st.tuples(who, st.sampled_from(RESOURCES), st.sampled_from(ACTIONS),
                                             st.sampled_from(world.contexts)), min_size=1, max_size=100),
                          label="checks")
        checks = [{"user_uuid": u, "resource": r, "action": a, **({"group_uuid": g} if g else {})}
                  for u, r, a, g in items]
        result = world.client.simulate_post(CHECK, json={"checks": checks}, headers=world.headers)
        assert result.status_code == 200, result.text
        assert result.json == {"results": [{"allowed": check(world, *item)} for item in items]}, describe(world)
