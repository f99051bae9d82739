"""Entity resolution's lookups on the suite's PostgreSQL, as their indexes answer them
(migrations 0039, 0040): `candidates` finds an entity by its name, an alias or a name like it;
`people` by the first or last name of its name or of an alias, and only PERSON entities."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memora.store import entities

pytestmark = pytest.mark.integration

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def _add(
    conn: Any, agent: str, name: str, kind: str = "PERSON", aliases: tuple[str, ...] = ()
) -> str:
    entity = entities.create(conn, agent, name.title(), name, kind, NOW)
    for alias in aliases:
        entities.add_alias(conn, entity, alias)
    return str(entity)


def test_people_by_first_or_last_name_of_a_name_or_alias(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    priya = _add(conn, agent_id, "priya raman")
    sam = _add(conn, agent_id, "sam okafor", aliases=("samuel okafor", "sammy"))
    _add(conn, agent_id, "raman industries", "ORGANIZATION")  # not a person
    other = f"{agent_id}-other"
    conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (other,))
    _add(conn, other, "priya shah")  # not this agent's

    def found(firsts: list[str], lasts: list[str]) -> set[str]:
        return {str(r["id"]) for r in entities.people(conn, agent_id, firsts, lasts)}

    assert found(["priya"], []) == {priya}
    assert found([], ["raman"]) == {priya}
    assert found(["samuel"], []) == {sam}  # an alias's first name
    assert found(["sammy"], []) == {sam}  # a one-word alias is its first and last name
    assert found([], ["okafor"]) == {sam}
    assert found(["raman"], ["priya"]) == set()  # first as first, last as last
    assert found(["okafor", "priya"], []) == {priya}
    conn.execute("DELETE FROM entities WHERE agent_id = %s", (other,))
    conn.execute("DELETE FROM agents WHERE agent_id = %s", (other,))


def test_candidates_by_name_alias_or_a_name_like_it(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    maya = _add(conn, agent_id, "maya chen", aliases=("mayc",))
    northwind = _add(conn, agent_id, "northwind robotics", "ORGANIZATION")

    def found(names: list[str]) -> set[str]:
        return {str(r["id"]) for r in entities.candidates(conn, agent_id, names)}

    assert found(["maya chen"]) == {maya}
    assert found(["mayc"]) == {maya}
    assert found(["northwind robotic"]) == {northwind}  # trigram-similar
    assert found(["lisbon"]) == set()


def test_find_entity_by_id_name_or_alias(agent_conn: Any, agent_id: str) -> None:
    from memora.store.graph import find_entity

    conn = agent_conn
    maya = _add(conn, agent_id, "maya chen", aliases=("mayc",))
    conn.execute(  # other entities of the agent, by name and by alias
        "INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type, "
        "first_seen, last_seen) SELECT %s, 'Person ' || n, 'person ' || n, 'PERSON', %s, %s "
        "FROM generate_series(1, 300) n",
        (agent_id, NOW, NOW),
    )

    def found(entity: str) -> str | None:
        row = find_entity(conn, agent_id, entity)
        return None if row is None else str(row["id"])

    assert found(maya) == found("Maya Chen") == found("maya chen") == found("mayc") == maya
    assert found("Maya Chen's") == maya  # as names are normalised
    assert found("Person 12") == found("person 12") != maya
    assert found("Lisbon") is None and found(f"{agent_id}-nobody") is None
