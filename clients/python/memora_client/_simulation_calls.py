"""The calls of agent simulations (seed 001): a seed file, captured lines of dialogue."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeAlias

from memora_client import models as m
from memora_client._calls import Call, _call

LineLike: TypeAlias = m.EpisodeLine | Mapping[str, Any]


def seed(seed_file: Mapping[str, Any]) -> Call[m.SeedResponse]:
    return Call("POST", "/api/seed", m.SeedResponse.model_validate, dict(seed_file))


def capture_episode(
    scene: str,
    turn: int,
    speaker: str,
    text: str,
    listeners: Sequence[str],
    event_date: datetime | None,
) -> Call[m.EpisodeResponse]:
    body = m.EpisodeRequest(
        scene=scene, turn=turn, speaker=speaker, text=text, listeners=list(listeners),
        event_date=event_date,
    )  # fmt: skip
    return _call("POST", "/api/episodes", m.EpisodeResponse, body)


def capture_episodes(
    scene: str, listeners: Sequence[str], lines: Sequence[LineLike]
) -> Call[m.EpisodeBatchResponse]:
    body = m.EpisodeBatchRequest(
        scene=scene,
        listeners=list(listeners),
        lines=[
            line if isinstance(line, m.EpisodeLine) else m.EpisodeLine.model_validate(line)
            for line in lines
        ],
    )
    return Call(
        "POST",
        "/api/episodes/batch",
        m.EpisodeBatchResponse.model_validate,
        body.model_dump(mode="json", exclude_none=True),
    )
