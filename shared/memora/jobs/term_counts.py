"""term_counts (issue 29): fold the keyword statistics' delta rows (`memory_terms`, written by
triggers on every change to `memory_search`) into one row per agent and lexeme, so the keyword
retriever's document frequencies stay a few index entries to read. Each agent gets up to ten
transactions of MEMORA_TERM_COUNTS_BATCH_SIZE lexemes a run; what is left waits for the next
run and is counted meanwhile all the same (a df is the sum of its rows, folded or not). It also
keeps only each agent's latest row of `vector_removals` (migration 0024), the same kind of
append-only bookkeeping of the read path."""

from __future__ import annotations

from memora.jobs.base import JobContext, JobResult
from memora.store import terms, vector_removals

BATCHES_PER_RUN = 10


def run(ctx: JobContext) -> JobResult:
    batch = ctx.settings.term_counts_batch_size
    result = JobResult(
        details={"agents": 0, "rows_folded": 0, "rows_written": 0, "removals_dropped": 0}
    )
    with ctx.pool.connection() as conn:
        with conn.transaction():
            result.details["removals_dropped"] = vector_removals.compact(conn, ctx.agent_key)
        for key in terms.agents_with_deltas(conn, ctx.agent_key):
            result.details["agents"] += 1
            for _ in range(BATCHES_PER_RUN):
                with conn.transaction():
                    folded, written = terms.compact(conn, key, batch)
                result.examined += folded
                result.changed += folded
                result.details["rows_folded"] += folded
                result.details["rows_written"] += written
                if folded == 0:
                    break
    return result
