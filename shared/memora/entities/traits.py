"""What a memory says of a person it names that tells two of one name apart (seed 004: entity
resolution reads context). Read from spaCy's dependency parse, only where the memory points
that way, with precision first:

- gender: a title or gendered kin word in front of or beside the name ("Mrs. Taylor", "Uncle
  Jordan", "my brother Sam", "Chris, my husband,"), a pronoun of a clause the name is the
  subject of, with nobody else named before it ("Sam said she…", "Melanie took her kids…"), or
  the possessive of a noun joined to the name ("Jamie and his dad");
- animal: an animal word beside the name ("our cat Luna", "a dog named Rocky");
- human: a kin or role word beside the name, the name speaking ("Luna told me…", "Charlie
  said…") or "from" somewhere ("Bella from marketing").

Evidence is counted per entity (`entities.traits`, migration 0038); a mention is kept from an
entity whose evidence mostly says otherwise (`compatible`). Texts without a cue word are not
parsed (`Reader`), so most memories cost nothing here."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from memora.nlp.language import structure

if TYPE_CHECKING:
    from spacy.tokens import Doc, Token

Traits = dict[str, int]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


MALE = _words(
    "mr mister sir uncle brother son father dad daddy husband boyfriend nephew grandson "
    "grandfather grandpa king prince"
)
FEMALE = _words(
    "mrs ms miss madam aunt auntie sister daughter mother mom mum mommy wife girlfriend "
    "niece granddaughter grandmother grandma queen princess"
)
ROLES = _words(
    "friend neighbour neighbor colleague coworker boss manager teacher doctor cousin partner "
    "roommate classmate kid child parent sibling student coach nurse"
)
ANIMALS = _words(
    "dog cat puppy kitten horse pony parrot rabbit bunny hamster bird fish turtle pet "
    "goldfish pig snake lizard tortoise"
)
SPEECH = _words(
    "say tell ask email text call write reply promise explain mention announce invite agree "
    "complain admit"
)
PRONOUNS = {"he": "male", "him": "male", "his": "male", "himself": "male",
            "she": "female", "her": "female", "hers": "female", "herself": "female"}  # fmt: skip
BESIDE = frozenset({"compound", "appos", "amod", "nmod"})

_strong = "|".join(sorted(MALE | FEMALE | ANIMALS | set(PRONOUNS)))
STRONG_CUES = re.compile(rf"\b({_strong})\b", re.IGNORECASE)
_human = "|".join(sorted(ROLES | {"from", "said", "told", "asked", "emailed", "texted", "called",
                                  "wrote", "replied", "says", "tells", "asks"}))  # fmt: skip
HUMAN_CUES = re.compile(rf"\b({_human})\b", re.IGNORECASE)


def _word(token: Token) -> str:
    return token.lower_.rstrip(".")


def _kind_of(word: str) -> list[str]:
    if word in MALE:
        return ["male", "human"]
    if word in FEMALE:
        return ["female", "human"]
    if word in ROLES:
        return ["human"]
    if word in ANIMALS:
        return ["animal"]
    return []


def _name_tokens(doc: Doc, name: str) -> list[Token]:
    """The name's tokens where it first appears (its words in order)."""
    words = [w.lower().rstrip(".") for w in name.split() if w]
    for start in range(len(doc) - len(words) + 1):
        if all(_word(doc[start + k]) == w for k, w in enumerate(words)):
            return [doc[start + k] for k in range(len(words))]
    return []


def _beside(head: Token, span: list[Token]) -> Counter[str]:
    """Titles, kin, role and animal words before the name or attached to it."""
    found: Counter[str] = Counter()
    before = span[0].i - 1
    for word in [_word(span[0])] + ([_word(span[0].doc[before])] if before >= 0 else []):
        if word in MALE | FEMALE:
            found.update(_kind_of(word))
    near = [c for c in head.children if c.dep_ in BESIDE]
    if head.dep_ in BESIDE | {"oprd"}:
        near.append(head.head)
        if head.head.lemma_ in ("name", "call"):  # "a dog named Rocky"
            near.append(head.head.head)
    for token in near:
        found.update(_kind_of(_word(token)))
    if any(c.dep_ == "prep" and c.lower_ == "from" for c in head.children):
        found["human"] += 1
    return found


def _pronoun(head: Token, span: list[Token]) -> Counter[str]:
    """The gender of a pronoun that refers to the name (see the module's docstring)."""
    for conj in (c for c in head.children if c.dep_ == "conj"):  # "Jamie and his dad"
        for poss in conj.children:
            if poss.dep_ == "poss" and poss.lower_ in PRONOUNS:
                return Counter([PRONOUNS[poss.lower_]])
    if head.dep_ not in ("nsubj", "nsubjpass"):
        return Counter()
    verb, found = head.head, Counter[str]()
    if verb.lemma_ in SPEECH:
        found["human"] += 1
    for token in verb.subtree:
        if token.i <= span[-1].i or token in span:
            continue
        if token.lower_ in PRONOUNS:
            found[PRONOUNS[token.lower_]] += 1
            break
        if token.ent_type_ == "PERSON" or _kind_of(_word(token)):
            break  # someone else is named first: the pronoun may be theirs
    return found


def read(doc: Doc, name: str) -> Traits:
    """What the parsed memory says of `name` (one of its PERSON mentions): each trait once."""
    span = _name_tokens(doc, name)
    if not span:
        return {}
    head = span[-1]
    return dict.fromkeys(_beside(head, span) + _pronoun(head, span), 1)


class Reader:
    """Reads the traits of a resolution batch's mentions from the kept parse of their texts
    (`nlp.language.structure`, which the entity relation reader shares), parsing only a text
    that names the person and holds a cue word: a strong one (pronoun, kin, title, animal)
    always, a human one (speech verbs, roles, "from") when some entity has evidence."""

    def of(self, text: str, name: str, *, comparing: bool = False) -> Traits:
        last = name.split()[-1].lower().rstrip(".") if name.split() else ""
        if not last or last not in text.lower():  # a turn's speaker, say, named by a prefix
            return {}
        if not (STRONG_CUES.search(text) or (comparing and HUMAN_CUES.search(text))):
            return {}
        return read(structure(text), name)


def _leans(traits: Traits, one: str, other: str) -> bool:
    return traits.get(one, 0) > traits.get(other, 0)


def compatible(entity: Traits, mention: Traits) -> bool:
    """False when the mention says what the entity's evidence mostly contradicts."""
    for one, other in (("male", "female"), ("animal", "human")):
        if mention.get(one) and _leans(entity, other, one):
            return False
        if mention.get(other) and _leans(entity, one, other):
            return False
    return True


def add(entity: Traits, mention: Traits) -> Traits:
    return dict(Counter(entity) + Counter(mention))
