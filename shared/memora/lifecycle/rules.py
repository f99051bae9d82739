"""The deterministic rules of remember and consolidation (docs/lifecycle.md), as pure functions.

A new statement is compared with the agent's most similar memories:

- SKIP: the same text once normalised (case, spacing, punctuation, quotes).
- SUPERSEDE: the new statement changes or ends an attribute of the subject the older one states
  (memora.lifecycle.changes: where someone lives or works, their job, a favourite, their
  relationship status, e-mail, phone, car, age, school, diet, manager; "no longer", "left",
  "sold"), read from the sentences' structure. Only similar memories are compared
  (`Thresholds.supersede_similarity`).
- MERGE: a near-duplicate: cosine similarity ≥ `Thresholds.merge_similarity`, the same named
  entities (each name found in either is in both texts), the same numbers and the same
  polarity (a "not" on one side only is a different fact). The richer text is kept, metadata
  merged, evidence counted.
- ADD: anything else.

Facts that only look alike ("Alice has 2 cats" / "Alice has 3 cats", "Bob likes tea" / "Bob
does not like tea", "Farid plays the piano" / "Chloe plays the piano") are never merged:
numbers, negations and capitalised words (names, whatever NER found) must agree.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from memora.lifecycle import changes


class Decision(StrEnum):
    ADD = "ADD"
    SKIP = "SKIP"
    MERGE = "MERGE"
    SUPERSEDE = "SUPERSEDE"


@dataclass(frozen=True)
class Thresholds:
    merge_similarity: float = 0.9  # the high band: near-duplicates
    supersede_similarity: float = 0.3  # statements compared for a changed attribute


@dataclass(frozen=True)
class Statement:
    """What the rules know of a memory: its text, embedding similarity to the new statement
    (1 for the statement itself) and the entity names found in it."""

    text: str
    entities: frozenset[str] = field(default_factory=frozenset)
    id: UUID | None = None
    similarity: float = 1.0
    at: datetime | None = None  # when it was said: dates a change ("last year")


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    target: UUID | None = None  # the memory skipped to, merged into or superseded
    reason: str = ""
    effective_at: datetime | None = None  # when the change happened, if the statement says
    certain: bool = False  # a SUPERSEDE the rules are sure of: no LLM is asked


# ------------------------------------------------------------------------- normalisation
_PUNCT = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower case, NFKC, punctuation dropped, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    return _SPACE.sub(" ", _PUNCT.sub(" ", folded)).strip()


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_NUMBER_WORDS = frozenset(
    {
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "hundred",
        "thousand",
        "million",
        "first",
        "second",
        "third",
    }
)
_NEGATION = re.compile(r"\b(?:not|never|no|n't|cannot|nobody|nothing|neither|nor)\b|n't\b")


def numbers(text: str) -> frozenset[str]:
    words = set(normalise(text).split())
    return frozenset(_NUMBER.findall(text)) | frozenset(w for w in _NUMBER_WORDS if w in words)


def negated(text: str) -> bool:
    return bool(_NEGATION.search(text.casefold().replace("’", "'")))


_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "with",
        "by",
        "from",
        "as",
        "it",
        "its",
        "that",
        "this",
        "he",
        "she",
        "they",
        "i",
        "we",
        "you",
        "his",
        "her",
        "their",
        "my",
        "our",
        "your",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
    }
)


def content_words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if w not in _STOP}


def names_differ(a: str, b: str) -> bool:
    """A capitalised word (a name) in one text that the other lacks: "Farid plays the piano" and
    "Chloe plays the piano" are two facts however close their embeddings, whatever NER saw."""
    only = content_words(a) ^ content_words(b)
    cased = " ".join(t for t in (a, b) if not t.isupper())  # a shouted text names nothing
    return any(
        w[:1].isupper() and any(part in only for part in normalise(w).split())
        for w in _SPACE.split(cased)
    )


def entities_agree(a: Statement, b: Statement) -> bool:
    """The same entities: every name NER found in either statement is in both texts (NER tags
    "Biscuit" in one phrasing and misses it in the other; the words decide)."""
    words_a, words_b = set(normalise(a.text).split()), set(normalise(b.text).split())
    return all(
        set(normalise(name).split()) <= (words_a & words_b) for name in a.entities | b.entities
    )


def richer(a: str, b: str) -> str:
    """The text that says more (more distinct content words; the first on a tie)."""
    return b if len(content_words(b)) > len(content_words(a)) else a


# ---------------------------------------------------------------------------- attributes
@dataclass(frozen=True)
class Attribute:
    subject: str
    name: str
    value: str


def attribute(text: str) -> Attribute | None:
    """The first attribute a statement sets (memora.lifecycle.changes reads it from the parse)."""
    for claim in changes.claims(text):
        if claim.value is not None and claim.mode != "end":
            return Attribute(claim.subject, claim.family, claim.value)
    return None


# ------------------------------------------------------------------------------ decision
def near_duplicate(new: Statement, old: Statement, t: Thresholds) -> bool:
    return (
        old.similarity >= t.merge_similarity
        and entities_agree(new, old)
        and not names_differ(new.text, old.text)
        and numbers(new.text) == numbers(old.text)
        and negated(new.text) == negated(old.text)
        and changes.change(new.text, old.text) is None
    )


def superseded(new: Statement, existing: Sequence[Statement], t: Thresholds) -> Verdict | None:
    """SUPERSEDE of the first similar memory whose attribute `new` changes or ends."""
    for old in existing:
        if old.similarity < t.supersede_similarity:
            continue
        found = changes.change(new.text, old.text, new.at)
        if found is not None:
            return Verdict(
                Decision.SUPERSEDE, old.id, found.reason, found.new.effective_at, found.certain
            )
    return None


def decide(new: Statement, existing: Sequence[Statement], t: Thresholds = Thresholds()) -> Verdict:
    """The rule-based verdict for `new` against the agent's memories most similar to it
    (`existing`, most similar first, each carrying its similarity to `new`)."""
    key = normalise(new.text)
    for old in existing:
        if normalise(old.text) == key:
            return Verdict(Decision.SKIP, old.id, "the same text is already remembered")
    changed = superseded(new, existing, t)
    if changed is not None:
        return changed
    for old in existing:
        if near_duplicate(new, old, t):
            return Verdict(Decision.MERGE, old.id, f"near-duplicate (cosine {old.similarity:.3f})")
    return Verdict(Decision.ADD, None, "no memory says the same or states the same attribute")


def merge_metadata(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The existing memory's metadata, completed by the new statement's (existing keys win)."""
    return {**new, **old}


def borderline(existing: Iterable[Statement], t: Thresholds, limit: int = 10) -> list[Statement]:
    """Memories the LLM is asked about when one is configured: the `limit` most similar that are
    similar enough to possibly be the same fact or an update of it."""
    close = [s for s in existing if s.similarity >= t.supersede_similarity]
    return sorted(close, key=lambda s: -s.similarity)[:limit]
