"""Per-agent limits (seed 002 §4.9) against the suite's PostgreSQL: limits set through the write
API, the `limits` job archiving the lowest retention scores first (audited, counted, restorable,
idempotent), `cleanup` purging archived memories past the archive retention only, and
`memora evolve --job limits`."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from prometheus_client import REGISTRY
from typer.testing import CliRunner

from memora.basics.config import Settings
from memora.basics.errors import Gone
from memora.basics.models import utcnow
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.lifecycle.scores import retention_score
from memora.usecases import memories
from tests.integration.test_lifecycle_jobs import app_context, embedder, job, state

pytestmark = pytest.mark.integration


def unit(pool: Any, s: Settings, agent: str, text: str, importance: float, days_ago: float,
         fact_type: str = "world") -> UUID:  # fmt: skip
    """A unit of this importance, created (and never accessed since) `days_ago` days ago."""
    from memora.store import lifecycle as store

    unit_id, at = uuid.uuid4(), utcnow() - timedelta(days=days_ago)
    with pool.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO agents (agent_id, tenant_id) VALUES (%s, 'default') "
            "ON CONFLICT DO NOTHING",
            (agent,),
        )
        store.insert_unit(
            conn, agent, unit_id, text=text, vector=embedder(s).embed([text])[0],
            fact_type=fact_type, importance=importance, category=None,
            metadata={"source": "remember"}, at=at,
        )  # fmt: skip
        conn.execute("UPDATE memory_units SET created_at = %s WHERE id = %s", (at, unit_id))
    return unit_id


def events(pool: Any, unit_id: UUID) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT event, actor, reason, details FROM memory_events WHERE unit_id = %s "
            "ORDER BY id",
            (unit_id,),
        ).fetchall()


def limit_actions(action: str) -> float:
    return REGISTRY.get_sample_value("memora_limit_actions_total", {"action": action}) or 0.0


def test_limits_are_set_per_agent_and_validated(inline_api: Any, agent_id: str) -> None:
    url = f"/api/agents/{agent_id}"
    assert inline_api.get(f"{url}/profile").json()["limits"] == {}
    body = inline_api.put(url, json={"limits": {"max_memories": 3}}).json()
    assert body["limits"] == {"max_memories": 3}
    body = inline_api.put(url, json={"limits": {"max_reflections": None}}).json()
    assert body["limits"] == {"max_memories": 3, "max_reflections": None}  # merged; null: none
    for bad in ({"max_memories": -1}, {"archive_retention_days": 0}, {"max_notes": 5}):
        r = inline_api.put(url, json={"limits": bad})
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    assert inline_api.get(f"{url}/profile").json()["limits"]["max_memories"] == 3  # unchanged


def test_over_max_memories_the_lowest_retention_scores_are_archived(
    inline_api: Any, settings: Settings, pool: Any, agent_id: str
) -> None:
    s = settings
    # retention score = importance · e^(−0.1·days since last access)
    ids = {
        "recent_important": unit(pool, s, agent_id, "Gil runs a bakery in Porto.", 8, 0),
        "recent_minor": unit(pool, s, agent_id, "Gil said the weather was fine.", 2, 0),  # 2.0
        "old_important": unit(pool, s, agent_id, "Gil was born in 1980.", 9, 30),  # 0.45
        "middle": unit(pool, s, agent_id, "Gil likes green tea.", 5, 2),
        "fresh": unit(pool, s, agent_id, "Gil adopted a cat.", 6, 1),
    }
    opinion = unit(pool, s, agent_id, "Gil's bread is excellent.", 1, 60, fact_type="opinion")
    reflections = [
        unit(pool, s, agent_id, "Gil values craft.", 7, 0, fact_type="reflection"),
        unit(pool, s, agent_id, "Gil is calm.", 4, 10, fact_type="reflection"),  # lower
    ]
    inline_api.put(f"/api/agents/{agent_id}", json={"limits": {"max_memories": 3,
                                                               "max_reflections": 1}})  # fmt: skip
    before = limit_actions("archived_memory"), limit_actions("archived_reflection")

    result = job("limits", s, pool, agent_id)
    assert result.changed == 3
    assert result.details == {"archived_memory": 2, "archived_reflection": 1}
    archived = {name for name, i in ids.items() if state(pool, agent_id, i).status == "archived"}
    assert archived == {"old_important", "recent_minor"}
    assert state(pool, agent_id, opinion).status == "active"  # opinions do not count
    assert [state(pool, agent_id, r).status for r in reflections] == ["active", "archived"]
    assert limit_actions("archived_memory") == before[0] + 2
    assert limit_actions("archived_reflection") == before[1] + 1

    (event,) = events(pool, ids["old_important"])
    assert event["event"] == "archived" and event["actor"] == "job:limits"
    assert event["reason"] == "over max_memories (3)"
    assert event["details"]["limit"] == 3 and event["details"]["active"] == 5
    assert event["details"]["retention_score"] == pytest.approx(
        retention_score(9, 30, s.attenuation_rate), rel=1e-3
    )

    again = job("limits", s, pool, agent_id)  # within the limits now: nothing to do
    assert again.changed == 0 and again.details == {}

    # restorable: back to active, audited; the next run archives the next lowest instead
    restored = memories.restore(app_context(s, pool), DEFAULT_SCOPE, agent_id, ids["old_important"])
    assert restored["was"] == "archived"
    assert [e["event"] for e in events(pool, ids["old_important"])] == ["archived", "restored"]
    job("limits", s, pool, agent_id)
    assert state(pool, agent_id, ids["old_important"]).status == "archived"


def test_a_run_archives_at_most_its_batch_and_null_means_no_limit(
    inline_api: Any, settings: Settings, pool: Any, agent_id: str
) -> None:
    s = settings.model_copy(update={"max_memories": 1, "job_batch_size": 2})
    for n in range(5):
        unit(pool, s, agent_id, f"Hana visited museum number {n}.", 5, n)
    assert job("limits", s, pool, agent_id).changed == 2  # 4 over the default, 2 a run
    assert job("limits", s, pool, agent_id).changed == 2
    assert job("limits", s, pool, agent_id).changed == 0

    other = f"{agent_id}-x"
    for n in range(3):
        unit(pool, s, other, f"Ivo read book number {n}.", 5, n)
    inline_api.put(f"/api/agents/{other}", json={"limits": {"max_memories": None}})
    assert job("limits", s, pool, other).changed == 0  # its own null overrides the default


def test_archived_memories_past_the_retention_are_purged(
    inline_api: Any, settings: Settings, pool: Any, agent_id: str
) -> None:
    s = settings
    old, recent, active = (
        unit(pool, s, agent_id, text, 5, 0)
        for text in ("Jon had a red bike.", "Jon had a blue kite.", "Jon has a green boat.")
    )
    inline_api.put(f"/api/agents/{agent_id}", json={"limits": {"archive_retention_days": 10}})
    with pool.connection() as conn:
        for unit_id, days in ((old, 11), (recent, 9)):
            conn.execute(
                "UPDATE memory_units SET status = 'archived', status_at = now() - %s WHERE id = %s",
                (timedelta(days=days), unit_id),
            )
    context = app_context(s, pool)
    with pytest.raises(Gone):  # past the retention: no longer restorable
        memories.restore(context, DEFAULT_SCOPE, agent_id, old)
    before = limit_actions("purged_archived")

    result = job("cleanup", s, pool, agent_id)
    assert result.changed == 1 and result.details["purged_archived"] == 1
    assert limit_actions("purged_archived") == before + 1
    with pool.connection() as conn:
        left = {r["id"] for r in conn.execute(
            "SELECT id FROM memory_units WHERE agent_id = %s", (agent_id,))}  # fmt: skip
    assert left == {recent, active}
    (purged,) = events(pool, old)  # the audit trail outlives the memory
    assert purged["event"] == "purged" and purged["reason"] == "archived more than 10 days ago"
    assert job("cleanup", s, pool, agent_id).changed == 0
    assert memories.restore(context, DEFAULT_SCOPE, agent_id, recent)["was"] == "archived"


def test_memora_evolve_runs_the_limits_job(
    inline_api: Any, settings: Settings, pool: Any, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.cli.main import app

    kept = unit(pool, settings, agent_id, "Kim speaks Korean.", 7, 0)
    dropped = unit(pool, settings, agent_id, "Kim said hello.", 1, 5)
    inline_api.put(f"/api/agents/{agent_id}", json={"limits": {"max_memories": 1}})
    monkeypatch.setenv("MEMORA_DATABASE_URL", settings.require_database_url())
    result = CliRunner().invoke(app, ["evolve", "--agent", agent_id, "--job", "limits"])
    assert result.exit_code == 0, result.output
    (line,) = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    assert line["job"] == "limits" and line["changed"] == 1
    assert state(pool, agent_id, dropped).status == "archived"
    assert state(pool, agent_id, kept).status == "active"


def test_a_worker_runs_the_limits_job_beat_sends(
    worker_stack: Any, pool: Any, settings: Settings, agent_id: str
) -> None:
    """As deployed: beat's task on the maintenance queue, a real worker, its own metrics."""
    from services.workers.celery_app import create_celery
    from services.workers.queues import job_task_name
    from tests.conftest import wait_until
    from tests.integration.metrics_support import value, worker_metrics

    kept = unit(pool, settings, agent_id, "Lea plays chess on Sundays.", 6, 0)
    dropped = unit(pool, settings, agent_id, "Lea mentioned it was sunny.", 1, 3)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE agents SET limits = '{\"max_memories\": 1}' WHERE agent_id = %s", (agent_id,)
        )
    celery = create_celery(worker_stack.settings)
    celery.send_task(job_task_name("limits"), **celery.conf.beat_schedule["limits"]["options"])
    wait_until(lambda: state(pool, agent_id, dropped).status == "archived", timeout=120)
    assert state(pool, agent_id, kept).status == "active"
    assert [e["actor"] for e in events(pool, dropped)] == ["job:limits"]
    samples = worker_metrics(worker_stack, "opinions")  # the worker of the maintenance queue
    assert value(samples, "memora_limit_actions_total", action="archived_memory") >= 1
    assert value(samples, "memora_job_runs_total", job="limits", outcome="ok") >= 1


def test_over_max_graph_nodes_the_least_mentioned_entities_leave_the_graph(
    inline_api: Any, settings: Settings, pool: Any, agent_id: str
) -> None:
    """Entities past the limit go, fewest mentions first, with their mentions and entity links;
    the memories that named them stay active and found by search."""
    lines = [
        "Nora works at Lumen Labs in Oslo.", "Nora met Viktor at Lumen Labs.",
        "Nora and Viktor went hiking near Bergen.", "Nora bought a bike for Oslo.",
        "Nora said Viktor cooks well.", "Nora talked to Ingrid about Oslo.",
    ]  # fmt: skip
    items = [{"content": text, "role": "user"} for text in lines]
    body = {"agent_id": agent_id, "document_id": "nodes", "items": items}
    response = inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    assert (
        inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()["status"]
        == "completed"
    )

    def graph() -> dict[str, int]:
        with pool.connection() as conn:
            rows = conn.execute(
                "SELECT canonical_name, mention_count FROM entities WHERE agent_id = %s",
                (agent_id,),
            ).fetchall()
        return {r["canonical_name"]: r["mention_count"] for r in rows}

    before = graph()
    assert {"Nora", "Viktor", "Oslo"} <= set(before) and len(before) > 4, before
    keep = 3
    inline_api.put(f"/api/agents/{agent_id}", json={"limits": {"max_graph_nodes": keep}})
    pruned_before = limit_actions("pruned_entity")

    result = job("limits", settings, pool, agent_id)
    assert result.details == {"pruned_entity": len(before) - keep}
    after = graph()
    pruned = set(before) - set(after)
    assert len(after) == keep and "Nora" in after  # the most mentioned stay (ties: either)
    assert min(before[n] for n in after) >= max(before[n] for n in pruned)
    assert limit_actions("pruned_entity") == pruned_before + len(before) - keep
    with pool.connection() as conn:
        orphans = conn.execute(
            "SELECT count(*) AS n FROM memory_links l LEFT JOIN entities e ON e.id = l.entity_id "
            "JOIN memory_units u ON u.id = l.from_unit "
            "WHERE u.agent_id = %s AND l.link_type = 'entity' AND e.id IS NULL",
            (agent_id,),
        ).fetchone()
        active = conn.execute(
            "SELECT count(*) AS n FROM memory_units WHERE agent_id = %s AND status = 'active'",
            (agent_id,),
        ).fetchone()
    assert orphans["n"] == 0 and active["n"] >= len(lines)  # links gone, memories kept
    assert job("limits", settings, pool, agent_id).details == {}  # within the limit now
