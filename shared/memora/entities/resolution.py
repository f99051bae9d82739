"""Entity resolution (seed 000 §2.3): mentions become canonical entities per agent.

score = w_name·name_similarity + w_cooc·co-occurrence + w_time·temporal proximity, matched when
score ≥ threshold (0.5 / 0.3 / 0.2 and 0.75 by default). Two refinements, both documented:
an exact (normalised) name or alias match of the same type is the same entity outright, and a
candidate named in the very same memory as the mention is never merged with it ("Alice" and
"Alice Cooper" in one sentence are two people). And context is read (memora.entities.traits):
a mention is not merged into an entity whose evidence mostly contradicts what its memory says
("Sam said she…" against a Sam who is "he"; "Luna told me…" against "our cat Luna"); of several
entities its name fits exactly, the one seen last. Resolution for one agent runs under a
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

from memora.basics.config import Settings
from memora.basics.turns import SPEAKER_PREFIX
from memora.entities import traits as context
from memora.extraction.base import Mention
from memora.extraction.cleaning import SpeakerNames, clean_mentions
from memora.nlp import person_names
from memora.nlp.language import ENTITY_TYPES, load_nlp
from memora.nlp.names import normalize_name
from memora.store import entities as store
from memora.store.units import Unresolved


@dataclass(frozen=True)
class ResolutionWeights:
    name: float
    cooccurrence: float
    temporal: float
    threshold: float

    @classmethod
    def from_settings(cls, s: Settings) -> ResolutionWeights:
        return cls(
            s.entity_name_weight,
            s.entity_cooccurrence_weight,
            s.entity_temporal_weight,
            s.entity_match_threshold,
        )


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
    traits: context.Traits = field(default_factory=dict)
    traits_changed: bool = False

    def names(self) -> set[str]:
        return {self.normalized_name} | self.aliases


@dataclass
class UnitMentions:
    unit_id: UUID
    event_date: datetime
    mentions: Sequence[Mention]
    text: str = ""  # what the memory says: read for context (entities.traits)


GAZETTEER_TYPES = frozenset(store.NAMED_TYPES)


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
        rows = store.known_names(conn, agent_id, limit)
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
    conn: Connection[Any], agent_id: str, names: list[str], people: list[str]
) -> dict[UUID, Candidate]:
    """Entities whose names look like `names`, and the people that `people` (the names of
    PERSON mentions) may be a nickname or short form of."""
    firsts: set[str] = set()
    lasts: set[str] = set()
    for name in people:
        f, la = person_names.lookup_keys(name)
        firsts.update(f)
        lasts.update(la)
    rows = store.candidates(conn, agent_id, names) + store.people(
        conn, agent_id, sorted(firsts), sorted(lasts)
    )
    return {
        r["id"]: Candidate(
            r["id"],
            r["normalized_name"],
            set(r["aliases"]),
            r["entity_type"],
            r["last_seen"],
            traits=dict(r["traits"]),
        )
        for r in rows
    }


def resolve(
    conn: Connection[Any], agent_id: str, units: list[UnitMentions], weights: ResolutionWeights
) -> ResolutionResult:
    """Resolve every mention of `units` and write entities and unit_entities (caller commits)."""
    result = ResolutionResult()
    all_names = sorted({normalize_name(m.name) for u in units for m in u.mentions} - {""})
    if not all_names:
        return result
    people = sorted(
        {normalize_name(m.name) for u in units for m in u.mentions if m.entity_type == "PERSON"}
    )
    store.lock_agent(conn, agent_id)
    candidates = _load_candidates(conn, agent_id, all_names, people)
    reader = context.Reader()
    seen: dict[tuple[UUID, UUID], str] = {}
    for unit in units:
        unit_names = {normalize_name(m.name) for m in unit.mentions}
        for mention in unit.mentions:
            name = normalize_name(mention.name)
            if not name:
                continue
            said = _said(reader, unit, mention, candidates)
            usable = [c for c in candidates.values() if context.compatible(c.traits, said)]
            entity = _match(conn, name, mention.entity_type, unit, unit_names, usable, weights)
            if entity is None:
                entity = _create(conn, agent_id, mention, name, unit.event_date)
                candidates[entity.id] = entity
                result.created += 1
            elif name not in entity.names():
                entity.aliases.add(name)
                store.add_alias(conn, entity.id, name)
            if said:
                entity.traits, entity.traits_changed = context.add(entity.traits, said), True
            entity.last_seen = max(entity.last_seen, unit.event_date)
            seen.setdefault((unit.unit_id, entity.id), mention.name)
    result.links = [(u, e, m) for (u, e), m in seen.items()]
    store.set_traits(conn, [(c.id, c.traits) for c in candidates.values() if c.traits_changed])
    store.link_units(conn, result.links, [u.unit_id for u in units])
    return result


def _said(
    reader: context.Reader, unit: UnitMentions, mention: Mention, known: dict[UUID, Candidate]
) -> context.Traits:
    """What the unit says of a person it names (entities.traits); human cues are read only
    where some entity already has evidence to compare with."""
    if mention.entity_type != "PERSON" or not unit.text:
        return {}
    comparing = any(c.traits for c in known.values())
    body = _SPEAKER_PREFIX.sub("", unit.text, count=1)  # a turn's speaker is its "I"
    return reader.of(body, mention.name, comparing=comparing)


def _match(
    conn: Connection[Any],
    name: str,
    entity_type: str,
    unit: UnitMentions,
    unit_names: set[str],
    candidates: list[Candidate],
    weights: ResolutionWeights,
) -> Candidate | None:
    same_type = [c for c in candidates if c.entity_type == entity_type]
    exact = [c for c in same_type if name in c.names()]
    if exact:  # of two people of one name, the one seen last
        return max(exact, key=lambda c: c.last_seen)
    # The same name under another named type is, within one agent's memories, far more often
    # the tagger changing its mind (spaCy's small model tags "Alice" PERSON in one sentence and
    # ORG in the next) than two different entities; splitting them cuts graph reach.
    if entity_type in GAZETTEER_TYPES:
        for cand in candidates:
            if cand.entity_type in GAZETTEER_TYPES and name in cand.names():
                return cand
    # Never merge with an entity that this same memory names separately.
    others = unit_names - {name}
    same_type = [c for c in same_type if not (c.names() & others)]
    if entity_type == "PERSON":
        # Nicknames and short forms: merged when exactly one known person fits; when several
        # do ("Sam" with a Samuel and a Samantha), the mention is nobody's yet.
        fitting = [c for c in same_type if person_names.fits(name, c.names())]
        if len(fitting) > 1:
            return None
        if fitting:
            return fitting[0]
        same_type = [
            c for c in same_type if not person_names.surnames_conflict(name, c.normalized_name)
        ]
    fuzzy = same_type
    scored = [(c, name_similarity(name, c.normalized_name)) for c in fuzzy]
    scored = [(c, s) for c, s in scored if s >= 0.5]
    if not scored:
        return None
    co_names = sorted(unit_names - {name})
    shared = store.shared_memory_counts(conn, [c.id for c, _ in scored], co_names)
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
    entity_id = store.create(conn, agent_id, mention.name.strip(), name, mention.entity_type, when)
    return Candidate(entity_id, name, set(), mention.entity_type, when, created=True)


_SPEAKER_PREFIX = re.compile(SPEAKER_PREFIX)


def find_mentions(rows: Sequence[Unresolved]) -> list[UnitMentions]:
    """Mentions as the extractor recorded them, or from spaCy NER where it left none; either
    way cleaned (memora.extraction.cleaning), with the speakers of the rows ("Name: " prefixes)
    as PERSON entities under their own name."""
    speakers = SpeakerNames.of(
        m.group(1) for r in rows if (m := _SPEAKER_PREFIX.match(r.text)) is not None
    )
    missing = [r for r in rows if r.mentions is None]
    ner: dict[UUID, list[Mention]] = {}
    if missing:
        for row, parsed in zip(missing, load_nlp().pipe(r.text for r in missing), strict=True):
            ner[row.id] = [
                Mention(e.text.strip(), ENTITY_TYPES[e.label_])
                for e in parsed.ents
                if e.label_ in ENTITY_TYPES
            ]
    return [
        UnitMentions(
            r.id,
            r.event_date,
            clean_mentions(
                ner[r.id]
                if r.mentions is None
                else [Mention(m["name"], m["entity_type"]) for m in r.mentions],
                speakers,
            ),
            r.text,
        )
        for r in rows
    ]
