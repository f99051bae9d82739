"""What entity resolution looks up, indexed for a large agent (issue 55). Every stage run that
resolves mentions reads, under the agent's lock, the entities whose name or alias is or looks
like a mentioned name (`store.entities.candidates`) and the people a mentioned person may be a
nickname or short form of, by their first or last name (`store.entities.people`). Both read
every entity of the agent before (figures: docs/scaling.md, "Many agents in one database").

- `memora_name_ends(name, aliases)`: the first names ('<' prefixed) and last names ('>') of a
  name and its aliases, immutable, and a GIN index on it over the PERSON entities;
  `people` asks `memora_name_ends(...) && ARRAY[...]`.
- The aliases' GIN index (0039) answers `aliases @> ARRAY[name]`; the trigram index
  (0001) `normalized_name % name`.

Revision ID: 0040_entity_name_ends
Revises: 0039_entity_aliases_index
Create Date: 2026-12-07
"""

from alembic import op

revision = "0040_entity_name_ends"
down_revision = "0039_entity_aliases_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION memora_name_ends(name text, aliases text[]) RETURNS text[]
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT array_agg(DISTINCT e) FROM unnest(aliases || name) AS n(x)
            CROSS JOIN LATERAL (VALUES ('<' || split_part(x, ' ', 1)),
                                       ('>' || regexp_replace(x, '^.* ', ''))) AS v(e)
        $$
        """
    )
    op.execute(
        "CREATE INDEX idx_entities_person_name_ends ON entities "
        "USING gin (memora_name_ends(normalized_name, aliases)) WHERE entity_type = 'PERSON'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX idx_entities_person_name_ends")
    op.execute("DROP FUNCTION memora_name_ends(text, text[])")
