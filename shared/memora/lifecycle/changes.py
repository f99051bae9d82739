"""Changes of state read from a sentence's structure (spaCy's dependency parse and entities).

A statement yields claims: who (`subject`), which attribute (`family`), what value, and how it is
said (`mode`): a present state ("Priya lives in Lisbon"), a change ("Priya moved to Berlin", "I
got promoted to manager", "Jin's favourite band is now Muse") or an end, the old value negated
or left ("she no longer lives in Lisbon", "Daniel left Deloitte", "Sean sold his Ford").

The attribute comes from the relation's lemma (the verb, or the noun a copula describes) mapped to
a family by a small lexicon of relation words; the value is the complement the relation governs.
Families one value at a time holds (where someone lives, works, studies; their occupation,
relationship status, favourites, e-mail, phone, car, age, diet, manager) are replaced by a new
value; any other relation ("plays for", "owns", "is a member of") only by its explicit end.

Never a change: attributes of someone else ("Priya's sister lives in Berlin": the subject is
"priya's sister"), visits and plans (no relation word; modal, future or "planning to"), the past
("used to", "grew up", a state verb in the past tense), additions ("also", "too", "another").
First person is the speaker of a turn ("Maya: I moved…") or "user"; he/she/they the statement's
last named subject.

The parse is read by lifecycle.parsing (values, subjects, markers) and lifecycle.relations (what
a copula or another verb sets); this module makes the claims and compares them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from memora.lifecycle.lexicon import ADDITIVE, GROUPED, NOW, RELATIONSHIP_WORDS, SINGLE, SPEAKER
from memora.lifecycle.parsing import (
    CLAUSE_DEPS,
    ClauseContext,
    Mode,
    adverbs_of,
    complement_of,
    date_of,
    is_hypothetical,
    is_noun_verb,
    is_present,
    lemma_of,
    subjects_of,
    values_match,
)
from memora.lifecycle.relations import read_copula, read_verb
from memora.nlp.language import structure

if TYPE_CHECKING:
    from spacy.tokens import Token

__all__ = ["Change", "Claim", "Mode", "change", "claims", "conflicts", "speaker_of", "subjects"]


@dataclass(frozen=True)
class Claim:
    subject: str  # a casefolded name, "user", "<owner>'s <relation>"
    family: str
    value: str | None  # None: the end of whatever value it had ("retired", "changed schools")
    mode: Mode = "state"
    certain: bool = True  # False: the LLM, when configured, decides
    additive: bool = False  # "also", "another": one more value, never a replacement
    effective_at: datetime | None = None


@dataclass(frozen=True)
class Change:
    """Why `new` replaces `old`: the claims that conflict."""

    new: Claim
    old: Claim

    @property
    def reason(self) -> str:
        n = self.new
        what = f"no longer {self.old.value!r}" if n.mode == "end" else f"now {n.value!r}"
        return f"{n.family} of {n.subject} changed: {what}"

    @property
    def certain(self) -> bool:
        return self.new.certain and self.old.certain


def speaker_of(text: str) -> tuple[str | None, str]:
    """("Maya", "I moved to Berlin!") from a conversation turn "Maya: I moved to Berlin!"; a
    short label before the statement ("Family update: Pavel got the job at Skoda") is left
    out of it too, as the parser would take the label for its head."""
    m = SPEAKER.match(text)
    speaker, body = (m[1], text[m.end() :]) if m else (None, text)
    return speaker, _LABEL.sub("", body, count=1)


# "Family update: ", "Big news: ": a capitalised word and at most two more, then ": "
_LABEL = re.compile(r"^[A-Z][\w'-]*(?: [\w'-]+){0,2}:\s+(?=\S)")


# ---------------------------------------------------------------------------------- claims
_STARTS = frozenset({"start", "begin"})
_STOPS = frozenset({"stop", "quit", "give", "drop"})


def _governed(verb: Token) -> bool:
    """A complement its governing verb reads itself ("started working", "gave up being")."""
    return verb.dep_ in {"xcomp", "pcomp", "dobj"} and verb.head.lemma_ in _STARTS | _STOPS


def _clause(verb: Token, ctx: ClauseContext, mode: Mode | None = None) -> list[Claim]:
    if is_hypothetical(verb) or (verb.dep_ == "xcomp" and verb.head.lemma_ == "use"):
        return []  # a plan, a wish; "used to live"
    adverbs = adverbs_of(verb)
    if any(c.dep_ == "neg" for c in verb.children) or {"no", "longer"} <= adverbs:
        if not adverbs & {"longer", "anymore", "more"}:
            return []  # a plain negation is another fact, not a change
        mode = "end"
    mode = mode or ("change" if adverbs & NOW else "state")
    lemma = lemma_of(verb)
    inner = next(
        (c for c in verb.children if c.dep_ in {"xcomp", "pcomp", "dobj"} and c.tag_ == "VBG"),
        None,
    ) or next((c for c in verb.children if c.dep_ == "xcomp"), None)
    if inner is None:
        inner = next((c for c in verb.children if c.dep_ == "prep" and verb.lemma_ == "give"
                      for c in c.children if c.tag_ == "VBG"), None)  # fmt: skip
    if inner is not None and lemma in _STARTS | _STOPS:
        return _clause(inner, ctx, "change" if lemma in _STARTS else "end")
    if lemma in {"be", "become"} or (lemma in {"get", "go"} and complement_of(verb) is not None):
        copula_mode: Mode = "change" if lemma != "be" and mode == "state" else mode
        if lemma == "be" and mode == "state" and not is_present(verb):
            return []  # a past state ("was married for twelve years")
        subjects, found = read_copula(verb, copula_mode, ctx)
    else:
        if lemma in RELATIONSHIP_WORDS and any(
            c.dep_ == "auxpass" and c.tag_ == "VBD" and c.lemma_ != "get" for c in verb.children
        ):
            return []
        subjects, found = subjects_of(verb, ctx), read_verb(verb, mode, ctx)
    objects = [c for c in verb.children if c.dep_ in {"dobj", "attr"}]
    additive = bool(adverbs & ADDITIVE) or any(
        t.lower_ in ADDITIVE for o in objects for t in o.children
    )
    when = date_of(verb, ctx)
    return [
        Claim(who, f.family, f.value, f.mode, f.certain, additive, when)
        for who in subjects
        for f in found
        if f.value is not None or f.mode == "end"
    ]


@lru_cache(maxsize=8192)
def claims(text: str, at: datetime | None = None) -> tuple[Claim, ...]:
    """Every attribute claim a statement makes, clause by clause. `at`: when it was said (dates
    the change: "in March", "last year")."""
    speaker, body = speaker_of(text)
    ctx = ClauseContext(speaker, at)
    found: list[Claim] = []
    for token in structure(body):
        verb = token.pos_ in {"VERB", "AUX"} or (token.dep_ == "ROOT" and token.tag_ != "NN")
        if ((verb and token.dep_ in CLAUSE_DEPS) or is_noun_verb(token)) and not _governed(token):
            made = _clause(token, ctx)
            found.extend(made)
            named = [c.subject for c in made if c.subject not in {"user", ctx.speaker}]
            if named and "'s " not in named[0]:
                ctx.last = named[0]
            elif ctx.last is None:
                subj = next((c for c in token.children if c.dep_ == "nsubj"), None)
                if subj is not None and subj.pos_ == "PROPN":
                    ctx.last = ctx.person(subj)
    return tuple(found)


def _families(family: str) -> frozenset[str]:
    return GROUPED.get(family, frozenset({family}))


def conflicts(new: Claim, old: Claim) -> bool:
    """Whether `new` replaces `old`: the same subject and attribute, and either the old value
    ended or, for an attribute one value at a time holds, another value."""
    if new.subject != old.subject or new.additive or old.mode == "end":
        return False
    if "any" not in {new.family, old.family} and not _families(new.family) & _families(old.family):
        return False
    if new.mode == "end":
        if new.family == "any" and new.value is None:
            return False
        return old.value is not None and values_match(new.value, old.value)
    if new.value is None or old.value is None or new.value == old.value:
        return False
    single = {f for f in _families(new.family) & _families(old.family)
              if f in SINGLE or f.startswith("favourite ")}  # fmt: skip
    if not single or new.family == "any":
        return False
    return not ("role" in {new.family, old.family} and new.mode != "change")


def change(new_text: str, old_text: str, at: datetime | None = None) -> Change | None:
    """The first claim of `new_text` that replaces one of `old_text`, if any."""
    olds = claims(old_text)
    for n in claims(new_text, at):
        for o in olds:
            if conflicts(n, o):
                return Change(n, o)
    return None


def subjects(text: str) -> list[str]:
    """The named subjects of a statement's claims (to look up their earlier values)."""
    speaker, _ = speaker_of(text)
    names = [c.subject for c in claims(text) if "'s " not in c.subject and c.subject != "user"]
    return list(dict.fromkeys([*names, *([speaker.casefold()] if speaker else [])]))
