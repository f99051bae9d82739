"""The entity relation reader (memora.lifecycle.entity_relations) on labelled sentences:
precision and recall of the relations it reads, overall and by category.

    python bench/entity_relations.py [--data bench/data/entity_relations_eval.jsonl] [--show-errors]

Each line of the data is one statement (`text`) and the relations a person reads in it:
`relations` (held or begun) and `ends` (ended), each `[subject, relation, object]` in
normalised names; a symmetric relation matches in either order. An end counts as a relation of
its own: reading "left Deloitte" as working there is wrong twice (a false relation, a missed
end). `--data` runs any file of the same format, such as a held-out set.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memora.lifecycle.entity_relations import Relation, read

DEFAULT_DATA = Path(__file__).parent / "data" / "entity_relations_eval.jsonl"
Key = tuple[str, str, str, bool]


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expected(row: dict[str, Any]) -> set[Key]:
    made = [Relation(s, r, o) for s, r, o in row["relations"]]
    made += [Relation(s, r, o, "end") for s, r, o in row["ends"]]
    return {(*r.key(), r.mode == "end") for r in made}


def predicted(text: str) -> set[Key]:
    return {(*r.key(), r.mode == "end") for r in read(text)}


@dataclass
class Score:
    right: int = 0
    wrong: int = 0
    missed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.right / (self.right + self.wrong) if self.right + self.wrong else 1.0

    @property
    def recall(self) -> float:
        return self.right / (self.right + self.missed) if self.right + self.missed else 1.0


def score(rows: list[dict[str, Any]]) -> tuple[Score, dict[str, Score]]:
    total, by = Score(), defaultdict[str, Score](Score)
    for row in rows:
        want, got = expected(row), predicted(row["text"])
        for s in (total, by[row["category"]]):
            s.right += len(want & got)
            s.wrong += len(got - want)
            s.missed += len(want - got)
        if want != got:
            wrong, missed = sorted(got - want), sorted(want - got)
            total.errors.append(f"{row['text']!r}\n    wrong: {wrong}\n    missed: {missed}")
    return total, dict(by)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args()
    rows = load(args.data)
    total, by = score(rows)
    print(f"{len(rows)} sentences, {total.right + total.missed} labelled relations")
    for name, s in sorted(by.items()):
        print(f"  {name:14} precision {s.precision:.3f}  recall {s.recall:.3f}  "
              f"({s.right} right, {s.wrong} wrong, {s.missed} missed)")  # fmt: skip
    print(f"overall: precision {total.precision:.3f}  recall {total.recall:.3f}  "
          f"({total.right} right, {total.wrong} wrong, {total.missed} missed)")  # fmt: skip
    if args.show_errors:
        print("\n".join(total.errors))


if __name__ == "__main__":
    main()
