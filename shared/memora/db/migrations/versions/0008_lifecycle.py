"""Memory lifecycle (seed 002 §4.3–4.6): importance, category, status, evidence, an audit trail.

- `memory_units` gains `importance` (1–10; 5 for the units stored before, the middle of the
  scale), `category`, `status` (active, superseded, forgotten, archived) with when and why it
  last changed (`status_at`, `status_reason`), `superseded_by` (the unit that replaced it) and
  `evidence_count` (how many times the fact was stated: merges add to it). Reflections are units
  of fact type `reflection`. Only active units are searchable: the semantic, temporal, graph and
  hydration queries say `status = 'active'`, and the keyword table `memory_search` keeps rows of
  active units only (its trigger now also fires on a status change), so a status change leaves or
  rejoins every retriever in the transaction that makes it.
- The last access stays in `memory_access` (narrow rows, written off the request path).
- `memory_events`: every change to a memory (what, when, why, by which operation or key). It has
  no foreign key: the events of a purged memory outlive it (an agent's deletion removes them).
- `job_cursors`: where a bounded periodic job stopped, per agent, so the next run resumes there.
- `memory_links` accepts `explicit` links (the `link` operation, with their `relationship`) and
  `reflection` links (between a reflection and its sources).

Revision ID: 0008_lifecycle
Revises: 0007_conversations
Create Date: 2026-11-24
"""

from alembic import op

revision = "0008_lifecycle"
down_revision = "0007_conversations"
branch_labels = None
depends_on = None

_LINK_TYPES = "'temporal', 'semantic', 'entity', 'causes', 'caused_by', 'enables', 'prevents'"

_SYNC = """
CREATE OR REPLACE FUNCTION memory_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.embedding IS NULL OR {inactive} THEN
        DELETE FROM memory_search WHERE unit_id = NEW.id;
    ELSE
        INSERT INTO memory_search (unit_id, agent_id, fact_type, event_date, search_vector)
        VALUES (NEW.id, NEW.agent_id, NEW.fact_type, NEW.event_date, NEW.search_vector)
        ON CONFLICT (unit_id) DO UPDATE SET
            agent_id = EXCLUDED.agent_id, fact_type = EXCLUDED.fact_type,
            event_date = EXCLUDED.event_date, search_vector = EXCLUDED.search_vector;
    END IF;
    RETURN NULL;
END $$
"""


def _update_trigger(columns: str) -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_search_update ON memory_units")
    op.execute(
        f"CREATE TRIGGER memory_search_update AFTER UPDATE OF {columns} ON memory_units "
        "FOR EACH ROW EXECUTE FUNCTION memory_search_sync()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_search_update")


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE memory_units
            ADD COLUMN importance REAL NOT NULL DEFAULT 5 CHECK (importance BETWEEN 1 AND 10),
            ADD COLUMN category TEXT,
            ADD COLUMN status TEXT NOT NULL DEFAULT 'active'
                CHECK (status IN ('active', 'superseded', 'forgotten', 'archived')),
            ADD COLUMN status_at TIMESTAMPTZ,
            ADD COLUMN status_reason TEXT,
            ADD COLUMN superseded_by UUID REFERENCES memory_units(id) ON DELETE SET NULL,
            ADD COLUMN evidence_count INTEGER NOT NULL DEFAULT 1 CHECK (evidence_count >= 1)
        """
    )
    op.execute("ALTER TABLE memory_units DROP CONSTRAINT IF EXISTS memory_units_fact_type_check")
    op.execute(
        "ALTER TABLE memory_units ADD CONSTRAINT memory_units_fact_type_check "
        "CHECK (fact_type IN ('world', 'agent', 'opinion', 'reflection'))"
    )
    # what the cleanup and the restore windows read: the few units that are not active
    op.execute(
        "CREATE INDEX idx_memory_units_inactive ON memory_units (agent_id, status, status_at) "
        "WHERE status <> 'active'"
    )
    # graph retrieval skips links to inactive units: one probe of this small index per link
    op.execute(
        "CREATE INDEX idx_memory_units_inactive_id ON memory_units (id) WHERE status <> 'active'"
    )
    op.execute("CREATE INDEX idx_memory_units_agent_category ON memory_units (agent_id, category)")
    op.execute(
        """
        CREATE TABLE memory_events (
            id         BIGSERIAL PRIMARY KEY,
            agent_id   TEXT NOT NULL,
            unit_id    UUID NOT NULL,
            event      TEXT NOT NULL,
            related_id UUID,
            reason     TEXT,
            actor      TEXT NOT NULL,
            details    JSONB NOT NULL DEFAULT '{}',
            at         TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX idx_memory_events_unit ON memory_events (unit_id, at)")
    op.execute("CREATE INDEX idx_memory_events_agent ON memory_events (agent_id, at)")
    op.execute(
        """
        CREATE TABLE job_cursors (
            job        TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            position   JSONB NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (job, agent_id)
        )
        """
    )
    op.execute("ALTER TABLE memory_links ADD COLUMN relationship TEXT")
    op.execute("ALTER TABLE memory_links DROP CONSTRAINT IF EXISTS memory_links_link_type_check")
    op.execute(
        "ALTER TABLE memory_links ADD CONSTRAINT memory_links_link_type_check "
        f"CHECK (link_type IN ({_LINK_TYPES}, 'explicit', 'reflection'))"
    )
    op.execute(_SYNC.format(inactive="NEW.status <> 'active'"))
    _update_trigger("embedding, text, agent_id, fact_type, event_date, status")


def downgrade() -> None:
    op.execute(_SYNC.format(inactive="false"))
    _update_trigger("embedding, text, agent_id, fact_type, event_date")
    op.execute("DELETE FROM memory_links WHERE link_type IN ('explicit', 'reflection')")
    op.execute("ALTER TABLE memory_links DROP CONSTRAINT IF EXISTS memory_links_link_type_check")
    op.execute(
        "ALTER TABLE memory_links ADD CONSTRAINT memory_links_link_type_check "
        f"CHECK (link_type IN ({_LINK_TYPES}))"
    )
    op.execute("ALTER TABLE memory_links DROP COLUMN IF EXISTS relationship")
    op.execute("DROP TABLE IF EXISTS job_cursors")
    op.execute("DROP TABLE IF EXISTS memory_events")
    op.execute("DELETE FROM memory_units WHERE fact_type = 'reflection'")
    op.execute("ALTER TABLE memory_units DROP CONSTRAINT IF EXISTS memory_units_fact_type_check")
    op.execute(
        "ALTER TABLE memory_units ADD CONSTRAINT memory_units_fact_type_check "
        "CHECK (fact_type IN ('world', 'agent', 'opinion'))"
    )
    op.execute("DROP INDEX IF EXISTS idx_memory_units_agent_category")
    op.execute("DROP INDEX IF EXISTS idx_memory_units_inactive_id")
    op.execute("DROP INDEX IF EXISTS idx_memory_units_inactive")
    op.execute(
        """
        ALTER TABLE memory_units DROP COLUMN IF EXISTS importance,
            DROP COLUMN IF EXISTS category, DROP COLUMN IF EXISTS status,
            DROP COLUMN IF EXISTS status_at, DROP COLUMN IF EXISTS status_reason,
            DROP COLUMN IF EXISTS superseded_by, DROP COLUMN IF EXISTS evidence_count
        """
    )
