"""The sections about the read path (seed 000 §3; docs/retrieval.md): the retrievers and what
the query service holds in memory for them, then fusion, reranking and diversity."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memora.basics.settings.section import Section


class Retrieval(Section):
    """Retrieval

    The query service's retrievers (semantic, keyword, graph, temporal, entity), what each
    keeps in memory between searches, and how many searches run at once (docs/retrieval.md)."""

    search_concurrency: int = Field(
        default=8,
        description="Searches a query process runs at once (backpressure; the pool holds 5 "
        "connections per search).",
    )
    search_max_tokens: int = Field(
        default=4096, description="The token budget of a search that names none."
    )
    follow_up_queries: int = Field(
        default=2,
        ge=0,
        description="A search with `follow_up` (an LLM configured): the most follow-up "
        "queries the LLM may write from the first round's results, each searched and fused "
        'with it (docs/retrieval.md, "A follow-up round").',
    )
    semantic_min_similarity: float = Field(
        default=0.3, description="The semantic retriever keeps units at least this similar."
    )
    filter_exact_scan_max: int = Field(
        default=2000,
        description="A filter leaving at most this many units is ranked exactly, not through "
        "HNSW; 0: always HNSW.",
    )
    filter_cache_mb: int = Field(
        default=256,
        description="Memory a query process gives the units passing the filters it ranks "
        "exactly, with their embeddings (5/8), the keyword index of those units (1/4) and the "
        "units failing broad filters (1/8); 0: none, every exact scan, filtered keyword search "
        "and filter check reads PostgreSQL.",
    )
    filter_cache_ttl_seconds: float = Field(
        default=600.0,
        description="How long a filter's held units are kept before they are read whole "
        "again; in between, each search reads what changed.",
    )
    keyword_stats_ttl_seconds: float = Field(
        default=300.0,
        description="How long the keyword retriever's term statistics (document frequencies, "
        "average length) are cached.",
    )
    keyword_match_budget: int = Field(
        default=1000,
        description="Postings of a term the keyword retriever reads at most (under a narrower "
        "filter: matching units scored).",
    )
    term_counts_interval_seconds: float = Field(
        default=60.0,
        description="How often the `term_counts` job folds the keyword statistics' new counts "
        "(`memory_terms`).",
    )
    term_counts_batch_size: int = Field(
        default=5000,
        ge=1,
        description="Lexemes per agent and transaction that job folds, ten transactions a run.",
    )
    graph_entry_similarity: float = Field(
        default=0.5,
        description="The graph walk starts from semantic hits at least this similar.",
    )
    graph_entry_points: int = Field(
        default=10, description="Semantic hits the graph walk starts from, at most."
    )
    graph_decay: float = Field(
        default=0.8, description="Activation kept at each step along a link of the walk."
    )
    graph_fanout: int = Field(
        default=20, description="Strongest links followed from each node the walk explores."
    )
    graph_link_weights: dict[str, float] = Field(
        default_factory=dict,
        description='Weights per link type (JSON, e.g. `{"semantic": 0.5}`) over the '
        "defaults: entity, semantic and temporal 1, causal 2.",
    )
    temporal_seed_similarity: float = Field(
        default=0.4,
        description="The temporal retriever starts from units in the query's time range at "
        "least this similar to the query.",
    )
    temporal_min_similarity: float = Field(
        default=0.3,
        description="Units the temporal retriever reaches along temporal links are kept from "
        "this similarity.",
    )
    entity_units_per_entity: int = Field(
        default=20,
        description="The entity retriever's units per entity the query names (those "
        "mentioning it most similar to the rest of the query); 0: no entity retriever.",
    )
    entity_min_similarity: float = Field(
        default=0.2,
        description="The entity retriever keeps units at least this similar to the query "
        "without the names.",
    )
    entity_signature_cache_mb: int = Field(
        default=256,
        description="Memory a query process gives the named entities' mention signatures "
        "and, in the room they leave, the embeddings of the mentions searches compared.",
    )
    entity_signature_ttl_seconds: float = Field(
        default=600.0,
        description="How long an entity's held mentions are kept before they are read whole "
        "again; in between, each search reads what changed.",
    )
    entity_relevance: Literal["query", "mentions"] = Field(
        default="mentions",
        description="What the semantic signal compares a candidate with when the query names "
        "entities: `mentions`, the query without the names for candidates mentioning one and "
        "the query itself for the others; `query`, the query for all (the seed's).",
    )
    access_flush_seconds: float = Field(
        default=1.0,
        description="How often the counts of returned memories (the frequency signal) are "
        "written to `memory_access`.",
    )


class Reranking(Section):
    """Fusion, reranking and diversity

    Reciprocal rank fusion of the retrievers' lists, the reranker's formula or model, and MMR.
    The heuristic reranker is seed 000 §3.3.1's weighted sum plus Memora's extensions; the
    context, feedback and answer-type weights at 0, `MEMORA_ENTITY_RELEVANCE=query`,
    `MEMORA_RECENCY_FORMULA=seed` and `MEMORA_MMR_LAMBDA=0.5` give the seed's formula exactly
    (docs/retrieval.md, "Fusion, reranking, MMR, budget")."""

    rrf_k: int = Field(default=60, description="k of reciprocal rank fusion: Σ 1 / (k + rank).")
    rrf_weights: dict[str, float] = Field(
        default_factory=dict,
        description='Weights per retriever in the fusion (JSON, e.g. `{"graph": 0.5}`); '
        "unset: every list counts 1.",
    )
    rerank_candidates: int = Field(
        default=100,
        description="Fused candidates handed to the reranker (at least the search's top_k).",
    )
    heuristic_semantic_weight: float = Field(
        default=0.6, description="Heuristic reranker: weight of cosine similarity (seed)."
    )
    heuristic_keyword_weight: float = Field(
        default=0.4, description="Weight of BM25, divided by the candidates' best (seed)."
    )
    heuristic_recency_weight: float = Field(default=0.2, description="Weight of recency (seed).")
    heuristic_frequency_weight: float = Field(
        default=0.1, description="Weight of access frequency, min(1, accesses / 100) (seed)."
    )
    heuristic_context_weight: float = Field(
        default=0.2,
        description="Weight of the best similarity to the query among the units next to the "
        "candidate in its conversation (extension; 0: off).",
    )
    heuristic_feedback_weight: float = Field(
        default=0.8,
        description="Pseudo-relevance feedback, a second pass: weight of the similarity to "
        "the centroid of the first pass's best candidates (extension; 0: off).",
    )
    heuristic_feedback_top: int = Field(
        default=5, description="Candidates of the first pass that centroid is taken over."
    )
    heuristic_context_keyword_weight: float = Field(
        default=0.2,
        description="Weight for the best keyword match among the candidates next to a candidate "
        "in its conversation (the reply that repeats the question's words lifts the statement "
        "it answers or echoes; extension; 0: off).",
    )
    heuristic_speaker_weight: float = Field(
        default=0.2,
        description="Weight for a candidate said by a person the query names (the turn's "
        "speaker is one of its entities): what someone says of themselves, above the turns "
        "that address, praise or echo them (extension; 0: off).",
    )
    heuristic_statement_weight: float = Field(
        default=0.3,
        description="Weight for the share of a candidate's words that state something rather "
        "than ask or exclaim (a question back, a 'Wow, Ines!'): the statement above the turns "
        "that only answer it with a question or praise (extension; 0: off).",
    )
    heuristic_relation_weight: float = Field(
        default=0.3,
        description="Weight for a candidate that is the evidence of an entity relation the "
        "question walks from the entities it names ('Where does Maya work?': her works_at; "
        "'Marek's girlfriend': his partner_of, then hers); also brings such candidates up "
        "from below MEMORA_RERANK_CANDIDATES (extension; 0: off, and no relation is read).",
    )
    heuristic_answer_type_weight: float = Field(
        default=0.2,
        description="Weight for a candidate naming a thing of the kind the question word asks "
        'for: a place or organisation for "where", a person for "who", a time for "when" '
        "(extension; 0: off).",
    )
    recency_formula: Literal["decay", "seed"] = Field(
        default="decay",
        description="`decay`: 1 - min(1, log(1 + days) / log(366)), 1 for a memory from the "
        "reference time; `seed`: the seed's formula as written, which grows with age.",
    )
    mmr_lambda: float = Field(
        default=0.7,
        description="MMR's balance of relevance against diversity, in [0, 1]; the seed's is 0.5.",
    )
    cross_encoder_model: str = Field(
        default="cross-encoder/ms-marco-MiniLM-L-6-v2",
        description="The cross-encoder reranker's sentence-transformers model, by name or "
        "local path (it must be reachable offline).",
    )
    cross_encoder_backend: Literal["auto", "torch", "onnx", "onnx-int8"] = Field(
        default="auto",
        description="`auto`: torch fp16 on CUDA; on a CPU ONNX Runtime int8 when its ranking "
        "check passes at load, else fp32 (logged), torch when the model cannot be exported. "
        "`onnx`: fp32 only; `onnx-int8`: int8 or a 503; `torch`.",
    )
    cross_encoder_threads: int = Field(
        default=0, description="ONNX Runtime threads of the cross-encoder; 0: one per core."
    )
    cross_encoder_batch_size: int = Field(
        default=256, description="(query, passage) pairs per forward pass, at most."
    )
    cross_encoder_batch_tokens: int = Field(
        default=0,
        description="Padded tokens per forward pass, at most; 0: 2,048 on a CPU, 32,768 on CUDA.",
    )
    cross_encoder_batch_wait_ms: float = Field(
        default=2.0,
        description="How long a forward pass waits for concurrent searches' pairs to join it.",
    )
    cross_encoder_max_length: int = Field(
        default=256, description="Tokens per (query, passage) pair; longer pairs are cut."
    )
    preload_cross_encoder: bool = Field(
        default=False,
        description="Load the cross-encoder when the query service starts (else on its first use).",
    )
