"""Entity spans from chat made into names (issue 32): cleaning and non-entity decisions."""

from __future__ import annotations

import pytest

from memora.extraction.base import Mention
from memora.extraction.cleaning import (
    SpeakerNames,
    clean_mentions,
    is_common_word,
    is_date,
    is_name,
    lower_case_words,
    strip_span,
)


@pytest.mark.parametrize(
    ("span", "name"),
    [
        ("Bye Caroline", "Caroline"),
        ("ya, Melanie", "Melanie"),
        ("Yep Jon", "Jon"),
        ("Hey Mel!", "Mel"),
        ("Ed Sheeran's", "Ed Sheeran"),
        ("Ed Sheeran’s", "Ed Sheeran"),
        ('Summer Sounds"-', "Summer Sounds"),
        ('"The Lean Startup', "The Lean Startup"),
        ("the Grand Canyon", "Grand Canyon"),
        ("Washington, D.C.", "Washington, D.C"),
        ("Good Morning America", "Good Morning America"),
        ("lol", ""),
        ("Thanks, Jon!", "Jon"),
    ],
)
def test_strip_span(span: str, name: str) -> None:
    assert strip_span(span) == name


@pytest.mark.parametrize(
    "text", ["Glad", "Congrats", "Nah", "FYI", "Woohoo", "Wanna", "Lemme", "Tues", "Last Fri", "x"]
)
def test_no_names(text: str) -> None:
    assert not is_name(strip_span(text))


@pytest.mark.parametrize("text", ["Caroline", "June", "May Chen", "LGBTQ", "TikTok", "Rome"])
def test_names(text: str) -> None:
    assert is_name(text)


def test_weekdays_and_month_abbreviations_are_dates_full_months_may_be_names() -> None:
    assert is_date("Tues") and is_date("last Friday") and is_date("Sept")
    assert not is_date("June") and not is_date("Fri Kitchen")


def test_a_sentence_opener_written_lower_case_elsewhere_is_a_common_word() -> None:
    lower = lower_case_words(["I love to dance", "Dance is my go-to"])
    assert is_common_word("Dance", True, lower)
    assert not is_common_word("Dance", False, lower)  # mid-sentence: a name ("Dance Inc")
    assert not is_common_word("Oscar", True, lower)


def test_speakers_are_one_person_each_and_short_forms_resolve_to_them() -> None:
    speakers = SpeakerNames.of(["Caroline", "Melanie", " Jon ", None])
    assert speakers.find("Caroline") == "Caroline"
    assert speakers.find("Mel") == "Melanie"
    assert speakers.find("Jon") == "Jon"
    assert speakers.find("Me") is None  # too short to be a short form
    assert speakers.find("Oscar") is None
    assert speakers.find("Mell") == "Melanie"  # a typo of her name's beginning
    assert speakers.find("Mark") is None  # a name of its own, not a typo of "Melanie"
    assert SpeakerNames.of(["Robert", "Ann"]).find("Bob") == "Robert"
    assert SpeakerNames.of(["Robert", "Roberta"]).find("Rob") is None  # either of them
    mentions = [
        Mention("Bye Caroline", "PERSON"),
        Mention("Caroline", "OTHER"),
        Mention("ya, Melanie", "ORGANIZATION"),
        Mention("Glad", "PERSON"),
        Mention("Ed Sheeran's", "PERSON"),
    ]
    assert clean_mentions(mentions, speakers) == [
        Mention("Caroline", "PERSON"),
        Mention("Melanie", "PERSON"),
        Mention("Ed Sheeran", "PERSON"),
    ]


def test_local_extractor_mentions_are_clean_and_speakers_are_people() -> None:
    from datetime import UTC, datetime

    from memora.extraction.base import SourceItem
    from memora.extraction.local import LocalExtractor

    when = datetime(2023, 5, 8, tzinfo=UTC)
    turns = [
        ("Caroline", "Hey Mel! I went to a support group last Tues, it was powerful."),
        ("Melanie", "Bye Caroline! Glad you went. I love to dance with Oscar in Paris."),
        ("Caroline", "ya, Melanie, Dance is what I want to try. I read Ed Sheeran's book."),
        ("Melanie", "Startin' my biz was hard with the kids & work. Success is near!"),
    ]
    items = [SourceItem(i, text, None, when, who, {}) for i, (who, text) in enumerate(turns)]
    facts = LocalExtractor().extract("agent", items)
    names = {m.name: m.entity_type for f in facts for m in f.mentions or []}
    assert names["Caroline"] == "PERSON" and names["Melanie"] == "PERSON"
    assert not {"Bye Caroline", "ya, Melanie", "Mel", "Glad", "Dance", "Tues"} & set(names)
    assert "Ed Sheeran's" not in names and names["Ed Sheeran"] == "PERSON"
    # a g-dropped verb, a lower-case span, a sentence opener the tagger reads as a common noun
    assert not {"Startin", "kids & work", "the kids & work", "Success"} & set(names)
