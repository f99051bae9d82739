"""What extraction keeps (memora.extraction.policy): categories, the importance floor and the
sensitive categories, as pure functions over facts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memora.extraction.base import Fact
from memora.extraction.policy import asks_to_remember, guess_category, screen

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def fact(item: int, importance: float, sensitive: str | None = None, explicit: bool = False):
    return Fact(item, 0, f"fact {item}", "world", NOW, NOW, importance=importance,
                sensitive=sensitive, explicit=explicit)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Maya: I prefer tea over coffee.", "preference"),
        ("We decided to launch in June.", "decision"),
        ("My sister lives in Oslo.", "relationship"),
        ("The project deadline is Friday.", "project"),
        ("The fence is green.", "fact"),
    ],
)
def test_guess_category(text: str, category: str) -> None:
    assert guess_category(text) == category


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("Please remember that I'm vegetarian.", True),
        ("Don't forget my allergy.", True),
        ("Remember this: gate code 4411.", True),
        ("I can't remember where I parked.", False),
        ("I have a cold.", False),
    ],
)
def test_asks_to_remember(text: str, asked: bool) -> None:
    assert asks_to_remember(text) is asked


def test_screen_drops_low_and_unasked_sensitive_facts() -> None:
    facts = [
        fact(0, 8, "health"),  # sensitive, nobody asked: dropped
        fact(1, 8, "health", explicit=True),  # the model says the user asked: kept
        fact(2, 8, "health"),  # its message asks to remember: kept
        fact(3, 2),  # below the floor: dropped
        fact(4, 8, "religion"),  # not a configured category: kept
        fact(5, 5),
    ]
    out = screen(facts, importance_minimum=3, sensitive={"health"}, explicit_items={2})
    assert [f.item_index for f in out.kept] == [1, 2, 4, 5]
    assert out.dropped == {"sensitive": 1, "below_importance": 1}


def test_screen_without_floor_or_categories_keeps_everything() -> None:
    facts = [fact(0, 1, "health"), fact(1, 1)]
    out = screen(facts, importance_minimum=None, sensitive=(), explicit_items=())
    assert out.kept == facts and not out.dropped


def test_screen_drops_facts_rated_less_certain_than_the_floor() -> None:
    """Seed 002's extractionConfidence: an unasked fact rated below it is not stored; one the
    user asked to remember, or one without a rating, is."""
    facts = [replace(fact(i, 5), confidence=c) for i, c in enumerate((0.4, 0.7, None, 0.2))]
    facts[3] = replace(facts[3], explicit=True)
    out = screen(
        facts, importance_minimum=3, sensitive=(), explicit_items=(), confidence_minimum=0.7
    )
    assert [f.item_index for f in out.kept] == [1, 2, 3]
    assert out.dropped == {"below_confidence": 1}
