"""The opinions stage: opinions stored as immutable, embedded, linked units, with versions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from memora.basics.stages import Stage
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.pipeline.backend import InlineBackend
from memora.think import opinions
from memora.think.opinions import OpinionDraft
from tests.conftest import wait_until

pytestmark = pytest.mark.integration
FORMED = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _record(
    pool: Any, agent_id: str, drafts: list[OpinionDraft], formed_at: datetime = FORMED
) -> UUID:
    with pool.connection() as conn:
        return opinions.record(
            conn,
            DEFAULT_SCOPE,
            agent_id,
            drafts,
            formed_at=formed_at,
            query="What about remote work?",
            personality={"openness": 0.9, "bias_strength": 0.8},
            based_on=[],
        )


def _store(pipeline: Any, pool: Any, agent_id: str, drafts: list[OpinionDraft], **kw: Any) -> UUID:
    op_id = _record(pool, agent_id, drafts, **kw)
    InlineBackend(pipeline).enqueue(Stage.OPINIONS, op_id)
    return op_id


def _opinion_rows(pool: Any, agent_id: str) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT id, text, confidence_score, event_date, embedding IS NOT NULL AS embedded, "
            "supersedes, metadata, document_pk FROM memory_units "
            "WHERE agent_id = %s AND fact_type = 'opinion' ORDER BY created_at, id",
            (agent_id,),
        ).fetchall()


def test_opinions_are_stored_embedded_resolved_and_linked(
    inline_api: Any, pipeline: Any, pool: Any, agent_id: str
) -> None:
    world = {
        "content": "Alice works remotely for Google from Lisbon.",
        "event_date": "2024-03-01T09:00:00Z",
    }
    inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": [world]})
    drafts = [
        OpinionDraft(
            statement="Remote work suits Alice",
            reasons=["she is productive at home"],
            confidence=0.8,
        ),
        OpinionDraft(
            statement="Python is better than JavaScript for data science",
            confidence=0.85,
            reasons=["better libraries like pandas", "stronger statistics ecosystem"],
        ),
    ]
    op_id = _store(pipeline, pool, agent_id, drafts)
    op = inline_api.get(f"/api/operations/{op_id}").json()
    assert op["kind"] == "opinions" and op["status"] == "completed", op
    assert op["counts"]["opinions_stored"] == 2 and op["stages"]["opinions"]["status"] == "done"
    rows = _opinion_rows(pool, agent_id)
    assert [r["text"] for r in rows] == [
        "Remote work suits Alice (Reasons: she is productive at home)",
        "Python is better than JavaScript for data science "
        "(Reasons: better libraries like pandas; stronger statistics ecosystem)",
    ]
    assert [round(r["confidence_score"], 2) for r in rows] == [0.8, 0.85]
    assert all(
        r["embedded"] and r["event_date"] == FORMED and r["document_pk"] is None for r in rows
    )
    assert rows[0]["metadata"]["personality"]["openness"] == 0.9
    assert rows[0]["metadata"]["reasons"] == ["she is productive at home"]
    with pool.connection() as conn:
        alice_units = conn.execute(
            "SELECT u.fact_type FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id "
            "JOIN memory_units u ON u.id = ue.unit_id "
            "WHERE e.agent_id = %s AND e.canonical_name = 'Alice'",
            (agent_id,),
        ).fetchall()
        cross = conn.execute(
            "SELECT l.link_type FROM memory_links l JOIN memory_units a ON a.id = l.from_unit "
            "JOIN memory_units b ON b.id = l.to_unit WHERE a.id = %s AND b.fact_type = 'world'",
            (rows[0]["id"],),
        ).fetchall()
    assert sorted(r["fact_type"] for r in alice_units) == ["opinion", "world"]
    assert {"entity", "temporal"} <= {r["link_type"] for r in cross}
    # the stage is idempotent: running it again writes nothing
    InlineBackend(pipeline).enqueue(Stage.OPINIONS, op_id)
    assert len(_opinion_rows(pool, agent_id)) == 2


def test_new_evidence_creates_versions_with_history(
    inline_api: Any, pipeline: Any, pool: Any, agent_id: str
) -> None:
    first = OpinionDraft(
        statement="Remote work improves productivity", reasons=["no commute"], confidence=0.7
    )
    _store(pipeline, pool, agent_id, [first])
    v1 = _opinion_rows(pool, agent_id)[0]["id"]
    weaker = OpinionDraft(
        statement="Remote work improves productivity for some people",
        confidence=0.9,
        reasons=["studies disagree"],
        previous_id=v1,
        stance="contradicts",
    )
    _store(pipeline, pool, agent_id, [weaker], formed_at=datetime(2024, 4, 1, tzinfo=UTC))
    v2 = _opinion_rows(pool, agent_id)[1]
    assert v2["supersedes"] == v1
    assert round(v2["confidence_score"], 2) == 0.7  # contradicting evidence never raises confidence
    # naming an old version continues the history at its head: the history stays linear
    stronger = OpinionDraft(
        statement="Remote work improves productivity",
        reasons=["new survey"],
        confidence=0.6,
        previous_id=v1,
        stance="supports",
    )
    _store(pipeline, pool, agent_id, [stronger], formed_at=datetime(2024, 5, 1, tzinfo=UTC))
    v3 = _opinion_rows(pool, agent_id)[2]
    assert v3["supersedes"] == v2["id"]
    assert round(v3["confidence_score"], 2) == 0.7  # supporting evidence never lowers it
    # the same opinion again, unlinked by the model: matched by similarity, stored as a restatement
    again = OpinionDraft(
        statement="Remote work improves productivity", reasons=["new survey"], confidence=0.75
    )
    _store(pipeline, pool, agent_id, [again], formed_at=datetime(2024, 6, 1, tzinfo=UTC))
    v4 = _opinion_rows(pool, agent_id)[3]
    assert v4["supersedes"] == v3["id"] and v4["metadata"]["stance"] == "restates"

    history = inline_api.get(f"/api/agents/{agent_id}/opinions/{v2['id']}/history")
    assert history.status_code == 200
    body = history.json()
    ids = [UUID(v["id"]) for v in body["versions"]]
    assert ids == [v1, v2["id"], v3["id"], v4["id"]] and UUID(body["current_id"]) == v4["id"]
    assert [v["stance"] for v in body["versions"]] == ["new", "contradicts", "supports", "restates"]
    assert body["versions"][1]["reasons"] == ["studies disagree"]
    current = inline_api.get(f"/api/agents/{agent_id}/opinions").json()["opinions"]
    assert [UUID(o["id"]) for o in current] == [v4["id"]]


def test_history_of_unknown_opinion_is_404(inline_api: Any, agent_id: str) -> None:
    response = inline_api.get(f"/api/agents/{agent_id}/opinions/{UUID(int=1)}/history")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_opinions_stage_through_a_real_worker(worker_stack: Any, pool: Any, agent_id: str) -> None:
    from services.workers.celery_app import create_celery
    from services.workers.dispatch import CeleryBackend

    op_id = _record(pool, agent_id, [OpinionDraft(statement="Tea beats coffee", confidence=0.6)])
    CeleryBackend(create_celery(worker_stack.settings)).enqueue(Stage.OPINIONS, op_id)

    def done() -> bool:
        with pool.connection() as conn:
            op = conn.execute("SELECT status FROM operations WHERE id = %s", (op_id,)).fetchone()
        return op is not None and op["status"] == "completed"

    wait_until(done, 120)
    rows = _opinion_rows(pool, agent_id)
    assert [r["text"] for r in rows] == ["Tea beats coffee"] and rows[0]["embedded"]


def test_a_forgotten_opinion_is_neither_listed_nor_reinforced(
    inline_api: Any, pipeline: Any, pool: Any, agent_id: str
) -> None:
    from memora.store import lifecycle

    draft = OpinionDraft(statement="Remote work improves productivity", confidence=0.7)
    _store(pipeline, pool, agent_id, [draft])
    (forgotten,) = _opinion_rows(pool, agent_id)
    with pool.connection() as conn:
        lifecycle.set_status(
            conn, agent_id, [forgotten["id"]], "forgotten", reason="test", at=FORMED
        )
        conn.commit()
    assert inline_api.get(f"/api/agents/{agent_id}/opinions").json()["opinions"] == []
    # The same opinion formed again starts a new history instead of continuing the forgotten one.
    _store(pipeline, pool, agent_id, [draft], formed_at=datetime(2024, 4, 1, tzinfo=UTC))
    fresh = _opinion_rows(pool, agent_id)[1]
    assert fresh["supersedes"] is None
    current = inline_api.get(f"/api/agents/{agent_id}/opinions").json()["opinions"]
    assert [UUID(o["id"]) for o in current] == [fresh["id"]]
