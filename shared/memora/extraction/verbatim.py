"""Items that are facts already (seeded character memories, captured dialogue): one unit per
item, its text exactly as given. The network comes from the item's `fact_type` metadata key
(default "world"; the key itself is not kept); entities are left to the entity stage's NER."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from memora.basics.models import FACT_TYPES, FactType
from memora.extraction.base import Fact, SourceItem

FACT_TYPE_KEY = "fact_type"


class VerbatimExtractor:
    name = "verbatim"

    def extract(
        self, agent_id: str, items: list[SourceItem], preceding: Sequence[SourceItem] = ()
    ) -> list[Fact]:
        facts = []
        for item in items:
            metadata = dict(item.metadata)
            wanted = metadata.pop(FACT_TYPE_KEY, "world")
            fact_type = cast(FactType, wanted) if wanted in FACT_TYPES else "world"
            facts.append(
                Fact(
                    item_index=item.index,
                    seq=0,
                    text=item.content,
                    fact_type=fact_type,
                    event_date=item.event_date,
                    mentioned_at=item.event_date,
                    context=item.context,
                    metadata=metadata | ({"speaker": item.speaker} if item.speaker else {}),
                )
            )
        return facts
