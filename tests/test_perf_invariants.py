"""The performance shortcuts never change an answer, and no cache outlives a revocation.

- the plain-SQL reads of the Pony backend (``locky_pony.reads``) return exactly the
  records its entity layer would build (read here through Pony's entities);
- the compiled dumpers (``locky.dump``) give exactly ``Schema.dump``'s output;
- the JWT backend's verified-token cache still rejects an expired token, and holds
  only tokens it verified, with every algorithm (ES256, EdDSA, RS256, HS256);
- the cached active signing key follows a rotation made elsewhere once
  ``ACTIVE_RECHECK`` has passed, and tokens of the old key keep verifying;
- against a real two-worker server: a logout, a deleted user, a removed membership and
  a deleted custom role take effect on the very next request, whichever worker serves it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import jwt
import pytest

from locky import schemas
from locky.dump import dumper, plain_fields
from locky.errors import Unauthorized
from locky.records import Authenticated, Page, Permission, Role, User
from locky.testing import ADMIN_EMAIL, PASSWORD, TEST_SECRET

from authz_helpers import member_with_role

# -- plain-SQL reads ----------------------------------------------------------------


@pytest.fixture
def populated(locky_app):
    storage = locky_app.context.storage
    users = [storage.users.create(name=f"user ü {i}", email=f"U{i}@Example.com", password_hash="h") for i in range(6)]
    role = storage.roles.create(name="auditor", description="reads", permissions=[Permission("audit", "read")])
    groups = [storage.groups.create(name=f"g{i}", description="d" * i, owner_uuid=users[i].uuid) for i in range(3)]
    storage.members.create(group_uuid=groups[0].uuid, user_uuid=users[4].uuid, role=role.name)
    storage.members.create(group_uuid=groups[1].uuid, user_uuid=users[4].uuid, role="viewer")
    storage.users.delete(users[5].id)
    storage.groups.delete(groups[2].id)
    # Text a packed row (one JSON array per row, MySQL/MariaDB and PostgreSQL) must give back exactly.
    users.append(storage.users.create(name=TRICKY_TEXT, email="tricky@example.com", password_hash='h"\\'))
    groups.append(storage.groups.create(name="g tricky", description=TRICKY_TEXT, owner_uuid=users[0].uuid))
    storage.roles.create(name="tricky", description=TRICKY_TEXT,
                         permissions=[Permission("r\u00e9sum\u00e9 \"x\"", "read\\write")])
    return storage, users, groups, role


#: Quotes, a backslash, control characters, line and paragraph separators, accents and
#: a character outside the BMP.
TRICKY_TEXT = 'a "quoted" \\ back\tslash\nline \u2028\u2029 \u00fc \U0001F511 \x7f end'


ENTITIES = {"users": "User", "groups": "Group", "members": "Member", "roles": "Role"}


def entity_reads(storage, kind: str, after_id: int = 0, limit: int = 50, **given):
    """What Pony's entity layer reads for ``store.list(...)``: live rows in id order,
    built into records by the stores' own entity-row builders (what writes return)."""
    from pony.orm import db_session
    from locky_pony import stores

    entity, build = getattr(storage.entities, ENTITIES[kind]), getattr(stores, f"{kind[:-1]}_record")
    with db_session:
        rows = [r for r in entity.select(lambda r: r.del_token == 0 and r.id > after_id).order_by(lambda r: r.id)
                if all(getattr(r, name) == value for name, value in given.items())]
        items = [build(r) for r in rows[:limit]]
    return Page(items=items, next_after_id=items[-1].id if len(rows) > limit else None)


def entity_get(storage, kind: str, id: int):
    from pony.orm import db_session
    from locky_pony import stores

    if not 0 < id <= 2**63 - 1:
        return None
    with db_session:
        row = getattr(storage.entities, ENTITIES[kind]).get(id=id)
        return getattr(stores, f"{kind[:-1]}_record")(row) if row is not None and row.del_token == 0 else None


def is_pony(storage) -> bool:
    return type(getattr(storage, "inner", storage)).__module__.startswith("locky_pony")  # cached or not


def test_plain_sql_reads_match_the_entity_layer(populated):
    storage, users, groups, role = populated
    if not is_pony(storage):
        pytest.skip("not the pony storage")
    assert any(u.name == TRICKY_TEXT for u in storage.users.list(limit=50).items)
    assert storage.roles.get_by_uuid(storage.roles.list(name="tricky").items[0].uuid).permissions == (
        Permission('r\u00e9sum\u00e9 "x"', "read\\write"),)
    for kind in ("users", "groups", "members", "roles"):
        store = getattr(storage, kind)
        everything = entity_reads(storage, kind, limit=1000).items
        assert everything and all(type(r).__name__ == kind[:-1].title() for r in everything), kind
        for id in (0, 1, 2, 3, 5, 6, 9, 10**6, 2**63 - 1, 2**63, -1):
            assert store.get(id) == entity_get(storage, kind, id), (kind, id)
        for record in everything:
            assert store.get_by_uuid(record.uuid) == record
        for after_id in (0, 1, 3):
            for limit in (1, 2, 50):
                assert store.list(after_id=after_id, limit=limit) == entity_reads(storage, kind, after_id, limit)
        assert store.count() == len(everything)
    filters = [
        ("users", {"email": "u1@example.com"}, {"email": "u1@example.com"}),
        ("users", {"email": "U2@EXAMPLE.COM"}, {"email": "u2@example.com"}),
        ("users", {"email": "u5@example.com"}, {"email": "u5@example.com"}),
        ("groups", {"name": "g1"}, {"name": "g1"}), ("groups", {"name": "g2"}, {"name": "g2"}),
        ("groups", {"name": None}, {}),
        ("members", {"user_uuid": users[4].uuid}, {"user_uuid": users[4].uuid}),
        ("members", {"group_uuid": groups[0].uuid, "role": "owner"}, {"group_uuid": groups[0].uuid, "role": "owner"}),
        ("members", {"role": "auditor"}, {"role": "auditor"}),
        ("roles", {"name": "auditor"}, {"name": "auditor"}), ("roles", {"name": "admin"}, {"name": "admin"}),
    ]
    for kind, given, stored in filters:
        store = getattr(storage, kind)
        expected = entity_reads(storage, kind, **stored)
        assert store.list(**given) == expected, (kind, given)
        assert store.count(**given) == len(expected.items), (kind, given)
    assert storage.users.get_by_email("U1@Example.com") == entity_reads(storage, "users", email="u1@example.com").items[0]
    assert storage.members.role_of(users[4].uuid, groups[0].uuid) == "auditor"
    with pytest.raises(ValueError):
        storage.users.list(name="x")


def test_reads_on_server_engines_select_one_json_array_per_row(populated):
    """On MySQL/MariaDB and PostgreSQL record reads select their columns packed into one
    JSON array (PyMySQL parses each column in Python; psycopg2 describes each column in
    Python); on SQLite they select the columns. Only MySQL/MariaDB converts text to one
    collation. The answers are the same: the test above."""
    storage = populated[0]
    if not is_pony(storage):
        pytest.skip("not the pony storage")
    dialect = storage.db.provider.dialect
    packed, mysql = dialect in ("MySQL", "PostgreSQL"), dialect == "MySQL"
    start = {"MySQL": "SELECT JSON_ARRAY(", "PostgreSQL": "SELECT json_build_array("}.get(dialect, "-")
    for kind in ("users", "groups", "members", "roles"):
        by_id = getattr(storage, kind).reads.by_id
        assert by_id.packed is packed and by_id.direct.startswith(start) is packed, kind
    authentication = storage.sessions._authentication.statement
    assert authentication.packed is packed and ("CONVERT(" in authentication.direct) is mysql


def test_authenticate_matches_the_entity_layer(populated):
    from pony.orm import db_session
    from locky_pony import sessions, stores

    storage, users, _, _ = populated
    if not is_pony(storage):
        pytest.skip("not the pony storage")
    live = storage.sessions.create(uuid="11111111-1111-4111-8111-111111111111", user_uuid=users[0].uuid, refresh_jti="a")
    gone = storage.sessions.create(uuid="22222222-2222-4222-8222-222222222222", user_uuid=users[1].uuid, refresh_jti="b")
    e = storage.entities
    with db_session:
        session = sessions.session_record(e.Session.get(uuid=live.uuid))
        user = stores.user_record(e.User.get(uuid=users[0].uuid))
        revision = e.Meta["policy_revision"].number
    assert storage.sessions.authenticate(live.uuid) == Authenticated(session, user, revision)
    assert storage.sessions.identity(live.uuid) == (session, user)
    storage.sessions.revoke(live.uuid)
    assert storage.sessions.authenticate(live.uuid) is None
    storage.users.delete(users[1].id)
    assert storage.sessions.authenticate(gone.uuid) is None
    assert storage.sessions.authenticate("no-such-session") is None


# -- dumping ------------------------------------------------------------------------


@pytest.mark.parametrize("moment", [
    datetime(2026, 11, 22, 10, 0, 0), datetime(2026, 11, 22, 10, 0, 0, 123456),
    datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc),
])
def test_compiled_dumpers_match_marshmallow(moment):
    user = User(id=7, uuid="u", created_at=moment, updated_at=moment, deleted_at=None, name="ü", email="a@b.co")
    role = Role(id=2**63 - 1, uuid="r", created_at=moment, updated_at=moment, deleted_at=moment, name="x",
                description="", permissions=(Permission("a", "b"), Permission("*", "*")), builtin=True)
    for schema, record in ((schemas.UserSchema(), user), (schemas.RoleSchema(), role)):
        assert dumper(schema)(record) == schema.dump(record)
        assert list(dumper(schema)(record)) == list(schema.dump(record))  # same key order


def test_dumper_matches_every_record_schema_on_stored_records(populated):
    storage = populated[0]
    for kind, schema in (("users", schemas.UserSchema()), ("groups", schemas.GroupSchema()),
                         ("members", schemas.MemberSchema()), ("roles", schemas.RoleSchema())):
        for record in getattr(storage, kind).list(limit=500).items:
            assert dumper(schema)(record) == schema.dump(record)


PLAIN_KINDS = (("users", schemas.UserSchema()), ("groups", schemas.GroupSchema()),
               ("members", schemas.MemberSchema()))


def test_document_pages_equal_the_schemas_dump_of_the_records(populated):
    """Pages shaped by the query (``list_documents``) hold exactly what dumping the
    records of ``list`` gives, key order included, for every filter, page and limit; a
    timestamp stored on a whole second (no fraction on SQLite) too."""
    from pony.orm import db_session

    storage, users, groups, role = populated
    if not is_pony(storage):
        pytest.skip("not the pony storage")
    with db_session:  # a whole second
        storage.entities.User[users[0].id].updated_at = datetime(2026, 11, 24, 9, 30, 0)
        if storage.db.provider.dialect == "SQLite":
            # Text without a fraction, as isoformat(" ") writes a whole second (Pony
            # writes ".000000"; a row written another way may not).
            storage.db.execute("UPDATE locky_users SET updated_at = '2026-11-24 09:30:00' WHERE id = $id",
                               {"id": users[0].id})
    cases = {
        "users": [{}, {"email": "U1@Example.COM"}, {"email": "u5@example.com"}, {"email": None}],
        "groups": [{}, {"name": "g1"}, {"name": "g2"}],
        "members": [{}, {"user_uuid": users[4].uuid}, {"group_uuid": groups[0].uuid, "role": "owner"},
                    {"role": role.name}],
    }
    for kind, schema in PLAIN_KINDS:
        fields = plain_fields(schema)
        assert fields is not None and [name for name, _ in fields] == list(schema.dump_fields)
        store = getattr(storage, kind)
        for given in cases[kind]:
            for after_id in (0, 1, 3, 10**6):
                for limit in (1, 2, 50):
                    records = store.list(after_id=after_id, limit=limit, **given)
                    documents = store.list_documents(fields, after_id=after_id, limit=limit, **given)
                    expected = [schema.dump(r) for r in records.items]
                    assert documents.items == expected, (kind, given, after_id, limit)
                    assert [list(d) for d in documents.items] == [list(d) for d in expected]
                    assert documents.next_after_id == records.next_after_id
    first = storage.users.list_documents(plain_fields(schemas.UserSchema()), limit=1).items[0]
    assert first["updated_at"] == "2026-11-24T09:30:00.000000Z" and first["email_verified"] is False
    for wrong in ((("nope", "value"),), (("created_at", "value"),), (("email", "bool"),), ()):
        with pytest.raises(ValueError):
            storage.users.list_documents(wrong)
    with pytest.raises(ValueError):  # a nested list is not a plain field
        storage.roles.list_documents((("id", "value"), ("permissions", "value")))
    with pytest.raises(ValueError):
        storage.users.list_documents(plain_fields(schemas.UserSchema()), name="x")


def test_only_plain_schemas_are_listed_as_documents():
    assert plain_fields(schemas.RoleSchema()) is None  # permissions: a nested list
    assert plain_fields(schemas.UserSchema()) == (
        ("id", "value"), ("uuid", "value"), ("created_at", "timestamp"), ("updated_at", "timestamp"),
        ("deleted_at", "timestamp"), ("name", "value"), ("email", "value"), ("email_verified", "bool"),
        ("disabled", "bool"), ("mfa_enabled", "bool"))


def test_the_list_endpoint_answers_the_same_with_and_without_documents(locky_app, locky_client, locky_admin):
    """The users list over HTTP, once through the store's documents and once through
    records and the schema: the same bodies, page by page."""
    for i in range(4):
        locky_app.context.storage.users.create(name=f"n{i}", email=f"n{i}@example.com", password_hash="h")
    resource = locky_app._router.find("/v1/internal/users")[0]
    assert (resource.document_fields is not None) == is_pony(locky_app.context.storage)

    def pages():
        bodies, after = [], 0
        while after is not None:
            body = locky_client.simulate_get("/v1/internal/users", params={"limit": 2, "after_id": after},
                                             headers=locky_admin.headers).json
            bodies.append(body)
            after = body["next_after_id"]
        return bodies

    with_documents = pages()
    resource.document_fields = None
    assert pages() == with_documents
    assert sum(len(b["users"]) for b in with_documents) == 5  # the admin and four more


# -- token cache --------------------------------------------------------------------

ALGORITHMS = ["ES256", "EdDSA", "RS256", "HS256"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_cached_token_still_expires(locky_app_factory, monkeypatch, algorithm):
    import locky_jwt

    app = locky_app_factory(jwt_algorithm=algorithm)
    tokens = app.context.tokens
    issued = tokens.issue(user_uuid="u", session_uuid="s", kind="access")
    claims = tokens.verify(issued.token, kind="access")
    assert tokens.verify(issued.token, kind="access") is claims  # served from the cache
    with pytest.raises(Unauthorized):
        tokens.verify(issued.token, kind="refresh")  # the cache is per kind
    now = locky_jwt.time.time()
    monkeypatch.setattr(locky_jwt.time, "time", lambda: now + app.context.settings.access_ttl + 10)
    with pytest.raises(Unauthorized):
        tokens.verify(issued.token, kind="access")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_cache_holds_only_what_was_verified(locky_app_factory, algorithm):
    """A token differing from a cached one in a single character (its signature, or a
    header naming no key) is verified afresh, and refused."""
    app = locky_app_factory(jwt_algorithm=algorithm)
    tokens = app.context.tokens
    issued = tokens.issue(user_uuid="u", session_uuid="s", kind="access")
    tokens.verify(issued.token, kind="access")
    head, payload, signature = issued.token.split(".")
    altered = signature[:-2] + ("AA" if not signature.endswith("AA") else "BA")
    for forged in (f"{head}.{payload}.{altered}", f"{head}.{payload}.", f"{head}.{payload}"):
        with pytest.raises(Unauthorized):
            tokens.verify(forged, kind="access")
    assert tokens.verify(issued.token, kind="access").subject == "u"


def _counting_decodes(monkeypatch) -> list[str]:
    """The tokens ``locky_jwt`` hands to PyJWT's ``jwt.decode`` from now on: its
    signature checks."""
    import locky_jwt

    decoded, decode = [], locky_jwt.jwt.decode

    def counted(token, *args, **kwargs):
        decoded.append(token)
        return decode(token, *args, **kwargs)

    monkeypatch.setattr(locky_jwt.jwt, "decode", counted)
    return decoded


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_token_refused_for_good_is_not_checked_again(locky_app_factory, monkeypatch, algorithm):
    """A forged signature, a token of the wrong type and an expired token are refused
    the second time with the same words and no signature check; the valid tokens around
    them are not disturbed."""
    import locky_jwt

    app = locky_app_factory(jwt_algorithm=algorithm)
    tokens = app.context.tokens
    issued = tokens.issue(user_uuid="u", session_uuid="s", kind="access")
    head, payload, signature = issued.token.split(".")
    forged = f"{head}.{payload}.{signature[:-2]}{'AA' if not signature.endswith('AA') else 'BA'}"
    decoded = _counting_decodes(monkeypatch)
    for token, kind, words in ((forged, "access", "The token is invalid."),
                               (issued.token, "refresh", "The token is of the wrong type.")):
        for _ in range(3):
            with pytest.raises(Unauthorized) as refused:
                tokens.verify(token, kind=kind)
            assert refused.value.description == words
        assert decoded.count(token) == 1, (kind, words)
    assert tokens.verify(issued.token, kind="access").subject == "u"

    now = locky_jwt.time.time()
    # PyJWT reads the real clock: the expired token is one issued with an exp gone by.
    monkeypatch.setattr(locky_jwt.time, "time", lambda: now - 2 * app.context.settings.access_ttl)
    old = tokens.issue(user_uuid="u", session_uuid="s3", kind="access").token
    monkeypatch.setattr(locky_jwt.time, "time", lambda: now)
    for _ in range(3):
        with pytest.raises(Unauthorized) as refused:
            tokens.verify(old, kind="access")
        assert refused.value.description == "The token has expired."
    assert decoded.count(old) == 1


def test_a_token_not_valid_yet_is_checked_again(locky_app_factory, monkeypatch):
    """A token whose ``nbf`` is still to come (beyond the leeway) is refused, and checked
    afresh each time: it may hold later."""
    app = locky_app_factory(jwt_algorithm="HS256")
    settings, now = app.context.settings, int(datetime.now(timezone.utc).timestamp())
    early = jwt.encode({"sub": "u", "sid": "s", "iat": now, "nbf": now + 60, "exp": now + 600, "jti": "j",
                        "iss": settings.issuer, "aud": settings.jwt_audience, "typ": "access"},
                       settings.jwt_secret, algorithm="HS256")
    decoded = _counting_decodes(monkeypatch)
    for _ in range(2):
        with pytest.raises(Unauthorized):
            app.context.tokens.verify(early, kind="access")
    assert decoded.count(early) == 2


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA", "RS256"])
def test_cached_signing_key_follows_a_rotation_within_the_recheck(locky_app_factory, monkeypatch, algorithm):
    """The active key is read from storage at most every ``ACTIVE_RECHECK`` seconds: a
    rotation made by another app (host) is followed once that time has passed, and the
    tokens signed before keep verifying everywhere."""
    import locky_jwt.keys as keys_module

    first, second = locky_app_factory(jwt_algorithm=algorithm), locky_app_factory(jwt_algorithm=algorithm)
    before = second.context.tokens.issue(user_uuid="u", session_uuid="s", kind="access")
    old_kid = jwt.get_unverified_header(before.token)["kid"]
    new = first.context.tokens.keys.rotate()
    assert new.kid != old_kid
    monkeypatch.setattr(keys_module, "ACTIVE_RECHECK", 0.0)  # the interval has passed
    after = second.context.tokens.issue(user_uuid="u", session_uuid="s", kind="access")
    assert jwt.get_unverified_header(after.token)["kid"] == new.kid
    for app in (first, second):
        for token in (before.token, after.token):
            assert app.context.tokens.verify(token, kind="access").subject == "u"


# -- across worker processes ----------------------------------------------------------


@pytest.mark.server
def test_revocations_reach_every_worker_on_the_next_request(tmp_path, locky_database_url):
    from support.server import locky_server

    env = {"LOCKY_DATABASE_URL": locky_database_url, "LOCKY_JWT_SECRET": TEST_SECRET, "LOCKY_BCRYPT_ROUNDS": "4",
           "LOCKY_ADMIN_EMAILS": ADMIN_EMAIL}
    with locky_server(tmp_path / "server", env, workers=2) as server:
        def account(email, verified=False):
            status, _, user = server.request("POST", "/v1/public/users/register",
                                             {"name": "n", "email": email, "password": PASSWORD})
            assert status == 201, user
            if verified:  # an admin email makes an admin once its address is proven
                server.verify(email)
            status, _, body = server.request("POST", "/v1/public/users/login", {"email": email, "password": PASSWORD})
            assert status == 200, body
            return user, {"Authorization": f"Bearer {body['access_token']}"}

        def statuses(method, path, headers, body=None, times=8):
            # Every request is a new connection: both workers serve some of them.
            return {server.request(method, path, body, headers)[0] for _ in range(times)}

        admin, admin_h = account(ADMIN_EMAIL, verified=True)
        alice, alice_h = account("alice@example.com")
        bob, bob_h = account("bob@example.com")
        assert statuses("GET", "/v1/internal/users/me", alice_h) == {200}  # caches warm in both workers

        # A logout: the token fails on the next request.
        assert server.request("POST", "/v1/private/users/logout", None, alice_h)[0] == 204
        assert statuses("GET", "/v1/internal/users/me", alice_h) == {401}

        # A deleted user's tokens fail.
        assert statuses("GET", "/v1/internal/users", bob_h) == {200}
        assert server.request("DELETE", f"/v1/private/users/{bob['id']}", None, admin_h)[0] == 204
        assert statuses("GET", "/v1/internal/users", bob_h) == {401}

        # A removed membership and a deleted custom role take their rights away at once.
        carol, carol_h = account("carol@example.com")
        role, group, member = member_with_role(server, admin_h, carol["uuid"], "editor", ("groups", "update"), "team")
        path = f"/v1/private/groups/{group['id']}"
        assert statuses("PUT", path, carol_h, {"description": "x"}) == {200}
        assert server.request("DELETE", f"/v1/private/members/{member['id']}", None, admin_h)[0] == 204
        assert statuses("PUT", path, carol_h, {"description": "y"}) == {403}

        status, _, member = server.request("POST", "/v1/private/members", {
            "group_uuid": group["uuid"], "user_uuid": carol["uuid"], "role": "editor"}, admin_h)
        assert status == 201, member
        assert statuses("PUT", path, carol_h, {"description": "z"}) == {200}
        status, _, _ = server.request("PUT", f"/v1/private/roles/{role['id']}", {"permissions": []}, admin_h)
        assert status == 200
        assert statuses("PUT", path, carol_h, {"description": "w"}) == {403}
