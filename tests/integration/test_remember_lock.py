"""remember asks the LLM outside the agent's lifecycle lock (memora.usecases.remember): the
lock is free while the LLM answers, and a memory that changed meanwhile is seen before the
write, which then rests on what the agent holds at that moment."""

from __future__ import annotations

from typing import Any

import pytest

from memora.basics.config import Settings
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.lifecycle.memory import CONFLICT_MARKER
from memora.lifecycle.rules import Decision
from memora.pipeline.backend import InlineBackend
from memora.pipeline.context import AppContext
from memora.usecases import memories
from memora.usecases.remember import remember
from tests.fakes import FakeOpenAI, Reply

pytestmark = pytest.mark.integration

FIRST = "Jack drives a red Toyota."
# the rules read no change here (ADD), so the LLM is asked
SECOND = "Jack's garage now holds a blue Tesla instead."
SUPERSEDE = Reply({"decision": "SUPERSEDE", "memory": 1, "reason": "new car"})


def _lock_is_free(pool: Any, agent_id: str) -> bool:
    """Whether another transaction could take the agent's lifecycle lock now
    (memora.store.lifecycle.lock_agent's advisory lock)."""
    key = f"lifecycle:{DEFAULT_SCOPE.key(agent_id)}"
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0)) AS free", (key,)
        ).fetchone()
        conn.rollback()
    return bool(row["free"])


def test_the_llm_answers_while_the_agent_is_not_locked(
    llm_settings: Settings, fake_llm: FakeOpenAI, pool: Any, pipeline: Any, agent_id: str
) -> None:
    app = AppContext(llm_settings, pool, InlineBackend(pipeline))
    first = remember(app, DEFAULT_SCOPE, agent_id, FIRST)  # no candidates: no call
    free: list[bool] = []

    def answer(_: Any) -> Reply:
        free.append(_lock_is_free(pool, agent_id))
        return SUPERSEDE

    fake_llm.script(answer, when=CONFLICT_MARKER)
    second = remember(app, DEFAULT_SCOPE, agent_id, SECOND)
    assert free == [True]
    assert second.decision is Decision.SUPERSEDE and second.decided_by == "llm"
    assert second.superseded_id == first.memory_id


def test_a_memory_changed_while_the_llm_answered_is_seen_before_the_write(
    llm_settings: Settings, fake_llm: FakeOpenAI, pool: Any, pipeline: Any, agent_id: str
) -> None:
    app = AppContext(llm_settings, pool, InlineBackend(pipeline))
    first = remember(app, DEFAULT_SCOPE, agent_id, FIRST)

    def answer(_: Any) -> Reply:  # the memory the LLM is shown is forgotten meanwhile
        memories.forget(app, DEFAULT_SCOPE, agent_id, memory_id=first.memory_id, actor="test")
        return SUPERSEDE

    fake_llm.script(answer, when=CONFLICT_MARKER)
    second = remember(app, DEFAULT_SCOPE, agent_id, SECOND)
    # decided again on what the agent holds: nothing left to compare with, an ADD by the rules
    assert second.decision is Decision.ADD and second.decided_by == "rules"
    assert second.superseded_id is None
    assert len(fake_llm.requests_matching(CONFLICT_MARKER)) == 1
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT status, superseded_by FROM memory_units WHERE id = %s", (first.memory_id,)
        ).fetchone()
    assert row is not None
    assert row["status"] == "forgotten" and row["superseded_by"] is None
