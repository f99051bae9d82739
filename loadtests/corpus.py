"""Synthetic chat turns for the load tests: varied, and never mere greetings, so that the local
extractor keeps every turn as exactly one memory unit (the runner relies on it to count)."""

from __future__ import annotations

import random

PLACES = ["Lisbon", "Kyoto", "Denver", "Nairobi", "Oslo", "Lima", "Toronto", "Hanoi", "Prague"]
PEOPLE = ["my sister", "my manager", "an old friend", "the new neighbour", "my cousin Maya"]
ACTIVITIES = [
    "climbed the ridge trail",
    "started a pottery class",
    "adopted a rescue dog",
    "switched to the night shift",
    "finished the marathon training plan",
    "planted tomatoes on the balcony",
    "signed the lease on a studio",
    "joined a chess club",
    "fixed the old bicycle",
    "booked a cooking course",
]
WHEN = ["last weekend", "yesterday", "in March", "two weeks ago", "this morning", "last summer"]
FEELINGS = [
    "and it was exhausting but worth it",
    "and I want to do it again soon",
    "which surprised everyone at work",
    "although the weather was terrible",
    "because the doctor recommended it",
]
TOPICS = [
    "What did {p} say about the trip to {c}?",
    "I think the budget for {c} is too tight this year.",
    "The project deadline moved because the supplier in {c} is late.",
    "My favourite restaurant in {c} closed after twenty years.",
]


def turn(rng: random.Random | None = None) -> str:
    """One substantive chat line (without the speaker)."""
    r = rng or random
    if r.random() < 0.25:
        return r.choice(TOPICS).format(p=r.choice(PEOPLE), c=r.choice(PLACES))
    return (
        f"I {r.choice(ACTIVITIES)} with {r.choice(PEOPLE)} in {r.choice(PLACES)} "
        f"{r.choice(WHEN)}, {r.choice(FEELINGS)}."
    )


_QUERIES = (
    [
        f"{q} {c}"
        for q in (
            "who went to",
            "what happened in",
            "trip to",
            "restaurant in",
            "deadline supplier",
        )
        for c in PLACES
    ]
    + [a for a in ACTIVITIES]
    + ["marathon", "pottery class with my sister", "rescue dog"]
)


def queries() -> list[str]:
    return _QUERIES
