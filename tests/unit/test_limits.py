"""Per-agent limits: the MEMORA_* defaults (seed 002 §4.9), switching one off, an agent's own
overriding key by key, and the retention score's order."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memora.basics.config import Settings
from memora.lifecycle.limits import AgentLimits, resolve
from memora.lifecycle.scores import retention_score


def test_defaults_are_off_the_seeds_values_set_and_switched_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MAX_MEMORIES", "MAX_REFLECTIONS", "MAX_GRAPH_NODES", "ARCHIVE_RETENTION_DAYS"):
        monkeypatch.delenv(f"MEMORA_{name}", raising=False)
    assert resolve(Settings(), {}) == AgentLimits(None, None, None, None)
    monkeypatch.setenv("MEMORA_MAX_MEMORIES", "1000")  # seed 002's values
    monkeypatch.setenv("MEMORA_MAX_REFLECTIONS", "100")
    monkeypatch.setenv("MEMORA_MAX_GRAPH_NODES", "500")
    monkeypatch.setenv("MEMORA_ARCHIVE_RETENTION_DAYS", "365")
    assert resolve(Settings(), {}) == AgentLimits(1000, 100, 500, 365.0)
    monkeypatch.setenv("MEMORA_MAX_MEMORIES", "off")
    monkeypatch.setenv("MEMORA_MAX_GRAPH_NODES", "none")
    monkeypatch.setenv("MEMORA_ARCHIVE_RETENTION_DAYS", "30")
    assert resolve(Settings(), {}) == AgentLimits(None, 100, None, 30.0)
    monkeypatch.setenv("MEMORA_MAX_REFLECTIONS", "-1")
    with pytest.raises(ValidationError):
        Settings()


def test_an_agents_own_limits_override_key_by_key() -> None:
    s = Settings(max_memories=1000, max_reflections=100, max_graph_nodes=500,
                 archive_retention_days=365)  # fmt: skip
    mine = {"max_memories": 50, "max_graph_nodes": None, "archive_retention_days": None}
    assert resolve(s, mine) == AgentLimits(50, 100, None, None)


def test_retention_score_weighs_importance_against_disuse() -> None:
    rate = 0.1
    assert retention_score(9, 30, rate) < retention_score(2, 0, rate) < retention_score(5, 2, rate)
    assert retention_score(5, -3, rate) == 5  # a future access date does not inflate it
