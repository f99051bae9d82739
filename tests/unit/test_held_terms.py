"""The keyword index held per filter (`caches.filter_terms`): a tsvector's text form read
back exactly, and BM25 over the held units, before and after merging what changed, against
the formula computed unit by unit."""

from __future__ import annotations

import math
import random
import uuid

import pytest

from memora.retrieval.arms.keyword import K1, B
from memora.retrieval.caches.filter_terms import HeldTerms, lexemes

VOCABULARY = [f"w{i}" for i in range(40)] + ["it's", "back\\slash", "a b"]


def test_a_tsvector_text_form_is_read_with_its_term_frequencies() -> None:
    """Quotes and backslashes doubled in the text form, weight letters after positions, and a
    stripped lexeme (no positions: tf 1), as `memory_postings` counts them."""
    text = "'a b':4 'back\\\\slash':2,9B 'it''s':1,3A,7 'plain'"
    assert lexemes(text) == [("a b", 1), ("back\\slash", 2), ("it's", 3), ("plain", 1)]
    assert lexemes("") == []


def _brute(units: dict[str, list[tuple[str, int]]], idf: dict[str, float], avgdl: float,
           limit: int) -> list[tuple[str, float]]:  # fmt: skip
    scored = []
    for unit, words in units.items():
        score = sum(
            idf[w] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(words) / avgdl))
            for w, tf in words
            if w in idf
        )
        if score > 0:
            scored.append((unit, score))
    return sorted(scored, key=lambda x: (-x[1], x[0]))[:limit]


def _words(rng: random.Random) -> list[tuple[str, int]]:
    chosen = rng.sample(VOCABULARY, rng.randint(0, 8))
    return [(w, rng.randint(1, 3)) for w in sorted(chosen)]


def _agrees(held: HeldTerms, units: dict[str, list[tuple[str, int]]], rng: random.Random) -> None:
    for _ in range(30):
        idf = {w: rng.uniform(0.1, 4.0) for w in rng.sample([*VOCABULARY, "absent"], 4)}
        limit = rng.choice([1, 5, 50])
        ranked = held.best(idf, 6.0, limit, k1=K1, b=B)
        expected = _brute(units, idf, 6.0, limit)
        assert [str(u) for u, _ in ranked] == [u for u, _ in expected]
        assert [s for _, s in ranked] == pytest.approx([s for _, s in expected], rel=1e-12)


def test_ranking_agrees_with_bm25_unit_by_unit_through_merges() -> None:
    """Units added, their lexemes replaced (some lost entirely), a unit left with none: the
    merged index ranks as one read whole from the same units."""
    rng = random.Random(7)
    units = {str(uuid.UUID(int=rng.getrandbits(128))): _words(rng) for _ in range(60)}
    held = HeldTerms.read(units, horizon=5, at=1.0)
    _agrees(held, units, rng)
    for round_ in range(5):
        changed = {u: _words(rng) for u in rng.sample(sorted(units), 6)}
        changed |= {str(uuid.UUID(int=rng.getrandbits(128))): _words(rng) for _ in range(3)}
        if round_ == 2:
            changed[next(iter(units))] = []
        units |= changed
        held = held.merged(changed, horizon=6 + round_)
        assert held.horizon == 6 + round_ and held.whole_at == 1.0
        assert held.count == len(units)
        _agrees(held, units, rng)
        whole = HeldTerms.read(units, horizon=0, at=0.0)
        assert set(held.index) == set(whole.index)
        assert held.postings == whole.postings and held.nbytes == whole.nbytes
    assert held.merged({}, horizon=99).horizon == 99


def test_no_term_held_or_no_room_ranks_nothing() -> None:
    held = HeldTerms.read({str(uuid.uuid4()): [("w1", 1)]}, horizon=1, at=0.0)
    assert held.best({"absent": 1.0}, 5.0, 10, k1=K1, b=B) == []
    assert held.best({"w1": 1.0}, 5.0, 0, k1=K1, b=B) == []
    ((_, score),) = held.best({"w1": 2.0}, 5.0, 10, k1=K1, b=B)
    assert math.isclose(score, 2.0 * 2.2 / (1 + 1.2 * (0.25 + 0.75 / 5.0)))
