"""When an agent's searchable vectors last changed (issue 29), so a query service that keeps the
units passing a filter with their embeddings in memory (`memora.retrieval.caches.passing_units`)
reads only what changed since it last looked, where the exact scan of a 5 % filter read 5,000
scattered heap blocks and computed as many half-precision distances on every search
(docs/benchmarks-history.md, the read path's tenth round):

- `memory_vectors.written`: the id of the transaction that inserted or last updated the row
  (`pg_current_xact_id()` as an int8, as `unit_entities.written` in 0023), indexed with the
  agent. A column default for inserts (COPY included) and a BEFORE UPDATE trigger for updates
  (the upserts of `memory_vectors_sync`: a unit re-embedded or its filter columns changed).
- `vector_removals`: one row per agent a statement took a row away from (a unit deleted,
  forgotten, superseded or its embedding dropped) or changed a filter column of (its metadata,
  fact type or dates: it may no longer pass), with that transaction's id. Append-only, like
  the keyword counts of 0020, so concurrent writers for one agent never wait on each other; a
  reader whose entry is older than the agent's latest row reads the filter's units whole again.
  The `term_counts` job keeps only each agent's latest row.
- The triggers are ENABLE ALWAYS like the others on these tables, so bulk loads with
  `session_replication_role = replica` keep them. Rows from before this migration keep NULL:
  a first read takes every row, a later one only those written since.

Revision ID: 0024_vector_changes
Revises: 0023_mention_changes
Create Date: 2026-11-27
"""

from alembic import op

revision = "0024_vector_changes"
down_revision = "0023_mention_changes"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
# see 0023: an int8, so that a reader's condition on it can go into the index scan under
# row-level security
CURRENT = "pg_current_xact_id()::text::int8"
FILTERED = ("agent_id", "fact_type", "metadata", "event_date", "occurred_start", "occurred_end")


def upgrade() -> None:
    op.execute("ALTER TABLE memory_vectors ADD COLUMN written int8")
    op.execute(f"ALTER TABLE memory_vectors ALTER COLUMN written SET DEFAULT {CURRENT}")
    op.execute(
        f"""
        CREATE FUNCTION memory_vectors_written() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.written := {CURRENT};
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_vectors_written BEFORE UPDATE ON memory_vectors "
        "FOR EACH ROW EXECUTE FUNCTION memory_vectors_written()"
    )
    op.execute("ALTER TABLE memory_vectors ENABLE ALWAYS TRIGGER memory_vectors_written")
    op.execute(
        """
        CREATE TABLE vector_removals (
            agent_id  TEXT NOT NULL,
            tenant_id TEXT NOT NULL GENERATED ALWAYS AS (memora_key_tenant(agent_id)) STORED,
            removed   INT8 NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX idx_vector_removals ON vector_removals (agent_id, removed)")
    changed = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in FILTERED)
    op.execute(
        f"""
        CREATE FUNCTION memory_vectors_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                INSERT INTO vector_removals (agent_id, removed)
                SELECT DISTINCT agent_id, {CURRENT} FROM old_rows;
            ELSE  -- an UPDATE: the agents whose rows' filter columns it changed
                INSERT INTO vector_removals (agent_id, removed)
                SELECT DISTINCT o.agent_id, {CURRENT}
                FROM old_rows o JOIN new_rows n ON n.unit_id = o.unit_id
                WHERE {changed};
            END IF;
            RETURN NULL;
        END $$
        """
    )
    for event, tables in (
        ("DELETE", "OLD TABLE AS old_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ):
        name = f"memory_vectors_removed_{event.lower()}"
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON memory_vectors REFERENCING {tables} "
            "FOR EACH STATEMENT EXECUTE FUNCTION memory_vectors_removed()"
        )
        op.execute(f"ALTER TABLE memory_vectors ENABLE ALWAYS TRIGGER {name}")
    op.execute("CREATE INDEX idx_memory_vectors_written ON memory_vectors (agent_id, written)")
    op.execute("ALTER TABLE vector_removals ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE vector_removals FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON vector_removals TO {TENANT_ROLE} "
        f"USING ({POLICY}) WITH CHECK ({POLICY})"
    )
    op.execute(f"GRANT SELECT, INSERT ON vector_removals TO {TENANT_ROLE}")
    op.execute("ANALYZE memory_vectors")


def downgrade() -> None:
    op.execute("DROP INDEX idx_memory_vectors_written")
    op.execute("DROP TRIGGER memory_vectors_removed_delete ON memory_vectors")
    op.execute("DROP TRIGGER memory_vectors_removed_update ON memory_vectors")
    op.execute("DROP FUNCTION memory_vectors_removed()")
    op.execute("DROP TABLE vector_removals")
    op.execute("DROP TRIGGER memory_vectors_written ON memory_vectors")
    op.execute("DROP FUNCTION memory_vectors_written()")
    op.execute("ALTER TABLE memory_vectors DROP COLUMN written")
