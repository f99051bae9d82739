"""People's ties read from a parse (for lifecycle.entity_relations): family, partners, friends,
colleagues and managers, by their nouns ("Priya's brother Sam", "my boss, Derek,", "Kofi is
Ama's brother", "Sophie and Ben are siblings", "Pedro is friends with Carlos") and a few verbs
("Hannah married Tom", "is dating", "divorced", "broke up", "I manage Lukas").

Each tie is (subject, relation, object, mode) with names as the sentence writes them (the
caller keeps those that are names). A former or late tie ("my ex-wife", "her late father"), a
negated, past or hypothetical copula ("isn't Mina's brother", "would be my boss") gives none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memora.lifecycle.lexicon import GROUPS, INSTITUTIONS
from memora.lifecycle.parsing import ClauseContext, Mode, is_hypothetical, is_present, subjects_of

if TYPE_CHECKING:
    from spacy.tokens import Doc, Token

Tie = tuple[str, str, str, Mode]
_PARTNERS = ("wife", "husband", "partner", "girlfriend", "boyfriend", "fiance", "fiancé",
             "fiancée", "spouse")  # fmt: skip

# a noun of a tie → (relation, whether the named person comes first: "Derek" manages the owner)
NOUNS: dict[str, tuple[str, bool]] = {
    **dict.fromkeys(("brother", "sister", "sibling", "twin"), ("sibling_of", False)),
    **dict.fromkeys(_PARTNERS, ("partner_of", False)),
    **dict.fromkeys(("friend", "buddy", "pal", "bestie"), ("friend_of", False)),
    **dict.fromkeys(("colleague", "coworker", "co-worker", "teammate"), ("colleague_of", False)),
    **dict.fromkeys(("mother", "mom", "mum", "father", "dad", "parent"), ("parent_of", True)),
    **dict.fromkeys(("son", "daughter", "child", "kid"), ("parent_of", False)),
    **dict.fromkeys(("boss", "manager", "supervisor"), ("manages", True)),
}
_FORMER = frozenset({"ex", "former", "late", "future", "old", "previous", "would", "next"})
_PLURALS = {
    "siblings": "sibling", "friends": "friend", "colleagues": "colleague",
    "coworkers": "coworker", "co-workers": "co-worker", "teammates": "teammate",
}  # fmt: skip


def ties(doc: Doc, speaker: str | None) -> list[Tie]:
    """Every tie the parse states."""
    ctx = ClauseContext(speaker, None)
    found: list[Tie] = []
    for token in doc:
        if token.pos_ == "PROPN" and token.dep_ in {"nsubj", "nsubjpass", "dobj"}:
            ctx.last = ctx.person(token) or ctx.last  # he, she: the last person named
        noun = _noun(token)
        if noun is not None and token.dep_ != "attr":
            found += _named_tie(token, noun, ctx)
        elif token.lemma_ in {"be", "get"} and token.dep_ in {"ROOT", "conj", "ccomp"}:
            found += _copula(token, ctx)
        elif token.pos_ == "VERB":
            found += _verb(token, ctx)
    return found


def _noun(token: Token) -> str | None:
    word = token.lower_
    word = _PLURALS.get(word, word)
    return word if word in NOUNS and token.pos_ in {"NOUN", "PROPN"} else None


def former(token: Token) -> bool:
    """A former or late tie ("my ex-wife", "my old boss", "her late father")."""
    return any(c.lower_.rstrip("-") in _FORMER for c in token.children) or "ex-" in token.lower_


def _tie(noun: str, owner: str, named: str, mode: Mode = "state") -> Tie:
    relation, named_first = NOUNS[noun]
    return (named, relation, owner, mode) if named_first else (owner, relation, named, mode)


def _named_tie(token: Token, noun: str, ctx: ClauseContext) -> list[Tie]:
    """ "Priya's brother Sam", "my boss, Derek,", "Tom's manager Alice"."""
    poss = next((c for c in token.children if c.dep_ == "poss"), None)
    if poss is None or former(token):
        return []
    owner = ctx.person(poss)
    name = next((c for c in token.children if c.dep_ in {"appos", "compound"}
                 and c.pos_ == "PROPN"), None)  # fmt: skip
    if name is None and token.dep_ == "compound" and token.head.pos_ == "PROPN":
        name = token.head
    named = ctx.person(name) if name is not None else None
    return [_tie(noun, owner, named)] if owner and named else []


def _copula(verb: Token, ctx: ClauseContext) -> list[Tie]:
    """ "Kofi is Ama's brother", "Priya is my colleague", "Sophie and Ben are siblings", "Pedro
    is friends with Carlos", "Lucy is married to James"."""
    got = verb.lemma_ == "get"  # an event, in any tense: "got married", "got divorced"
    if _negated(verb) or is_hypothetical(verb) or not (got or is_present(verb)):
        return []
    people = subjects_of(verb, ctx)
    comp = next((c for c in verb.children if c.dep_ in {"attr", "acomp"}), None)
    if comp is None and not got:
        return _placed(verb, people)
    if comp is None or not people:
        return []
    if comp.lower_ in {"divorced", "separated", "married"}:
        mode: Mode = "end" if comp.lower_ != "married" else ("change" if got else "state")
        other = _object(comp, "from" if mode == "end" else "to")
        pairs = [(p, other) for p in people if other]  # "is married to James"
        if other is None and len(people) == 2:  # "Bob and Alice got divorced"
            pairs = [(people[0], people[1])]
        return [(a, "partner_of", b, mode) for a, b in pairs]
    if got:
        return []
    subject = next((c for c in verb.children if c.dep_ == "nsubj"), None)
    kin = _noun(subject) if subject is not None else None
    if subject is not None and kin and comp.pos_ == "PROPN" and not former(subject):
        poss = next((c for c in subject.children if c.dep_ == "poss"), None)  # "my boss is Rhea"
        owner = ctx.person(poss) if poss is not None else None
        named = ctx.person(comp)
        return [_tie(kin, owner, named)] if owner and named else []
    if comp.lemma_ == "member" and not former(comp):  # "a member of Greenpeace"
        group = _object(comp, "of")
        return [(p, "member_of", group, "state") for p in people if group]
    noun = _noun(comp)
    if noun is None or former(comp):
        return []
    poss = next((c for c in comp.children if c.dep_ == "poss"), None)
    if poss is not None:
        owner = ctx.person(poss)
        return [_tie(noun, owner, p) for p in people] if owner else []
    other = _object(comp, "with")
    if other is not None and comp.lower_ != noun:  # "friends with Carlos"
        return [_tie(noun, p, other) for p in people]
    if comp.lower_ != noun and len(people) == 2:  # "Sophie and Ben are siblings"
        return [_tie(noun, people[0], people[1])]
    return []


def _placed(verb: Token, people: list[str]) -> list[Tie]:
    """ "I'm still at Accenture", "Leo is no longer at Oracle": where one works or studies, said
    with still, now or no longer (a plain "is at Google" may be a visit)."""
    where = _object(verb, "at")
    if where is None:  # "no longer with Accenture": an organisation, not a person
        firm = next(
            (
                g
                for c in verb.children
                if c.dep_ == "prep" and c.lower_ == "with"
                for g in c.children
                if g.dep_ == "pobj" and g.ent_type_ == "ORG"
            ),
            None,
        )
        where = _full(firm) if firm is not None else None
    adverbs = {c.lower_ for c in verb.children if c.dep_ == "advmod"}
    if where is None or not adverbs & {"still", "now", "longer", "anymore"}:
        return []
    mode: Mode = "end" if adverbs & {"longer", "anymore"} else "state"
    school = any(w.casefold() in INSTITUTIONS for w in where.split())
    return [(p, "studies_at" if school else "works_at", where, mode) for p in people]


def _verb(verb: Token, ctx: ClauseContext) -> list[Tie]:
    """ "Hannah married Tom", "Julia is dating Marcus", "Irene divorced Paolo", "Tom and I broke
    up", "I manage Lukas and Petra"."""
    lemma = verb.lemma_.casefold()
    if lemma not in {"marry", "date", "divorce", "break", "manage", "join"}:
        return []
    if _negated(verb) or is_hypothetical(verb):
        return []
    people = subjects_of(verb, ctx)
    if lemma == "break":
        if not any(c.dep_ == "prt" and c.lower_ == "up" for c in verb.children):
            return []
        other = _object(verb, "with")
        pairs = [(people[0], other)] if other and people else []
        if len(people) == 2:
            pairs = [(people[0], people[1])]
        return [(a, "partner_of", b, "end") for a, b in pairs]
    objects = _objects(verb, ctx)
    if lemma == "join":  # "joined the Brooklyn Chess Club" (a firm joined: lifecycle.changes)
        dobj = next((c for c in verb.children if c.dep_ == "dobj"), None)
        grouped = dobj is not None and any(t.lower_ in GROUPS for t in dobj.subtree)
        return [(p, "member_of", o, "change") for p in people for o in objects] if grouped else []
    if not objects and len(people) == 2 and lemma in {"marry", "divorce"}:  # "A and B married"
        people, objects = people[:1], people[1:]
    if lemma == "marry":
        return [(p, "partner_of", o, "change") for p in people for o in objects]
    if lemma == "divorce":
        return [(p, "partner_of", o, "end") for p in people for o in objects]
    if not is_present(verb):
        return []
    relation = "partner_of" if lemma == "date" else "manages"
    return [(p, relation, o, "state") for p in people for o in objects]


def _negated(verb: Token) -> bool:
    return any(c.dep_ == "neg" or c.lower_ in {"never", "no"} for c in verb.children)


def _object(head: Token, prep: str) -> str | None:
    for child in head.children:
        if child.dep_ == "prep" and child.lower_ == prep:
            pobj = next((g for g in child.children if g.dep_ == "pobj"), None)
            if pobj is not None and pobj.pos_ == "PROPN":
                return _full(pobj)
    return None


def _objects(verb: Token, ctx: ClauseContext) -> list[str]:
    dobj = next((c for c in verb.children if c.dep_ == "dobj"), None)
    if dobj is None:
        return []
    tokens = [dobj, *(c for c in dobj.children if c.dep_ == "conj")]
    return [p for t in tokens if t.pos_ == "PROPN" and (p := ctx.person(t))]


def _full(token: Token) -> str:
    parts = [c for c in token.children if c.dep_ == "compound" and c.pos_ == "PROPN"]
    return " ".join(t.text for t in [*parts, token])
