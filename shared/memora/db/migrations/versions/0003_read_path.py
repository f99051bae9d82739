"""Read path: access counts in their own table, an OR-aggregate for tsqueries, time indexes.

- `memory_access` holds access_count (and the last access) per unit. Counting a search hit
  in `memory_units` itself would rewrite a wide row (its embedding) and its HNSW, GIN and
  btree entries on every search; this narrow table takes HOT updates instead.
- `tsquery_or_agg(tsquery)` ORs tsqueries together, so the keyword retriever builds its
  query from the lexemes PostgreSQL itself parsed, never from tsquery syntax in user text.
- `(agent_id, occurred_start)` lets the temporal retriever find memories by when they
  happened as well as by when they were said.

Revision ID: 0003_read_path
Revises: 0002_opinion_versions
Create Date: 2026-11-24
"""

from alembic import op

revision = "0003_read_path"
down_revision = "0002_opinion_versions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE memory_access (
            unit_id          UUID PRIMARY KEY REFERENCES memory_units(id) ON DELETE CASCADE,
            access_count     INTEGER NOT NULL DEFAULT 0,
            last_accessed_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "INSERT INTO memory_access (unit_id, access_count) "
        "SELECT id, access_count FROM memory_units WHERE access_count > 0"
    )
    op.execute("ALTER TABLE memory_units DROP COLUMN access_count")
    op.execute(
        # tsquery_or is strict: the first row becomes the state; no rows give NULL.
        "CREATE AGGREGATE tsquery_or_agg(tsquery) (SFUNC = tsquery_or, STYPE = tsquery)"
    )
    op.execute(
        "CREATE INDEX idx_memory_units_agent_occurred ON memory_units (agent_id, occurred_start) "
        "WHERE occurred_start IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_memory_units_agent_occurred")
    op.execute("DROP AGGREGATE IF EXISTS tsquery_or_agg(tsquery)")
    op.execute("ALTER TABLE memory_units ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0")
    op.execute(
        "UPDATE memory_units u SET access_count = a.access_count "
        "FROM memory_access a WHERE a.unit_id = u.id"
    )
    op.execute("DROP TABLE memory_access")
