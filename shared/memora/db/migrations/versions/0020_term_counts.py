"""Keyword statistics kept by the write path (issue 29): `memory_terms` counts, per agent, the
keyword rows (`memory_search`) holding each lexeme, so that the keyword retriever reads a
term's document frequency from a few index entries instead of counting its matches on every
cache miss (a common term's count read thousands of buffers).

- Append-only deltas: statement-level triggers on `memory_search` (INSERT, UPDATE, DELETE,
  through transition tables, so COPY, cascades and the upserts of `memory_search_sync` count
  too) add one row per (agent, lexeme) a statement changed, with the change in `df`. Writers
  only insert, so concurrent ingests for one agent never wait on each other's counters. The
  lexeme '' (never one of PostgreSQL's) counts the agent's keyword rows: BM25's N.
- A term's df is the sum of its rows. The `term_counts` job (memora.jobs.term_counts) folds an
  agent's new rows (`compacted = false`) into one compacted row per lexeme, so reads stay a
  handful of index entries whatever the write volume.
- TRUNCATE of `memory_search` empties the counts too.
- Row-level security as every agent-keyed table (a generated `tenant_id`, `tenant_isolation`).

Revision ID: 0020_term_counts
Revises: 0019_limits
Create Date: 2026-11-26
"""

from alembic import op

revision = "0020_term_counts"
down_revision = "0019_limits"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"

COUNT_CHANGES = """
CREATE FUNCTION memory_terms_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_terms (agent_id, lexeme, df)
        SELECT agent_id, lexeme, count(*) FROM (
            SELECT a.agent_id, t.lexeme FROM added a, unnest(a.search_vector) t
            UNION ALL SELECT agent_id, '' FROM added) x
        GROUP BY agent_id, lexeme;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO memory_terms (agent_id, lexeme, df)
        SELECT agent_id, lexeme, -count(*) FROM (
            SELECT r.agent_id, t.lexeme FROM removed r, unnest(r.search_vector) t
            UNION ALL SELECT agent_id, '' FROM removed) x
        GROUP BY agent_id, lexeme;
    ELSE
        INSERT INTO memory_terms (agent_id, lexeme, df)
        SELECT agent_id, lexeme, sum(d) FROM (
            SELECT a.agent_id, t.lexeme, 1 AS d FROM added a, unnest(a.search_vector) t
            UNION ALL SELECT agent_id, '', 1 FROM added
            UNION ALL
            SELECT r.agent_id, t.lexeme, -1 FROM removed r, unnest(r.search_vector) t
            UNION ALL SELECT agent_id, '', -1 FROM removed) x
        GROUP BY agent_id, lexeme HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END $$
"""

TRIGGERS = {
    "memory_terms_insert": "AFTER INSERT ON memory_search REFERENCING NEW TABLE AS added",
    "memory_terms_delete": "AFTER DELETE ON memory_search REFERENCING OLD TABLE AS removed",
    "memory_terms_update": (
        "AFTER UPDATE ON memory_search REFERENCING OLD TABLE AS removed NEW TABLE AS added"
    ),
}


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE memory_terms (
            agent_id  TEXT NOT NULL,
            lexeme    TEXT NOT NULL,
            df        BIGINT NOT NULL,
            compacted BOOLEAN NOT NULL DEFAULT false,
            tenant_id TEXT NOT NULL GENERATED ALWAYS AS (memora_key_tenant(agent_id)) STORED
        )
        """
    )
    op.execute("CREATE INDEX idx_memory_terms ON memory_terms (agent_id, lexeme) INCLUDE (df)")
    op.execute("CREATE INDEX idx_memory_terms_new ON memory_terms (agent_id) WHERE NOT compacted")
    op.execute(COUNT_CHANGES)
    # the triggers lock out writers of memory_search until this migration commits, so the
    # counts below and the deltas after them add up to what the table holds
    for name, event in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {event} FOR EACH STATEMENT "
                   "EXECUTE FUNCTION memory_terms_count()")  # fmt: skip
        op.execute(f"ALTER TABLE memory_search ENABLE ALWAYS TRIGGER {name}")
    op.execute(
        """
        CREATE FUNCTION memory_terms_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            TRUNCATE memory_terms;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_terms_truncate AFTER TRUNCATE ON memory_search "
        "FOR EACH STATEMENT EXECUTE FUNCTION memory_terms_truncate()"
    )
    op.execute("ALTER TABLE memory_search ENABLE ALWAYS TRIGGER memory_terms_truncate")
    op.execute(
        """
        INSERT INTO memory_terms (agent_id, lexeme, df, compacted)
        SELECT agent_id, lexeme, count(*), true FROM (
            SELECT s.agent_id, t.lexeme FROM memory_search s, unnest(s.search_vector) t
            UNION ALL SELECT agent_id, '' FROM memory_search) x
        GROUP BY agent_id, lexeme
        """
    )
    op.execute("ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_terms FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON memory_terms TO {TENANT_ROLE} "
        f"USING ({POLICY}) WITH CHECK ({POLICY})"
    )
    op.execute("ANALYZE memory_terms")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_terms_truncate ON memory_search")
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON memory_search")
    op.execute("DROP FUNCTION IF EXISTS memory_terms_truncate()")
    op.execute("DROP FUNCTION IF EXISTS memory_terms_count()")
    op.execute("DROP TABLE IF EXISTS memory_terms")
