"""``python -m benchmarks.batch_reads``: the storage's reads of many records at once.

A batch of checks (``POST /v1/internal/authz/check``) reads the roles its group-scoped
checks need in one call, ``storage.members.roles_in(pairs)``, and its users in another,
``storage.users.get_many_by_uuid(uuids)`` (a SCIM page reads its groups so too); the
storage cache answers most of them, so the HTTP benchmarks (``benchmarks.authz_api``)
seldom reach these reads. Here they are called on the Pony storage itself, uncached, on
each engine of ``--engines``, over ``benchmarks.seed``'s world (1,000 users, 500 groups,
10,000 memberships), first on the database as loaded, before any planner statistics
(unless PostgreSQL's autovacuum gathered them meanwhile: it wakes once a minute), then
settled (:func:`benchmarks.seed.settle`):

- roles: batches of 100 ``(user, group)`` pairs, half memberships, half a user and a
  group they are not in; beside it, the same pairs read one ``role_of`` at a time;
- users: batches of 100 uuids; beside it, one ``get_by_uuid`` at a time.

The ratio is what the batch read saves. Every answer is checked against the one-at-a-time
reads.

    python -m benchmarks.batch_reads                      # sqlite, postgres, mysql
    python -m benchmarks.batch_reads --engines postgres --batches 500

CPU is this process's (``time.process_time``: the driver's work, not the database's);
wall is the call's. PostgreSQL and MariaDB come from ``LOCKY_TEST_POSTGRES_URL`` and
``LOCKY_TEST_MYSQL_URL`` (defaults: the local servers of ``.ci/run``), in a scratch
database dropped afterwards.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from locky.settings import Settings

from . import seed
from .storage_scale import SECRET, scratch


def held(storage) -> list[tuple[str, str]]:
    """Every live membership's ``(user_uuid, group_uuid)``."""
    found, after = [], 0
    while True:
        page = storage.members.list(after_id=after, limit=500)
        found += [(m.user_uuid, m.group_uuid) for m in page.items]
        if page.next_after_id is None:
            return found
        after = page.next_after_id


def batches(pairs: list[tuple[str, str]], count: int, rng: random.Random) -> list[list[tuple[str, str]]]:
    groups = sorted({group for _, group in pairs})
    made = []
    for _ in range(count):
        batch = []
        for i in range(100):
            user, group = pairs[rng.randrange(len(pairs))]
            batch.append((user, group) if i % 2 == 0 else (user, groups[rng.randrange(len(groups))]))
        made.append(batch)
    return made


def timed(call, batches_of_pairs) -> tuple[float, float]:
    """CPU and wall µs per batch."""
    cpu, wall = time.process_time(), time.perf_counter()
    for pairs in batches_of_pairs:
        call(pairs)
    n = len(batches_of_pairs)
    return (time.process_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6


def run_engine(engine: str, args) -> list[str]:
    from locky_pony import PonyStorage

    lines = []
    with scratch(engine, "locky-batch-reads") as url:
        settings = Settings.from_mapping({"database_url": url, "jwt_secret": SECRET, "log_requests": False,
                                          "bcrypt_rounds": 4})
        seed.seed(settings, users=1000, groups=500, memberships=10_000, tokens=1, policy_lines=seed.CUSTOM_ROLES,
                  settled=False)
        storage = PonyStorage(settings)
        try:
            rng = random.Random(args.seed)
            pairs = held(storage)
            asked = batches(pairs, args.batches, rng)
            users = sorted({user for user, _ in pairs})
            uuids = [[users[rng.randrange(len(users))] for _ in range(100)] for _ in range(args.batches)]

            def roles_one_by_one(batch):
                return {pair: role for pair in batch if (role := storage.members.role_of(*pair)) is not None}

            def users_one_by_one(batch):
                return {uuid: user for uuid in batch if (user := storage.users.get_by_uuid(uuid)) is not None}

            reads = (("roles", storage.members.roles_in, roles_one_by_one, asked),
                     ("users", storage.users.get_many_by_uuid, users_one_by_one, uuids))
            for _, many, one_by_one, work in reads:
                for batch in work[:10]:
                    assert many(batch) == one_by_one(batch), f"{many.__qualname__} disagrees"
            for state in ("as loaded", "settled"):
                if state == "settled":
                    seed.settle(settings)
                for what, many, one_by_one, work in reads:
                    timed(many, work[:20])  # statements prepared, connections open
                    batch_cpu, batch_wall = timed(many, work)
                    single_cpu, single_wall = timed(one_by_one, work[: max(1, len(work) // 5)])
                    lines.append(f"  {engine:<9} {state:<10} {what:<6} {batch_cpu:9.0f} {batch_wall:9.0f}"
                                 f" {single_cpu:10.0f} {single_wall:10.0f} {single_wall / batch_wall:8.1f}x")
        finally:
            storage.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres,mysql")
    parser.add_argument("--batches", type=int, default=300, help="batches of 100 pairs per measurement")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"roles_in of 100 pairs and get_many_by_uuid of 100 users, uncached, {args.batches} batches;"
          " µs per batch of 100, beside 100 reads of one")
    print(f"  {'engine':<9} {'database':<10} {'read':<6} {'batch CPU':>9} {'wall':>9} {'100 single':>10}"
          f" {'wall':>10} {'saved':>9}")
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        for line in run_engine(engine, args):
            print(line)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
