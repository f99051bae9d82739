"""Latency of POST /api/search (heuristic reranker, end to end over HTTP, query embedding
included) for one agent holding N memories, bulk-loaded.

    python bench/search_latency.py --sizes 10000 100000
    python bench/search_latency.py --sizes 1000000 --queries 300

For each size: a fresh embedded PostgreSQL, N synthetic memories bulk-loaded with binary COPY
(texts composed of two sentences from a pool of generated sentences; each embedding is the
normalised sum of its two sentences' real MiniLM embeddings, so neighbourhoods look like real
text's), each memory's mention of its first sentence's person, temporal, entity and semantic
links (≈16 per memory), the HNSW index built after the
load; then the query service in its own process, warmed up, and distinct natural-language
questions sent one at a time. Reports p50/p95/p99 over HTTP and the server's per-stage median
timings from a traced sample.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memora.config import Settings
from memora.db.pool import connect
from memora.embedding import Embedder
from memora.infra.embedded import free_port
from services.cli.stack import Stack

AGENT = "bench-agent"
PEOPLE = ["Alice", "Bob", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kai",
          "Lena", "Maya", "Nico", "Omar", "Priya", "Quinn", "Ravi", "Sara", "Tom"]  # fmt: skip
DOING = ["went hiking", "started a pottery class", "signed up for a marathon", "adopted a puppy",
         "visited the museum", "cooked a curry", "fixed the bicycle", "read a novel",
         "planted tomatoes", "learned the guitar", "painted a sunset", "moved apartments",
         "got a promotion", "ran a workshop", "wrote a poem", "booked a flight",
         "played chess", "volunteered at the shelter", "baked sourdough",
         "went camping"]  # fmt: skip
WHERE = ["in Lisbon", "near the lake", "at the community center", "with the kids",
         "downtown", "in Kyoto", "at work", "in the mountains", "at the beach",
         "at home"]  # fmt: skip
FEEL = ["and loved it", "but it rained", "with a friend", "for the first time",
        "after a long week", "to relax", "as a surprise", "on a whim"]  # fmt: skip
QUESTIONS = ["What did {p} do {w}?", "When did {p} go {d}?", "Who {d} {w}?",
             "What does {p} enjoy doing?", "Did {p} ever {d2}?", "What happened {w} last spring?",
             "Tell me about {p}'s {d2} plans", "Where did {p} {d2}?"]  # fmt: skip


def sentence_pool(rng: random.Random, n: int) -> list[str]:
    pool: set[str] = set()
    while len(pool) < n:
        pool.add(
            f"{rng.choice(PEOPLE)} {rng.choice(DOING)} {rng.choice(WHERE)} {rng.choice(FEEL)}."
        )
    return sorted(pool)


def load(url: str, n: int, embedder: Embedder, seed: int = 7) -> None:
    """N memories, links and entities for one agent, then the HNSW index."""
    rng = random.Random(seed)
    texts = sentence_pool(rng, 3000)
    vectors = embedder.embed(texts)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    span = timedelta(days=730).total_seconds()
    ids = [uuid.uuid4() for _ in range(n)]
    firsts = np.empty(n, dtype=np.int64)
    with connect(url) as conn:
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s) ON CONFLICT DO NOTHING", (AGENT,))
        conn.execute("DROP INDEX IF EXISTS idx_memory_units_embedding")
        # a bulk load: foreign-key triggers off for this session (the ids are consistent)
        conn.execute("SET session_replication_role = replica")
        people = {
            p: conn.execute(
                "INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type,"
                " first_seen, last_seen) VALUES (%s, %s, %s, 'PERSON', now(), now()) RETURNING id",
                (AGENT, p, p.lower()),
            ).fetchone()["id"]  # type: ignore[index]
            for p in PEOPLE
        }
        loading = time.monotonic()
        columns = "id, agent_id, text, embedding, fact_type, event_date, mentioned_at, metadata"
        with conn.cursor() as cur, cur.copy(f"COPY memory_units ({columns}) FROM STDIN") as copy:
            for i in range(n):
                a, b = rng.randrange(len(texts)), rng.randrange(len(texts))
                firsts[i] = a
                vec = vectors[a] + 0.6 * vectors[b]
                when = start + timedelta(seconds=span * i / n)
                copy.write_row(
                    (ids[i], AGENT, f"{texts[a]} {texts[b]}", vec / np.linalg.norm(vec),
                     "world", when, when, "{}")
                )  # fmt: skip
        by_person: dict[str, list[int]] = {}
        for i in range(n):
            by_person.setdefault(texts[firsts[i]].split()[0], []).append(i)
        by_sentence: dict[int, list[int]] = {}
        for i in range(n):
            by_sentence.setdefault(int(firsts[i]), []).append(i)
        mention_cols = "unit_id, entity_id, mention"
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY unit_entities ({mention_cols}) FROM STDIN") as copy,
        ):
            for person, members in by_person.items():  # each memory names its first person
                for i in members:
                    copy.write_row((ids[i], people[person], person))
        link_cols = "from_unit, to_unit, link_type, weight, entity_id"
        with conn.cursor() as cur, cur.copy(f"COPY memory_links ({link_cols}) FROM STDIN") as copy:
            for i in range(n):
                for j in range(i + 1, min(n, i + 5)):  # temporal: the next memories in time
                    for x, y in ((i, j), (j, i)):
                        copy.write_row((ids[x], ids[y], "temporal", 0.9, None))
            for person, members in by_person.items():  # entity: nearest mentions in time
                for k, i in enumerate(members):
                    for j in members[k + 1 : k + 4]:
                        for x, y in ((i, j), (j, i)):
                            copy.write_row((ids[x], ids[y], "entity", 1.0, people[person]))
            for members in by_sentence.values():  # semantic: memories sharing a sentence
                for k, i in enumerate(members):
                    for j in members[k + 1 : k + 3]:
                        for x, y in ((i, j), (j, i)):
                            copy.write_row((ids[x], ids[y], "semantic", 0.8, None))
        conn.commit()
        print(f"  rows loaded in {time.monotonic() - loading:.0f}s")
        started = time.monotonic()
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        conn.execute(
            "CREATE INDEX idx_memory_units_embedding ON memory_units "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        conn.execute("ANALYZE")
        conn.commit()
        print(f"  HNSW built in {time.monotonic() - started:.0f}s")


def questions(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < count:
        d = rng.choice(DOING)
        out.add(
            rng.choice(QUESTIONS).format(
                p=rng.choice(PEOPLE), w=rng.choice(WHERE), d=d.split()[0] + " " + d.split()[-1],
                d2=d.split(maxsplit=1)[-1].replace("started ", "start "),
            )
        )  # fmt: skip
    return sorted(out, key=lambda _: rng.random())


def measure(base: str, qs: list[str], warmup: int) -> dict[str, Any]:
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for i, q in enumerate(qs):
            body = {"agent_id": AGENT, "query": q, "trace": i % 10 == 0}
            started = time.perf_counter()
            response = client.post("/api/search", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            if i < warmup:
                continue
            if body["trace"]:
                stages.append(response.json()["trace"]["timings_ms"])
            else:
                latencies.append(elapsed)
    pct = {f"p{p}": round(float(np.percentile(latencies, p)), 1) for p in (50, 95, 99)}
    stage = {k: round(statistics.median(s[k] for s in stages), 1) for k in stages[0]}
    return {**pct, "searches": len(latencies), "server_stage_median_ms": stage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "search_latency.json"
    )
    args = parser.parse_args()  # fmt: skip
    embedder = Embedder(Settings().embedding_model, torch_threads=2)
    qs = questions(args.queries + args.warmup)
    report: dict[str, Any] = {}
    for n in args.sizes:
        settings = Settings(
            data_dir=Path(tempfile.mkdtemp(prefix=f"memora-latency-{n}-")),
            query_port=free_port(),
        )
        stack = Stack(settings, workers={}, with_api=False, with_beat=False,
                      log_dir=settings.data_dir / "logs")  # fmt: skip
        try:
            stack.start_infrastructure()
            started = time.monotonic()
            load(settings.require_database_url(), n, embedder)
            print(f"{n} memories loaded in {time.monotonic() - started:.0f}s")
            stack.start()  # infrastructure is up: this starts the query service only
            stack.wait_ready()
            result = measure(f"http://{settings.host}:{settings.query_port}", qs, args.warmup)
        finally:
            stack.stop()
        report[str(n)] = result
        print(f"{n}: {json.dumps(result)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
