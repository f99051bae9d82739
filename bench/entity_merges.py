"""Merge precision and recall of entity resolution on labelled cases (issue 31, item 5).

Each line of the data file is one case: memories an agent stored before (`history`), then memory
`a`, then memory `b`, each `{"text", "mentions": [[name, type], ...]}`, and whether the first
mention of `b` must resolve to the same entity as the first mention of `a` (`"expect": "merge"`)
or must not (`"apart"`). Every case is a fresh agent; the memories are stored one a day (history,
a, b) and resolved one at a time by the real resolution (memora.entities.resolution) on an
embedded PostgreSQL, their mentions first cleaned as the entities stage cleans them.

    PYTHONPATH=shared:. python bench/entity_merges.py [--data FILE] [--verbose]

Precision: the merges made that were labelled merge; recall: the labelled merges made.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from memora.basics.config import Settings
from memora.db.migrate import upgrade
from memora.db.pool import make_pool
from memora.entities.resolution import ResolutionWeights, UnitMentions, resolve
from memora.extraction.base import Fact, Mention
from memora.extraction.cleaning import SpeakerNames, clean_mentions
from memora.infra.embedded import EmbeddedPostgres
from memora.store.units import insert_facts

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


def _store(conn: Any, agent: str, memory: dict[str, Any], day: int, w: ResolutionWeights) -> UUID:
    """Store and resolve one memory; the entity of its first mention."""
    when = T0 + timedelta(days=day)
    (unit,) = insert_facts(conn, agent, None, [Fact(0, 0, memory["text"], "world", when, when)])
    mentions = clean_mentions([Mention(n, t) for n, t in memory["mentions"]], SpeakerNames())
    result = resolve(conn, agent, [UnitMentions(unit, when, mentions, memory["text"])], w)
    first = clean_mentions([Mention(*memory["mentions"][0])], SpeakerNames())[0].name
    return next(e for _, e, name in result.links if name == first)


def run_case(pool: Any, case: dict[str, Any], w: ResolutionWeights) -> bool:
    """Whether the case's `b` resolved to the entity of its `a`."""
    agent = f"merges-{case['id']}"
    with pool.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent,))
    for day, memory in enumerate(case["history"]):
        with pool.connection() as conn, conn.transaction():
            _store(conn, agent, memory, day, w)
    days = len(case["history"])
    with pool.connection() as conn, conn.transaction():
        a = _store(conn, agent, case["a"], days, w)
    with pool.connection() as conn, conn.transaction():
        b = _store(conn, agent, case["b"], days + 1, w)
    return a == b


def score(cases: list[dict[str, Any]], merged: dict[str, bool]) -> dict[str, Any]:
    tp = sum(merged[c["id"]] and c["expect"] == "merge" for c in cases)
    made = sum(merged.values())
    wanted = sum(c["expect"] == "merge" for c in cases)
    wrong = [c["id"] for c in cases if merged[c["id"]] != (c["expect"] == "merge")]
    by_kind: Counter[str] = Counter(c["kind"] for c in cases)
    right_by_kind: Counter[str] = Counter(
        c["kind"] for c in cases if merged[c["id"]] == (c["expect"] == "merge")
    )
    return {
        "cases": len(cases),
        "must_merge": wanted,
        "merges_made": made,
        "precision": round(tp / made, 3) if made else 0.0,
        "recall": round(tp / wanted, 3) if wanted else 0.0,
        "right_by_kind": {k: f"{right_by_kind[k]}/{n}" for k, n in sorted(by_kind.items())},
        "wrong": wrong,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="bench/data/entity_merges.jsonl")
    args = ap.parse_args()
    lines = Path(args.data).read_text().splitlines()
    cases = [json.loads(line) for line in lines if line.strip()]
    weights = ResolutionWeights.from_settings(Settings())
    with tempfile.TemporaryDirectory(prefix="entity-merges-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg")
        url = server.start()
        try:
            upgrade(url, 384)
            pool = make_pool(url, min_size=1, max_size=2, name="entity-merges")
            merged = {c["id"]: run_case(pool, c, weights) for c in cases}
            pool.close()
        finally:
            server.stop(quiet=True)
    json.dump(score(cases, merged), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
