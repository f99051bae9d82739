"""Retrieval quality on LoCoMo through the real API and pipeline, next to BM25, dense and
hybrid baselines computed by this script on the same turns (the metric of ../shared/DESIGN.md §5).

    python bench/locomo.py                                # embedded stack, dev split
    python bench/locomo.py --data other.json --url http://127.0.0.1:8080 --reranker heuristic
    python bench/locomo.py --only conv-26 --analyse       # one conversation; where evidence is lost

Every turn is posted as one item ("{speaker}: {text}", plus " [shares image: …]"), one document
per session, timestamp = the session's date_time, metadata dia_id; the local extractor keeps
raw turns as units. For every question of categories 1–4 with evidence, /api/search (top 50)
is asked on that conversation's agent; Recall@k is the share of the question's evidence turns
in the top k, MRR the reciprocal rank of the first. Results: a table and a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from memora_client import MemoraClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.infra.embedded import free_port
from memora.interchange.archives import LOCOMO_TIME, read_documents
from memora.jobs import JOBS, JobContext, run_job
from services.cli.jobs import EVOLUTION_JOBS
from services.cli.stack import Stack
from services.workers.celery_app import create_celery
from services.workers.dispatch import CeleryBackend

sys.path.insert(0, str(Path(__file__).parent))
import locomo_trace

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20, 50)
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def evidence_ids(evidence: Sequence[str]) -> set[str]:
    """'D8:6; D9:17', 'D:11:26' and 'D30:05' all normalised to 'D<session>:<turn>'."""
    return {f"D{int(a)}:{int(b)}" for e in evidence for a, b in _EVIDENCE.findall(str(e))}


@dataclass
class Question:
    agent_id: str
    text: str
    category: int
    evidence: set[str]
    reference: datetime  # the conversation's last session: when the question is asked


def load_questions(data: list[dict[str, Any]], prefix: str) -> list[Question]:
    out = []
    for conv in data:
        times = [
            datetime.strptime(v.strip(), LOCOMO_TIME).replace(tzinfo=UTC)
            for k, v in conv["conversation"].items()
            if k.endswith("_date_time") and isinstance(v, str)
        ]
        for q in conv["qa"]:
            ev = evidence_ids(q.get("evidence") or [])
            if q.get("category") in CATEGORIES and ev:
                out.append(
                    Question(f"{prefix}{conv['sample_id']}", q["question"], q["category"], ev,
                             max(times))
                )  # fmt: skip
    return out


def turns(data: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """sample_id → [(dia_id, text)] for the baselines, texts as the API stores them."""
    out: dict[str, list[tuple[str, str]]] = {}
    for conv in data:
        c = conv["conversation"]
        rows = []
        for key, value in c.items():
            if key.startswith("session_") and isinstance(value, list):
                for t in value:
                    caption = (
                        f" [shares image: {t['blip_caption']}]" if t.get("blip_caption") else ""
                    )
                    rows.append((t["dia_id"], f"{t['speaker']}: {t['text']}{caption}"))
        out[conv["sample_id"]] = rows
    return out


# ------------------------------------------------------------------------------ metric
def score(ranked: list[str], evidence: set[str]) -> dict[str, float]:
    found = {f"R@{k}": len(evidence & set(ranked[:k])) / len(evidence) for k in KS}
    first = next((i for i, d in enumerate(ranked, 1) if d in evidence), None)
    return {**found, "MRR": 1.0 / first if first else 0.0}


def summarise(rows: list[tuple[Question, dict[str, float]]]) -> dict[str, Any]:
    def mean(part: list[dict[str, float]]) -> dict[str, float]:
        return {m: round(statistics.fmean(r[m] for r in part), 3) for m in part[0]} if part else {}

    by_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q, r in rows:
        by_cat[CATEGORIES[q.category]].append(r)
    return {
        "overall": mean([r for _, r in rows]),
        "questions": len(rows),
        **{name: mean(by_cat[name]) for name in CATEGORIES.values()},
    }


# ---------------------------------------------------------------------------- baselines
def baselines(data: list[dict[str, Any]], questions: list[Question], prefix: str,
              model: str) -> dict[str, dict[str, Any]]:  # fmt: skip
    from rank_bm25 import BM25Okapi

    from memora.nlp.embedding import Embedder

    embedder = Embedder(model, torch_threads=2)
    tokenize: Callable[[str], list[str]] = lambda s: re.findall(r"\w+", s.lower())  # noqa: E731
    per_conv = {}
    for sample_id, rows in turns(data).items():
        texts = [t for _, t in rows]
        per_conv[f"{prefix}{sample_id}"] = (
            [d for d, _ in rows],
            BM25Okapi([tokenize(t) for t in texts]),
            embedder.embed(texts),
        )
    results: dict[str, list[tuple[Question, dict[str, float]]]] = defaultdict(list)
    for q in questions:
        ids, bm25, vectors = per_conv[q.agent_id]
        lexical = list(np.argsort(-bm25.get_scores(tokenize(q.text)), kind="stable"))
        dense = list(np.argsort(-(vectors @ embedder.embed_one(q.text)), kind="stable"))
        fused: dict[int, float] = defaultdict(float)
        for ranking in (lexical, dense):
            for rank, i in enumerate(ranking[:100], 1):
                fused[int(i)] += 1 / (60 + rank)
        hybrid = sorted(fused, key=lambda i: -fused[i])
        for name, order in (("bm25", lexical), ("dense", dense), ("hybrid", hybrid)):
            results[name].append((q, score([ids[int(i)] for i in order[:50]], q.evidence)))
    return {name: summarise(rows) for name, rows in results.items()}


# ----------------------------------------------------------------------------- through API
def ingest(client: MemoraClient, path: Path, prefix: str) -> tuple[int, float]:
    started = time.monotonic()
    operations, items = [], 0
    for doc in read_documents(path, "locomo"):
        body = {
            "agent_id": f"{prefix}{doc.agent_id}",
            "document_id": doc.document_id,
            "items": [i.model_dump(mode="json", exclude_none=True) for i in doc.items],
        }
        operations.append(client.request("POST", "/api/memories/batch", body)["operation_id"])
        items += len(doc.items)
    for op in operations:
        while (status := client.request("GET", f"/api/operations/{op}")["status"]) in (
            "queued",
            "running",
        ):
            time.sleep(0.2)
        if status != "completed":
            raise RuntimeError(f"operation {op} ended {status}")
    return items, time.monotonic() - started


def dia_ids(database_url: str, agent_ids: set[str]) -> dict[str, str]:
    """unit id → dia_id of the agents' units (read from the database: the trace names units)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT id::text, metadata->>'dia_id' FROM memory_units WHERE agent_id = ANY(%s)",
            (sorted(agent_ids),),
        ).fetchall()
    return {unit: dia or "" for unit, dia in rows}


Fate = locomo_trace.EvidenceFate


def through_api(client: MemoraClient, questions: list[Question], reranker: str, reference: str,
                dia_of: dict[str, str] | None = None,
                ) -> tuple[dict[str, Any], list[float], list[Fate]]:  # fmt: skip
    """Scores of the questions; with `dia_of` also each evidence turn's fate in the trace."""
    rows, latencies, fates = [], [], []
    for q in questions:
        body: dict[str, Any] = {
            "agent_id": q.agent_id, "query": q.text, "top_k": 50, "reranker": reranker,
            "trace": dia_of is not None,
        }  # fmt: skip
        if reference == "conversation":
            body["reference_time"] = q.reference.isoformat()
        started = time.perf_counter()
        found = client.request("POST", "/api/search", body)
        latencies.append((time.perf_counter() - started) * 1000)
        ranked = [r["metadata"].get("dia_id", "") for r in found["results"]]
        rows.append((q, score(ranked, q.evidence)))
        if dia_of is not None:
            trace = found["trace"]
            fates += locomo_trace.fates(trace, dia_of, q.evidence, CATEGORIES[q.category])
    return summarise(rows), latencies, fates


def table(results: dict[str, dict[str, Any]]) -> str:
    head = (
        "| retriever | R@5 | R@10 | R@20 | R@50 | MRR | R@10 multi-hop / temporal / open / single |"
    )
    lines = [head, "|---" * 7 + "|"]
    for name, r in results.items():
        o = r["overall"]
        cats = " / ".join(f"{r[c]['R@10']:.3f}" if r[c] else "-" for c in CATEGORIES.values())
        lines.append(
            f"| {name} | {o['R@5']:.3f} | {o['R@10']:.3f} | {o['R@20']:.3f} | {o['R@50']:.3f} "
            f"| {o['MRR']:.3f} | {cats} |"
        )
    return "\n".join(lines)


def evolve(settings: Settings) -> dict[str, dict[str, int]]:
    """Every evolution job once over every agent (as `memora evolve` does); what each did."""
    done: dict[str, dict[str, int]] = {}
    with make_pool(settings.require_database_url(), min_size=1, max_size=2) as pool:
        ctx = JobContext(settings, pool, CeleryBackend(create_celery(settings)))
        for name in EVOLUTION_JOBS:
            result = run_job(JOBS[name], ctx)
            done[name] = {"examined": result.examined, "changed": result.changed}
    return done


def main() -> None:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=here.parent.parent / "shared/locomo/locomo_dev.json"
    )
    parser.add_argument(
        "--url", help="a running Memora (write API); default: start the embedded stack"
    )
    parser.add_argument("--reranker", default="heuristic", choices=["heuristic", "cross-encoder"])
    parser.add_argument(
        "--reference",
        default="conversation",
        choices=["conversation", "now"],
        help="reference time of the questions: the conversation's end, or now",
    )
    parser.add_argument("--prefix", default="locomo-", help="agent id prefix")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument(
        "--evolve",
        action="store_true",
        help="then run every memory evolution job (memora evolve) and measure again",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="SAMPLE_ID",
        help="only this conversation (repeatable), e.g. conv-26",
    )
    parser.add_argument(
        "--analyse",
        action="store_true",
        help="trace every search: at which stage evidence leaves the top 10",
    )
    parser.add_argument("--database-url", help="with --url and --analyse: its database")
    parser.add_argument("--out", type=Path, default=here / "results" / "locomo.json")
    args = parser.parse_args()  # fmt: skip

    data = json.loads(args.data.read_text())
    if args.only:
        data = [c for c in data if c["sample_id"] in args.only]
        if not data:
            parser.error(f"no conversation {args.only} in {args.data}")
        args.data = Path(tempfile.mkdtemp(prefix="memora-locomo-")) / "selected.json"
        args.data.write_text(json.dumps(data))
    questions = load_questions(data, args.prefix)
    report: dict[str, Any] = {"data": str(args.data), "questions": len(questions)}
    stack = None
    if args.url is None:
        settings = Settings(
            data_dir=Path(tempfile.mkdtemp(prefix="memora-locomo-")),
            port=free_port(),
            query_port=free_port(),
        )
        stack = Stack(settings, log_dir=settings.data_dir / "logs")
        stack.start()
        stack.wait_ready()
        args.url = f"http://{settings.host}:{settings.port}"
        args.database_url = settings.database_url
    if args.analyse and not args.database_url:
        parser.error("--analyse with --url needs --database-url")
    try:
        with MemoraClient(args.url, timeout=120, max_retries=0) as client:
            if not args.skip_ingest:
                items, seconds = ingest(client, args.data, args.prefix)
                report["ingest"] = {"items": items, "seconds": round(seconds, 1)}
                print(f"ingested {items} turns in {seconds:.1f}s")
            dia_of = (
                dia_ids(args.database_url, {q.agent_id for q in questions})
                if args.analyse
                else None
            )
            memora, latencies, fates = through_api(
                client, questions, args.reranker, args.reference, dia_of
            )
            if args.evolve:
                # searches count as accesses (the frequency signal): a second pass before the
                # jobs shows how much that alone moves the figures
                again, _, _ = through_api(client, questions, args.reranker, args.reference)
                report["evolve"] = evolve(stack.settings if stack else Settings())
                print(f"evolution jobs: {report['evolve']}")
                after, _, _ = through_api(client, questions, args.reranker, args.reference)
    finally:
        if stack is not None:
            stack.stop()
    results = {f"memora ({args.reranker})": memora}
    if args.evolve:
        results[f"memora ({args.reranker}) second pass, before evolve"] = again
        results[f"memora ({args.reranker}) after memora evolve"] = after
    if not args.no_baselines:
        results.update(baselines(data, questions, args.prefix, Settings().embedding_model))
    report["results"] = results
    report["search_ms"] = {
        "p50": round(float(np.percentile(latencies, 50)), 1),
        "p95": round(float(np.percentile(latencies, 95)), 1),
    }
    print(table(results))
    if args.analyse:
        summaries = locomo_trace.summarise(fates)
        report["evidence_fates"] = {n: vars(s) for n, s in summaries.items()}
        report["fates"] = [vars(f) for f in fates]
        print(locomo_trace.report(summaries))
    print(f"search latency over HTTP: p50 {report['search_ms']['p50']} ms, "
          f"p95 {report['search_ms']['p95']} ms ({len(latencies)} searches)")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
