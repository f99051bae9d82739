"""Where a search's time goes, step by step: the guard's questions through `Retriever.search`
in process (no HTTP), each step of the read path timed from the search's start.

    python bench/search_timeline.py --size 100000 --searches 300

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), under row-level security, after 20 warm-up searches: for each
step, the median over the searches that ran it of when it started and ended (ms from the
search's start), of its busy time (summed over its calls) and of its calls, in order of
start; then the slowest searches with their longest steps, and the process's CPU per
search. `--filter NAME` searches under one of `search_latency.FILTER_SETS` (the warm-up fills
what the query service holds for it; its background reads are waited for). The steps are
wrapped with timers (module functions and methods, found by name), which
adds ~15 % to the total: read the order and the shares, and take latency from the guard.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py: the agent and its questions
from common import analyze_accesses  # bench/common.py
from compare import DATA_ROOT, guard_database  # bench/compare.py: the guard's data

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.nlp.embedding import embedder_for
from memora.retrieval import fusion
from memora.retrieval import retriever as retriever_module
from memora.retrieval.arms import entity, exact, graph, history, keyword, semantic, temporal
from memora.retrieval.arms.keyword import KeywordIndex
from memora.retrieval.filters import Filters
from memora.retrieval.retriever import Retriever
from memora.retrieval.types import SearchParams

# (owner, attribute): what is timed
STEPS: list[tuple[Any, str]] = [
    (retriever_module, "parse_query_range"),
    (entity.EntityArm, "_named"),
    (keyword.KeywordArm, "retrieve"),
    (KeywordIndex, "stats"),
    (KeywordIndex, "best"),
    (exact, "plan_scan"),
    (semantic.SemanticArm, "_learn_failing"),
    (semantic, "nearest"),
    (graph.GraphArm, "retrieve"),
    (graph, "links"),
    (entity, "entity_units"),
    (temporal.TemporalArm, "retrieve"),
    (history.HistoryArm, "retrieve"),
    (fusion, "fuse"),
    (fusion, "hydrate"),
    (Retriever, "_diversify"),
]

Span = tuple[float, float]


class Timeline:
    """The spans of the current search's steps, by step name."""

    def __init__(self) -> None:
        self.started = 0.0
        self.spans: dict[str, list[Span]] = {}

    def wrap(self, owner: Any, name: str) -> None:
        function: Callable[..., Any] = getattr(owner, name)
        step = f"{getattr(owner, '__name__', type(owner).__name__).rsplit('.', 1)[-1]}.{name}"

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            begun = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                span = (begun - self.started, time.perf_counter() - self.started)
                self.spans.setdefault(step, []).append(span)

        setattr(owner, name, timed)


@contextmanager
def query_service(url: str, wrap: Callable[[Any, str], None]) -> Iterator[Retriever]:
    """A retriever as the query service makes one (row-level security, a 12-connection pool,
    the query embedder), each of STEPS and the embedder's two calls passed to `wrap` first;
    closed on leaving."""
    for owner, name in STEPS:
        wrap(owner, name)
    settings = Settings(database_url=url, row_security=True)
    pool = make_pool(url, min_size=2, max_size=12, name="query", row_security=True)
    embedder = embedder_for(settings, 0, queries=True)
    for name in ("embed_queries", "count_tokens"):
        wrap(embedder, name)
    retriever = Retriever(settings, pool, embedder)
    try:
        yield retriever
    finally:
        retriever.close()
        pool.close()


def settle(retriever: Retriever, url: str) -> None:
    """After the warm-up: what it had read in the background in (a filter's units),
    `memory_access` analysed, the objects so far frozen for the garbage collector."""
    retriever.caches.settled()  # the filter's reads, queued
    time.sleep(0.5)
    analyze_accesses(url)
    gc.freeze()


def arguments(description: str, default_filter: str | None = None) -> argparse.ArgumentParser:
    """The options of the in-process tools on the guard's data that search under a filter."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT)
    parser.add_argument(
        "--filter", default=default_filter,
        choices=sorted(k for k in bench.FILTER_SETS if k != "none"),
    )  # fmt: skip
    return parser


def run(url: str, searches: int, filter_name: str | None = None) -> None:
    timeline = Timeline()
    questions = bench.questions(searches + 20)
    chosen = bench.FILTER_SETS[filter_name] if filter_name else None
    filters = Filters.model_validate(chosen) if chosen else None

    def params(question: str) -> SearchParams:
        return SearchParams(agent_id=bench.AGENT, query=question, filters=filters)

    with query_service(url, timeline.wrap) as retriever:
        for question in questions[:20]:
            retriever.search(params(question))
        settle(retriever, url)
        totals: list[float] = []
        per_search: list[dict[str, list[Span]]] = []
        cpu = time.process_time()
        for question in questions[20:]:
            timeline.spans = {}
            timeline.started = time.perf_counter()
            retriever.search(params(question))
            totals.append((time.perf_counter() - timeline.started) * 1000)
            per_search.append(timeline.spans)
        cpu_ms = (time.process_time() - cpu) * 1000 / searches
    report(questions[20:], totals, per_search, cpu_ms)


def report(
    questions: list[str],
    totals: list[float],
    per_search: list[dict[str, list[Span]]],
    cpu_ms: float,
) -> None:
    def ms(seconds: float) -> float:
        return seconds * 1000

    steps: dict[str, list[tuple[float, float, float, int]]] = {}
    for spans in per_search:
        for name, calls in spans.items():
            busy = sum(end - start for start, end in calls)
            steps.setdefault(name, []).append(
                (ms(calls[0][0]), ms(calls[-1][1]), ms(busy), len(calls))
            )
    print(f"{len(totals)} searches: total median {statistics.median(totals):.1f} ms (timed), "
          f"process CPU {cpu_ms:.1f} ms a search")  # fmt: skip
    print(f"{'step':20s} {'searches':>8s} {'start':>7s} {'end':>7s} {'busy':>7s} {'calls':>5s}")
    for name, rows in sorted(steps.items(), key=lambda kv: statistics.median(r[0] for r in kv[1])):
        start, end, busy, count = (statistics.median(r[i] for r in rows) for i in range(4))
        print(f"{name:20s} {len(rows):8d} {start:7.2f} {end:7.2f} {busy:7.2f} {count:5.0f}")
    print("\nslowest searches (ms), each with its five longest steps:")
    for i in sorted(range(len(totals)), key=lambda i: -totals[i])[:10]:
        longest = sorted(
            ((name, ms(calls[-1][1] - calls[0][0])) for name, calls in per_search[i].items()),
            key=lambda kv: -kv[1],
        )[:5]
        steps_text = ", ".join(f"{name} {took:.1f}" for name, took in longest)
        print(f"{totals[i]:6.1f}  {questions[i][:60]!r}: {steps_text}")


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0]).parse_args()
    with guard_database(args.size, args.data_root) as url:
        run(url, args.searches, args.filter)


if __name__ == "__main__":
    main()
