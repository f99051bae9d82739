"""The evolution worker's jobs against the suite's PostgreSQL: consolidate, attenuate, reflect,
graph maintenance (cleanup is covered with forget in test_lifecycle_api), and `memora evolve`."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from typer.testing import CliRunner

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.jobs import JOBS, JobContext, JobResult, run_job
from memora.lifecycle.reflect import REFLECT_MARKER
from memora.nlp.embedding import get_embedder
from memora.pipeline.backend import InlineBackend
from memora.pipeline.context import AppContext
from memora.pipeline.runner import Pipeline
from memora.store import evolution, memory_view
from memora.store import lifecycle as store
from memora.usecases import memories
from tests.fakes import FakeOpenAI, Reply

pytestmark = pytest.mark.integration


def app_context(s: Settings, pool: Any) -> AppContext:
    """What the lifecycle's use cases take: the pipeline runs inline."""
    return AppContext(s, pool, InlineBackend(Pipeline(s, pool)), embedder=embedder(s))


def embedder(s: Settings) -> Any:
    return get_embedder(
        s.embedding_model, s.torch_threads, s.embedding_batch_size, s.embedding_backend,
        s.model_cache_dir,
    )  # fmt: skip


def put(pool: Any, s: Settings, agent: str, text: str, *, days_ago: float = 0,
        source: str | None = "remember") -> UUID:  # fmt: skip
    """A unit written directly (as older data or a concurrent writer would have left it)."""
    unit_id = uuid.uuid4()
    at = utcnow() - timedelta(days=days_ago)
    with pool.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO agents (agent_id, tenant_id) VALUES (%s, 'default') "
            "ON CONFLICT DO NOTHING",
            (agent,),
        )
        store.insert_unit(
            conn, agent, unit_id, text=text, vector=embedder(s).embed([text])[0],
            fact_type="world", importance=5, category=None,
            metadata={"source": source} if source else {}, at=at,
        )  # fmt: skip
        conn.execute("UPDATE memory_units SET created_at = %s WHERE id = %s", (at, unit_id))
    return unit_id


def job(name: str, s: Settings, pool: Any, agent: str) -> JobResult:
    ctx = JobContext(s, pool, InlineBackend(Pipeline(s, pool)), agent_key=agent)
    return run_job(JOBS[name], ctx)


def state(pool: Any, agent: str, unit_id: UUID) -> store.MemoryUnit:
    with pool.connection() as conn:
        return store.get_units(conn, agent, [unit_id])[0]


def test_consolidate_merges_supersedes_and_resumes(
    settings: Settings, pool: Any, agent_id: str
) -> None:
    s = settings.model_copy(update={"job_batch_size": 2})
    dup_old = put(pool, s, agent_id, "Alice adopted a dog named Rex.", days_ago=3)
    dup_new = put(pool, s, agent_id, "Alice adopted a dog named Rex from the shelter.", days_ago=2)
    home_old = put(pool, s, agent_id, "Bob lives in Madrid.", days_ago=3)
    home_new = put(pool, s, agent_id, "Bob moved to Lisbon.", days_ago=1)
    distinct = put(pool, s, agent_id, "Alice adopted 2 cats named Tom and Jerry.", days_ago=2)
    turn = put(pool, s, agent_id, "Alice adopted a dog named Rex.", days_ago=1, source=None)

    totals = [job("consolidate", s, pool, agent_id) for _ in range(4)]  # 6 statements, 2 a run
    # the raw turn is not a statement; the newer duplicate was folded before its turn came
    assert sum(r.examined for r in totals) == 4
    assert totals[-1].examined == 0  # resumed past everything
    kept = state(pool, agent_id, dup_old)
    assert kept.status == "active" and kept.evidence_count == 2
    assert kept.text.endswith("from the shelter.")
    assert state(pool, agent_id, dup_new).superseded_by == dup_old
    assert state(pool, agent_id, home_old).superseded_by == home_new
    assert state(pool, agent_id, home_new).status == "active"
    # Madrid held until Lisbon was said; the audit trail has both texts and the decider
    old, new = state(pool, agent_id, home_old), state(pool, agent_id, home_new)
    assert old.valid_until == new.valid_from and new.valid_until is None
    assert state(pool, agent_id, dup_new).valid_until is None  # a restatement still holds
    with pool.connection() as conn:
        [event] = [e for e in memory_view.history(conn, home_old) if e.event == "superseded"]
    assert event.actor == "job:consolidate" and event.related_id == home_new
    assert event.details["old_text"] == "Bob lives in Madrid."
    assert event.details["new_text"] == "Bob moved to Lisbon."
    assert event.details["decided_by"] == "rules" and event.reason
    assert state(pool, agent_id, distinct).status == "active"
    assert state(pool, agent_id, turn).status == "active"

    with pool.connection() as conn:  # idempotent: a fresh pass changes nothing more
        evolution.set_cursor(conn, "consolidate", agent_id, None)
        conn.commit()
    again = [job("consolidate", s, pool, agent_id) for _ in range(3)]
    assert sum(r.changed for r in again) == 0


def test_attenuate_archives_faded_memories_restorably(
    settings: Settings, pool: Any, agent_id: str
) -> None:
    old = put(pool, settings, agent_id, "Carol once bought a blue umbrella.", days_ago=120)
    fresh = put(pool, settings, agent_id, "Carol bought a red scarf.", days_ago=1)
    result = job("attenuate", settings, pool, agent_id)
    assert result.examined == 1 and result.changed == 1
    assert state(pool, agent_id, old).status == "archived"
    assert state(pool, agent_id, fresh).status == "active"
    assert job("attenuate", settings, pool, agent_id).changed == 0
    restored = memories.restore(app_context(settings, pool), DEFAULT_SCOPE, agent_id, old)
    assert restored["was"] == "archived" and state(pool, agent_id, old).status == "active"


def test_reflect_job_fires_at_the_threshold(
    llm_settings: Settings, pool: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    s = llm_settings.model_copy(update={"reflection_threshold": 12})
    ids = [put(pool, s, agent_id, t) for t in ("Dan runs every morning.", "Dan eats oats.")]
    assert job("reflect", s, pool, agent_id).changed == 0  # 10 < 12: not due
    put(pool, s, agent_id, "Dan sleeps eight hours.")
    fake_llm.script(
        Reply({"insights": [{"text": "Dan keeps healthy habits.", "sources": [1, 2, 3]}]}),
        when=REFLECT_MARKER,
    )
    assert job("reflect", s, pool, agent_id).changed == 1
    assert len(fake_llm.requests_matching(REFLECT_MARKER)) == 1
    assert job("reflect", s, pool, agent_id).changed == 0  # nothing new since
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT id FROM memory_units WHERE agent_id = %s AND fact_type = 'reflection'",
            (agent_id,),
        ).fetchone()
        assert row is not None
        linked = {r.target for r in memory_view.links_of(conn, row["id"])}
    assert set(ids) <= linked


def test_graph_maintenance_prunes_weak_generated_links(
    settings: Settings, pool: Any, agent_id: str
) -> None:
    a = put(pool, settings, agent_id, "Eve paints landscapes.")
    b = put(pool, settings, agent_id, "Eve sells paintings online.")
    with pool.connection() as conn, conn.transaction():
        store.add_link(conn, a, b, "temporal", 0.3, "")
        store.add_link(conn, a, b, "explicit", 0.1, "related_to")
    s = settings.model_copy(update={"graph_prune_weight": 0.5})
    assert job("graph_maintenance", s, pool, agent_id).details["links_pruned"] == 2
    with pool.connection() as conn:
        left = {r.type for r in memory_view.links_of(conn, a)}
    assert left == {"explicit"}


def test_memora_evolve_runs_the_jobs(
    settings: Settings, pool: Any, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.cli.main import app

    put(pool, settings, agent_id, "Finn lives in Oslo.", days_ago=2)
    put(pool, settings, agent_id, "Finn moved to Bergen.", days_ago=1)
    monkeypatch.setenv("MEMORA_DATABASE_URL", settings.require_database_url())
    result = CliRunner().invoke(app, ["evolve", "--agent", agent_id])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    assert [x["job"] for x in lines] == [
        "consolidate", "attenuate", "reflect", "graph_maintenance", "limits", "cleanup",
    ]  # fmt: skip
    assert lines[0]["changed"] == 1
    bad = CliRunner().invoke(app, ["evolve", "--job", "nope"])
    assert bad.exit_code == 2
