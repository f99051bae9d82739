"""What a filter costs a search, in process: the guard's questions through `Retriever.search`, each
unfiltered and under the filter one after the other (which goes first alternating), and each step
of the read path's CPU time in its own thread (`time.thread_time` around the steps of
`bench/search_timeline.py`, found by name), per search, side by side.

    python bench/filter_cost.py --filter "type (99.9%)" --searches 300

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), under row-level security, after 20 warm-up searches of each side
(the filter's held units read in the background meanwhile, waited for): the median wall time of
each side and of the per-question ratios, the process's CPU per search, and each step's thread
CPU per search (a step inside another counts in both). Thread CPU is what a step takes of the
two cores the query's embedding also needs; the wall times include the timers (a few µs a
step). For the latency a user sees, take the HTTP figures of `bench/search_latency.py
--filters NAME`.
"""

from __future__ import annotations

import functools
import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py: the agent and its questions
from compare import guard_database  # bench/compare.py: the guard's data
from search_timeline import arguments, query_service, settle  # bench/search_timeline.py

from memora.retrieval.arms import entity as entity_arm
from memora.retrieval.filters import Filters
from memora.retrieval.retriever import Retriever
from memora.retrieval.types import SearchParams

SIDES = ("unfiltered", "filtered")


class StepCPU:
    """Thread CPU seconds of each wrapped step, by side (the side of the search running)."""

    def __init__(self) -> None:
        self.side = SIDES[0]
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self._lock = threading.Lock()

    def wrap(self, owner: Any, name: str) -> None:
        function: Callable[..., Any] = getattr(owner, name)
        label = f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            begun = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                took = time.thread_time() - begun
                with self._lock:
                    self.seconds[(self.side, label)] += took

        setattr(owner, name, timed)


def run(url: str, searches: int, filter_name: str) -> None:
    steps = StepCPU()
    for owner, name in [(Retriever, "_search"), (entity_arm, "entity_units")]:
        steps.wrap(owner, name)
    filters = {SIDES[0]: None, SIDES[1]: Filters.model_validate(bench.FILTER_SETS[filter_name])}
    questions = bench.questions(searches + 20)
    wall: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, float] = dict.fromkeys(SIDES, 0.0)

    with query_service(url, steps.wrap) as retriever:

        def search(side: str, question: str) -> None:
            steps.side = side
            started, used = time.perf_counter(), time.process_time()
            params = SearchParams(agent_id=bench.AGENT, query=question, filters=filters[side])
            retriever.search(params)
            wall[side].append((time.perf_counter() - started) * 1000)
            cpu[side] += time.process_time() - used

        for question in questions[:20]:
            for side in SIDES:
                search(side, question)
        settle(retriever, url)
        steps.seconds.clear()
        for side in SIDES:
            wall[side].clear()
            cpu[side] = 0.0
        for i, question in enumerate(questions[20:]):
            for side in SIDES if i % 2 == 0 else SIDES[::-1]:
                search(side, question)
    report(filter_name, wall, cpu, steps.seconds, searches)


def report(
    filter_name: str,
    wall: dict[str, list[float]],
    cpu: dict[str, float],
    seconds: dict[tuple[str, str], float],
    searches: int,
) -> None:
    ratios = [f / u for u, f in zip(wall[SIDES[0]], wall[SIDES[1]], strict=True)]
    print(f"{searches} questions, unfiltered and {filter_name!r} alternating")
    for side in SIDES:
        ms = cpu[side] * 1000 / searches
        print(f"{side:12s} wall median {statistics.median(wall[side]):6.2f} ms, CPU {ms:6.2f} ms")
    print(f"per-question ratio (median): {statistics.median(ratios):.3f}")
    labels = sorted({label for _, label in seconds}, key=lambda x: -seconds[(SIDES[0], x)])
    print(
        f"\n{'thread CPU per search (ms)':40s} {'unfiltered':>10s} {'filtered':>10s} {'diff':>8s}"
    )
    for label in labels:
        a, b = (seconds[(side, label)] * 1000 / searches for side in SIDES)
        print(f"{label:40s} {a:10.3f} {b:10.3f} {b - a:+8.3f}")


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0], default_filter="type (99.9%)").parse_args()
    with guard_database(args.size, args.data_root) as url:
        run(url, args.searches, args.filter)


if __name__ == "__main__":
    main()
