"""Agent simulations (seed 001): pre-seeding characters and scenes, capturing dialogue."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter

from memora.usecases import episodes, seeding
from memora.usecases.ingest import Accepted
from services.api.deps import ConnDep, ContextDep, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.simulation import (
    EpisodeBatchResponse,
    EpisodeMemory,
    EpisodeResponse,
    SeededDocument,
    SeedResponse,
)

router = APIRouter(
    prefix="/api", tags=["simulation"], responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 503)
)


@router.post("/seed", response_model=SeedResponse)
def seed(
    scope: ScopeDep, body: seeding.SeedFile, conn: ConnDep, context: ContextDep
) -> SeedResponse:
    """Store a scenario and its characters as memories (seed 001's categories). Idempotent:
    the same seed again changes nothing; a changed character replaces only its documents."""
    stored = seeding.apply(context, conn, scope, body)
    return SeedResponse(
        scenario=body.scenario.id,
        counts=dict(Counter(d.status for d in stored)),
        documents=[SeededDocument.model_validate(d, from_attributes=True) for d in stored],
    )


@router.post("/episodes", response_model=EpisodeResponse)
def capture_episode(
    scope: ScopeDep, body: episodes.Episode, conn: ConnDep, context: ContextDep
) -> EpisodeResponse:
    """`"{speaker} said: {text}"` as an episodic memory of every listener; idempotent on
    (scene, turn, speaker)."""
    return _answer(body, episodes.capture(context, conn, scope, body))


@router.post("/episodes/batch", response_model=EpisodeBatchResponse)
def capture_episodes(
    scope: ScopeDep, body: episodes.EpisodeBatch, conn: ConnDep, context: ContextDep
) -> EpisodeBatchResponse:
    """Several lines of one scene, each as `POST /api/episodes` stores it, for every
    listener, in one transaction (all or none); idempotent on (scene, turn, speaker)."""
    lines = body.episodes()
    accepted = episodes.capture_many(context, conn, scope, lines)
    return EpisodeBatchResponse(
        scene=body.scene, lines=[_answer(e, a) for e, a in zip(lines, accepted, strict=True)]
    )


def _answer(episode: episodes.Episode, accepted: list[Accepted]) -> EpisodeResponse:
    return EpisodeResponse(
        scene=episode.scene,
        turn=episode.turn,
        speaker=episode.speaker,
        memories=[
            EpisodeMemory(
                agent_id=a.agent_id,
                document_id=a.document_id,
                status=a.outcome,
                operation_id=a.operation_id,
            )
            for a in accepted
        ],
    )
