"""Entity relations for the pipeline's entity stage: each unit's relations read
(memora.lifecycle.entity_relations), their names matched to the entities resolution linked to
that unit, and recorded (memora.store.relations) in the order the memories were said."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from psycopg import Connection

from memora.basics.relations import RELATIONS
from memora.extraction.base import Mention
from memora.lifecycle.changes import speaker_of
from memora.lifecycle.entity_relations import Relation, may_state, read
from memora.nlp.language import structures_ahead
from memora.nlp.names import normalize_name
from memora.store import relations as store


class Said(Protocol):
    """A unit as the entity stage reads it (memora.store.units.Unresolved)."""

    @property
    def id(self) -> UUID: ...
    @property
    def text(self) -> str: ...
    @property
    def entity_relations(self) -> list[dict[str, str]] | None: ...


def read_units(units: Sequence[Said]) -> dict[UUID, tuple[Relation, ...]]:
    """The relations each unit states or ends (the parse: outside any transaction), and those
    the LLM extractor read in it where it ran (`entity_relations`), each relation once."""
    structures_ahead(speaker_of(u.text)[1] for u in units if may_state(u.text))
    found = {}
    for unit in units:
        relations = [*read(unit.text), *extracted(unit.entity_relations)]
        once = {(*r.key(), r.mode == "end"): r for r in reversed(relations)}  # the parse's first
        if once:
            found[unit.id] = tuple(reversed(once.values()))
    return found


def extracted(rows: Sequence[dict[str, str]] | None) -> list[Relation]:
    """The LLM extractor's relations of a unit ({"subject", "relation", "object"} names)."""
    made = []
    for row in rows or ():
        a, b = normalize_name(row["subject"]), normalize_name(row["object"])
        if a and b and a != b and row["relation"] in RELATIONS:
            written = (row["subject"], row["object"])
            made.append(Relation(a, row["relation"], b, written=written, source="llm"))
    return made


# the type of an entity at each end of a relation, when resolution did not find it
_OBJECT_TYPES = {"works_at": "ORGANIZATION", "studies_at": "ORGANIZATION",
                 "member_of": "ORGANIZATION", "lives_in": "LOCATION"}  # fmt: skip


def mentions_of(relations: Sequence[Relation]) -> list[Mention]:
    """The names at the ends of a unit's relations, as mentions: the parse knows "Ana" in "my
    sister Ana" is a person where the tagger may not."""
    found = []
    for r in relations:
        found.append(Mention(r.written[0], "PERSON"))
        found.append(Mention(r.written[1], _OBJECT_TYPES.get(r.relation, "PERSON")))
    return [m for m in found if m.name]


def record_units(
    conn: Connection[Any], agent_id: str, units: Sequence[Any], found: dict[UUID, Any]
) -> dict[str, int]:
    """Record the relations read from `units` (each with id and event_date) between the
    entities linked to them; counts of what was done."""
    counts: dict[str, int] = defaultdict(int)
    if not found:
        return {}
    named: dict[UUID, list[tuple[UUID, set[str]]]] = defaultdict(list)
    for row in store.unit_entities(conn, list(found)):
        names = {row["normalized_name"], *row["aliases"]}
        named[row["unit_id"]].append((row["entity_id"], names))
    for unit in sorted((u for u in units if u.id in found), key=lambda u: u.event_date):
        for r in found[unit.id]:
            subject = entity_named(r.subject, named[unit.id])
            obj = entity_named(r.object, named[unit.id])
            if subject is None or obj is None or subject == obj:
                counts["relations_unresolved"] += 1
                continue
            stated = store.Stated(
                unit.id, subject, r.relation, obj, unit.event_date, r.mode, r.additive, r.source
            )
            counts[f"relations_{store.record(conn, agent_id, stated)}"] += 1
    return dict(counts)


def entity_named(name: str, entities: Sequence[tuple[UUID, set[str]]]) -> UUID | None:
    """The one entity a name is (a name or alias of it), else the one whose name holds all of
    its words ("priya" of "priya sharma"); None where none or several fit."""
    exact = {e for e, names in entities if name in names}
    if len(exact) == 1:
        return exact.pop()
    if exact:
        return None
    words = set(name.split())
    partial = {e for e, names in entities if any(words <= set(n.split()) for n in names)}
    return partial.pop() if len(partial) == 1 else None
