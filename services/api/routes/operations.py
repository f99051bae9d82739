"""Operations for operators: list them (failed ones first of all) and retry a failed one."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query

from memora.basics.models import AGENT_ID_PATTERN
from memora.basics.stages import OperationStatus
from memora.usecases import operations
from services.api import paging
from services.api.deps import ConnDep, ContextDep, ScopeDep
from services.api.errors import AUTH_ERRORS, APIError, error_responses
from services.api.schemas.operations import OperationList, OperationResponse, RetryResponse

router = APIRouter(
    prefix="/api", tags=["operations"], responses=error_responses(*AUTH_ERRORS, 422, 503)
)


@router.get("/operations", response_model=OperationList)
def list_operations(
    scope: ScopeDep,
    conn: ConnDep,
    context: ContextDep,
    agent_id: Annotated[str | None, Query(pattern=AGENT_ID_PATTERN)] = None,
    status: OperationStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> OperationList:
    """The tenant's operations, newest first; `next_cursor` pages on."""
    before = paging.decode(cursor)
    if isinstance(before, int):
        raise APIError(422, "invalid_cursor", "the cursor is not one this route returned")
    page = operations.list_page(
        context, conn, scope, agent_id=agent_id, status=status, limit=limit, before=before
    )
    return OperationList(
        operations=[OperationResponse.model_validate(op) for op in page.operations],
        next_cursor=paging.encode(page.next_position),
    )


@router.post(
    "/operations/{operation_id}/retry",
    response_model=RetryResponse,
    status_code=202,
    responses=error_responses(404, 409),
)
def retry(scope: ScopeDep, operation_id: UUID, conn: ConnDep, context: ContextDep) -> RetryResponse:
    """Re-run a failed operation from its failed stage (202, `reopened`). Idempotent: while the
    retry is queued or running, calling again changes nothing (202, `active`). A completed or
    superseded operation has nothing to retry (409)."""
    outcome, op = operations.retry(context, conn, scope, operation_id)
    return RetryResponse(outcome=outcome, operation=OperationResponse.model_validate(op))
