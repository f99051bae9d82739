"""What bench/ scripts compute, on inputs whose answers are worked out by hand: LoCoMo's
`score` and `summarise` (bench/locomo.py), and the change-detector set
(bench/data/changes_eval.jsonl) run through the real detector as bench/changes.py runs it
(the configured embedding model's similarity, spaCy's entities, `rules.decide`)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memora.basics.config import Settings

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import changes  # bench/ is not a package: found through the path above
import locomo

RANKED = [f"D1:{i}" for i in range(1, 61)]  # sixty turns, best first


def test_locomo_score_counts_evidence_in_the_top_k_and_the_first_hits_rank() -> None:
    # evidence at ranks 3, 7 and 30, and one turn never retrieved
    evidence = {"D1:3", "D1:7", "D1:30", "D9:9"}
    assert locomo.score(RANKED, evidence) == pytest.approx(
        {"R@5": 1 / 4, "R@10": 2 / 4, "R@20": 2 / 4, "R@50": 3 / 4, "MRR": 1 / 3}
    )
    assert locomo.score(RANKED, {"D1:1"}) == {
        "R@5": 1.0, "R@10": 1.0, "R@20": 1.0, "R@50": 1.0, "MRR": 1.0,
    }  # fmt: skip
    # found only past 50: no recall at any k, yet a reciprocal rank
    assert locomo.score(RANKED, {"D1:55"}) == pytest.approx(
        {"R@5": 0.0, "R@10": 0.0, "R@20": 0.0, "R@50": 0.0, "MRR": 1 / 55}
    )
    assert locomo.score([], {"D1:1"}) == {"R@5": 0.0, "R@10": 0.0, "R@20": 0.0, "R@50": 0.0,
                                          "MRR": 0.0}  # fmt: skip


def test_locomo_evidence_ids_are_normalised() -> None:
    assert locomo.evidence_ids(["D8:6; D9:17", "D:11:26", "D30:05", "no evidence"]) == {
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
    }


def _question(category: int) -> Any:
    return locomo.Question("conv-1", "?", category, {"D1:1"}, datetime(2024, 1, 1, tzinfo=UTC))


def test_locomo_summary_averages_overall_and_by_category() -> None:
    def scores(r10: float, mrr: float) -> dict[str, float]:
        return {"R@10": r10, "MRR": mrr}

    rows = [
        (_question(1), scores(1.0, 1.0)),
        (_question(1), scores(0.0, 0.0)),
        (_question(4), scores(0.5, 1 / 3)),
    ]
    summary = locomo.summarise(rows)
    assert summary["questions"] == 3
    assert summary["overall"] == {"R@10": 0.5, "MRR": 0.444}
    assert summary["multi-hop"] == {"R@10": 0.5, "MRR": 0.5}
    assert summary["single-hop"] == {"R@10": 0.5, "MRR": 0.333}
    assert summary["temporal"] == {} and summary["open-domain"] == {}  # no such questions


def test_changes_report_counts_by_hand() -> None:
    rows = [
        {"category": "move", "expected": "SUPERSEDE"},
        {"category": "move", "expected": "SUPERSEDE"},
        {"category": "visit", "expected": "ADD"},
        {"category": "visit", "expected": "ADD"},
        {"category": "repeat", "expected": "MERGE"},
    ]
    made = ["SUPERSEDE", "ADD", "SUPERSEDE", "ADD", "MERGE"]
    assert changes.report(rows, made) == {
        "pairs": 5,
        "right": 0.6,
        "supersede_precision": 0.5,
        "supersede_recall": 0.5,
        "distinct_facts_superseded": 1,
        "repeats_merged": "1/1",
        "by_category": {"move": "1/2", "repeat": "1/1", "visit": "1/2"},
    }


# The set's misses when its figures were taken (docs/benchmarks.md, "Changes of state in
# natural language"): a parse the small English model gets wrong, a nominal or indirect change,
# a contraction. A miss outside these is a regression of the detector.
KNOWN_MISSES = {
    ("Jun lives in Osaka.", "Jun finally made the move to Tokyo."),
    ("Gareth works as a bus driver.", "Gareth quit driving buses."),
    ("Yuki works at Sony.", "Yuki handed in her notice at Sony and left in May."),
    ("I am an assistant manager.", "I got promoted to store manager!"),
    ("Noor's favourite game is chess.", "Noor's favourite game is now go."),
    ("You can reach Ahmed at ahmed@uni.example.", "Ahmed changed his email to a.k@work.example."),
    ("Dev's team lead is Alex.", "Dev's team lead is now Priscilla."),
    ("Emma's line manager is Raj.", "Raj is no longer Emma's line manager; it's Tanya now."),
    ("I am allergic to peanuts.", "I'm allergic to peanuts."),
}


def test_the_change_detector_set_through_the_real_detector() -> None:
    rows = changes.load(changes.DEFAULT_DATA)
    made = changes.decisions(rows, Settings())
    missed = {
        (r["old"], r["new"]) for r, got in zip(rows, made, strict=True) if got != r["expected"]
    }
    assert missed <= KNOWN_MISSES, sorted(missed - KNOWN_MISSES)
    result = changes.report(rows, made)
    assert result["pairs"] == 196
    assert result["right"] >= 0.95, result
    assert result["distinct_facts_superseded"] == 0, result  # no distinct fact replaced
    assert result["supersede_precision"] == 1.0, result


def test_coalesced_posts_are_each_timed_from_their_own_post() -> None:
    """bench/common.py's `seconds_after_post`: two appends that share an operation, each
    measured from its own POST; a POST whose operation has no such time is left out."""
    import common

    def at(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).isoformat()

    shared = {"id": "op1", "finished_at": at(110.0), "stages": {"links": {"finished_at": at(105)}}}
    alone = {"id": "op2", "finished_at": None, "stages": {}}
    posts = [("op1", 100.0), ("op1", 103.0), ("op2", 104.0)]
    assert common.seconds_after_post([shared, alone], posts, "links") == [5.0, 2.0]
    assert common.seconds_after_post([shared, alone], posts) == [10.0, 7.0]


def test_the_stack_parts_a_process_is_counted_in() -> None:
    import common

    worker = ["python", "-m", "celery", "-A", "services.workers.tasks", "worker", "-n", "embed-7@h"]
    assert common._part(worker, "python") == "embed"
    assert common._part(["python", "-m", "celery", "-A", "x", "beat"], "python") == "beat"
    assert common._part(["postgres: memora idle"], "postgres") == "postgres"
    assert common._part(["/usr/bin/redis-server", "127.0.0.1:1"], "redis-server") == "redis"
    query = ["python", "-m", "uvicorn", "services.api.query_app:create_app"]
    assert common._part(query, "python") == "query"
    assert (
        common._part(["python", "-m", "uvicorn", "services.api.app:create_app"], "python") == "api"
    )
