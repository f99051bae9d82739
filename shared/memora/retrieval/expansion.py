"""Query expansion as small pure functions: the phrases of a query that may name an entity, and
the query with those names taken out (what it asks about them).

A question about someone ("What activities does Melanie partake in?") shares the name with
every turn that mentions them and little else with the turns that answer it. The entity
retriever therefore finds the units that mention the named entities and ranks them by
similarity to the rest of the question ("What activities does partake in?").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memora.nlp.names import normalize_name

_WORD = re.compile(r"[\w&+-]+(?:['’][\w]+)*")
MAX_PHRASE_WORDS = 3


def phrases(query: str, max_words: int = MAX_PHRASE_WORDS) -> list[str]:
    """The query's runs of 1..`max_words` consecutive words that may name an entity,
    normalised as entity names are stored (lower case, possessive and punctuation dropped), in
    order, without repeats. Names are capitalised: when the query has capitals, only runs of
    capitalised words (or numbers) count, so "dance" in "Jon's dance studio" names nothing even
    if some memory made an entity of "Dance"; an all lower-case query offers every run."""
    words = _WORD.findall(query)
    cased = any(c.isupper() for c in query)
    seen: dict[str, None] = {}
    for size in range(1, max_words + 1):
        for start in range(len(words) - size + 1):
            run = words[start : start + size]
            if cased and not all(w[0].isupper() or w[0].isdigit() for w in run):
                continue
            name = normalize_name(" ".join(run))
            if name:
                seen.setdefault(name, None)
    return list(seen)


def without_names(query: str, names: Iterable[str]) -> str:
    """The query with every whole-word occurrence of `names` (and their possessive) removed,
    longest name first; the query itself when nothing else would be left."""
    text = query
    for name in sorted(set(names), key=len, reverse=True):
        words = r"\s+".join(re.escape(w) for w in name.split())
        text = re.sub(rf"(?<![\w]){words}(?:['’]s)?(?![\w])", " ", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+", " ", text).strip()
    return text if _WORD.search(text) else query
