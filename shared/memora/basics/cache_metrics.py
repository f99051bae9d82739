"""The query process's read caches' metrics (memora.retrieval.caches): how each was read, and
what each holds. Part of `memora.basics.metrics` (which imports them all), apart for its size."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Gauge

from memora.basics.exposition import NAMESPACE

__all__ = [
    "FILTER_CACHE_READS",
    "FILTER_FAILING_READS",
    "FILTER_TERMS_READS",
    "MENTION_CACHE_READS",
    "READ_CACHE_BYTES",
    "READ_CACHE_ENTRIES",
    "record_read_caches",
]

FILTER_CACHE_READS = Counter(
    "filter_cache_reads",
    "Reads of the units a query process holds per filter (memora.retrieval.caches.passing_units): "
    "whole (a filter's first held search, after a removal, after the TTL) or changes (what was "
    "written since; the rest of the ranking is the process's own)",
    ["read"],
    namespace=NAMESPACE,
)
MENTION_CACHE_READS = Counter(
    "mention_cache_reads",
    "Reads of the named entities' mentions a query process holds "
    "(memora.retrieval.caches.mentions), an entity each: whole (its first search, after it lost a "
    "mention, after the TTL) or changes (what was written since); embeddings: the embeddings of "
    "mentions read in the background after searches compared them in PostgreSQL, one each",
    ["read"],
    namespace=NAMESPACE,
)
FILTER_TERMS_READS = Counter(
    "filter_terms_reads",
    "Reads of the keyword index of a narrow filter's units that a query process holds "
    "(memora.retrieval.caches.filter_terms): whole (in the background, from a filter's second "
    "search, after a removal and after the TTL) or changes (what was written since, on each "
    "search)",
    ["read"],
    namespace=NAMESPACE,
)
FILTER_FAILING_READS = Counter(
    "filter_failing_reads",
    "Reads of the units failing a broad filter that a query process holds "
    "(memora.retrieval.caches.failing_units): whole (in the background, from a filter's second "
    "search and after the TTL) or changes (what was written since, on each search)",
    ["read"],
    namespace=NAMESPACE,
)

READ_CACHE_BYTES = Gauge(
    "read_cache_bytes",
    "Bytes a query process holds in each of its read caches (memora.retrieval.caches: "
    "mentions, passing, terms, failing; bounded by MEMORA_ENTITY_SIGNATURE_CACHE_MB and "
    "MEMORA_FILTER_CACHE_MB), read at scrape time, summed over live processes",
    ["cache"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)
READ_CACHE_ENTRIES = Gauge(
    "read_cache_entries",
    "Entries a query process holds in each read cache (an entity's mentions, a filter's units), "
    "read at scrape time, summed over live processes",
    ["cache"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)


def record_read_caches(held: Mapping[str, tuple[int, int]]) -> None:
    """The query process's read caches: entries and bytes per cache."""
    for cache, (entries, size) in held.items():
        READ_CACHE_ENTRIES.labels(cache).set(entries)
        READ_CACHE_BYTES.labels(cache).set(size)
