"""``benchmarks/seed.py`` leaves a seeded database *settled*, its planner statistics
gathered as the server gathers them soon after a load (docs/benchmarks.md): the state
the benchmarks' figures are meant for, on every engine. Not a timing assertion."""

from __future__ import annotations

import sqlite3

from locky.settings import Settings
from locky.testing.databases import engine, run_sql
from support.benchmark_modules import benchmark_module


def statistics_of_memberships(database_url: str, settings: Settings) -> int:
    """How many rows the planner's statistics give the memberships table (0: none)."""
    kind = engine(database_url)
    if kind == "sqlite":
        connection = sqlite3.connect(settings.sqlite_path)
        try:
            rows = connection.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = 'locky_members'").fetchall()
        except sqlite3.OperationalError:  # no statistics table: never analyzed
            return 0
        finally:
            connection.close()
        return max((int(stat.split()[0]) for (stat,) in rows), default=0)
    if kind == "postgres":
        # Set by a manual ANALYZE only (autovacuum's is last_autoanalyze).
        rows = run_sql(database_url, "SELECT n_live_tup FROM pg_stat_user_tables"
                                     " WHERE relname = 'locky_members' AND last_analyze IS NOT NULL")
        return rows[0][0] if rows else 0
    # InnoDB's persistent statistics (ANALYZE TABLE, or its own recalculation soon
    # after a load: the state is the same).
    rows = run_sql(database_url, "SELECT n_rows FROM mysql.innodb_table_stats"
                                 " WHERE database_name = DATABASE() AND table_name = 'locky_members'")
    return int(rows[0][0]) if rows else 0


def test_a_seeded_database_is_settled(database_url):
    settings = Settings.load(environ={}, database_url=database_url, jwt_secret="seed-test-secret-" + "x" * 32,
                             bcrypt_rounds=4)
    seed = benchmark_module("seed")
    seeded = seed.seed(settings, users=30, groups=5, memberships=60, tokens=1)
    assert seeded.memberships == 60 and len(seeded.user_ids) == 30
    assert statistics_of_memberships(database_url, settings) == 60
