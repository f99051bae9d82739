"""The follow-up round's fusion of ranked lists (memora.usecases.follow_up.fuse_rounds)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from memora.retrieval import Hit
from memora.usecases.follow_up import fuse_rounds


def _hit(text: str, weight: float = 0.5, ident: UUID | None = None) -> Hit:
    return Hit(ident or uuid4(), text, None, datetime(2024, 1, 1, tzinfo=UTC), weight, "world", {})


def test_a_hit_several_rounds_found_goes_first() -> None:
    a, b, c, d = (_hit(t) for t in "abcd")
    fused = fuse_rounds([[a, b, c], [d, c]], k=60)
    assert [h.text for h in fused] == ["c", "a", "d", "b"]
    assert fused[0].weight == pytest.approx(1 / 63 + 1 / 62)
    assert fused[1].weight == pytest.approx(1 / 61)


def test_ties_keep_the_earlier_rounds_order() -> None:
    first = [_hit("a"), _hit("b")]
    second = [_hit("x"), _hit("y")]
    assert [h.text for h in fuse_rounds([first, second], 60)] == ["a", "x", "b", "y"]


def test_each_hit_once_as_its_first_round_gave_it() -> None:
    shared = uuid4()
    fused = fuse_rounds([[_hit("first copy", 0.9, shared)], [_hit("second copy", 0.1, shared)]], 60)
    assert len(fused) == 1 and fused[0].text == "first copy"


def test_nothing_in_nothing_out() -> None:
    assert fuse_rounds([], 60) == [] and fuse_rounds([[], []], 60) == []
