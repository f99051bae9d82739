"""Latency of POST /api/search (heuristic reranker, end to end over HTTP, query embedding
included) for one agent holding N memories, bulk-loaded.

    python bench/search_latency.py --sizes 10000 100000
    python bench/search_latency.py --sizes 1000000 --queries 300
    python bench/search_latency.py --sizes 100000 --row-security both

For each size: a fresh embedded PostgreSQL, N synthetic memories bulk-loaded with binary COPY
(texts composed of two sentences from a pool of generated sentences; each embedding is the
normalised sum of its two sentences' real MiniLM embeddings, so neighbourhoods look like real
text's), each memory's mention of its first sentence's person, temporal, entity and semantic
links (≈16 per memory), the HNSW index built after the
load; then the query service in its own process, warmed up, and distinct natural-language
questions sent one at a time. Reports p50/p95/p99 over HTTP and the server's per-stage median
timings from a traced sample.

`--row-security`: the query service confined by row-level security (`on`, the default: its
searches run as `memora_tenant`), not (`off`: as the superuser login), or `both`: two query
services on the same database, one in each mode, each question sent to both one after the
other (which goes first alternates), so that both see the same cache and the same load from
whatever else runs on the machine; reported per mode, with the median of the per-question
ratios on/off.

Every memory carries simulation metadata (issue 12): an episodic line (speaker, turn, one of 20
scenes) or, one in a thousand, a character memory of one of 7 categories. With `--filters`
every question runs unfiltered and with each filter of FILTER_SETS (from a category matching
0.014% of the memories to an episodic type matching 99.9%), one after the other in a rotating
order, and each filter is reported with the median of its per-question ratios to the
unfiltered search.
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


CATEGORIES = ["identity", "background", "communication", "decision_style", "traits", "skills",
              "values"]  # fmt: skip
FILTER_SETS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "category (0.014%)": {"type": "character", "category": "identity"},
    "scene (5%)": {"scene": "scene-7"},
    "speaker (5%)": {"speaker": "Alice"},
    "turn range (1%)": {"type": "episodic", "turn": {"gte": 0, "lt": 1000}},
    "type (99.9%)": {"type": "episodic"},
    "tags any (10%)": {"tags": {"any": ["t3", "t7"]}},
}


def metadata(i: int, speaker: str) -> dict[str, Any]:
    if i % 1000 == 0:
        return {"type": "character", "category": CATEGORIES[(i // 1000) % len(CATEGORIES)]}
    return {"type": "episodic", "category": "dialogue", "speaker": speaker, "turn": i,
            "scene": f"scene-{i % 20}", "tags": [f"t{i % 20}"]}  # fmt: skip


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
                meta = json.dumps(metadata(i, texts[a].split()[0]))
                copy.write_row(
                    (ids[i], AGENT, f"{texts[a]} {texts[b]}", vec / np.linalg.norm(vec),
                     "world", when, when, meta)
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


def wait_ready(base: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{base} not ready after {timeout:.0f}s")


def measure(
    targets: dict[str, tuple[str, dict[str, Any] | None]], qs: list[str], warmup: int
) -> dict[str, Any]:
    """Each question to every target (name → service base URL and filters), one after the
    other, the order rotating from question to question, so that every target sees the same
    cache and the same load from whatever else runs on the machine. Per target: latency
    percentiles, the server's stage medians and, after the first target, the median of the
    per-question ratios to it."""
    names = list(targets)
    latencies: dict[str, list[float]] = {name: [] for name in names}
    stages: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    clients = {base: httpx.Client(base_url=base, timeout=60) for base, _ in targets.values()}
    try:
        for i, q in enumerate(qs):
            traced = i % 10 == 0
            for name in names[i % len(names) :] + names[: i % len(names)]:
                base, filters = targets[name]
                body = {"agent_id": AGENT, "query": q, "trace": traced, "filters": filters}
                started = time.perf_counter()
                response = clients[base].post("/api/search", json=body)
                elapsed = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                if i < warmup:
                    continue
                if traced:
                    stages[name].append(response.json()["trace"]["timings_ms"])
                else:
                    latencies[name].append(elapsed)
    finally:
        for client in clients.values():
            client.close()
    report: dict[str, Any] = {}
    first = names[0]
    for name in names:
        pct = {f"p{p}": round(float(np.percentile(latencies[name], p)), 1) for p in (50, 95, 99)}
        s = stages[name]
        stage = {k: round(statistics.median(x[k] for x in s), 1) for k in s[0]}
        report[name] = {**pct, "searches": len(latencies[name]), "server_stage_median_ms": stage}
        if name != first:
            ratios = [a / b for a, b in zip(latencies[name], latencies[first], strict=True)]
            report[name][f"median_ratio_to_{first}"] = round(statistics.median(ratios), 3)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--row-security", choices=["on", "off", "both"], default="on")
    parser.add_argument(
        "--inactive",
        type=float,
        default=0.0,
        help="share of memories then marked forgotten (they leave every retriever)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "search_latency.json"
    )
    parser.add_argument("--filters", action="store_true", help="also each of FILTER_SETS")
    args = parser.parse_args()  # fmt: skip
    embedder = Embedder(Settings().embedding_model, torch_threads=2)
    qs = questions(args.queries + args.warmup)
    modes = ["on", "off"] if args.row_security == "both" else [args.row_security]
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
            if args.inactive > 0:
                with connect(settings.require_database_url()) as conn:
                    conn.execute(
                        "UPDATE memory_units SET status = 'forgotten', status_at = now() "
                        "WHERE random() < %s",
                        (args.inactive,),
                    )
                    conn.commit()
                    conn.autocommit = True  # what autovacuum would do after such a change
                    conn.execute("VACUUM ANALYZE memory_units")
                    conn.execute("VACUUM ANALYZE memory_search")
            print(f"{n} memories loaded in {time.monotonic() - started:.0f}s")
            stack.extra_env["MEMORA_ROW_SECURITY"] = "true" if modes[0] == "on" else "false"
            stack.start()  # infrastructure is up: this starts the query service only
            bases = {modes[0]: f"http://{settings.host}:{settings.query_port}"}
            if len(modes) == 2:
                port = free_port()
                stack._spawn(
                    "query-off",
                    ["uvicorn", "services.api.query_app:create_app", "--factory", "--host",
                     settings.host, "--port", str(port), "--log-level", "warning"],
                    env={"MEMORA_ROW_SECURITY": "false", "MEMORA_QUERY_PORT": str(port)},
                )  # fmt: skip
                bases["off"] = f"http://{settings.host}:{port}"
            stack.wait_ready()
            for base in bases.values():
                wait_ready(base)
            if args.filters:  # each question with every filter in turn, on the first service
                base = next(iter(bases.values()))
                targets = {name: (base, f) for name, f in FILTER_SETS.items()}
            else:
                targets = {mode: (base, None) for mode, base in reversed(bases.items())}
            result = measure(targets, qs, args.warmup)
            if len(bases) == 2 and not args.filters:
                result["median_ratio_on_off"] = result["on"].pop("median_ratio_to_off")
            elif len(bases) == 1 and not args.filters:
                result = result[modes[0]]
            result["load_average"] = os.getloadavg()
            print(f"{n}: {json.dumps(result)}", flush=True)
        finally:
            stack.stop()
        report[str(n)] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
