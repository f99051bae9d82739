"""Entity resolution on real PostgreSQL: matching, aliases, and concurrency."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from memora.basics.config import Settings
from memora.entities.resolution import ResolutionWeights, UnitMentions, resolve
from memora.extraction.base import Fact, Mention
from memora.store.units import insert_facts

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


def _units(pool: Any, agent_id: str, texts: list[str], when: datetime = T0) -> list[UUID]:
    facts = [Fact(0, i, t, "world", when, when) for i, t in enumerate(texts)]
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO agents (agent_id) VALUES (%s) ON CONFLICT DO NOTHING", (agent_id,)
        )
        return insert_facts(conn, agent_id, None, facts)


def _entities(pool: Any, agent_id: str) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT canonical_name, aliases, mention_count FROM entities WHERE agent_id = %s "
            "ORDER BY canonical_name",
            (agent_id,),
        ).fetchall()


def test_concurrent_workers_never_create_two_canonical_entities(pool: Any, agent_id: str) -> None:
    ids = _units(pool, agent_id, [f"Alice said thing {i}" for i in range(8)])
    barrier = threading.Barrier(len(ids))
    errors: list[BaseException] = []

    def work(unit_id: UUID) -> None:
        try:
            with pool.connection() as conn, conn.transaction():
                barrier.wait()
                resolve(
                    conn,
                    agent_id,
                    [UnitMentions(unit_id, T0, [Mention("Alice", "PERSON")])],
                    ResolutionWeights.from_settings(Settings()),
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(u,)) for u in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert _entities(pool, agent_id) == [
        {"canonical_name": "Alice", "aliases": [], "mention_count": 8}
    ]


def test_fuzzy_match_needs_evidence_and_same_memory_names_stay_distinct(
    pool: Any, agent_id: str
) -> None:
    w = ResolutionWeights.from_settings(Settings())
    first = _units(pool, agent_id, [f"Alice works at Google with Bob ({i})" for i in range(6)])
    with pool.connection() as conn, conn.transaction():
        resolve(
            conn,
            agent_id,
            [
                UnitMentions(
                    u,
                    T0,
                    [
                        Mention("Alice", "PERSON"),
                        Mention("Google", "ORGANIZATION"),
                        Mention("Bob", "PERSON"),
                    ],
                )
                for u in first
            ],
            w,
        )
    # "Alice Cooper" named in the same memory as "Alice": two different people.
    both = _units(pool, agent_id, ["Alice met Alice Cooper"], T0 + timedelta(days=1))
    with pool.connection() as conn, conn.transaction():
        resolve(
            conn,
            agent_id,
            [
                UnitMentions(
                    both[0], T0, [Mention("Alice", "PERSON"), Mention("Alice Cooper", "PERSON")]
                )
            ],
            w,
        )
    names = [e["canonical_name"] for e in _entities(pool, agent_id)]
    assert names.count("Alice") == 1 and "Alice Cooper" in names
    # Google Inc the next day, with Alice and Bob, who were seen with Google in six memories:
    # 0.5·0.9 (name) + 0.3·0.6 (co-occurrence) + 0.2·e^(-1/7) (time) ≈ 0.80 ≥ 0.75.
    later = _units(
        pool,
        agent_id,
        [f"Alice and Bob at Google Inc {i}" for i in range(10)],
        T0 + timedelta(days=1),
    )
    with pool.connection() as conn, conn.transaction():
        resolve(
            conn,
            agent_id,
            [
                UnitMentions(
                    u,
                    T0 + timedelta(days=1),
                    [
                        Mention("Alice", "PERSON"),
                        Mention("Bob", "PERSON"),
                        Mention("Google Inc", "ORGANIZATION"),
                    ],
                )
                for u in later
            ],
            w,
        )
    orgs = [e for e in _entities(pool, agent_id) if e["canonical_name"].startswith("Google")]
    assert len(orgs) == 1
    assert orgs[0]["canonical_name"] == "Google Inc" and orgs[0]["aliases"] == ["google inc"]
    assert orgs[0]["mention_count"] == 16


def test_the_same_name_under_another_named_type_is_one_entity(pool: Any, agent_id: str) -> None:
    """spaCy's small model tags one person PERSON in one sentence and ORG in the next."""
    ids = _units(pool, agent_id, ["Alice went hiking", "Alice's favourite snack", "AI is fun"])
    with pool.connection() as conn, conn.transaction():
        resolve(
            conn,
            agent_id,
            [
                UnitMentions(ids[0], T0, [Mention("Alice", "PERSON")]),
                UnitMentions(ids[1], T0, [Mention("Alice", "ORGANIZATION")]),
                UnitMentions(ids[2], T0, [Mention("AI", "CONCEPT")]),
            ],
            ResolutionWeights.from_settings(Settings()),
        )
        later = _units(pool, agent_id, ["AI and Alice"])
        resolve(
            conn,
            agent_id,
            [
                UnitMentions(
                    later[0], T0, [Mention("AI", "ORGANIZATION"), Mention("Alice", "LOCATION")]
                )
            ],
            ResolutionWeights.from_settings(Settings()),
        )
    with pool.connection() as conn:
        found = conn.execute(
            "SELECT canonical_name, entity_type, mention_count FROM entities WHERE agent_id = %s "
            "ORDER BY canonical_name, entity_type",
            (agent_id,),
        ).fetchall()
    # Alice is one entity across three named types (typed as first seen); a concept is not a
    # named type, so "AI" the concept and "AI" the organisation stay apart
    assert [tuple(e.values()) for e in found] == [
        ("AI", "CONCEPT", 1),
        ("AI", "ORGANIZATION", 1),
        ("Alice", "PERSON", 3),
    ]


def _resolve_one(pool: Any, agent_id: str, text: str, *mentions: Mention) -> list[UUID]:
    (unit,) = _units(pool, agent_id, [text])
    with pool.connection() as conn, conn.transaction():
        result = resolve(
            conn,
            agent_id,
            [UnitMentions(unit, T0, list(mentions))],
            ResolutionWeights.from_settings(Settings()),
        )
    by_name = {m: e for _, e, m in result.links}
    return [by_name[m.name] for m in mentions]


def test_nicknames_and_short_forms_resolve_to_the_one_person_who_fits(
    pool: Any, agent_id: str
) -> None:
    (robert,) = _resolve_one(pool, agent_id, "Robert Chen joined", Mention("Robert Chen", "PERSON"))
    assert _resolve_one(pool, agent_id, "Bob Chen won", Mention("Bob Chen", "PERSON")) == [robert]
    assert _resolve_one(pool, agent_id, "Bobby won", Mention("Bobby", "PERSON")) == [robert]
    # another surname, another type: not him
    (miller,) = _resolve_one(pool, agent_id, "Bob Miller", Mention("Bob Miller", "PERSON"))
    (bakery,) = _resolve_one(pool, agent_id, "Bob's", Mention("Bob Bakery", "ORGANIZATION"))
    assert robert not in (miller, bakery)
    # "Robert" alone now fits two people: nobody's yet
    (alone,) = _resolve_one(pool, agent_id, "Robert called", Mention("Robert", "PERSON"))
    assert alone not in (robert, miller)
    with pool.connection() as conn:
        row = conn.execute("SELECT aliases FROM entities WHERE id = %s", (robert,)).fetchone()
    assert row is not None and set(row["aliases"]) == {"bob chen", "bobby"}


def test_display_name_is_the_most_frequent_surface_form(pool: Any, agent_id: str) -> None:
    (mel,) = _resolve_one(
        pool, agent_id, "Melanie Brooks paints", Mention("Melanie Brooks", "PERSON")
    )
    for text in ("Melanie swam", "Melanie ran", "Melanie sang"):
        assert _resolve_one(pool, agent_id, text, Mention("Melanie", "PERSON")) == [mel]
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT canonical_name, aliases, name_counts, mention_count FROM entities "
            "WHERE id = %s",
            (mel,),
        ).fetchone()
    assert row == {
        "canonical_name": "Melanie",
        "aliases": ["melanie"],
        "name_counts": {"Melanie Brooks": 1, "Melanie": 3},
        "mention_count": 4,
    }


def test_two_people_of_one_name_stay_apart_when_what_is_said_contradicts(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """Through the pipeline (local extractor, entity stage): a brother Alex and a daughter
    Alex are two entities with their evidence; a plain later "Alex" joins the one seen last;
    the pet Luna and a Luna who speaks stay apart too."""
    turns = [
        "My brother Alex lives in Denver and fixes old bikes.",
        "Our cat Luna caught a mouse in the garden.",
        "My daughter Alex started kindergarten this week.",
        "Luna told me about her new job at the bank.",
        "Alex painted a rainbow at school today.",
    ]
    items = [
        {"content": text, "speaker": "Maya", "role": "user",
         "event_date": f"2024-03-0{i + 1}T10:00:00Z"}
        for i, text in enumerate(turns)
    ]  # fmt: skip
    body = {"agent_id": agent_id, "document_id": "family", "items": items}
    response = inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    operation = inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert operation["status"] == "completed", operation
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT e.id, e.canonical_name, e.traits, "
            "array_agg(u.text ORDER BY u.event_date) AS texts "
            "FROM entities e JOIN unit_entities ue ON ue.entity_id = e.id "
            "JOIN memory_units u ON u.id = ue.unit_id "
            "WHERE e.agent_id = %s AND e.canonical_name IN ('Alex', 'Luna') "
            "GROUP BY e.id ORDER BY min(u.event_date)",
            (agent_id,),
        ).fetchall()
    said = [(r["canonical_name"], sorted(r["traits"]), [t.split(": ", 1)[1] for t in r["texts"]])
            for r in rows]  # fmt: skip
    assert said == [
        ("Alex", ["human", "male"], [turns[0]]),
        ("Luna", ["animal"], [turns[1]]),
        ("Alex", ["female", "human"], [turns[2], turns[4]]),
        ("Luna", ["female", "human"], [turns[3]]),
    ]
    view = inline_api.get(f"/api/agents/{agent_id}/entities/{rows[1]['id']}").json()
    assert view["canonical_name"] == "Luna" and view["traits"] == {"animal": 1}
