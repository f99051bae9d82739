"""Conversations: raw messages indexed for conversation search, and the sources of every unit.

`conversation_messages` holds one row per item of a document (the conversation), under a
`message_id` unique within it, with its role, speaker, time, text and a content hash. It is
derived from `documents.items` on every write, and the sync routes (edit, delete of one
message) keep both in step.

`conversation_chunks` is the search index over them (seed 002 §7.4.1): a chunk is owned by
one message (`message_pk`) and covers the messages whose text it holds (`message_pks`: several
when short messages are combined); `source_hash` is the hash of the covered messages' hashes
when it was built, so a stale chunk is one whose hash no longer matches. Chunks carry their
index `generation`: a rebuild (another embedding model) writes the next generation beside the
live one and `conversation_index_state` switches to it in one update.

`unit_sources` records which messages each memory unit came from: a deleted message leaves
every unit's sources, and a unit goes only when no source remains.

Existing documents are backfilled: their messages (ids "0", "1", … by position) and the
sources of their units; their chunks are missing, so the consistency check reports their
messages as never indexed and repair indexes them.

Revision ID: 0007_conversations
Revises: 0006_security
Create Date: 2026-11-24
"""

from alembic import context, op

revision = "0007_conversations"
down_revision = "0006_security"
branch_labels = None
depends_on = None

KINDS = ("ingest", "opinions", "message_edit", "message_delete", "repair", "reindex")


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("ALTER TABLE documents ADD COLUMN title TEXT")
    op.execute("ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_kind_check")
    kinds = ", ".join(f"'{k}'" for k in KINDS)
    op.execute(
        f"ALTER TABLE operations ADD CONSTRAINT operations_kind_check CHECK (kind IN ({kinds}))"
    )
    op.execute(
        """
        CREATE TABLE conversation_messages (
            id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id     TEXT NOT NULL,
            document_pk  UUID NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            message_id   TEXT NOT NULL,
            position     INTEGER NOT NULL,
            role         TEXT,
            speaker      TEXT,
            occurred_at  TIMESTAMPTZ NOT NULL,
            text         TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
            UNIQUE (document_pk, message_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX idx_conversation_messages_position "
        "ON conversation_messages (document_pk, position)"
    )
    op.execute("CREATE INDEX idx_conversation_messages_agent ON conversation_messages (agent_id)")
    op.execute(
        f"""
        CREATE TABLE conversation_chunks (
            id          UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id    TEXT NOT NULL,
            document_pk UUID NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            message_pk  UUID NOT NULL REFERENCES conversation_messages(id) ON DELETE CASCADE,
            message_pks UUID[] NOT NULL,
            chunk_index INTEGER NOT NULL,
            generation  INTEGER NOT NULL,
            roles       TEXT[] NOT NULL,
            occurred_at TIMESTAMPTZ NOT NULL,
            text        TEXT NOT NULL,
            snippet     TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            embedding   vector({dim}) NOT NULL,
            search_vector TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
            indexed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "CREATE INDEX idx_conversation_chunks_embedding ON conversation_chunks "
        "USING hnsw (embedding vector_cosine_ops)"
    )
    op.execute(
        "CREATE INDEX idx_conversation_chunks_fts ON conversation_chunks "
        "USING GIN (agent_id, search_vector)"
    )
    op.execute(
        "CREATE INDEX idx_conversation_chunks_covers ON conversation_chunks USING GIN (message_pks)"
    )
    op.execute("CREATE INDEX idx_conversation_chunks_owner ON conversation_chunks (message_pk)")
    op.execute(
        "CREATE INDEX idx_conversation_chunks_agent ON conversation_chunks "
        "(agent_id, generation, occurred_at)"
    )
    op.execute("CREATE INDEX idx_conversation_chunks_document ON conversation_chunks (document_pk)")
    op.execute(
        """
        CREATE TABLE conversation_index_state (
            agent_id         TEXT PRIMARY KEY,
            generation       INTEGER NOT NULL DEFAULT 1,
            embedding_model  TEXT NOT NULL,
            embedding_dim    INTEGER NOT NULL,
            building         INTEGER,
            building_model   TEXT,
            last_sync_at     TIMESTAMPTZ,
            updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE unit_sources (
            unit_id    UUID NOT NULL REFERENCES memory_units(id) ON DELETE CASCADE,
            message_pk UUID NOT NULL REFERENCES conversation_messages(id) ON DELETE CASCADE,
            PRIMARY KEY (unit_id, message_pk)
        )
        """
    )
    op.execute("CREATE INDEX idx_unit_sources_message ON unit_sources (message_pk)")
    # Backfill: the messages of existing documents, and the sources of their units.
    op.execute(
        """
        INSERT INTO conversation_messages
            (agent_id, document_pk, message_id, position, speaker, occurred_at, text, content_hash)
        SELECT d.agent_id, d.id, (i.ord - 1)::text, (i.ord - 1)::int, i.item->>'speaker',
               COALESCE((i.item->>'event_date')::timestamptz, d.created_at),
               i.item->>'content', encode(sha256(convert_to(i.item->>'content', 'UTF8')), 'hex')
        FROM documents d CROSS JOIN LATERAL jsonb_array_elements(d.items)
            WITH ORDINALITY AS i(item, ord)
        """
    )
    op.execute(
        """
        INSERT INTO unit_sources (unit_id, message_pk)
        SELECT u.id, m.id FROM memory_units u
        JOIN conversation_messages m ON m.document_pk = u.document_pk AND m.position = u.item_index
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS unit_sources")
    op.execute("DROP TABLE IF EXISTS conversation_index_state")
    op.execute("DROP TABLE IF EXISTS conversation_chunks")
    op.execute("DROP TABLE IF EXISTS conversation_messages")
    op.execute("DELETE FROM operations WHERE kind NOT IN ('ingest', 'opinions')")
    op.execute("ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_kind_check")
    op.execute(
        "ALTER TABLE operations ADD CONSTRAINT operations_kind_check "
        "CHECK (kind IN ('ingest', 'opinions'))"
    )
    op.execute("ALTER TABLE documents DROP COLUMN IF EXISTS title")
