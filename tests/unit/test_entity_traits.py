"""What a memory says of a person it names (memora.entities.traits): gender from titles, kin
words and pronouns that refer to the name, animal or human from the words beside it and from
speaking; nothing where the pronoun may be someone else's; compatibility by the evidence's
majority."""

from __future__ import annotations

import pytest

from memora.entities.traits import Reader, add, compatible


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Sam said she got her nursing licence.", "Sam", {"female", "human"}),
        ("Samuel said he starts at the fire station.", "Samuel", {"male", "human"}),
        ("My brother Alex lives in Denver.", "Alex", {"male", "human"}),
        ("Mrs. Taylor runs the library.", "Mrs. Taylor", {"female", "human"}),
        ("Uncle Jordan visited us at Easter.", "Jordan", {"male", "human"}),
        ("Our cat Luna caught a mouse.", "Luna", {"animal"}),
        ("We adopted a dog named Rocky.", "Rocky", {"animal"}),
        ("Bella from marketing emailed me the slides.", "Bella", {"human"}),
        ("Jamie and his dad went fishing.", "Jamie", {"male"}),
        ("Melanie took her kids camping.", "Melanie", {"female"}),
    ],
)
def test_what_a_memory_says_of_a_name(text: str, name: str, expected: set[str]) -> None:
    assert set(Reader().of(text, name, comparing=True)) == expected


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Melanie's mom said she would babysit.", "Melanie"),  # the mom's pronoun
        ("Tom told Anna she should apply for the job.", "Tom"),  # Anna's
        ("The vet said Oscar needs antibiotics.", "Oscar"),  # the vet speaks
        ("Alex fixed the bike this morning.", "Alex"),  # nothing said
    ],
)
def test_no_gender_where_the_pronoun_may_be_someone_elses(text: str, name: str) -> None:
    said = Reader().of(text, name, comparing=True)
    assert not ({"male", "female", "animal"} & set(said))


def test_human_cues_are_read_only_when_comparing() -> None:
    assert Reader().of("Charlie said the meeting moved.", "Charlie") == {}
    assert Reader().of("Charlie said the meeting moved.", "Charlie", comparing=True) == {"human": 1}


def test_compatibility_follows_the_evidence_majority() -> None:
    he = {"male": 3, "human": 2}
    assert not compatible(he, {"female": 1})
    assert compatible(he, {"male": 1}) and compatible(he, {}) and compatible({}, {"female": 1})
    assert compatible({"male": 2, "female": 2}, {"female": 1})  # evidence split: no verdict
    pet = {"animal": 1}
    assert not compatible(pet, {"human": 1}) and compatible(pet, {"female": 1})
    assert add(he, {"female": 1, "human": 1}) == {"male": 3, "female": 1, "human": 3}
