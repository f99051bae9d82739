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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from memora.lifecycle.lexicon import (
    ADDITIVE,
    ATTRIBUTE_NOUNS,
    CHANGES,
    DIET_WORDS,
    DROP,
    ENDS,
    FIRST_PERSON,
    FUTURE_MODALS,
    GROUPED,
    GROUPS,
    INSTITUTIONS,
    NOW,
    PARTNERS,
    PHRASAL_ENDS,
    PLANS,
    RELATIONSHIP_WORDS,
    SINGLE,
    SPEAKER,
    SPELLING,
    STATES,
    THIRD_PERSON,
)
from memora.nlp.language import load_parser
from memora.nlp.temporal import resolve_expression

if TYPE_CHECKING:
    from spacy.tokens import Token

Mode = Literal["state", "change", "end"]


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
    """("Maya", "I moved to Berlin!") from a conversation turn "Maya: I moved to Berlin!"."""
    m = SPEAKER.match(text)
    return (m[1], text[m.end() :]) if m else (None, text)


# ---------------------------------------------------------------------------------- values
def _words(tokens: list[Token]) -> str:
    kept = [t.text.casefold() for t in tokens if t.text.casefold() not in DROP and not t.is_punct]
    return " ".join(kept).replace(" - ", "-").strip()


def _phrase(token: Token) -> str:
    """The value a token heads: its subtree without determiners, possessives, relative clauses
    and trailing time phrases ("the Fiat last month" → "fiat")."""
    skip = {"relcl", "acl", "advcl", "npadvmod", "appos", "cc", "conj", "punct", "poss"}
    kept = [token]
    for child in token.children:
        if child.dep_ not in skip and child.ent_type_ not in {"DATE", "TIME"}:
            kept.extend(child.subtree)
    return _words(sorted(kept, key=lambda t: t.i))


def _value(token: Token) -> str | None:
    if token.lower_ in THIRD_PERSON | {"it", "there", "that", "this", "one"}:
        return None
    number = re.fullmatch(r"(\d+)(?:st|nd|rd|th)?", token.text)
    return number[1] if number else _phrase(token) or None


def _object(verb: Token, preps: str | None) -> Token | None:
    """The value a relation governs: its object, or the object of one of `preps`."""
    wanted = set(preps.split("|")) if preps else set()
    for child in verb.children:
        if preps is None and child.dep_ in {"dobj", "attr", "acomp", "oprd"}:
            return child
        if child.dep_ in {"prep", "agent"} and (not wanted or child.lower_ in wanted):
            for grand in child.children:
                dated = grand.ent_type_ in {"DATE", "TIME"} and child.lower_ in _WHEN
                if grand.dep_ in {"pobj", "pcomp"} and not dated:
                    return grand
    if preps is not None and not wanted:
        return None
    return None


_WHEN = frozenset({"in", "on", "since", "during", "until", "by", "before", "after"})


def values_match(ended: str | None, held: str | None) -> bool:
    """An ended value names the held one: every word of the shorter is in the longer."""
    if ended is None or held is None:
        return True
    a, b = set(ended.split()), set(held.split())
    return bool(a) and bool(b) and (a <= b or b <= a)


# -------------------------------------------------------------------------------- subjects
class _Context:
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


_VERBS = frozenset({"study", "marry", "divorce", "date", "quit"})


def _lemma(token: Token) -> str:
    """The verb's lemma, also where the tagger took it for a plural noun ("Greta lives":
    greta/NN life/NNS)."""
    if token.tag_ == "NNS":
        low = token.lower_
        for form in (low[:-3] + "y", low[:-1], low[:-2]):
            if form in STATES or form in CHANGES or form in ENDS or form in _VERBS:
                return form
    return str(token.lemma_).casefold()


def _noun_verb(token: Token) -> bool:
    """A relation verb the tagger took for a noun after a name ("Greta/ROOT lives/dobj")."""
    return (
        token.tag_ == "NNS"
        and _lemma(token) != token.lemma_.casefold()
        and (token.dep_ in _CLAUSES or token.head.is_title)
    )


def _subjects(verb: Token, ctx: _Context) -> list[str]:
    """The verb's subjects (both of "Samir and Leila"), inherited along conjunctions and
    complements ("Priya moved to Berlin and started working at SAP")."""
    head = verb
    for _ in range(4):
        found = [c for c in head.children if c.dep_ in {"nsubj", "nsubjpass"}] or [
            c for a in head.children if a.dep_ in {"aux", "auxpass"} for c in a.children
            if c.dep_ in {"nsubj", "nsubjpass"}
        ]  # fmt: skip
        if not found and _noun_verb(head) and head.dep_ != "ROOT" and head.head.is_title:
            found = [head.head]  # "Greta/ROOT lives/dobj in Oslo"
        if not found:  # a name the parser hung on the verb as a modifier ("Zoltan/amod works")
            found = [
                c for c in head.lefts
                if c.dep_ in {"compound", "amod", "advmod", "npadvmod", "nmod", "dep"}
                and (c.pos_ == "PROPN" or (c.is_title and c.tag_ in {"JJ", "NN"}))
            ]  # fmt: skip
        if found:
            subj = found[0]
            owner = _owner(subj)
            if verb.lemma_ == "change" and _attribute_noun(subj) and owner is not None:
                subj = owner
            tokens = [subj, *(c for c in subj.children if c.dep_ == "conj")]
            return [p for p in (ctx.person(t) for t in tokens) if p]
        if head.dep_ not in {"conj", "xcomp", "ccomp", "advcl", "pcomp"} or head.head.i == head.i:
            break
        head = head.head
    return [ctx.speaker] if ctx.speaker and head.dep_ == "ROOT" else []


# -------------------------------------------------------------------------------- markers
def _hypothetical(verb: Token) -> bool:
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


def _present(verb: Token) -> bool:
    """A state said in the present tense (lives, is living, has been living, is based)."""
    aux = [c for c in verb.children if c.dep_ in {"aux", "auxpass"}]
    if verb.tag_ in {"VBZ", "VBP", "NNS"}:  # NNS: "Abby volunteers", a verb tagged as a noun
        return True
    return bool(aux) and aux[0].tag_ in {"VBZ", "VBP"} and verb.tag_ in {"VBG", "VBN"}


def _adverbs(verb: Token) -> set[str]:
    return {c.lower_ for c in verb.children if c.dep_ in {"advmod", "neg", "npadvmod", "cc"}} | {
        g.lower_ for c in verb.children if c.dep_ == "advmod" for g in c.children
    }


def _when(verb: Token, ctx: _Context) -> datetime | None:
    if ctx.at is None:
        return None
    for ent in verb.doc.ents:
        near = {verb.i, *(t.i for t in verb.children)}
        if ent.label_ in {"DATE", "TIME"} and ent.root.head.i in near:
            found = resolve_expression(ent.text, ctx.at)
            if found:
                return found[0]
    return None


# -------------------------------------------------------------------------------- clauses
@dataclass(frozen=True)
class _Found:
    family: str
    value: str | None
    mode: Mode = "state"
    certain: bool = True


def _attribute_noun(noun: Token) -> str | None:
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


def _given(noun: Token) -> str | None:
    """The value given beside a noun: "a new supervisor, Dr Novak", "a new number: 555-3030"."""
    for child in noun.children:
        if child.dep_ in {"appos", "npadvmod", "dobj", "attr"}:
            return _value(child)
    after = noun.doc[noun.i + 1 : noun.sent.end]
    if len(after) > 1 and after[0].text == ":":
        return _words(list(after[1:])) or None
    return None


def _complement(verb: Token) -> Token | None:
    return next((c for c in verb.children if c.dep_ in {"attr", "acomp", "oprd"}), None)


def _age(token: Token) -> str | None:
    for t in token.subtree:
        number = re.fullmatch(r"(\d+)(?:st|nd|rd|th)?", t.text)
        if number:
            return number[1]
        if t.like_num:
            return t.lower_
    return None


def _copula(verb: Token, mode: Mode, ctx: _Context) -> tuple[list[str], list[_Found]]:
    """be / become / get / go: "X's favourite band is Muse", "Omar is 30", "Hannah got engaged",
    "Raj is no longer Emma's manager", "Beatriz is a waitress"."""
    nearest = [c for c in reversed(list(verb.lefts)) if c.dep_ in {"nsubj", "nsubjpass"}]
    # the subject nearest the verb, unless a time phrase ("my favourite colour these days")
    subj = next((c for c in nearest if c.ent_type_ not in {"DATE", "TIME"}), None) or next(
        iter(nearest), None
    )
    comp = _complement(verb)
    if subj is not None and (family := _attribute_noun(subj)):
        owner = _owner(subj)
        whose = ctx.person(owner) if owner is not None else None
        value = _value(comp) if comp is not None else None
        if family in {"email", "phone"}:
            value = _contact(verb, family)
        if value is None:
            place = _object(verb, "in|at")
            value = _value(place) if place is not None else None
        fresh = any(c.lower_ == "new" for c in subj.children)
        return ([whose] if whose else []), [_Found(family, value, "change" if fresh else mode)]
    subjects = _subjects(verb, ctx)
    if comp is None:
        place = _object(verb, "in")
        if place is not None and place.lemma_ == "relationship":
            return subjects, [_Found("relationship_status", "in a relationship", mode)]
        school = _object(verb, "at")
        if school is not None and _place(school) == "school":
            return subjects, [_Found("school", _value(school), mode)]
        return subjects, []
    word = comp.lower_
    if word in RELATIONSHIP_WORDS or comp.lemma_ in RELATIONSHIP_WORDS:
        status = RELATIONSHIP_WORDS.get(word) or RELATIONSHIP_WORDS[comp.lemma_]
        return subjects, [_Found("relationship_status", status, mode)]
    if word in DIET_WORDS:
        return subjects, [_Found("diet", word, mode)]
    if verb.lemma_ == "go":
        return subjects, []
    if (family := _attribute_noun(comp)) and any(c.dep_ == "poss" for c in comp.children):
        owner = next(c for c in comp.children if c.dep_ == "poss")
        whose = ctx.person(owner)
        named = [_value(s) for s in verb.children if s.dep_ == "nsubj"]
        return ([whose] if whose else []), [_Found(family, named[0] if named else None, mode)]
    age = _age(comp)
    if age is not None and (comp.pos_ in {"NUM", "ADJ"} or comp.lemma_ == "year"):
        return subjects, [_Found("age", age, mode)]
    if comp.pos_ in {"NOUN", "PROPN"} and comp.pos_ != "PROPN":
        return subjects, [_Found("role", _value(comp), mode, certain=False)]
    return subjects, []


def _place(token: Token) -> str:
    """Where a move leads: an institution (school, employer) or a place to live."""
    if token.lemma_.casefold() in INSTITUTIONS or any(
        t.lower_ in INSTITUTIONS for t in token.subtree
    ):
        return "school"
    return "affiliation" if token.ent_type_ in {"ORG", "FAC"} else "residence"


def _owner(noun: Token) -> Token | None:
    """Whose a noun is: "Jin's band", "my e-mail" (the tagger splits e-mail in three)."""
    for t in [noun, *(c for c in noun.children if c.dep_ == "compound")]:
        for c in t.children:
            if c.dep_ == "poss":
                return c
    siblings = [c for c in noun.head.children if c.dep_ == noun.dep_ and c.i < noun.i]
    return next((c for s in siblings for c in s.children if c.dep_ == "poss"), None)


def _contact(verb: Token, family: str) -> str | None:
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


def _there(verb: Token) -> str | None:
    places = [e for e in verb.doc.ents if e.label_ in {"GPE", "LOC"} and e.end <= verb.i]
    return places[-1].text.casefold() if places else None


def _verb(verb: Token, mode: Mode, ctx: _Context) -> list[_Found]:
    """The attributes a (non-copula) verb sets, changes or ends."""
    lemma = _lemma(verb)
    particle = next(
        (c.lower_ for c in verb.children
         if c.dep_ == "prt" or (c.dep_ == "advmod" and c.lower_ in {"down", "off", "up"})),
        None,
    )  # fmt: skip
    dobj = next((c for c in verb.children if c.dep_ == "dobj"), None)
    ended: list[_Found] = []
    origin = _object(verb, "from")
    if origin is not None and lemma in CHANGES:  # "moved from Zara to H&M"
        ended.append(_Found("any", _value(origin), "end"))
    if particle is not None and (lemma, particle) in PHRASAL_ENDS:
        family = PHRASAL_ENDS[(lemma, particle)]
        if family == "relationship_status":
            return [_Found(family, "single", "change")]
        what = dobj or _object(verb, "from|by|of")
        if family == "any" and what is not None and what.lemma_ == "be":
            return []  # "gave up being vegan": the complement ends (see claims)
        return [_Found(family, _value(what) if what is not None else None, "end")]
    if lemma in {"get", "take", "start", "find", "land", "accept", "have"} and dobj is not None:
        named = _attribute_noun(dobj)
        if dobj.lemma_.casefold() in PARTNERS:
            return [_Found("relationship_status", "in a relationship", mode)]
        if named == "employer":
            where = _object(dobj, "at|with|in") or _object(verb, "at|with|in")
            return [_Found("employer", _value(where) if where is not None else None, "change")]
        if named is not None and any(c.lower_ == "new" for c in dobj.children):
            value = _contact(dobj, named) if named in {"email", "phone"} else _given(dobj)
            return [_Found(named, value, "change")]
        if lemma != "have" or not _present(verb):
            return []
    if lemma == "change" and (dobj is not None or verb.dep_ == "ROOT"):
        subj = next((c for c in verb.children if c.dep_ == "nsubj"), None)
        noun = dobj if dobj is not None and _attribute_noun(dobj) else subj
        changed = _attribute_noun(noun) if noun is not None else None
        if changed is None and dobj is not None and dobj.lemma_.casefold() in INSTITUTIONS:
            return [_Found("school", None, "end")]
        target = _object(verb, "to")
        if changed in {"email", "phone"}:
            return [_Found(changed, _contact(verb, changed), "change")]
        if changed is None or target is None:
            return []
        return [_Found(changed, _value(target), "change")]
    if lemma == "celebrate" and dobj is not None and dobj.lemma_ == "birthday":
        age = _age(dobj)
        return [_Found("age", age, "change")] if age else []
    if lemma in {"marry", "divorce", "engage", "separate", "date"}:
        return [_Found("relationship_status", RELATIONSHIP_WORDS[lemma], mode)]
    if lemma in ENDS:
        family, prep = ENDS[lemma]
        what = dobj or (_object(verb, prep) if prep else None) or _object(verb, "from|with|for")
        if what is not None and (noun_family := _attribute_noun(what)) is not None:
            where = _object(what, "at|with|in")
            return [_Found(noun_family, _value(where) if where is not None else None, "end")]
        if lemma == "retire":
            return [_Found("work", None, "end")]
        if what is None:
            return [_Found("employer", None, "end")] if lemma in {"resign", "quit"} else []
        if lemma == "leave" and what.ent_type_ in {"GPE", "LOC"}:
            return [_Found("residence", _value(what), "end")]
        return [_Found("any", _value(what), "end"), *ended]
    if lemma in CHANGES:
        family, prep = CHANGES[lemma]
        if lemma == "switch" and dobj is not None and (noun_family := _attribute_noun(dobj)):
            target = _object(verb, "to")
            return [_Found(noun_family, _value(target) if target is not None else None, "change")]
        if lemma == "turn":
            age = _age(dobj) if dobj is not None else None
            return (
                [_Found("age", age, "change")]
                if age and dobj is not None and (dobj.like_num or dobj.pos_ == "NUM")
                else []
            )
        what = dobj if prep is None else _object(verb, prep)
        if what is None:
            return ended
        certain = what.ent_type_ in {"ORG", "GPE", "LOC", "FAC"} or family in {"age"}
        if family in {"residence", "affiliation"}:
            family = _place(what) if family == "residence" else family
            if family == "affiliation" and _place(what) == "school":
                family = "school"
        if lemma in {"move", "relocate"} and family == "affiliation":
            # NER often calls a city an organisation: without a "from" that says which, the
            # older statement's attribute decides, and the LLM (when configured) has the word
            came_from = origin.ent_type_ if origin is not None else ""
            family = {"GPE": "residence", "LOC": "residence", "ORG": "affiliation"}.get(
                came_from, "place"
            )
            certain = certain and family != "place"
        if lemma == "join" and what.lemma_.casefold() in GROUPS:
            return ended
        return [_Found(family, _value(what), "change", certain), *ended]
    if lemma in STATES or lemma in {"study", "go", "eat"}:
        if mode == "state" and not _present(verb):
            return []
        if lemma == "work" and (role := _object(verb, "as")) is not None:
            return [_Found("occupation", _value(role), mode)]
        if lemma == "study":
            found = []
            if dobj is not None:
                found.append(_Found("major", _value(dobj), mode))
            if (where := _object(verb, "at|in")) is not None:
                found.append(_Found("school", _value(where), mode))
            return found
        if lemma == "go":
            where = _object(verb, "to")
            if where is None or where.ent_type_ in {"GPE", "LOC"} or verb.tag_ == "VBD":
                return []
            return [_Found("school", _value(where), mode, where.lemma_ in INSTITUTIONS)]
        if lemma in {"eat", "follow"}:
            food = dobj.lemma_.casefold() if dobj is not None else ""
            if dobj is not None and (food in DIET_WORDS or food == "diet"):
                return [_Found("diet", _value(dobj), mode)]
            return []
        family, prep = STATES[lemma]
        what = _object(verb, prep)
        if what is None and any(c.lower_ == "there" for c in verb.children):
            return [_Found(family, _there(verb), mode)]
        if what is None:
            return []
        value = _there(verb) if what.lower_ == "there" else _value(what)
        return [_Found(family, value, mode)]
    # any other relation in the present: ended only explicitly ("no longer plays for X")
    if mode == "state" and not _present(verb):
        return []
    what = dobj or _object(verb, "for|at|in|with|to|of")
    if what is None:
        return []
    prep = what.head.lower_ if what.head.i != verb.i else ""
    return [_Found(f"{lemma} {prep}".strip(), _value(what), mode, certain=False)]


# ---------------------------------------------------------------------------------- claims
_CLAUSES = frozenset({"ROOT", "conj", "ccomp", "xcomp", "advcl", "pcomp", "parataxis"})
_STARTS = frozenset({"start", "begin"})
_STOPS = frozenset({"stop", "quit", "give", "drop"})


def _governed(verb: Token) -> bool:
    """A complement its governing verb reads itself ("started working", "gave up being")."""
    return verb.dep_ in {"xcomp", "pcomp", "dobj"} and verb.head.lemma_ in _STARTS | _STOPS


def _clause(verb: Token, ctx: _Context, mode: Mode | None = None) -> list[Claim]:
    if _hypothetical(verb) or (verb.dep_ == "xcomp" and verb.head.lemma_ == "use"):
        return []  # a plan, a wish; "used to live"
    adverbs = _adverbs(verb)
    if any(c.dep_ == "neg" for c in verb.children) or {"no", "longer"} <= adverbs:
        if not adverbs & {"longer", "anymore", "more"}:
            return []  # a plain negation is another fact, not a change
        mode = "end"
    mode = mode or ("change" if adverbs & NOW else "state")
    lemma = _lemma(verb)
    inner = next(
        (c for c in verb.children if c.dep_ in {"xcomp", "pcomp", "dobj"} and c.tag_ == "VBG"),
        None,
    ) or next((c for c in verb.children if c.dep_ == "xcomp"), None)
    if inner is None:
        inner = next((c for c in verb.children if c.dep_ == "prep" and verb.lemma_ == "give"
                      for c in c.children if c.tag_ == "VBG"), None)  # fmt: skip
    if inner is not None and lemma in _STARTS | _STOPS:
        return _clause(inner, ctx, "change" if lemma in _STARTS else "end")
    if lemma in {"be", "become"} or (lemma in {"get", "go"} and _complement(verb) is not None):
        copula_mode: Mode = "change" if lemma != "be" and mode == "state" else mode
        if lemma == "be" and mode == "state" and not _present(verb):
            return []  # a past state ("was married for twelve years")
        subjects, found = _copula(verb, copula_mode, ctx)
    else:
        if lemma in RELATIONSHIP_WORDS and any(
            c.dep_ == "auxpass" and c.tag_ == "VBD" and c.lemma_ != "get" for c in verb.children
        ):
            return []
        subjects, found = _subjects(verb, ctx), _verb(verb, mode, ctx)
    objects = [c for c in verb.children if c.dep_ in {"dobj", "attr"}]
    additive = bool(adverbs & ADDITIVE) or any(
        t.lower_ in ADDITIVE for o in objects for t in o.children
    )
    when = _when(verb, ctx)
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
    ctx = _Context(speaker, at)
    found: list[Claim] = []
    for token in load_parser()(body):
        verb = token.pos_ in {"VERB", "AUX"} or (token.dep_ == "ROOT" and token.tag_ != "NN")
        if ((verb and token.dep_ in _CLAUSES) or _noun_verb(token)) and not _governed(token):
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
