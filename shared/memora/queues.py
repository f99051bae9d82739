"""The pipeline's stages, their order and their queues: named once, here (the API, the
workers, the CLI and the deploy tests all read them)."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    EXTRACT = "extract"
    EMBED = "embed"
    ENTITIES = "entities"
    LINKS = "links"
    OPINIONS = "opinions"
    INDEX_MESSAGES = "index_messages"


INGEST_STAGES: tuple[Stage, ...] = (
    Stage.EXTRACT,
    Stage.EMBED,
    Stage.ENTITIES,
    Stage.LINKS,
    Stage.INDEX_MESSAGES,
)

# The stages each kind of operation runs, in order. An edit of one message runs the ingest
# chain on what came from that message; a delete re-indexes the neighbours whose chunks it
# invalidated; repair embeds units left without a vector and indexes messages left out;
# reindex rebuilds an agent's conversation index. Other kinds (opinions) run one stage.
CHAINS: dict[str, tuple[Stage, ...]] = {
    "ingest": INGEST_STAGES,
    "message_edit": INGEST_STAGES,
    "message_delete": (Stage.INDEX_MESSAGES,),
    "repair": (Stage.EMBED, Stage.INDEX_MESSAGES),
    "reindex": (Stage.INDEX_MESSAGES,),
}

# Queues besides the per-stage ones.
MAINTENANCE_QUEUE = "maintenance"
BACKFILL_QUEUE_SUFFIX = ".backfill"


def next_stage(
    stage: Stage, kind: str = "ingest", *, skip: frozenset[Stage] = frozenset()
) -> Stage | None:
    """The stage after `stage` in `kind`'s chain, leaving out the stages in `skip` (turned
    off by the settings: index_messages without a conversation index)."""
    chain = CHAINS.get(kind, ())
    if stage not in chain:
        return None
    following = [s for s in chain[chain.index(stage) + 1 :] if s not in skip]
    return following[0] if following else None


def queue_for(stage: Stage, *, backfill: bool = False) -> str:
    """Each stage has its own queue; backfills use a low-priority twin of it."""
    return f"{stage.value}{BACKFILL_QUEUE_SUFFIX}" if backfill else stage.value


def all_queues() -> list[str]:
    stages = [s.value for s in Stage]
    return stages + [queue_for(s, backfill=True) for s in INGEST_STAGES] + [MAINTENANCE_QUEUE]
