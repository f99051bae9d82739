"""Initial schema: agents, documents, operations, memory units, entities and links.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        """
        CREATE TABLE agents (
            agent_id    TEXT PRIMARY KEY,
            personality JSONB NOT NULL DEFAULT '{"openness": 0.5, "conscientiousness": 0.5,
                "extraversion": 0.5, "agreeableness": 0.5, "neuroticism": 0.5,
                "bias_strength": 0.5}',
            background  TEXT NOT NULL DEFAULT '',
            created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE documents (
            id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id     TEXT NOT NULL REFERENCES agents(agent_id) ON DELETE CASCADE,
            document_id  TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            items        JSONB NOT NULL,
            item_count   INTEGER NOT NULL,
            current_operation_id UUID,
            created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
            UNIQUE (agent_id, document_id)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE operations (
            id          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id    TEXT NOT NULL,
            kind        TEXT NOT NULL CHECK (kind IN ('ingest', 'opinions')),
            document_pk UUID REFERENCES documents(id) ON DELETE SET NULL,
            document_id TEXT,
            status      TEXT NOT NULL DEFAULT 'queued'
                        CHECK (status IN ('queued', 'running', 'completed', 'failed', 'superseded')),
            stage       TEXT,
            stages      JSONB NOT NULL DEFAULT '{}',
            counts      JSONB NOT NULL DEFAULT '{}',
            payload     JSONB,
            error       TEXT,
            created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
            finished_at TIMESTAMPTZ
        )
        """
    )
    op.execute("CREATE INDEX idx_operations_agent ON operations (agent_id, created_at DESC)")
    op.execute(
        "CREATE INDEX idx_operations_active ON operations (updated_at) "
        "WHERE status IN ('queued', 'running')"
    )
    op.execute(
        f"""
        CREATE TABLE memory_units (
            id               UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id         TEXT NOT NULL,
            document_pk      UUID REFERENCES documents(id) ON DELETE CASCADE,
            item_index       INTEGER NOT NULL DEFAULT 0,
            seq              INTEGER NOT NULL DEFAULT 0,
            text             TEXT NOT NULL,
            context          TEXT,
            embedding        vector({dim}),
            fact_type        TEXT NOT NULL CHECK (fact_type IN ('world', 'agent', 'opinion')),
            event_date       TIMESTAMPTZ NOT NULL,
            occurred_start   TIMESTAMPTZ,
            occurred_end     TIMESTAMPTZ,
            mentioned_at     TIMESTAMPTZ NOT NULL,
            access_count     INTEGER NOT NULL DEFAULT 0,
            confidence_score REAL CHECK (confidence_score BETWEEN 0 AND 1),
            mentions         JSONB,
            relations        JSONB,
            metadata         JSONB NOT NULL DEFAULT '{{}}',
            created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
            search_vector    TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_memory_units_document_seq ON memory_units "
        "(document_pk, item_index, seq) WHERE document_pk IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX idx_memory_units_embedding ON memory_units "
        "USING hnsw (embedding vector_cosine_ops)"
    )
    op.execute("CREATE INDEX idx_memory_units_fts ON memory_units USING GIN (search_vector)")
    op.execute(
        "CREATE INDEX idx_memory_units_agent_date ON memory_units (agent_id, event_date DESC)"
    )
    op.execute("CREATE INDEX idx_memory_units_agent_type ON memory_units (agent_id, fact_type)")
    op.execute(
        """
        CREATE TABLE entities (
            id              UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id        TEXT NOT NULL,
            canonical_name  TEXT NOT NULL,
            normalized_name TEXT NOT NULL,
            aliases         TEXT[] NOT NULL DEFAULT '{}',
            entity_type     TEXT NOT NULL CHECK (entity_type IN
                            ('PERSON', 'ORGANIZATION', 'LOCATION', 'PRODUCT', 'CONCEPT', 'OTHER')),
            mention_count   INTEGER NOT NULL DEFAULT 0,
            first_seen      TIMESTAMPTZ NOT NULL,
            last_seen       TIMESTAMPTZ NOT NULL,
            created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX idx_entities_agent_name ON entities (agent_id, normalized_name)")
    op.execute(
        "CREATE INDEX idx_entities_name_trgm ON entities USING GIN (normalized_name gin_trgm_ops)"
    )
    op.execute(
        """
        CREATE TABLE unit_entities (
            unit_id   UUID NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            entity_id UUID NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            mention   TEXT NOT NULL,
            PRIMARY KEY (unit_id, entity_id)
        )
        """
    )
    op.execute("CREATE INDEX idx_unit_entities_entity ON unit_entities (entity_id)")
    op.execute(
        """
        CREATE TABLE memory_links (
            from_unit UUID NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            to_unit   UUID NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            link_type TEXT NOT NULL CHECK (link_type IN ('temporal', 'semantic', 'entity',
                      'causes', 'caused_by', 'enables', 'prevents')),
            weight    REAL NOT NULL CHECK (weight >= 0),
            entity_id UUID REFERENCES entities(id) ON DELETE CASCADE,
            PRIMARY KEY (from_unit, to_unit, link_type)
        )
        """
    )
    op.execute("CREATE INDEX idx_memory_links_to ON memory_links (to_unit)")


def downgrade() -> None:
    for table in (
        "memory_links",
        "unit_entities",
        "entities",
        "memory_units",
        "operations",
        "documents",
        "agents",
    ):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
