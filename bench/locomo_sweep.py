"""Settings compared on one ingested copy of LoCoMo, in-process (the API's retriever, fresh code,
no access counting: every variant sees the same database, so runs are repeatable).

    python bench/locomo_sweep.py --hold        # embedded stack, dev split ingested; prints its URL
                                               # (kill PID stops it and everything it started)
    python bench/locomo_sweep.py --database-url URL --only conv-26 \
        base 'ctx3:heuristic_context_weight=0.3' 'w:rrf_weights={"graph":0.5}'

A variant is `name` (the defaults) or `name:field=value;field=value` over
memora.basics.config.Settings
fields (values parsed as JSON when they parse, else kept as strings). Prints R@5/10/20, MRR and
R@10 per category for each variant; with --analyse also where evidence leaves the top 10.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from uuid import UUID

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.infra.embedded import free_port
from memora.nlp.embedding import embedder_for
from memora.retrieval import Retriever
from memora.retrieval.access import AccessRecorder
from memora.retrieval.types import SearchParams
from memora_client import MemoraClient

sys.path.insert(0, str(Path(__file__).parent))
import locomo
import locomo_trace


class NoAccess(AccessRecorder):
    """Counts nothing: the frequency signal stays as it was for every variant."""

    def record(self, ids: Iterable[UUID]) -> None:
        return None


def parse_variant(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = spec.partition(":")
    overrides: dict[str, Any] = {}
    for part in filter(None, rest.split(";")):
        key, _, value = part.partition("=")
        try:
            overrides[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key.strip()] = value
    return name, overrides


def hold(data: Path, prefix: str) -> None:
    from services.cli.stack import Stack

    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="memora-sweep-")), port=free_port(),
        query_port=free_port(),
    )  # fmt: skip
    stack = Stack(settings, log_dir=settings.data_dir / "logs")
    # SIGTERM (kill) ends the wait below (a background job ignores SIGINT); it only sets a
    # flag, so that a second one (`timeout` passes its own on) cannot cut the clean-up short
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    stack.start()
    try:
        stack.wait_ready()
        with MemoraClient(
            f"http://{settings.host}:{settings.port}", timeout=120, max_retries=0
        ) as c:
            items, seconds = locomo.ingest(c, data, prefix)
        print(f"ingested {items} turns in {seconds:.1f}s", flush=True)
        print(f"MEMORA_DATABASE_URL={settings.database_url}", flush=True)
        while not stopping.wait(0.5):
            stack.check_alive()
    finally:
        stack.stop()


def evaluate(
    retriever: Retriever, questions: list[locomo.Question], dia_of: dict[str, str] | None
) -> tuple[dict[str, Any], list[locomo.Fate]]:
    rows, fates = [], []
    for q in questions:
        outcome = retriever.search(
            SearchParams(agent_id=q.agent_id, query=q.text, top_k=50,
                         reference_time=q.reference, trace=dia_of is not None)
        )  # fmt: skip
        ranked = [str(h.metadata.get("dia_id", "")) for h in outcome.hits]
        rows.append((q, locomo.score(ranked, q.evidence)))
        if dia_of is not None and outcome.trace is not None:
            category = locomo.CATEGORIES[q.category]
            fates += locomo_trace.fates(outcome.trace, dia_of, q.evidence, category)
    return locomo.summarise(rows), fates


def main() -> None:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=here.parent.parent / "shared/locomo/locomo_dev.json"
    )
    parser.add_argument("--prefix", default="locomo-")
    parser.add_argument("--hold", action="store_true", help="start, ingest, wait")
    parser.add_argument("--database-url", default=os.environ.get("MEMORA_DATABASE_URL"))
    parser.add_argument("--only", action="append", metavar="SAMPLE_ID")
    parser.add_argument("--analyse", action="store_true")
    parser.add_argument("variants", nargs="*", default=["defaults"])
    args = parser.parse_args()
    if args.hold:
        hold(args.data, args.prefix)
        return
    if not args.database_url:
        parser.error("--database-url (or MEMORA_DATABASE_URL) of a --hold run")
    data = json.loads(args.data.read_text())
    if args.only:
        data = [c for c in data if c["sample_id"] in args.only]
    questions = locomo.load_questions(data, args.prefix)
    dia_of = (
        locomo.dia_ids(args.database_url, {q.agent_id for q in questions}) if args.analyse else None
    )
    base = Settings(database_url=args.database_url)
    embedder = embedder_for(base, 0, queries=True)  # as the query service embeds queries
    with make_pool(args.database_url, min_size=1, max_size=8) as pool:
        for spec in args.variants:
            name, overrides = parse_variant(spec)
            settings = Settings(database_url=args.database_url, **overrides)
            retriever = Retriever(settings, pool, embedder, access=NoAccess(pool))
            started = time.perf_counter()
            try:
                summary, fates = evaluate(retriever, questions, dia_of)
            finally:
                retriever.close()
            o = summary["overall"]
            cats = " / ".join(
                f"{summary[c]['R@10']:.3f}" if summary[c] else "-"
                for c in locomo.CATEGORIES.values()
            )
            print(
                f"{name:24s} R@5 {o['R@5']:.3f} R@10 {o['R@10']:.3f} R@20 {o['R@20']:.3f} "
                f"MRR {o['MRR']:.3f} | {cats} | {time.perf_counter() - started:.0f}s",
                flush=True,
            )
            if args.analyse:
                print(locomo_trace.report(locomo_trace.summarise(fates)), flush=True)


if __name__ == "__main__":
    main()
