"""Query expansion for the entity retriever, and the entity-aware semantic signal."""

from __future__ import annotations

import pytest

from memora.retrieval.expansion import phrases, without_names
from memora.retrieval.fusion import entity_aware_similarity
from memora.retrieval.question import EVERY_RELATION, AnswerType, answer_type, relation_path


def test_phrases_are_runs_of_capitalised_words_normalised_like_entity_names() -> None:
    found = phrases("What did Melanie's friend Anna Lee read?")
    assert "melanie" in found and "anna lee" in found and "anna" in found and "lee" in found
    assert "what" in found  # the first word is capitalised too; no entity is called that
    assert "friend" not in found and "read" not in found and "did melanie" not in found


def test_an_all_lower_case_query_offers_every_run() -> None:
    assert phrases("where did jon travel") == [
        "where", "did", "jon", "travel", "where did", "did jon", "jon travel",
        "where did jon", "did jon travel",
    ]  # fmt: skip
    assert phrases("?!") == []


def test_without_names_drops_names_and_their_possessive_whole_words_only() -> None:
    assert without_names("What do Melanie's kids like?", ["melanie"]) == "What do kids like?"
    assert without_names("Did Anna Lee meet Annabel?", ["anna lee", "anna"]) == (
        "Did meet Annabel?"
    )
    # nothing but the name left: the query as it is
    assert without_names("Melanie?", ["melanie"]) == "Melanie?"


@pytest.mark.parametrize(
    ("mode", "names_entity", "expected"),
    [
        ("query", True, 0.8),
        ("mentions", True, 0.5),
        ("mentions", False, 0.8),
    ],
)
def test_entity_aware_similarity(mode: str, names_entity: bool, expected: float) -> None:
    assert entity_aware_similarity(0.8, 0.5, names_entity, mode) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Where does Maya work?", AnswerType(frozenset({"LOCATION", "ORGANIZATION"}))),
        ("who is Luis married to", AnswerType(frozenset({"PERSON", "ORGANIZATION"}))),
        ("Whose dog is Biscuit?", AnswerType(frozenset({"PERSON", "ORGANIZATION"}))),
        ("When did Caroline go to the support group?", AnswerType(time=True)),
        (
            "When and where did they meet?",
            AnswerType(frozenset({"LOCATION", "ORGANIZATION"}), time=True),
        ),
        ("What does Amara do on weekends?", AnswerType()),
        ("Somewhere nice for a holiday", AnswerType()),  # whole words only
    ],
)
def test_the_question_word_says_what_kind_of_thing_answers(
    query: str, expected: AnswerType
) -> None:
    assert answer_type(query) == expected
    assert bool(answer_type(query)) == (expected != AnswerType())


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Where does Maya work?", [{"works_at"}]),
        ("Where does Marek's girlfriend work?", [{"partner_of"}, {"works_at"}]),
        ("Who is Lucia's colleague?", [{"colleague_of"}]),
        (
            "Where does Farah's sister's husband live?",
            [{"sibling_of"}, {"partner_of"}, {"lives_in"}],
        ),
        ("Who does Farah manage, and where does she live?", [{"manages", "lives_in"}]),
        ("What did Priya's dog eat?", []),  # a possessive that is no relation
        ("What did Melanie paint last summer?", []),
        ("When did Caroline go to the support group?", []),  # "group" says too little
        ("Who is Tereza?", [set(EVERY_RELATION)]),  # who someone is: all they are to others
        ("Who was at the party?", [set(EVERY_RELATION)]),
    ],
)
def test_a_question_walks_the_relations_its_possessives_and_words_name(
    query: str, expected: list[set[str]]
) -> None:
    assert [set(hop) for hop in relation_path(query)] == expected
