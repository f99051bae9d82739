"""A conversation chunk's vector made from its messages' units (MEMORA_CONVERSATION_CHUNK_VECTORS
=units): the normalised mean, the message before weighted in, and the text embedded whenever
units are missing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np

from memora.nlp.chunking import Chunk
from memora.pipeline.stages.index_messages import ChunkPlan, unit_vector


def _chunk(*covers: uuid.UUID) -> Chunk:
    return Chunk(covers[0], tuple(covers), 0, "text", "text", (), datetime.now(UTC), "h")


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_the_vector_is_the_normalised_mean_of_the_units_of_the_covered_messages() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    vectors = {a: [_unit(1, 0)], b: [_unit(0, 1)]}
    got = unit_vector(_chunk(a, b), None, vectors, 0.4)
    assert got is not None and np.allclose(got, _unit(1, 1))


def test_the_message_before_is_weighted_in() -> None:
    a, before = uuid.uuid4(), uuid.uuid4()
    vectors = {a: [_unit(1, 0)], before: [_unit(0, 1)]}
    got = unit_vector(_chunk(a), before, vectors, 0.5)
    assert got is not None and np.allclose(got, _unit(1, 0.5))
    alone = unit_vector(_chunk(a), before, vectors, 0.0)
    assert alone is not None and np.allclose(alone, _unit(1, 0))


def test_no_units_or_a_unit_not_embedded_yet_means_embedding_the_text() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    assert unit_vector(_chunk(a), None, {}, 0.4) is None  # small talk: no unit
    assert unit_vector(_chunk(a, b), None, {a: [_unit(1, 0)], b: [None]}, 0.4) is None


def test_a_small_talk_message_beside_one_with_units_takes_the_units() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    got = unit_vector(_chunk(a, b), None, {b: [_unit(0, 1)]}, 0.4)
    assert got is not None and np.allclose(got, _unit(0, 1))


def test_the_plan_embeds_only_the_chunks_without_a_derived_vector() -> None:
    doc = uuid.uuid4()
    c1, c2, c3 = (_chunk(uuid.uuid4()) for _ in range(3))
    plan = ChunkPlan([(doc, c1), (doc, c2), (doc, c3)], [_unit(1, 0), None, _unit(0, 1)])
    assert plan.texts == ["text"]
    done = plan.complete(np.array([_unit(1, 1)]))
    assert [np.round(v, 3).tolist() for _, _, v in done] == [
        [1.0, 0.0],
        np.round(_unit(1, 1), 3).tolist(),
        [0.0, 1.0],
    ]
