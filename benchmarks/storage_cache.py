"""``python -m benchmarks.storage_cache``: what the storage cache (``locky.cache.Cache``)
costs per entry kept, in a cache with room and in a full one.

A full cache makes room for each new entry by dropping its oldest. A worker serving more
distinct records, sessions and memberships than ``max_entries`` (100,000 by default)
keeps its cache full, so every read it misses pays for that drop; the figure beside
it is the same work in a cache with room, and their ratio says whether making room
costs more than keeping. Also the cost of a hit, by the same key shapes the storage
uses (``("user-uuid", uuid)``, ``("role", user_uuid, group_uuid)``).

    python -m benchmarks.storage_cache
    python -m benchmarks.storage_cache --entries 100000 --puts 200000

One process, no database: ``time.perf_counter`` over ``--puts`` calls, best of
``--rounds``.
"""

from __future__ import annotations

import argparse
import time
import uuid

from locky.cache import MISSING, Cache


def _keys(n: int, start: int = 0) -> list[tuple]:
    """Key shapes of the storage cache: a user by uuid, a role in a group."""
    return [("user-uuid", str(uuid.UUID(int=i))) if i % 2 else ("role", str(uuid.UUID(int=i)), "g")
            for i in range(start, start + n)]


def _per_put(cache: Cache, keys: list[tuple]) -> float:
    put, token = cache.put, cache.token()
    started = time.perf_counter()
    for key in keys:
        put(key, key, token, tags=("members",))
    return (time.perf_counter() - started) / len(keys)


def measure(entries: int, puts: int, rounds: int) -> dict[str, float]:
    """Seconds per call: a put into a cache with room, into a full one, and a hit."""
    with_room, full, hit = [], [], []
    for _ in range(rounds):
        roomy = Cache(max_age=3600, fresh=lambda: True, max_entries=entries + puts)
        with_room.append(_per_put(roomy, _keys(puts)))
        packed = Cache(max_age=3600, fresh=lambda: True, max_entries=entries)
        _per_put(packed, _keys(entries))
        full.append(_per_put(packed, _keys(puts, start=entries)))  # each drops the oldest
        kept = _keys(min(puts, entries), start=entries + puts - min(puts, entries))
        get = packed.get
        started = time.perf_counter()
        for key in kept:
            if get(key) is MISSING:
                raise SystemExit(f"{key} was dropped: the newest entries must stay")
        hit.append((time.perf_counter() - started) / len(kept))
    return {"put, with room": min(with_room), "put, full": min(full), "get, hit": min(hit)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000, help="max_entries of the full cache")
    parser.add_argument("--puts", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    figures = measure(args.entries, args.puts, args.rounds)
    print(f"storage cache, {args.entries:,} entries, {args.puts:,} calls, best of {args.rounds}")
    for name, seconds in figures.items():
        print(f"  {name:<16} {seconds * 1e6:8.2f} µs")
    print(f"  full / with room {figures['put, full'] / figures['put, with room']:8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
