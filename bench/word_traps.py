"""Word traps: questions whose answer shares few words with the question while another turn
shares one of them ("Where does Nora work?" — "Night shifts on the cardiac ward…" against "The
dishwasher doesn't work again"), through the real stack and API.

    python bench/word_traps.py                                   # bench/data/word_traps*
    python bench/word_traps.py --archive shared/memora/data/sample_conversations.jsonl \
        --questions my_questions.json --explain

The archive (the JSONL format of `memora demo --archive`) is posted to the write API of an
embedded stack, as the demo posts it; each question is asked through /api/search (the
default heuristic reranker, trace on). A question's answers and distractors are substrings of turn
texts. Top 50 are asked for (MMR picks greedily, so the top 3 are those of a top-3 search).
Reported per question kind ("trap", "control"): hit@1, hit@3 (an answer in the top 1 /
3), MRR of the first answer, and how often a distractor is ranked above every answer; with
--explain, each answer's and distractor's rank per retriever and reranker signals.

    python bench/word_traps.py --archive bench/data/multihop.jsonl \
        --questions bench/data/multihop_questions.json

Questions that carry "evidence" (one substring per evidence turn; the set of issue 59, kinds
"multi-hop", "open-domain", "control") also get, per kind: R@5 and R@10, the mean over
questions of the share of their evidence turns in the top 5 / 10; R@10 over evidence turns
(found / all, pooled across the kind's questions) with its 95 % Wilson score interval, which
takes the turns as independent (turns of one question are not, so it is if anything narrow);
and how many questions have all their evidence in the top 10. Sets without evidence print and
write what they did before.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx

from memora_client import MemoraClient

sys.path.insert(0, str(Path(__file__).parent))
from common import embedded_stack

from services.cli.demo import post_archive, wait_for_operations

HERE = Path(__file__).resolve().parent
SIGNALS = ("semantic", "keyword", "context", "feedback", "score")


def first_rank(texts: list[str], wanted: list[str]) -> int | None:
    """1-based rank of the first text holding one of `wanted`, None when none does."""
    return next((i for i, t in enumerate(texts, 1) if any(w in t for w in wanted)), None)


def ask(memora: MemoraClient, q: dict[str, Any], top_k: int) -> dict[str, Any]:
    body = {"agent_id": q["agent_id"], "query": q["question"], "top_k": top_k, "trace": True}
    result: dict[str, Any] = memora.request("POST", "/api/search", body)
    texts = [r["text"] for r in result["results"]]
    answer = first_rank(texts, q["answers"])
    distractor = first_rank(texts, q["distractors"]) if q["distractors"] else None
    row: dict[str, Any] = {
        "question": q["question"],
        "kind": q["kind"],
        "top": texts[:3],
        "answer_rank": answer,
        "distractor_rank": distractor,
        "trapped": distractor is not None and (answer is None or distractor < answer),
        "explain": explain(result, q),
    }
    if "evidence" in q:
        row["evidence_ranks"] = [first_rank(texts, [e]) for e in q["evidence"]]
    return row


def explain(result: dict[str, Any], q: dict[str, Any]) -> list[dict[str, Any]]:
    """The returned answers and distractors: their rank in each retriever and their signals
    from the trace."""
    signals = {c["id"]: c for c in result["trace"]["candidates"]}
    out = []
    for rank, hit in enumerate(result["results"], 1):
        text = hit["text"]
        role = (
            "answer" if any(a in text for a in q["answers"])
            else "distractor" if any(d in text for d in q["distractors"]) else None
        )  # fmt: skip
        if role:
            c = signals[hit["id"]]
            out.append({"role": role, "rank": rank, "text": text[:50], "ranks": c["ranks"],
                        **{s: round(float(c[s]), 3) for s in SIGNALS}})  # fmt: skip
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
        by_kind["all"].append(r)
    out = {}
    for kind, part in by_kind.items():
        ranks = [r["answer_rank"] for r in part]
        out[kind] = {
            "questions": len(part),
            "hit@1": round(statistics.fmean(1.0 if r == 1 else 0.0 for r in ranks), 3),
            "hit@3": round(statistics.fmean(1.0 if r and r <= 3 else 0.0 for r in ranks), 3),
            "MRR": round(statistics.fmean(1.0 / r if r else 0.0 for r in ranks), 3),
            "trapped": sum(1 for r in part if r["trapped"]),
        }
    return out


def wilson(found: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of the proportion found / n (95 % for z = 1.96)."""
    if n == 0:
        return 0.0, 1.0
    p = found / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def share_in_top(ranks: list[int | None], k: int) -> float:
    """The share of a question's evidence turns ranked in the top k."""
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def summarise_evidence(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind, over the questions with evidence: R@5 and R@10 (mean over questions), R@10
    over evidence turns with its 95 % Wilson interval, questions with all evidence in the top 10."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("evidence_ranks"):
            by_kind[r["kind"]].append(r)
            by_kind["all"].append(r)
    out = {}
    for kind, part in by_kind.items():
        ranks = [x for r in part for x in r["evidence_ranks"]]
        found = sum(1 for x in ranks if x is not None and x <= 10)
        low, high = wilson(found, len(ranks))
        out[kind] = {
            "questions": len(part),
            "evidence_turns": len(ranks),
            "R@5": round(statistics.fmean(share_in_top(r["evidence_ranks"], 5) for r in part), 3),
            "R@10": round(statistics.fmean(share_in_top(r["evidence_ranks"], 10) for r in part), 3),
            "R@10_turns": round(found / len(ranks), 3),
            "R@10_turns_wilson95": [round(low, 3), round(high, 3)],
            "all_in_top10": sum(1 for r in part if share_in_top(r["evidence_ranks"], 10) == 1.0),
        }
    return out


def print_evidence(summary: dict[str, dict[str, Any]]) -> None:
    print("| kind | questions | evidence turns | R@5 | R@10 "
          "| R@10 over evidence turns (95 % Wilson) | all evidence in the top 10 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for kind, s in summary.items():
        low, high = s["R@10_turns_wilson95"]
        print(f"| {kind} | {s['questions']} | {s['evidence_turns']} | {s['R@5']:.3f} "
              f"| {s['R@10']:.3f} | {s['R@10_turns']:.3f} [{low:.3f}, {high:.3f}] "
              f"| {s['all_in_top10']} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=Path, default=HERE / "data" / "word_traps.jsonl")
    parser.add_argument(
        "--questions", type=Path, default=HERE / "data" / "word_traps_questions.json"
    )
    parser.add_argument("--url", help="a running Memora (write API), archive already posted")
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--explain", action="store_true", help="print each question's signals")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "word_traps.json")
    args = parser.parse_args()
    questions = json.loads(args.questions.read_text())["questions"]

    def run(url: str, post: bool) -> list[dict[str, Any]]:
        # the demo's posting helpers (services.cli.demo) take the httpx client under memora's
        with httpx.Client(base_url=url, timeout=120) as client:
            if post:
                _, ops, _ = post_archive(client, args.archive)
                states = wait_for_operations(client, ops)
                if set(states.values()) != {"completed"}:
                    raise SystemExit(f"ingest did not complete: {states}")
            memora = MemoraClient(http_client=client, max_retries=0)
            return [ask(memora, q, args.top_k) for q in questions]

    if args.url:
        rows = run(args.url, post=False)
    else:
        with embedded_stack(with_query=True) as stack:
            rows = run(stack.url, post=True)
    for r in rows:
        mark = "TRAPPED" if r["trapped"] else ""
        evidence = f"  evidence {r['evidence_ranks']}" if "evidence_ranks" in r else ""
        print(f"[{r['kind']}] {r['question']}  answer #{r['answer_rank']}  "
              f"distractor #{r['distractor_rank']} {mark}{evidence}")  # fmt: skip
        if args.explain:
            for e in r["explain"]:
                print(f"    {e}")
    summary = summarise(rows)
    print("| kind | questions | hit@1 | hit@3 | MRR | distractor above the answer |")
    print("|---|---|---|---|---|---|")
    for kind, s in summary.items():
        print(f"| {kind} | {s['questions']} | {s['hit@1']:.3f} | {s['hit@3']:.3f} "
              f"| {s['MRR']:.3f} | {s['trapped']} |")  # fmt: skip
    report: dict[str, Any] = {"summary": summary, "questions": rows}
    if evidence := summarise_evidence(rows):
        print_evidence(evidence)
        report["evidence"] = evidence
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
