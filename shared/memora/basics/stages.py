"""The pipeline's vocabulary, named once here: stages, operation kinds and statuses, the
chain of stages each kind runs, and the queues (the API, the workers, the CLI and the deploy
tests all read them)."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    EXTRACT = "extract"
    EMBED = "embed"
    ENTITIES = "entities"
    LINKS = "links"
    OPINIONS = "opinions"
    INDEX_MESSAGES = "index_messages"
    EVOLVE = "evolve"  # the agent's consolidation (and reflection) now, on the maintenance queue


class OperationKind(StrEnum):
    """What an operation does; each kind runs its chain of stages (CHAINS)."""

    INGEST = "ingest"  # a document accepted (or replaced)
    APPEND = "append"  # messages appended to a conversation: only they are processed
    MESSAGE_EDIT = "message_edit"  # one message edited: what came from it is redone
    MESSAGE_DELETE = "message_delete"  # one message deleted: its neighbours re-indexed
    REPAIR = "repair"  # units left without a vector embedded, messages left out indexed
    REINDEX = "reindex"  # an agent's conversation index rebuilt
    OPINIONS = "opinions"  # the opinions a think formed
    EVOLVE = "evolve"  # asked for (or the end of a conversation): the agent's evolution now


class OperationStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    SUPERSEDED = "superseded"  # a later post of its document, or its deletion, overtook it

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {OperationStatus.COMPLETED, OperationStatus.FAILED, OperationStatus.SUPERSEDED}
)


class StageStatus(StrEnum):
    """One stage of one operation, as `operations.stages` records it."""

    QUEUED = "queued"  # reopened by a retry
    RUNNING = "running"
    RETRYING = "retrying"  # an attempt failed; the worker retries it with back-off
    DONE = "done"
    FAILED = "failed"


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
# reindex rebuilds an agent's conversation index; opinions stores what a think formed; evolve
# runs the agent's consolidation (and reflection, when due) now instead of at the next period.
CHAINS: dict[OperationKind, tuple[Stage, ...]] = {
    OperationKind.INGEST: INGEST_STAGES,
    OperationKind.APPEND: INGEST_STAGES,
    OperationKind.MESSAGE_EDIT: INGEST_STAGES,
    OperationKind.MESSAGE_DELETE: (Stage.INDEX_MESSAGES,),
    OperationKind.REPAIR: (Stage.EMBED, Stage.INDEX_MESSAGES),
    OperationKind.REINDEX: (Stage.INDEX_MESSAGES,),
    OperationKind.OPINIONS: (Stage.OPINIONS,),
    OperationKind.EVOLVE: (Stage.EVOLVE,),
}

# Queues besides the per-stage ones.
MAINTENANCE_QUEUE = "maintenance"
WEBHOOKS_QUEUE = "webhooks"  # webhook deliveries: a slow receiver holds up nothing else
BACKFILL_QUEUE_SUFFIX = ".backfill"


def first_stage(kind: OperationKind) -> Stage:
    return CHAINS[kind][0]


def next_stage(
    stage: Stage,
    kind: OperationKind = OperationKind.INGEST,
    *,
    skip: frozenset[Stage] = frozenset(),
) -> Stage | None:
    """The stage after `stage` in `kind`'s chain, leaving out the stages in `skip` (turned
    off by the settings: index_messages without a conversation index)."""
    chain = CHAINS.get(kind, ())
    if stage not in chain:
        return None
    following = [s for s in chain[chain.index(stage) + 1 :] if s not in skip]
    return following[0] if following else None


# Stages whose work is the periodic jobs' own, run for one agent now: on the maintenance queue.
MAINTENANCE_STAGES = frozenset({Stage.EVOLVE})


def queue_for(stage: Stage, *, backfill: bool = False) -> str:
    """Each stage has its own queue (backfills use a low-priority twin of it), except those
    run with the periodic jobs (MAINTENANCE_STAGES)."""
    if stage in MAINTENANCE_STAGES:
        return MAINTENANCE_QUEUE
    return f"{stage.value}{BACKFILL_QUEUE_SUFFIX}" if backfill else stage.value


def stage_of_queue(queue: str) -> Stage | None:
    """The stage whose work a queue carries (its live or backfill queue); None for others."""
    name = queue.removesuffix(BACKFILL_QUEUE_SUFFIX)
    return Stage(name) if name in Stage._value2member_map_ else None


def live_queues() -> list[str]:
    """One queue per stage: what a complete deployment has a consumer for (backfill twins
    and maintenance, with the evolve stage, can wait)."""
    return [queue_for(s) for s in Stage if s not in MAINTENANCE_STAGES]


def all_queues() -> list[str]:
    stages = [s.value for s in Stage if s not in MAINTENANCE_STAGES]
    backfill = [queue_for(s, backfill=True) for s in INGEST_STAGES]
    return stages + backfill + [MAINTENANCE_QUEUE, WEBHOOKS_QUEUE]
