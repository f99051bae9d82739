"""Entity resolution (seed 000 §2.3): mentions become canonical entities per agent.

score = w_name·name_similarity + w_cooc·co-occurrence + w_time·temporal proximity, matched when
score ≥ threshold (0.5 / 0.3 / 0.2 and 0.75 by default). Two refinements, both documented:
an exact (normalised) name or alias match of the same type is the same entity outright, and a
candidate named in the very same memory as the mention is never merged with it ("Alice" and
"Alice Cooper" in one sentence are two people). Resolution for one agent runs under a
transaction-scoped advisory lock, so concurrent workers never create the same entity twice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from rapidfuzz.distance import Levenshtein

from memora.extraction.base import Mention

_PUNCT = re.compile(r"[^\w\s&+-]")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ResolutionWeights:
    name: float = 0.5
    cooccurrence: float = 0.3
    temporal: float = 0.2
    threshold: float = 0.75


def normalize_name(name: str) -> str:
    name = name.strip().lower()
    name = re.sub(r"'s$|’s$", "", name)
    name = _SPACE.sub(" ", _PUNCT.sub(" ", name)).strip()
    return name[4:] if name.startswith("the ") else name


def name_similarity(a: str, b: str) -> float:
    """1 − Levenshtein distance / max length, lifted to 0.9 when one name's words are all in
    the other ("Alice" ⊂ "Alice Chen", "Google" ⊂ "Google Inc")."""
    if a == b:
        return 1.0
    score = Levenshtein.normalized_similarity(a, b)
    short, long_ = sorted((set(a.split()), set(b.split())), key=len)
    if short and short < long_:
        score = max(score, 0.9)
    return float(score)


def cooccurrence_score(shared_memory_count: int) -> float:
    return min(1.0, shared_memory_count / 10.0)


def temporal_score(gap_seconds: float) -> float:
    return math.exp(-abs(gap_seconds) / (7 * 86400))


def match_score(
    name_sim: float, cooccurrence: float, temporal: float, w: ResolutionWeights
) -> float:
    return w.name * name_sim + w.cooccurrence * cooccurrence + w.temporal * temporal


@dataclass
class Candidate:
    id: UUID
    normalized_name: str
    aliases: set[str]
    entity_type: str
    last_seen: datetime
    created: bool = False

    def names(self) -> set[str]:
        return {self.normalized_name} | self.aliases


@dataclass
class UnitMentions:
    unit_id: UUID
    event_date: datetime
    mentions: Sequence[Mention]


GAZETTEER_TYPES = frozenset({"PERSON", "ORGANIZATION", "LOCATION", "PRODUCT"})


class Gazetteer:
    """Names the agent already knows, found again as whole words (spaCy's small model misses
    many sentence-initial or lower-context names: "Alice loves hiking")."""

    def __init__(self, names: dict[str, str]) -> None:
        self.types = names
        ordered = sorted(names, key=len, reverse=True)
        self.pattern = (
            re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in ordered) + r")(?!\w)")
            if ordered
            else None
        )

    @classmethod
    def load(
        cls, conn: Connection[Any], agent_id: str, also: Sequence[Mention] = (), limit: int = 5000
    ) -> Gazetteer:
        rows = conn.execute(
            "SELECT canonical_name, entity_type FROM entities WHERE agent_id = %s "
            "AND entity_type IN ('PERSON', 'ORGANIZATION', 'LOCATION', 'PRODUCT') "
            "AND length(canonical_name) > 2 ORDER BY mention_count DESC LIMIT %s",
            (agent_id, limit),
        ).fetchall()
        names = {m.name: m.entity_type for m in also if m.entity_type in GAZETTEER_TYPES}
        names.update({r["canonical_name"]: r["entity_type"] for r in rows})
        return cls({n: t for n, t in names.items() if len(n) > 2})

    def find(self, text: str) -> list[Mention]:
        if self.pattern is None:
            return []
        found = dict.fromkeys(m.group(1) for m in self.pattern.finditer(text))
        return [Mention(name, self.types[name]) for name in found]


def merge_mentions(first: Sequence[Mention], extra: Sequence[Mention]) -> list[Mention]:
    """Union by normalised name; the first list wins on type."""
    seen = {normalize_name(m.name) for m in first}
    merged = list(first)
    for m in extra:
        if normalize_name(m.name) not in seen:
            seen.add(normalize_name(m.name))
            merged.append(m)
    return merged


@dataclass
class ResolutionResult:
    links: list[tuple[UUID, UUID, str]] = field(default_factory=list)  # unit, entity, mention
    created: int = 0


def _load_candidates(
    conn: Connection[Any], agent_id: str, names: list[str]
) -> dict[UUID, Candidate]:
    rows = conn.execute(
        """
        SELECT DISTINCT e.id, e.normalized_name, e.aliases, e.entity_type, e.last_seen
        FROM unnest(%s::text[]) AS m(name)
        JOIN LATERAL (
            SELECT id, normalized_name, aliases, entity_type, last_seen FROM entities
            WHERE agent_id = %s AND (normalized_name = m.name OR m.name = ANY(aliases)
                                     OR normalized_name %% m.name)
            LIMIT 25
        ) e ON true
        """,
        (names, agent_id),
    ).fetchall()
    return {
        r["id"]: Candidate(
            r["id"], r["normalized_name"], set(r["aliases"]), r["entity_type"], r["last_seen"]
        )
        for r in rows
    }


def _shared_counts(
    conn: Connection[Any], candidate_ids: list[UUID], co_names: list[str]
) -> dict[UUID, int]:
    if not candidate_ids or not co_names:
        return {}
    rows = conn.execute(
        """
        SELECT a.entity_id, count(DISTINCT a.unit_id) AS n
        FROM unit_entities a
        JOIN unit_entities b ON b.unit_id = a.unit_id AND b.entity_id <> a.entity_id
        JOIN entities e ON e.id = b.entity_id
        WHERE a.entity_id = ANY(%s)
          AND (e.normalized_name = ANY(%s) OR e.aliases && %s)
        GROUP BY a.entity_id
        """,
        (candidate_ids, co_names, co_names),
    ).fetchall()
    return {r["entity_id"]: r["n"] for r in rows}


def resolve(
    conn: Connection[Any], agent_id: str, units: list[UnitMentions], weights: ResolutionWeights
) -> ResolutionResult:
    """Resolve every mention of `units` and write entities and unit_entities (caller commits)."""
    result = ResolutionResult()
    all_names = sorted({normalize_name(m.name) for u in units for m in u.mentions} - {""})
    if not all_names:
        return result
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"entities:{agent_id}",))
    candidates = _load_candidates(conn, agent_id, all_names)
    seen: dict[tuple[UUID, UUID], str] = {}
    for unit in units:
        unit_names = {normalize_name(m.name) for m in unit.mentions}
        for mention in unit.mentions:
            name = normalize_name(mention.name)
            if not name:
                continue
            entity = _match(conn, name, mention.entity_type, unit, unit_names, candidates, weights)
            if entity is None:
                entity = _create(conn, agent_id, mention, name, unit.event_date)
                candidates[entity.id] = entity
                result.created += 1
            elif name not in entity.names():
                entity.aliases.add(name)
                conn.execute(
                    "UPDATE entities SET aliases = array_append(aliases, %s) WHERE id = %s",
                    (name, entity.id),
                )
            entity.last_seen = max(entity.last_seen, unit.event_date)
            seen.setdefault((unit.unit_id, entity.id), mention.name)
    result.links = [(u, e, m) for (u, e), m in seen.items()]
    _write_links(conn, result.links, units)
    return result


def _match(
    conn: Connection[Any],
    name: str,
    entity_type: str,
    unit: UnitMentions,
    unit_names: set[str],
    candidates: dict[UUID, Candidate],
    weights: ResolutionWeights,
) -> Candidate | None:
    same_type = [c for c in candidates.values() if c.entity_type == entity_type]
    for cand in same_type:
        if name in cand.names():
            return cand
    # The same name under another named type is, within one agent's memories, far more often
    # the tagger changing its mind (spaCy's small model tags "Alice" PERSON in one sentence and
    # ORG in the next) than two different entities; splitting them cuts graph reach.
    if entity_type in GAZETTEER_TYPES:
        for cand in candidates.values():
            if cand.entity_type in GAZETTEER_TYPES and name in cand.names():
                return cand
    # Fuzzy: never merge with an entity that this same memory names separately.
    fuzzy = [c for c in same_type if not (c.names() & (unit_names - {name}))]
    scored = [(c, name_similarity(name, c.normalized_name)) for c in fuzzy]
    scored = [(c, s) for c, s in scored if s >= 0.5]
    if not scored:
        return None
    co_names = sorted(unit_names - {name})
    shared = _shared_counts(conn, [c.id for c, _ in scored], co_names)
    best: tuple[float, Candidate] | None = None
    for cand, sim in scored:
        gap = (unit.event_date - cand.last_seen).total_seconds()
        score = match_score(
            sim, cooccurrence_score(shared.get(cand.id, 0)), temporal_score(gap), weights
        )
        if score >= weights.threshold and (best is None or score > best[0]):
            best = (score, cand)
    return best[1] if best else None


def _create(
    conn: Connection[Any], agent_id: str, mention: Mention, name: str, when: datetime
) -> Candidate:
    row = conn.execute(
        """
        INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type,
                              first_seen, last_seen)
        VALUES (%s, %s, %s, %s, %s, %s) RETURNING id
        """,
        (agent_id, mention.name.strip(), name, mention.entity_type, when, when),
    ).fetchone()
    assert row is not None
    return Candidate(row["id"], name, set(), mention.entity_type, when, created=True)


def _write_links(
    conn: Connection[Any], links: list[tuple[UUID, UUID, str]], units: list[UnitMentions]
) -> None:
    if not links:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO unit_entities (unit_id, entity_id, mention) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            links,
        )
    conn.execute(
        """
        UPDATE entities e SET
            mention_count = e.mention_count + s.n,
            first_seen = LEAST(e.first_seen, s.first_seen),
            last_seen = GREATEST(e.last_seen, s.last_seen),
            canonical_name = CASE WHEN length(s.longest) > length(e.canonical_name)
                                  THEN s.longest ELSE e.canonical_name END
        FROM (
            SELECT ue.entity_id, count(*) AS n, min(u.event_date) AS first_seen,
                   max(u.event_date) AS last_seen,
                   (array_agg(ue.mention ORDER BY length(ue.mention) DESC))[1] AS longest
            FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id
            WHERE ue.unit_id = ANY(%s)
            GROUP BY ue.entity_id
        ) s
        WHERE e.id = s.entity_id
        """,
        ([u.unit_id for u in units],),
    )
