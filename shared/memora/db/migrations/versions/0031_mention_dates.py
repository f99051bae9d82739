"""Mentions in time (issue 60): `unit_entities.event_date` is the mentioning unit's event date,
indexed with the entity, so the link stage finds the mentions of an entity nearest in time to a
new unit by two short index scans (the nearest before, the nearest after) instead of sorting
every mention of the entity: a person named in every turn made each new turn's entity links
cost in proportion to the agent's history.

- Filled by the BEFORE INSERT trigger that already reads the unit for its signature (one
  lookup for both), kept in step by an AFTER UPDATE OF event_date trigger on `memory_units`.
  Both ENABLE ALWAYS, like the signature triggers, so bulk loads fill it.
- `idx_unit_entities_time (entity_id, event_date) INCLUDE (unit_id)`.

Revision ID: 0031_mention_dates
Revises: 0030_no_link_changes
Create Date: 2026-12-06
"""

from alembic import context, op

revision = "0031_mention_dates"
down_revision = "0030_no_link_changes"
branch_labels = None
depends_on = None


def _signature_function(dim: int, with_date: bool) -> str:
    """0021's function, reading the unit's event date in the same lookup when `with_date`."""
    column, target = (", event_date", ", NEW.event_date") if with_date else ("", "")
    return f"""
        CREATE OR REPLACE FUNCTION unit_entities_signature() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            SELECT binary_quantize(embedding)::bit({dim}){column} INTO NEW.signature{target}
            FROM memory_units WHERE id = NEW.unit_id;
            RETURN NEW;
        END $$
        """


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("ALTER TABLE unit_entities ADD COLUMN event_date timestamptz")
    op.execute(_signature_function(dim, with_date=True))
    op.execute(
        """
        CREATE FUNCTION memory_units_mention_dates() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE unit_entities SET event_date = NEW.event_date WHERE unit_id = NEW.id;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_units_mention_dates AFTER UPDATE OF event_date ON memory_units "
        "FOR EACH ROW WHEN (NEW.event_date IS DISTINCT FROM OLD.event_date) "
        "EXECUTE FUNCTION memory_units_mention_dates()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_mention_dates")
    op.execute(
        "UPDATE unit_entities ue SET event_date = u.event_date "
        "FROM memory_units u WHERE u.id = ue.unit_id"
    )
    op.execute(
        "CREATE INDEX idx_unit_entities_time ON unit_entities (entity_id, event_date) "
        "INCLUDE (unit_id)"
    )
    op.execute("ANALYZE unit_entities")


def downgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("DROP INDEX idx_unit_entities_time")
    op.execute("DROP TRIGGER memory_units_mention_dates ON memory_units")
    op.execute("DROP FUNCTION memory_units_mention_dates()")
    op.execute(_signature_function(dim, with_date=False))
    op.execute("ALTER TABLE unit_entities DROP COLUMN event_date")
