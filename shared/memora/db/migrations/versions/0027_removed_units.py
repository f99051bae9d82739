"""Which units a removal concerns (issue 29), so that a query service holding an agent's links
(`memora.retrieval.caches.agent_links`) takes a unit forgotten, superseded or deleted, or a
unit's links deleted, in place, where it read all the agent's links again after every one
(seconds of PostgreSQL at 100k memories: docs/benchmarks.md, "Held links through removals"):
on a live chat each superseded fact was one such read.

- `vector_removals.units`: the units whose `memory_vectors` rows the statement deleted or
  whose filter columns it changed (the holder asks which of them are still active).
- `link_removals.units`: the source units of the links the statement deleted (their lists are
  read again). A unit back to active still writes a row without units (NULL: the holder reads
  the agent's links whole again, as do rows from before this migration).
- Compaction keeps each agent's (tenant's) latest row with NULL units, as it no longer stands
  for the rows it replaced (`memora.store.vector_removals`).

Revision ID: 0027_removed_units
Revises: 0026_link_changes
Create Date: 2026-11-27
"""

from alembic import op

revision = "0027_removed_units"
down_revision = "0026_link_changes"
branch_labels = None
depends_on = None

CURRENT = "pg_current_xact_id()::text::int8"  # see 0023
# as in 0024: the columns a filter reads
FILTERED = ("agent_id", "fact_type", "metadata", "event_date", "occurred_start", "occurred_end")


def _vectors_removed(units: bool) -> str:
    changed = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in FILTERED)
    column, deleted, updated = (
        (", units", ", array_agg(unit_id)", ", array_agg(o.unit_id)") if units else ("", "", "")
    )
    return f"""
        CREATE OR REPLACE FUNCTION memory_vectors_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                INSERT INTO vector_removals (agent_id, removed{column})
                SELECT agent_id, {CURRENT}{deleted} FROM old_rows GROUP BY agent_id;
            ELSE  -- an UPDATE: the agents whose rows' filter columns it changed
                INSERT INTO vector_removals (agent_id, removed{column})
                SELECT o.agent_id, {CURRENT}{updated}
                FROM old_rows o JOIN new_rows n ON n.unit_id = o.unit_id
                WHERE {changed} GROUP BY o.agent_id;
            END IF;
            RETURN NULL;
        END $$
    """


def _links_removed(units: bool) -> str:
    column, value = (", units", ", array_agg(DISTINCT from_unit)") if units else ("", "")
    return f"""
        CREATE OR REPLACE FUNCTION memory_links_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO link_removals (tenant_id, removed{column})
            SELECT tenant_id, {CURRENT}{value} FROM old_rows GROUP BY tenant_id;
            RETURN NULL;
        END $$
    """


def upgrade() -> None:
    op.execute("ALTER TABLE vector_removals ADD COLUMN units uuid[]")
    op.execute("ALTER TABLE link_removals ADD COLUMN units uuid[]")
    op.execute(_vectors_removed(True))
    op.execute(_links_removed(True))


def downgrade() -> None:
    op.execute(_links_removed(False))
    op.execute(_vectors_removed(False))
    op.execute("ALTER TABLE link_removals DROP COLUMN units")
    op.execute("ALTER TABLE vector_removals DROP COLUMN units")
