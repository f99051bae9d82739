"""entity_relations (0036): the SQL of entity relations. A relation stated again gains the
memory as evidence; a new value of a relation one value at a time holds supersedes the current
one; an end closes it (memora.lifecycle.relating decides what was stated)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.relations import SINGLE, SYMMETRIC

# an end read as one of these ("left Acme") closes whichever of them holds
_AFFILIATIONS = ("works_at", "studies_at", "member_of")
_PAIR = (
    "((subject_id = %(s)s AND object_id = %(o)s) "
    "OR (relation = ANY(%(sym)s) AND subject_id = %(o)s AND object_id = %(s)s))"
)


@dataclass(frozen=True)
class Stated:
    """A relation a memory states or ends, between two resolved entities."""

    unit_id: UUID
    subject_id: UUID
    relation: str
    object_id: UUID
    at: datetime
    mode: str = "state"  # state, change, end
    additive: bool = False
    source: str = "parse"


def unit_entities(conn: Connection[Any], unit_ids: Sequence[UUID]) -> list[dict[str, Any]]:
    """The entities each unit names: unit_id, entity_id, normalized_name, aliases."""
    return conn.execute(
        "SELECT ue.unit_id, e.id AS entity_id, e.normalized_name, e.aliases "
        "FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id "
        "WHERE ue.unit_id = ANY(%s)",
        (list(unit_ids),),
    ).fetchall()


def record(conn: Connection[Any], agent_id: str, r: Stated) -> str:
    """Write one stated relation; what it did: ended, kept (already recorded), evidence (one
    more memory for a current relation), added."""
    p = {"a": agent_id, "s": r.subject_id, "o": r.object_id, "r": r.relation, "at": r.at,
         "u": r.unit_id, "sym": list(SYMMETRIC), "src": r.source}  # fmt: skip
    if r.mode == "end":
        p["rs"] = list(_AFFILIATIONS) if r.relation in _AFFILIATIONS else [r.relation]
        ended = conn.execute(
            "UPDATE entity_relations SET valid_until = greatest(valid_from, %(at)s), "
            f"ended_by = %(u)s WHERE agent_id = %(a)s AND relation = ANY(%(rs)s) AND {_PAIR} "
            "AND valid_until IS NULL AND valid_from <= %(at)s",
            p,
        ).rowcount
        return "ended" if ended else "kept"
    same = conn.execute(
        "SELECT id, valid_until, %(u)s = ANY(evidence) AS known FROM entity_relations "
        f"WHERE agent_id = %(a)s AND relation = %(r)s AND {_PAIR} FOR UPDATE",
        p,
    ).fetchall()
    if any(row["known"] for row in same):
        return "kept"
    current = next((row for row in same if row["valid_until"] is None), None)
    if current is not None:
        conn.execute(
            "UPDATE entity_relations SET evidence = array_append(evidence, %(u)s), "
            "valid_from = least(valid_from, %(at)s) WHERE id = %(id)s",
            {**p, "id": current["id"]},
        )
        return "evidence"
    row = conn.execute(
        "INSERT INTO entity_relations (agent_id, subject_id, relation, object_id, evidence, "
        "source, valid_from) VALUES (%(a)s, %(s)s, %(r)s, %(o)s, ARRAY[%(u)s]::uuid[], %(src)s, "
        "%(at)s) RETURNING id",
        p,
    ).fetchone()
    assert row is not None
    if r.relation in SINGLE and not r.additive:
        _supersede(conn, {**p, "new": row["id"]})
    return "added"


def _supersede(conn: Connection[Any], p: dict[str, Any]) -> None:
    """A new value of a relation one value at a time holds: the other values of its subject
    (of either side, for partner_of) holding when it begins end there, and one begun later (a
    memory read out of order) ends it."""
    sides = [p["s"], p["o"]] if p["r"] in SYMMETRIC else [p["s"]]
    same_side = (
        "(subject_id = ANY(%(sides)s) OR (relation = ANY(%(sym)s) AND object_id = ANY(%(sides)s)))"
    )
    p = {**p, "sides": sides}
    # those holding at its start, a later value already read included
    conn.execute(
        "UPDATE entity_relations SET valid_until = %(at)s, superseded_by = %(new)s "
        f"WHERE agent_id = %(a)s AND relation = %(r)s AND {same_side} AND NOT {_PAIR} "
        "AND valid_from <= %(at)s AND (valid_until IS NULL OR valid_until > %(at)s)",
        p,
    )
    later = conn.execute(
        f"SELECT id, valid_from FROM entity_relations WHERE agent_id = %(a)s AND relation = %(r)s "
        f"AND {same_side} AND id <> %(new)s AND valid_from > %(at)s "
        "ORDER BY valid_from LIMIT 1",
        p,
    ).fetchone()
    if later is not None:
        conn.execute(
            "UPDATE entity_relations SET valid_until = %s, superseded_by = %s WHERE id = %s",
            (later["valid_from"], later["id"], p["new"]),
        )


def entity(conn: Connection[Any], entity_id: UUID) -> dict[str, Any] | None:
    """An entity's own fields (the entity view)."""
    return conn.execute(
        "SELECT id, canonical_name, entity_type, aliases, mention_count, first_seen, last_seen, "
        "traits FROM entities WHERE id = %s",
        (entity_id,),
    ).fetchone()


def of_entity(conn: Connection[Any], entity_id: UUID) -> list[dict[str, Any]]:
    """An entity's relations, either way, current first then newest: the other entity's id
    and name, evidence (memories still stored), validity and what closed it."""
    return conn.execute(
        """
        SELECT r.id, r.relation, r.subject_id = %(e)s AS outgoing, o.id AS other_id,
               o.canonical_name AS other_name, o.entity_type AS other_type, r.source,
               ARRAY(SELECT u.id FROM memory_units u WHERE u.id = ANY(r.evidence)
                     ORDER BY u.event_date, u.id) AS evidence,
               r.valid_from, r.valid_until, r.superseded_by, r.ended_by
        FROM entity_relations r
        JOIN entities o ON o.id = CASE WHEN r.subject_id = %(e)s THEN r.object_id
                                       ELSE r.subject_id END
        WHERE r.subject_id = %(e)s OR r.object_id = %(e)s
        ORDER BY r.valid_until IS NOT NULL, r.valid_from DESC, r.id
        """,
        {"e": entity_id},
    ).fetchall()


def between(conn: Connection[Any], entity_ids: Sequence[UUID], limit: int) -> list[dict[str, Any]]:
    """The current relations among these entities, the best attested first (the graph
    view's edges)."""
    if not entity_ids:
        return []
    return conn.execute(
        "SELECT subject_id, relation, object_id FROM entity_relations "
        "WHERE subject_id = ANY(%(e)s) AND object_id = ANY(%(e)s) AND valid_until IS NULL "
        "ORDER BY cardinality(evidence) DESC, relation, subject_id, object_id LIMIT %(n)s",
        {"e": list(entity_ids), "n": limit},
    ).fetchall()


def evidence_along(
    conn: Connection[Any],
    start: Sequence[UUID],
    path: Sequence[frozenset[str]],
    per_hop: int = 50,
) -> set[UUID]:
    """The memories stating the relations of `path` walked from the entities `start`, either
    way, ended ones too (a question may ask where someone worked): hop 1 is every relation of
    `path[0]` an entity of `start` holds, hop 2 every relation of `path[1]` the other end of a
    hop-1 relation holds, and so on; of each hop the `per_hop` best attested, current first
    (a main character's friends). One indexed read a hop, none once a hop finds nothing."""
    found: set[UUID] = set()
    ends, seen = list(start), set(start)
    for relations in path:
        if not ends:
            break
        rows = conn.execute(
            "SELECT CASE WHEN subject_id = ANY(%(e)s) THEN object_id ELSE subject_id END "
            "AS other, evidence FROM entity_relations "
            "WHERE (subject_id = ANY(%(e)s) OR object_id = ANY(%(e)s)) AND relation = ANY(%(r)s) "
            "ORDER BY valid_until IS NOT NULL, cardinality(evidence) DESC, id LIMIT %(n)s",
            {"e": ends, "r": sorted(relations), "n": per_hop},
        ).fetchall()
        found.update(unit for row in rows for unit in row["evidence"])
        ends = [o for o in {r["other"] for r in rows} if o not in seen]
        seen.update(ends)
    return found


def forget_evidence(conn: Connection[Any], units_sql: str, params: dict[str, Any]) -> int:
    """Take the units `units_sql` selects out of every relation's evidence (before they are
    deleted); relations left with none are deleted. The count of relations deleted."""
    emptied = [
        r["id"]
        for r in conn.execute(
            f"UPDATE entity_relations SET evidence = ARRAY(SELECT e FROM unnest(evidence) AS e "
            f"WHERE e NOT IN ({units_sql})) WHERE evidence && ARRAY({units_sql}) "
            "RETURNING id, evidence",
            params,
        )
        if not r["evidence"]
    ]
    if not emptied:
        return 0
    return conn.execute("DELETE FROM entity_relations WHERE id = ANY(%s)", (emptied,)).rowcount
