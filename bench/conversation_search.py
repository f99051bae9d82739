"""Conversation search: latency at scale, and how fast edits and deletes reach it.

    python bench/conversation_search.py search --messages 100000 --queries 300
    python bench/conversation_search.py sync --messages 500 --edits 20

`search`: a fresh embedded PostgreSQL holding N messages of one agent (conversations of 200),
bulk-loaded with COPY (texts of two sentences from a generated pool; each chunk's embedding is
the normalised sum of its sentences' real MiniLM embeddings), the HNSW index built after the
load; then the query service in its own process, warmed up, and distinct questions sent one
at a time over HTTP to POST /api/conversation_search. Reports p50/p95/p99.

`sync`: the whole stack (write API, query service, one worker per stage queue); one
conversation of N messages ingested through the pipeline; then edits of single messages
(PATCH, a new unique word in the text) timed until conversation search returns the message
with the new word, and deletes timed until search no longer returns it. For one edit, the rows
it inserted, updated or deleted in every table (pg_stat_user_tables), against a re-post of the
whole conversation with the same one message changed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memora_client import MemoraClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import api_client  # bench/common.py

from memora.basics.config import Settings
from memora.db.pool import connect
from memora.infra.embedded import free_port
from memora.nlp.chunking import content_hash, source_hash
from memora.nlp.embedding import Embedder
from services.cli.stack import Stack

AGENT = "bench-agent"
PEOPLE = ["Alice", "Bob", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo"]
DOING = ["went hiking", "started a pottery class", "signed up for a marathon", "adopted a puppy",
         "visited the museum", "cooked a curry", "fixed the bicycle", "read a novel",
         "planted tomatoes", "learned the guitar", "booked a flight",
         "baked sourdough"]  # fmt: skip
WHERE = ["in Lisbon", "near the lake", "downtown", "in Kyoto", "at work", "at the beach"]
QUESTIONS = ["what did {p} say about {d}", "when did {p} talk about the trip {w}",
             "{d} {w}", "who {d}", "{p} {d}"]  # fmt: skip
PER_CONVERSATION = 200


def sentences(rng: random.Random, n: int) -> list[str]:
    """n distinct sentences (at most the 720 combinations)."""
    n = min(n, len(PEOPLE) * len(DOING) * len(WHERE))
    out: set[str] = set()
    while len(out) < n:
        out.add(f"{rng.choice(PEOPLE)} {rng.choice(DOING)} {rng.choice(WHERE)} last week.")
    return sorted(out)


def load(url: str, n: int, embedder: Embedder, seed: int = 7) -> None:
    """N messages of one agent with one chunk each, then the HNSW index."""
    rng = random.Random(seed)
    pool = sentences(rng, 600)  # of the 720 combinations
    vectors = embedder.embed(pool)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    with connect(url) as conn:
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (AGENT,))
        conn.execute(
            "INSERT INTO conversation_index_state (agent_id, embedding_model, embedding_dim, "
            "last_sync_at) VALUES (%s, %s, %s, now())",
            (AGENT, embedder.model_name, vectors.shape[1]),
        )
        conn.execute("DROP INDEX IF EXISTS idx_conversation_chunks_embedding")
        conn.execute("SET session_replication_role = replica")  # ids are consistent
        docs = [uuid.uuid4() for _ in range(-(-n // PER_CONVERSATION))]
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY documents (id, agent_id, document_id, content_hash, items, item_count, "
                "title) FROM STDIN"
            ) as copy,
        ):
            for i, d in enumerate(docs):
                copy.write_row((d, AGENT, f"conv-{i}", "-", "[]", PER_CONVERSATION, f"Chat {i}"))
        loading = time.monotonic()
        msg_cols = (
            "id, agent_id, document_pk, message_id, position, ordinal, role, occurred_at, text, "
            "content_hash"
        )
        chunk_cols = (
            "agent_id, document_pk, message_pk, message_pks, chunk_index, generation, roles, "
            "occurred_at, text, snippet, source_hash, embedding"
        )
        rows = []
        for i in range(n):
            a, b = rng.randrange(len(pool)), rng.randrange(len(pool))
            text = f"{pool[a]} {pool[b]}"
            vec = vectors[a] + 0.6 * vectors[b]
            when = start + timedelta(minutes=i)
            role = "user" if i % 2 else "assistant"
            rows.append((uuid.uuid4(), docs[i // PER_CONVERSATION], i % PER_CONVERSATION, role,
                         when, text, vec / np.linalg.norm(vec)))  # fmt: skip
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY conversation_messages ({msg_cols}) FROM STDIN") as cp,
        ):
            for pk, doc, pos, role, when, text, _ in rows:
                cp.write_row(
                    (pk, AGENT, doc, str(pos), pos, pos, role, when, text, content_hash(text))
                )
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY conversation_chunks ({chunk_cols}) FROM STDIN") as cp,
        ):
            for pk, doc, _, role, when, text, vec in rows:
                prefix = f"[Conversation: Chat] [{when.date().isoformat()}] [{role}]: "
                cp.write_row((AGENT, doc, pk, [pk], 0, 1, [role], when, prefix + text, text,
                              source_hash([content_hash(text)]), vec))  # fmt: skip
        conn.commit()
        print(f"  rows loaded in {time.monotonic() - loading:.0f}s")
        started = time.monotonic()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(
            "CREATE INDEX idx_conversation_chunks_embedding ON conversation_chunks "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        conn.execute("ANALYZE")
        conn.commit()
        print(f"  HNSW built in {time.monotonic() - started:.0f}s")


def questions(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < count:
        out.add(rng.choice(QUESTIONS).format(
            p=rng.choice(PEOPLE), d=rng.choice(DOING), w=rng.choice(WHERE)))  # fmt: skip
    return sorted(out, key=lambda _: rng.random())


def percentiles(values: list[float]) -> dict[str, float]:
    return {f"p{p}": round(float(np.percentile(values, p)), 1) for p in (50, 95, 99)}


def bench_search(n: int, count: int, warmup: int) -> dict[str, Any]:
    embedder = Embedder(Settings().embedding_model, torch_threads=2)
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix=f"memora-conv-{n}-")), query_port=free_port()
    )
    stack = Stack(settings, workers={}, with_api=False, with_beat=False,
                  log_dir=settings.data_dir / "logs")  # fmt: skip
    try:
        stack.start_infrastructure()
        load(settings.require_database_url(), n, embedder)
        stack.start()
        stack.wait_ready()
        base = f"http://{settings.host}:{settings.query_port}"
        latencies, found = [], 0
        with api_client(base, timeout=60) as client:
            for i, q in enumerate(questions(count + warmup)):
                body = {"agent_id": AGENT, "query": q, "limit": 5}
                started = time.perf_counter()
                answer = client.request("POST", "/api/conversation_search", body)
                elapsed = (time.perf_counter() - started) * 1000
                if i >= warmup:
                    latencies.append(elapsed)
                    found += bool(answer["results"])
    finally:
        stack.stop()
    return {"messages": n, **percentiles(latencies), "searches": len(latencies),
            "with_results": found}  # fmt: skip


# ------------------------------------------------------------------------------ sync
def conversation(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pool = sentences(rng, 400)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        {"message_id": f"m{i}", "role": "user" if i % 2 else "assistant",
         "content": f"{rng.choice(pool)} {rng.choice(pool)}",
         "event_date": (start + timedelta(minutes=i)).isoformat()}
        for i in range(n)
    ]  # fmt: skip


def wait_op(client: MemoraClient, op_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op: dict[str, Any] = client.request("GET", f"/api/operations/{op_id}")
        if op["status"] in ("completed", "failed"):
            return op
        time.sleep(0.05)
    raise TimeoutError(op_id)


def table_writes(url: str) -> dict[str, int]:
    time.sleep(11)  # idle sessions flush their statistics within 10 s (PGSTAT_IDLE_INTERVAL)
    with connect(url) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return {
            r["relname"]: int(r["n"])
            for r in conn.execute(
                "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables"
            )
        }


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}


def bench_sync(n: int, edits: int) -> dict[str, Any]:
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="memora-conv-sync-")),
        port=free_port(), query_port=free_port(), extractor="local",
    )  # fmt: skip
    stack = Stack(settings, with_beat=False, log_dir=settings.data_dir / "logs")
    items = conversation(n)
    try:
        stack.start()
        stack.wait_ready()
        url = settings.require_database_url()
        api = api_client(f"http://{settings.host}:{settings.port}", timeout=60)
        query = api_client(f"http://{settings.host}:{settings.query_port}", timeout=60)
        body = {"agent_id": AGENT, "document_id": "long", "items": items, "title": "Long chat"}
        started = time.monotonic()
        op = wait_op(api, api.request("POST", "/api/memories/batch", body)["operation_id"])
        ingest_s = round(time.monotonic() - started, 1)
        print(f"  {n} messages ingested in {ingest_s}s: {op['counts']}")

        def search(word: str) -> list[dict[str, Any]]:
            ask = {"agent_id": AGENT, "query": word, "min_score": 0.0, "limit": 5}
            hits: list[dict[str, Any]] = query.request("POST", "/api/conversation_search", ask)[
                "results"
            ]
            return hits

        rng = random.Random(5)
        targets = rng.sample(range(n), 2 * edits)
        edit_ms, op_ms, delete_ms, edit_ops = [], [], [], []
        writes: dict[str, dict[str, int]] = {}
        for k, i in enumerate(targets[:edits]):
            word = f"quokka{uuid.uuid4().hex[:8]}"
            if k == 0:
                before = table_writes(url)
            started = time.perf_counter()
            edited = api.request(
                "PATCH",
                f"/api/agents/{AGENT}/documents/long/messages/m{i}",
                {"content": f"{items[i]['content']} Also, {word} sightings were reported."},
            )
            while not any(
                h["message_id"] == f"m{i}" and word in h["snippet"] for h in search(word)
            ):
                time.sleep(0.02)
            edit_ms.append((time.perf_counter() - started) * 1000)
            done = wait_op(api, edited["operation_id"])
            edit_ops.append(done["counts"])
            took = datetime.fromisoformat(done["finished_at"]) - datetime.fromisoformat(
                done["created_at"]
            )
            op_ms.append(took.total_seconds() * 1000)
            if k == 0:
                writes["edit_one_message"] = delta(before, table_writes(url))
        for i in targets[edits:]:
            started = time.perf_counter()
            api.request("DELETE", f"/api/agents/{AGENT}/documents/long/messages/m{i}")
            while any(h["message_id"] == f"m{i}" for h in search(items[i]["content"])):
                time.sleep(0.02)
            delete_ms.append((time.perf_counter() - started) * 1000)
        # For comparison: re-post the whole (current) conversation with one message changed.
        current = api.request("GET", f"/api/agents/{AGENT}/documents/long")["items"]
        current[0] = {**current[0], "content": current[0]["content"] + " Changed once more."}
        before = table_writes(url)
        started = time.monotonic()
        body = {**body, "items": current}
        op = wait_op(api, api.request("POST", "/api/memories/batch", body)["operation_id"])
        repost_s = round(time.monotonic() - started, 2)
        writes["repost_whole_conversation"] = delta(before, table_writes(url))
    finally:
        stack.stop()
    return {
        "messages": n,
        "ingest_seconds": ingest_s,
        "edit_to_searchable_ms": {**percentiles(edit_ms), "n": len(edit_ms)},
        "edit_operation_ms": percentiles(op_ms),
        "edit_operation_counts_first": edit_ops[0],
        "delete_to_gone_ms": {**percentiles(delete_ms), "n": len(delete_ms)},
        "rows_written": {k: {"total": sum(v.values()), **v} for k, v in writes.items()},
        "repost_seconds": repost_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["search", "sync"])
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.mode == "search":
        result = bench_search(args.messages or 100_000, args.queries, args.warmup)
    else:
        result = bench_sync(args.messages or 500, args.edits)
    result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    out = args.out or Path(__file__).parent / "results" / f"conversation_{args.mode}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
