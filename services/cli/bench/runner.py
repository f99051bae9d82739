"""A benchmark run against a running server, through the Python client: ingest the sessions
(one document each; skipped with --skip-ingestion), then for every question search the agent's
memories (retrieval figures) and, with --use-think, ask think and have the judge LLM grade the
answer (accuracy, token F1). The results file holds the figures overall, per category and per
question, with the retrieved memories and which of them are evidence (docs/benchmarks.md)."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memora.nlp import llm
from memora.nlp.llm import LLMError
from memora_client import MemoraClient, MemoraError
from services.cli.bench import metrics
from services.cli.bench.dataset import Dataset, Question
from services.cli.bench.judge import Judge

RESULTS_VERSION = 1
PROGRESS_EVERY = 25  # questions between progress lines


class BenchError(Exception):
    """The run cannot go on: the message says why."""


@dataclass
class RunOptions:
    base_url: str
    api_key: str | None = None
    top_k: int = 50  # memories searched per question (the retrieval figures go up to @50)
    think_top_k: int = 20  # memories think answers from
    reranker: str = "heuristic"
    use_think: bool = False
    follow_up: bool = False  # searches with an LLM-planned follow-up round
    skip_ingestion: bool = False
    wait_timeout: float = 600.0
    request_timeout: float = 120.0


Echo = Callable[[str], None]
RECORDED_OPTIONS = ("top_k", "think_top_k", "reranker", "follow_up", "skip_ingestion")


def ingest(client: MemoraClient, dataset: Dataset, timeout: float, echo: Echo) -> dict[str, Any]:
    started, items, operations = time.monotonic(), 0, []
    for agent, sessions in dataset.sessions.items():
        for session in sessions:
            accepted = client.store_batch(agent, session.items, document_id=session.document_id)
            operations.append(accepted.operation_id)
            items += len(session.items)
        echo(f"  {agent}: {len(sessions)} sessions posted")
    for operation in operations:
        client.wait_for(operation, timeout=timeout)
    seconds = time.monotonic() - started
    return {"documents": len(operations), "items": items, "seconds": round(seconds, 1)}


def check_ingested(client: MemoraClient, dataset: Dataset) -> None:
    for agent in dataset.sessions:
        if not client.list_documents(agent, limit=1).documents:
            raise BenchError(f"agent {agent} holds no documents: run once without --skip-ingestion")


def _retrieval(dataset: Dataset, q: Question, ranked: list[str]) -> dict[str, float]:
    if not q.evidence:
        return {}
    if dataset.benchmark == "locomo":
        return metrics.locomo_retrieval(ranked, q.evidence)
    unique = list(dict.fromkeys(t for t in ranked if t))  # one entry per turn, as a corpus
    return metrics.longmemeval_retrieval(unique, q.evidence, q.corpus)


def ask(
    client: MemoraClient, dataset: Dataset, q: Question, options: RunOptions, judge: Judge | None
) -> dict[str, Any]:
    started = time.perf_counter()
    found = client.search(
        q.agent_id, q.question, options.top_k, reranker=options.reranker,  # type: ignore[arg-type]
        reference_time=q.reference_time, follow_up=options.follow_up,
    )  # fmt: skip
    search_ms = (time.perf_counter() - started) * 1000
    retrieved, ranked = [], []
    for rank, hit in enumerate(found.results, 1):
        turn = str((hit.metadata or {}).get(dataset.evidence_key) or "")
        ranked.append(turn)
        retrieved.append(
            {"rank": rank, "id": str(hit.id), "text": hit.text, "turn": turn or None,
             "evidence": bool(turn) and turn in q.evidence, "weight": round(hit.weight, 4)}
        )  # fmt: skip
    row: dict[str, Any] = {
        "id": q.id, "agent_id": q.agent_id, "category": q.category, "question": q.question,
        "expected_answer": q.answer, "evidence": sorted(q.evidence), "abstention": q.abstention,
        "reference_time": q.reference_time.isoformat() if q.reference_time else None,
        "metrics": _retrieval(dataset, q, ranked), "retrieved": retrieved,
        "search_ms": round(search_ms, 1),
    }  # fmt: skip
    if found.follow_up is not None:  # an LLM that failed leaves the first round: said per row
        row["follow_up_queries"] = found.follow_up.queries
        row["follow_up_error"] = found.follow_up.error.code if found.follow_up.error else None
        row["usage"] = {"search": found.follow_up.usage.model_dump()}
    if options.use_think and judge is not None:
        thought = _think(client, q, options, judge)
        row.update(thought, usage={**row.get("usage", {}), **thought["usage"]})
    return row


def _think(client: MemoraClient, q: Question, options: RunOptions, judge: Judge) -> dict[str, Any]:
    asked = (
        f"The question is asked on {q.reference_time:%Y-%m-%d %H:%M}." if q.reference_time else None
    )
    thought = client.think(
        q.agent_id, q.question, top_k=options.think_top_k, context=asked,
        reranker=options.reranker, follow_up=options.follow_up,  # type: ignore[arg-type]
    )  # fmt: skip
    answer = thought.text
    with llm.calls_made() as judged:
        correct, verdict = judge.grade(q.category, q.question, q.answer, answer)
    f1 = metrics.token_f1(answer, q.answer)
    return {
        "answer": answer,
        "judge": verdict,
        "correct": correct,
        "metrics_answer": {"accuracy": float(correct), "f1": round(f1, 4)},
        "usage": {"think": thought.usage.model_dump(), "judge": llm.tokens_of(judged)},
    }


def usage_per_question(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]] | None:
    """The LLM calls' requests and tokens per question, on average, by what made them (the
    search's follow-up round, think, the judge; None without --follow-up or --use-think): with
    a provider's prices per token, what a question costs."""
    used = [r["usage"] for r in rows if "usage" in r]
    sides = [side for side in ("search", "think", "judge") if any(side in u for u in used)]
    if not sides:
        return None
    return {
        side: {
            k: round(sum(u[side][k] for u in used if side in u) / len(used), 1)
            for k in ("requests", "prompt_tokens", "completion_tokens")
        }
        for side in sides
    }


def summarise(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(overall, per category): question counts and the mean of every figure."""

    def means(part: list[dict[str, Any]]) -> dict[str, Any]:
        merged = [{**r.get("metrics_answer", {}), **r["metrics"]} for r in part]
        return {"questions": len(part), **metrics.mean_metrics(merged)}

    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_category[row["category"]].append(row)
    return means(rows), {name: means(part) for name, part in sorted(by_category.items())}


def run(
    dataset: Dataset, source: Path, options: RunOptions, judge: Judge | None, echo: Echo
) -> dict[str, Any]:
    started = datetime.now(UTC)
    try:
        with MemoraClient(
            options.base_url, api_key=options.api_key, timeout=options.request_timeout
        ) as client:
            if options.skip_ingestion:
                check_ingested(client, dataset)
                ingestion = None
            else:
                echo(f"ingesting {len(dataset.sessions)} agents")
                ingestion = ingest(client, dataset, options.wait_timeout, echo)
            echo(f"asking {len(dataset.questions)} questions")
            rows = []
            for n, q in enumerate(dataset.questions, 1):
                rows.append(ask(client, dataset, q, options, judge))
                if n % PROGRESS_EVERY == 0:
                    echo(f"  {n}/{len(dataset.questions)}")
    except (MemoraError, LLMError) as exc:
        raise BenchError(f"{type(exc).__name__}: {exc}") from exc
    return {
        "version": RESULTS_VERSION,
        "benchmark": dataset.benchmark,
        "mode": "think" if options.use_think else "retrieval",
        "dataset": source.name,
        "base_url": options.base_url,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "options": {name: getattr(options, name) for name in RECORDED_OPTIONS},
        "ingestion": ingestion,
        **figures(rows),
        "questions": rows,
    }


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The names of the figures measured, in order, their means overall and per category, and
    the LLM usage per question (`usage_per_question`)."""
    overall, categories = summarise(rows)
    names = (n for r in rows for n in (*r.get("metrics_answer", {}), *r["metrics"]))
    return {
        "llm_usage_per_question": usage_per_question(rows),
        "metric_names": list(dict.fromkeys(names)),
        "overall": overall,
        "categories": categories,
    }


def write(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(out)
