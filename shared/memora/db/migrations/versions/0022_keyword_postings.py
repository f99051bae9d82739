"""Impact-ordered postings for the keyword retriever (issue 29): `memory_postings` holds one row
per (keyword row, lexeme) of `memory_search`, with the lexeme's term frequency, the row's length
and its BM25 term weight at a reference length (`impact`), indexed by (agent, lexeme, impact,
newest first). The keyword retriever reads each query term's strongest postings from that index
alone and sums their exact BM25 weights, instead of walking the agent's units newest first
until `match_budget` match and then computing BM25 over each one's tsvector (the largest
share of a search's database time). On the benchmark's 100k-memory agent the postings return
more of the exact BM25 top 50 than the budgeted walk, in less time (docs/benchmarks-history.md,
the read path's fourth round). They take ~3.3 kB a memory (326 MB at 100k, a fifth of the
database).

- Kept by statement-level triggers on `memory_search` (INSERT, UPDATE, DELETE through
  transition tables, so COPY, cascades and `memory_search_sync`'s upserts count, as the term
  counts of 0020); an UPDATE rewrites a row's postings only when its lexemes, fact type or date
  changed. TRUNCATE of `memory_search` empties them too.
- `impact` = tf·(k1 + 1) / (tf + k1·(1 − b + b·dl / 12)), k1 = 1.2, b = 0.75: the order of a
  term's postings. Searches weigh tf and dl with the agent's own average length.
- Row-level security as every agent-keyed table; the ranking index includes `tenant_id`, so
  the tenant policy is checked on the index too.

Revision ID: 0022_keyword_postings
Revises: 0021_entity_signatures
Create Date: 2026-11-26
"""

from alembic import op

revision = "0022_keyword_postings"
down_revision = "0021_entity_signatures"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
REFERENCE_LENGTH = 12  # lexemes: a typical memory's; it orders postings, never scores them

# the postings of the keyword rows `s` of {rows} (a transition table or memory_search)
POSTINGS_OF = f"""
    SELECT s.unit_id, t.lexeme, s.agent_id, s.fact_type, s.event_date, n.tf, n.dl,
           n.tf * 2.2 / (n.tf + 1.2 * (0.25 + 0.75 * n.dl / {REFERENCE_LENGTH}.0))
    FROM {{rows}} CROSS JOIN LATERAL unnest(s.search_vector) t
    CROSS JOIN LATERAL (SELECT coalesce(array_length(t.positions, 1), 1) AS tf,
                               length(s.search_vector) AS dl) n
"""
COLUMNS = "(unit_id, lexeme, agent_id, fact_type, event_date, tf, dl, impact)"
# an updated row whose postings change: other lexemes, fact type, date or agent
CHANGED = """
    (s.search_vector, s.fact_type, s.event_date, s.agent_id)
    IS DISTINCT FROM (r.search_vector, r.fact_type, r.event_date, r.agent_id)
"""

# Deletes find the changed units' postings by their key, led by the transition tables, whatever
# the statistics say: planned when the table looked empty (a bulk load is one transaction, never
# analysed), a join read every posting written before it for each row's upsert.
KEEP_POSTINGS = f"""
CREATE FUNCTION memory_postings_keep() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_postings {COLUMNS} {POSTINGS_OF.format(rows="added s")};
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM memory_postings WHERE unit_id = ANY (ARRAY(SELECT unit_id FROM removed));
    ELSE
        DELETE FROM memory_postings WHERE unit_id = ANY (ARRAY(
            SELECT s.unit_id FROM added s JOIN removed r ON r.unit_id = s.unit_id
            WHERE {CHANGED}));
        INSERT INTO memory_postings {COLUMNS}
        {POSTINGS_OF.format(rows="added s JOIN removed r ON r.unit_id = s.unit_id")}
        WHERE {CHANGED};
    END IF;
    RETURN NULL;
END $$
"""

TRIGGERS = {
    "memory_postings_insert": "AFTER INSERT ON memory_search REFERENCING NEW TABLE AS added",
    "memory_postings_delete": "AFTER DELETE ON memory_search REFERENCING OLD TABLE AS removed",
    "memory_postings_update": (
        "AFTER UPDATE ON memory_search REFERENCING OLD TABLE AS removed NEW TABLE AS added"
    ),
}


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE memory_postings (
            unit_id    UUID NOT NULL,
            lexeme     TEXT NOT NULL,
            agent_id   TEXT NOT NULL,
            fact_type  TEXT NOT NULL,
            event_date TIMESTAMPTZ NOT NULL,
            tf         INTEGER NOT NULL,
            dl         INTEGER NOT NULL,
            impact     REAL NOT NULL,
            tenant_id  TEXT NOT NULL GENERATED ALWAYS AS (memora_key_tenant(agent_id)) STORED,
            PRIMARY KEY (unit_id, lexeme)
        )
        """
    )
    op.execute(KEEP_POSTINGS)
    # the triggers lock out writers of memory_search until this migration commits, so the
    # postings copied below and those the triggers add after them are all of its rows
    for name, event in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {event} FOR EACH STATEMENT "
                   "EXECUTE FUNCTION memory_postings_keep()")  # fmt: skip
        op.execute(f"ALTER TABLE memory_search ENABLE ALWAYS TRIGGER {name}")
    op.execute(
        """
        CREATE FUNCTION memory_postings_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            TRUNCATE memory_postings;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_postings_truncate AFTER TRUNCATE ON memory_search "
        "FOR EACH STATEMENT EXECUTE FUNCTION memory_postings_truncate()"
    )
    op.execute("ALTER TABLE memory_search ENABLE ALWAYS TRIGGER memory_postings_truncate")
    op.execute(
        f"INSERT INTO memory_postings {COLUMNS} {POSTINGS_OF.format(rows='memory_search s')}"
    )
    op.execute(
        "CREATE INDEX idx_memory_postings_rank ON memory_postings "
        "(agent_id, lexeme, impact DESC, event_date DESC) "
        "INCLUDE (unit_id, tf, dl, fact_type, tenant_id)"
    )
    op.execute("ALTER TABLE memory_postings ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_postings FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON memory_postings TO {TENANT_ROLE} "
        f"USING ({POLICY}) WITH CHECK ({POLICY})"
    )
    op.execute("ANALYZE memory_postings")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_postings_truncate ON memory_search")
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON memory_search")
    op.execute("DROP FUNCTION IF EXISTS memory_postings_truncate()")
    op.execute("DROP FUNCTION IF EXISTS memory_postings_keep()")
    op.execute("DROP TABLE IF EXISTS memory_postings")
