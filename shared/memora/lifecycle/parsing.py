"""Reading a dependency parse for lifecycle.changes: the value a token heads, a clause's
subjects (who "I", "she" or "my sister" is), its markers (a plan, the present tense, a date) and
the attribute nouns ("favourite band", "e-mail address"). Pure functions over spaCy tokens."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from memora.lifecycle.lexicon import (
    ATTRIBUTE_NOUNS,
    CHANGES,
    DROP,
    ENDS,
    FIRST_PERSON,
    FUTURE_MODALS,
    INSTITUTIONS,
    PLANS,
    SPELLING,
    STATES,
    THIRD_PERSON,
)
from memora.nlp.temporal import resolve_expression

if TYPE_CHECKING:
    from spacy.tokens import Token

Mode = Literal["state", "change", "end"]
# the dependencies that head a clause of their own
CLAUSE_DEPS = frozenset({"ROOT", "conj", "ccomp", "xcomp", "advcl", "pcomp", "parataxis"})


# ---------------------------------------------------------------------------------- values
def words_of(tokens: list[Token]) -> str:
    kept = [t.text.casefold() for t in tokens if t.text.casefold() not in DROP and not t.is_punct]
    return " ".join(kept).replace(" - ", "-").strip()


def phrase_of(token: Token) -> str:
    """The value a token heads: its subtree without determiners, possessives, relative clauses
    and trailing time phrases ("the Fiat last month" → "fiat")."""
    skip = {"relcl", "acl", "advcl", "npadvmod", "appos", "cc", "conj", "punct", "poss"}
    kept = [token]
    for child in token.children:
        if child.dep_ not in skip and child.ent_type_ not in {"DATE", "TIME"}:
            kept.extend(child.subtree)
    return words_of(sorted(kept, key=lambda t: t.i))


def value_of(token: Token) -> str | None:
    if token.lower_ in THIRD_PERSON | {"it", "there", "that", "this", "one"}:
        return None
    number = re.fullmatch(r"(\d+)(?:st|nd|rd|th)?", token.text)
    return number[1] if number else phrase_of(token) or None


def object_of(verb: Token, preps: str | None) -> Token | None:
    """The value a relation governs: its object, or the object of one of `preps`."""
    wanted = set(preps.split("|")) if preps else set()
    for child in verb.children:
        if preps is None and child.dep_ in {"dobj", "attr", "acomp", "oprd"}:
            return child
        if child.dep_ in {"prep", "agent"} and (not wanted or child.lower_ in wanted):
            for grand in child.children:
                dated = grand.ent_type_ in {"DATE", "TIME"} and child.lower_ in WHEN_PREPS
                if grand.dep_ in {"pobj", "pcomp"} and not dated:
                    return grand
    if preps is not None and not wanted:
        return None
    return None


WHEN_PREPS = frozenset({"in", "on", "since", "during", "until", "by", "before", "after"})


def values_match(ended: str | None, held: str | None) -> bool:
    """An ended value names the held one: every word of the shorter is in the longer."""
    if ended is None or held is None:
        return True
    a, b = set(ended.split()), set(held.split())
    return bool(a) and bool(b) and (a <= b or b <= a)


# -------------------------------------------------------------------------------- subjects
class ClauseContext:
    def __init__(self, speaker: str | None, at: datetime | None) -> None:
        self.speaker = speaker.casefold() if speaker else None
        self.at = at
        self.last: str | None = None  # the last named subject, for he/she/they

    def person(self, token: Token) -> str | None:
        low = token.lower_
        if low in FIRST_PERSON:
            return self.speaker or "user"
        if low in THIRD_PERSON:
            return self.last
        if low in {"you", "your", "it", "there", "this", "that"}:
            return None
        for child in token.children:  # "my daughter Elsa", "my sister-in-law Rosa"
            if child.dep_ in {"appos", "compound"} and child.pos_ == "PROPN":
                return self._name(child)
        if (
            token.pos_ == "PROPN"
            or token.ent_type_ in {"PERSON", "ORG", "GPE", "NORP"}
            or (token.is_title and not any(c.dep_ in {"det", "poss"} for c in token.children))
        ):
            return self._name(token)
        owner = next((c for c in token.children if c.dep_ == "poss"), None)
        if owner is not None:
            whose = self.person(owner)
            return f"{whose}'s {token.lemma_.casefold()}" if whose else None
        return "user" if low == "user" else None

    def _name(self, token: Token) -> str:
        parts = [c for c in token.children if c.dep_ == "compound" and c.is_title]
        if token.dep_ == "compound" and token.head.is_title:
            return self._name(token.head)
        return " ".join(t.text for t in [*parts, token]).casefold()


VERB_LEMMAS = frozenset({"study", "marry", "divorce", "date", "quit"})


def lemma_of(token: Token) -> str:
    """The verb's lemma, also where the tagger took it for a plural noun ("Greta lives":
    greta/NN life/NNS)."""
    if token.tag_ == "NNS":
        low = token.lower_
        for form in (low[:-3] + "y", low[:-1], low[:-2]):
            if form in STATES or form in CHANGES or form in ENDS or form in VERB_LEMMAS:
                return form
    return str(token.lemma_).casefold()


def is_noun_verb(token: Token) -> bool:
    """A relation verb the tagger took for a noun after a name ("Greta/ROOT lives/dobj")."""
    return (
        token.tag_ == "NNS"
        and lemma_of(token) != token.lemma_.casefold()
        and (token.dep_ in CLAUSE_DEPS or token.head.is_title)
    )


def subjects_of(verb: Token, ctx: ClauseContext) -> list[str]:
    """The verb's subjects (both of "Samir and Leila"), inherited along conjunctions and
    complements ("Priya moved to Berlin and started working at SAP")."""
    head = verb
    for _ in range(4):
        found = [c for c in head.children if c.dep_ in {"nsubj", "nsubjpass"}] or [
            c for a in head.children if a.dep_ in {"aux", "auxpass"} for c in a.children
            if c.dep_ in {"nsubj", "nsubjpass"}
        ]  # fmt: skip
        if not found and is_noun_verb(head) and head.dep_ != "ROOT" and head.head.is_title:
            found = [head.head]  # "Greta/ROOT lives/dobj in Oslo"
        if not found:  # a name the parser hung on the verb as a modifier ("Zoltan/amod works")
            found = [
                c for c in head.lefts
                if c.dep_ in {"compound", "amod", "advmod", "npadvmod", "nmod", "dep"}
                and (c.pos_ == "PROPN" or (c.is_title and c.tag_ in {"JJ", "NN"}))
            ]  # fmt: skip
        if found:
            subj = found[0]
            owner = owner_of(subj)
            if verb.lemma_ == "change" and attribute_noun(subj) and owner is not None:
                subj = owner
            tokens = [subj, *(c for c in subj.children if c.dep_ == "conj")]
            return [p for p in (ctx.person(t) for t in tokens) if p]
        if head.dep_ not in {"conj", "xcomp", "ccomp", "advcl", "pcomp"} or head.head.i == head.i:
            break
        head = head.head
    return [ctx.speaker] if ctx.speaker and head.dep_ == "ROOT" else []


# -------------------------------------------------------------------------------- markers
def is_hypothetical(verb: Token) -> bool:
    """A plan, wish or possibility: a future modal, "going to", a verb of planning above it, or
    a future date ("next month")."""
    for t in [verb, *verb.ancestors]:
        if any(c.dep_ == "aux" and c.lower_ in FUTURE_MODALS for c in t.children):
            return True
        if t.i != verb.i and verb.dep_ != "ROOT" and (t.lemma_ in PLANS or t.lower_[:-1] in PLANS):
            return True
        if t.dep_ not in {"xcomp", "pcomp", "ccomp", "advcl", "conj"}:
            break
    return any(
        t.ent_type_ in {"DATE", "TIME"} and t.lower_ in {"next", "tomorrow", "soon", "later"}
        for t in verb.subtree
        if verb.i in {t.head.i, t.head.head.i}
    )


def is_present(verb: Token) -> bool:
    """A state said in the present tense (lives, is living, has been living, is based)."""
    aux = [c for c in verb.children if c.dep_ in {"aux", "auxpass"}]
    if verb.tag_ in {"VBZ", "VBP", "NNS"}:  # NNS: "Abby volunteers", a verb tagged as a noun
        return True
    return bool(aux) and aux[0].tag_ in {"VBZ", "VBP"} and verb.tag_ in {"VBG", "VBN"}


def adverbs_of(verb: Token) -> set[str]:
    return {c.lower_ for c in verb.children if c.dep_ in {"advmod", "neg", "npadvmod", "cc"}} | {
        g.lower_ for c in verb.children if c.dep_ == "advmod" for g in c.children
    }


def date_of(verb: Token, ctx: ClauseContext) -> datetime | None:
    if ctx.at is None:
        return None
    for ent in verb.doc.ents:
        near = {verb.i, *(t.i for t in verb.children)}
        if ent.label_ in {"DATE", "TIME"} and ent.root.head.i in near:
            found = resolve_expression(ent.text, ctx.at)
            if found:
                return found[0]
    return None


@dataclass(frozen=True)
class Found:
    family: str
    value: str | None
    mode: Mode = "state"
    certain: bool = True


def attribute_noun(noun: Token) -> str | None:
    """The family a noun names ("favourite band", "e-mail address", "team lead"), if any."""
    lemma = noun.lemma_.casefold()
    mods = {c.lower_ for c in noun.children if c.dep_ in {"amod", "compound", "nmod"}}
    if mods & {"favourite", "favorite"}:
        return f"favourite {SPELLING.get(lemma, lemma)}"
    if lemma == "address":
        return "email" if mods & {"e", "mail", "email", "e-mail"} else "residence"
    if lemma == "lead" and "team" not in mods:
        return None
    return ATTRIBUTE_NOUNS.get(lemma)


def given_value(noun: Token) -> str | None:
    """The value given beside a noun: "a new supervisor, Dr Novak", "a new number: 555-3030"."""
    for child in noun.children:
        if child.dep_ in {"appos", "npadvmod", "dobj", "attr"}:
            return value_of(child)
    after = noun.doc[noun.i + 1 : noun.sent.end]
    if len(after) > 1 and after[0].text == ":":
        return words_of(list(after[1:])) or None
    return None


def complement_of(verb: Token) -> Token | None:
    return next((c for c in verb.children if c.dep_ in {"attr", "acomp", "oprd"}), None)


def age_of(token: Token) -> str | None:
    for t in token.subtree:
        number = re.fullmatch(r"(\d+)(?:st|nd|rd|th)?", t.text)
        if number:
            return number[1]
        if t.like_num:
            return t.lower_
    return None


def place_kind(token: Token) -> str:
    """Where a move leads: an institution (school, employer) or a place to live."""
    if token.lemma_.casefold() in INSTITUTIONS or any(
        t.lower_ in INSTITUTIONS for t in token.subtree
    ):
        return "school"
    return "affiliation" if token.ent_type_ in {"ORG", "FAC"} else "residence"


def owner_of(noun: Token) -> Token | None:
    """Whose a noun is: "Jin's band", "my e-mail" (the tagger splits e-mail in three)."""
    for t in [noun, *(c for c in noun.children if c.dep_ == "compound")]:
        for c in t.children:
            if c.dep_ == "poss":
                return c
    siblings = [c for c in noun.head.children if c.dep_ == noun.dep_ and c.i < noun.i]
    return next((c for s in siblings for c in s.children if c.dep_ == "poss"), None)


def contact_of(verb: Token, family: str) -> str | None:
    """An e-mail address or a phone number after the verb (the tagger splits both)."""
    rest = verb.doc[verb.i + 1 : verb.sent.end]
    if family == "email":
        return next((t.lower_ for t in rest if t.like_email), None)
    digits, started = "", False
    for t in rest:
        if re.fullmatch(r"\+?[\d-]+", t.text):
            digits, started = digits + t.text.replace("-", ""), True
        elif started:
            break
    return digits or None


def place_named_before(verb: Token) -> str | None:
    places = [e for e in verb.doc.ents if e.label_ in {"GPE", "LOC"} and e.end <= verb.i]
    return places[-1].text.casefold() if places else None
