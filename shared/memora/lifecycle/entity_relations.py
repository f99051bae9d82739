"""Relations between entities (issue 57, item 4) read from plain sentences: "Maya: I work at
Northwind now" → (maya, works_at, northwind); "Priya's brother Sam" → (priya, sibling_of, sam);
"Dan left Deloitte" → the end of (dan, works_at, deloitte).

A closed vocabulary (RELATIONS): works_at, lives_in, studies_at, member_of (a person and an
organisation or place), manages (the manager first: "reports to" is read reversed), parent_of
(the parent first: "son", "daughter" reversed) and the symmetric sibling_of, partner_of,
friend_of, colleague_of. Where someone lives, works and studies, and their partner, one value
at a time holds (SINGLE): a new one replaces the old; the others end only explicitly.

Precision first: both ends must be names (a proper noun or a named entity in the sentence; the
speaker of a turn for "I"), never "my sister" or "a bakery". Where someone lives, works and
studies comes from the change detector's claims (memora.lifecycle.changes: plans, visits, the
past and plain negations are never claims); people's ties from the same parse read here and in
lifecycle.kinship (possessives and appositions, "X is Y's brother", "married", "manages").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memora.basics.relations import RELATIONS, SINGLE, SYMMETRIC
from memora.lifecycle.changes import Claim, claims, speaker_of
from memora.lifecycle.kinship import former, ties
from memora.lifecycle.lexicon import FIRST_PERSON, INSTITUTIONS
from memora.lifecycle.parsing import Mode, is_hypothetical
from memora.nlp.language import structure
from memora.nlp.names import normalize_name

if TYPE_CHECKING:
    from spacy.tokens import Doc, Token

__all__ = ["READER_VERSION", "RELATIONS", "SINGLE", "SYMMETRIC", "Relation", "name_in", "read"]

# Raised when what `read` finds changes: the entity_relations job then reads every stored
# memory again (memora.jobs.entity_relations). 2: roles at an organisation, jobs taken,
# "reports to me", a label before the statement ("Family update: ...").
READER_VERSION = 2


@dataclass(frozen=True)
class Relation:
    subject: str  # a normalised entity name (memora.nlp.names.normalize_name)
    relation: str
    object: str
    mode: Mode = "state"  # "change": begun now; "end": no longer holds
    additive: bool = False  # "also works at": one more value, never a replacement
    # how the sentence writes subject and object ("Ana", "Northwind"): entity names
    written: tuple[str, str] = field(default=("", ""), compare=False)
    source: str = field(default="parse", compare=False)  # parse, llm (the LLM extractor's)

    def key(self) -> tuple[str, str, str]:
        """The same relation whichever way a symmetric one is said."""
        a, b = self.subject, self.object
        if self.relation in SYMMETRIC and b < a:
            a, b = b, a
        return (a, self.relation, b)


# the change detector's families → relations (subject → value)
_FAMILIES = {
    "residence": "lives_in", "employer": "works_at", "school": "studies_at",
    "teach at": "works_at", "play for": "member_of", "play in": "member_of",
    "sing in": "member_of",
}  # fmt: skip
# families whose end names a value without saying which relation held it
_ENDED = frozenset({"any", "affiliation", "work", "employer", "school", "residence"})
_CONNECTORS = frozenset({"of", "&", "and", "de", "la", "du", "von", "van", "del", "upon"})
_NAMED = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC", "NORP", "PRODUCT"})
_PLACES = frozenset({"GPE", "LOC"})
_EMPLOYERS = frozenset({"ORG", "FAC", "GPE"})  # a role held "at" or "for" one of these
_POSTS = frozenset({"offer", "job", "position", "role", "internship"})  # taken (`_TAKEN`)
_TAKEN = frozenset({"accept", "take", "land", "get", "start", "begin"})
_ACCEPTED = frozenset({"accept", "take"})


# Stems of the words every relation is read from (the change detector's verbs and nouns of
# where someone lives, works and studies, the groups, the ties' nouns and verbs): a text with
# none of them states no relation and is not parsed.
CUES = re.compile(
    r"\b(liv|resid|base|work|employ|attend|report|mov|relocat|settl|join|hir|transfer|switch"
    r"|left|leav|quit|resign|retir|drop|laid|lay|step|teach|taught|play|sing|sang|sung|home"
    r"|job|offer|position|role|internship|school|college|universit|academ|institut|kindergarten"
    r"|nurser|lyc|gymnas|club|team"
    r"|group|choir|band|gym|class|societ|league|stud|member|boss|manag|supervis|lead|brother"
    r"|sister|sibling|twin|wife|wives|husband|partner|girlfriend|boyfriend|fianc|spouse"
    r"|friend|buddy|pal|bestie|colleague|co-?worker|teammate|mother|mom|mum|father|dad"
    r"|parent|son|daughter|child|kid|marri|marry|dating|date|divorc|engag|broke|break|ex"
    r"|longer|anymore|giv|gave|relationship)",
    re.IGNORECASE,
)


# "I'm still at Nokia", "Leo is with Deloitte now": a copula before a preposition and a name
COPULA_AT = re.compile(
    r"(\b(?:am|is|are|was|were|be|been)|'m|'s|'re)\s+(?:\w+\s+){0,2}(?:at|with|in|for)\s+"
    r"(?:the\s+)?[A-Z]"
)


def may_state(text: str) -> bool:
    """Whether a text holds a word some relation is read from (`CUES`) or a copula before a
    preposition and a name (`COPULA_AT`)."""
    return CUES.search(text) is not None or COPULA_AT.search(text) is not None


def read(text: str) -> tuple[Relation, ...]:
    """The relations a statement (a conversation turn "Name: ..." or plain text) asserts or
    ends, each once."""
    if not may_state(text):
        return ()
    speaker, body = speaker_of(text)
    doc = structure(body)
    found = [r for c in claims(text) if (r := _from_claim(c, doc, speaker)) is not None]
    found += [Relation(*tie) for tie in ties(doc, speaker)] + _posts_taken(doc, speaker)
    kept: dict[tuple[str, str, str, bool], Relation] = {}
    for r in found:
        subject = _named(doc, r.subject, speaker)
        obj = _named(doc, r.object, speaker)
        if subject and obj and subject[0] != obj[0] and r.relation in RELATIONS:
            written = (subject[1], obj[1])
            r = Relation(subject[0], r.relation, obj[0], r.mode, r.additive, written)
            kept.setdefault((*r.key(), r.mode == "end"), r)
    return tuple(kept.values())


def _from_claim(claim: Claim, doc: Doc, speaker: str | None = None) -> Relation | None:
    """A relation from one of the change detector's claims, if it names one."""
    if claim.value is None or "'s " in claim.subject or claim.subject == "user":
        return None
    if claim.family == "manager" and claim.value in FIRST_PERSON and speaker:  # "reports to me"
        return Relation(normalize_name(speaker), "manages", claim.subject, claim.mode)
    if claim.family == "role":  # "Lukas is a nurse at the Vienna General Hospital"
        return _employer_of_role(claim, doc)
    span = name_in(doc, claim.value)
    if span is None:
        return None
    value = normalize_name(" ".join(t.text for t in span))
    kind = span[-1].ent_type_ or span[0].ent_type_
    if claim.family == "manager":
        bosses = [t for t in doc if t.lemma_ in {"boss", "manager", "supervisor", "lead"}]
        if any(former(t) for t in bosses):  # "my old boss is Dave"
            return None
        return Relation(value, "manages", claim.subject, claim.mode)
    if claim.mode == "end" and claim.family in _ENDED:
        return Relation(claim.subject, _ended(claim.family, span, kind), value, "end")
    relation = _FAMILIES.get(claim.family)
    if claim.family == "affiliation" and claim.certain:  # "transferred to Acme"
        relation = _ended("affiliation", span, kind)
    if relation is None or (relation == "lives_in" and _carried(span[0])):
        return None
    if kind == "PERSON" and span[0].dep_ == "dobj":  # "joined Tom for lunch"
        return None
    if span[0].head.lower_ == "with":  # "works with Laura": a colleague, not an employer
        if relation != "works_at" or kind != "PERSON":
            return None
        relation = "colleague_of"
    return Relation(claim.subject, relation, value, claim.mode, claim.additive)


def _employer_of_role(claim: Claim, doc: Doc) -> Relation | None:
    """Where a role is held, when the sentence names it after "at" (a name that is not a
    person's) or "for" (an organisation's): "a nurse at the Vienna General Hospital", "a
    consultant for Deloitte" give works_at, as the role is said (held now, begun)."""
    value = claim.value or ""
    _, at, place = value.partition(" at ")
    kinds = _EMPLOYERS | {""}
    if not at:
        _, at, place = value.partition(" for ")
        kinds = _EMPLOYERS
    span = name_in(doc, place) if at else None
    if span is None or (span[-1].ent_type_ or span[0].ent_type_) not in kinds:
        return None
    employer = normalize_name(" ".join(t.text for t in span))
    return Relation(claim.subject, "works_at", employer, claim.mode, claim.additive)


def _posts_taken(doc: Doc, speaker: str | None) -> list[Relation]:
    """A job taken at a named organisation: "I accepted the offer from Northwind Robotics",
    "Pavel got the job at Skoda", "took a position with Acme" (works_at, begun); never a
    plan, a negation, or an offer from a person."""
    found = []
    for post in doc:
        verb = post.head
        taken = _ACCEPTED if post.lemma_ == "offer" else _TAKEN  # an offer got may be refused
        if post.lemma_ not in _POSTS or post.dep_ != "dobj" or verb.lemma_ not in taken:
            continue
        if is_hypothetical(verb) or any(c.dep_ == "neg" for c in verb.children):
            continue
        subject = next((c for c in verb.children if c.dep_ == "nsubj"), None)
        preps = [c for c in (*post.children, *verb.children) if c.dep_ == "prep"]
        where = [o for p in preps if p.lower_ in {"at", "from", "with"}
                 for o in p.children if o.dep_ == "pobj"]  # fmt: skip
        if subject is None or not where or where[0].ent_type_ not in _EMPLOYERS:
            continue
        who = speaker if subject.lower_ in FIRST_PERSON else subject.text
        employer = " ".join(t.text for t in where[0].subtree if t.dep_ in {"compound", "pobj"})
        if who:
            found.append(Relation(normalize_name(who), "works_at", normalize_name(employer),
                                  "change"))  # fmt: skip
    return found


def _carried(place: Token) -> bool:
    """A place something else was moved to ("moved Sarah's boxes to Berlin"): no home."""
    verb = place.head.head if place.head.dep_ == "prep" else place.head
    return any(c.dep_ == "dobj" and c.lower_ not in {"myself", "herself", "himself"}
               for c in verb.children)  # fmt: skip


def _ended(family: str, span: list[Token], kind: str) -> str:
    """Which relation an end names: a place lived in, a school, else an employer."""
    if family == "residence" or (family in {"any", "affiliation"} and kind in _PLACES):
        return "lives_in"
    if family == "school" or any(t.lower_ in INSTITUTIONS for t in span):
        return "studies_at"
    return "works_at"


def _named(doc: Doc, name: str, speaker: str | None) -> tuple[str, str] | None:
    """The normalised name and how it is written, if the sentence names it (or it is the
    speaker), else None; never one named in a question ("Does Priya live in Lisbon?")."""
    name = normalize_name(name)
    if speaker and name and name == normalize_name(speaker):
        return name, speaker
    span = name_in(doc, name, whole=True)  # never a part ("maya" of "maya's friend")
    if span is None or span[0].sent.text.rstrip().endswith("?"):
        return None
    written = " ".join(t.text for t in span)
    return normalize_name(written), written


def name_in(doc: Doc, value: str, whole: bool = False) -> list[Token] | None:
    """The tokens of the name `value` begins with (`whole`: that `value` is), where the
    sentence writes it as a name (capitalised words, one of them a proper noun or a named
    entity): "riverside rovers on sundays" → Riverside Rovers; "bakery" → None."""
    words = normalize_name(value).split()
    if not words:
        return None
    for start in doc:
        if start.lower_ != words[0] or not _capital(start):
            continue
        span = [start]
        for word, token in zip(words[1:], doc[start.i + 1 :], strict=False):
            if token.lower_ != word or not (_capital(token) or word in _CONNECTORS):
                break
            span.append(token)
        while span and span[-1].lower_ in _CONNECTORS:
            span.pop()
        if whole and len(span) != len(words):
            continue
        if any(t.tag_ in {"NNP", "NNPS"} or t.ent_type_ in _NAMED for t in span):
            return span
    return None


def _capital(token: Token) -> bool:
    return token.text[:1].isupper() and token.tag_ not in {"PRP", "PRP$", "DT"}
