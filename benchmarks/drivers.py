"""``python -m benchmarks.drivers``: psycopg2 against psycopg 3 on Locky's hottest
statement, the read of a user by id, on one PostgreSQL server.

Pony ORM speaks psycopg2 only, so Locky's entity layer needs it; the question is
whether the plain-SQL reads (``locky_pony/reader.py``) should move to psycopg 3 and
``psycopg_pool``. Each way runs the same statement on the same rows, in one process:

- ``psycopg2 plain``: client-side parameters, one round trip (``POOLER=transaction``);
- ``psycopg2 PREPARE``: SQL ``PREPARE`` once per connection, then ``EXECUTE`` (Locky's
  default);
- ``psycopg3 plain``: server-side parameters, unnamed statement (``prepare_threshold=None``);
- ``psycopg3 prepared``: protocol-level prepared statement (``prepare_threshold=0``;
  what PgBouncer >= 1.21 can track in transaction mode);
- each of them from ``--threads`` threads sharing ``--threads`` connections
  (``psycopg_pool.ConnectionPool`` for psycopg 3, Locky's ``BoundedPool`` for psycopg2).

Needs ``pip install 'psycopg[binary]' psycopg-pool`` (not a dependency of Locky).
Prints microseconds per statement (one thread) and statements per second (threads).
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg2

from locky.testing.databases import run_sql

from .load import in_threads

ROWS = 1000
SQL = "SELECT id, uuid, name, email, created_at FROM bench_users WHERE id = {} AND deleted = 0"


def seed(url: str) -> None:
    run_sql(url, "DROP TABLE IF EXISTS bench_users")
    run_sql(url, "CREATE TABLE bench_users (id bigserial PRIMARY KEY, uuid text NOT NULL, name text NOT NULL,"
                 " email text NOT NULL, created_at timestamp NOT NULL DEFAULT now(), deleted int NOT NULL DEFAULT 0)")
    run_sql(url, f"INSERT INTO bench_users (uuid, name, email) SELECT md5(i::text), 'user ' || i,"
                 f" 'u' || i || '@example.com' FROM generate_series(1, {ROWS}) AS i")


class Psycopg2Plain:
    def __init__(self, url):
        self.connection = psycopg2.connect(url)
        self.connection.autocommit = True
        self.cursor = self.connection.cursor()

    def read(self, id):
        self.cursor.execute(SQL.format("%s"), (id,))
        return self.cursor.fetchone()


class Psycopg2Prepared(Psycopg2Plain):
    def __init__(self, url):
        super().__init__(url)
        self.cursor.execute(f"PREPARE bench_read (bigint) AS {SQL.format('$1')}")

    def read(self, id):
        self.cursor.execute("EXECUTE bench_read (%s)", (id,))
        return self.cursor.fetchone()


class Psycopg3:
    def __init__(self, url, prepare: bool):
        import psycopg

        self.connection = psycopg.connect(url, autocommit=True, prepare_threshold=0 if prepare else None)
        self.prepare = prepare

    def read(self, id):
        return self.connection.execute(SQL.format("%s"), (id,), prepare=self.prepare).fetchone()


WAYS = {
    "psycopg2 plain": Psycopg2Plain,
    "psycopg2 PREPARE": Psycopg2Prepared,
    "psycopg3 plain": lambda url: Psycopg3(url, prepare=False),
    "psycopg3 prepared": lambda url: Psycopg3(url, prepare=True),
}


def one_thread(way, url: str, statements: int) -> float:
    """Microseconds per statement."""
    reader = WAYS[way](url)
    for id in range(1, 200):
        reader.read(id)
    started = time.perf_counter()
    for n in range(statements):
        assert reader.read(n % ROWS + 1) is not None
    elapsed = time.perf_counter() - started
    reader.connection.close()
    return elapsed / statements * 1e6


def threads_pooled(way, url: str, threads: int, seconds: float) -> float:
    """Statements per second from ``threads`` threads over a shared pool of as many."""
    readers = [WAYS[way](url) for _ in range(threads)]
    if way.startswith("psycopg3"):
        from psycopg_pool import ConnectionPool

        prepare = way.endswith("prepared")
        pool = ConnectionPool(url, min_size=threads, max_size=threads, open=True,
                              kwargs={"autocommit": True, "prepare_threshold": 0 if prepare else None})

        def read(id):
            with pool.connection() as connection:
                return connection.execute(SQL.format("%s"), (id,), prepare=prepare).fetchone()
    else:
        from locky_pony.pool import BoundedPool

        idle = list(readers)
        pool = BoundedPool(lambda: idle.pop().connection, threads, 5, 5)
        by_connection = {reader.connection: reader for reader in readers}

        def read(id):
            connection, _ = pool.connect()
            try:
                return by_connection[connection].read(id)
            finally:
                pool.put_back(connection)
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def work(number):
        n = number
        while time.monotonic() < stop:
            read(n % ROWS + 1)
            n += threads
            counts[number] += 1

    elapsed = in_threads(work, threads)
    if way.startswith("psycopg3"):
        pool.close()
    for reader in readers:
        reader.connection.close()
    return sum(counts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drivers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--statements", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    seed(args.url)
    try:
        single = {way: [] for way in WAYS}
        pooled = {way: [] for way in WAYS}
        for _ in range(args.rounds):  # interleaved, so that the machine's load falls on all alike
            for way in WAYS:
                single[way].append(one_thread(way, args.url, args.statements))
                pooled[way].append(threads_pooled(way, args.url, args.threads, args.seconds))
        base = statistics.median(single["psycopg2 PREPARE"])
        print(f"{'way':<20} {'µs/statement':>13} {'vs Locky':>9} {f'{args.threads} threads, stmt/s':>20}")
        for way in WAYS:
            us = statistics.median(single[way])
            print(f"{way:<20} {us:>13.1f} {base / us:>8.2f}x {statistics.median(pooled[way]):>20,.0f}")
        print(f"(median of {args.rounds} interleaved rounds; 'vs Locky': speed relative to psycopg2 PREPARE)")
    finally:
        run_sql(args.url, "DROP TABLE IF EXISTS bench_users")


if __name__ == "__main__":
    main()
