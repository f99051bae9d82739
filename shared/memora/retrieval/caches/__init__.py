"""What a query process holds in memory between searches, behind one object (`ReadCaches`) the
query service owns and its retrievers share. Each is exact: a search first brings what it
uses up to date with what was written since it was read (one index range on a `written`
column, migrations 0023–0028), and what cannot be brought up to date is read whole again.
The figures behind each are in docs/retrieval.md, "What the query service holds".

- `mentions` (`mentions`, `mention_vectors`): a named entity's mention signatures, and the
  embeddings searches compared. Stale when a mention is written, deleted or moved; learnt from
  `unit_entities.written` at or after the read's snapshot xmin and `entities.mentions_removed`
  (the triggers of migration 0023).
- `passing` (`passing_units`): the units passing a narrow filter, with their embeddings, ranked
  exactly in memory. Stale when a unit is written, or a vector or filter column removed or
  changed; learnt from `memory_vectors.written` and `vector_removals` (0024).
- `terms` (`filter_terms`): the keyword index (postings, lengths) of the units passing a narrow
  filter. Stale as `passing` is, and when a unit's text is rewritten (written with its vector
  row, 0028).
- `failing` (`failing_units`): the few units failing a broad filter. Stale when a unit is
  written or updated; learnt from `memory_vectors.written`, with each row's verdict.

Every entry is also read whole again `ttl` seconds after its last whole read (the settings
`*_ttl_seconds`), and the least recently used go first past their share of memory
(`filter_cache_mb`: 5/8 passing, 1/4 terms, 1/8 failing; `entity_signature_cache_mb`).
`filter_holder` is the bookkeeping the per-filter entries share.
Whole reads of per-filter entries and of the mentions' embeddings run on one background thread
(`read_later`, `hold_mentions_later`). The graph's links are not held: reading an agent's
whole table cost more, on a cold agent's first searches, than warm searches gained (issue 55).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memora.basics.config import Settings
from memora.db.pool import Pool
from memora.retrieval.caches.failing_units import FailingUnits
from memora.retrieval.caches.filter_holder import FilterHolder
from memora.retrieval.caches.filter_terms import FilterTerms
from memora.retrieval.caches.mentions import MentionSignatures, Unheld
from memora.retrieval.caches.passing_units import PassingUnits
from memora.retrieval.types import SearchScope

log = logging.getLogger(__name__)


class ReadCaches:
    """The query process's caches (the module's table); a cache set to 0 MB is None and its
    retrievers read PostgreSQL."""

    def __init__(self, settings: Settings, pool: Pool) -> None:
        s = settings
        self.pool = pool
        self.mentions = MentionSignatures(
            s.entity_signature_cache_mb << 20, s.entity_signature_ttl_seconds
        )
        held, ttl = s.filter_cache_mb << 20, s.filter_cache_ttl_seconds
        self.passing = PassingUnits(held * 5 // 8, ttl) if held > 0 else None
        self.terms = FilterTerms(held // 4, ttl) if held > 0 else None
        self.failing = FailingUnits(held // 8, ttl) if held > 0 else None
        self._background = ThreadPoolExecutor(1, thread_name_prefix="memora-filter-read")

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=True)

    def footprint(self) -> dict[str, tuple[int, int]]:
        """Each cache's entries and bytes (those turned on): the query service's gauges."""
        caches: dict[str, MentionSignatures | PassingUnits | FilterHolder[Any] | None] = {
            "mentions": self.mentions,
            "passing": self.passing,
            "terms": self.terms,
            "failing": self.failing,
        }
        return {name: cache.footprint() for name, cache in caches.items() if cache is not None}

    def read_later(self, holder: FilterHolder[Any], scope: SearchScope) -> None:
        """`holder`'s entry for the scope's filter, read whole in the background (after its
        `wanted`); until it is in, the searches go on without it."""
        self._background.submit(self._read_whole, holder, scope)

    def hold_mentions_later(self, tenant_id: str, unheld: list[Unheld]) -> None:
        """The embeddings of mentions a search compared in PostgreSQL, read for the next."""
        self._background.submit(self._hold_mentions, tenant_id, unheld)

    def settled(self) -> None:
        """Waits for the background reads queued so far (for benchmarks and tests)."""
        self._background.submit(lambda: None).result()

    def _read_whole(self, holder: FilterHolder[Any], scope: SearchScope) -> None:
        try:
            with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
                holder.load(conn, scope)
        except Exception:  # tried again from a later search
            log.exception("reading %s for a filter", type(holder).__name__)

    def _hold_mentions(self, tenant_id: str, unheld: list[Unheld]) -> None:
        try:
            with self.pool.tenant_connection(tenant_id, autocommit=True) as conn:
                self.mentions.hold(conn, unheld)
        except Exception:  # the next searches compare them in PostgreSQL and try again
            log.exception("reading the embeddings of mentions")
