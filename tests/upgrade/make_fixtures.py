"""Make the 1.0.0 upgrade fixtures: real Locky 1.0.0 databases, filled over HTTP, dumped.

Run with the Python of a virtualenv that holds the 1.0.0 release (never this checkout):

    python3 -m venv /work/venv-100
    /work/venv-100/bin/pip install '/path/to/locky-1.0.0[postgres,mysql]' pytest
    /work/venv-100/bin/python tests/upgrade/make_fixtures.py

For each engine (a SQLite file; scratch databases on the PostgreSQL and MariaDB servers of
``LOCKY_TEST_POSTGRES_URL`` / ``LOCKY_TEST_MYSQL_URL``, created here and dropped after)
it starts 1.0.0's ``create_app`` behind Falcon's test client, fills it through the HTTP
API (users, groups, memberships, a custom role, an admin grant made by 1.0.0's own
``locky grant-admin``, live and revoked logins), records every answer, and dumps the
database with the engine's own tool into ``fixtures/1.0.0/``: ``sqlite.sql``,
``postgres.sql``, ``mysql.sql`` and ``expected.json`` (what 1.0.0 answered, per engine,
plus the test-only passwords and JWT secret the tests need).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import jwt
from falcon import testing

import locky
from locky import create_app
from locky.settings import Settings
from locky.testing.databases import connect, run_sql  # the release's own helpers

HERE = Path(__file__).resolve().parent
OUT = HERE / "fixtures" / "1.0.0"
RELEASE = "1.0.0"

#: Test-only: the signing secret of the fixture databases' tokens.
JWT_SECRET = "locky-upgrade-fixture-secret-1.0.0-do-not-use"
BCRYPT_ROUNDS = 4
ADMIN_EMAIL = "admin@example.com"

#: (key, display name, email as registered, password): test-only accounts.
ACCOUNTS = (
    ("zoe", "Zoë Ångström", "zoe@example.com", "pässwörd-zoë-1"),
    ("lukasz", "Łukasz Wiśniewski", "lukasz@example.com", "hasło-łukasz-2"),
    ("jose", "José Müller", "jose@example.com", "contraseña-josé-3"),
    ("taro", "山田 太郎", "taro@example.com", "パスワード-taro-4"),
    ("admin", "Ådmin Örn", ADMIN_EMAIL, "admin-password-5"),
    ("gone", "Gösta Gone", "gone@example.com", "gone-password-6"),
    # Registered with capitals: 1.0.0 stores emails lowercased.
    ("plain", "Plain Pérez", "Plain.Perez@Example.COM", "plain-password-7"),
)

DEFAULT_URLS = {
    "postgres": ("LOCKY_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"),
    "mysql": ("LOCKY_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
}


class Api:
    """The 1.0.0 app behind Falcon's test client; every call must answer as expected."""

    def __init__(self, app):
        self.client = testing.TestClient(app)

    def call(self, method: str, path: str, expect: int, body=None, token: str | None = None, params=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        result = self.client.simulate_request(method, path, json=body, headers=headers, params=params)
        if result.status_code != expect:
            raise SystemExit(f"{method} {path} answered {result.status_code}, not {expect}: {result.text}")
        return result.json if result.text else None

    def everything(self, kind: str, token: str) -> list[dict]:
        page = self.call("GET", f"/v1/internal/{kind}", 200, token=token, params={"limit": "500"})
        assert page["next_after_id"] is None, f"more than one page of {kind}"
        return page[kind]


def fill(api: Api, database_url: str) -> dict:
    """Fill a fresh 1.0.0 database through HTTP; what 1.0.0 answered, for expected.json."""
    users, passwords, tokens = {}, {}, {}
    for key, name, email, password in ACCOUNTS:
        users[key] = api.call("POST", "/v1/public/users/register", 201,
                              {"name": name, "email": email, "password": password})
        passwords[users[key]["email"]] = password

    grant_admin(database_url)

    for key in ("zoe", "lukasz", "jose", "admin", "gone"):
        tokens[key] = login(api, users[key]["email"], passwords[users[key]["email"]])["access_token"]
    admin, zoe = tokens["admin"], tokens["zoe"]

    auditor = api.call("POST", "/v1/private/roles", 201, {
        "name": "auditor",
        "description": "Reads reports — and groups, nothing else.",
        "permissions": [{"resource": "reports", "action": "read"}, {"resource": "groups", "action": "read"}],
    }, token=admin)
    short_lived = api.call("POST", "/v1/private/roles", 201, {
        "name": "short-lived", "permissions": [{"resource": "deploys", "action": "run"}],
    }, token=admin)

    ops = api.call("POST", "/v1/private/groups", 201,
                   {"name": "ops", "description": "On-call team — nights & weekends ☎"}, token=zoe)
    lab = api.call("POST", "/v1/private/groups", 201, {"name": "Łódź-lab"}, token=tokens["lukasz"])
    temp = api.call("POST", "/v1/private/groups", 201, {"name": "temp", "description": "to be deleted"}, token=zoe)

    def add(group, user_key, role, token=zoe):
        body = {"group_uuid": group["uuid"], "user_uuid": users[user_key]["uuid"]}
        if role is not None:  # None: the API's default role, member
            body["role"] = role
        return api.call("POST", "/v1/private/members", 201, body, token=token)

    add(ops, "lukasz", "maintainer")
    add(ops, "jose", None)
    add(ops, "taro", "auditor")
    add(ops, "gone", "member")
    add(lab, "jose", "member", token=tokens["lukasz"])
    add(lab, "plain", "viewer", token=tokens["lukasz"])
    add(temp, "jose", "member")

    before = {m["id"] for m in api.everything("members", admin)}
    api.call("DELETE", f"/v1/private/groups/{temp['id']}", 204, token=zoe)
    api.call("DELETE", f"/v1/private/users/{users['gone']['id']}", 204, token=admin)
    api.call("DELETE", f"/v1/private/roles/{short_lived['id']}", 204, token=admin)
    ended = sorted(before - {m["id"] for m in api.everything("members", admin)})

    # A login that was ended, and one that is live, its refresh token already rotated once
    # (so the stored jti is not the login's first one).
    plain_email = users["plain"]["email"]
    revoked = login(api, plain_email, passwords[plain_email])
    api.call("POST", "/v1/private/users/logout", 204, token=revoked["access_token"])
    first = login(api, users["taro"]["email"], passwords[users["taro"]["email"]])
    live = api.call("POST", "/v1/public/users/refresh", 200, {"refresh_token": first["refresh_token"]})

    record = {
        "users": api.everything("users", admin),
        "groups": api.everything("groups", admin),
        "members": api.everything("members", admin),
        "roles": api.everything("roles", admin),
    }
    record["counts"] = {kind: api.call("GET", f"/v1/internal/{kind}/count", 200, token=admin)["count"]
                        for kind in ("users", "groups", "members", "roles")}
    record["deleted"] = {
        "users": [users["gone"]["id"]], "groups": [temp["id"]], "members": ended, "roles": [short_lived["id"]],
    }
    for kind, ids in record["deleted"].items():
        for record_id in ids:
            api.call("GET", f"/v1/internal/{kind}/{record_id}", 404, token=admin)
    record["deleted_user"] = {"email": users["gone"]["email"], "uuid": users["gone"]["uuid"]}
    record["accounts"] = {key: users[key]["uuid"] for key, *_ in ACCOUNTS}
    record["admin_uuid"] = users["admin"]["uuid"]
    record["live_session"] = stored_session(database_url, live["refresh_token"], revoked=False)
    record["revoked_session"] = stored_session(database_url, revoked["refresh_token"], revoked=True)
    record["checks"] = decisions(api, admin, users, {"ops": ops, "lab": lab}, auditor)
    record["passwords"] = passwords
    return record


def decisions(api: Api, token: str, users: dict, groups: dict, auditor: dict) -> list[dict]:
    """The authz checks 1.0.0 answered, each with why it matters."""
    assert auditor["permissions"] == [{"resource": "reports", "action": "read"}, {"resource": "groups", "action": "read"}]
    asked = [
        ("taro", "reports", "read", "ops", "custom role auditor, in the group where it is held"),
        ("taro", "reports", "read", "lab", "custom role auditor, in another group"),
        ("taro", "reports", "read", None, "custom role auditor, outside any group"),
        ("jose", "reports", "read", "ops", "a member without the custom role"),
        ("admin", "roles", "create", None, "the admin grant"),
        ("admin", "reports", "read", "lab", "the admin grant, anywhere"),
        ("plain", "roles", "create", None, "a plain user"),
        ("zoe", "groups", "delete", "ops", "owner from group creation"),
        ("lukasz", "members", "create", "ops", "maintainer"),
        ("lukasz", "groups", "delete", "ops", "maintainer is not owner"),
        ("lukasz", "groups", "delete", "lab", "owner of the group they created"),
        ("jose", "groups", "update", "ops", "member"),
        ("plain", "groups", "update", "lab", "viewer"),
        ("gone", "groups", "read", None, "a deleted user is allowed nothing"),
    ]
    checks = []
    for key, resource, action, group, why in asked:
        params = {"user_uuid": users[key]["uuid"], "resource": resource, "action": action}
        if group:
            params["group_uuid"] = groups[group]["uuid"]
        answer = api.call("GET", "/v1/internal/authz/check", 200, token=token, params=params)
        checks.append({**params, "allowed": answer["allowed"], "why": why})
    return checks


def login(api: Api, email: str, password: str) -> dict:
    return api.call("POST", "/v1/public/users/login", 200, {"email": email, "password": password})


def grant_admin(database_url: str) -> None:
    """1.0.0's own ``locky grant-admin``, as an operator runs it."""
    locky_command = Path(sys.executable).with_name("locky")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")},
           "LOCKY_DATABASE_URL": database_url, "LOCKY_JWT_SECRET": JWT_SECRET}
    done = subprocess.run([str(locky_command), "grant-admin", ADMIN_EMAIL], env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "is now an admin" not in done.stdout:
        raise SystemExit(f"locky grant-admin failed: {done.stdout}{done.stderr}")


def stored_session(database_url: str, refresh_token: str, *, revoked: bool) -> dict:
    """The session of a refresh token as the database holds it (uuid, user, refresh jti)."""
    claims = jwt.decode(refresh_token, JWT_SECRET, algorithms=["HS256"], audience="locky", issuer="locky")
    rows = run_sql(database_url, "SELECT uuid, user_uuid, refresh_jti, revoked_at FROM locky_sessions WHERE uuid = %s",
                   claims["sid"])
    assert len(rows) == 1, rows
    session_uuid, user_uuid, refresh_jti, revoked_at = rows[0]
    assert (revoked_at is not None) == revoked, rows
    assert user_uuid == claims["sub"] and refresh_jti == claims["jti"], (rows, claims)
    return {"session_uuid": session_uuid, "user_uuid": user_uuid, "refresh_jti": refresh_jti}


# -- databases ---------------------------------------------------------------------------


def scratch(url: str, name: str, create: bool) -> str:
    """Create (or drop) database ``name`` beside the one ``url`` names; its URL."""
    admin = connect(url)
    try:
        cursor = admin.cursor()
        if url.startswith("postgres"):
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if create:
                cursor.execute(f"CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0")
        else:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            if create:
                cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        admin.close()
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def dump(engine: str, url: str) -> str:
    """The database as SQL text that loads into an empty database of the same engine."""
    if engine == "sqlite":
        connection = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return "\n".join(connection.iterdump()) + "\n"
        finally:
            connection.close()
    parts = urlsplit(url)
    env = {**os.environ}
    if parts.password:
        env["PGPASSWORD" if engine == "postgres" else "MYSQL_PWD"] = unquote(parts.password)
    database = unquote(parts.path.strip("/"))
    if engine == "postgres":
        command = ["pg_dump", "--no-owner", "--no-privileges", "--inserts", "--encoding=UTF8",
                   "-h", parts.hostname, "-p", str(parts.port or 5432), "-U", unquote(parts.username or "postgres"),
                   database]
        # psql meta-commands (\restrict, \unrestrict, \connect) mean nothing to a driver.
        keep = lambda line: not line.startswith("\\")  # noqa: E731
    else:
        command = ["mariadb-dump", "--skip-comments", "--skip-add-locks", "--skip-dump-date",
                   "--skip-extended-insert", "--single-transaction", "--no-create-db",
                   "--default-character-set=utf8mb4",
                   "-h", parts.hostname, "-P", str(parts.port or 3306), "-u", unquote(parts.username or "root"),
                   database]
        # The client-only sandbox line of recent mariadb-dump; a driver would send it as
        # an empty query.
        keep = lambda line: not line.startswith("/*M!999999")  # noqa: E731
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=True)
    return "".join(line + "\n" for line in done.stdout.splitlines() if keep(line))


def make(engine: str, url: str, workdir: Path) -> tuple[str, dict]:
    """A filled 1.0.0 database of ``engine``: its dump and what 1.0.0 answered."""
    if engine == "sqlite":
        database_url = f"sqlite:///{workdir / 'locky-1.0.0.sqlite'}"
        name = None
    else:
        name = f"locky_fixture_{secrets.token_hex(4)}"
        database_url = scratch(url, name, create=True)
    try:
        settings = Settings.from_mapping({"database_url": database_url, "jwt_secret": JWT_SECRET,
                                          "bcrypt_rounds": BCRYPT_ROUNDS, "log_requests": False})
        app = create_app(settings)
        try:
            answered = fill(Api(app), database_url)
        finally:
            app.close()
        if engine == "mysql":
            answered["collations"] = dict(run_sql(
                database_url, "SELECT table_name, table_collation FROM information_schema.tables"
                              " WHERE table_schema = DATABASE() ORDER BY table_name"))
        return dump(engine, database_url), answered
    finally:
        if name:
            scratch(url, name, create=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres,mysql", help="comma-separated: sqlite,postgres,mysql")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    installed = Path(locky.__file__).resolve()
    if not str(installed).startswith(str(Path(sys.prefix).resolve())) or getattr(locky, "__version__", RELEASE) != RELEASE:
        raise SystemExit(f"run this with the Python of a {RELEASE} virtualenv; locky comes from {installed}")
    args.out.mkdir(parents=True, exist_ok=True)
    expected_path = args.out / "expected.json"
    expected = json.loads(expected_path.read_text()) if expected_path.exists() else {}
    expected.update({"release": RELEASE, "jwt_secret": JWT_SECRET, "bcrypt_rounds": BCRYPT_ROUNDS,
                     "jwt": {"algorithm": "HS256", "issuer": "locky", "audience": "locky"}})
    engines = expected.setdefault("engines", {})
    with tempfile.TemporaryDirectory(prefix="locky-fixtures-") as workdir:
        for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
            variable, default = DEFAULT_URLS.get(engine, (None, None))
            url = os.environ.get(variable, default) if variable else None
            text, answered = make(engine, url, Path(workdir))
            (args.out / f"{engine}.sql").write_text(text, encoding="utf-8")
            engines[engine] = answered
            print(f"{engine}: {len(text.encode())} bytes of SQL, {answered['counts']}")
    expected_path.write_text(json.dumps(expected, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
