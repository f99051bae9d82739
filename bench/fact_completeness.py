"""The subject-and-verb check of LLM facts (memora.extraction.completeness) on its labelled set:
how many flagged texts are fragments (precision: a false flag costs one re-ask, never a fact,
since the model's answer stands) and how many fragments it flags (recall).

    python bench/fact_completeness.py [--set tests/data/fact_completeness.jsonl]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memora.extraction.completeness import incomplete

DEFAULT_SET = Path(__file__).parents[1] / "tests" / "data" / "fact_completeness.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.set.read_text().splitlines() if line.strip()]
    flagged = set(incomplete([r["text"] for r in rows]))
    fragments = {i for i, r in enumerate(rows) if not r["complete"]}
    for i in sorted(flagged - fragments):
        print(f"flagged, complete: {rows[i]['text']}")
    for i in sorted(fragments - flagged):
        print(f"missed fragment:   {rows[i]['text']}")
    hits = len(flagged & fragments)
    print(
        f"{len(rows)} texts, {len(fragments)} fragments: precision {hits}/{len(flagged)} = "
        f"{hits / max(1, len(flagged)):.3f}, recall {hits}/{len(fragments)} = "
        f"{hits / max(1, len(fragments)):.3f}"
    )


if __name__ == "__main__":
    main()
