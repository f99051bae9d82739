"""The default extractor, no LLM: one unit per conversational turn, kept verbatim.

Turns are found by "Speaker: text" lines (or the item's `speaker`); spaCy splits sentences and
finds entities; a turn made only of greetings, filler or fragments is dropped; dates such as
"yesterday" or "last May" are normalised against the item's timestamp into occurred_start/end.
Long passages without turns are cut into passages of a few sentences. Each unit gets a
category guessed from its cue words (extraction.policy.guess_category) and confidence 1.0.
It tags no sensitive category: only the LLM extractor does (docs/llm.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memora.extraction.base import Fact, Mention, SourceItem
from memora.extraction.cleaning import (
    SpeakerNames,
    is_common_word,
    is_name,
    lower_case_words,
    strip_span,
)
from memora.extraction.policy import guess_category
from memora.nlp.language import ENTITY_TYPES, TEMPORAL_LABELS, parse, tagged_proper_noun
from memora.nlp.names import normalize_name
from memora.nlp.temporal import resolve_expression

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span

TURN_LINE = re.compile(r"^\s*([A-Z][\w.'\- ]{0,40}?)\s*:\s+(\S.*)$")
AGENT_SPEAKERS = frozenset({"assistant", "agent", "ai", "bot", "system"})
PASSAGE_CHARS = 600
# A unit is the speaker's own words, not an interpretation of them: nothing to be unsure of.
VERBATIM_CONFIDENCE = 1.0

_NOISE_TEXT = """
hi hey hello hiya yo howdy thanks thank thx ty you ok okay k kk lol lmao haha hahaha
hehe bye goodbye cya see ya later cool nice great awesome sure yes yeah yep yup no nope
nah hmm hm mm uh um oh ah wow good morning afternoon evening night gn gm cheers welcome
np alright right totally indeed true agreed same too so much very really definitely
absolutely glad happy to hear that it is this sounds
"""
_NOISE_WORDS = frozenset(_NOISE_TEXT.split())
_NOISE_PHRASES = frozenset(
    {
        "how are you",
        "how have you been",
        "how are things",
        "what's up",
        "whats up",
        "how's it going",
        "hows it going",
        "good to see you",
        "nice to meet you",
        "talk to you later",
        "talk soon",
        "take care",
        "see you soon",
        "see you later",
        "good to hear from you",
        "long time no see",
        "how about you",
        "and you",
    }
)
_WORD = re.compile(r"[a-z']+")


def entity_mentions(
    doc: Doc, speakers: SpeakerNames, lower_words: frozenset[str] = frozenset()
) -> list[Mention]:
    """The named entities of a parsed turn as clean mentions (memora.extraction.cleaning): the
    span trimmed, non-names and sentence openers that are common words dropped, every mention
    of a speaker their PERSON entity."""
    found: dict[str, Mention] = {}
    for ent in doc.ents:
        if ent.label_ not in ENTITY_TYPES or _G_DROPPED.search(
            doc.text[ent.start_char : ent.end_char + 1]
        ):
            continue
        name = strip_span(ent.text)
        if not is_name(name):
            continue
        speaker = speakers.find(name)
        if speaker is None and not _is_named(doc, ent, name, speakers, lower_words):
            continue
        mention = Mention(speaker, "PERSON") if speaker else Mention(name, ENTITY_TYPES[ent.label_])
        found.setdefault(normalize_name(mention.name), mention)
    return list(found.values())


_G_DROPPED = re.compile(r"\win['’]$")  # "Startin'", "livin'": a verb, written as spoken


def _is_named(
    doc: Doc, ent: Span, name: str, speakers: SpeakerNames, lower_words: frozenset[str]
) -> bool:
    """No name: a span all in lower case ("the kids & work"), or a single word that opens its
    sentence (after greetings and a speaker addressed: "Wow Jon, Dance is ...") and is a common
    word there (written lower case elsewhere, or not tagged NNP)."""
    if name == name.lower():
        return False
    start = ent.start_char + max(ent.text.find(name.split()[0]), 0)
    opener = strip_span(doc.text[ent.sent.start_char : start])
    initial = all(speakers.find(w) for w in opener.replace(",", " ").split())
    if not initial or " " in name:
        return True
    if is_common_word(name, initial, lower_words):
        return False
    return tagged_proper_noun(doc.text[start : ent.sent.end_char])


@dataclass(frozen=True)
class Turn:
    item: SourceItem
    speaker: str | None
    text: str


def is_noise(sentence: str, names: frozenset[str] = frozenset()) -> bool:
    """Greetings, filler and fragments: nothing a later question could be about."""
    lowered = sentence.lower().strip(" \t!?.,;:~-*")
    if lowered in _NOISE_PHRASES:
        return True
    words = [w for w in _WORD.findall(lowered) if w not in names]
    if not words:
        return True
    return all(w in _NOISE_WORDS for w in words)


def split_turns(item: SourceItem) -> list[Turn]:
    if item.speaker:
        return [Turn(item, item.speaker.strip(), item.content.strip())]
    turns: list[Turn] = []
    loose: list[str] = []
    for line in item.content.splitlines():
        match = TURN_LINE.match(line)
        if match:
            turns.append(Turn(item, match.group(1).strip(), match.group(2).strip()))
        elif line.strip() and turns:
            previous = turns[-1]
            turns[-1] = Turn(item, previous.speaker, f"{previous.text}\n{line.strip()}")
        elif line.strip():
            loose.append(line.strip())
    if loose and not turns:
        return [Turn(item, None, "\n".join(loose))]
    if loose:  # text before the first "Speaker:" line stays, as its own turn
        turns.insert(0, Turn(item, None, "\n".join(loose)))
    return turns


def _passages(sentences: list[str]) -> Iterator[str]:
    chunk: list[str] = []
    size = 0
    for sentence in sentences:
        if chunk and size + len(sentence) > PASSAGE_CHARS:
            yield " ".join(chunk)
            chunk, size = [], 0
        chunk.append(sentence)
        size += len(sentence) + 1
    if chunk:
        yield " ".join(chunk)


class LocalExtractor:
    name = "local"

    def __init__(self, agent_names: frozenset[str] = AGENT_SPEAKERS) -> None:
        self.agent_names = agent_names

    def _fact_type(self, agent_id: str, turn: Turn) -> str:
        role = str(turn.item.metadata.get("role", "")).lower()
        speaker = (turn.speaker or "").lower()
        if role in self.agent_names or speaker in self.agent_names or speaker == agent_id.lower():
            return "agent"
        return "world"

    @staticmethod
    def texts(items: Iterable[SourceItem]) -> list[str]:
        """What `extract` parses of these items: their turns (memora.nlp.language.parsing_ahead)."""
        return [turn.text for item in items for turn in split_turns(item)]

    def extract(
        self, agent_id: str, items: list[SourceItem], preceding: Sequence[SourceItem] = ()
    ) -> list[Fact]:
        turns = [turn for item in items for turn in split_turns(item)]
        speakers = SpeakerNames.of(
            t.speaker for t in turns if t.speaker and t.speaker.lower() not in self.agent_names
        )
        lower_words = lower_case_words(
            [t.text for t in turns] + [t.text for p in preceding for t in split_turns(p)]
        )
        facts: list[Fact] = []
        seq_by_item: dict[int, int] = {}
        for turn, doc in zip(turns, parse([t.text for t in turns]), strict=True):
            names = frozenset(
                w for e in doc.ents if e.label_ == "PERSON" for w in _WORD.findall(e.text.lower())
            )
            sentences = [s.text.strip() for s in doc.sents if s.text.strip()]
            if all(is_noise(s, names) for s in sentences):
                continue
            mentions = entity_mentions(doc, speakers, lower_words)
            speaker = speakers.find(turn.speaker or "")
            if speaker and turn.speaker and turn.speaker.lower() not in self.agent_names:
                mentions.insert(0, Mention(speaker, "PERSON"))
            occurred = None
            for ent in doc.ents:
                if ent.label_ in TEMPORAL_LABELS:
                    occurred = resolve_expression(ent.text, turn.item.event_date)
                    if occurred:
                        break
            bodies = (
                [turn.text] if len(turn.text) <= 2 * PASSAGE_CHARS else list(_passages(sentences))
            )
            for body in bodies:
                seq = seq_by_item.get(turn.item.index, 0)
                seq_by_item[turn.item.index] = seq + 1
                metadata = dict(turn.item.metadata)
                if turn.speaker:
                    metadata["speaker"] = turn.speaker
                facts.append(
                    Fact(
                        item_index=turn.item.index,
                        seq=seq,
                        text=f"{turn.speaker}: {body}" if turn.speaker else body,
                        fact_type=self._fact_type(agent_id, turn),
                        event_date=turn.item.event_date,
                        mentioned_at=turn.item.event_date,
                        occurred_start=occurred[0] if occurred else None,
                        occurred_end=occurred[1] if occurred else None,
                        context=turn.item.context,
                        metadata=metadata,
                        mentions=list(dict.fromkeys(mentions)),
                        category=guess_category(body),
                        confidence=VERBATIM_CONFIDENCE,
                    )
                )
        return facts
