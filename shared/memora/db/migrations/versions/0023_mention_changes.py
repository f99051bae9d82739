"""When an entity's mentions last changed (issue 29), so a query service that keeps a common
entity's mention signatures in memory (`memora.retrieval.caches.mentions`) reads only what
changed since it last looked, where a full read of a main character's signatures cost database
time on every search, more as the agent grows (docs/benchmarks-history.md, the read path's
sixth round):

- `unit_entities.written`: the id of the transaction that inserted or last updated the row
  (`pg_current_xact_id()`, as an int8), indexed with the entity. The rows written at or after a
  snapshot's xmin hold everything that snapshot could not see (every transaction it could
  not see has an id at least that). A column default for inserts (COPY included) and a
  BEFORE UPDATE trigger for updates (a unit re-embedded: its signature).
- `entities.mentions_removed`: the id of the last transaction that took a mention away from
  the entity (a row deleted, a unit's purge cascading included, or moved to another
  entity), set by statement-level triggers over the transition tables. A reader whose
  entry is older reads the entity's mentions whole again.
- The triggers are ENABLE ALWAYS like the signature triggers, so bulk loads with
  `session_replication_role = replica` keep both. Rows from before this migration keep
  NULL: a first read takes every row, a later one only those written since.
- `idx_unit_entities_written (entity_id, written) INCLUDE (unit_id, signature, tenant_id)`
  replaces `idx_unit_entities_signature (entity_id) INCLUDE (...)`: it serves every lookup by
  entity as that one did, and the reads of what changed.

Revision ID: 0023_mention_changes
Revises: 0022_keyword_postings
Create Date: 2026-11-26
"""

from alembic import op

revision = "0023_mention_changes"
down_revision = "0022_keyword_postings"
branch_labels = None
depends_on = None

# the current transaction's id (xid8: epoch and xid) as an int8: a reader compares it with
# a snapshot's xmin passed as an int8, no cast; under row-level security PostgreSQL puts a
# condition in the index scan only when all its functions are leakproof, and the casts
# between int8 and xid8 (through text) are not: it would read the entity's every entry
CURRENT = "pg_current_xact_id()::text::int8"


def upgrade() -> None:
    op.execute("ALTER TABLE unit_entities ADD COLUMN written int8")
    op.execute(f"ALTER TABLE unit_entities ALTER COLUMN written SET DEFAULT {CURRENT}")
    op.execute(
        f"""
        CREATE FUNCTION unit_entities_written() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.written := {CURRENT};
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER unit_entities_written BEFORE UPDATE ON unit_entities "
        "FOR EACH ROW EXECUTE FUNCTION unit_entities_written()"
    )
    op.execute("ALTER TABLE unit_entities ENABLE ALWAYS TRIGGER unit_entities_written")
    op.execute("ALTER TABLE entities ADD COLUMN mentions_removed int8")
    op.execute(
        f"""
        CREATE FUNCTION unit_entities_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            -- a purge cascades one statement per unit: an entity's row is written once a
            -- transaction
            IF TG_OP = 'DELETE' THEN
                UPDATE entities SET mentions_removed = {CURRENT}
                WHERE id IN (SELECT entity_id FROM old_rows)
                  AND mentions_removed IS DISTINCT FROM {CURRENT};
            ELSE  -- an UPDATE: the (unit, entity) pairs it took away
                UPDATE entities SET mentions_removed = {CURRENT}
                WHERE id IN (SELECT o.entity_id FROM old_rows o WHERE NOT EXISTS (
                          SELECT 1 FROM new_rows n
                          WHERE n.unit_id = o.unit_id AND n.entity_id = o.entity_id))
                  AND mentions_removed IS DISTINCT FROM {CURRENT};
            END IF;
            RETURN NULL;
        END $$
        """
    )
    for event, tables in (
        ("DELETE", "OLD TABLE AS old_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ):
        name = f"unit_entities_removed_{event.lower()}"
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON unit_entities REFERENCING {tables} "
            "FOR EACH STATEMENT EXECUTE FUNCTION unit_entities_removed()"
        )
        op.execute(f"ALTER TABLE unit_entities ENABLE ALWAYS TRIGGER {name}")
    op.execute(
        "CREATE INDEX idx_unit_entities_written ON unit_entities (entity_id, written) "
        "INCLUDE (unit_id, signature, tenant_id)"
    )
    op.execute("DROP INDEX idx_unit_entities_signature")
    op.execute("ANALYZE unit_entities")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX idx_unit_entities_signature ON unit_entities (entity_id) "
        "INCLUDE (unit_id, signature, tenant_id)"
    )
    op.execute("DROP INDEX idx_unit_entities_written")
    op.execute("DROP TRIGGER unit_entities_removed_delete ON unit_entities")
    op.execute("DROP TRIGGER unit_entities_removed_update ON unit_entities")
    op.execute("DROP FUNCTION unit_entities_removed()")
    op.execute("ALTER TABLE entities DROP COLUMN mentions_removed")
    op.execute("DROP TRIGGER unit_entities_written ON unit_entities")
    op.execute("DROP FUNCTION unit_entities_written()")
    op.execute("ALTER TABLE unit_entities DROP COLUMN written")
