"""Nicknames and short forms of people's names (memora.nlp.person_names)."""

from __future__ import annotations

import pytest

from memora.nlp.names import normalize_name
from memora.nlp.person_names import PersonName, lookup_keys, may_be_same_person


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Bob Chen", "Robert Chen"),
        ("Robert", "Bob"),
        ("Liz", "Elizabeth"),
        ("Bobby", "Robert Chen"),
        ("Alice C.", "Alice Chen"),
        ("J. Rivera", "Juan Rivera"),
        ("Dr. Chen", "Alice Chen"),
        ("Caroline", "Caroline Hayes"),
        ("Liz M.", "Elizabeth Morgan"),
    ],
)
def test_names_that_may_be_one_person(a: str, b: str) -> None:
    assert may_be_same_person(normalize_name(a), normalize_name(b))
    assert may_be_same_person(normalize_name(b), normalize_name(a))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Chris Evans", "Chris Martin"),
        ("Robert Chen", "Roberta Chen"),
        ("Mark Johnson", "Mike Johnson"),
        ("Alice Chen", "Alice Cheng"),
        ("Bob Chen", "Robert Miller"),
        ("A. C.", "Alice Chen"),  # initials alone say too little
        ("Alice", "Alice"),  # the same name is the exact matcher's, not this rule's
        ("Dr. Chen", "Chen Wu"),  # a surname against a given name
        ("Jordan 2", "Jordan"),
    ],
)
def test_names_that_cannot_be_one_person(a: str, b: str) -> None:
    assert not may_be_same_person(normalize_name(a), normalize_name(b))


def test_parse_and_lookup_keys() -> None:
    assert PersonName.parse("dr chen") == PersonName(None, "chen")
    assert PersonName.parse("alice van der berg") == PersonName("alice", "berg")
    firsts, lasts = lookup_keys("bob chen")
    assert {"bob", "robert", "bobby"} <= set(firsts) and lasts == ["chen"]
    firsts, lasts = lookup_keys("alice c")
    assert "alice" in firsts and lasts == []  # an initial is no key
