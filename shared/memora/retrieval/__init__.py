"""Fused retrieval (seed 000 §3): semantic ∥ keyword ∥ graph ∥ temporal-graph → RRF → rerank → MMR
→ token budget. The public interface is `Retriever.search(SearchParams) -> SearchOutcome`."""
