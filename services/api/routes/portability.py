"""Export and import (seed 002, data portability): an agent, or a tenant's agents, as NDJSON
that another server imports without re-running extraction (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from memora.basics.models import AGENT_ID_PATTERN
from memora.usecases import portability
from services.api.deps import ContextDep, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.portability import ImportResult
from services.api.uploads import spooled_body

router = APIRouter(prefix="/api", tags=["portability"], responses=error_responses(*AUTH_ERRORS))
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
NDJSON = "application/x-ndjson"
STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {NDJSON: {}}, "description": "the export, one JSON object a line"}
}


def _attachment(lines: Iterator[str], name: str) -> StreamingResponse:
    disposition = f'attachment; filename="{name}.ndjson"'
    return StreamingResponse(lines, media_type=NDJSON, headers={"Content-Disposition": disposition})


@router.get(
    "/agents/{agent_id}/export",
    response_class=StreamingResponse,
    responses={**STREAM, **error_responses(404, 422, 503)},
)
def export_agent(scope: ScopeDep, agent_id: AgentPath, context: ContextDep) -> StreamingResponse:
    """The agent's profile, documents, messages, memories (embeddings, status, history),
    entities, links and conversation index, streamed from one snapshot."""
    portability.require_agent(context, scope, agent_id)
    return _attachment(portability.export_chunks(context, scope, agent_id), agent_id)


@router.get(
    "/export", response_class=StreamingResponse, responses={**STREAM, **error_responses(503)}
)
def export_tenant(scope: ScopeDep, context: ContextDep) -> StreamingResponse:
    """Every agent of the key's tenant, one profile section after another."""
    return _attachment(portability.export_chunks(context, scope, None), scope.tenant_id)


@router.post(
    "/import",
    response_model=ImportResult,
    responses=error_responses(*BODY_ERRORS, 409, 503),
    openapi_extra={"requestBody": {"content": {NDJSON: {}}, "required": True}},
)
async def import_export(request: Request, scope: ScopeDep, context: ContextDep) -> ImportResult:
    """An export (of an agent or a tenant) into the key's tenant, in one transaction: an error
    names the line and leaves nothing behind; importing the same file again changes nothing."""
    async with spooled_body(request) as body:
        summary = await run_in_threadpool(portability.import_lines, context, scope, body)
    return ImportResult(
        agents=summary.agents, imported=dict(summary.imported), unchanged=dict(summary.unchanged)
    )
