"""What extraction keeps (seed 002 §4.7 and its privacy notes): a category for every fact,
the importance floor, and sensitive facts kept only when the user asked to remember them.

Pure functions over facts; the extract stage applies them (memora.pipeline.stages.extract).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from memora.extraction.base import Fact

CATEGORIES = ("preference", "fact", "decision", "relationship", "project")
DEFAULT_CATEGORY = "fact"

# The words that make a turn one category rather than a plain fact, checked in this order
# (the local extractor's guess; the LLM names the category itself).
_CATEGORY_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "decision",
        re.compile(
            r"\b(decided|decide to|chose|going to|will|plan(?:ning)? to|settled on)\b",
            re.I,
        ),
    ),
    (
        "preference",
        re.compile(
            r"\b(prefer\w*|favou?rite|love[sd]?|like[sd]?|enjoy\w*|hate[sd]?|can't stand)\b",
            re.I,
        ),
    ),
    (
        "relationship",
        re.compile(
            r"\b(wife|husband|partner|girlfriend|boyfriend|friend|sister|brother|mother|"
            r"father|mom|dad|son|daughter|boss|colleague|married|dating|neighbou?r)s?\b",
            re.I,
        ),
    ),
    (
        "project",
        re.compile(r"\b(project|working on|building|launch\w*|deadline|release|milestone)\b", re.I),
    ),
)

# "remember that…", "please remember", "don't forget", "keep in mind", "note that": the user
# asks for it to be kept, which lets a sensitive fact from that message be stored.
_ASKS_TO_REMEMBER = re.compile(
    r"\b(remember (that|this|:)|please remember|don'?t forget|do not forget|keep in mind|"
    r"make a note|note that|save (that|this))\b",
    re.I,
)


def guess_category(text: str) -> str:
    """The first category whose cue words the text uses, else "fact"."""
    return next((name for name, cue in _CATEGORY_CUES if cue.search(text)), DEFAULT_CATEGORY)


def asks_to_remember(text: str) -> bool:
    return bool(_ASKS_TO_REMEMBER.search(text))


@dataclass(frozen=True)
class Screened:
    kept: list[Fact]
    dropped: Counter[str]  # why: "incomplete", "sensitive", "below_confidence", ...


def screen(
    facts: Sequence[Fact],
    *,
    importance_minimum: float | None,
    sensitive: Collection[str],
    explicit_items: Collection[int],
    confidence_minimum: float = 0.0,
) -> Screened:
    """Drop the facts below `importance_minimum` (None: no floor), and, unless the fact or its
    message (`explicit_items`, the item indexes whose text asks to remember) was explicit, those
    the extractor found incomplete (extraction.completeness), tagged with a `sensitive` category
    or rated less certain than `confidence_minimum` (a fact without a rating is kept)."""
    kept: list[Fact] = []
    dropped: Counter[str] = Counter()
    for fact in facts:
        explicit = fact.explicit or fact.item_index in explicit_items
        if fact.incomplete and not explicit:
            dropped["incomplete"] += 1
        elif fact.sensitive is not None and fact.sensitive in sensitive and not explicit:
            dropped["sensitive"] += 1
        elif fact.confidence is not None and fact.confidence < confidence_minimum and not explicit:
            dropped["below_confidence"] += 1
        elif (
            importance_minimum is not None
            and fact.importance is not None
            and fact.importance < importance_minimum
        ):
            dropped["below_importance"] += 1
        else:
            kept.append(fact)
    return Screened(kept, dropped)
