"""memory_links (seed 000 §2.4): temporal, semantic, entity and causal edges.

Every edge is stored in both directions so traversal needs one index lookup per node.
Each kind is bounded per unit: the nearest units in time, the nearest HNSW neighbours, and for
each entity the units nearest in time that mention it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.config import Settings
from memora.extraction.base import CAUSAL_TYPES


@dataclass(frozen=True)
class LinkSettings:
    temporal_window_hours: float
    temporal_per_unit: int
    semantic_threshold: float
    semantic_per_unit: int
    entity_per_entity: int

    @classmethod
    def from_settings(cls, s: Settings) -> LinkSettings:
        return cls(
            s.temporal_window_hours,
            s.temporal_links_per_unit,
            s.semantic_link_threshold,
            s.semantic_links_per_unit,
            s.entity_links_per_entity,
        )


def temporal_weight(delta_seconds: float, window_seconds: float) -> float:
    """max(0.3, 1 − Δt / window) inside the window; no link outside it."""
    return max(0.3, 1.0 - abs(delta_seconds) / window_seconds)


_UPSERT = """
    INSERT INTO memory_links (from_unit, to_unit, link_type, weight, entity_id)
    SELECT DISTINCT ON (a, b, t) a, b, t, w, e FROM (
        SELECT from_unit AS a, to_unit AS b, link_type AS t, weight AS w, entity_id AS e FROM pairs
        UNION ALL
        SELECT to_unit, from_unit, reverse_type, weight, entity_id FROM pairs
    ) both_ways
    WHERE a <> b
    ORDER BY a, b, t, w DESC
    ON CONFLICT (from_unit, to_unit, link_type)
    DO UPDATE SET weight = GREATEST(memory_links.weight, EXCLUDED.weight)
"""


def _insert(conn: Connection[Any], pairs_sql: str, params: dict[str, Any]) -> int:
    cur = conn.execute(f"WITH pairs AS ({pairs_sql}) {_UPSERT}", params)
    return max(cur.rowcount, 0)


# Units said at the same moment (the turns of one conversation share its timestamp) are
# ordered by their position: the "later" half takes those after the unit in its document, the
# "earlier" half those before it, nearest first, so a turn links to the turns around it.
_LATER_IN_DOCUMENT = (
    "(coalesce(m.document_pk, m.id), m.item_index, m.seq, m.id)"
    " > (coalesce(u.document_pk, u.id), u.item_index, u.seq, u.id)"
)
_NEAREST_IN_DOCUMENT = (
    "m.document_pk IS DISTINCT FROM u.document_pk, abs(m.item_index - u.item_index), "
    "abs(m.seq - u.seq), m.id"
)


# Each unit's nearest units in time, within the window, on either side (`half` each).
_TEMPORAL_PAIRS = f"""
SELECT u.id AS from_unit, n.id AS to_unit, 'temporal'::text AS link_type,
       'temporal'::text AS reverse_type,
       GREATEST(0.3, 1 - abs(extract(epoch FROM n.event_date - u.event_date)) / %(w)s)::real
           AS weight, NULL::uuid AS entity_id
FROM memory_units u
CROSS JOIN LATERAL (
    (SELECT m.id, m.event_date FROM memory_units m
     WHERE m.agent_id = u.agent_id AND m.id <> u.id
       AND m.event_date BETWEEN u.event_date AND u.event_date + make_interval(secs => %(w)s)
       AND (m.event_date > u.event_date OR {_LATER_IN_DOCUMENT})
     ORDER BY m.event_date ASC, {_NEAREST_IN_DOCUMENT} LIMIT %(k)s)
    UNION ALL
    (SELECT m.id, m.event_date FROM memory_units m
     WHERE m.agent_id = u.agent_id AND m.id <> u.id
       AND m.event_date BETWEEN u.event_date - make_interval(secs => %(w)s) AND u.event_date
       AND (m.event_date < u.event_date OR NOT {_LATER_IN_DOCUMENT})
     ORDER BY m.event_date DESC, {_NEAREST_IN_DOCUMENT} LIMIT %(k)s)
) n
WHERE u.id = ANY(%(ids)s)
"""

# Each unit's nearest neighbours by embedding (HNSW), above the threshold.
_SEMANTIC_PAIRS = """
SELECT u.unit_id AS from_unit, n.id AS to_unit, 'semantic'::text AS link_type,
       'semantic'::text AS reverse_type, n.sim::real AS weight, NULL::uuid AS entity_id
FROM memory_vectors u
CROSS JOIN LATERAL (
    SELECT m.unit_id AS id, 1 - (m.embedding <=> u.embedding) AS sim
    FROM memory_vectors m WHERE m.agent_id = u.agent_id AND m.unit_id <> u.unit_id
    ORDER BY m.embedding <=> u.embedding LIMIT %(k)s
) n
WHERE u.unit_id = ANY(%(ids)s) AND n.sim > %(t)s
"""

# For each entity a unit mentions, the other units mentioning it nearest in time: the nearest
# `k` after it and before it (each with the mentions tied with its last, so that the order by
# distance then id below is exact), read from (entity, date) in two short index scans.
_ENTITY_PAIRS = """
SELECT ue.unit_id AS from_unit, n.id AS to_unit, 'entity'::text AS link_type,
       'entity'::text AS reverse_type, 1.0::real AS weight, ue.entity_id
FROM unit_entities ue
CROSS JOIN LATERAL (
    SELECT near.id FROM (
        (SELECT o.unit_id AS id, o.event_date FROM unit_entities o
         WHERE o.entity_id = ue.entity_id AND o.event_date >= ue.event_date
           AND o.unit_id <> ue.unit_id
         ORDER BY o.event_date FETCH FIRST %(k)s ROWS WITH TIES)
        UNION ALL
        (SELECT o.unit_id, o.event_date FROM unit_entities o
         WHERE o.entity_id = ue.entity_id AND o.event_date < ue.event_date
         ORDER BY o.event_date DESC FETCH FIRST %(k)s ROWS WITH TIES)
    ) near
    ORDER BY abs(extract(epoch FROM near.event_date - ue.event_date)), near.id
    LIMIT %(k)s
) n
WHERE ue.unit_id = ANY(%(ids)s)
"""

# The causal relations the extraction found between units of one document.
_CAUSAL_PAIRS = """
SELECT u.id AS from_unit, t.id AS to_unit, r.relation AS link_type,
       CASE r.relation WHEN 'causes' THEN 'caused_by' WHEN 'caused_by' THEN 'causes'
            ELSE r.relation END AS reverse_type,
       1.0::real AS weight, NULL::uuid AS entity_id
FROM memory_units u
CROSS JOIN LATERAL jsonb_to_recordset(u.relations)
    AS r(target_item int, target_seq int, relation text)
JOIN memory_units t ON t.document_pk = u.document_pk AND t.item_index = r.target_item
                   AND t.seq = r.target_seq
WHERE u.id = ANY(%(ids)s) AND u.relations IS NOT NULL AND r.relation = ANY(%(types)s)
"""


def build_links(conn: Connection[Any], unit_ids: list[UUID], s: LinkSettings) -> dict[str, int]:
    """Create all links for the given (new) units; idempotent. The caller commits."""
    if not unit_ids:
        return {}
    window = s.temporal_window_hours * 3600.0
    counts: dict[str, int] = {}
    half = max(1, s.temporal_per_unit // 2)
    counts["temporal"] = _insert(conn, _TEMPORAL_PAIRS, {"w": window, "k": half, "ids": unit_ids})
    conn.execute("SET LOCAL hnsw.ef_search = 64")
    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    semantic = {"k": s.semantic_per_unit, "t": s.semantic_threshold, "ids": unit_ids}
    counts["semantic"] = _insert(conn, _SEMANTIC_PAIRS, semantic)
    counts["entity"] = _insert(conn, _ENTITY_PAIRS, {"k": s.entity_per_entity, "ids": unit_ids})
    causal = {"ids": unit_ids, "types": list(CAUSAL_TYPES)}
    counts["causal"] = _insert(conn, _CAUSAL_PAIRS, causal)
    return counts
