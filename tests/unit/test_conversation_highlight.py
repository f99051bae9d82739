"""Highlighted words of conversation search (seed 002 §7.10 highlightMatches): the offsets
read from `ts_headline`'s marks, and the snippet with them in bold."""

from __future__ import annotations

from datetime import UTC, datetime

from memora.retrieval.conversation import START, STOP, ConversationHit, spans
from services.api.schemas.conversations import ConversationResult, bold


def _hit(snippet: str, highlights: list[tuple[int, int]] | None) -> ConversationHit:
    return ConversationHit(
        "doc", None, "m1", ["m1"], "user", None, datetime(2024, 1, 1, tzinfo=UTC), snippet, 0,
        None, 0.9, 0.8, 0.1, highlights,
    )  # fmt: skip


def test_spans_are_offsets_in_the_text_without_marks() -> None:
    text = "Tofuku-ji temples, and peanuts!"
    marked = f"{START}Tofuku{STOP}-ji {START}temples{STOP}, and {START}peanuts{STOP}!"
    found = spans(marked)
    assert [text[a:b] for a, b in found] == ["Tofuku", "temples", "peanuts"]
    assert spans(text) == []


def test_bold_wraps_each_span_and_keeps_the_rest() -> None:
    hit = _hit("allergic to peanuts, not to tea", [(12, 19), (28, 31)])
    assert bold(hit) == "allergic to **peanuts**, not to **tea**"
    assert bold(_hit("nothing matched", [])) == "nothing matched"


def test_results_carry_highlights_only_when_the_search_asked() -> None:
    plain = ConversationResult.of(1, _hit("peanuts", None)).model_dump(exclude_unset=True)
    assert "highlights" not in plain and "snippet_highlighted" not in plain
    marked = ConversationResult.of(1, _hit("peanuts", [(0, 7)])).model_dump(exclude_unset=True)
    assert marked["highlights"] == [(0, 7)] and marked["snippet_highlighted"] == "**peanuts**"
