"""Time-range indexes (issue 12): a `time` filter and the temporal retriever's range are index
conditions.

A unit lies in a range by when it happened (occurred_start/end, from the extractor) or,
lacking that, by when it was said (event_date): the condition of `memora.retrieval.filters`
(`time`) and of the temporal retriever is an OR of the two. Without indexes on these columns
a narrow range could be read only by walking the HNSW index past every unit outside it (a
month of a two-year history cost the semantic retriever many times its unfiltered time; an
empty range walked 20,000 units). On `memory_vectors` and
`memory_search`, each branch now has its own partial btree indexes, so the planner reads a
range as a bitmap OR of index ranges, and the retrievers' estimates (`semantic.plan_scan`) see
how many units it holds:

- said: (agent_id, event_date) for units with no occurred date, on `memory_vectors` (on
  `memory_search`, the recent-first index of migration 0005 already serves it);
- occurred: (agent_id, occurred_start) and (agent_id, coalesce(occurred_end,
  occurred_start)) for the others, whose span overlaps the range when it starts before the
  range's end and ends after its start (two one-sided bounds; the planner takes the narrower
  or ANDs both).

Timestamp comparisons are leakproof, so the indexes serve under row-level security too.

Revision ID: 0013_time_indexes
Revises: 0012_memory_vectors
Create Date: 2026-11-25
"""

from alembic import op

revision = "0013_time_indexes"
down_revision = "0012_memory_vectors"
branch_labels = None
depends_on = None

SAID = {"said": "(agent_id, event_date) WHERE occurred_start IS NULL"}
OCCURRED = {
    "occurred": "(agent_id, occurred_start) WHERE occurred_start IS NOT NULL",
    "occurred_end": (
        "(agent_id, (coalesce(occurred_end, occurred_start))) WHERE occurred_start IS NOT NULL"
    ),
}
INDEXES = {"memory_vectors": SAID | OCCURRED, "memory_search": OCCURRED}


def upgrade() -> None:
    for table, indexes in INDEXES.items():
        for name, definition in indexes.items():
            op.execute(f"CREATE INDEX idx_{table}_{name} ON {table} {definition}")
        op.execute(f"ANALYZE {table}")


def downgrade() -> None:
    for table, indexes in INDEXES.items():
        for name in indexes:
            op.execute(f"DROP INDEX IF EXISTS idx_{table}_{name}")
