"""memora.store.relations on real PostgreSQL: a relation stated again gains evidence (and a
memory recorded twice changes nothing), a new value of a single-valued relation supersedes the
current one (of either side for partner_of), one read out of order is closed by the later one,
an end closes only its own pair, and purging a memory takes it out of the evidence."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from memora.store import entity_names, relations
from memora.store.entity_names import Names
from memora.store.purge import purge_units
from memora.store.relations import Stated
from tests.integration.memory_support import add_entity, add_turns

pytestmark = pytest.mark.integration


def _at(month: int) -> datetime:
    return datetime(2024, month, 1, tzinfo=UTC)


def _rows(conn: Any, entity: uuid.UUID) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["relation"], r["other_name"]): r for r in relations.of_entity(conn, entity)}


def test_evidence_supersession_and_ends(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    u = [uuid.UUID(x) for x in add_turns(conn, agent_id, np.random.default_rng(5), 6)]
    maya, tom, ana = (add_entity(conn, agent_id, n) for n in ("Maya", "Tom", "Ana"))
    lisbon, berlin, porto = (add_entity(conn, agent_id, n, "LOCATION")
                             for n in ("Lisbon", "Berlin", "Porto"))  # fmt: skip

    def put(
        unit: int, s: uuid.UUID, rel: str, o: uuid.UUID, month: int, mode: str = "state"
    ) -> str:
        return relations.record(conn, agent_id, Stated(u[unit], s, rel, o, _at(month), mode))

    assert put(0, maya, "lives_in", lisbon, 1) == "added"
    assert put(1, maya, "lives_in", lisbon, 2) == "evidence"
    assert put(1, maya, "lives_in", lisbon, 2) == "kept"  # the same memory again
    assert put(2, maya, "lives_in", porto, 9) == "added"
    assert put(3, maya, "lives_in", berlin, 5) == "added"  # said before Porto, read after
    rows = _rows(conn, maya)
    lis, ber, por = (
        rows[("lives_in", "Lisbon")],
        rows[("lives_in", "Berlin")],
        rows[("lives_in", "Porto")],
    )
    assert lis["evidence"] == [u[0], u[1]]
    assert (lis["valid_until"], lis["superseded_by"]) == (_at(5), ber["id"])
    assert (ber["valid_until"], ber["superseded_by"]) == (_at(9), por["id"])
    assert por["valid_until"] is None

    # partner_of is single-valued on either side; sibling_of is not single-valued
    assert put(4, tom, "partner_of", maya, 3) == "added"
    assert put(4, maya, "sibling_of", ana, 3) == "added"
    assert put(5, ana, "partner_of", tom, 6) == "added"
    old = _rows(conn, maya)[("partner_of", "Tom")]
    assert old["valid_until"] == _at(6) and old["superseded_by"] is not None
    assert _rows(conn, maya)[("sibling_of", "Ana")]["valid_until"] is None
    # an end closes its own pair only; one read as works_at closes it whoever said it
    assert put(5, ana, "partner_of", maya, 7, "end") == "kept"  # nothing current to end
    assert put(5, tom, "partner_of", ana, 8, "end") == "ended"  # symmetric: either order
    assert _rows(conn, ana)[("partner_of", "Tom")]["ended_by"] == u[5]

    # purging a memory: out of the evidence; a relation left with none goes
    purge_units(conn, "SELECT unnest(%(u)s::uuid[])", {"u": [u[0], u[2]]})
    rows = _rows(conn, maya)
    assert rows[("lives_in", "Lisbon")]["evidence"] == [u[1]]
    assert ("lives_in", "Porto") not in rows


def test_a_merge_of_entities_moves_their_relations(agent_conn: Any, agent_id: str) -> None:
    """The entity_names job merging "Maya C" into "Maya": her relations are Maya's now, and
    one between the two goes (nobody is their own sibling)."""
    conn = agent_conn
    u = [uuid.UUID(x) for x in add_turns(conn, agent_id, np.random.default_rng(6), 3)]
    maya, short, acme, rui = (
        add_entity(conn, agent_id, n) for n in ("Maya", "Maya C", "Acme", "Rui")
    )
    for unit, (s, rel, o) in enumerate(
        [(short, "works_at", acme), (rui, "sibling_of", short), (maya, "sibling_of", short)]
    ):
        relations.record(conn, agent_id, Stated(u[unit], s, rel, o, _at(unit + 1)))
    names = Names("Maya", "maya", ["maya c"], {"Maya": 2, "Maya C": 1}, "PERSON")
    entity_names.merge(conn, short, maya, names)
    moved = {
        (r["relation"], r["other_name"], r["outgoing"]) for r in relations.of_entity(conn, maya)
    }
    assert moved == {("works_at", "Acme", True), ("sibling_of", "Rui", False)}


def test_evidence_along_walks_a_path_hop_by_hop(agent_conn: Any, agent_id: str) -> None:
    """ "Where does Marek's girlfriend work?": partner_of from Marek, then works_at from the
    other end; relations of other kinds, and the start's own works_at, are not walked."""
    conn = agent_conn
    u = [uuid.UUID(x) for x in add_turns(conn, agent_id, np.random.default_rng(7), 5)]
    marek, tereza, lucia = (add_entity(conn, agent_id, n) for n in ("Marek", "Tereza", "Lucia"))
    library, bakery = (add_entity(conn, agent_id, n, "ORGANIZATION")
                       for n in ("City Library", "Bakery"))  # fmt: skip
    for unit, s, rel, o in [
        (0, tereza, "partner_of", marek),  # said either way round
        (1, tereza, "works_at", library),
        (2, marek, "works_at", bakery),
        (3, marek, "friend_of", lucia),
        (4, lucia, "works_at", library),
    ]:
        relations.record(conn, agent_id, Stated(u[unit], s, rel, o, _at(1 + unit)))
    path = (frozenset({"partner_of"}), frozenset({"works_at"}))
    assert relations.evidence_along(conn, [marek], path) == {u[0], u[1]}
    assert relations.evidence_along(conn, [marek], path[:1]) == {u[0]}  # hop 1 only
    assert relations.evidence_along(conn, [marek], path[1:]) == {u[2]}
    assert relations.evidence_along(conn, [lucia], path) == set()  # no partner: no second hop
    assert relations.evidence_along(conn, [], path) == set()
