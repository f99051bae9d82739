"""The entity_names job on the suite's PostgreSQL: entities stored as an older version left
them (spans uncleaned) are renamed, merged and removed, bounded per run, then left alone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from memora.basics import metrics
from memora.basics.config import Settings
from memora.entities.resolution import ResolutionWeights, UnitMentions, resolve
from memora.extraction.base import Fact, Mention
from memora.jobs import JOBS, JobContext, JobResult, run_job
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from memora.store.units import insert_facts

pytestmark = pytest.mark.integration

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)

# What spaCy's spans were before cleaning, one memory each: (text, mentions)
OLD_MEMORIES = [
    ("Bye Caroline, see you", [("Bye Caroline", "PERSON")]),
    ("Caroline went to the LGBTQ support group", [("Caroline", "PERSON")]),
    ("Caroline painted it", [("Caroline", "PERSON")]),
    ("ya, Melanie! Nice", [("ya, Melanie", "PERSON")]),
    ("Hmm, I think so", [("Hmm", "PERSON")]),
    ("See you Tues", [("Tues", "PERSON")]),
    ("Google's offices in Paris", [("Google's", "ORGANIZATION"), ("Paris", "LOCATION")]),
    # speakers: the short form "Mel" and a "Caroline" the tagger typed OTHER are the speakers
    ("Melanie: I painted a lake sunrise", [("Melanie", "PERSON")]),
    ("Caroline: Mel, that is lovely", [("Mel", "PERSON")]),
    ("Caroline: it reminds me of home", [("Caroline", "OTHER")]),
]


def _store_old(pool: Any, agent: str) -> list[UUID]:
    """Resolve the raw spans, as an older version did, one memory at a time."""
    facts = [Fact(0, i, t, "world", T0, T0) for i, (t, _) in enumerate(OLD_MEMORIES)]
    with pool.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent,))
        units = insert_facts(conn, agent, None, facts)
    w = ResolutionWeights.from_settings(Settings())
    for unit, (_, mentions) in zip(units, OLD_MEMORIES, strict=True):
        with pool.connection() as conn, conn.transaction():
            resolve(conn, agent, [UnitMentions(unit, T0, [Mention(*m) for m in mentions])], w)
    with pool.connection() as conn, conn.transaction():
        # an entity link through the noise entity "Hmm", and one through "Bye Caroline"
        conn.execute(
            "INSERT INTO memory_links (from_unit, to_unit, link_type, weight, entity_id) "
            "SELECT %s, %s, 'entity', 1, id FROM entities WHERE agent_id = %s "
            "AND canonical_name = 'Hmm'",
            (units[4], units[5], agent),
        )
        conn.execute(
            "INSERT INTO memory_links (from_unit, to_unit, link_type, weight, entity_id) "
            "SELECT %s, %s, 'entity', 1, id FROM entities WHERE agent_id = %s "
            "AND canonical_name = 'Bye Caroline'",
            (units[0], units[2], agent),
        )
        # Google as stored before the name counts (migration 0017 found no mention for it)
        conn.execute(
            "UPDATE entities SET name_counts = '{}' WHERE agent_id = %s "
            "AND entity_type = 'ORGANIZATION'",
            (agent,),
        )
    return units


def _job(settings: Settings, pool: Any, agent: str) -> JobResult:
    ctx = JobContext(settings, pool, InlineBackend(Pipeline(settings, pool)), agent_key=agent)
    return run_job(JOBS["entity_names"], ctx)


def _entities(pool: Any, agent: str) -> dict[str, dict[str, Any]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT e.canonical_name, e.normalized_name, e.aliases, e.name_counts, "
            "e.mention_count, array_agg(ue.mention ORDER BY ue.mention) AS mentions, "
            "(SELECT count(*) FROM memory_links l WHERE l.entity_id = e.id) AS links "
            "FROM entities e LEFT JOIN unit_entities ue ON ue.entity_id = e.id "
            "WHERE e.agent_id = %s GROUP BY e.id",
            (agent,),
        ).fetchall()
    return {r.pop("canonical_name"): r for r in rows}


def _changes(change: str) -> float:
    return metrics.ENTITY_NAME_CHANGES.labels(change)._value.get()  # type: ignore[no-any-return]


def test_entity_names_job_recleans_stored_entities_bounded_and_idempotent(
    settings: Settings, pool: Any, agent_id: str
) -> None:
    _store_old(pool, agent_id)
    before = _entities(pool, agent_id)
    assert {"Bye Caroline", "Caroline", "ya, Melanie", "Hmm", "Tues", "Google's", "Mel"} <= set(
        before
    )
    merged_before = _changes("merged")

    small = settings.model_copy(update={"job_batch_size": 4})
    runs = [_job(small, pool, agent_id) for _ in range(3)]  # 10 entities: 4, 4, then 2
    assert [r.examined for r in runs] == [4, 4, 2]
    done = {k: sum(r.details[k] for r in runs) for k in runs[0].details}
    assert done == {"renamed": 1, "merged": 4, "removed": 2, "tidied": 0}

    after = _entities(pool, agent_id)
    assert set(after) == {"Caroline", "Melanie", "Google", "Paris"}
    caroline = after["Caroline"]
    assert caroline["name_counts"] == {"Caroline": 4}
    assert caroline["mention_count"] == 4
    assert caroline["mentions"] == ["Caroline"] * 4
    assert caroline["links"] == 1  # moved from "Bye Caroline"
    melanie = after["Melanie"]
    assert melanie["normalized_name"] == "melanie" and melanie["aliases"] == ["mel"]
    assert melanie["mentions"] == ["Melanie"] * 3 and melanie["name_counts"] == {"Melanie": 3}
    with pool.connection() as conn:
        types = conn.execute(
            "SELECT DISTINCT entity_type FROM entities WHERE agent_id = %s "
            "AND canonical_name IN ('Caroline', 'Melanie')",
            (agent_id,),
        ).fetchall()
    assert types == [{"entity_type": "PERSON"}]
    assert after["Google"]["name_counts"] == {"Google": 1}
    with pool.connection() as conn:
        left = conn.execute(
            "SELECT count(*) AS n FROM memory_links l JOIN memory_units u ON u.id = l.from_unit "
            "WHERE u.agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert left == {"n": 1}  # the link through "Hmm" went with it
    assert _changes("merged") == merged_before + 4

    # the cursor wrapped: the next runs examine everything again and change nothing
    again = [_job(small, pool, agent_id) for _ in range(2)]
    assert [r.changed for r in again] == [0, 0]
    assert sum(r.examined for r in again) == 4
    assert _entities(pool, agent_id) == after
