"""When memory links last changed (issue 29), so a query service that holds an agent's links in
memory (`memora.retrieval.held_graph`) reads only what changed since it last looked, where the
graph retriever read the links five times a search (docs/benchmarks-history.md, the read path's
fourteenth round):

- `memory_links.written`: the id of the transaction that inserted or last updated the row
  (`pg_current_xact_id()` as an int8, as `memory_vectors.written` in 0024), indexed alone: a
  link has no agent column, the reader joins its source unit. A column default for inserts
  (COPY included) and a BEFORE UPDATE trigger for updates (link building's upsert raising a
  weight, a merge of entities moving links).
- `link_removals`: one row per tenant a statement deleted links of (directly, or as its
  units were deleted), and one per unit brought back to active (the links to it count again),
  with that transaction's id. Append-only like `vector_removals`; a holder whose read did not
  see its tenant's latest row reads the agent's links whole again (a unit leaving active
  status is in `vector_removals`). The `term_counts` job keeps only each tenant's latest row.
- The triggers are ENABLE ALWAYS like the others on these tables. Rows from before this
  migration keep NULL: a holder's first read takes every row, later ones only those written
  since.

Revision ID: 0026_link_changes
Revises: 0025_link_order
Create Date: 2026-11-27
"""

from alembic import op

revision = "0026_link_changes"
down_revision = "0025_link_order"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
CURRENT = "pg_current_xact_id()::text::int8"  # see 0023


def upgrade() -> None:
    op.execute("ALTER TABLE memory_links ADD COLUMN written int8")
    op.execute(f"ALTER TABLE memory_links ALTER COLUMN written SET DEFAULT {CURRENT}")
    op.execute(
        f"""
        CREATE FUNCTION memory_links_written() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.written := {CURRENT};
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_links_written BEFORE UPDATE ON memory_links "
        "FOR EACH ROW EXECUTE FUNCTION memory_links_written()"
    )
    op.execute("ALTER TABLE memory_links ENABLE ALWAYS TRIGGER memory_links_written")
    op.execute("CREATE INDEX idx_memory_links_written ON memory_links (written)")
    op.execute(
        """
        CREATE TABLE link_removals (
            tenant_id TEXT NOT NULL,
            removed   INT8 NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX idx_link_removals ON link_removals (tenant_id, removed)")
    op.execute(
        f"""
        CREATE FUNCTION memory_links_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO link_removals (tenant_id, removed)
            SELECT DISTINCT tenant_id, {CURRENT} FROM old_rows;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_links_removed AFTER DELETE ON memory_links "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION memory_links_removed()"
    )
    op.execute("ALTER TABLE memory_links ENABLE ALWAYS TRIGGER memory_links_removed")
    op.execute(
        f"""
        CREATE FUNCTION memory_units_restored() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO link_removals (tenant_id, removed) VALUES (NEW.tenant_id, {CURRENT});
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_units_restored AFTER UPDATE OF status ON memory_units "
        "FOR EACH ROW WHEN (OLD.status <> 'active' AND NEW.status = 'active') "
        "EXECUTE FUNCTION memory_units_restored()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_restored")
    op.execute("ALTER TABLE link_removals ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE link_removals FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON link_removals TO {TENANT_ROLE} "
        f"USING ({POLICY}) WITH CHECK ({POLICY})"
    )
    op.execute(f"GRANT SELECT, INSERT ON link_removals TO {TENANT_ROLE}")


def downgrade() -> None:
    op.execute("DROP TRIGGER memory_units_restored ON memory_units")
    op.execute("DROP FUNCTION memory_units_restored()")
    op.execute("DROP TRIGGER memory_links_removed ON memory_links")
    op.execute("DROP FUNCTION memory_links_removed()")
    op.execute("DROP TABLE link_removals")
    op.execute("DROP INDEX idx_memory_links_written")
    op.execute("DROP TRIGGER memory_links_written ON memory_links")
    op.execute("DROP FUNCTION memory_links_written()")
    op.execute("ALTER TABLE memory_links DROP COLUMN written")
