"""The entity retriever's units query (`entity_arm.entity_units`) on real PostgreSQL: an entity with
few mentions has them ranked exactly, a common one by its mentions' signatures (migration
0021), under filters the best of them that pass; all agree with the exact ranking. The
signatures follow the units' embeddings, and those held in memory follow every change."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY

from memora.retrieval.arms import entity as entity_arm
from memora.retrieval.caches.mentions import MentionSignatures, Unheld, query_signature
from memora.retrieval.filters import Filters, Matching, compile_filters
from memora.retrieval.types import SearchScope
from tests.integration.memory_support import add_entity, store_memory, unit_vector

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 1, tzinfo=UTC)
DIM = 384


@pytest.fixture()
def conn(agent_conn: Any) -> Any:
    return agent_conn


def _mentions() -> MentionSignatures:
    return MentionSignatures(1 << 20, 600.0)


def _mention(
    conn: Any, agent_id: str, vector: np.ndarray, entity: uuid.UUID, day: int
) -> uuid.UUID:
    scene = {"scene": "odd" if day % 2 else "even"}
    when = START + timedelta(days=day)
    unit = store_memory(conn, agent_id, vector, when, scene, f"memory {day}")
    conn.execute(
        "INSERT INTO unit_entities (unit_id, entity_id, mention) VALUES (%s, %s, 'x')",
        (unit, entity),
    )
    return unit


def _ana(
    conn: Any, agent_id: str, rng: np.random.Generator, count: int
) -> tuple[np.ndarray, uuid.UUID, list[uuid.UUID]]:
    """A query, and an entity "Ana" mentioned by `count` units with random embeddings."""
    query = unit_vector(rng.standard_normal(DIM))
    ana = add_entity(conn, agent_id, "Ana")
    units = [
        _mention(conn, agent_id, unit_vector(rng.standard_normal(DIM)), ana, d)
        for d in range(count)
    ]
    conn.commit()
    return query, ana, units


def _reads(kind: str) -> float:
    """`memora_mention_cache_reads_total` for one kind of read, so far."""
    labels = {"read": kind}
    return REGISTRY.get_sample_value("memora_mention_cache_reads_total", labels) or 0.0


def _ranked(
    conn: Any, held: MentionSignatures, agent_id: str, entity: uuid.UUID, query: np.ndarray,
    unheld: list[Unheld] | None, exact_max: int = 10,
) -> list[tuple[uuid.UUID, float]]:  # fmt: skip
    """The entity retriever's units for one entity (the 16 best signatures compared, with
    `exact_max` 10), unfiltered, in a transaction of its own."""
    scope = SearchScope("default", agent_id, ("world",))
    with conn.transaction():
        return entity_arm.entity_units(
            conn, scope, entity_ids=[entity], vector=query, per_entity=8, oversample=2,
            min_similarity=-1.0, exact_max=exact_max, mentions=held, unheld=unheld,
        )  # fmt: skip


def _same(found: list[tuple[uuid.UUID, float]], expected: list[tuple[uuid.UUID, float]]) -> bool:
    """The same units in the same order, with the same similarities (to float precision)."""
    return [u for u, _ in found] == [u for u, _ in expected] and dict(found) == pytest.approx(
        dict(expected), abs=1e-6
    )


def test_rare_and_common_entities_rank_their_mentions_like_the_exact_ranking(
    conn: Any, agent_id: str
) -> None:
    rng = np.random.default_rng(3)

    def noise() -> np.ndarray:  # of length ~1
        return rng.standard_normal(DIM) / np.sqrt(DIM)

    query = unit_vector(noise())
    common, rare = add_entity(conn, agent_id, "Ana"), add_entity(conn, agent_id, "Bo")
    closest = set()
    for day in range(60):  # Ana: 60 mentions, 20 of them close to the query
        unit = _mention(conn, agent_id, unit_vector(noise() + (day % 3) * query), common, day)
        if day % 3 == 2:
            closest.add(unit)
    for day in range(60, 120):  # and 60 far from it
        _mention(conn, agent_id, unit_vector(noise() - query), common, day)
    far = _mention(conn, agent_id, unit_vector(-query + 0.1 * noise()), rare, 121)
    near = _mention(conn, agent_id, unit_vector(query + 0.1 * noise()), rare, 122)
    conn.commit()
    scope = SearchScope("default", agent_id, ("world",))

    def ranked(
        entity: uuid.UUID, exact_max: int, within: SearchScope = scope
    ) -> list[tuple[uuid.UUID, float]]:
        with conn.transaction():
            return entity_arm.entity_units(
                conn, within, entity_ids=[entity], vector=query, per_entity=10,
                min_similarity=-1.0, exact_max=exact_max, oversample=1, mentions=_mentions(),
            )  # fmt: skip

    exact = ranked(common, exact_max=1000)
    # 120 mentions > 20: the 10 best signatures (oversample 1), re-ranked exactly
    by_signature = ranked(common, exact_max=20)
    assert len(exact) == 10 and {u for u, _ in exact} <= closest
    assert len(by_signature) == 10 and {u for u, _ in by_signature} <= closest
    even = SearchScope(
        "default",
        agent_id,
        ("world",),
        compile_filters(Filters.model_validate({"scene": "even"}), "m"),
    )
    walked = ranked(common, exact_max=20, within=even)  # filtered: the passing signatures
    assert [u for u, _ in walked] == [u for u, _ in ranked(common, 1000, even)]
    assert len(walked) == 10 and walked != exact
    # every unit that passes known (the semantic retriever's exact scan): the mentions among
    # them, ranked exactly, both entities at once
    passing = ",".join(
        str(r["id"])
        for r in conn.execute(
            "SELECT id FROM memory_units WHERE agent_id = %s AND metadata->>'scene' = 'even'",
            (agent_id,),
        )
    )
    matching = Matching()
    matching.know_all(passing)  # 61 units: Ana's 60 even days and Bo's near one
    among = entity_arm.entity_units(
        conn, even, entity_ids=[common, rare], vector=query, per_entity=10,
        min_similarity=-1.0, exact_max=61, oversample=1, matching=matching,
        mentions=_mentions(),
    )  # fmt: skip
    exact_even = dict(ranked(common, 1000, even)) | dict(ranked(rare, 1000, even))
    assert dict(among) == pytest.approx(exact_even)
    assert [s for _, s in among] == pytest.approx(sorted(exact_even.values(), reverse=True))
    assert near in {u for u, _ in among} and far not in {u for u, _ in among}
    # known but too many to send (above exact_max): the mentions held in memory kept to the
    # passing units, all compared when at most exact_max of them pass (Ana's 60), else the
    # best signatures among them (oversample 1, none spent on units that fail)
    known = frozenset(passing.split(","))
    assert len(known) == 61
    kept_here = entity_arm.entity_units(
        conn, even, entity_ids=[common, rare], vector=query, per_entity=10,
        min_similarity=-1.0, exact_max=60, oversample=1, matching=matching, mentions=_mentions(),
    )  # fmt: skip
    # compared here, not by PostgreSQL: the same units, the similarities to float precision
    assert [u for u, _ in kept_here] == [u for u, _ in among]
    assert dict(kept_here) == pytest.approx(dict(among))
    with conn.transaction():
        [listed] = _mentions().read(conn, "default", [common]).values()
    best = listed.nearest(query_signature(query), 10, listed.rows_in(known))
    assert best == [u for u in listed.nearest(query_signature(query), 120) if u in known][:10]
    by_signature_among = entity_arm.entity_units(
        conn, even, entity_ids=[common], vector=query, per_entity=10,
        min_similarity=-1.0, exact_max=20, oversample=1, matching=matching, mentions=_mentions(),
    )  # fmt: skip
    similarity = {
        r["id"]: r["sim"]
        for r in conn.execute(
            "SELECT id, 1 - (embedding <=> %s::vector) AS sim FROM memory_units"
            " WHERE id = ANY(%s::uuid[])",
            (query, best),
        )
    }
    # those 10, compared exactly (on the half-precision vectors)
    assert dict(by_signature_among) == pytest.approx(similarity, abs=1e-4)
    assert [s for _, s in exact] == sorted((s for _, s in exact), reverse=True)
    # a rare entity's every mention, however far from the query, in order of similarity
    assert [u for u, _ in ranked(rare, exact_max=20)] == [near, far]
    floor = exact[5][1]  # both entities at once, with a similarity floor
    both = entity_arm.entity_units(
        conn, scope, entity_ids=[common, rare], vector=query, per_entity=10,
        min_similarity=floor, exact_max=20, mentions=_mentions(),
    )  # fmt: skip
    assert {u for u, _ in both} == {u for u, _ in exact[:6]} | {near}


def test_a_mention_s_signature_follows_the_unit_s_embedding(conn: Any, agent_id: str) -> None:
    rng = np.random.default_rng(5)
    first, second = unit_vector(rng.standard_normal(DIM)), unit_vector(rng.standard_normal(DIM))
    unit = _mention(conn, agent_id, first, add_entity(conn, agent_id, "Cy"), 0)

    def signature() -> str:
        row = conn.execute(
            "SELECT signature::text = binary_quantize(u.embedding)::text AS same, "
            "signature IS NULL AS missing FROM unit_entities ue "
            "JOIN memory_units u ON u.id = ue.unit_id WHERE ue.unit_id = %s",
            (unit,),
        ).fetchone()
        return "missing" if row["missing"] else "same" if row["same"] else "stale"

    assert signature() == "same"
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (second, unit))
    assert signature() == "same"
    conn.execute("UPDATE memory_units SET embedding = NULL WHERE id = %s", (unit,))
    assert signature() == "missing"
    conn.commit()


def test_mentions_held_in_memory_follow_every_change(conn: Any, pool: Any, agent_id: str) -> None:
    """The signatures held in memory are brought up to date on every read: a mention added
    (also by a transaction that was still open at the last read, committed after it), a unit
    re-embedded, a unit forgotten, a mention removed or moved to another entity: each read
    gives what an empty cache would."""
    rng = np.random.default_rng(11)
    query, ana, units = _ana(conn, agent_id, rng, 30)
    held = _mentions()
    scope = SearchScope("default", agent_id, ("world",))

    def ranked(mentions: MentionSignatures) -> list[tuple[uuid.UUID, float]]:
        with conn.transaction():  # 35 kept: every mention compared (signature ties aside)
            return entity_arm.entity_units(
                conn, scope, entity_ids=[ana], vector=query, per_entity=5,
                min_similarity=-1.0, exact_max=10, oversample=7, mentions=mentions,
            )  # fmt: skip

    def signatures(mentions: MentionSignatures) -> dict[str, bytes]:
        with conn.transaction():
            [listed] = mentions.read(conn, "default", [ana]).values()
        return {u: listed.bits[i].tobytes() for u, i in listed.positions.items()}

    def agrees() -> list[uuid.UUID]:
        assert signatures(held) == signatures(_mentions())  # what a whole read gives
        found, fresh = ranked(held), ranked(_mentions())
        assert [u for u, _ in found] == [u for u, _ in fresh]
        assert dict(found) == pytest.approx(dict(fresh), abs=1e-6)  # float32 products
        return [u for u, _ in found]

    first = agrees()
    assert len(first) == 5
    with pool.connection() as other:  # a mention committed after a read that began meanwhile
        near = _mention(
            other, agent_id, unit_vector(query + 0.05 * rng.standard_normal(DIM)), ana, 40
        )
        assert near not in agrees()
        other.commit()
    assert agrees()[0] == near
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (query, units[7]))
    conn.commit()
    assert agrees()[0] == units[7]
    with conn.transaction():  # its new signature is the nearest
        [listed] = held.read(conn, "default", [ana]).values()
    assert listed.nearest(query_signature(query), 1) == [str(units[7])]
    conn.execute("UPDATE memory_units SET status = 'forgotten' WHERE id = %s", (units[7],))
    conn.commit()
    assert units[7] not in agrees()  # a unit forgotten (or purged) leaves at once
    for unit in units[3], units[4]:
        conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (query, unit))
    conn.commit()
    assert set(agrees()[:2]) == {units[3], units[4]}
    conn.execute("DELETE FROM unit_entities WHERE unit_id = %s", (units[3],))
    conn.commit()  # a mention removed from a unit that stays
    assert agrees()[0] == units[4]
    bo = add_entity(conn, agent_id, "Bo")
    conn.execute("UPDATE unit_entities SET entity_id = %s WHERE unit_id = %s", (bo, units[4]))
    conn.commit()  # a mention moved to another entity
    assert units[4] not in agrees()


def test_mentions_not_held_are_compared_by_postgresql_then_held(conn: Any, agent_id: str) -> None:
    """A search compares the mentions whose embeddings are not held in PostgreSQL and notes
    them; once they are read and held (in the background, in a search), the next search ranks
    them here, with the same units and similarities. A unit re-embedded in between is read
    again, not taken as held."""
    query, ana, units = _ana(conn, agent_id, np.random.default_rng(5), 40)
    held = _mentions()

    def ranked(unheld: list[Unheld] | None, exact_max: int = 100) -> list[tuple[uuid.UUID, float]]:
        return _ranked(conn, held, agent_id, ana, query, unheld, exact_max)

    before = {kind: _reads(kind) for kind in ("whole", "changes", "embeddings")}
    first: list[Unheld] = []
    in_postgresql = ranked(first, exact_max=10)  # the 16 best signatures compared there
    assert [len(u.rows) for u in first] == [16]
    with conn.transaction():
        held.hold(conn, first)  # and every other mention of an entity of at most HOLD_ALL
    assert _reads("whole") - before["whole"] == 1
    assert _reads("embeddings") - before["embeddings"] == 40
    again: list[Unheld] = []
    here = ranked(again, exact_max=10)
    assert ranked(again) and again == []  # every mention compared: all here
    assert _reads("changes") - before["changes"] == 2
    assert _same(here, in_postgresql)
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (query, units[9]))
    conn.commit()
    after: list[Unheld] = []
    assert ranked(after)[0][0] == units[9]
    assert [[u.mentions.ids[r] for r in u.rows] for u in after] == [[str(units[9])]]


def test_embeddings_are_held_only_where_they_leave_the_signatures_room(
    conn: Any, agent_id: str
) -> None:
    """A cache with room for an entity's signatures and not for its mentions' embeddings: the
    searches compare them in PostgreSQL, nothing is read to be held, and the signatures stay
    (brought up to date, not read whole again)."""
    query, ana, _ = _ana(conn, agent_id, np.random.default_rng(7), 40)
    with conn.transaction():
        size = _mentions().read(conn, "default", [ana])[ana].nbytes
    held = MentionSignatures(size + 4 * DIM * 10, 600.0)  # the signatures and ten embeddings
    before = {kind: _reads(kind) for kind in ("whole", "changes", "embeddings")}
    first: list[Unheld] = []
    in_postgresql = _ranked(conn, held, agent_id, ana, query, first)
    with conn.transaction():
        held.hold(conn, first)  # all 40 wanted (HOLD_ALL): they do not fit
    assert _reads("embeddings") == before["embeddings"]
    again: list[Unheld] = []
    assert _same(_ranked(conn, held, agent_id, ana, query, again), in_postgresql)
    assert [len(u.rows) for u in again] == [16]  # compared there again
    assert _reads("whole") - before["whole"] == 1 and _reads("changes") - before["changes"] == 1
    assert 0 <= held.room() < 4 * DIM * 10 + 1


def test_a_new_entity_s_signatures_make_the_embeddings_give_up_room(
    conn: Any, agent_id: str
) -> None:
    """Room for one entity's signatures and its mentions' embeddings, then a second entity
    named: its signatures come in, the first entity's embeddings go (its signatures stay,
    brought up to date, not read whole), and its mentions are compared in PostgreSQL again."""
    rng = np.random.default_rng(11)
    query, ana, _ = _ana(conn, agent_id, rng, 40)
    bo = add_entity(conn, agent_id, "Bo")
    for d in range(40):
        _mention(conn, agent_id, unit_vector(rng.standard_normal(DIM)), bo, 100 + d)
    conn.commit()
    with conn.transaction():
        size = _mentions().read(conn, "default", [ana])[ana].nbytes
    held = MentionSignatures(size + 4 * DIM * 40 + 4_000, 600.0)
    first: list[Unheld] = []
    in_postgresql = _ranked(conn, held, agent_id, ana, query, first)
    with conn.transaction():
        held.hold(conn, first)  # every one of Ana's 40: they fit
    again: list[Unheld] = []
    assert _same(_ranked(conn, held, agent_id, ana, query, again), in_postgresql) and again == []
    whole = _reads("whole")
    _ranked(conn, held, agent_id, bo, query, [])  # Bo's signatures read whole: they take the room
    assert _reads("whole") == whole + 1 and held.room() >= 0
    after: list[Unheld] = []
    assert _same(_ranked(conn, held, agent_id, ana, query, after), in_postgresql)
    assert _reads("whole") == whole + 1  # Ana's signatures stayed
    assert [len(u.rows) for u in after] == [16]  # compared in PostgreSQL again


def test_a_query_is_packed_as_postgresql_packs_a_signature(conn: Any) -> None:
    from psycopg.rows import tuple_row

    from memora.retrieval.caches.mentions import unpack

    vectors = np.random.default_rng(13).standard_normal((3, DIM)).astype(np.float32)
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        stored = [
            cur.execute("SELECT binary_quantize(%s::vector)::bit(384)", (v,)).fetchone()[0]
            for v in vectors
        ]
    assert (unpack(b"".join(stored), 3) == np.stack([query_signature(v) for v in vectors])).all()
