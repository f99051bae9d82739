"""The subject-and-verb check of LLM facts (extraction.completeness) on its labelled set, and
the extractor's one re-ask: rewrites replace facts, a fact the model drops is screened out as
`incomplete`, a failed re-ask keeps the facts, complete answers ask nothing more."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from memora.basics.config import Settings
from memora.extraction import completeness, policy
from memora.extraction.base import SourceItem
from memora.extraction.llm import MARKER, LLMExtractor
from memora.nlp.llm import LLMClient
from tests.fakes import LLM_TEST_SETTINGS, Fail, FakeOpenAI, Reply

SET = Path(__file__).parents[1] / "data" / "fact_completeness.jsonl"
BASE = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def test_the_check_on_its_labelled_set() -> None:
    rows = [json.loads(line) for line in SET.read_text().splitlines() if line.strip()]
    flagged = set(completeness.incomplete([r["text"] for r in rows]))
    fragments = {i for i, r in enumerate(rows) if not r["complete"]}
    precision = len(flagged & fragments) / len(flagged)
    recall = len(flagged & fragments) / len(fragments)
    # measured: 24 of 26 flagged are fragments, 24 of 25 fragments flagged
    assert precision >= 0.9 and recall >= 0.9, (precision, recall)


def _extractor(fake: FakeOpenAI, **overrides: object) -> LLMExtractor:
    settings = Settings(llm_base_url=fake.base_url, **{**LLM_TEST_SETTINGS, **overrides})  # type: ignore[arg-type]
    return LLMExtractor(LLMClient(settings), settings)


def _answer(*texts: str) -> Reply:
    return Reply({"facts": [{"item": 0, "text": t, "fact_type": "world"} for t in texts]})


ITEMS = [SourceItem(0, "Maya: I'm allergic to peanuts, and I love hiking.", None, BASE, "Maya", {})]


def test_incomplete_facts_are_asked_again_once(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(_answer("Maya is allergic to peanuts.", "Loves hiking.", "Blue."), when=MARKER)
    fake_llm.script(
        Reply({"facts": [{"index": 1, "text": "Maya loves hiking."}, {"index": 2, "text": None}]}),
        when=completeness.MARKER,
    )
    facts = _extractor(fake_llm).extract("a1", ITEMS)
    assert [f.text for f in facts] == [
        "Maya is allergic to peanuts.",
        "Maya loves hiking.",
        "Blue.",
    ]
    assert [f.incomplete for f in facts] == [False, False, True]
    (reask,) = fake_llm.requests_matching(completeness.MARKER)
    assert "[1] Loves hiking." in reask.prompt and "[2] Blue." in reask.prompt
    assert "Maya is allergic" not in reask.content_of("user").split("Items:")[0]
    screened = policy.screen(facts, importance_minimum=None, sensitive=(), explicit_items=())
    assert [f.text for f in screened.kept] == ["Maya is allergic to peanuts.", "Maya loves hiking."]
    assert screened.dropped == {"incomplete": 1}


def test_complete_answers_and_a_switched_off_check_ask_nothing_more(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.script(_answer("Maya is allergic to peanuts."), when=MARKER)
    assert len(_extractor(fake_llm).extract("a1", ITEMS)) == 1
    fake_llm.script(_answer("Loves hiking."), when=MARKER)
    (fact,) = _extractor(fake_llm, extraction_completeness=False).extract("a1", ITEMS)
    assert fact.text == "Loves hiking." and not fact.incomplete
    assert fake_llm.requests_matching(completeness.MARKER) == []


def test_a_failed_re_ask_keeps_the_facts(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(_answer("Loves hiking."), when=MARKER)
    fake_llm.always(Fail(400, "bad request"), when=completeness.MARKER)
    (fact,) = _extractor(fake_llm).extract("a1", ITEMS)
    assert fact.text == "Loves hiking." and not fact.incomplete
