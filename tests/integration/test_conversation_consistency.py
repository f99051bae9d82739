"""The consistency check and repair (seed 002 §7.7), the index status and its rebuild: the
index is corrupted behind the system's back in SQL, the check reports exactly that, repair
fixes it and loses nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.db.pool import connect
from memora.jobs import JOBS, JobContext, run_job
from memora.pipeline.backend import InlineBackend
from tests.integration.test_conversations import TRIP, ingest, search

pytestmark = pytest.mark.integration
MORE = [
    {"message_id": f"x{i}", "role": "user",
     "content": f"Note {i}: the train to Nara leaves from platform {i} at {8 + i} o'clock, "
                "and the deer park is a short walk from the station exit."}
    for i in range(4)
]  # fmt: skip


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


def snapshot(pool: Any, agent_id: str) -> dict[str, set[str]]:
    """Every row of the agent's index and units, by id (chunks with their source hash)."""
    with pool.connection() as conn:
        return {
            "chunks": {
                f"{r['id']}:{r['source_hash']}"
                for r in conn.execute(
                    "SELECT id, source_hash FROM conversation_chunks WHERE agent_id = %s",
                    (agent_id,),
                )
            },
            "units": {
                str(r["id"])
                for r in conn.execute(
                    "SELECT id FROM memory_units WHERE agent_id = %s AND embedding IS NOT NULL",
                    (agent_id,),
                )
            },
            "messages": {
                str(r["id"])
                for r in conn.execute(
                    "SELECT id FROM conversation_messages WHERE agent_id = %s", (agent_id,)
                )
            },
        }


def one(pool: Any, sql: str, *params: Any) -> Any:
    with pool.connection() as conn:
        row = conn.execute(sql, params).fetchone()
    return row


def test_check_reports_exactly_the_corruption_and_repair_fixes_only_that(
    inline_api: Any, query_api: TestClient, pool: Any, agent_id: str, pg_url: str
) -> None:
    ingest(inline_api, agent_id, TRIP)
    ingest(inline_api, agent_id, MORE, doc="nara", title="Nara day trip")
    check = inline_api.post(f"/api/agents/{agent_id}/consistency-check").json()
    assert check["consistent"] is True, check

    # behind the system's back, as a database superuser (FK triggers off, RLS bypassed)
    with connect(pg_url) as conn:
        msg = {
            r["message_id"]: r["id"]
            for r in conn.execute(
                "SELECT message_id, id FROM conversation_messages WHERE agent_id = %s", (agent_id,)
            )
        }
        # 1. a chunk lost: m1 is no longer indexed
        lost = conn.execute(
            "DELETE FROM conversation_chunks WHERE message_pk = %s RETURNING id", (msg["m1"],)
        ).fetchone()["id"]
        # 2. a message altered behind the index's back: its chunk is stale
        stale = conn.execute(
            "UPDATE conversation_messages SET text = 'We changed plans: Osaka aquarium instead.',"
            " content_hash = encode(sha256('We changed plans: Osaka aquarium instead.'), 'hex')"
            " WHERE id = %s RETURNING (SELECT id FROM conversation_chunks WHERE message_pk = %s)"
            " AS chunk",
            (msg["x2"], msg["x2"]),
        ).fetchone()["chunk"]
        # 3. a message deleted without the cascade: its chunk and its units are orphans
        orphan_units = {
            str(r["unit_id"])
            for r in conn.execute(
                "SELECT unit_id FROM unit_sources WHERE message_pk = %s", (msg["m3"],)
            )
        }
        orphan_chunk = conn.execute(
            "SELECT id FROM conversation_chunks WHERE message_pk = %s", (msg["m3"],)
        ).fetchone()["id"]
        conn.execute("SET session_replication_role = replica")
        conn.execute("DELETE FROM conversation_messages WHERE id = %s", (msg["m3"],))
        conn.execute("SET session_replication_role = DEFAULT")
        # 4. a unit of m4 lost its embedding
        unembedded = conn.execute(
            "UPDATE memory_units SET embedding = NULL WHERE id = (SELECT unit_id FROM "
            "unit_sources WHERE message_pk = %s LIMIT 1) RETURNING id",
            (msg["m4"],),
        ).fetchone()["id"]
        conn.commit()
    assert orphan_units and lost and stale and orphan_chunk
    intact = snapshot(pool, agent_id)

    report = inline_api.post(f"/api/agents/{agent_id}/consistency-check").json()
    assert report["consistent"] is False
    assert report["found"] == {
        "orphaned_chunks": 1,
        "orphaned_units": len(orphan_units),
        "unindexed_messages": 1,
        "stale_chunks": 1,
        "unembedded_units": 1,
    }
    assert set(report["ids"].pop("orphaned_units")) == orphan_units
    assert report["ids"] == {
        "orphaned_chunks": [str(orphan_chunk)],
        "unindexed_messages": [str(msg["m1"])],
        "stale_chunks": [str(stale)],
        "unembedded_units": [str(unembedded)],
    }
    dry = inline_api.post(f"/api/agents/{agent_id}/repair", params={"dry_run": True}).json()
    assert dry["found"] == report["found"] and dry["operations"] == []
    assert snapshot(pool, agent_id) == intact  # a dry run changes nothing

    repaired = inline_api.post(f"/api/agents/{agent_id}/repair").json()
    assert repaired["repaired"]["chunks_deleted"] == 2
    assert repaired["repaired"]["units_deleted"] == len(orphan_units)
    assert len(repaired["operations"]) == 2  # the two documents with work left
    after = inline_api.post(f"/api/agents/{agent_id}/consistency-check").json()
    assert after["consistent"] is True, after

    now = snapshot(pool, agent_id)
    # Nothing else lost: every chunk and unit not named above is still there, unchanged.
    named = {str(orphan_chunk), str(stale)}
    kept = {c for c in intact["chunks"] if c.split(":")[0] not in named}
    assert kept <= now["chunks"]
    assert intact["units"] - orphan_units <= now["units"] and str(unembedded) in now["units"]
    assert now["units"].isdisjoint(orphan_units)
    assert len(now["chunks"]) == len(intact["chunks"])  # -orphan -stale +m1 +x2
    hits = search(query_api, agent_id, "Osaka aquarium", min_score=0.0)
    assert hits[0]["message_id"] == "x2" and "Osaka" in hits[0]["snippet"]
    assert any(h["message_id"] == "m1" for h in search(query_api, agent_id, "maple leaves"))


def test_the_periodic_job_repairs_one_agent(
    inline_api: Any, pool: Any, pipeline: Any, settings: Settings, agent_id: str
) -> None:
    ingest(inline_api, agent_id, MORE, doc="nara")
    with pool.connection() as conn:
        conn.execute("DELETE FROM conversation_chunks WHERE agent_id = %s", (agent_id,))
        conn.commit()
    ctx = JobContext(settings, pool, InlineBackend(pipeline), agent_key=agent_id)
    result = run_job(JOBS["conversation_consistency"], ctx)
    assert result.details["found_unindexed_messages"] == 4
    assert result.details["operations_created"] == 1
    assert (
        one(pool, "SELECT count(*) AS n FROM conversation_chunks WHERE agent_id = %s", agent_id)[
            "n"
        ]
        == 4
    )
    assert run_job(JOBS["conversation_consistency"], ctx).examined == 0


def test_a_changed_model_is_detected_and_reindex_switches_generations(
    inline_api: Any, query_api: TestClient, pool: Any, agent_id: str, settings: Settings
) -> None:
    ingest(inline_api, agent_id, TRIP)
    status = inline_api.get(f"/api/agents/{agent_id}/conversation-index").json()
    assert status["model_changed"] is False and status["generation"] == 1
    assert (status["messages"], status["conversations"], status["chunks"]) == (4, 1, 4)
    assert status["embedding_model"] == settings.embedding_model
    assert status["embedding_dim"] == settings.embedding_dim and status["last_sync_at"]
    with pool.connection() as conn:  # as if the index had been built with another model
        conn.execute(
            "UPDATE conversation_index_state SET embedding_model = 'old-model' WHERE agent_id = %s",
            (agent_id,),
        )
        # a rebuild half done: generation 2 holds two messages' chunks
        conn.execute(
            "UPDATE conversation_index_state SET building = 2 WHERE agent_id = %s", (agent_id,)
        )
        conn.execute(
            "INSERT INTO conversation_chunks (agent_id, document_pk, message_pk, message_pks, "
            "chunk_index, generation, roles, occurred_at, text, snippet, source_hash, embedding) "
            "SELECT agent_id, document_pk, message_pk, message_pks, chunk_index, 2, roles, "
            "occurred_at, text, snippet, source_hash, embedding FROM conversation_chunks "
            "WHERE agent_id = %s ORDER BY occurred_at LIMIT 2",
            (agent_id,),
        )
        conn.commit()
    status = inline_api.get(f"/api/agents/{agent_id}/conversation-index").json()
    assert status["model_changed"] is True and status["rebuilding"] is True
    assert status["chunks"] == 4 and status["chunks_building"] == 2
    # while it builds, searches read the live generation only: each message once
    hits = search(query_api, agent_id, "Kyoto autumn temples", min_score=0.0, limit=20)
    assert sorted(h["message_id"] for h in hits) == ["m1", "m2", "m3", "m4"]
    assert inline_api.post(f"/api/agents/{agent_id}/consistency-check").json()["consistent"]

    response = inline_api.post(f"/api/agents/{agent_id}/conversation-index/reindex")
    assert response.status_code == 202
    op = inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed" and op["kind"] == "reindex", op
    assert op["counts"]["chunks_written"] == 2 and op["counts"]["chunks_retired"] == 4
    status = inline_api.get(f"/api/agents/{agent_id}/conversation-index").json()
    assert status["generation"] == 2 and status["model_changed"] is False
    assert status["chunks"] == 4 and status["chunks_building"] == 0
    assert status["rebuilding"] is False
    hits = search(query_api, agent_id, "Kyoto autumn temples", min_score=0.0, limit=20)
    assert sorted(h["message_id"] for h in hits) == ["m1", "m2", "m3", "m4"]
