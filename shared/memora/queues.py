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


INGEST_STAGES: tuple[Stage, ...] = (Stage.EXTRACT, Stage.EMBED, Stage.ENTITIES, Stage.LINKS)

# Queues besides the per-stage ones.
MAINTENANCE_QUEUE = "maintenance"
BACKFILL_QUEUE_SUFFIX = ".backfill"


def next_stage(stage: Stage) -> Stage | None:
    if stage not in INGEST_STAGES:
        return None
    index = INGEST_STAGES.index(stage)
    return INGEST_STAGES[index + 1] if index + 1 < len(INGEST_STAGES) else None


def queue_for(stage: Stage, *, backfill: bool = False) -> str:
    """Each stage has its own queue; backfills use a low-priority twin of it."""
    return f"{stage.value}{BACKFILL_QUEUE_SUFFIX}" if backfill else stage.value


def all_queues() -> list[str]:
    stages = [s.value for s in Stage]
    return stages + [queue_for(s, backfill=True) for s in INGEST_STAGES] + [MAINTENANCE_QUEUE]
