"""Seed files become documents per (scenario, section) in seed 001's categories."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from memora.usecases.episodes import Episode
from memora.usecases.seeding import SeedFile, chunk_text, plan

CAST: dict[str, Any] = {
    "scenario": {"id": "dinner", "location": "Alex's flat", "atmosphere": "relaxed",
                 "time": "evening", "description": "Friends plan where to eat."},
    "characters": [
        {"agent_id": "alex", "name": "Alex", "archetype": "a pragmatic project manager",
         "description": "Organised and direct.", "background": "Grew up in Leeds. " * 40,
         "communication_style": "Short sentences.", "decision_style": "Weighs costs.",
         "traits": ["organised", "impatient"], "skills": ["planning"], "values": ["fairness"]},
        {"agent_id": "jordan", "name": "Jordan", "archetype": "a chef"},
    ],
    "knowledge": [{"agent_id": "jordan", "about": "Alex", "content": "Alex hates olives."}],
}  # fmt: skip


def test_chunks_stay_under_the_limit_on_sentence_boundaries() -> None:
    text = "One short sentence. " * 50 + "A" * 400 + ". Last."
    chunks = chunk_text(text)
    assert all(len(c) <= 300 for c in chunks[:-2])
    assert "A" * 400 + "." in chunks  # a longer sentence is one chunk
    assert " ".join(chunks) == " ".join(text.split())


def test_plan_covers_every_category_and_the_others() -> None:
    docs = {(d.agent_id, d.document_id): d.items for d in plan(SeedFile.model_validate(CAST))}
    alex_self = {k[1].rsplit(":", 1)[1] for k in docs if k[0] == "alex" and ":self:" in k[1]}
    assert alex_self == {"identity", "background", "communication", "decision_style",
                         "traits", "skills", "values"}  # fmt: skip
    background = docs[("alex", "seed:dinner:self:background")]
    assert len(background) > 1 and all(len(i.content) <= 300 for i in background)
    identity = docs[("alex", "seed:dinner:self:identity")][0]
    assert identity.content.startswith("You are Alex, a pragmatic project manager.")
    assert identity.metadata["category"] == "identity" and identity.metadata["type"] == "character"
    scene = docs[("jordan", "seed:dinner:scene")]
    assert [i.metadata["category"] for i in scene] == ["location", "atmosphere", "time", "context"]
    knows = docs[("jordan", "seed:dinner:about:alex")][0]
    assert knows.metadata["type"] == "character_knowledge" and knows.metadata["about"] == "Alex"
    assert docs[("jordan", "seed:dinner:knowledge")][0].content == "Alex hates olives."
    assert docs[("alex", "seed:dinner:knowledge")] == []  # nothing extra: deleted if it existed
    assert docs[("jordan", "seed:dinner:self:skills")] == []


@pytest.mark.parametrize(
    "change",
    [
        {"characters": []},
        {"characters": [CAST["characters"][0], CAST["characters"][0]]},
        {"knowledge": [{"agent_id": "nobody", "content": "x"}]},
        {"scenario": {"id": "bad id"}},
        {"unexpected": 1},
    ],
)
def test_bad_seeds_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SeedFile.model_validate(CAST | change)


def test_episode_is_a_dialogue_memory_with_its_turn() -> None:
    ep = Episode(
        scene="dinner", turn=3, speaker="Alice", text="I love pasta.", listeners=["a", "a"]
    )
    assert ep.listeners == ["a"]
    assert ep.document_id == "episode:dinner:3:Alice"
    item = ep.item()
    assert item.content == "Alice said: I love pasta."
    assert item.metadata == {"fact_type": "agent", "type": "episodic", "category": "dialogue",
                                  "scene": "dinner", "turn": 3, "speaker": "Alice"}  # fmt: skip
