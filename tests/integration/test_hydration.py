"""Hydration on real PostgreSQL (`fusion.hydrate`): the context signal, a candidate's best
similarity to the units next to it in its document (the turns before and after it and its
neighbours within a transcript item cut into several units, and no other unit); and what its
mentions say, whether it names an entity of the query and whether it names an answer of the
kind the question asks for, checked against the rows in Python."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from memora.retrieval import fusion
from memora.retrieval.arms import NamedEntities
from memora.retrieval.caches.mentions import MentionSignatures
from memora.retrieval.question import AnswerType
from memora.retrieval.types import SearchScope
from tests.integration.memory_support import add_entity, unit_vector

pytestmark = pytest.mark.integration

DIM = 384
START = datetime(2024, 1, 1, tzinfo=UTC)


def _document(conn: Any, agent_id: str, name: str) -> uuid.UUID:
    row = conn.execute(
        "INSERT INTO documents (agent_id, document_id, content_hash, items, item_count)"
        " VALUES (%s, %s, 'x', %s, 0) RETURNING id",
        (agent_id, name, Jsonb([])),
    ).fetchone()
    return row["id"]  # type: ignore[no-any-return]


def test_the_context_signal_is_the_best_similarity_next_to_a_unit(
    agent_conn: Any, agent_id: str
) -> None:
    conn = agent_conn
    rng = np.random.default_rng(21)
    query = unit_vector(rng.standard_normal(DIM))
    chat, other = _document(conn, agent_id, "chat"), _document(conn, agent_id, "other")
    # (document, item, seq): item 3 is one long turn cut into three units
    places = [(chat, i, 0) for i in range(8) if i != 3] + [(chat, 3, s) for s in range(3)]
    places += [(other, i, 0) for i in range(4)]  # item indexes next to the chat's: not its
    units: dict[uuid.UUID, tuple[uuid.UUID, int, int, np.ndarray]] = {}
    for n, (document, item, seq) in enumerate(places):
        vector = unit_vector(rng.standard_normal(DIM) + rng.uniform(0, 2) * query)
        unit = uuid.uuid4()
        when = START + timedelta(minutes=n)
        conn.execute(
            "INSERT INTO memory_units (id, agent_id, document_pk, item_index, seq, text,"
            " embedding, fact_type, event_date, mentioned_at) VALUES"
            " (%s, %s, %s, %s, %s, 'turn', %s, 'world', %s, %s)",
            (unit, agent_id, document, item, seq, vector, when, when),
        )
        units[unit] = (document, item, seq, vector)
    conn.commit()

    scope = SearchScope("default", agent_id, ("world",))
    found = fusion.hydrate(
        conn, scope, ids=list(units), vector=query, keyword=("(SELECT 0.0::float8 AS bm25)", {})
    )
    assert set(found) == set(units)
    for unit, (document, item, seq, _) in units.items():
        next_to = [
            v
            for other_unit, (d, i, s, v) in units.items()
            if other_unit != unit
            and d == document
            and ((i == item and abs(s - seq) == 1) or abs(i - item) == 1)
        ]
        assert next_to  # every unit here has one
        expected = max(float(v @ query) for v in next_to)
        assert found[unit].neighbours == pytest.approx(expected, abs=1e-5), (item, seq)


NO_KEYWORD = ("(SELECT 0.0::float8 AS bm25)", {})


def test_what_the_mentions_say_matches_the_rows(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    rng = np.random.default_rng(5)
    kinds = {"Mel": "PERSON", "Caroline": "PERSON", "Paris": "LOCATION", "Acme": "ORGANIZATION"}
    entities = {name: add_entity(conn, agent_id, name, kind) for name, kind in kinds.items()}
    # each unit: its speaker and the (entity, mention) pairs it names
    said: list[tuple[str | None, list[tuple[str, str]]]] = [
        ("Mel", [("Mel", "Mel")]),  # its speaker's own name: not an answer
        ("Mel", [("Mel", "Mel"), ("Paris", "Paris")]),
        ("Caroline", [("Acme", "Acme"), ("Caroline", "Caroline")]),
        (None, [("Caroline", "Caroline")]),
        ("Caroline", [("Paris", "Paris")]),
        (None, []),
        ("Mel", [("Caroline", "Caro"), ("Acme", "Acme Inc")]),
    ]
    units: dict[uuid.UUID, tuple[str | None, list[tuple[str, str]]]] = {}
    for n, (speaker, mentions) in enumerate(said):
        unit = uuid.uuid4()
        when = START + timedelta(minutes=n)
        conn.execute(
            "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
            " mentioned_at, metadata) VALUES (%s, %s, 'turn', %s, 'world', %s, %s, %s)",
            (unit, agent_id, unit_vector(rng.standard_normal(DIM)), when, when,
             Jsonb({"speaker": speaker} if speaker else {})),
        )  # fmt: skip
        for name, mention in mentions:
            conn.execute(
                "INSERT INTO unit_entities (unit_id, entity_id, mention) VALUES (%s, %s, %s)",
                (unit, entities[name], mention),
            )
        units[unit] = (speaker, mentions)
    conn.commit()

    scope = SearchScope("default", agent_id, ("world",))
    query = unit_vector(rng.standard_normal(DIM))
    cases: list[tuple[list[str], frozenset[str]]] = [
        ([], frozenset()),
        (["Caroline"], frozenset()),
        ([], frozenset({"LOCATION", "ORGANIZATION"})),
        (["Mel"], frozenset({"PERSON"})),
        (["Caroline", "Paris"], frozenset({"LOCATION", "PERSON"})),
    ]
    for named, types in cases:
        found = fusion.hydrate(
            conn, scope, ids=list(units), vector=query, keyword=NO_KEYWORD,
            entity_ids=[entities[n] for n in named], answer=AnswerType(types),
        )  # fmt: skip
        assert set(found) == set(units)
        for unit, (speaker, mentions) in units.items():
            names = any(name in named for name, _ in mentions)
            answers = any(
                kinds[name] in types and name not in named and mention != speaker
                for name, mention in mentions
            )
            assert found[unit].names_entity is names, (named, speaker, mentions)
            assert found[unit].answer_type is answers, (types, speaker, mentions)
            assert found[unit].speaker == speaker
            assert found[unit].place is None  # stated outside any document
        if named:  # the same from the mentions the entity retriever read (fusion's shortcut)
            ids = [entities[n] for n in named]
            read = MentionSignatures(1 << 20, 600.0).read(conn, "default", ids)
            mentioning = NamedEntities(dict.fromkeys(ids, named), mentions=read).mentioning()
            assert mentioning is not None
            assert {u: mentioning(str(u)) for u in units} == {
                u: found[u].names_entity for u in units
            }


def test_each_candidate_has_its_own_access_count(agent_conn: Any, agent_id: str) -> None:
    """A candidate with accesses gets its count and last access from `memory_access`, one
    without gets 0 and its creation, and the accesses of units outside the shortlist change
    nothing."""
    conn = agent_conn
    rng = np.random.default_rng(8)
    units = []
    for n in range(12):
        unit = uuid.uuid4()
        when = START + timedelta(minutes=n)
        conn.execute(
            "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
            " mentioned_at, created_at) VALUES (%s, %s, 'turn', %s, 'world', %s, %s, %s)",
            (unit, agent_id, unit_vector(rng.standard_normal(DIM)), when, when, when),
        )
        units.append(unit)
    accessed = {u: (n + 2, START + timedelta(days=n + 1)) for n, u in enumerate(units[::2])}
    for unit, (count, last) in accessed.items():
        conn.execute(
            "INSERT INTO memory_access (unit_id, access_count, last_accessed_at)"
            " VALUES (%s, %s, %s)",
            (unit, count, last),
        )
    conn.commit()

    shortlist = units[:8]  # the accesses of units[8] and units[10] are not asked for
    found = fusion.hydrate(
        conn, SearchScope("default", agent_id, ("world",)), ids=shortlist,
        vector=unit_vector(rng.standard_normal(DIM)), keyword=NO_KEYWORD,
    )  # fmt: skip
    assert set(found) == set(shortlist)
    for n, unit in enumerate(shortlist):
        count, last = accessed.get(unit, (0, START + timedelta(minutes=n)))
        assert (found[unit].access_count, found[unit].last_used) == (count, last), n
