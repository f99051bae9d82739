"""Whether a fact is a complete statement (seed 000 §2.2 "Completeness Validation": subject and
verb), read from spaCy's dependency parse: every sentence of the fact has a verb (or an
auxiliary) and a subject governed by it ("Loves hiking.", "Alice's new job at Google.",
"Peanut allergy." are not; "There is a market…" is, through its expletive subject).

The LLM extractor re-asks once for the facts that fail (extraction.llm); what still fails is
dropped by the extract stage's policy, counted as `facts_dropped_incomplete`. The labelled set
tests/data/fact_completeness.jsonl measures the check (bench/fact_completeness.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from memora.nlp.language import load_parser
from memora.nlp.llm import LLMClient, LLMError, Message

if TYPE_CHECKING:
    from spacy.tokens import Span

log = logging.getLogger("memora.extraction.completeness")

SUBJECTS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
VERBS = frozenset({"VERB", "AUX"})


def _complete(sentence: Span) -> bool:
    """A verb with a subject of its own in the sentence (a subordinate clause counts only with
    its main clause: "Because of the storm." has neither)."""
    for token in sentence:
        if token.dep_ in SUBJECTS and token.head.pos_ in VERBS | {"ADJ", "NOUN", "PROPN"}:
            head = token.head
            if head.pos_ in VERBS or any(c.pos_ == "AUX" for c in head.children):
                return True
    return False


def incomplete(texts: Sequence[str]) -> list[int]:
    """The positions of the texts some sentence of which lacks a subject or a verb."""
    docs = load_parser().pipe(texts)
    return [
        i
        for i, doc in enumerate(docs)
        if not any(t.is_alpha for t in doc) or not all(_complete(s) for s in doc.sents)
    ]


# ------------------------------------------------------------------------------ re-ask
MARKER = "You repair extracted memories"
PROMPT = """{marker}. Each numbered fact below was extracted from the items that follow it but
is not a complete statement: it lacks a subject or a verb. Rewrite each as one complete,
self-contained statement (name who or what it is about, no pronouns, keep its dates), or give
"text": null when it holds nothing worth remembering. Answer with JSON:
{{"facts": [{{"index": <the fact's number>, "text": "<the statement>" or null}}]}}."""


class Rewrite(BaseModel):
    index: int
    text: str | None = Field(default=None, max_length=4000)


class Rewrites(BaseModel):
    facts: list[Rewrite]


@dataclass(frozen=True)
class Repair:
    rewritten: dict[int, str]  # position → the complete statement
    dropped: frozenset[int]  # positions the model said hold nothing


def reask(client: LLMClient, facts: dict[int, str], items: str) -> Repair:
    """One request for the incomplete `facts` (position → text) of an answer extracted from
    `items`. The model's judgement stands (the parse only decides whom to ask about: a rewrite
    is taken as it comes, a fact it leaves out is kept as it was); when the request fails, the
    facts are kept as they were."""
    listed = "\n".join(f"[{i}] {text}" for i, text in facts.items())
    messages: list[Message] = [
        {"role": "system", "content": PROMPT.format(marker=MARKER)},
        {"role": "user", "content": f"Facts:\n{listed}\n\nItems:\n\n{items}"},
    ]
    try:
        answer = client.complete_json("extraction_completion", messages, Rewrites)
    except LLMError as exc:
        log.warning("completeness re-ask failed; facts kept", extra={"problem": str(exc)})
        return Repair({}, frozenset())
    rewritten, dropped = {}, set()
    for r in answer.facts:
        if r.index not in facts:
            continue
        text = (r.text or "").strip()
        if text:
            rewritten[r.index] = text
        else:
            dropped.add(r.index)
    return Repair(rewritten, frozenset(dropped))
