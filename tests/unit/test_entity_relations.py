"""The entity relation reader (memora.lifecycle.entity_relations) on the labelled set
bench/data/entity_relations_eval.jsonl, and on sentences of its own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memora.lifecycle.entity_relations import Relation, read

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import entity_relations  # bench/ is not a package: found through the path above


def test_precision_and_recall_on_the_labelled_set() -> None:
    total, _ = entity_relations.score(entity_relations.load(entity_relations.DEFAULT_DATA))
    assert total.right + total.missed >= 100
    assert total.precision >= 0.9, total.errors
    assert total.recall >= 0.9, total.errors  # measured 0.911


@pytest.mark.parametrize(
    ("text", "relation"),
    [
        ("Noor: I live in Ghent these days.", Relation("noor", "lives_in", "ghent")),
        ("Priya's sister Meera teaches yoga.", Relation("priya", "sibling_of", "meera")),
        ("Abel is Ruth's father.", Relation("abel", "parent_of", "ruth")),
        ("Jo: my manager Tariq is great", Relation("tariq", "manages", "jo")),
        ("Ken quit Nintendo.", Relation("ken", "works_at", "nintendo", "end")),
        ("Jill: Bob and Alice got divorced", Relation("bob", "partner_of", "alice", "end")),
        ("Ines: I'm still at Nokia, sadly", Relation("ines", "works_at", "nokia")),
        ("Kim: my sister is Jane.", Relation("kim", "sibling_of", "jane")),
        (
            "Dina: I joined the Brooklyn Chess Club.",
            Relation("dina", "member_of", "brooklyn chess club", "change"),
        ),
        ("Tom: Jane and I got married in June!", Relation("tom", "partner_of", "jane", "change")),
        ("Farah: Dev reports to me now.", Relation("farah", "manages", "dev", "change")),
        (
            "Eva: Lukas is a nurse at the Vienna General Hospital.",
            Relation("lukas", "works_at", "vienna general hospital"),
        ),
        ("Ana: Tom is a consultant for Deloitte.", Relation("tom", "works_at", "deloitte")),
        (
            "Maya: I just accepted the offer from Northwind Robotics.",
            Relation("maya", "works_at", "northwind robotics", "change"),
        ),
        (
            "Ana: Tom landed an internship at Spotify!",
            Relation("tom", "works_at", "spotify", "change"),
        ),
        (  # a label before the statement is not its head
            "Jana: Family update: Pavel got the job at Skoda!",
            Relation("pavel", "works_at", "skoda", "change"),
        ),
    ],
)
def test_relations_are_read(text: str, relation: Relation) -> None:
    assert relation.key() in {r.key() for r in read(text) if r.mode == relation.mode}


@pytest.mark.parametrize(
    "text",
    [
        "Does Priya live in Lisbon?",
        "Tom: my ex-wife Jane is a nurse",
        "Noor: I might move to Ghent.",
        "My cousin works at Nintendo.",
        "Abel isn't Ruth's father.",
        "Tom: I moved Sarah's boxes to Berlin",
        "Maya's friend's sister Ana is a nurse.",  # Ana is not Maya's sister
        "Maya is at Google today for a meeting.",
        "Tom: my old boss is Dave.",
        "Maya joined Tom for lunch.",
        "Kim: Tom and Sue are getting married next year",
        "Ana: Tom is a tutor for Maria.",  # a role for a person: no employer
        "Ana: Tom was a consultant for Deloitte.",
        "Ana: I am a teacher at heart.",
        "Ana: I got the offer from Acme but turned it down.",  # an offer got, not taken
        "Ana: I might accept the offer from Acme.",
        "Ana: I did not take the job at Acme.",
        "Ana: I accepted the offer from Tom.",  # a person's offer
    ],
)
def test_no_relation_is_read(text: str) -> None:
    assert read(text) == ()


def test_symmetric_relations_are_one_whichever_way_said() -> None:
    a, b = Relation("sam", "sibling_of", "ana"), Relation("ana", "sibling_of", "sam")
    assert a.key() == b.key()
    assert Relation("sam", "manages", "ana").key() != Relation("ana", "manages", "sam").key()


def test_every_word_a_relation_is_read_from_passes_the_cue_gate() -> None:
    """The reader parses only texts `may_state` lets through: every relation word of the
    lexicon and of the ties (in its base form) must be one of its cues."""
    from memora.lifecycle import kinship, lexicon
    from memora.lifecycle.entity_relations import CUES

    words = {*kinship.NOUNS, *lexicon.STATES, *lexicon.CHANGES, *lexicon.ENDS}
    words |= {verb for verb, _ in lexicon.PHRASAL_ENDS} | set(lexicon.PARTNERS)
    words |= set(lexicon.INSTITUTIONS) | set(lexicon.GROUPS) | set(lexicon.RELATIONSHIP_WORDS)
    words -= {"drive", "follow", "turn", "sell", "trade", "replace", "promote", "retrain"}
    words -= {"single", "separated", "separate", "widowed", "primary", "high"}  # no relation
    missing = sorted(w for w in words if not CUES.match(w))
    assert missing == []
