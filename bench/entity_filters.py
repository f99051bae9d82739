"""The entity retriever under filters the semantic retriever ranks exactly (issue 29): how
many of a named entity's mentions pass, how well each way finds the units a comparison of
every passing mention finds, and what each costs alone.

    python bench/entity_filters.py --size 100000 --questions 120

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), for every question naming one of the agent's entities and each
filter of `--filters` (`search_latency.FILTER_SETS`): the semantic retriever's exact scan
gives every unit that passes; then `entity_arm.entity_units` three ways:
"exhaustive", every mention compared with its full embedding, the filter in SQL (the
reference); "checked", the way of a walked filter, the best signatures checked against the
filter by key until enough pass; "kept", the mentions held in memory kept to the units the
scan found. Recall is the share of the reference's units each way keeps; times are medians
of the call alone (the scan excluded: the search makes it anyway).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py: the agent, its questions and filters
from compare import guard_arguments, guard_database  # bench/compare.py: the guard's data

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.nlp.embedding import embedder_for
from memora.retrieval import expansion
from memora.retrieval.arms import entity as entity_arm
from memora.retrieval.arms import exact
from memora.retrieval.arms.exact import EXACT_SCAN_CAP
from memora.retrieval.caches.mentions import MentionSignatures, query_signature
from memora.retrieval.filters import Matching
from memora.retrieval.types import SearchScope


def measure(url: str, questions: list[str], filters: list[str]) -> dict[str, dict[str, Any]]:
    settings = Settings(database_url=url, row_security=True)
    pool = make_pool(url, min_size=1, max_size=2, name="bench", row_security=True)
    embedder = embedder_for(settings, 0, queries=True)
    held = MentionSignatures(1 << 28, 600.0)
    report: dict[str, dict[str, Any]] = {}
    try:
        for name in filters:
            found: list[dict[str, Any]] = []
            for question in questions:
                scope = bench.filter_scope(name, question)
                with pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
                    if one := _question(conn, scope, question, settings, embedder, held):
                        found.append(one)
            report[name] = _summary(found)
            print(name, report[name], flush=True)
    finally:
        pool.close()
    return report


def _question(
    conn: Any, scope: SearchScope, question: str, s: Settings, embedder: Any,
    held: MentionSignatures,
) -> dict[str, Any] | None:  # fmt: skip
    """The three ways on one question (None when it names none of the agent's entities)."""
    named = entity_arm.query_entities(conn, scope, names=expansion.phrases(question))
    if not named:
        return None
    names = {n for matched in named.values() for n in matched}
    vector = embedder.embed_queries([expansion.without_names(question, names)])[0]
    scan = exact.exact_scan(conn, scope, vector=vector, limit=50, at_most=EXACT_SCAN_CAP)
    if scan is None:
        raise SystemExit("more units pass the filter than an exact scan ranks")
    matching = Matching()
    matching.know_all(scan.ids)  # more than exact_max: the mentions held in memory kept to them
    known = matching.complete or frozenset()
    call = {
        "conn": conn, "scope": scope, "entity_ids": list(named), "vector": vector,
        "per_entity": s.entity_units_per_entity, "min_similarity": s.entity_min_similarity,
        "mentions": held, "exact_max": s.filter_exact_scan_max,
    }  # fmt: skip
    ways = {
        "exhaustive": call | {"exact_max": 1 << 30},
        "checked": call,
        "kept": call | {"matching": matching},
    }
    units, ms = {}, {}
    for way, kwargs in ways.items():
        started = time.perf_counter()
        units[way] = {u for u, _ in entity_arm.entity_units(**kwargs)}
        ms[way] = (time.perf_counter() - started) * 1000
    oversample = entity_arm.FILTERED_SIGNATURES * entity_arm.SIGNATURE_OVERSAMPLE
    checked = oversample * s.entity_units_per_entity
    query, passing, among = query_signature(vector), [], []
    for entity in named:
        listed = held.read(conn, scope.tenant_id, [entity])[entity]
        passing.append(len(listed.rows_in(known)))
        among.append(sum(u in known for u in listed.nearest(query, checked)))
    reference = units["exhaustive"]
    recall = {
        way: len(units[way] & reference) / len(reference) for way in ("checked", "kept")
    } if reference else {}  # fmt: skip
    return {"ms": ms, "recall": recall, "passing": passing, "among_checked": among}


def _summary(found: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 1) if values else 0.0

    recalled = [f["recall"] for f in found if f["recall"]]
    return {
        "questions": len(found),
        "recall": {
            w: round(statistics.mean(r[w] for r in recalled), 3) for w in ("checked", "kept")
        }
        if recalled
        else {},
        "ms_alone_median": {
            w: median([f["ms"][w] for f in found]) for w in ("exhaustive", "checked", "kept")
        },
        "passing_mentions_median": median([n for f in found for n in f["passing"]]),
        "of_them_among_the_checked_signatures": median(
            [n for f in found for n in f["among_checked"]]
        ),
    }


def main() -> None:
    parser = guard_arguments(__doc__.split("\n\n")[0], ["scene (5%)", "speaker (5%)", "time (4%)"])
    args = parser.parse_args()
    with guard_database(args.size, args.data_root) as url:
        measure(url, bench.questions(args.questions), args.filters)


if __name__ == "__main__":
    main()
