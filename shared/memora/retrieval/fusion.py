"""Fusion (seed 000 §3.2): the retrievers' lists fused by reciprocal rank, the best of them read
from the database as candidates (hydration), each with the signals the rerankers weigh.

`rrf` and `entity_aware_similarity` are pure functions over plain data; `hydrate` is the one
query of the stage; `fuse` runs the stage for one search.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg.rows import tuple_row

from memora.basics.config import Settings
from memora.db.pool import Pool
from memora.nlp.names import normalize_name
from memora.retrieval.filters import Where, id_array, scope_where
from memora.retrieval.question import AnswerType, answer_type, relation_path
from memora.retrieval.types import ArmResult, Candidate, SearchParams, SearchScope
from memora.retrieval.validity import Window, holding, status_where
from memora.store import relations

RRF_K = 60
Id = TypeVar("Id", bound=Hashable)
EntityRelevance = Literal["query", "mentions"]


def rrf(
    ranked: Mapping[str, Sequence[Id]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> dict[Id, float]:
    """Σ over lists of weight / (k + rank), rank 1-based; an id missing from a list adds 0.

    With no `weights` every list counts 1: the formula of seed 000 §3.2."""
    scores: dict[Id, float] = {}
    for name, ids in ranked.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        if w == 0:
            continue
        for rank, unit_id in enumerate(ids, start=1):
            scores[unit_id] = scores.get(unit_id, 0.0) + w / (k + rank)
    return scores


def entity_aware_similarity(
    query_sim: float, about_sim: float, names_entity: bool, mode: EntityRelevance
) -> float:
    """The semantic signal of a unit when the query names entities. `about_sim` is its
    similarity to the query without the names. "query": the plain similarity; "mentions": a
    unit that mentions a named entity is judged by what it says (`about_sim`), since the name
    is already satisfied, any other by the plain similarity, which the missing name lowers."""
    if mode == "mentions" and names_entity:
        return about_sim
    return query_sim


@dataclass(frozen=True)
class Recheck:
    """A search's filter, checked again on the candidates written by a transaction whose id is
    at least `since` (an xid: the snapshot xmin of the failing units' last read, after which
    a unit that fails it is on no list the retrievers dropped their failing units from)."""

    where: Where
    since: int

    def written_since(self, xmin: int) -> bool:
        """Whether a row's `xmin` (a 32-bit xid, wrapping) is `since` or later: within 2³¹
        of it, as PostgreSQL keeps every unfrozen xid (a frozen row's old xmin may read as
        later: checked for nothing)."""
        return (xmin - self.since) & 0xFFFFFFFF < 0x80000000


def fuse(
    pool: Pool,
    scope: SearchScope,
    p: SearchParams,
    *,
    settings: Settings,
    results: Mapping[str, ArmResult],
    query_vec: np.ndarray,
    about_vec: np.ndarray,
    entity_ids: list[UUID],
    keyword: tuple[str, dict[str, Any]],
    window: Window | None = None,
    mentioning: Callable[[str], bool] | None = None,
    recheck: Recheck | None = None,
    speakers: frozenset[str] = frozenset(),
    generation: int | None = None,
) -> list[Candidate]:
    """RRF over the retrievers' lists, then the best candidates read with their signals, on a
    connection of the scope's tenant held for that read only. `about_vec` embeds the query
    without the names of `entity_ids` (the query itself when it names none): the context
    signal and, for units that mention one of them, the semantic signal measure what they say
    against it (MEMORA_ENTITY_RELEVANCE). `keyword`: the keyword retriever's BM25 subquery
    (`KeywordIndex.lateral`). Each candidate also learns whether it names a thing of the kind
    the question asks for (`question.answer_type`). With a validity `window` (as_of, or a past
    period the query names: `validity`), superseded memories in it are candidates too, and
    under as_of only memories that held then are. `mentioning`: whether a unit mentions one of
    `entity_ids`, from their mentions held in the query service (`NamedEntities.mentioning`);
    hydration then does not look it up, unless it reads the candidates' mentions anyway (the
    question asks for a kind of entity). `recheck`: the search's filter, when the retrievers
    screened a broad one against the units held as failing it (`Matching.failing`, as of
    their refresh: a unit written since that fails it is on no such list), checked again
    on the candidates written since (`hydrate`). `speakers`: the normalised names of the
    entities the query names; a candidate whose speaker is one of them was said by the person
    asked about (`Candidate.said_by_named`). `generation`: the query's, checked by `hydrate`.
    A question that walks entity relations from `entity_ids` (`question.relation_path`) has
    their evidence marked (`Candidate.states_relation`), and hydrated where it ranks lower."""
    s = settings
    answer = answer_type(p.query)
    by_service = mentioning is not None and not answer.entity_types
    fused, ordered = _fused(results, s)
    cap = max(s.rerank_candidates, p.top_k)
    context_vec = query_vec if s.entity_relevance == "query" else about_vec
    path = relation_path(p.query) if entity_ids and s.heuristic_relation_weight else ()
    with pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
        if window is not None and window.strict and ordered:
            held = holding(conn, scope, window, ordered)
            ordered = [i for i in ordered if i in held]
        related = relations.evidence_along(conn, entity_ids, path) if path else set()
        shortlist = _shortlist(ordered, cap, related)
        found = hydrate(
            conn, scope, ids=shortlist, vector=context_vec, keyword=keyword,
            entity_ids=() if by_service else entity_ids, answer=answer, window=window,
            recheck=recheck, generation=generation,
        )  # fmt: skip
    candidates = [found[i] for i in shortlist if i in found and _wanted(p, found[i])]
    _mark(candidates, mentioning if by_service else None, speakers, related)
    if not candidates:
        return []
    _signals(candidates, results, fused, np.stack([query_vec, about_vec]), s.entity_relevance)
    return candidates


def _shortlist(ordered: list[UUID], cap: int, related: set[UUID]) -> list[UUID]:
    """The `cap` best fused units, and after them those further down that state a relation
    the question walks (`related`): a retriever listed them, the relation brings them up."""
    if not related or len(ordered) <= cap:
        return ordered[:cap]
    return ordered[:cap] + [i for i in ordered[cap:] if i in related]


def _mark(
    candidates: list[Candidate],
    mentioning: Callable[[str], bool] | None,
    speakers: frozenset[str],
    related: set[UUID],
) -> None:
    """What the query service knows of the candidates: `names_entity` by `mentioning` (when
    hydration did not look it up), `said_by_named` (the speaker is one of `speakers`, normalised
    names) and `states_relation` (in `related`)."""
    for candidate in candidates:
        if mentioning is not None:
            candidate.names_entity = mentioning(str(candidate.id))
        speaker = candidate.speaker
        candidate.said_by_named = (
            bool(speakers) and speaker is not None and normalize_name(speaker) in speakers
        )
        candidate.states_relation = candidate.id in related


def _fused(results: Mapping[str, ArmResult], s: Settings) -> tuple[dict[int, float], list[UUID]]:
    """The RRF score of every unit the retrievers listed, by its id's integer, and the units
    best first. Keyed by the ids' integers: a UUID hashes in a Python call, an int in C
    (thousands of ids a search); integer order is the ids' text order, which breaks ties."""
    ids = {i.int: i for r in results.values() for i, _ in r.ranked}
    fused = rrf(
        {n: [i.int for i, _ in r.ranked] for n, r in results.items()},
        k=s.rrf_k,
        weights=s.rrf_weights or None,
    )
    return fused, [ids[k] for k in sorted(fused, key=lambda k: (-fused[k], k))]


def _signals(
    candidates: list[Candidate],
    results: Mapping[str, ArmResult],
    fused: Mapping[int, float],
    vectors: np.ndarray,
    mode: EntityRelevance,
) -> None:
    """Each candidate's semantic signal (`vectors`: the query's embedding and the one without
    the names it names), its RRF score and its rank in each retriever's list."""
    sims = np.stack([c.embedding for c in candidates]) @ vectors.T
    for c, (query_sim, about_sim) in zip(candidates, sims.tolist(), strict=True):
        c.semantic = entity_aware_similarity(query_sim, about_sim, c.names_entity, mode)
        c.rrf = fused[c.id.int]
    wanted = {c.id.int: c for c in candidates}
    for name, r in results.items():
        for rank, (i, _) in enumerate(r.ranked, 1):
            if (ranked := wanted.get(i.int)) is not None:
                ranked.ranks[name] = rank


def _wanted(p: SearchParams, c: Candidate) -> bool:
    """recall's filters: the categories asked for, and when the memory was said."""
    if p.categories is not None and c.category not in p.categories:
        return False
    if p.said_between is not None:
        start, end = p.said_between
        if (start is not None and c.event_date < start) or (
            end is not None and c.event_date >= end
        ):
            return False
    return True


# The units next to a unit in its document: the turns before and after it (or, in a
# transcript item cut into several units, its neighbours within the item). Written as
# equalities, so that both branches are ranges of (document_pk, item_index, seq): with
# `abs(...) = 1` the index gave only the document, and each candidate read every unit of a
# long conversation (docs/retrieval.md, "Filters and fusion").
_NEXT_TO = """
    n.document_pk = m.document_pk AND n.id <> m.id AND n.embedding IS NOT NULL
    AND ((n.item_index = m.item_index AND n.seq IN (m.seq - 1, m.seq + 1))
         OR n.item_index IN (m.item_index - 1, m.item_index + 1))
"""


# What a candidate's mentions say, from one index range of its own (a unit names a few
# entities): whether one is a named entity, and whether one answers the kind of thing asked
# for. One probe a candidate for both (two before, which cost more when a kind is asked
# for; an EXISTS may be planned as a hash of the named entities' every mention), none when
# the query names no entity and asks for no kind of thing.
_MENTIONS = """(
    SELECT bool_or(ue.entity_id = ANY(%(entities)s)) AS names_entity,
           bool_or(cardinality(%(answer_types)s::text[]) > 0
                   AND ue.entity_id <> ALL(%(entities)s)
                   AND ue.mention IS DISTINCT FROM m.metadata->>'speaker'
                   AND EXISTS (SELECT 1 FROM entities e WHERE e.id = ue.entity_id
                               AND e.entity_type = ANY(%(answer_types)s::text[]))
           ) AS answer_entity
    FROM unit_entities ue
    WHERE ue.unit_id = m.id
      AND (cardinality(%(entities)s::uuid[]) > 0 OR cardinality(%(answer_types)s::text[]) > 0)
)"""


def hydrate(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    ids: Sequence[UUID],
    vector: np.ndarray,
    keyword: tuple[str, dict[str, Any]],
    entity_ids: Sequence[UUID] = (),
    answer: AnswerType = AnswerType(),
    window: Window | None = None,
    recheck: Recheck | None = None,
    generation: int | None = None,
) -> dict[UUID, Candidate]:
    """The candidates' rows (agent, fact types and active status checked again here) with their
    access counts, their BM25 score (`keyword`: the keyword retriever's LATERAL subquery and its
    parameters), their context: the best similarity to `vector` among the units next to them in
    their document, whether they mention one of `entity_ids`, and whether they hold an answer
    of the kind `answer` asks for: an entity of its types other than those the question names
    and the turn's own speaker (a person's every turn names them), or, for a time, a date the
    memory states (its occurred date). Read in binary, the embeddings as their wire form (one
    numpy view each, not pgvector's objects), the metadata as text, parsed for the kept hits
    only (`Candidate.hit`). `recheck`: a search's filter, checked again on the candidates
    written since its `since` (`Recheck`), by their xmin (read only then: one statement text
    with a recheck, one without, whatever the filter), in a statement of their own when
    there are any (rarely: a unit committed while the query was embedded). The ids are parsed
    once (`filters.id_array`) and the access counts read apart, in one pass: on statistics
    that lag the rows, the planner had each candidate parse the ids and scan the access counts
    again (docs/scaling.md, "Fresh statistics"). In the SELECT
    list of every read instead, the statement took its filter's text and was planned anew
    for it on each connection; in its WHERE clause, it was planned each search (both slower:
    docs/retrieval.md, "Filters and fusion"). `generation`: checked live in the statement's
    snapshot (`memora_embedding_live`, migration 0037: MG001 when a `memora reembed` switch
    came first), a one-time filter evaluated before any row: the retrievers' reads all ended
    before it began and generations only move forward, so when it passes, every read of the
    search compared the query with vectors of its model."""
    lateral, params = keyword
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            _hydration(lateral, window, recheck, generation is not None),
            {
                **params,
                **scope.params,
                **(window.params if window is not None else {}),
                "v": vector,
                "ids": ",".join(map(str, ids)),  # one text: a list is dumped id by id
                "entities": list(entity_ids),
                "answer_types": sorted(answer.entity_types),
                "answer_time": answer.time,
                "generation": generation,
            },
            binary=True,
        )
        .fetchall()
    )
    if recheck is not None:
        rows = _passing(conn, rows, recheck)
    return _candidates(rows)


def _hydration(
    lateral: str, window: Window | None, recheck: Recheck | None, generation: bool
) -> str:
    """`hydrate`'s statement: the keyword retriever's LATERAL subquery, the conditions of a
    validity window, the rows' xmin only with a recheck, the generation's check with one."""
    live = "AND (SELECT memora_embedding_live(%(generation)s::int))" if generation else ""
    return f"""
        WITH used AS MATERIALIZED (  -- a pass over the few accessed, whatever the plan
            SELECT a.unit_id, a.access_count, a.last_accessed_at FROM memory_access a
            WHERE a.unit_id = ANY({id_array("ids")})
        )
        SELECT m.id, m.text, m.context, m.fact_type, m.event_date, m.occurred_start,
               m.occurred_end, m.metadata::text AS metadata, vector_send(m.embedding) AS embedding,
               coalesce(a.access_count, 0) AS access_count,
               m.importance, m.category, coalesce(a.last_accessed_at, m.created_at) AS last_used,
               coalesce(kw.bm25, 0) AS bm25, coalesce(ctx.sim, 0) AS context_sim,
               coalesce(said.names_entity, false) AS names_entity,
               (%(answer_time)s AND m.occurred_start IS NOT NULL)
               OR coalesce(said.answer_entity, false) AS answer_type,
               m.metadata ->> 'speaker' AS speaker, m.document_pk, m.item_index, m.seq,
               {"m.xmin::text::int8" if recheck is not None else "0::int8"} AS xmin
        FROM memory_units m LEFT JOIN used a ON a.unit_id = m.id
        LEFT JOIN LATERAL {lateral} kw ON true
        LEFT JOIN LATERAL {_MENTIONS} said ON true
        LEFT JOIN LATERAL (
            SELECT max(1 - (n.embedding <=> %(v)s)) AS sim FROM memory_units n WHERE {_NEXT_TO}
        ) ctx ON true
        WHERE m.id = ANY({id_array("ids")})
          AND {scope_where("m", status_where("m", window))} {live}
        """


def _candidates(rows: list[tuple[Any, ...]]) -> dict[UUID, Candidate]:
    """The hydrated rows as candidates, by id."""
    # tuples, unpacked in the SELECT's order: a dict a row cost CPU in every call
    return {
        unit: Candidate(
            id=unit,
            text=text,
            context=context,
            fact_type=fact_type,
            event_date=event_date,
            occurred_start=occurred_start,
            occurred_end=occurred_end,
            metadata_json=metadata or "{}",
            access_count=int(access_count),
            embedding=np.frombuffer(embedding, ">f4", offset=4).astype(np.float32),
            keyword=float(bm25),
            neighbours=float(context_sim),
            importance=float(importance),
            category=category,
            last_used=last_used,
            names_entity=bool(names_entity),
            answer_type=bool(answer_type),
            speaker=speaker,
            place=None if document_pk is None else (document_pk, item_index, seq),
        )
        for (
            unit, text, context, fact_type, event_date, occurred_start, occurred_end, metadata,
            embedding, access_count, importance, category, last_used, bm25, context_sim,
            names_entity, answer_type, speaker, document_pk, item_index, seq, _,
        ) in rows
    }  # fmt: skip


def _passing(conn: Connection[Any], rows: list[tuple[Any, ...]], recheck: Recheck) -> list[Any]:
    """The hydrated `rows` (id first, xmin last) but those written since `recheck.since` that
    fail its filter."""
    since = [row[0] for row in rows if recheck.written_since(row[-1])]
    if not since:
        return rows
    where = recheck.where
    passed = {
        unit
        for (unit,) in conn.cursor(row_factory=tuple_row).execute(
            f"SELECT m.id FROM memory_units m WHERE m.id = ANY(%(ids)s) {where.sql}",
            {"ids": since, **where.params},
            prepare=where.prepare,
        )
    }
    failed = set(since) - passed
    return [row for row in rows if row[0] not in failed] if failed else rows
