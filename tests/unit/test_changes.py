"""Changes of state read from sentence structure (memora.lifecycle.changes) and the verdicts
rules.decide makes of them. Sentences here are not those of bench/data/changes_eval.jsonl."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from memora.lifecycle.changes import change, claims, speaker_of, subjects
from memora.lifecycle.rules import Decision, Statement, decide


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("Oskar lives in Ghent.", "Oskar relocated to Antwerp."),
        ("Oskar lives in Ghent.", "Oskar doesn't live in Ghent any more."),
        ("I work for Philips.", "I left Philips and joined ASML."),
        ("Wanda works at Lidl.", "Wanda resigned from Lidl."),
        ("Tariq works as a plumber.", "Tariq now works as an electrician."),
        ("Rosa is married.", "Rosa got divorced last year."),
        ("Ilse's favourite city is Rome.", "Ilse's favourite city is now Kyoto."),
        ("My email is old@mail.example.", "My email address is now new@mail.example."),
        ("Kemal's phone number is 555-7000.", "Kemal's phone number changed to 555-8000."),
        ("Esme drives a Mini.", "Esme sold her Mini and bought a Jeep."),
        ("Jamal is 44.", "Jamal turned 45."),
        ("Kira attends Elm School.", "Kira transferred to Birch Academy."),
        ("Nils is vegetarian.", "Nils stopped being vegetarian."),
        ("Mina's boss is Carla.", "Mina's new boss is Pablo."),
        ("Lars is a member of the choir.", "Lars is no longer a member of the choir."),
        ("Hugo lives in Metz.", "Hugo moved to Nancy and bought a piano."),  # compound
    ],
)
def test_changes_of_state_are_read(before: str, after: str) -> None:
    assert change(after, before) is not None, (claims(before), claims(after))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("Oskar lives in Ghent.", "Oskar's brother lives in Bruges."),  # someone else's
        ("Oskar lives in Ghent.", "Oskar visited Bruges in May."),  # a visit
        ("Oskar lives in Ghent.", "Oskar is thinking of moving to Bruges."),  # a plan
        ("Oskar lives in Ghent.", "Oskar will move to Bruges next year."),  # the future
        ("Oskar lives in Ghent.", "Oskar used to live in Bruges."),  # the past
        ("Oskar lives in Ghent.", "Oskar grew up in Bruges."),
        ("Wanda works at Lidl.", "Wanda worked at Aldi for years."),
        ("Tariq likes jazz.", "Tariq also likes techno."),  # an addition
        ("Esme has a cat.", "Esme has another cat."),
        ("Jamal is 44.", "Greta turned 45."),  # another person
        ("Ilse's favourite city is Rome.", "Ilse's favourite food is pizza."),  # another attribute
        ("Rosa is married.", "Rosa's sister got divorced."),
        ("Nils likes tea.", "Nils does not like coffee."),  # a plain negation: another fact
    ],
)
def test_near_misses_are_not_changes(before: str, after: str) -> None:
    assert change(after, before) is None, (claims(before), claims(after))


def test_first_person_is_the_speaker_and_pronouns_the_last_named_subject() -> None:
    assert speaker_of("Maya: I moved to Berlin!") == ("Maya", "I moved to Berlin!")
    assert speaker_of("Maya: Big news: I moved!") == ("Maya", "I moved!")  # a label left out
    assert speaker_of("Tom: 10:30 works for me") == ("Tom", "10:30 works for me")
    [moved] = claims("Maya: I moved to Berlin!")
    assert (moved.subject, moved.family, moved.value, moved.mode) == (
        "maya", "residence", "berlin", "change"
    )  # fmt: skip
    assert change("Maya: I moved to Berlin!", "Maya: I live in Lisbon.") is not None
    assert change("Maya: I moved to Berlin!", "Tom: I live in Lisbon.") is None
    assert change("I moved to Berlin.", "I live in Lisbon.") is not None  # "user"
    said = claims("Priya found work in Munich, so she lives there now.")
    assert any(c.subject == "priya" and c.value == "munich" for c in said)
    assert subjects("Maya: I moved to Berlin!") == ["maya"]


def test_the_old_value_negated_ends_it() -> None:
    ended = [c for c in claims("Priya moved to Berlin; she no longer lives in Lisbon.")]
    assert {(c.family, c.value, c.mode) for c in ended} >= {
        ("residence", "berlin", "change"),
        ("residence", "lisbon", "end"),
    }
    assert change("Priya no longer lives in Lisbon.", "Priya lives in Porto.") is None


def test_the_time_of_the_change_is_read_relative_to_the_statement() -> None:
    said = datetime(2025, 6, 10, tzinfo=UTC)
    old = Statement("Omar lives in Cairo.", id=uuid.uuid4(), similarity=0.6)
    verdict = decide(Statement("Omar moved to Doha last year.", at=said), [old])
    assert verdict.decision is Decision.SUPERSEDE and verdict.target == old.id
    assert verdict.effective_at == datetime(2024, 1, 1, tzinfo=UTC)
    assert verdict.certain
    absolute = decide(Statement("Omar moved to Doha in March 2024.", at=said), [old])
    assert absolute.effective_at == datetime(2024, 3, 1, tzinfo=UTC)
    undated = decide(Statement("Omar moved to Doha.", at=said), [old])
    assert undated.decision is Decision.SUPERSEDE and undated.effective_at is None


def test_uncertain_changes_are_left_to_the_llm() -> None:
    old = Statement("Beatriz is a waitress.", id=uuid.uuid4(), similarity=0.6)
    verdict = decide(Statement("Beatriz is a chef now."), [old])
    assert verdict.decision is Decision.SUPERSEDE and not verdict.certain
    assert decide(Statement("Beatriz is a chef."), [old]).decision is not Decision.SUPERSEDE
