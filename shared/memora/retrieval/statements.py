"""How much of a turn states something: the share of its words in sentences that neither ask
("What kinda jobs are you thinking of?") nor only exclaim ("Wow, Ines!", "Congrats!"). A
conversation answers a statement with questions and praise that repeat its words and name
its speaker; what they say of that person is what the statement said (docs/retrieval.md,
"Issue 59: turns that ask or exclaim"). Pure and cheap (one pass of a regex over a text, run
on every candidate of a search): punctuation and word counts, not words of one language.
"""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
SHORT_EXCLAMATION = 4  # words: "That's so cool!", "Thanks, Melanie!"


def statement_share(text: str, speaker: str | None = None) -> float:
    """The share of `text`'s words (split on white space) in sentences that state something,
    in [0, 1]: a sentence ending in "?" asks, one of at most SHORT_EXCLAMATION words ending in
    "!" exclaims; the speaker's "Name:" before a transcript turn is not counted. 0 for a text
    without words."""
    if speaker and text.startswith(f"{speaker}:"):
        text = text[len(speaker) + 1 :]
    total = stated = 0
    for sentence in _SENTENCE.findall(text):
        words = len(sentence.split())
        total += words
        end = sentence[-1]
        if end == "?" or (end == "!" and words <= SHORT_EXCLAMATION):
            continue
        stated += words
    return stated / total if total else 0.0
