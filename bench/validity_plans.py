"""The default search's SQL plans before and after migration 0015_validity (issue 26), and what a
search with a validity window (as_of, or a past period in the question) costs beside it.

    python bench/validity_plans.py --size 5000 --queries 40

One embedded PostgreSQL at revision 0014_appends, N synthetic memories bulk-loaded as
bench/search_latency.py loads them, a share of them (`--superseded`) then superseded as remember
would have done it; every statement's plan is logged by auto_explain (EXPLAIN ANALYZE with
buffers, JSON) while the same default searches run through the in-process read path
(`Retriever`, row-level security on). Then the database is migrated to head and the searches
run again. Each statement's plan shape (node types, relations and indexes, nested) is compared
between the two runs, with its median execution time and shared buffers read; the report lists
any statement whose shape changed. Last, the same questions with `as_of` and with "in 2023"
run on the migrated database (their plans are reported too).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from search_latency import AGENT, load, questions, sentence_pool  # bench/search_latency.py

from memora.basics.config import Settings
from memora.db.migrate import upgrade
from memora.db.pool import connect, make_pool
from memora.infra.embedded import EmbeddedPostgres
from memora.nlp.embedding import Embedder
from memora.nlp.temporal import parse_query_range
from memora.retrieval import Retriever, SearchParams

BEFORE = "0014_appends"
AUTO_EXPLAIN = {
    "session_preload_libraries": "auto_explain",
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_analyze": "on",
    "auto_explain.log_buffers": "on",
    "auto_explain.log_format": "json",
    "auto_explain.log_nested_statements": "on",
}


def supersede_some(url: str, share: float, seed: int = 3) -> int:
    """Mark `share` of the agent's memories superseded by a later one, as remember does."""
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT id FROM memory_units WHERE agent_id = %s ORDER BY event_date", (AGENT,)
        ).fetchall()
        ids = [r["id"] for r in rows]
        rng = random.Random(seed)
        chosen = sorted(rng.sample(range(len(ids) - 1), int(share * len(ids))))
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE memory_units SET status = 'superseded', status_reason = 'moved', "
                "superseded_by = %s, status_at = (SELECT event_date FROM memory_units "
                "WHERE id = %s) WHERE id = %s",
                [(ids[i + 1], ids[i + 1], ids[i]) for i in chosen],
            )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE)")
    return len(chosen)


def explain_on(url: str) -> None:
    with connect(url) as conn:
        conn.autocommit = True
        for name, value in AUTO_EXPLAIN.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")


def plans(log: Path, offset: int) -> list[dict[str, Any]]:
    """The auto_explain plans logged after `offset`."""
    text = log.read_text(errors="replace")[offset:]
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (at := text.find("plan:", at)) >= 0:
        start = text.find("{", at)
        try:
            plan, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            at += 5
            continue
        found.append(plan)
        at = end
    return found


def shape(node: dict[str, Any]) -> Any:
    """A plan's shape: node type, relation and index, children; no costs or counts."""
    keys = ("Node Type", "Relation Name", "Index Name", "Join Type", "Strategy")
    return [tuple(node.get(k) for k in keys), [shape(c) for c in node.get("Plans", [])]]


def reads(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def summarise(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per statement (its text, whitespace folded): the plan shapes seen, the median
    execution time and the median shared buffers read."""
    by: dict[str, dict[str, Any]] = defaultdict(lambda: {"shapes": set(), "ms": [], "buf": []})
    for p in found:
        sql = " ".join(p.get("Query Text", "").split())
        if not sql or "pg_reload_conf" in sql or sql.startswith(("SET ", "SELECT set_config")):
            continue
        entry = by[sql]
        entry["shapes"].add(json.dumps(shape(p["Plan"])))
        entry["ms"].append(p["Plan"].get("Actual Total Time", 0.0))
        entry["buf"].append(reads(p["Plan"]))
    return {
        sql: {"shapes": sorted(e["shapes"]), "count": len(e["ms"]),
              "median_ms": round(statistics.median(e["ms"]), 3),
              "median_buffers": statistics.median(e["buf"])}
        for sql, e in by.items()
    }  # fmt: skip


def run(
    settings: Settings, url: str, log: Path, embedder: Embedder, qs: list[str], **extra: Any
) -> tuple[dict[str, dict[str, Any]], float]:
    """The searches (once to warm up, then logged); their plans and median search time. Each
    run starts from the same state: no access counts, tables compacted (VACUUM FULL: the
    migration's backfill rewrites every memory row, which leaves the table and its indexes
    spread over more pages until they are compacted) and analysed; the
    searches' accesses are flushed only when the run ends (`settings`), since hydration's join
    with `memory_access` is planned from that table's current size."""
    with connect(url) as conn:
        conn.autocommit = True
        conn.execute("TRUNCATE memory_access")
        conn.execute("VACUUM (FULL, ANALYZE)")
    pool = make_pool(url, min_size=1, max_size=8, name="bench")
    retriever = Retriever(settings, pool, embedder)
    try:
        for q in qs:
            retriever.search(SearchParams(agent_id=AGENT, query=q, **extra))
        time.sleep(0.5)
        offset = log.stat().st_size
        took = []
        for q in qs:
            started = time.perf_counter()
            retriever.search(SearchParams(agent_id=AGENT, query=q, **extra))
            took.append((time.perf_counter() - started) * 1000)
        time.sleep(1.0)  # the log is written by the server
        return summarise(plans(log, offset)), round(statistics.median(took), 2)
    finally:
        retriever.close()
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--superseded", type=float, default=0.02)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "validity_plans.json"
    )
    args = parser.parse_args()
    embedder = Embedder(Settings().embedding_model, torch_threads=2)
    data = Path(tempfile.mkdtemp(prefix="memora-validity-"))
    server = EmbeddedPostgres(data / "pg")
    url = server.start()
    log = server.pgdata / "server.log"
    settings = Settings(
        database_url=url, broker_url=None, data_dir=data, llm_base_url=None,
        access_flush_seconds=3600,
    )  # fmt: skip
    try:
        upgrade(url, 384, BEFORE)
        load(url, args.size, embedder, sentence_pool(random.Random(7), 3000), pair=True)
        superseded = supersede_some(url, args.superseded)
        explain_on(url)
        # the default search: questions that name no time (one naming a past period reads the
        # validity columns, which 0014 lacks; it is measured last, as `in_2023`)
        now = datetime.now(UTC)
        qs = [q for q in questions(3 * args.queries) if parse_query_range(q, now) is None]
        qs = qs[: args.queries]
        before, before_ms = run(settings, url, log, embedder, qs)
        upgrade(url, 384)
        after, after_ms = run(settings, url, log, embedder, qs)
        as_of = datetime(2023, 9, 1, tzinfo=UTC)
        windowed, windowed_ms = run(settings, url, log, embedder, qs, as_of=as_of)
        scoped_qs = [f"{q.rstrip('?')} in 2023?" for q in qs]
        scoped, scoped_ms = run(settings, url, log, embedder, scoped_qs)
    finally:
        server.stop(quiet=True)
    changed = {
        sql: {"before": before[sql]["shapes"], "after": after.get(sql, {}).get("shapes")}
        for sql in before
        if before[sql]["shapes"] != after.get(sql, {}).get("shapes")
    }
    report = {
        "size": args.size,
        "queries": args.queries,
        "superseded": superseded,
        "statements": len(before),
        "statements_after": len(after),
        "plans_changed": changed,
        "new_statements_after": sorted(set(after) - set(before)),
        "median_search_ms": {
            "before": before_ms,
            "after": after_ms,
            "as_of": windowed_ms,
            "in_2023": scoped_ms,
        },
        "per_statement": {
            sql[:160]: {
                "before_ms": before[sql]["median_ms"],
                "after_ms": after.get(sql, {}).get("median_ms"),
                "before_buffers": before[sql]["median_buffers"],
                "after_buffers": after.get(sql, {}).get("median_buffers"),
            }
            for sql in before
        },
        "windowed_only": {sql[:160]: v for sql, v in windowed.items() if sql not in after},
        "scoped_only": {sql[:160]: v for sql, v in scoped.items() if sql not in after},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    shown = ("size", "superseded", "statements", "statements_after", "median_search_ms")
    print(json.dumps({k: report[k] for k in shown}, indent=2))
    print(f"plans changed: {len(changed)}; new statements: {len(report['new_statements_after'])}")


if __name__ == "__main__":
    main()
