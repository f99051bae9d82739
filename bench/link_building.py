"""The write path's link building by a conversation's length: each statement of
`links.build_links` timed for the last batch of new turns, in a conversation whose turns have
their own times (30 s apart) and in one whose turns share one (an archive without per-message
times, stored at the document's time).

    python bench/link_building.py --lengths 500 1000 2000 4000 --batch 20

On a fresh embedded PostgreSQL with the schema, no services; random unit vectors, no entities.
The temporal links' statement orders each new turn's window by time, then by nearness in its
conversation: with times, PostgreSQL sorts only the turns that share one (an incremental sort
over the date index); without, every turn of the conversation shares it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memora.basics.config import Settings
from memora.db.migrate import upgrade
from memora.infra.embedded import EmbeddedPostgres
from memora.store import links

START = datetime(2024, 1, 1, tzinfo=UTC)
DIM = 384


def statement_timer(conn: psycopg.Connection[Any]) -> dict[str, float]:
    """Times each statement `conn` executes into the returned dict, by the link type it
    builds (the statement's text names it) or its first words."""
    times: dict[str, float] = {}
    execute = conn.execute

    def timed(query: Any, params: Any = None, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = execute(query, params, **kwargs)
        text = " ".join(str(query).split())
        kind = next((t for t in ("temporal", "semantic", "entity") if f"'{t}'::text" in text), "")
        name = kind or ("causal" if "r.relation" in text else text[:24])
        times[name] = times.get(name, 0.0) + (time.perf_counter() - started) * 1000
        return result

    conn.execute = timed  # type: ignore[method-assign]
    return times


def measure(url: str, lengths: list[int], batch: int, timed_turns: bool) -> None:
    rng = np.random.default_rng(1)
    settings = links.LinkSettings.from_settings(Settings())
    agent = f"bench-{'timed' if timed_turns else 'untimed'}"
    with psycopg.connect(url, row_factory=dict_row) as conn:
        register_vector(conn)
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent,))
        document = conn.execute(
            "INSERT INTO documents (agent_id, document_id, content_hash, items, item_count)"
            " VALUES (%s, 'chat', 'x', %s, 0) RETURNING id",
            (agent, Jsonb([])),
        ).fetchone()["id"]  # type: ignore[index]
        turns: list[uuid.UUID] = []
        for length in lengths:
            while len(turns) < length:
                n, unit = len(turns), uuid.uuid4()
                vector = rng.standard_normal(DIM).astype(np.float32)
                when = START + timedelta(seconds=30 * n) if timed_turns else START
                conn.execute(
                    "INSERT INTO memory_units (id, agent_id, document_pk, item_index, seq, text,"
                    " embedding, fact_type, event_date, mentioned_at)"
                    " VALUES (%s, %s, %s, %s, 0, 'turn', %s, 'world', %s, %s)",
                    (unit, agent, document, n, vector / np.linalg.norm(vector), when, when),
                )
                turns.append(unit)
            conn.commit()
            conn.execute("ANALYZE memory_units")
            times = statement_timer(conn)
            started = time.perf_counter()
            links.build_links(conn, turns[-batch:], settings)
            total = (time.perf_counter() - started) * 1000
            del conn.execute  # the timer's
            conn.rollback()  # the next length links the same kind of batch
            parts = ", ".join(f"{k} {v:.1f}" for k, v in times.items() if v >= 0.5)
            kind = "own times" if timed_turns else "one time"
            print(f"{kind:9s} {length:6d} turns: {batch} new turns linked in {total:6.1f} ms"
                  f" ({total / batch:.2f} a turn; {parts})", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument("--batch", type=int, default=20, help="new turns linked at each length")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg")
        url = server.start()
        try:
            upgrade(url, DIM)
            for timed_turns in (True, False):
                measure(url, sorted(args.lengths), args.batch, timed_turns)
        finally:
            server.stop(quiet=True)


if __name__ == "__main__":
    main()
