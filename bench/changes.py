"""The rules' decisions on pairs of natural statements: an older memory, a newer statement and
the verdict a person expects (SUPERSEDE, ADD, MERGE or SKIP), by category.

    python bench/changes.py [--data bench/data/changes_eval.jsonl] [--show-errors]

Each pair goes through `memora.lifecycle.rules.decide` as remember compares them: the real
embedding similarity (the configured model) and the entities spaCy finds, rules only (no LLM).
Reports per category the share of decisions right; SUPERSEDE precision and recall; distinct
facts wrongly superseded (an expected ADD decided SUPERSEDE; target 0); repeats merged (expected
MERGE decided MERGE); overall decisions right. `--data` runs any file of the same format (one
JSON object a line: category, old, new, expected, note), such as a held-out set.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from memora.basics.config import Settings
from memora.lifecycle.memory import mentions_of
from memora.lifecycle.rules import Decision, Statement, Thresholds, decide
from memora.nlp.embedding import get_embedder

DEFAULT_DATA = Path(__file__).parent / "data" / "changes_eval.jsonl"


def load(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for r in rows:
        if r["expected"] not in Decision.__members__:
            raise SystemExit(f"{path}: unknown expected decision {r['expected']!r}")
    return rows


def decisions(rows: list[dict[str, Any]], s: Settings) -> list[str]:
    embedder = get_embedder(
        s.embedding_model, s.torch_threads, s.embedding_batch_size, s.embedding_backend,
        s.model_cache_dir,
    )  # fmt: skip
    olds = np.asarray(embedder.embed([r["old"].strip() for r in rows]))
    news = np.asarray(embedder.embed([r["new"].strip() for r in rows]))
    t = Thresholds(s.merge_similarity, s.supersede_similarity)
    made = []
    for r, a, b in zip(rows, olds, news, strict=True):
        similarity = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        names = [
            frozenset(m.name.casefold() for m in mentions_of(r[k].strip())) for k in ("old", "new")
        ]
        old = Statement(r["old"].strip(), names[0], uuid.uuid4(), similarity)
        made.append(decide(Statement(r["new"].strip(), names[1]), [old], t).decision.value)
    return made


def report(rows: list[dict[str, Any]], made: list[str]) -> dict[str, Any]:
    by_category: dict[str, Counter[str]] = defaultdict(Counter)
    for r, got in zip(rows, made, strict=True):
        by_category[r["category"]]["right" if got == r["expected"] else "wrong"] += 1
    pairs = list(zip((r["expected"] for r in rows), made, strict=True))
    said = sum(got == "SUPERSEDE" for _, got in pairs)
    meant = sum(exp == "SUPERSEDE" for exp, _ in pairs)
    both = sum(exp == got == "SUPERSEDE" for exp, got in pairs)
    repeats = sum(exp == "MERGE" for exp, _ in pairs)
    return {
        "pairs": len(rows),
        "right": round(sum(exp == got for exp, got in pairs) / len(rows), 3),
        "supersede_precision": round(both / said, 3) if said else None,
        "supersede_recall": round(both / meant, 3) if meant else None,
        "distinct_facts_superseded": sum(exp == "ADD" and got == "SUPERSEDE" for exp, got in pairs),
        "repeats_merged": f"{sum(exp == got == 'MERGE' for exp, got in pairs)}/{repeats}",
        "by_category": {
            c: f"{n['right']}/{n['right'] + n['wrong']}" for c, n in sorted(by_category.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--show-errors", action="store_true", help="print every wrong decision")
    parser.add_argument("--json", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    rows = load(args.data)
    made = decisions(rows, Settings())
    result = report(rows, made)
    if args.show_errors:
        for r, got in zip(rows, made, strict=True):
            if got != r["expected"]:
                print(f"{r['category']}: expected {r['expected']}, got {got}: "
                      f"{r['old']!r} -> {r['new']!r}")  # fmt: skip
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
