"""A narrow table of half-precision embeddings for the read path (issue 12).

An embedding (384 float4, 1.5 kB) makes a `memory_units` row about 2 kB, past PostgreSQL's
TOAST threshold once text and metadata are added: at 100k memories 88 % of the embeddings lay
out of line, so every distance computed from the heap cost a TOAST index probe and a page.
A filtered search that ranks the units matching its filter exactly paid that for each of them
(most of its time went to TOAST), and the HNSW walk paid it for every unit it returned.

`memory_vectors` holds, for every searchable unit (embedded and active, as `memory_search`),
what the semantic, temporal and entity retrievers read: the agent, fact type, the filter
columns (metadata, event and occurred dates) and the embedding as `halfvec` stored inline
(768 B, no TOAST; cosine within ~1e-3 of float4, and the candidates are scored again from the
float4 embedding when hydrated). Its HNSW index (halfvec_cosine_ops) replaces the one on
`memory_units.embedding`: half the size, and every k-nearest query (retrieval, semantic links,
the lifecycle's look-ups) reads from here. Ranking a filter's units exactly no longer
touches TOAST (docs/benchmarks-history.md, "Filtered search after `memory_vectors`").

The metadata filters now read `memory_vectors` (semantic, temporal, entity retrievers, the
graph's checks) and `memory_search` (keyword), so the metadata and turn indexes of
`memory_units` (0009, 0011) go: as many indexes to keep up on a write as before. On
`memory_search` one GIN index over (agent_id, search_vector, metadata jsonb_path_ops) replaces
the two over (agent_id, search_vector) and (agent_id, metadata): a filtered keyword search is
then one index scan matching words and filter together, where the planner had read every row
the filter matched and checked the words on the heap (unfiltered unchanged), and the one
index is smaller than the two (9.5 MB against 15.6 MB at 100k).

Rows follow `memory_units` through triggers, as `memory_search` does (0005, 0008): written
when a unit is embedded and active, removed when it is not, also for rows that arrive by COPY
with triggers off for replication (ENABLE ALWAYS); a deleted unit's row goes with it (ON
DELETE CASCADE). Row-level security as on every tenant-scoped table.

Revision ID: 0012_memory_vectors
Revises: 0011_filtered_search
Create Date: 2026-11-25
"""

from alembic import context, op

revision = "0012_memory_vectors"
down_revision = "0011_filtered_search"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
COPIED = "agent_id, fact_type, metadata, event_date, occurred_start, occurred_end"


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute(
        f"""
        CREATE TABLE memory_vectors (
            unit_id        UUID PRIMARY KEY REFERENCES memory_units(id) ON DELETE CASCADE,
            agent_id       TEXT NOT NULL,
            tenant_id      TEXT NOT NULL GENERATED ALWAYS AS (memora_key_tenant(agent_id)) STORED,
            fact_type      TEXT NOT NULL,
            metadata       JSONB NOT NULL DEFAULT '{{}}',
            event_date     TIMESTAMPTZ NOT NULL,
            occurred_start TIMESTAMPTZ,
            occurred_end   TIMESTAMPTZ,
            embedding      HALFVEC({dim}) NOT NULL
        )
        """
    )
    op.execute("ALTER TABLE memory_vectors ALTER COLUMN embedding SET STORAGE PLAIN")
    excluded = ", ".join(f"{c} = EXCLUDED.{c}" for c in (*COPIED.split(", "), "embedding"))
    new = ", ".join(f"NEW.{c}" for c in COPIED.split(", "))
    op.execute(
        f"""
        CREATE FUNCTION memory_vectors_sync() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.embedding IS NULL OR NEW.status <> 'active' THEN
                DELETE FROM memory_vectors WHERE unit_id = NEW.id;
            ELSE
                INSERT INTO memory_vectors (unit_id, {COPIED}, embedding)
                VALUES (NEW.id, {new}, NEW.embedding::halfvec({dim}))
                ON CONFLICT (unit_id) DO UPDATE SET {excluded};
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_vectors_insert AFTER INSERT ON memory_units FOR EACH ROW "
        "WHEN (NEW.embedding IS NOT NULL) EXECUTE FUNCTION memory_vectors_sync()"
    )
    op.execute(
        f"CREATE TRIGGER memory_vectors_update AFTER UPDATE OF embedding, status, {COPIED} "
        "ON memory_units FOR EACH ROW EXECUTE FUNCTION memory_vectors_sync()"
    )
    for trigger in ("memory_vectors_insert", "memory_vectors_update"):
        op.execute(f"ALTER TABLE memory_units ENABLE ALWAYS TRIGGER {trigger}")
    op.execute(
        f"INSERT INTO memory_vectors (unit_id, {COPIED}, embedding) "
        f"SELECT id, {COPIED}, embedding::halfvec({dim}) FROM memory_units "
        "WHERE embedding IS NOT NULL AND status = 'active'"
    )
    op.execute(
        "CREATE INDEX idx_memory_vectors_metadata ON memory_vectors "
        "USING GIN (agent_id, metadata jsonb_path_ops)"
    )
    op.execute(
        "CREATE INDEX idx_memory_vectors_turn ON memory_vectors "
        "(agent_id, memora_number(metadata, 'turn'))"
    )
    op.execute(
        "CREATE INDEX idx_memory_vectors_embedding ON memory_vectors "
        "USING hnsw (embedding halfvec_cosine_ops)"
    )
    op.execute("DROP INDEX idx_memory_units_embedding")
    op.execute("DROP INDEX idx_memory_units_metadata")
    op.execute("DROP INDEX idx_memory_units_turn")
    op.execute(
        "CREATE INDEX idx_memory_search_match ON memory_search "
        "USING GIN (agent_id, search_vector, metadata jsonb_path_ops)"
    )
    op.execute("DROP INDEX idx_memory_search_fts")
    op.execute("DROP INDEX idx_memory_search_metadata")
    # the semantic retriever chooses between an exact scan and the HNSW walk by the planner's
    # count of a filter's units, estimated from these samples (default 100: up to 2× off)
    op.execute("ALTER TABLE memory_vectors ALTER COLUMN metadata SET STATISTICS 1000")
    op.execute("ALTER TABLE memory_vectors ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_vectors FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON memory_vectors TO {TENANT_ROLE} "
        f"USING ({POLICY}) WITH CHECK ({POLICY})"
    )
    op.execute("ANALYZE memory_vectors")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_vectors_update ON memory_units")
    op.execute("DROP TRIGGER IF EXISTS memory_vectors_insert ON memory_units")
    op.execute("DROP FUNCTION IF EXISTS memory_vectors_sync()")
    op.execute("DROP TABLE IF EXISTS memory_vectors")
    op.execute(
        "CREATE INDEX idx_memory_search_fts ON memory_search USING GIN (agent_id, search_vector)"
    )
    op.execute(
        "CREATE INDEX idx_memory_search_metadata ON memory_search "
        "USING GIN (agent_id, metadata jsonb_path_ops)"
    )
    op.execute("DROP INDEX IF EXISTS idx_memory_search_match")
    op.execute(
        "CREATE INDEX idx_memory_units_metadata ON memory_units "
        "USING GIN (agent_id, metadata jsonb_path_ops)"
    )
    op.execute(
        "CREATE INDEX idx_memory_units_turn ON memory_units "
        "(agent_id, memora_number(metadata, 'turn'))"
    )
    op.execute(
        "CREATE INDEX idx_memory_units_embedding ON memory_units "
        "USING hnsw (embedding vector_cosine_ops)"
    )
