"""People's names that may name one person (issue 31, item 5): nicknames and short forms.

"Bob Chen" and "Robert Chen", "Bob" and "Robert", "Alice C." and "Alice Chen", "Dr. Chen" and
"Alice Chen" can be one person; "Chris Evans" and "Chris Martin", "Robert Chen" and "Roberta
Chen" cannot. Nicknames come from the `nicknames` package (a maintained, hand-curated dataset
of English given names and their diminutives), in both directions. Names here are normalised
(memora.nlp.names.normalize_name): lower case, punctuation as spaces ("alice c", "dr chen").

Whether two compatible names are *the* same person is the resolver's call: it merges only when
the agent knows exactly one compatible person (memora.entities.resolution).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from nicknames import NickNamer

# Honorifics: a closed class of English words, not a list of names.
TITLES = frozenset(
    [
        "dr",
        "doctor",
        "mr",
        "mrs",
        "ms",
        "miss",
        "mx",
        "prof",
        "professor",
        "sir",
        "dame",
        "lady",
        "lord",
        "rev",
    ]
)


@cache
def _namer() -> NickNamer:
    return NickNamer()


@dataclass(frozen=True)
class PersonName:
    first: str | None  # a given name, a nickname or an initial ("a")
    last: str | None  # a surname or its initial ("c")

    @classmethod
    def parse(cls, normalized: str) -> PersonName | None:
        """First and last word, titles dropped: "dr chen" has only a surname, "chen" only a
        given name (said alone, a name is a given name far more often in chat)."""
        words = normalized.split()
        titled = bool(words) and words[0] in TITLES
        words = [w for w in words if w not in TITLES]
        if not words or not all(w.isalpha() for w in words):
            return None
        if len(words) == 1:
            return cls(None, words[0]) if titled else cls(words[0], None)
        return cls(words[0], words[-1])


def _initial_of(a: str, b: str) -> bool:
    return len(a) == 1 and len(b) > 1 and b.startswith(a)


def given_names_match(a: str, b: str) -> bool:
    """The same given name, an initial of it, or a nickname of it either way (Bob ↔ Robert,
    Bobby ↔ Robert, Liz ↔ Elizabeth)."""
    if a == b or _initial_of(a, b) or _initial_of(b, a):
        return True
    namer = _namer()
    return b in namer.nicknames_of(a) or a in namer.nicknames_of(b)


def is_known_given_name(name: str) -> bool:
    """Whether the nickname dataset knows `name` as a given name or a nickname of one."""
    namer = _namer()
    return bool(namer.nicknames_of(name) or namer.canonicals_of(name))


def surnames_match(a: str, b: str) -> bool:
    return a == b or _initial_of(a, b) or _initial_of(b, a)


def may_be_same_person(a: str, b: str) -> bool:
    """Whether two different normalised names can name one person with nothing contradicting:
    every part both give agrees (a given name or its nickname or initial, a surname or its
    initial), and they share at least one part."""
    pa, pb = PersonName.parse(a), PersonName.parse(b)
    if pa is None or pb is None or a == b:
        return False
    shared = False
    if pa.first and pb.first:
        if not given_names_match(pa.first, pb.first):
            return False
        shared = True
    if pa.last and pb.last:
        if not surnames_match(pa.last, pb.last):
            return False
        shared = True
    # initials alone ("a c" against "alice chen") say too little
    return shared and _informative(pa) and _informative(pb)


def _informative(p: PersonName) -> bool:
    return any(part and len(part) > 1 for part in (p.first, p.last))


def surnames_conflict(a: str, b: str) -> bool:
    """Both names give a surname and they differ ("Alice Chen" / "Alice Cheng")."""
    pa, pb = PersonName.parse(a), PersonName.parse(b)
    return bool(pa and pb and pa.last and pb.last and not surnames_match(pa.last, pb.last))


def fits(name: str, known: set[str]) -> bool:
    """Whether `name` may be the person known under the names `known`: it may be one of them,
    and no surname of theirs contradicts it ("Bob Miller" is not the "Robert Chen" also
    called "Bobby")."""
    return any(may_be_same_person(name, n) for n in known) and not any(
        surnames_conflict(name, n) for n in known
    )


def lookup_keys(normalized: str) -> tuple[list[str], list[str]]:
    """What to look the agent's people up by: given names (the name's own, its nicknames and
    the names it is a nickname of) and surnames."""
    p = PersonName.parse(normalized)
    if p is None:
        return [], []
    firsts: set[str] = set()
    if p.first:
        namer = _namer()
        firsts = {p.first} | namer.nicknames_of(p.first) | namer.canonicals_of(p.first)
    return sorted(firsts), [p.last] if p.last and len(p.last) > 1 else []
