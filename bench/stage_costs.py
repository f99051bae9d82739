"""What each ingest stage costs a message when operations carry one message, against eight
(issue 60): the pipeline's own work, without Celery or the broker.

    python bench/stage_costs.py                       # 256 messages, stage batches of 8
    python bench/stage_costs.py --messages 512 --batch 1

On an embedded PostgreSQL, the same LoCoMo turns are appended to 8 conversations twice: one
message an append (one operation each), then eight an append. Each stage is then run in
process over the operations, `--batch` at a time (`memora.pipeline.batch.run_batch`, as a
worker's stage batcher runs them). Per message and stage: this process's CPU, the PostgreSQL
server's CPU, and the wall time. The difference between the two shapes is what an operation
costs of its own; `bench/round_trips.py` adds the tasks, transactions and statements of the
whole stack.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from append import LOCOMO, turns
from ingest import locomo_sessions

from memora.basics.config import Settings
from memora.basics.models import MemoryItem
from memora.basics.stages import INGEST_STAGES, Stage
from memora.basics.tenancy import Scope
from memora.db.migrate import upgrade
from memora.db.pool import make_pool
from memora.infra.embedded import EmbeddedPostgres
from memora.pipeline.batch import run_batch
from memora.pipeline.context import AppContext
from memora.pipeline.runner import Pipeline
from memora.usecases import ingest

START = datetime(2024, 1, 1, tzinfo=UTC)
CONVERSATIONS = 8


class Unsent:
    """A task backend that sends nothing: the bench runs every stage itself."""

    def enqueue(self, *args: Any, **kwargs: Any) -> None:
        return None


def server_cpu(pg: EmbeddedPostgres) -> float:
    """CPU seconds of the PostgreSQL server's processes so far."""
    total = 0.0
    for p in psutil.process_iter(["cmdline"]):
        if str(pg.pgdata) in " ".join(p.info["cmdline"] or []):
            for proc in (p, *p.children(recursive=True)):
                try:
                    t = proc.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    continue
    return total


def appended(app: AppContext, agent: str, items: list[MemoryItem], per: int) -> list[UUID]:
    """The items appended `per` at a time, the conversations in turn; the operations."""
    ops = []
    with app.pool.connection() as conn:
        for k in range(0, len(items), per):
            conversation = f"c{(k // per) % CONVERSATIONS}"
            done = ingest.append(app, conn, Scope(), agent, conversation, items[k : k + per])
            ops.append(done.operation_id)
    return ops


def run_stages(
    pipeline: Pipeline, pg: EmbeddedPostgres, ops: list[UUID], batch: int, messages: int
) -> dict[Stage, tuple[float, float, float]]:
    """Each stage over the operations, `batch` at a time: ms a message (python, postgres,
    wall)."""
    costs: dict[Stage, tuple[float, float, float]] = {}
    for stage in INGEST_STAGES:
        cpu, server, wall = time.process_time(), server_cpu(pg), time.perf_counter()
        for k in range(0, len(ops), batch):
            for outcome in run_batch(pipeline, stage, ops[k : k + batch]).values():
                outcome.unwrap()
        spent = (time.process_time() - cpu, server_cpu(pg) - server, time.perf_counter() - wall)
        costs[stage] = (1000 * spent[0] / messages, 1000 * spent[1] / messages,
                        1000 * spent[2] / messages)  # fmt: skip
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8, help="operations a stage batch")
    args = parser.parse_args()
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="memora-stage-costs-")))
    url = pg.start()
    try:
        upgrade(url, 384)
        settings = Settings(
            database_url=url, append_coalesce_messages=1, stage_batch_size=args.batch
        )
        pool = make_pool(url, min_size=1, max_size=4, name="stage-costs")
        app = AppContext(settings, pool, Unsent())
        pipeline = Pipeline(settings, pool)
        items = [
            MemoryItem(
                content=t["content"], speaker=t["speaker"], role=t["role"],
                message_id=f"m{i}", event_date=START + timedelta(minutes=i),
            )
            for i, t in enumerate(turns(locomo_sessions(LOCOMO))[: args.messages])
        ]  # fmt: skip
        run_stages(pipeline, pg, appended(app, "warm-up", items[:32], 1), args.batch, 32)
        print(f"{args.messages} messages, stage batches of {args.batch} operations; ms a message")
        print(f"{'stage':16s} {'one an operation':>28s}   {'eight an operation':>28s}")
        print(f"{'':16s} {'python  postgres    wall':>28s}   {'python  postgres    wall':>28s}")
        shapes = [
            run_stages(pipeline, pg, appended(app, f"per-{per}", items, per), args.batch,
                       len(items))
            for per in (1, 8)
        ]  # fmt: skip
        for stage in INGEST_STAGES:
            cells = ["{:8.2f}{:10.2f}{:8.2f}".format(*shape[stage]) for shape in shapes]
            print(f"{stage.value:16s} {cells[0]:>28s}   {cells[1]:>28s}")
        totals = [[sum(s[x][i] for x in INGEST_STAGES) for i in range(3)] for s in shapes]
        cells = ["{:8.2f}{:10.2f}{:8.2f}".format(*t) for t in totals]
        print(f"{'all':16s} {cells[0]:>28s}   {cells[1]:>28s}")
        pool.close()
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
