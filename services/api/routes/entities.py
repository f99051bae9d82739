"""One entity of an agent with its relations (issue 57, item 4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from memora.basics.models import AGENT_ID_PATTERN
from memora.usecases import entities
from services.api.deps import ConnDep, ContextDep, ScopeDep
from services.api.errors import AUTH_ERRORS, error_responses
from services.api.schemas.entities import Entity
from services.api.schemas.graph import NO_NUL

router = APIRouter(prefix="/api", tags=["entities"], responses=error_responses(*AUTH_ERRORS, 422))


@router.get(
    "/agents/{agent_id}/entities/{name}", response_model=Entity, responses=error_responses(404)
)
def get_entity(
    scope: ScopeDep,
    agent_id: Annotated[str, Path(pattern=AGENT_ID_PATTERN)],
    name: Annotated[str, Path(max_length=300, pattern=NO_NUL)],
    conn: ConnDep,
    context: ContextDep,
) -> Entity:
    """An entity by id, name or alias (the most mentioned where several match): its names,
    type, mention count, first and last seen, and its relations to other entities (works_at,
    lives_in, sibling_of...), current first, each with its evidence memories and validity.
    404 `agent_not_found` or `entity_not_found`."""
    return Entity.model_validate(entities.view(context, conn, scope, agent_id, name))
