"""Pure functions of the write path: entity scoring, link weights, temporal ranges, noise."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES, Stage, next_stage, queue_for
from memora.entities.resolution import (
    ResolutionWeights,
    cooccurrence_score,
    match_score,
    name_similarity,
    temporal_score,
)
from memora.extraction.base import SourceItem
from memora.extraction.local import is_noise, split_turns
from memora.nlp.names import normalize_name
from memora.nlp.temporal import period_range, resolve_expression
from memora.store.documents import content_hash
from memora.store.links import temporal_weight


def test_name_similarity_is_levenshtein_with_word_containment() -> None:
    assert name_similarity("alice", "alice") == 1.0
    assert name_similarity("alice", "alice chen") == 0.9  # words contained
    assert name_similarity("google inc", "google") == 0.9
    assert name_similarity("bob", "rob") == pytest.approx(1 - 1 / 3)
    assert name_similarity("alice", "zed") < 0.3


def test_resolution_score_matches_the_specification() -> None:
    w = ResolutionWeights.from_settings(Settings())
    assert (w.name, w.cooccurrence, w.temporal, w.threshold) == (0.5, 0.3, 0.2, 0.75)
    assert cooccurrence_score(3) == pytest.approx(0.3)
    assert cooccurrence_score(25) == 1.0
    assert temporal_score(0) == 1.0
    assert temporal_score(7 * 86400) == pytest.approx(math.exp(-1))
    score = match_score(0.9, cooccurrence_score(5), temporal_score(86400), w)
    assert score == pytest.approx(0.45 + 0.15 + 0.2 * math.exp(-1 / 7))


def test_normalize_name() -> None:
    assert normalize_name("  The Google's ") == "google"
    assert normalize_name("Alice  Chen") == "alice chen"


def test_temporal_link_weight_decays_linearly_with_a_floor() -> None:
    day = 86400.0
    assert temporal_weight(0, day) == 1.0
    assert temporal_weight(day / 2, day) == pytest.approx(0.5)
    assert temporal_weight(0.9 * day, day) == pytest.approx(0.3)
    assert temporal_weight(-day / 4, day) == pytest.approx(0.75)


def test_period_ranges() -> None:
    when = datetime(2023, 5, 17, 13, 0)
    assert period_range(when, "year") == (datetime(2023, 1, 1), datetime(2024, 1, 1))
    assert period_range(when, "month") == (datetime(2023, 5, 1), datetime(2023, 6, 1))
    assert period_range(when, "week") == (datetime(2023, 5, 15), datetime(2023, 5, 22))
    assert period_range(when, "day") == (datetime(2023, 5, 17), datetime(2023, 5, 18))


def test_relative_expressions_resolve_against_the_message_time() -> None:
    base = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert resolve_expression("yesterday", base) == (
        datetime(2023, 5, 7, tzinfo=UTC),
        datetime(2023, 5, 8, tzinfo=UTC),
    )
    assert resolve_expression("last year", base) == (
        datetime(2022, 1, 1, tzinfo=UTC),
        datetime(2023, 1, 1, tzinfo=UTC),
    )
    assert resolve_expression("June 2021", base) == (
        datetime(2021, 6, 1, tzinfo=UTC),
        datetime(2021, 7, 1, tzinfo=UTC),
    )
    assert resolve_expression("not a date at all", base) is None


def test_noise_filter() -> None:
    assert is_noise("Hey Mel!", frozenset({"mel"}))
    assert is_noise("Thanks so much!!")
    assert is_noise("How have you been?")
    assert not is_noise("I went to the support group yesterday.")
    assert not is_noise("Thanks! I adopted a cat named Pixel.")


def _item(content: str, speaker: str | None = None) -> SourceItem:
    return SourceItem(0, content, None, datetime(2024, 1, 1, tzinfo=UTC), speaker, {})


def test_turn_splitting() -> None:
    turns = split_turns(_item("Alice: I moved.\nto Lisbon in May\nBob: Nice!"))
    assert [(t.speaker, t.text) for t in turns] == [
        ("Alice", "I moved.\nto Lisbon in May"),
        ("Bob", "Nice!"),
    ]
    assert [
        (t.speaker, t.text) for t in split_turns(_item("Plain note: no speaker here", "Maya"))
    ] == [("Maya", "Plain note: no speaker here")]
    assert split_turns(_item("just a note"))[0].speaker is None


def test_stage_order_and_queues() -> None:
    assert INGEST_STAGES == (
        Stage.EXTRACT, Stage.EMBED, Stage.ENTITIES, Stage.LINKS, Stage.INDEX_MESSAGES
    )  # fmt: skip
    assert next_stage(Stage.EXTRACT) is Stage.EMBED
    assert next_stage(Stage.LINKS) is Stage.INDEX_MESSAGES
    assert next_stage(Stage.INDEX_MESSAGES) is None
    assert next_stage(Stage.EMBED, "repair") is Stage.INDEX_MESSAGES
    assert next_stage(Stage.INDEX_MESSAGES, "message_delete") is None
    assert next_stage(Stage.OPINIONS) is None
    assert queue_for(Stage.EMBED) == "embed"
    assert queue_for(Stage.EMBED, backfill=True) == "embed.backfill"


def test_content_hash_is_order_sensitive_and_key_order_insensitive() -> None:
    a = [{"content": "x", "context": None}, {"content": "y"}]
    assert content_hash(a) == content_hash([{"context": None, "content": "x"}, {"content": "y"}])
    assert content_hash(a) != content_hash(list(reversed(a)))
