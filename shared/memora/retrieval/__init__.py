"""Fused retrieval (seed 000 §3): semantic ∥ keyword ∥ graph ∥ temporal-graph → RRF → rerank → MMR
→ token budget. The public interface is `Retriever.search(SearchParams) -> SearchOutcome`."""

from memora.retrieval.rerank.cross_encoder_model import RerankerUnavailable
from memora.retrieval.retriever import Retriever, pool_size_for
from memora.retrieval.types import Hit, SearchOutcome, SearchParams

__all__ = [
    "Hit",
    "RerankerUnavailable",
    "Retriever",
    "SearchOutcome",
    "SearchParams",
    "pool_size_for",
]
