"""``python -m benchmarks.storage_scale``: Locky's reads on a table of a million users.

For each engine: create the schema through the Pony storage, bulk-load users, groups and
memberships with the engine's fastest path (``COPY`` on PostgreSQL, multi-row
``INSERT`` on MariaDB/MySQL, ``executemany`` on SQLite), then time requests through the
HTTP app (Falcon's test client, an admin's bearer token, so authentication and the
policy check are included) and print p50/p99 per request:

- ``GET /v1/internal/users?limit=50&after_id=N`` at the start, middle and end of the
  table (keyset paging: the three should cost the same);
- the exact filters (users by email, groups by name, members by group) and the counts;
- a page of the memberships of one user in every group (as a service account is) and of
  one group of up to 10,000 members (as an "everyone" group is);
- the query plans of those statements, failing if one reads the whole table or sorts
  what it read (the memberships' plans are asked of that user and that group: a plan
  for a uuid no row holds says nothing).

    python -m benchmarks.storage_scale                          # all engines, 1M users
    python -m benchmarks.storage_scale --engines postgres --users 100000 --groups 10000

PostgreSQL and MariaDB come from ``LOCKY_TEST_POSTGRES_URL``/``LOCKY_TEST_MYSQL_URL``
(defaults: the local servers of ``.ci/run``); each run seeds a scratch database beside
the named one and drops it afterwards (``--keep`` keeps it and prints its URL).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from falcon import testing

from locky.app import create_app
from locky.settings import Settings
from locky.testing.databases import connect, scratch_database

from . import seed

SECRET = "locky-benchmark-secret-0123456789-abcdefghijklmnop"
ADMIN = "admin@example.com"
PASSWORD = "benchmark password"
HASH = "$2b$12$" + "C" * 53  # a bcrypt-shaped placeholder: nobody logs in as these users
SERVERS = {
    "postgres": os.environ.get("LOCKY_TEST_POSTGRES_URL") or "postgres://postgres@127.0.0.1:5432/test",
    "mysql": os.environ.get("LOCKY_TEST_MYSQL_URL") or "mysql://root@127.0.0.1:3306/test",
}
COLUMNS = {
    "locky_users": ("id", "uuid", "created_at", "updated_at", "deleted_at", "del_token",
                    "name", "email", "password_hash"),
    "locky_groups": ("id", "uuid", "created_at", "updated_at", "deleted_at", "del_token",
                     "name", "description"),
    "locky_members": ("id", "uuid", "created_at", "updated_at", "deleted_at", "del_token",
                      "group", "user", "group_uuid", "user_uuid", "role"),
}
MEMBERS_PER_GROUP = 5
#: A user in every group, and a group with up to ``BIG_GROUP_SIZE`` members: the
#: memberships' pages and plans are measured on them.
HEAVY_USER = 2
BIG_GROUP = 1
BIG_GROUP_SIZE = 10_000
DELETED_EVERY = 100  # every 100th user is soft-deleted, as in a real table
CHUNK = 50_000


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def rows(users: int, groups: int):
    """``{table: row generator}``; ids are 1..n."""
    start = datetime(2025, 1, 1)
    rng = random.Random(7)
    user_uuids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(users + 1)]

    def moment(i: int) -> datetime:
        return start + timedelta(seconds=i, microseconds=i % 999_983 + 1)

    def user_rows():
        for i in range(1, users + 1):
            at = moment(i)
            deleted = i % DELETED_EVERY == 0
            yield (i, user_uuids[i], at, at, at if deleted else None, i if deleted else 0,
                   f"User {i}", f"user{i}@example.com", HASH)

    group_uuids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(groups + 1)]

    def group_rows():
        for g in range(1, groups + 1):
            at = moment(g)
            yield (g, group_uuids[g], at, at, None, 0, f"group-{g}", "")

    def member_rows():
        roles = ("owner", "maintainer", "member", "member", "viewer")
        pick = random.Random(11)
        next_id = 1
        for g in range(1, groups + 1):
            chosen: list[int] = []
            while len(chosen) < MEMBERS_PER_GROUP:
                u = pick.randint(1, users)
                if u % DELETED_EVERY and u not in chosen and u != HEAVY_USER:
                    chosen.append(u)
            chosen.append(HEAVY_USER)
            if g == BIG_GROUP:
                taken = set(chosen)
                chosen += [u for u in range(1, min(users, BIG_GROUP_SIZE) + 1) if u % DELETED_EVERY and u not in taken]
            at = moment(g)
            for k, u in enumerate(chosen):
                role = roles[k] if k < len(roles) else "member"
                yield (next_id, str(uuid.uuid4()), at, at, None, 0, g, u, group_uuids[g], user_uuids[u], role)
                next_id += 1

    return {"locky_users": user_rows(), "locky_groups": group_rows(), "locky_members": member_rows()}


def chunks(iterable, size: int = CHUNK):
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# ---------------------------------------------------------------------------
# Bulk loads
# ---------------------------------------------------------------------------


def load_postgres(url: str, tables) -> None:
    connection = connect(url, autocommit=False)
    cursor = connection.cursor()
    for table, generator in tables.items():
        columns = ", ".join(f'"{c}"' for c in COLUMNS[table])
        for batch in chunks(generator):
            buffer = io.StringIO()
            for row in batch:
                buffer.write("\t".join(r"\N" if v is None else str(v) for v in row) + "\n")
            buffer.seek(0)
            cursor.copy_expert(f'COPY "{table}" ({columns}) FROM STDIN', buffer)
        cursor.execute(f"SELECT setval('{table}_id_seq', (SELECT MAX(id) FROM \"{table}\"))")
        connection.commit()
    connection.close()


def load_mysql(url: str, tables) -> None:
    connection = connect(url, autocommit=False)
    cursor = connection.cursor()
    cursor.execute("SET SESSION unique_checks = 0, SESSION foreign_key_checks = 0")
    for table, generator in tables.items():
        columns = ", ".join(f"`{c}`" for c in COLUMNS[table])
        marks = ", ".join(["%s"] * len(COLUMNS[table]))
        for batch in chunks(generator, 5_000):
            # PyMySQL turns executemany of one INSERT into multi-row INSERT statements.
            cursor.executemany(f"INSERT INTO `{table}` ({columns}) VALUES ({marks})", batch)
        connection.commit()
    cursor.execute("SET SESSION unique_checks = 1, SESSION foreign_key_checks = 1")
    connection.close()


def load_sqlite(url: str, tables) -> None:
    connection = sqlite3.connect(urlsplit(url).path, isolation_level=None)
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute("BEGIN")
    for table, generator in tables.items():
        columns = ", ".join(f'"{c}"' for c in COLUMNS[table])
        marks = ", ".join(["?"] * len(COLUMNS[table]))
        for batch in chunks(generator):
            # Pony's own text form of datetimes.
            batch = [tuple(v.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(v, datetime) else v for v in row)
                     for row in batch]
            connection.executemany(f'INSERT INTO "{table}" ({columns}) VALUES ({marks})', batch)
    connection.execute("COMMIT")
    connection.close()


LOADERS = {"postgres": load_postgres, "mysql": load_mysql, "sqlite": load_sqlite}


# ---------------------------------------------------------------------------
# Query plans
# ---------------------------------------------------------------------------


def plans(engine: str, url: str, users: int) -> list[tuple[str, str, bool]]:
    """``(what, plan summary, uses an index)`` for the statements behind each request."""
    q = "`" if engine == "mysql" else '"'
    if engine == "sqlite":
        connection = sqlite3.connect(urlsplit(url).path)
        cursor, mark = connection.cursor(), "?"
    else:
        connection = connect(url)
        cursor, mark = connection.cursor(), "%s"
    cursor.execute(f"SELECT uuid FROM locky_users WHERE id = {mark}", (HEAVY_USER,))
    heavy_user = cursor.fetchone()[0]
    cursor.execute(f"SELECT uuid FROM locky_groups WHERE id = {mark}", (BIG_GROUP,))
    big_group = cursor.fetchone()[0]
    # As plugins/locky_pony/reads.py writes them (with its index hint on MariaDB).
    users_from = "locky_users IGNORE INDEX (idx_locky_users__del_token_id)" if engine == "mysql" else "locky_users"
    statements = {
        "page at the start": f"SELECT * FROM {users_from} WHERE del_token = 0 AND id > 0 ORDER BY id LIMIT 51",
        "page in the middle": f"SELECT * FROM {users_from} WHERE del_token = 0 AND id > {users // 2}"
                              " ORDER BY id LIMIT 51",
        "page at the end": f"SELECT * FROM {users_from} WHERE del_token = 0 AND id > {users - 100}"
                           " ORDER BY id LIMIT 51",
        "users by email": "SELECT * FROM locky_users WHERE del_token = 0 AND email = 'user77@example.com'"
                          " AND id > 0 ORDER BY id LIMIT 51",
        "count users": "SELECT COUNT(*) FROM locky_users WHERE del_token = 0",
        "groups by name": "SELECT * FROM locky_groups WHERE del_token = 0 AND name = 'group-5' AND id > 0"
                          " ORDER BY id LIMIT 51",
        "members by group": f"SELECT * FROM locky_members WHERE del_token = 0 AND group_uuid = '{big_group}'"
                            " AND id > 0 ORDER BY id LIMIT 51",
        "members by user": f"SELECT * FROM locky_members WHERE del_token = 0 AND user_uuid = '{heavy_user}'"
                           " AND id > 0 ORDER BY id LIMIT 51",
    }
    found = []
    for what, sql in statements.items():
        if engine == "sqlite":
            plan = " | ".join(row[-1] for row in cursor.execute("EXPLAIN QUERY PLAN " + sql))
            uses = "USING" in plan and "TEMP B-TREE" not in plan
        elif engine == "postgres":
            cursor.execute("EXPLAIN " + sql.replace('"', q))
            lines = [row[0].strip() for row in cursor.fetchall()]
            plan = " | ".join(line for line in lines if "Scan" in line or "Limit" in line or "Aggregate" in line
                              or "Sort" in line)
            # A sort is fair only under a lookup of one row by a unique key.
            uses = "Seq Scan" not in plan and "Index" in plan and ("Sort" not in plan or what.endswith(" name")
                                                                 or what.endswith(" email"))
        else:
            cursor.execute("EXPLAIN " + sql.replace('"', q))
            names = [d[0] for d in cursor.description]
            row = dict(zip(names, cursor.fetchone()))
            plan = f"type={row['type']} key={row['key']} rows={row['rows']} extra={row['Extra']}"
            uses = row["type"] != "ALL" and bool(row["key"]) and "filesort" not in (row["Extra"] or "")
        found.append((what, plan, uses))
    connection.close()
    return found


# ---------------------------------------------------------------------------
# Timing through the HTTP app
# ---------------------------------------------------------------------------


def timed(client, headers, paths, repeat: int) -> tuple[float, float, int]:
    """p50 and p99 in milliseconds over ``repeat`` requests cycling through ``paths``."""
    samples = []
    for i in range(repeat + 5):
        path = paths[i % len(paths)]
        began = time.perf_counter()
        result = client.simulate_get(path, headers=headers)
        elapsed = (time.perf_counter() - began) * 1000
        assert result.status_code == 200, (path, result.status_code, result.text[:200])
        if i >= 5:  # the first few warm caches and connections
            samples.append(elapsed)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))], len(samples)


def measure(url: str, users: int, groups: int, repeat: int) -> list[tuple[str, float, float, int]]:
    settings = Settings.from_mapping({
        "database_url": url, "jwt_secret": SECRET, "admin_emails": (ADMIN,), "bcrypt_rounds": 4,
        "log_requests": False,
    })
    app = create_app(settings)
    try:
        client = testing.TestClient(app)
        client.simulate_post("/v1/public/users/register", json={"name": "Admin", "email": ADMIN, "password": PASSWORD})
        login = client.simulate_post("/v1/public/users/login", json={"email": ADMIN, "password": PASSWORD})
        headers = {"Authorization": f"Bearer {login.json['access_token']}"}
        rng = random.Random(3)

        def pages(base: int) -> list[str]:
            return [f"/v1/internal/users?limit=50&after_id={base + rng.randint(0, 500)}" for _ in range(50)]

        first = client.simulate_get("/v1/internal/users?limit=50&after_id=0", headers=headers).json
        assert len(first["users"]) == 50 and first["next_after_id"] is not None
        last = client.simulate_get(f"/v1/internal/users?limit=50&after_id={users - 40}", headers=headers).json
        assert last["users"] and last["users"][-1]["email"] == ADMIN
        group_uuids = [g["uuid"] for g in client.simulate_get(
            f"/v1/internal/groups?limit=20&after_id={groups // 2}", headers=headers).json["groups"]]
        count = client.simulate_get("/v1/internal/users/count", headers=headers).json["count"]
        assert count == users - users // DELETED_EVERY + 1, count
        heavy = client.simulate_get(f"/v1/internal/users/{HEAVY_USER}", headers=headers).json["uuid"]
        big = client.simulate_get(f"/v1/internal/groups/{BIG_GROUP}", headers=headers).json["uuid"]

        def member_pages(field: str, uuid: str) -> list[str]:
            """Pages of 50 of a long list: its first, and 49 starting anywhere in its first 2,000."""
            ids, after = [], 0
            while after is not None and len(ids) < 2_000:
                page = client.simulate_get(f"/v1/internal/members?{field}={uuid}&limit=500&after_id={after}",
                                           headers=headers).json
                ids += [m["id"] for m in page["members"]]
                after = page["next_after_id"]
            assert len(ids) >= min(groups, 200) if field == "user_uuid" else len(ids) > MEMBERS_PER_GROUP, len(ids)
            starts = [0] + [ids[rng.randrange(len(ids))] for _ in range(49)]
            return [f"/v1/internal/members?{field}={uuid}&limit=50&after_id={start}" for start in starts]

        results = [
            ("users page, start (after_id 0..500)", *timed(client, headers, pages(0), repeat)),
            ("users page, middle", *timed(client, headers, pages(users // 2), repeat)),
            ("users page, end (last 600 rows)", *timed(client, headers, pages(users - 600), repeat)),
            ("users by email", *timed(client, headers, [
                f"/v1/internal/users?email=user{rng.randint(1, users)}@example.com" for _ in range(50)], repeat)),
            ("groups by name", *timed(client, headers, [
                f"/v1/internal/groups?name=group-{rng.randint(1, groups)}" for _ in range(50)], repeat)),
            ("members by group_uuid", *timed(client, headers, [
                f"/v1/internal/members?group_uuid={u}" for u in group_uuids], repeat)),
            (f"members by user_uuid (in all {groups:,} groups)", *timed(
                client, headers, member_pages("user_uuid", heavy), repeat)),
            ("members by group_uuid (the biggest group)", *timed(
                client, headers, member_pages("group_uuid", big), repeat)),
            ("members count by group_uuid", *timed(client, headers, [
                f"/v1/internal/members/count?group_uuid={u}" for u in group_uuids], repeat)),
            ("users count (all live users)", *timed(client, headers, ["/v1/internal/users/count"], max(10, repeat // 10))),
            ("members count (all)", *timed(client, headers, ["/v1/internal/members/count"], max(10, repeat // 10))),
        ]
        return results
    finally:
        app.close()


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def run_engine(engine: str, args, url: str) -> bool:
    # The schema, made by the storage itself (as a first start would).
    create_app(Settings.from_mapping({"database_url": url, "jwt_secret": SECRET, "log_requests": False})).close()
    began = time.perf_counter()
    loaded = {table: 0 for table in COLUMNS}

    def counted(table, generator):
        for row in generator:
            loaded[table] += 1
            yield row

    LOADERS[engine](url, {table: counted(table, made) for table, made in rows(args.users, args.groups).items()})
    seed.settle(Settings.load(environ={}, database_url=url))  # what the server does soon after a load
    seeded = time.perf_counter() - began
    members = loaded["locky_members"]
    print(f"\n## {engine}: seeded {args.users:,} users, {args.groups:,} groups, {members:,} memberships"
          f" in {seeded:.0f} s ({(args.users + args.groups + members) / seeded:,.0f} rows/s)")
    ok = True
    print("\nquery plans:")
    for what, plan, uses in plans(engine, url, args.users):
        if what.startswith("count"):
            # Nearly every row is live: a full scan is a fair plan; the timing decides.
            mark = "   "
        else:
            ok &= uses
            mark = "ok " if uses else "BAD"
        print(f"  {mark} {what:<18} {plan}")
    print(f"\n  {'request (through the HTTP app, admin token)':<44} {'p50 ms':>8} {'p99 ms':>8} {'n':>5}")
    for what, p50, p99, n in measure(url, args.users, args.groups, args.repeat):
        print(f"  {what:<44} {p50:8.2f} {p99:8.2f} {n:5d}")
    sys.stdout.flush()
    return ok


@contextmanager
def scratch(engine: str, prefix: str, keep: bool = False):
    """The URL of an empty database on ``engine``: an SQLite file in a new folder, or a
    scratch database beside the one :data:`SERVERS` names. Removed afterwards (the
    folder with the file, its secret and mail), unless ``keep``: then its URL is printed."""
    if engine == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
        url = f"sqlite:///{directory / 'locky.sqlite'}"
        try:
            yield url
        finally:
            if keep:
                print(f"  (kept {url})")
            else:
                shutil.rmtree(directory)
        return
    with scratch_database(SERVERS[engine], prefix=f"{prefix.replace('-', '_')}_") as database:
        try:
            yield database.url
        finally:
            if keep:  # hand the database over instead of dropping it
                print(f"  (kept {database.url})")
                database.keep = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres,mysql")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200, help="requests per measurement")
    parser.add_argument("--keep", action="store_true", help="keep the seeded databases")
    args = parser.parse_args(argv)
    ok = True
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        with scratch(engine, "locky-scale", keep=args.keep) as url:
            ok &= run_engine(engine, args, url)
    if not ok:
        print("\nSOME STATEMENTS DO NOT USE AN INDEX (BAD above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
