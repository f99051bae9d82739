"""A worker loads the models of the stages it consumes before it takes work (MEMORA_PRELOAD
"auto"), so that it reports ready only when its first task will not wait for a model."""

from __future__ import annotations

import pytest

from memora.basics.stages import (
    MAINTENANCE_STAGES,
    Stage,
    live_queues,
    queue_for,
    stage_of_queue,
)
from memora.pipeline.context import STAGE_MODELS, models_to_preload


def test_every_stage_says_which_models_it_needs() -> None:
    assert set(STAGE_MODELS) == set(Stage)


@pytest.mark.parametrize(
    ("setting", "queues", "expected"),
    [
        ("auto", ["extract", "extract.backfill"], "nlp"),
        ("auto", ["entities"], "nlp"),  # it parses what the extractor left unparsed
        ("auto", ["embed", "index_messages.backfill"], "embedder"),
        ("auto", ["opinions", "maintenance"], "embedder"),
        ("auto", ["links", "links.backfill"], ""),
        ("auto", ["extract", "embed"], "embedder,nlp"),
        ("none", ["extract"], ""),
        ("", ["extract"], ""),
        ("embedder", ["links"], "embedder"),
    ],
)
def test_models_to_preload(setting: str, queues: list[str], expected: str) -> None:
    assert models_to_preload(setting, queues) == expected


def test_without_an_llm_no_opinion_is_formed_so_its_models_wait() -> None:
    assert models_to_preload("auto", ["opinions", "maintenance"], llm=False) == ""
    assert models_to_preload("auto", ["opinions", "embed"], llm=False) == "embedder"
    assert models_to_preload("embedder", ["opinions"], llm=False) == "embedder"  # as named


def test_queues_map_back_to_their_stage() -> None:
    for stage in set(Stage) - MAINTENANCE_STAGES:
        assert stage_of_queue(queue_for(stage)) is stage
        assert stage_of_queue(queue_for(stage, backfill=True)) is stage
    assert stage_of_queue("maintenance") is None
    assert queue_for(Stage.EVOLVE) == "maintenance"  # with the periodic jobs
    assert live_queues() == [s.value for s in Stage if s not in MAINTENANCE_STAGES]
