"""The agents' held links (`retrieval.caches.agent_links`) through the removals a live chat makes
(issue 29): what a search pays to bring them up to date, and whether they stay held.

    python bench/held_links_changes.py --size 100000 --rounds 5

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), under row-level security: the agent's links read whole (timed),
then `--calls` searches' refreshes with nothing changed (the cost every search pays), then
`--rounds` rounds of one change each of the kinds below, committed as the write path commits
them, each followed by one search's refresh: its time, and whether the held links were taken
in place or dropped (the searches then read PostgreSQL until the links are read whole again,
timed too). Every change is undone at the end, so the guard's data stays as it was.

- superseded: a memory's status set to `superseded` (a changed fact);
- forgotten: a memory's status set to `forgotten`;
- links deleted: one memory's links deleted (as a merge or a delete does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py: the agent
from compare import DATA_ROOT, guard_database  # bench/compare.py: the guard's data

from memora.db.pool import make_pool
from memora.retrieval.caches.agent_links import HeldLinks

TENANT = "default"


def _refresh(held: HeldLinks, pool: Any) -> tuple[Any, float]:
    with pool.tenant_connection(TENANT, autocommit=True) as conn:
        started = time.perf_counter()
        found = held.current(conn, TENANT, bench.AGENT)
        return found, (time.perf_counter() - started) * 1000


def _held(held: HeldLinks, pool: Any) -> tuple[Any, float]:
    """The agent's links once held, and how long it took from now (a whole read)."""
    started = time.perf_counter()
    while True:
        found, _ = _refresh(held, pool)
        if found is not None and not held.reading:
            return found, (time.perf_counter() - started) * 1000
        time.sleep(0.02)


def measure(url: str, rounds: int, calls: int) -> None:
    pool = make_pool(url, min_size=1, max_size=3, name="bench", row_security=True)
    held = HeldLinks(pool, 1 << 30, 3600)
    undo: list[tuple[str, tuple[Any, ...]]] = []
    try:
        first, ms = _held(held, pool)
        print(f"whole read: {ms:.0f} ms, {len(first.ids)} units, {len(first.targets)} links")
        quiet = [_refresh(held, pool)[1] for _ in range(calls)]
        print(f"refresh, nothing changed: median {statistics.median(quiet):.3f} ms, "
              f"p95 {sorted(quiet)[int(0.95 * len(quiet))]:.3f} ms over {calls}")  # fmt: skip
        with pool.tenant_connection(TENANT) as conn:
            rows = conn.execute(
                "SELECT u.id::text AS id FROM memory_units u WHERE u.agent_id = %s "
                "AND u.status = 'active' AND EXISTS (SELECT 1 FROM memory_links l "
                "WHERE l.from_unit = u.id) ORDER BY u.id LIMIT %s",
                (bench.AGENT, 3 * rounds),
            ).fetchall()
        units = [r["id"] for r in rows]
        for i in range(rounds):
            for kind, unit in zip(("superseded", "forgotten", "links deleted"),
                                  units[3 * i : 3 * i + 3], strict=True):  # fmt: skip
                with pool.tenant_connection(TENANT) as conn:
                    if kind == "links deleted":
                        links = conn.execute(
                            "DELETE FROM memory_links WHERE from_unit = %s "
                            "RETURNING from_unit, to_unit, link_type, weight",
                            (unit,),
                        ).fetchall()
                        undo += [(
                            "INSERT INTO memory_links (from_unit, to_unit, link_type, weight) "
                            "VALUES (%s, %s, %s, %s)",
                            (r["from_unit"], r["to_unit"], r["link_type"], r["weight"]),
                        ) for r in links]  # fmt: skip
                    else:
                        conn.execute(
                            "UPDATE memory_units SET status = %s WHERE id = %s", (kind, unit)
                        )
                        undo.append(
                            ("UPDATE memory_units SET status = 'active' WHERE id = %s", (unit,))
                        )
                    conn.commit()
                found, ms = _refresh(held, pool)
                line = f"round {i + 1}, {kind}: refresh {ms:.2f} ms, "
                if found is first:
                    print(line + "taken in place", flush=True)
                else:  # dropped: the searches read PostgreSQL until the links are held again
                    first, whole = _held(held, pool)
                    print(line + f"dropped: PostgreSQL read for {whole:.0f} ms", flush=True)
    finally:
        with pool.tenant_connection(TENANT) as conn:
            for statement, params in undo:
                conn.execute(statement, params)
            conn.commit()
        held.close()
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--data-root", default=DATA_ROOT)
    args = parser.parse_args()
    with guard_database(args.size, args.data_root) as url:
        measure(url, args.rounds, args.calls)


if __name__ == "__main__":
    main()
