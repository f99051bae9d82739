"""Narrow reads for the read path: a keyword table of its own, graph steps from an index alone.

Keyword search. BM25 needs each matching unit's tsvector, so the keyword retriever reads every
unit its GIN index matches. In `memory_units` those rows are ~2 kB wide (the embedding is stored inline:
below PostgreSQL's 2 kB TOAST threshold, so `toast_tuple_target` cannot move it), about four
to a page; `memory_search` holds only what keyword search reads (~170 B a row), so a common
word's matches come from a quarter of the pages. Its GIN index leads with agent_id
(btree_gin), so one agent's matches never walk another agent's rows; `(agent_id,
event_date DESC)` serves a common word: the agent's units newest first, until the keyword
retriever's match budget is filled. The keyword retriever now passes its tsquery as a
parameter (the planner must see it to choose between the two), so the `tsquery_or_agg`
aggregate of migration 0003 is dropped.

A row exists for every embedded unit (the searchable ones), written by a trigger on
`memory_units`, also when rows arrive by COPY with triggers off for replication
(ENABLE ALWAYS); a unit's deletion removes its row (ON DELETE CASCADE). The GIN index on
`memory_units.search_vector` is dropped: nothing reads through it any more.

Graph retrieval asks for each explored unit's strongest links. `(from_unit, weight DESC,
to_unit) INCLUDE (link_type)` answers that by an index-only scan that stops after the fanout,
where the primary key needed a heap visit per link and a sort (measured at 100k memories:
docs/benchmarks-history.md, "Search latency").

Revision ID: 0005_narrow_reads
Revises: 0004_tenants
Create Date: 2026-11-24
"""

from alembic import op

revision = "0005_narrow_reads"
down_revision = "0004_tenants"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.execute(
        """
        CREATE TABLE memory_search (
            unit_id       UUID PRIMARY KEY REFERENCES memory_units(id) ON DELETE CASCADE,
            agent_id      TEXT NOT NULL,
            fact_type     TEXT NOT NULL,
            event_date    TIMESTAMPTZ NOT NULL,
            search_vector TSVECTOR NOT NULL
        )
        """
    )
    op.execute(
        """
        CREATE FUNCTION memory_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.embedding IS NULL THEN
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
    )
    op.execute(
        "CREATE TRIGGER memory_search_insert AFTER INSERT ON memory_units FOR EACH ROW "
        "WHEN (NEW.embedding IS NOT NULL) EXECUTE FUNCTION memory_search_sync()"
    )
    op.execute(
        "CREATE TRIGGER memory_search_update AFTER UPDATE OF embedding, text, agent_id, "
        "fact_type, event_date ON memory_units FOR EACH ROW EXECUTE FUNCTION memory_search_sync()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_search_insert")
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_search_update")
    op.execute(
        "INSERT INTO memory_search (unit_id, agent_id, fact_type, event_date, search_vector) "
        "SELECT id, agent_id, fact_type, event_date, search_vector FROM memory_units "
        "WHERE embedding IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX idx_memory_search_fts ON memory_search USING GIN (agent_id, search_vector)"
    )
    op.execute("CREATE INDEX idx_memory_search_recent ON memory_search (agent_id, event_date DESC)")
    op.execute("DROP INDEX IF EXISTS idx_memory_units_fts")
    op.execute("DROP AGGREGATE IF EXISTS tsquery_or_agg(tsquery)")
    op.execute(
        "CREATE INDEX idx_memory_links_strongest ON memory_links "
        "(from_unit, weight DESC, to_unit) INCLUDE (link_type)"
    )


def downgrade() -> None:
    op.execute("CREATE AGGREGATE tsquery_or_agg(tsquery) (SFUNC = tsquery_or, STYPE = tsquery)")
    op.execute("DROP INDEX IF EXISTS idx_memory_links_strongest")
    op.execute("CREATE INDEX idx_memory_units_fts ON memory_units USING GIN (search_vector)")
    op.execute("DROP TRIGGER IF EXISTS memory_search_update ON memory_units")
    op.execute("DROP TRIGGER IF EXISTS memory_search_insert ON memory_units")
    op.execute("DROP FUNCTION IF EXISTS memory_search_sync()")
    op.execute("DROP TABLE IF EXISTS memory_search")
