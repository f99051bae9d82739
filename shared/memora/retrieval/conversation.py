"""Conversation search (seed 002 §7.5, §7.6): hybrid search over the raw messages' chunks.

Two arms propose chunks of the agent's live index generation, documents in the trash left out:
the nearest by embedding (HNSW, iterative scan so that filters still fill the list) and the
best keyword matches (GIN). Each
candidate is scored by the seed's similarity, s = 1 / (1 + L2 distance) between unit vectors,
lifted by its keyword match: s + (1 - s) * keyword_weight * rank, where rank is `ts_rank_cd`
normalised to [0, 1); that score is then expressed in the embedding model's own unit of
distance (`memora.retrieval.calibration`: a monotone map that puts 0.5 on the model's line
between related and unrelated messages). The score stays within [0, 1], the ranking is the
seed's, and `min_score` (default 0.5) means the same for every model. Results are
deduplicated by message (its best chunk), best first; `limit` above 20 is taken as 20. With
`highlight`, each result also gives the offsets of the words the query matched in its snippet.

`search_with_settings` is the core function the query service's route and the MCP tool call
(`search_conversations` with its knobs from the settings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.tenancy import Scope
from memora.nlp.embedding import TextEmbedder
from memora.retrieval.arms.keyword import KeywordIndex, or_query
from memora.retrieval.calibration import SEED, Calibration, calibration_for

MAX_LIMIT = 20


@dataclass(frozen=True)
class ConversationQuery:
    agent_id: str  # as the client names it
    query: str
    limit: int = 5
    document_id: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    roles: Sequence[str] | None = None
    channels: Sequence[str] | None = None  # messages said in any of them
    min_score: float | None = None  # None: the setting (the seed's 0.5, calibrated)
    highlight: bool | None = None  # None: the setting (the seed's highlightMatches, off)


@dataclass(frozen=True)
class ConversationHit:
    document_id: str
    title: str | None
    message_id: str
    message_ids: list[str]  # every message of the chunk (short messages are combined)
    role: str | None
    speaker: str | None
    timestamp: datetime
    snippet: str
    chunk_index: int
    channel: str | None
    score: float
    vector_score: float
    keyword_score: float
    # With highlight: the [start, end) offsets in `snippet` of the words the query matched
    # (as the keyword arm matches them: stemmed, stop words left out); None without.
    highlights: list[tuple[int, int]] | None = None


START, STOP = "\x02", "\x03"  # ts_headline's marks (control characters: not in stored text)


def spans(marked: str) -> list[tuple[int, int]]:
    """The offsets, in the text without marks, of the words `ts_headline` marked."""
    out: list[tuple[int, int]] = []
    plain = 0
    start = 0
    for ch in marked:
        if ch == START:
            start = plain
        elif ch == STOP:
            out.append((start, plain))
        else:
            plain += 1
    return out


def highlight(
    conn: Connection[Any], snippets: Sequence[str], terms: Sequence[str]
) -> list[list[tuple[int, int]]]:
    """Each snippet's matched words, found by PostgreSQL's `ts_headline` with the query's
    lexemes over the whole snippet (a snippet holding a mark character gets none)."""
    if not terms or not snippets:
        return [[] for _ in snippets]
    rows = conn.execute(
        "SELECT ts_headline('english', s, %(q)s::tsquery, %(opts)s) AS marked "
        "FROM unnest(%(s)s::text[]) WITH ORDINALITY AS t(s, n) ORDER BY n",
        {"q": or_query(terms), "s": list(snippets),
         "opts": f"StartSel={START}, StopSel={STOP}, HighlightAll=true"},
    ).fetchall()  # fmt: skip
    return [
        [] if START in text or STOP in text else spans(r["marked"])
        for text, r in zip(snippets, rows, strict=True)
    ]


def vector_score(cosine: float, calibration: Calibration = SEED) -> float:
    """The seed's 1 / (1 + L2) for unit vectors, whose L2 distance is sqrt(2 - 2 cos), with
    L2 in the calibration's unit (the seed's own: 1)."""
    return calibration.score(cosine)


def fused_score(
    cosine: float, keyword: float, keyword_weight: float, calibration: Calibration = SEED
) -> float:
    """The seed's score lifted by the keyword match, then rescaled for the model: the same
    ranking whatever the calibration."""
    s = vector_score(cosine)
    return calibration.rescale(s + (1.0 - s) * keyword_weight * keyword)


def _filters(q: ConversationQuery) -> tuple[str, dict[str, Any]]:
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if q.document_id is not None:
        clauses.append(
            "c.document_pk = (SELECT id FROM documents WHERE agent_id = %(a)s "
            "AND document_id = %(doc)s)"
        )
        params["doc"] = q.document_id
    if q.start is not None:
        clauses.append("c.occurred_at >= %(start)s")
        params["start"] = q.start
    if q.end is not None:
        clauses.append("c.occurred_at <= %(end)s")
        params["end"] = q.end
    if q.roles:
        clauses.append("c.roles && %(roles)s::text[]")
        params["roles"] = list(q.roles)
    if q.channels:
        clauses.append("c.channels && %(channels)s::text[]")
        params["channels"] = list(q.channels)
    return "".join(f" AND {c}" for c in clauses), params


# What both arms search: the agent's live index generation, less the chunks of its documents
# in the trash (`trashed`: read once from their partial index, migration 0035, and hashed).
_SEARCHED = """live AS (
            SELECT generation AS g FROM conversation_index_state WHERE agent_id = %(a)s
        ), trashed AS (
            SELECT id FROM documents WHERE agent_id = %(a)s AND trashed_at IS NOT NULL
        )"""
_NOT_TRASHED = " AND c.document_pk NOT IN (SELECT id FROM trashed)"


def candidates(
    conn: Connection[Any],
    agent_key: str,
    q: ConversationQuery,
    vector: np.ndarray,
    terms: Sequence[str],
    per_arm: int,
    match_budget: int = 1000,
) -> list[dict[str, Any]]:
    """The union of both arms' candidates with their cosine similarity and keyword rank. The
    keyword arm ranks at most `match_budget` matching chunks: a common word matches a large
    share of a big index, and ranking all of them would read every one. Neither proposes a
    chunk of a document in the trash (`_SEARCHED`)."""
    where, params = _filters(q)
    where = f"{_NOT_TRASHED}{where}"
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        (str(max(64, 2 * per_arm)),),
    )
    keyword_arm = (
        f"""
        UNION
        (SELECT m.id FROM (
            SELECT c.id, c.search_vector FROM conversation_chunks c
            WHERE c.agent_id = %(a)s AND c.generation = (SELECT g FROM live)
              AND c.search_vector @@ %(tsq)s::tsquery{where}
            LIMIT %(budget)s) m
         ORDER BY ts_rank_cd(m.search_vector, %(tsq)s::tsquery, 32) DESC LIMIT %(k)s)"""
        if terms
        else ""
    )
    rank = "ts_rank_cd(c.search_vector, %(tsq)s::tsquery, 32)" if terms else "0.0"
    return conn.execute(
        f"""
        WITH {_SEARCHED}, found AS (
            (SELECT c.id FROM conversation_chunks c
             WHERE c.agent_id = %(a)s AND c.generation = (SELECT g FROM live){where}
             ORDER BY c.embedding <=> %(v)s LIMIT %(k)s)
            {keyword_arm}
        )
        SELECT c.message_pk, c.message_pks, c.chunk_index, c.snippet,
               1 - (c.embedding <=> %(v)s) AS cosine, {rank} AS keyword,
               m.message_id, m.role, m.speaker, m.occurred_at, m.channel, d.document_id,
               d.title,
               ARRAY(SELECT o.message_id FROM conversation_messages o
                     WHERE o.id = ANY(c.message_pks) ORDER BY o.position) AS message_ids
        FROM found JOIN conversation_chunks c ON c.id = found.id
        JOIN conversation_messages m ON m.id = c.message_pk
        JOIN documents d ON d.id = c.document_pk
        """,
        {
            "a": agent_key,
            "v": vector,
            "k": per_arm,
            "tsq": or_query(terms),
            "budget": match_budget,
            **params,
        },
    ).fetchall()


def search_conversations(
    conn: Connection[Any],
    embedder: TextEmbedder,
    scope: Scope,
    q: ConversationQuery,
    *,
    min_score: float = 0.5,
    keyword_weight: float = 0.5,
    per_arm: int = 50,
    match_budget: int = 1000,
    calibration: Calibration | None = None,
) -> list[ConversationHit]:
    """The best `q.limit` (at most 20) messages for the query, one per message. `calibration`
    (default: the embedder's model's) sets the unit of the vector score."""
    cal = calibration if calibration is not None else calibration_for(embedder)
    agent_key = scope.key(q.agent_id)
    vector = embedder.embed_queries([q.query])[0]
    terms = KeywordIndex.terms(conn, q.query)
    limit = max(1, min(q.limit, MAX_LIMIT))
    rows = candidates(conn, agent_key, q, vector, terms, max(per_arm, 4 * limit), match_budget)
    floor = q.min_score if q.min_score is not None else min_score
    best: dict[Any, ConversationHit] = {}
    for r in rows:
        cosine = float(r["cosine"])
        score = fused_score(cosine, float(r["keyword"]), keyword_weight, cal)
        if score < floor:
            continue
        held = best.get(r["message_pk"])
        if held is not None and held.score >= score:
            continue
        best[r["message_pk"]] = ConversationHit(
            document_id=r["document_id"],
            title=r["title"],
            message_id=r["message_id"],
            message_ids=list(r["message_ids"]),
            role=r["role"],
            speaker=r["speaker"],
            timestamp=r["occurred_at"],
            snippet=r["snippet"],
            chunk_index=r["chunk_index"],
            channel=r["channel"],
            score=round(score, 6),
            vector_score=round(vector_score(cosine, cal), 6),
            keyword_score=round(float(r["keyword"]), 6),
        )
    hits = sorted(best.values(), key=lambda h: (-h.score, h.document_id, h.message_id))[:limit]
    if not q.highlight:
        return hits
    marks = highlight(conn, [h.snippet for h in hits], terms)
    return [replace(h, highlights=m) for h, m in zip(hits, marks, strict=True)]


def search_with_settings(
    conn: Connection[Any], embedder: TextEmbedder, settings: Settings, scope: Scope,
    q: ConversationQuery,
) -> list[ConversationHit]:  # fmt: skip
    """`search_conversations` with the MEMORA_CONVERSATION_* settings."""
    if q.highlight is None:
        q = replace(q, highlight=settings.conversation_highlight)
    return search_conversations(
        conn,
        embedder,
        scope,
        q,
        min_score=settings.conversation_min_score,
        keyword_weight=settings.conversation_keyword_weight,
        per_arm=settings.conversation_candidates,
        match_budget=settings.conversation_keyword_budget,
        calibration=calibration_for(embedder, settings.conversation_score_calibration),
    )
