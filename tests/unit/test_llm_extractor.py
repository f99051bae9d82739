"""The LLM extractor without a database: chunking, time parsing, the answer mapped to facts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memora.basics.config import Settings
from memora.extraction.base import Mention, Relation, SourceItem
from memora.extraction.llm import MARKER, LLMExtractor, chunk_items, parse_when, split_text
from memora.nlp.llm import LLMClient
from tests.fakes import LLM_TEST_SETTINGS, FakeOpenAI, Recorded, Reply

BASE = datetime(2024, 1, 15, 10, 0, tzinfo=UTC)


def _item(index: int, content: str, speaker: str | None = None) -> SourceItem:
    return SourceItem(index, content, "chat", BASE, speaker, {"dia_id": f"D1:{index}"})


def test_split_text_keeps_everything_under_the_limit() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(200))
    pieces = split_text(text, 500)
    assert all(len(p) <= 500 for p in pieces) and len(pieces) > 5
    assert " ".join(pieces).split() == text.split()
    assert split_text("x" * 1200, 500) == ["x" * 500, "x" * 500, "x" * 200]


def test_chunks_group_items_and_split_long_ones() -> None:
    items = [_item(0, "a" * 400), _item(1, "b" * 400), _item(2, "Word. " * 300)]
    chunks = chunk_items(items, 1000)
    assert [p.item.index for p in chunks[0]] == [0, 1]
    long_parts = [p for c in chunks for p in c if p.item.index == 2]
    assert len(long_parts) >= 2 and all(p.parts == len(long_parts) for p in long_parts)
    assert all(sum(len(p.text) for p in c) <= 1000 for c in chunks)


@pytest.mark.parametrize(
    ("value", "start", "end"),
    [
        ("2023-06-01", datetime(2023, 6, 1, tzinfo=UTC), datetime(2023, 6, 2, tzinfo=UTC)),
        ("2023-06", datetime(2023, 6, 1, tzinfo=UTC), datetime(2023, 7, 1, tzinfo=UTC)),
        ("2023", datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)),
        (
            "2023-06-01T12:00:00Z",
            datetime(2023, 6, 1, 12, tzinfo=UTC),
            datetime(2023, 6, 1, 12, tzinfo=UTC),
        ),
        ("last year", datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)),
    ],
)
def test_parse_when(value: str, start: datetime, end: datetime) -> None:
    assert parse_when(value, BASE) == (start, end)


def test_parse_when_rejects_nonsense() -> None:
    assert parse_when("", BASE) is None
    assert parse_when("2023-13", BASE) is None


def _extractor(fake: FakeOpenAI, **overrides: object) -> LLMExtractor:
    settings = Settings(llm_base_url=fake.base_url, **{**LLM_TEST_SETTINGS, **overrides})  # type: ignore[arg-type]
    return LLMExtractor(LLMClient(settings), settings)


def test_answer_becomes_facts_with_mentions_times_and_relations(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        Reply(
            {
                "facts": [
                    {
                        "item": 0,
                        "text": "Alice lost her job at Initech in December 2023.",
                        "fact_type": "world",
                        "occurred_start": "2023-12",
                        "entities": [
                            {"name": "Alice", "type": "person"},
                            {"name": "Initech", "type": "ORG"},
                        ],
                        "relations": [{"target": 1, "type": "causes"}],
                    },
                    {
                        "item": 1,
                        "text": "Alice started a bakery in Lisbon.",
                        "fact_type": "World",
                        "entities": [
                            {"name": "Lisbon", "type": "city"},
                            {"name": "Alice", "type": "PERSON"},
                        ],
                        "relations": [
                            {"target": 0, "type": "caused by"},
                            {"target": 1, "type": "causes"},
                            {"target": 9, "type": "enables"},
                        ],
                    },
                    {
                        "item": 7,
                        "text": "I suggested a name for Alice's bakery.",
                        "fact_type": "agent",
                    },
                ]
            }
        ),
        when=MARKER,
    )
    items = [
        _item(0, "Alice: I lost my job last month."),
        _item(1, "Alice: So I opened a bakery in Lisbon!"),
    ]
    facts = _extractor(fake_llm).extract("helper-bot", items)
    assert [(f.item_index, f.seq, f.fact_type) for f in facts] == [
        (0, 0, "world"),
        (1, 0, "world"),
        (1, 1, "agent"),
    ]
    first, second, third = facts
    assert first.mentions == [Mention("Alice", "PERSON"), Mention("Initech", "ORGANIZATION")]
    assert second.mentions == [Mention("Lisbon", "LOCATION"), Mention("Alice", "PERSON")]
    assert third.mentions == []  # the model decided: no NER fallback
    assert first.occurred_start == datetime(2023, 12, 1, tzinfo=UTC)
    assert first.occurred_end == datetime(2024, 1, 1, tzinfo=UTC)
    assert second.occurred_start is None and first.event_date == BASE == first.mentioned_at
    assert first.relations == [Relation(1, 0, "causes")]
    assert second.relations == [Relation(0, 0, "caused_by")]  # self and out-of-range dropped
    assert first.metadata == {"dia_id": "D1:0", "extractor": "llm"}
    prompt = fake_llm.requests[0]
    assert '"helper-bot"' in prompt.content_of("system")
    assert "Resolve pronouns" in prompt.content_of("system")
    assert (
        "[item 0] time: 2024-01-15T10:00:00+00:00 | context: chat\nAlice: I lost my job"
        in prompt.content_of("user")
    )


def test_invalid_relation_type_is_re_asked(fake_llm: FakeOpenAI) -> None:
    bad = {
        "facts": [
            {
                "item": 0,
                "text": "Rain caused flooding.",
                "fact_type": "world",
                "relations": [{"target": 0, "type": "correlates"}],
            }
        ]
    }
    good = {"facts": [{"item": 0, "text": "Rain caused flooding in Porto.", "fact_type": "world"}]}
    fake_llm.script(Reply(bad), Reply(good), when=MARKER)
    facts = _extractor(fake_llm).extract("a", [_item(0, "It rained and Porto flooded.")])
    assert [f.text for f in facts] == ["Rain caused flooding in Porto."]
    assert "relation type must be one of" in fake_llm.requests[1].messages[-1]["content"]


def test_entity_relations_are_kept_in_the_vocabulary_and_the_rest_dropped(
    fake_llm: FakeOpenAI,
) -> None:
    """Relations between named entities: synonyms mapped ("reports_to" is the other way
    round), anything outside the vocabulary or malformed dropped without refusing the fact."""
    relations = [
        {"subject": "Maya", "relation": "works at", "object": "Northwind"},
        {"subject": "Maya", "relation": "reports_to", "object": "Derek"},
        {"subject": "Maya", "relation": "admires", "object": "Derek"},
        {"subject": "Maya", "relation": "lives_in"},
        "Maya lives in Porto",
        {"subject": "Maya", "relation": "friend_of", "object": "Maya"},
    ]
    fact = {"item": 0, "text": "Maya works at Northwind under Derek.", "fact_type": "world",
            "entity_relations": relations}  # fmt: skip
    fake_llm.script(Reply({"facts": [fact]}), when=MARKER)
    facts = _extractor(fake_llm).extract("a", [_item(0, "Maya: I work at Northwind for Derek.")])
    assert [f.entity_relations for f in facts] == [
        [("Maya", "works_at", "Northwind"), ("Derek", "manages", "Maya")]
    ]
    assert len(fake_llm.requests) == 1  # nothing re-asked
    assert "entity_relations" in fake_llm.requests[0].content_of("system")


def test_long_documents_are_chunked_and_seq_continues(fake_llm: FakeOpenAI) -> None:
    def answer(request: Recorded) -> Reply:
        user = request.content_of("user")
        return Reply(
            {"facts": [{"item": 0, "text": f"Bob read {len(user)} books.", "fact_type": "world"}]}
        )

    fake_llm.always(answer, when=MARKER)
    content = "\n\n".join(f"Paragraph {i}. " + "Bob talked about boats. " * 20 for i in range(10))
    facts = _extractor(fake_llm, llm_chunk_chars=1000).extract("a", [_item(0, content)])
    assert len(fake_llm.requests) == len(facts) >= 5
    assert [f.seq for f in facts] == list(range(len(facts)))
    assert all("[item 0, part " in r.content_of("user") for r in fake_llm.requests)
    assert all(len(r.content_of("user")) < 1400 for r in fake_llm.requests)
