"""A stage batch's texts parsed ahead in one pass (memora.nlp.language.parsing_ahead): the local
extractor then takes those parses, makes the same facts as when it parses each operation's
own, and parses nothing again; outside the block nothing is kept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memora.extraction.base import SourceItem
from memora.extraction.local import LocalExtractor
from memora.nlp import language

WHEN = datetime(2024, 5, 1, tzinfo=UTC)
OPERATIONS = [  # each operation of a batch: one or two messages
    [("Maya", "I moved to Lisbon last week with my sister Ana!")],
    [("Sam", "Congrats! Did you find a flat near Alfama?"), ("Maya", "Yes, close to the river.")],
    [(None, "Maya: I start at Northwind on Monday.\nSam: Great news, Maya.")],
]


def _items(messages: list[tuple[str | None, str]]) -> list[SourceItem]:
    return [
        SourceItem(i, text, None, WHEN, speaker, {}) for i, (speaker, text) in enumerate(messages)
    ]


def test_parses_taken_ahead_make_the_same_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    extractor = LocalExtractor()
    alone = [extractor.extract("agent", _items(op)) for op in OPERATIONS]

    texts = [t for op in OPERATIONS for t in LocalExtractor.texts(_items(op))]
    assert len(texts) == 5  # the two-speaker message is two turns
    calls: list[list[str]] = []
    nlp = language.load_nlp()
    real = type(nlp).pipe

    def counted(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        batch = list(batch)
        calls.append(batch)
        return real(self, batch, *args, **kwargs)

    monkeypatch.setattr(type(nlp), "pipe", counted)
    with language.parsing_ahead(texts):
        together = [extractor.extract("agent", _items(op)) for op in OPERATIONS]
    assert calls == [texts]  # one pass; the extractor parsed nothing more
    assert together == alone
    language.parse(["Outside the block."])
    assert calls[-1] == ["Outside the block."]
