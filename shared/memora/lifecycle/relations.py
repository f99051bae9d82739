"""The attributes one clause's relation sets, changes or ends (for lifecycle.changes): a copula
("X's favourite band is Muse", "Omar is 30") or another verb ("moved to Berlin", "left
Deloitte", "lives in Oslo"), read from its parse (lifecycle.parsing) and the lexicon."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memora.lifecycle.lexicon import (
    CHANGES,
    DIET_WORDS,
    ENDS,
    GROUPS,
    INSTITUTIONS,
    PARTNERS,
    PHRASAL_ENDS,
    RELATIONSHIP_WORDS,
    STATES,
)
from memora.lifecycle.parsing import (
    ClauseContext,
    Found,
    Mode,
    age_of,
    attribute_noun,
    complement_of,
    contact_of,
    given_value,
    is_present,
    lemma_of,
    object_of,
    owner_of,
    place_kind,
    place_named_before,
    subjects_of,
    value_of,
)

if TYPE_CHECKING:
    from spacy.tokens import Token

# verbs of acquiring: "got a new job", "have a girlfriend"
_ACQUIRING = frozenset({"get", "take", "start", "find", "land", "accept", "have"})


def read_copula(verb: Token, mode: Mode, ctx: ClauseContext) -> tuple[list[str], list[Found]]:
    """be / become / get / go: "X's favourite band is Muse", "Omar is 30", "Hannah got engaged",
    "Raj is no longer Emma's manager", "Beatriz is a waitress"."""
    nearest = [c for c in reversed(list(verb.lefts)) if c.dep_ in {"nsubj", "nsubjpass"}]
    # the subject nearest the verb, unless a time phrase ("my favourite colour these days")
    subj = next((c for c in nearest if c.ent_type_ not in {"DATE", "TIME"}), None) or next(
        iter(nearest), None
    )
    comp = complement_of(verb)
    if subj is not None and (family := attribute_noun(subj)):
        owner = owner_of(subj)
        whose = ctx.person(owner) if owner is not None else None
        value = value_of(comp) if comp is not None else None
        if family in {"email", "phone"}:
            value = contact_of(verb, family)
        if value is None:
            place = object_of(verb, "in|at")
            value = value_of(place) if place is not None else None
        fresh = any(c.lower_ == "new" for c in subj.children)
        return ([whose] if whose else []), [Found(family, value, "change" if fresh else mode)]
    subjects = subjects_of(verb, ctx)
    if comp is None:
        place = object_of(verb, "in")
        if place is not None and place.lemma_ == "relationship":
            return subjects, [Found("relationship_status", "in a relationship", mode)]
        school = object_of(verb, "at")
        if school is not None and place_kind(school) == "school":
            return subjects, [Found("school", value_of(school), mode)]
        return subjects, []
    word = comp.lower_
    if word in RELATIONSHIP_WORDS or comp.lemma_ in RELATIONSHIP_WORDS:
        status = RELATIONSHIP_WORDS.get(word) or RELATIONSHIP_WORDS[comp.lemma_]
        return subjects, [Found("relationship_status", status, mode)]
    if word in DIET_WORDS:
        return subjects, [Found("diet", word, mode)]
    if verb.lemma_ == "go":
        return subjects, []
    if (family := attribute_noun(comp)) and any(c.dep_ == "poss" for c in comp.children):
        owner = next(c for c in comp.children if c.dep_ == "poss")
        whose = ctx.person(owner)
        named = [value_of(s) for s in verb.children if s.dep_ == "nsubj"]
        return ([whose] if whose else []), [Found(family, named[0] if named else None, mode)]
    age = age_of(comp)
    if age is not None and (comp.pos_ in {"NUM", "ADJ"} or comp.lemma_ == "year"):
        return subjects, [Found("age", age, mode)]
    if comp.pos_ in {"NOUN", "PROPN"} and comp.pos_ != "PROPN":
        return subjects, [Found("role", value_of(comp), mode, certain=False)]
    return subjects, []


def read_verb(verb: Token, mode: Mode, ctx: ClauseContext) -> list[Found]:
    """The attributes a (non-copula) verb sets, changes or ends."""
    lemma = lemma_of(verb)
    particle = next(
        (c.lower_ for c in verb.children
         if c.dep_ == "prt" or (c.dep_ == "advmod" and c.lower_ in {"down", "off", "up"})),
        None,
    )  # fmt: skip
    dobj = next((c for c in verb.children if c.dep_ == "dobj"), None)
    ended: list[Found] = []
    origin = object_of(verb, "from")
    if origin is not None and lemma in CHANGES:  # "moved from Zara to H&M"
        ended.append(Found("any", value_of(origin), "end"))
    if particle is not None and (lemma, particle) in PHRASAL_ENDS:
        return _phrasal_end(verb, PHRASAL_ENDS[(lemma, particle)], dobj)
    if lemma in _ACQUIRING and dobj is not None:
        acquired = _acquired(verb, lemma, mode, dobj)
        if acquired is not None:
            return acquired
    if lemma == "change" and (dobj is not None or verb.dep_ == "ROOT"):
        return _changed(verb, dobj)
    if lemma == "celebrate" and dobj is not None and dobj.lemma_ == "birthday":
        age = age_of(dobj)
        return [Found("age", age, "change")] if age else []
    if lemma in {"marry", "divorce", "engage", "separate", "date"}:
        return [Found("relationship_status", RELATIONSHIP_WORDS[lemma], mode)]
    if lemma in ENDS:
        return _ending(verb, lemma, dobj, ended)
    if lemma in CHANGES:
        return _changing(verb, lemma, dobj, origin, ended)
    if lemma in STATES or lemma in {"study", "go", "eat"}:
        return _state(verb, lemma, mode, dobj)
    # any other relation in the present: ended only explicitly ("no longer plays for X")
    if mode == "state" and not is_present(verb):
        return []
    what = dobj or object_of(verb, "for|at|in|with|to|of")
    if what is None:
        return []
    prep = what.head.lower_ if what.head.i != verb.i else ""
    return [Found(f"{lemma} {prep}".strip(), value_of(what), mode, certain=False)]


def _phrasal_end(verb: Token, family: str, dobj: Token | None) -> list[Found]:
    """A phrasal end ("broke up", "moved out of", "gave up"): the end of a value; a break-up
    makes one single."""
    if family == "relationship_status":
        return [Found(family, "single", "change")]
    what = dobj or object_of(verb, "from|by|of")
    if family == "any" and what is not None and what.lemma_ == "be":
        return []  # "gave up being vegan": the complement ends (see claims)
    return [Found(family, value_of(what) if what is not None else None, "end")]


def _acquired(verb: Token, lemma: str, mode: Mode, dobj: Token) -> list[Found] | None:
    """What is acquired ("got a new job at X", "have a girlfriend", "got a new number: ...");
    None: read the verb on (a present "have" of no attribute)."""
    named = attribute_noun(dobj)
    if dobj.lemma_.casefold() in PARTNERS:
        return [Found("relationship_status", "in a relationship", mode)]
    if named == "employer":
        where = object_of(dobj, "at|with|in") or object_of(verb, "at|with|in")
        return [Found("employer", value_of(where) if where is not None else None, "change")]
    if named is not None and any(c.lower_ == "new" for c in dobj.children):
        value = contact_of(dobj, named) if named in {"email", "phone"} else given_value(dobj)
        return [Found(named, value, "change")]
    if lemma != "have" or not is_present(verb):
        return []
    return None


def _changed(verb: Token, dobj: Token | None) -> list[Found]:
    """A change named by "change" ("changed my e-mail to ...", "my favourite colour changed
    to green", "changed schools")."""
    subj = next((c for c in verb.children if c.dep_ == "nsubj"), None)
    noun = dobj if dobj is not None and attribute_noun(dobj) else subj
    changed = attribute_noun(noun) if noun is not None else None
    if changed is None and dobj is not None and dobj.lemma_.casefold() in INSTITUTIONS:
        return [Found("school", None, "end")]
    target = object_of(verb, "to")
    if changed in {"email", "phone"}:
        return [Found(changed, contact_of(verb, changed), "change")]
    if changed is None or target is None:
        return []
    return [Found(changed, value_of(target), "change")]


def _ending(verb: Token, lemma: str, dobj: Token | None, ended: list[Found]) -> list[Found]:
    """A verb of ending ("left Deloitte", "quit", "retired", "sold his Ford")."""
    _, prep = ENDS[lemma]
    what = dobj or (object_of(verb, prep) if prep else None) or object_of(verb, "from|with|for")
    if what is not None and (noun_family := attribute_noun(what)) is not None:
        where = object_of(what, "at|with|in")
        return [Found(noun_family, value_of(where) if where is not None else None, "end")]
    if lemma == "retire":
        return [Found("work", None, "end")]
    if what is None:
        return [Found("employer", None, "end")] if lemma in {"resign", "quit"} else []
    if lemma == "leave" and what.ent_type_ in {"GPE", "LOC"}:
        return [Found("residence", value_of(what), "end")]
    return [Found("any", value_of(what), "end"), *ended]


def _changing(
    verb: Token, lemma: str, dobj: Token | None, origin: Token | None, ended: list[Found]
) -> list[Found]:
    """A verb of change ("moved to Berlin", "joined SAP", "switched to decaf", "turned 30")."""
    family, prep = CHANGES[lemma]
    if lemma == "switch" and dobj is not None and (noun_family := attribute_noun(dobj)):
        target = object_of(verb, "to")
        return [Found(noun_family, value_of(target) if target is not None else None, "change")]
    if lemma == "turn":
        age = age_of(dobj) if dobj is not None else None
        return (
            [Found("age", age, "change")]
            if age and dobj is not None and (dobj.like_num or dobj.pos_ == "NUM")
            else []
        )
    what = dobj if prep is None else object_of(verb, prep)
    if what is None:
        return ended
    certain = what.ent_type_ in {"ORG", "GPE", "LOC", "FAC"} or family in {"age"}
    if family in {"residence", "affiliation"}:
        family = place_kind(what) if family == "residence" else family
        if family == "affiliation" and place_kind(what) == "school":
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
    return [Found(family, value_of(what), "change", certain), *ended]


def _state(verb: Token, lemma: str, mode: Mode, dobj: Token | None) -> list[Found]:
    """A verb of state in the present ("lives in Oslo", "works as a nurse", "studies law at
    UCL", "goes to Lincoln High", "eats vegan")."""
    if mode == "state" and not is_present(verb):
        return []
    if lemma == "work" and (role := object_of(verb, "as")) is not None:
        where = object_of(verb, "at|for")  # "works for Deutsche Bahn as a planner": both
        employer = [Found("employer", value_of(where), mode)] if where is not None else []
        return [Found("occupation", value_of(role), mode), *employer]
    if lemma == "study":
        found = []
        if dobj is not None:
            found.append(Found("major", value_of(dobj), mode))
        if (where := object_of(verb, "at|in")) is not None:
            found.append(Found("school", value_of(where), mode))
        return found
    if lemma == "go":
        where = object_of(verb, "to")
        if where is None or where.ent_type_ in {"GPE", "LOC"} or verb.tag_ == "VBD":
            return []
        return [Found("school", value_of(where), mode, where.lemma_ in INSTITUTIONS)]
    if lemma in {"eat", "follow"}:
        food = dobj.lemma_.casefold() if dobj is not None else ""
        if dobj is not None and (food in DIET_WORDS or food == "diet"):
            return [Found("diet", value_of(dobj), mode)]
        return []
    family, prep = STATES[lemma]
    what = object_of(verb, prep)
    if what is None and any(c.lower_ == "there" for c in verb.children):
        return [Found(family, place_named_before(verb), mode)]
    if what is None:
        return []
    value = place_named_before(verb) if what.lower_ == "there" else value_of(what)
    return [Found(family, value, mode)]
