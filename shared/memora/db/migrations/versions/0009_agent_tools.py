"""Metadata filters inside every retriever (issue 12), indexed.

- `memora_num(jsonb)`: a JSON number as numeric, else NULL (never an error), so that a range
  on a metadata key (`turn`) compares whatever other units hold there.
- memory_units: GIN (agent_id, metadata jsonb_path_ops) for containment (`metadata @> ...`:
  equalities, one-of lists, tags) within one agent; btree (agent_id, memora_num(metadata ->
  'turn')) for turn ranges (episodic dialogue).
- memory_search (the keyword retriever's narrow table, migration 0005) gains the columns the
  filters read (metadata, occurred_start, occurred_end), kept by its trigger like the others,
  and the same GIN and turn indexes, so BM25 matching applies the filter before scoring.

Revision ID: 0009_agent_tools
Revises: 0008_lifecycle
Create Date: 2026-11-24
"""

from alembic import op

revision = "0009_agent_tools"
down_revision = "0008_lifecycle"
branch_labels = None
depends_on = None

_SYNC = """
CREATE OR REPLACE FUNCTION memory_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.embedding IS NULL OR NEW.status <> 'active' THEN  -- 0008_lifecycle: active only
        DELETE FROM memory_search WHERE unit_id = NEW.id;
    ELSE
        INSERT INTO memory_search (unit_id, agent_id, fact_type, event_date, search_vector{extra})
        VALUES (NEW.id, NEW.agent_id, NEW.fact_type, NEW.event_date, NEW.search_vector{new})
        ON CONFLICT (unit_id) DO UPDATE SET
            agent_id = EXCLUDED.agent_id, fact_type = EXCLUDED.fact_type,
            event_date = EXCLUDED.event_date, search_vector = EXCLUDED.search_vector{set};
    END IF;
    RETURN NULL;
END $$
"""
_UPDATE_TRIGGER = (
    "CREATE TRIGGER memory_search_update AFTER UPDATE OF embedding, text, agent_id, "
    "fact_type, event_date, status{extra} ON memory_units FOR EACH ROW "
    "EXECUTE FUNCTION memory_search_sync()"
)


def upgrade() -> None:
    op.execute(
        "CREATE FUNCTION memora_num(value jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE "
        "PARALLEL SAFE AS $$ SELECT CASE WHEN jsonb_typeof(value) = 'number' "
        "THEN (value #>> '{}')::numeric END $$"
    )
    op.execute(
        "CREATE INDEX idx_memory_units_metadata ON memory_units "
        "USING GIN (agent_id, metadata jsonb_path_ops)"
    )
    op.execute(
        "CREATE INDEX idx_memory_units_turn ON memory_units "
        "(agent_id, memora_num(metadata -> 'turn'))"
    )
    op.execute(
        "ALTER TABLE memory_search ADD COLUMN metadata JSONB NOT NULL DEFAULT '{}', "
        "ADD COLUMN occurred_start TIMESTAMPTZ, ADD COLUMN occurred_end TIMESTAMPTZ"
    )
    op.execute(
        _SYNC.format(
            extra=", metadata, occurred_start, occurred_end",
            new=", NEW.metadata, NEW.occurred_start, NEW.occurred_end",
            set=", metadata = EXCLUDED.metadata, occurred_start = EXCLUDED.occurred_start, "
            "occurred_end = EXCLUDED.occurred_end",
        )
    )
    op.execute("DROP TRIGGER memory_search_update ON memory_units")
    op.execute(_UPDATE_TRIGGER.format(extra=", metadata, occurred_start, occurred_end"))
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_search_update")
    op.execute(
        "UPDATE memory_search s SET metadata = m.metadata, occurred_start = m.occurred_start, "
        "occurred_end = m.occurred_end FROM memory_units m "
        "WHERE m.id = s.unit_id AND (m.metadata <> '{}' OR m.occurred_start IS NOT NULL)"
    )
    op.execute(
        "CREATE INDEX idx_memory_search_metadata ON memory_search "
        "USING GIN (agent_id, metadata jsonb_path_ops)"
    )
    op.execute(
        "CREATE INDEX idx_memory_search_turn ON memory_search "
        "(agent_id, memora_num(metadata -> 'turn'))"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_memory_search_turn")
    op.execute("DROP INDEX IF EXISTS idx_memory_search_metadata")
    op.execute("DROP TRIGGER memory_search_update ON memory_units")
    op.execute(_UPDATE_TRIGGER.format(extra=""))
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_search_update")
    op.execute(_SYNC.format(extra="", new="", set=""))
    op.execute(
        "ALTER TABLE memory_search DROP COLUMN metadata, DROP COLUMN occurred_start, "
        "DROP COLUMN occurred_end"
    )
    op.execute("DROP INDEX IF EXISTS idx_memory_units_turn")
    op.execute("DROP INDEX IF EXISTS idx_memory_units_metadata")
    op.execute("DROP FUNCTION IF EXISTS memora_num(jsonb)")
