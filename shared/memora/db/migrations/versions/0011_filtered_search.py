"""Filtered search (issue 12): metadata filters keep their indexes under row-level security.

PostgreSQL applies a query's conditions that are not LEAKPROOF only after the row policies
(0006_security), so they cannot be index conditions: under `memora_tenant` the filters of
migration 0009 were evaluated row by row, and a filter matching 15 of 100,000 units made the
semantic retriever's probe a sequential scan of the agent (docs/benchmarks-history.md,
"Filtered search").

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

Revision ID: 0011_filtered_search
Revises: 0010_row_security_new_tables
Create Date: 2026-11-25
"""

from alembic import op

revision = "0011_filtered_search"
down_revision = "0010_row_security_new_tables"
branch_labels = None
depends_on = None

TABLES = ("memory_units", "memory_search")


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


def downgrade() -> None:
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
