"""What a search's follow-up round costs beyond its LLM call (issue 59; memora.usecases.follow_up):
the LoCoMo dev questions searched in process on a `locomo_sweep.py --hold` database, each alone
and then with a follow-up round of `--queries` queries, the planner answering at once with as
many other questions of the same agent (the searches' cost, not the LLM's: add the provider's
latency to the second figure).

    python bench/locomo_sweep.py --hold &          # prints MEMORA_DATABASE_URL
    python bench/follow_up_cost.py --database-url URL [--queries 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.nlp.embedding import embedder_for
from memora.retrieval import Retriever
from memora.retrieval.types import SearchParams
from memora.usecases.follow_up import FollowUpQueries, search_with_follow_up

sys.path.insert(0, str(Path(__file__).parent))
import locomo
from locomo_sweep import NoAccess


class InstantPlanner:
    """Stands in for the LLM client: answers the plan at once with `queries`."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def complete_json(self, operation: str, messages: Any, schema: Any) -> FollowUpQueries:
        return FollowUpQueries(queries=self.queries)


def main() -> None:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMORA_DATABASE_URL"))
    parser.add_argument(
        "--data", type=Path, default=here.parent.parent / "shared/locomo/locomo_dev.json"
    )
    parser.add_argument("--queries", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not args.database_url:
        parser.error("--database-url (or MEMORA_DATABASE_URL) of a locomo_sweep.py --hold run")
    questions = locomo.load_questions(json.loads(args.data.read_text()), "locomo-")
    by_agent: dict[str, list[str]] = {}
    for q in questions:
        by_agent.setdefault(q.agent_id, []).append(q.text)
    settings = Settings(database_url=args.database_url)
    rng, planner = random.Random(1), InstantPlanner()
    took: dict[str, list[float]] = {"alone": [], f"with {args.queries} follow-up queries": []}
    with make_pool(args.database_url, min_size=1, max_size=30) as pool:
        retriever = Retriever(
            settings, pool, embedder_for(settings, 0, queries=True), access=NoAccess(pool)
        )
        try:
            for q in [*questions[:20], *questions * args.rounds]:  # the first 20: warm-up
                params = SearchParams(
                    agent_id=q.agent_id, query=q.text, top_k=10, reference_time=q.reference
                )
                planner.queries = rng.sample(by_agent[q.agent_id], args.queries)
                started = time.perf_counter()
                retriever.search(params)
                alone = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                search_with_follow_up(retriever, planner, params, args.queries)  # type: ignore[arg-type]
                followed = (time.perf_counter() - started) * 1000
                took["alone"].append(alone)
                took[f"with {args.queries} follow-up queries"].append(followed)
        finally:
            retriever.close()
    for name, values in took.items():
        values = values[20:]
        p95 = statistics.quantiles(values, n=20)[-1]
        print(f"{name:28s} p50 {statistics.median(values):6.1f}  p95 {p95:6.1f} ms")


if __name__ == "__main__":
    main()
