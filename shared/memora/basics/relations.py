"""The closed vocabulary of relations between entities (issue 57, item 4), shared by the
readers (memora.lifecycle.entity_relations, the LLM extractor), the store and the API. A
relation reads subject → object: `manages` has the manager first, `parent_of` the parent."""

from __future__ import annotations

RELATIONS = (
    "works_at", "lives_in", "studies_at", "member_of", "manages", "parent_of", "sibling_of",
    "partner_of", "friend_of", "colleague_of",
)  # fmt: skip
SINGLE = frozenset({"works_at", "lives_in", "studies_at", "partner_of"})  # one value at a time
SYMMETRIC = frozenset({"sibling_of", "partner_of", "friend_of", "colleague_of"})
# other names of a relation → (its name, whether subject and object swap)
SYNONYMS = {
    "reports_to": ("manages", True), "managed_by": ("manages", True),
    "child_of": ("parent_of", True), "works_for": ("works_at", False),
    "employed_by": ("works_at", False), "lives_at": ("lives_in", False),
    "studies_in": ("studies_at", False), "spouse_of": ("partner_of", False),
    "married_to": ("partner_of", False),
}  # fmt: skip


def canonical(relation: str) -> tuple[str, bool] | None:
    """A relation's name in the vocabulary and whether its ends swap, None if it has none."""
    key = relation.strip().lower().replace(" ", "_").replace("-", "_")
    if key in RELATIONS:
        return key, False
    return SYNONYMS.get(key)
