"""Signatures of the mentions (issue 29): `unit_entities.signature` holds the binary quantisation
of the mentioning unit's embedding (one bit a dimension, pgvector's `binary_quantize`), so the
entity retriever can rank an entity's tens of thousands of mentions by Hamming distance from one
index (entity, signature) and compare only the best of them with the full embeddings.

Measured on the benchmark's 1M-memory agent (a person mentioned 50,000 times), the
signatures' best re-ranked exactly come nearer the exact list than the HNSW walk, in less time
than either (docs/benchmarks-history.md, "The read path, second round").

- Filled by a BEFORE INSERT trigger from the unit's embedding (the pipeline embeds before it
  resolves entities), kept in step by an AFTER UPDATE OF embedding trigger on `memory_units`
  (an edit re-embeds). Both ENABLE ALWAYS, like the tenant triggers, so bulk loads fill it.
- `idx_unit_entities_signature (entity_id) INCLUDE (unit_id, signature, tenant_id)` replaces
  `idx_unit_entities_entity`: it serves every lookup by entity, and the scan of an entity's
  signatures reads the index alone (the tenant policy's column included).

Revision ID: 0021_entity_signatures
Revises: 0020_term_counts
Create Date: 2026-11-26
"""

from alembic import context, op

revision = "0021_entity_signatures"
down_revision = "0020_term_counts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute(f"ALTER TABLE unit_entities ADD COLUMN signature BIT({dim})")
    op.execute(
        f"""
        CREATE FUNCTION unit_entities_signature() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.signature := (SELECT binary_quantize(embedding)::bit({dim})
                              FROM memory_units WHERE id = NEW.unit_id);
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER unit_entities_signature BEFORE INSERT OR UPDATE OF unit_id "
        "ON unit_entities FOR EACH ROW EXECUTE FUNCTION unit_entities_signature()"
    )
    op.execute("ALTER TABLE unit_entities ENABLE ALWAYS TRIGGER unit_entities_signature")
    op.execute(
        f"""
        CREATE FUNCTION memory_units_signature() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE unit_entities SET signature = binary_quantize(NEW.embedding)::bit({dim})
            WHERE unit_id = NEW.id;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_units_signature AFTER UPDATE OF embedding ON memory_units "
        "FOR EACH ROW WHEN (NEW.embedding IS DISTINCT FROM OLD.embedding) "
        "EXECUTE FUNCTION memory_units_signature()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_signature")
    op.execute(
        f"UPDATE unit_entities ue SET signature = binary_quantize(u.embedding)::bit({dim}) "
        "FROM memory_units u WHERE u.id = ue.unit_id AND u.embedding IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX idx_unit_entities_signature ON unit_entities (entity_id) "
        "INCLUDE (unit_id, signature, tenant_id)"
    )
    op.execute("DROP INDEX idx_unit_entities_entity")
    op.execute("ANALYZE unit_entities")


def downgrade() -> None:
    op.execute("CREATE INDEX idx_unit_entities_entity ON unit_entities (entity_id)")
    op.execute("DROP INDEX idx_unit_entities_signature")
    op.execute("DROP TRIGGER memory_units_signature ON memory_units")
    op.execute("DROP FUNCTION memory_units_signature()")
    op.execute("DROP TRIGGER unit_entities_signature ON unit_entities")
    op.execute("DROP FUNCTION unit_entities_signature()")
    op.execute("ALTER TABLE unit_entities DROP COLUMN signature")
