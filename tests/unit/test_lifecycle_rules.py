"""The lifecycle's pure rules and scores: remember's verdicts, importance, recall, attenuation."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memora.lifecycle.rules import Decision, Statement, attribute, decide, normalise, richer
from memora.lifecycle.scores import attenuated, heuristic_importance, reflection_due
from memora.retrieval.rerank.recall import (
    RecallWeights,
    frequency_score,
    recall_scores,
    recency_decay,
)


def old(text: str, similarity: float, *entities: str) -> Statement:
    return Statement(text, frozenset(entities), uuid.uuid4(), similarity)


def new(text: str, *entities: str) -> Statement:
    return Statement(text, frozenset(entities))


def test_normalise_ignores_case_spacing_and_punctuation() -> None:
    assert normalise("  Alice lives in PARIS! ") == normalise("alice   lives in paris")


def test_same_text_is_skipped() -> None:
    existing = old("Alice lives in Paris.", 0.99, "alice", "paris")
    verdict = decide(new("alice lives in paris", "alice", "paris"), [existing])
    assert verdict.decision is Decision.SKIP and verdict.target == existing.id


def test_near_duplicate_with_same_entities_is_merged() -> None:
    existing = old("Alice adopted a dog named Rex.", 0.93, "alice", "rex")
    verdict = decide(new("Alice adopted a dog called Rex.", "alice", "rex"), [existing])
    assert verdict.decision is Decision.MERGE and verdict.target == existing.id


@pytest.mark.parametrize(
    ("stored", "stated"),
    [
        ("Alice has 2 cats.", "Alice has 3 cats."),  # numbers differ
        ("Bob likes sushi.", "Bob does not like sushi."),  # polarity differs
        ("Alice met Bob in Rome.", "Alice met Carol in Rome."),  # entities differ
    ],
)
def test_look_alike_facts_are_not_merged(stored: str, stated: str) -> None:
    ents = {"Alice met Bob in Rome.": ("alice", "bob", "rome")}
    existing = old(stored, 0.95, *ents.get(stored, ()))
    verdict = decide(new(stated, *{"Alice met Carol in Rome.": ("alice", "carol", "rome")}.get(
        stated, ())), [existing])  # fmt: skip
    assert verdict.decision is Decision.ADD


def test_low_similarity_is_added() -> None:
    assert decide(new("Alice plays chess."), [old("Alice lives in Paris.", 0.3)]).decision is (
        Decision.ADD
    )


@pytest.mark.parametrize(
    ("before", "after", "name"),
    [
        ("Alice lives in Paris.", "Alice moved to Berlin.", "residence"),
        ("I work at Google.", "I now work at Microsoft.", "employer"),
        ("Bob works as a teacher.", "Bob works as a nurse.", "occupation"),
        ("Carol's favourite food is sushi.", "Carol's favorite food is pizza.", "favourite food"),
        ("Dan is single.", "Dan is married.", "relationship_status"),
    ],
)
def test_changed_attribute_supersedes(before: str, after: str, name: str) -> None:
    a, b = attribute(before), attribute(after)
    assert a is not None and b is not None and a.name == b.name == name
    existing = old(before, 0.7)
    verdict = decide(new(after), [existing])
    assert verdict.decision is Decision.SUPERSEDE and verdict.target == existing.id


def test_same_attribute_of_another_subject_or_other_favourite_is_added() -> None:
    assert decide(new("Bob lives in Berlin."), [old("Alice lives in Paris.", 0.8)]).decision is (
        Decision.ADD
    )
    assert (
        decide(
            new("Carol's favourite colour is blue."), [old("Carol's favourite food is sushi.", 0.7)]
        ).decision
        is Decision.ADD
    )


def test_same_attribute_same_value_is_not_a_conflict() -> None:
    verdict = decide(new("Alice lives in Paris now."), [old("Alice lives in Paris.", 0.95)])
    assert verdict.decision in (Decision.MERGE, Decision.SKIP)


def test_richer_keeps_the_text_that_says_more() -> None:
    assert richer("Alice has a dog.", "Alice has a dog named Rex from a shelter.").endswith(
        "shelter."
    )
    assert richer("Alice has a dog named Rex.", "Alice has a dog.") == "Alice has a dog named Rex."


def test_heuristic_importance() -> None:
    assert heuristic_importance("ok thanks", 0) == 1.0
    plain = heuristic_importance("The weather was nice.", 0)
    rich = heuristic_importance("I decided to move to Berlin with Alice on 3 May.", 2)
    assert plain == 3.0 and rich == 9.5
    assert 1.0 <= heuristic_importance("x " * 500, 50) <= 10.0


def test_recall_score_follows_the_seed_weights() -> None:
    w = RecallWeights()
    score = recall_scores(
        np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([10.0, 1.0]), np.array([1.0, 0.0]), w
    )
    assert score[0] == pytest.approx(1.0)
    assert score[1] == pytest.approx(0.03)


def test_recency_decay_halves_per_half_life_and_frequency_is_log_scaled() -> None:
    now = datetime(2026, 1, 8, tzinfo=UTC)
    assert recency_decay(now, now, 7) == 1.0
    assert recency_decay(now - timedelta(days=7), now, 7) == pytest.approx(0.5)
    assert frequency_score(0, 100) == 0.0
    assert frequency_score(100, 100) == pytest.approx(1.0)
    assert frequency_score(9, 100) == pytest.approx(math.log(10) / math.log(101))


def test_attenuation_and_reflection_trigger() -> None:
    assert attenuated(5.0, 0, 0.1) == 5.0
    assert attenuated(5.0, 10, 0.1) == pytest.approx(5.0 * math.exp(-1.0))
    assert reflection_due(150, 150) and not reflection_due(149.5, 150)


def test_heuristic_importance_estimates_names_when_entities_are_unknown() -> None:
    assert heuristic_importance("We met Alice and Bob at the station.", None) == 5.0
    assert heuristic_importance("The station was busy.", None) == 3.0


def test_names_tell_look_alikes_apart_but_shouting_does_not() -> None:
    farid = old("Farid plays the piano on weekends.", 0.95)
    assert decide(new("Chloe plays the piano on weekends."), [farid]).decision is Decision.ADD
    chloe = old("Chloe plays the piano every weekend.", 0.93)
    assert decide(new("CHLOE PLAYS THE PIANO ON WEEKENDS!"), [chloe]).decision is Decision.MERGE


def test_entities_agree_by_the_words_not_by_what_ner_tagged() -> None:
    stored = old("Mateo adopted a dog named Biscuit.", 0.99, "mateo")
    stated = new("Mateo adopted a dog called Biscuit.", "mateo", "biscuit")
    assert decide(stated, [stored]).decision is Decision.MERGE
    other = old("Mateo adopted a dog named Rex.", 0.95, "mateo", "rex")
    assert decide(stated, [other]).decision is Decision.ADD
