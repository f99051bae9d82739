"""Entity names from the surface forms that named an entity (issue 32, items 4 and 5).

An entity keeps how often each surface form named it (`entities.name_counts`); its display name
is the most frequent form, ties going to the longer (a full name over a first name), then the
first in alphabetical order, the same rule the store applies as mentions accrue
(memora.store.entities.link_units). `clean_counts` re-cleans forms stored by an older version
with today's span cleaning, noise filter and speaker rule (memora.extraction.cleaning).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from psycopg import Connection

from memora.extraction.cleaning import SpeakerNames, is_name, strip_span
from memora.nlp.names import normalize_name
from memora.store import entity_names as store
from memora.store.entity_names import StoredEntity


def display_name(counts: Mapping[str, int]) -> str:
    return min(counts, key=lambda name: (-counts[name], -len(name), name))


def clean_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """The forms cleaned ("Bye Caroline" → "Caroline"), non-names dropped, counts summed."""
    out: Counter[str] = Counter()
    for form, n in counts.items():
        clean = strip_span(form)
        if is_name(clean) and normalize_name(clean):
            out[clean] += n
    return dict(out)


def merged_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for c in counts:
        out.update(c)
    return dict(out)


def aliases(counts: Mapping[str, int], key: str) -> list[str]:
    """The normalised forms other than the entity's own key, sorted."""
    return sorted({normalize_name(f) for f in counts} - {key, ""})


Change = Literal["renamed", "merged", "removed", "tidied"]


def reclean(
    conn: Connection[Any], agent_key: str, e: StoredEntity, speakers: SpeakerNames
) -> Change | None:
    """Re-clean one stored entity (caller holds the agent's resolution lock and commits):
    noise is removed with its references and links; a speaker's name or short form becomes
    that speaker, a PERSON; an entity whose clean name another entity of the agent already has
    is merged into it; else it takes its clean name, forms and aliases. None when it is clean
    already."""
    raw = e.counts()
    clean = clean_counts(raw)
    if not clean:
        store.remove(conn, e.id)
        return "removed"
    speaker = speakers.find(display_name(clean))

    def final(form: str) -> str:
        name = strip_span(form)
        return speaker if speaker and speakers.find(name) == speaker else name

    store.clean_mentions(conn, e.id, [(form, final(form)) for form in raw])
    own_aliases = [a for a in [*e.aliases, *clean] if is_name(strip_span(a))]
    clean = merged_counts(*({final(f): n} for f, n in clean.items()))
    entity_type = "PERSON" if speaker else e.entity_type
    other = store.namesake(conn, agent_key, e.id, entity_type, normalize_name(display_name(clean)))
    if other is not None:
        counts = merged_counts(clean_counts(other.counts()), clean)
        names = _names(counts, [*other.aliases, *own_aliases], other.entity_type)
        store.merge(conn, e.id, other.id, names)
        return "merged"
    names = _names(clean, own_aliases, entity_type)
    stored = store.Names(
        e.canonical_name, e.normalized_name, sorted(e.aliases), e.name_counts, e.entity_type
    )
    if names == stored:
        return None
    store.rename(conn, e.id, names)
    return "renamed" if names.canonical != e.canonical_name else "tidied"


def _names(
    counts: Mapping[str, int], extra_aliases: Sequence[str], entity_type: str
) -> store.Names:
    canonical = display_name(counts)
    normalized = normalize_name(canonical)
    forms = {normalize_name(strip_span(a)) for a in extra_aliases} | set(aliases(counts, ""))
    return store.Names(
        canonical, normalized, sorted(forms - {normalized, ""}), dict(counts), entity_type
    )
