"""Filtered search (issue 12): filters keep their indexes under row-level security, and the
units a filter leaves can be ranked exactly from a narrow copy of their embeddings.

PostgreSQL applies a query's conditions that are not LEAKPROOF only after the row policies
(0006_security), so they cannot be index conditions: under `memora_tenant` the filters of
migration 0009 were evaluated row by row, and a filter matching 15 of 100,000 units made the
semantic retriever's probe a sequential scan of the agent (110–240 ms instead of 0.3 ms).

- `jsonb_contains` (`metadata @> ...`: equalities, one-of lists, tags) is declared LEAKPROOF
  when the migrating role is a superuser, as 0006 did for `ts_match_vq`: it compares two
  documents and raises no error that depends on their contents. Otherwise a notice says so
  and filtered searches stay correct, only slower.
- Ranges compared `memora_num(metadata -> key)`, a numeric: SQL inlines that function, and
  neither `->`, the cast to numeric nor numeric comparisons are leakproof. They now compare
  `memora_number(metadata, key)`, a float8 (the filter's bounds are floats already; float8
  comparisons are leakproof): PL/pgSQL, so never inlined, and LEAKPROOF where allowed (it
  raises no error: a number beyond float8's range becomes ±infinity, one too small 0). The
  turn indexes of memory_units and memory_search are rebuilt on it.
- memory_search (the narrow table of migration 0005, which carries the filters' columns since
  0009) gains `embedding halfvec(dim)`, kept by its trigger. An exact scan of the units a
  filter leaves read their vectors from memory_units, where they lie out of line (TOAST, a
  second index lookup per row) in ~2 kB rows; here they are inline (storage MAIN) in rows of
  ~1.2 kB, half the bytes per vector: ranking 5,000 filtered units went from 18–23 ms to
  9–10 ms at 100k memories. +0.8 kB per searchable unit; the backfill rewrites memory_search
  once.

Revision ID: 0011_filtered_search
Revises: 0010_row_security_new_tables
Create Date: 2026-11-25
"""

from alembic import context, op

revision = "0011_filtered_search"
down_revision = "0010_row_security_new_tables"
branch_labels = None
depends_on = None

TABLES = ("memory_units", "memory_search")
# memory_search_sync as 0009_agent_tools left it, plus (upgrade) the halfvec copy
_SYNC = """
CREATE OR REPLACE FUNCTION memory_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.embedding IS NULL OR NEW.status <> 'active' THEN
        DELETE FROM memory_search WHERE unit_id = NEW.id;
    ELSE
        INSERT INTO memory_search (unit_id, agent_id, fact_type, event_date, search_vector,
                                   metadata, occurred_start, occurred_end{column})
        VALUES (NEW.id, NEW.agent_id, NEW.fact_type, NEW.event_date, NEW.search_vector,
                NEW.metadata, NEW.occurred_start, NEW.occurred_end{value})
        ON CONFLICT (unit_id) DO UPDATE SET
            agent_id = EXCLUDED.agent_id, fact_type = EXCLUDED.fact_type,
            event_date = EXCLUDED.event_date, search_vector = EXCLUDED.search_vector,
            metadata = EXCLUDED.metadata, occurred_start = EXCLUDED.occurred_start,
            occurred_end = EXCLUDED.occurred_end{assign};
    END IF;
    RETURN NULL;
END $$
"""


def _if_superuser(then: str, otherwise: str = "") -> str:
    return (
        "DO $$ BEGIN IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN "
        f"{then} {'ELSE ' + otherwise if otherwise else ''} END IF; END $$"
    )


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION memora_number(doc jsonb, key text) RETURNS float8
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        DECLARE
            n numeric;
        BEGIN
            IF jsonb_typeof(doc -> key) IS DISTINCT FROM 'number' THEN
                RETURN NULL;
            END IF;
            n := (doc -> key)::numeric;
            IF abs(n) >= 1e308 THEN
                RETURN sign(n) * 'infinity'::float8;
            ELSIF abs(n) < 1e-300 THEN
                RETURN 0;
            END IF;
            RETURN n::float8;
        END $$
        """
    )
    op.execute(
        _if_superuser(
            "ALTER FUNCTION jsonb_contains(jsonb, jsonb) LEAKPROOF; "
            "ALTER FUNCTION memora_number(jsonb, text) LEAKPROOF;",
            "RAISE NOTICE 'not a superuser: jsonb_contains and memora_number stay "
            "non-leakproof, so metadata filters under row-level security cannot use their "
            "indexes';",
        )
    )
    for table in TABLES:
        op.execute(f"DROP INDEX IF EXISTS idx_{table}_turn")
        op.execute(
            f"CREATE INDEX idx_{table}_turn ON {table} (agent_id, memora_number(metadata, 'turn'))"
        )
    op.execute("DROP FUNCTION memora_num(jsonb)")
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute(f"ALTER TABLE memory_search ADD COLUMN embedding halfvec({dim})")
    op.execute("ALTER TABLE memory_search ALTER COLUMN embedding SET STORAGE MAIN")
    op.execute(
        _SYNC.format(
            column=", embedding",
            value=", NEW.embedding::halfvec",
            assign=", embedding = EXCLUDED.embedding",
        )
    )
    op.execute(
        "UPDATE memory_search s SET embedding = m.embedding::halfvec FROM memory_units m "
        "WHERE m.id = s.unit_id"
    )


def downgrade() -> None:
    op.execute(_SYNC.format(column="", value="", assign=""))
    op.execute("ALTER TABLE memory_search DROP COLUMN embedding")
    op.execute(
        "CREATE FUNCTION memora_num(value jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE "
        "PARALLEL SAFE AS $$ SELECT CASE WHEN jsonb_typeof(value) = 'number' "
        "THEN (value #>> '{}')::numeric END $$"
    )
    for table in TABLES:
        op.execute(f"DROP INDEX IF EXISTS idx_{table}_turn")
        op.execute(
            f"CREATE INDEX idx_{table}_turn ON {table} (agent_id, memora_num(metadata -> 'turn'))"
        )
    op.execute("DROP FUNCTION memora_number(jsonb, text)")
    op.execute(_if_superuser("ALTER FUNCTION jsonb_contains(jsonb, jsonb) NOT LEAKPROOF;"))
