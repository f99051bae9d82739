"""What a question asks for, from its question word: a small pure function.

"Where does Maya work?" asks for a place or an organisation, "Who is Luis married to?" for a
person, "When did Caroline go to the support group?" for a time. The question word is the
one word of the question that neither ranking signal sees: BM25 drops it as a stop word,
leaving "maya work", which "I'm working from the couch" matches completely, and the
embedding barely weighs it ("Where does work?", the question without its name, is nearer to
that turn than to "First week at Northwind done"). The heuristic reranker therefore adds a
signal for the candidates that name a thing of the kind asked for (docs/retrieval.md,
"Answer type").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Question word → the entity types (memora.nlp.language.ENTITY_TYPES' values) that answer it.
ENTITY_ANSWERS: dict[str, frozenset[str]] = {
    "where": frozenset({"LOCATION", "ORGANIZATION"}),
    "who": frozenset({"PERSON", "ORGANIZATION"}),
    "whom": frozenset({"PERSON", "ORGANIZATION"}),
    "whose": frozenset({"PERSON", "ORGANIZATION"}),
}
TIME_ANSWERS = frozenset({"when"})
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class AnswerType:
    """The kinds of thing that answer a question: entity types, and whether a time does.
    Empty for a question whose word says nothing of its answer's kind ("what", "how")."""

    entity_types: frozenset[str] = frozenset()
    time: bool = False

    def __bool__(self) -> bool:
        return bool(self.entity_types) or self.time


def answer_type(query: str) -> AnswerType:
    """The kinds of answer the query's question words ask for (several words: any of them)."""
    words = set(_WORD.findall(query.lower()))
    types = frozenset().union(*(ENTITY_ANSWERS[w] for w in words & ENTITY_ANSWERS.keys()))
    return AnswerType(types, bool(words & TIME_ANSWERS))


# Words that hedge a question asking for an inference ("Would Ines likely enjoy a pottery
# retreat?", "What might Priya do?"): they say how sure the answer is, not what it is about,
# and as keywords they match any turn that says them ("likely" is stemmed to "like").
# "May" with a capital is kept: it is also a month.
HEDGES = frozenset(
    {"would", "could", "might", "may", "likely", "unlikely", "probably", "possibly", "perhaps",
     "maybe", "potentially"}
)  # fmt: skip
_TOKEN = re.compile(r"[A-Za-z]+|[^A-Za-z]+")


def without_hedges(query: str) -> str:
    """The query without its hedging words (`HEDGES`), the rest as written."""
    return "".join(t for t in _TOKEN.findall(query) if t.lower() not in HEDGES or t == "May")


# Words that name a relation between entities (memora.basics.relations) → that relation: the
# question's predicate ("Where does Maya work?": works_at) or a tie to another person
# ("Marek's girlfriend": partner_of). Words that say too little of a relation to follow one
# ("home", "group": a support group is rarely a membership) are left out.
RELATION_WORDS: dict[str, str] = {
    **dict.fromkeys(
        ("work", "works", "worked", "working", "job", "jobs", "employer", "employed", "company",
         "career", "hired"), "works_at"),
    **dict.fromkeys(
        ("live", "lives", "lived", "living", "hometown", "reside", "resides", "move", "moved",
         "moves", "relocated", "based"), "lives_in"),
    **dict.fromkeys(
        ("study", "studies", "studied", "studying", "school", "college", "university",
         "student", "degree", "enrolled"), "studies_at"),
    **dict.fromkeys(("member", "team", "club", "band", "choir", "league"), "member_of"),
    **dict.fromkeys(
        ("manage", "manages", "managed", "manager", "boss", "supervisor", "report", "reports"),
        "manages"),
    **dict.fromkeys(
        ("sister", "sisters", "brother", "brothers", "sibling", "siblings", "twin"),
        "sibling_of"),
    **dict.fromkeys(
        ("wife", "husband", "partner", "girlfriend", "boyfriend", "spouse", "married",
         "fiance", "fiancee", "fiancé", "fiancée"), "partner_of"),
    **dict.fromkeys(("friend", "friends", "buddy", "bestie"), "friend_of"),
    **dict.fromkeys(
        ("colleague", "colleagues", "coworker", "coworkers", "co-worker", "co-workers"),
        "colleague_of"),
    **dict.fromkeys(
        ("mother", "mom", "mum", "father", "dad", "parent", "parents", "son", "sons", "daughter",
         "daughters", "child", "children", "kid", "kids"), "parent_of"),
}  # fmt: skip
_POSSESSED = re.compile(r"(?:'s|’s|s'|s’)\s+([\w-]+)", re.IGNORECASE)
_WHO_IS = re.compile(r"^\s*who\s+(?:is|was|'s|’s)\b", re.IGNORECASE)  # "Who is Tereza?"
EVERY_RELATION = frozenset(RELATION_WORDS.values())
_ANY_WORD = re.compile(r"[\w-]+")


def relation_path(query: str) -> tuple[frozenset[str], ...]:
    """The relations a question walks from the entities it names, hop by hop: the ties its
    possessives follow, in order ("Marek's girlfriend": partner_of), then the relations its
    other words name, together as the last hop ("work": works_at). "Where does Marek's
    girlfriend work?" → (partner_of), (works_at); "Who is Lucia's colleague?" →
    (colleague_of); "Who is Tereza?", asking who someone is without naming a relation, → every
    relation, one hop; any other question naming none → ()."""
    ties: list[frozenset[str]] = []
    taken: set[int] = set()
    for match in _POSSESSED.finditer(query):
        relation = RELATION_WORDS.get(match.group(1).lower())
        if relation is not None:
            ties.append(frozenset({relation}))
            taken.add(match.start(1))
    last = frozenset(
        relation
        for word in _ANY_WORD.finditer(query)
        if word.start() not in taken and (relation := RELATION_WORDS.get(word.group().lower()))
    )
    if not ties and not last and _WHO_IS.match(query):
        return (EVERY_RELATION,)
    return (*ties, last) if last else tuple(ties)
