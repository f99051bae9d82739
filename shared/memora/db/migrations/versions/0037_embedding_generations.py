"""Embedding generations (issue 57, item 6): which model made the stored vectors, so that
`memora reembed` can build another model's beside them and switch (`memora.usecases.reembed`).

- `embedding_generations`: one row a generation, `live` (the one every vector column holds;
  at most one), `building` (the one `memora reembed` is filling into the `*_next` columns; at
  most one) or `retired`. `memora migrate` records the configured model as live (with the
  schema's dimension); migrated without the settings (tests), the first process to use the
  database records its own (`memora.store.generations.live`).
- `memora_embedding_check()`: a BEFORE INSERT OR UPDATE OF embedding trigger on `memory_units`
  and `conversation_chunks` (ENABLE ALWAYS, as the other triggers there). A write says which
  generation made its vectors in `memora.embedding_generation` (a stage: the one read at its
  start, `memora.pipeline.context`; otherwise the process's, on its connections:
  `memora.db.pool`); a vector written under another one than the live one fails with SQLSTATE
  MG001, so a vector of a retired model never lands silently (the stage runs again with the
  live model). Connections without the setting (psql, migrations) are not checked.
- `memora_embedding_live(expected)`: true when `expected` is the live generation, else the same
  MG001 error; the query service calls it after a search's retrievers (`memora.retrieval`).

Revision ID: 0037_embedding_generations
Revises: 0036_entity_relations
Create Date: 2026-12-07
"""

from alembic import context, op

revision = "0037_embedding_generations"
down_revision = "0036_entity_relations"
branch_labels = None
depends_on = None

TABLES = ("memory_units", "conversation_chunks")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE embedding_generations (
            id          INTEGER PRIMARY KEY,
            state       TEXT NOT NULL CHECK (state IN ('live', 'building', 'retired')),
            provider    TEXT NOT NULL,
            model       TEXT NOT NULL,
            dim         INTEGER NOT NULL CHECK (dim > 0),
            base_url    TEXT,
            created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
            switched_at TIMESTAMPTZ
        )
        """
    )
    attributes = context.config.attributes
    if attributes.get("embedding_model"):
        op.get_bind().exec_driver_sql(
            "INSERT INTO embedding_generations (id, state, provider, model, dim, base_url) "
            "VALUES (1, 'live', %(provider)s, %(model)s, %(dim)s, %(base_url)s)",
            {
                "provider": attributes.get("embedding_provider", "local"),
                "model": attributes["embedding_model"],
                "dim": int(attributes.get("embedding_dim", 384)),
                "base_url": attributes.get("embedding_base_url"),
            },
        )
    for state in ("live", "building"):
        op.execute(
            f"CREATE UNIQUE INDEX uq_embedding_generations_{state} "
            f"ON embedding_generations ((true)) WHERE state = '{state}'"
        )
    op.execute(
        """
        CREATE FUNCTION memora_embedding_live(expected integer) RETURNS boolean
        LANGUAGE plpgsql STABLE AS $$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM embedding_generations
                           WHERE state = 'live' AND id = expected) THEN
                RAISE EXCEPTION USING ERRCODE = 'MG001', MESSAGE = format(
                    'embedding generation %s is not the live one: embed again with the live '
                    'model', expected);
            END IF;
            RETURN true;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION memora_embedding_check() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            expected text := current_setting('memora.embedding_generation', true);
        BEGIN
            IF coalesce(expected, '') <> '' THEN
                PERFORM memora_embedding_live(expected::integer);
            END IF;
            RETURN NEW;
        END $$
        """
    )
    for table in TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_embedding_check BEFORE INSERT OR UPDATE OF embedding "
            f"ON {table} FOR EACH ROW WHEN (NEW.embedding IS NOT NULL) "
            "EXECUTE FUNCTION memora_embedding_check()"
        )
        op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_embedding_check")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_embedding_check ON {table}")
    op.execute("DROP FUNCTION IF EXISTS memora_embedding_check()")
    op.execute("DROP FUNCTION IF EXISTS memora_embedding_live(integer)")
    op.execute("DROP TABLE IF EXISTS embedding_generations")
