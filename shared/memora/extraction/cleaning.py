"""Entity spans as people write them in chat, made into names (issue 32).

spaCy's small model, trained on edited text, tags chat badly: a greeting fuses with the name
after it ("Bye Caroline", "ya, Melanie"), interjections and capitalised sentence openers become
people ("Glad", "Nah", "Dance is my go-to"), weekday abbreviations become names ("Tues").

- `strip_span` trims the edges of a span: punctuation, quotes, dashes, a possessive, and the
  words of chat that are never part of a name (greetings, interjections, discourse markers, chat
  abbreviations; lower-case stop words such as "the");
- `is_name` rejects what is left when it is no name: only chat words, a weekday or a month
  abbreviation (dates belong to the temporal machinery), no letter, one character;
- `is_common_word` rejects a single word capitalised only because it opens a sentence, when the
  same text also uses it in lower case (and never capitalised inside a sentence);
- `SpeakerNames` maps a conversation's speaker names, and every mention of them (exact, or a
  short form of the first name such as "Mel" for "Melanie"), to one PERSON name.

There is no maintained interjection list on PyPI; `INTERJECTIONS` is the closed class of English
interjections, greetings, discourse markers and chat contractions, not a list of names.
"""

from __future__ import annotations

import calendar
import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from memora.extraction.base import Mention
from memora.nlp import person_names
from memora.nlp.names import normalize_name


def _english_stop_words() -> frozenset[str]:
    """spaCy's English stop words, read from their module without importing the `spacy`
    package: that import pulls thinc and torch, seconds of CPU for a process that needs neither
    (the entity, link and opinion workers, beat)."""
    spacy = importlib.util.find_spec("spacy")  # finds the package without importing it
    assert spacy is not None and spacy.origin is not None, "spaCy is a dependency"
    path = Path(spacy.origin).parent / "lang" / "en" / "stop_words.py"
    spec = importlib.util.spec_from_file_location("memora_spacy_en_stop_words", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STOP_WORDS)


STOP_WORDS = _english_stop_words()

_INTERJECTIONS = """
hi hey heya hello hiya howdy yo bye byee goodbye cya ya yah yep yup yeah yes no nope nah
oh ohh ah ahh aw aww awww wow whoa woah woo woohoo yay yey yippee hooray ugh eh meh hmm hm
mm um uh er huh oops ouch phew ok okay k kk lol lmao rofl omg btw fyi imo imho tbh idk
brb ttyl np thx ty tysm congrats congratulations thanks cheers welcome please sorry anyway
anyways alright well so haha hahaha hehe wanna gonna gotta lemme gimme kinda sorta dunno
y'all
"""
# Words of chat that are a whole message's filler but may begin a real name ("Good Morning
# America"): a span made only of them is no name, they are not stripped from a longer one.
_FILLER = """
cool nice great awesome amazing sure totally definitely absolutely indeed glad happy really
true agreed same good morning afternoon evening night dear
"""
INTERJECTIONS = frozenset(_INTERJECTIONS.split())
CHAT_WORDS = INTERJECTIONS | frozenset(_FILLER.split())

_WEEKDAYS = {d.lower() for d in calendar.day_name} | {d.lower() for d in calendar.day_abbr}
_MONTH_ABBR = {m.lower() for m in calendar.month_abbr if m}
DATE_WORDS = frozenset(_WEEKDAYS | _MONTH_ABBR | {"tues", "thur", "thurs", "weds", "sept"})
_DATE_MODIFIERS = frozenset({"last", "next", "this", "on", "every", "early", "late", "mid"})

_EDGE = "\"'“”‘’`´-–—_,.;:!?()[]{}<>*~/\\|#@ \t\n"
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$", re.IGNORECASE)
_TOKEN = re.compile(r"[^\s,;:!?]+")
_LETTER = re.compile(r"[^\W\d_]")
_LOWER_WORD = re.compile(r"(?<![\w'’])([a-z][a-z'’]*)(?![\w'’])")


def _bare(token: str) -> str:
    return token.strip(_EDGE).lower().replace("’", "'")


def _droppable(token: str) -> bool:
    bare = _bare(token)
    if not bare or not _LETTER.search(bare):
        return True
    if bare in INTERJECTIONS:
        return True
    # "the", "a", "my": dropped at the edges only when written lower case ("The Lean Startup")
    return token.strip(_EDGE).islower() and bare in STOP_WORDS


def strip_span(text: str) -> str:
    """The name inside a span: "Bye Caroline" → "Caroline", "Ed Sheeran's" → "Ed Sheeran"."""
    tokens = list(_TOKEN.finditer(text))
    while tokens and _droppable(tokens[0].group()):
        tokens.pop(0)
    while tokens and _droppable(tokens[-1].group()):
        tokens.pop()
    if not tokens:
        return ""
    span = text[tokens[0].start() : tokens[-1].end()]
    previous = None
    while span != previous:
        previous = span
        span = _POSSESSIVE.sub("", span.strip(_EDGE)).strip(_EDGE)
    return " ".join(span.split())


def is_date(text: str) -> bool:
    """A weekday or an abbreviated month, alone or with "last"/"next"/...: "Tues", "Last Fri"."""
    words = [w.strip(".") for w in text.lower().split()]
    return any(w in DATE_WORDS for w in words) and all(
        w in DATE_WORDS or w in _DATE_MODIFIERS for w in words
    )


def is_name(text: str) -> bool:
    """Whether a cleaned span can be an entity at all."""
    if len(text) < 2 or not _LETTER.search(text):
        return False
    words = text.split()
    if all(_bare(w) in CHAT_WORDS or _bare(w) in STOP_WORDS for w in words):
        return False
    return not is_date(text)


def lower_case_words(texts: Iterable[str]) -> frozenset[str]:
    """Words the texts write in lower case (a word written so is, there, no name)."""
    return frozenset(m.group(1) for t in texts for m in _LOWER_WORD.finditer(t))


def is_common_word(name: str, sentence_initial: bool, lower_words: frozenset[str]) -> bool:
    """A single word capitalised only because it opens a sentence: "Dance is my go-to" where
    the same conversation says "I love to dance"."""
    if not sentence_initial or " " in name:
        return False
    word = name.lower().replace("’", "'")
    return word in lower_words or word in STOP_WORDS


@dataclass
class SpeakerNames:
    """The speakers of a conversation, each one PERSON entity under their clean name."""

    names: dict[str, str] = field(default_factory=dict)  # normalised → clean

    @classmethod
    def of(cls, speakers: Iterable[str | None]) -> SpeakerNames:
        clean = (strip_span(s) for s in speakers if s)
        return cls({normalize_name(s): s for s in clean if s and is_name(s)})

    def find(self, name: str) -> str | None:
        """The speaker `name` refers to: the same name, or a short form of the first name
        ("Mel", "Caro", "Bob" for Robert, the typo "Mell" for Melanie); None when it is no
        speaker or could be several."""
        key = normalize_name(name)
        if not key:
            return None
        if key in self.names:
            return self.names[key]
        if " " not in key and len(key) >= 3:
            found = {s for k, s in self.names.items() if _short_form(key, k.split()[0])}
            if len(found) == 1:
                return found.pop()
        return None

    def mention(self, mention: Mention) -> Mention:
        speaker = self.find(mention.name)
        return Mention(speaker, "PERSON") if speaker else mention


def _short_form(word: str, first: str) -> bool:
    """`word` shortens the given name `first`: a prefix, a nickname (memora.nlp.person_names),
    or, when `word` is no given name of its own, a prefix with one letter mistyped ("Mell")."""
    if first.startswith(word) or person_names.given_names_match(word, first):
        return True
    return (
        len(word) >= 4
        and len(first) > len(word)
        and not person_names.is_known_given_name(word)
        and Levenshtein.distance(word, first[: len(word)]) <= 1
    )


def clean_mentions(mentions: Iterable[Mention], speakers: SpeakerNames) -> list[Mention]:
    """Mentions with clean names, non-names dropped, speakers as PERSON; order kept, no
    duplicates. For mentions that come as strings (an LLM's, or NER without the sentence)."""
    out: dict[str, Mention] = {}
    for m in mentions:
        name = strip_span(m.name)
        if not is_name(name):
            continue
        cleaned = speakers.mention(Mention(name, m.entity_type))
        out.setdefault(normalize_name(cleaned.name), cleaned)
    return list(out.values())
