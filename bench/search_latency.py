"""Latency of POST /api/search (end to end over HTTP, query embedding included) for one agent
holding N memories, bulk-loaded.

    python bench/search_latency.py --sizes 10000 100000
    python bench/search_latency.py --sizes 1000000 --queries 300
    python bench/search_latency.py --sizes 100000 --row-security both
    python bench/search_latency.py --sizes 100000 --texts locomo --reranker cross-encoder \
        --candidates 30 --trace-every 1
    python bench/search_latency.py --sizes 10000 --texts locomo --reranker cross-encoder \
        --cross-encoder-backend onnx auto --candidates 100 --trace-every 1   # fp32 beside int8

For each size: a fresh embedded PostgreSQL, N synthetic memories bulk-loaded with binary COPY
(texts composed of two sentences from a pool of generated sentences; each embedding is the
normalised sum of its two sentences' real MiniLM embeddings, so neighbourhoods look like real
text's), each memory's mention of its first sentence's person, temporal, entity and semantic
links (≈16 per memory), the HNSW index built after the load, then VACUUM (ANALYZE) as
autovacuum would; then the query service in its own process, warmed up (then the access
counts its searches recorded analysed, as autovacuum would soon: `common.analyze_accesses`),
and distinct natural-language questions sent one at a time. Reports p50/p95/p99 over HTTP and the
server's per-stage and per-retriever median timings from a traced sample.

`--row-security`: the query service confined by row-level security (`on`, the default: its
searches run as `memora_tenant`), not (`off`: as the superuser login), or `both`: two query
services on the same database, one in each mode, each question sent to both one after the
other (which goes first alternates), so that both see the same cache and the same load from
whatever else runs on the machine; reported per mode, with the median of the per-question
ratios on/off.

Every memory carries simulation metadata (issue 12): an episodic line (speaker, turn, one of 20
scenes) or, one in a thousand, a character memory of one of 7 categories. With `--filters`
every question runs unfiltered and with each filter of FILTER_SETS (from a category matching
0.014% of the memories to an episodic type matching 99.9%, and a month of the two years),
one after the other in a rotating order, and each filter is reported with the median of its
per-question ratios to the unfiltered search; `--filters NAME ...` runs only those beside the
unfiltered search (more questions in the same time, for one filter's ratio).

`--conversation-turns N`: the memories are the turns of conversations N long, in order, a
document each (as a chat platform's conversations are stored), so that what reads a unit's
neighbours in its document (hydration's context signal) meets documents of that length; by
default they belong to none.

`--texts locomo`: each memory is one LoCoMo dev turn (`Speaker: text`; its embedding that
turn's, blended with another's like the synthetic ones) and the questions are LoCoMo's, so a
cross-encoder reranks candidates of real turn length. `--reranker cross-encoder` searches
with it (by default a MiniLM-L6-shaped model with random weights, see bench/cross_encoder.py,
preloaded), `--candidates` sets MEMORA_RERANK_CANDIDATES, `--clients` sends from that many
concurrent clients, and the report adds the traced searches' rerank stage (p50, p95) and the
backend the trace names (`reranker_backend`: what `auto` chose). Several
`--cross-encoder-backend` values start one query service per value on the same database, and
each question goes to every one of them in a rotating order, as `--row-security both` does: the
backends are timed under the same load (`make bench-cross-encoder-service`).
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
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import analyze_accesses, api_client, wait_ready  # bench/common.py
from cross_encoder import LOCOMO, minilm_shaped_model  # bench/cross_encoder.py
from psycopg import Connection

from memora.basics.config import Settings
from memora.db.pool import connect
from memora.infra.embedded import free_port
from memora.nlp.embedding import Embedder
from memora.retrieval.arms import semantic
from memora.retrieval.filters import Filters, compile_filters
from memora.retrieval.types import SearchParams, SearchScope
from memora.store import terms
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
    "time (4%)": {"time": {"start": "2023-06-01T00:00:00Z", "end": "2023-07-01T00:00:00Z"}},
}


def filter_scope(name: str, query: str = "x") -> SearchScope:
    """The bench agent's search scope under the filter FILTER_SETS[name]."""
    filters = FILTER_SETS[name]
    chosen = Filters.model_validate(filters) if filters is not None else None
    return SearchScope.of(SearchParams(agent_id=AGENT, query=query, filters=chosen))


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


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    """The LoCoMo file's turns (`Speaker: text`) and its questions."""
    samples = json.loads(path.read_text())
    turns = [f"{t['speaker']}: {t['text']}" for s in samples
             for k, v in s["conversation"].items() if k.startswith("session_")
             and isinstance(v, list) for t in v]  # fmt: skip
    return turns, [qa["question"] for s in samples for qa in s["qa"]]


def load(
    url: str, n: int, embedder: Embedder, texts: list[str], pair: bool, seed: int = 7,
    turns: int = 0,
) -> None:  # fmt: skip
    """N memories, links and entities for one agent, then the HNSW index. Each memory's text
    is two sentences of `texts` (`pair`) or one, and its embedding blends two. With `turns`,
    the memories are the turns of conversations that long, in order (a document each)."""
    vectors = embedder.embed(texts)
    with connect(url) as conn:
        conn.execute("DROP INDEX IF EXISTS idx_memory_vectors_embedding")
        loading = time.monotonic()
        load_agent(conn, AGENT, n, vectors, texts, pair, seed=seed, turns=turns)
        conn.commit()
        print(f"  rows loaded in {time.monotonic() - loading:.0f}s")
        finish_load(conn, [AGENT])


def load_agent(
    conn: Connection[Any], agent: str, n: int, vectors: np.ndarray, texts: list[str],
    pair: bool, *, seed: int = 7, turns: int = 0,
) -> None:  # fmt: skip
    """`agent`'s rows (`load`): its memories, mentions, entities and links, by COPY, with the
    foreign-key triggers off for the session (the ids are consistent); `vectors` are the
    embeddings of `texts`. The caller commits, then builds the index (`finish_load`)."""
    rng = random.Random(seed)
    names = sorted({t.split()[0].rstrip(":") for t in texts})
    start = datetime(2023, 1, 1, tzinfo=UTC)
    span = timedelta(days=730).total_seconds()
    ids = [uuid.uuid4() for _ in range(n)]
    firsts = np.empty(n, dtype=np.int64)
    conn.execute("INSERT INTO agents (agent_id) VALUES (%s) ON CONFLICT DO NOTHING", (agent,))
    conn.execute("SET session_replication_role = replica")
    people = {
        p: conn.execute(
            "INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type,"
            " first_seen, last_seen) VALUES (%s, %s, %s, 'PERSON', now(), now()) RETURNING id",
            (agent, p, p.lower()),
        ).fetchone()["id"]  # type: ignore[index]
        for p in names
    }
    chats = [
        conn.execute(
            "INSERT INTO documents (agent_id, document_id, content_hash, items, item_count)"
            " VALUES (%s, %s, '', '[]', %s) RETURNING id",
            (agent, f"chat-{c}", turns),
        ).fetchone()["id"]  # type: ignore[index]
        for c in range(-(-n // turns) if turns else 0)
    ]
    columns = (
        "id, agent_id, text, embedding, fact_type, event_date, mentioned_at, metadata,"
        " document_pk, item_index"
    )
    with conn.cursor() as cur, cur.copy(f"COPY memory_units ({columns}) FROM STDIN") as copy:
        for i in range(n):
            a, b = rng.randrange(len(texts)), rng.randrange(len(texts))
            firsts[i] = a
            vec = vectors[a] + 0.6 * vectors[b]
            when = start + timedelta(seconds=span * i / n)
            meta = json.dumps(metadata(i, texts[a].split()[0].rstrip(":")))
            text = f"{texts[a]} {texts[b]}" if pair else texts[a]
            chat, turn = (chats[i // turns], i % turns) if turns else (None, 0)
            copy.write_row(
                (ids[i], agent, text, vec / np.linalg.norm(vec), "world", when, when, meta,
                 chat, turn)
            )  # fmt: skip
    by_person: dict[str, list[int]] = {}
    for i in range(n):
        by_person.setdefault(texts[firsts[i]].split()[0].rstrip(":"), []).append(i)
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
    copy_links(conn, ids, people, by_person, by_sentence)


def copy_links(
    conn: Connection[Any], ids: list[uuid.UUID], people: dict[str, Any],
    by_person: dict[str, list[int]], by_sentence: dict[int, list[int]],
) -> None:  # fmt: skip
    """≈16 links a memory: temporal to the next four in time, entity to the nearest three
    mentions of its person, semantic to the next two sharing its first sentence; both ways."""
    link_cols = "from_unit, to_unit, link_type, weight, entity_id"
    with conn.cursor() as cur, cur.copy(f"COPY memory_links ({link_cols}) FROM STDIN") as copy:
        for i in range(len(ids)):
            for j in range(i + 1, min(len(ids), i + 5)):  # temporal: the next memories in time
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


def finish_load(conn: Connection[Any], agents: list[str]) -> None:
    """After the rows: the `term_counts` job's work for `agents`, the HNSW index, and what
    autovacuum does to freshly loaded tables (visibility map, hint bits, statistics), done
    before measuring rather than during it."""
    for agent in agents:
        while terms.compact(conn, agent, 50_000)[0]:
            conn.commit()
    started = time.monotonic()
    conn.execute("SET maintenance_work_mem = '2GB'")
    conn.execute("SET max_parallel_maintenance_workers = 1")
    conn.execute(
        "CREATE INDEX idx_memory_vectors_embedding ON memory_vectors "
        "USING hnsw (embedding halfvec_cosine_ops)"
    )
    conn.commit()
    print(f"  HNSW built in {time.monotonic() - started:.0f}s")
    conn.autocommit = True
    conn.execute("VACUUM (ANALYZE)")


def filtered_recall(url: str, embedder: Embedder, qs: list[str]) -> dict[str, float]:
    """Per filter of FILTER_SETS, the semantic retriever's recall (as the query service runs
    it, under row-level security) against the true ranking: the same filter's units ranked
    by their float4 embeddings in `memory_units`, every one of them read."""
    settings = Settings()
    vectors = embedder.embed(qs)
    types = ("world", "experience", "opinion", "observation")
    out: dict[str, float] = {}
    with connect(url) as conn:
        conn.execute("SELECT set_config('role', 'memora_tenant', false), "
                     "set_config('memora.tenant', 'default', false)")  # fmt: skip
        for name, flat in FILTER_SETS.items():
            filters = Filters.model_validate(flat) if flat else None
            where = compile_filters(filters, "m")
            scope = SearchScope("default", AGENT, types, where)
            found: list[float] = []
            for vector in vectors:
                ranked = semantic.nearest(
                    conn, scope, vector=vector, limit=50, ef_search=100,
                    min_similarity=settings.semantic_min_similarity,
                    exact_max=settings.filter_exact_scan_max,
                )  # fmt: skip
                truth = conn.execute(
                    f"SELECT m.id FROM memory_units m WHERE m.agent_id = %(agent)s "
                    f"AND m.status = 'active' {where.sql} "
                    f"ORDER BY m.embedding <=> %(v)s LIMIT %(n)s",
                    {"agent": AGENT, "v": vector, "n": max(len(ranked), 1), **where.params},
                ).fetchall()
                if ranked:
                    found.append(
                        len({i for i, _ in ranked} & {r["id"] for r in truth}) / len(ranked)
                    )
            out[name] = round(statistics.mean(found), 3) if found else 1.0
            conn.rollback()
    return out


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


def measure(
    targets: dict[str, tuple[str, dict[str, Any] | None]],
    qs: list[str],
    warmup: int,
    *,
    reranker: str = "heuristic",
    trace_every: int = 10,
    clients: int = 1,
    database: str | None = None,
) -> dict[str, Any]:
    """Each question to every target (name → service base URL and filters), one after the
    other, the order rotating (once every `trace_every` questions), so that every target sees
    the same cache and the same load from whatever else runs on the machine; with `clients` > 1 the
    questions split among that many concurrent clients. Every `trace_every`-th search is traced;
    the untraced ones give the latencies (all of them when every search is traced). Per target:
    latency percentiles, the server's stage medians (the rerank stage's p50/p95 with the
    cross-encoder) and, after the first target, the median of the per-question ratios to it.
    `database`: its `memory_access` is analysed after the warm-up, as in use it would be."""
    names = list(targets)
    latencies: dict[str, dict[int, float]] = {name: {} for name in names}
    traces: dict[str, list[dict[str, Any]]] = {name: [] for name in names}

    def send(share: list[tuple[int, str]]) -> None:
        http = {base: api_client(base) for base, _ in targets.values()}
        try:
            for i, q in share:
                traced = i % trace_every == 0
                # the first target of a question meets its cold caches (the keyword index's
                # counts of its terms): the rotation turns once per `trace_every` questions, so
                # the timed (untraced) searches see every target first as often as the others
                turn = (i // trace_every) % len(names)
                for name in names[turn:] + names[:turn]:
                    base, filters = targets[name]
                    body = {"agent_id": AGENT, "query": q, "trace": traced, "filters": filters,
                            "reranker": reranker}  # fmt: skip
                    started = time.perf_counter()
                    found = http[base].request("POST", "/api/search", body)
                    elapsed = (time.perf_counter() - started) * 1000
                    if i < warmup:
                        continue
                    if traced:
                        traces[name].append(found["trace"])
                    if not traced or trace_every == 1:
                        latencies[name][i] = elapsed
        finally:
            for client in http.values():
                client.close()

    numbered = list(enumerate(qs))
    send(numbered[:warmup])
    if database is not None:
        analyze_accesses(database)
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, [numbered[warmup + k :: clients] for k in range(clients)]))
    report: dict[str, Any] = {}
    first = names[0]
    for name in names:
        values = list(latencies[name].values())
        pct = {f"p{p}": round(float(np.percentile(values, p)), 1) for p in (50, 95, 99)}
        s = [t["timings_ms"] for t in traces[name]]
        stage = {k: round(statistics.median(x[k] for x in s), 1) for k in s[0]}
        ran: dict[str, list[float]] = {}
        for t in traces[name]:
            for arm, path in (t.get("paths") or {}).items():
                if path.get("ran", True) and isinstance(path.get("ms"), int | float):
                    ran.setdefault(arm, []).append(path["ms"])
        report[name] = {
            **pct, "searches": len(values), "server_stage_median_ms": stage,
            "retriever_median_ms": {k: round(statistics.median(v), 1) for k, v in ran.items()},
        }  # fmt: skip
        if reranker == "cross-encoder":
            report[name]["reranker_backend"] = sorted(
                {str(t.get("reranker_backend")) for t in traces[name]}
            )
            report[name]["rerank_ms"] = {
                "p50": round(float(np.percentile([x["rerank"] for x in s], 50)), 1),
                "p95": round(float(np.percentile([x["rerank"] for x in s], 95)), 1),
                "traced": len(s),
                "candidates_mean": round(
                    statistics.mean(len(t["candidates"]) for t in traces[name]), 1
                ),
            }
        if name != first:
            ratios = [v / latencies[first][i] for i, v in latencies[name].items()]
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
    parser.add_argument(
        "--filters", nargs="*", metavar="NAME", choices=list(FILTER_SETS),
        help="also each of FILTER_SETS (or those named: `--filters \"type (99.9%%)\"`)",
    )  # fmt: skip
    parser.add_argument(
        "--recall", type=int, default=0, metavar="N",
        help="with --filters: the semantic retriever's recall per filter on N questions",
    )  # fmt: skip
    parser.add_argument("--texts", choices=["synthetic", "locomo"], default="synthetic")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--reranker", choices=["heuristic", "cross-encoder"], default="heuristic")
    parser.add_argument("--candidates", type=int, help="MEMORA_RERANK_CANDIDATES (default 100)")
    parser.add_argument("--cross-encoder-model", help="default: MiniLM-L6 shape, random weights")
    parser.add_argument(
        "--cross-encoder-backend", nargs="+", default=["auto"],
        help="MEMORA_CROSS_ENCODER_BACKEND; several: one query service each, questions alternating",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=1, help="concurrent clients")
    parser.add_argument("--trace-every", type=int, default=10)
    parser.add_argument(
        "--conversation-turns",
        type=int,
        default=0,
        metavar="N",
        help="the memories as the turns of conversations N long (a document each; default: none)",
    )
    args = parser.parse_args()  # fmt: skip
    backends: list[str] = args.cross_encoder_backend
    if args.clients > 1 and (args.row_security == "both" or len(backends) > 1):
        parser.error(
            "--clients works with one query service (not --row-security both, one backend)"
        )
    if len(backends) > 1 and (args.row_security == "both" or args.reranker != "cross-encoder"):
        parser.error("several --cross-encoder-backend: with --reranker cross-encoder, one mode")
    embedder = Embedder(Settings().embedding_model, torch_threads=2)
    if args.texts == "locomo":
        texts, asked = locomo_texts(args.locomo)
        qs = [asked[i % len(asked)] for i in range(args.queries + args.warmup)]
    else:
        texts = sentence_pool(random.Random(7), 3000)
        qs = questions(args.queries + args.warmup)
    env = {"MEMORA_ROW_SECURITY": "true" if args.row_security != "off" else "false"}
    if args.candidates:
        env["MEMORA_RERANK_CANDIDATES"] = str(args.candidates)
    if args.reranker == "cross-encoder":
        model = args.cross_encoder_model or str(
            minilm_shaped_model(Path(tempfile.gettempdir()) / "memora-ce-l6")
        )
        env |= {"MEMORA_CROSS_ENCODER_MODEL": model, "MEMORA_PRELOAD_CROSS_ENCODER": "true",
                "MEMORA_CROSS_ENCODER_BACKEND": backends[0]}  # fmt: skip
    modes = ["on", "off"] if args.row_security == "both" else [args.row_security]
    if len(backends) > 1:  # one query service per backend, named by it
        modes = backends
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
            load(
                settings.require_database_url(), n, embedder, texts, args.texts == "synthetic",
                turns=args.conversation_turns,
            )  # fmt: skip
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
            stack.extra_env.update(env)
            stack.start()  # infrastructure is up: this starts the query service only
            bases = {modes[0]: f"http://{settings.host}:{settings.query_port}"}
            for mode in modes[1:]:
                port = free_port()
                differs = (
                    {"MEMORA_CROSS_ENCODER_BACKEND": mode}
                    if len(backends) > 1
                    else {"MEMORA_ROW_SECURITY": "false"}
                )
                stack._spawn(
                    f"query-{mode}",
                    ["uvicorn", "services.api.query_app:create_app", "--factory", "--host",
                     settings.host, "--port", str(port), "--log-level", "warning"],
                    env={**env, **differs, "MEMORA_QUERY_PORT": str(port)},
                )  # fmt: skip
                bases[mode] = f"http://{settings.host}:{port}"
            stack.wait_ready()
            for base in bases.values():
                wait_ready(base)
            if args.filters is not None:  # each question with each filter in turn, one service
                base = next(iter(bases.values()))
                chosen = {"none", *args.filters} if args.filters else set(FILTER_SETS)
                targets = {n: (base, f) for n, f in FILTER_SETS.items() if n in chosen}
            else:
                targets = {mode: (base, None) for mode, base in reversed(bases.items())}
            result = measure(
                targets, qs, args.warmup, reranker=args.reranker,
                trace_every=args.trace_every, clients=args.clients,
                database=settings.require_database_url(),
            )  # fmt: skip
            if len(bases) == 2 and len(backends) == 1 and args.filters is None:
                result["median_ratio_on_off"] = result["on"].pop("median_ratio_to_off")
            elif len(bases) == 1 and args.filters is None:
                result = result[modes[0]]
            if args.filters is not None and args.recall:
                result["semantic_recall"] = filtered_recall(
                    settings.require_database_url(), embedder, qs[: args.recall]
                )
            result["load_average"] = os.getloadavg()
            print(f"{n}: {json.dumps(result)}", flush=True)
        finally:
            stack.stop()
        report[str(n)] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
