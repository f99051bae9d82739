"""Entities: names as resolution and the entity retriever compare them, and the resolution of
mentions to each agent's canonical entities (seed 000 §2.3)."""
