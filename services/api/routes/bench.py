"""Benchmark results files (`memora bench ... --out`) from MEMORA_BENCH_RESULTS_DIR, for the
web UI's Results view."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memora.usecases import bench_results
from services.api.deps import ContextDep, PrincipalDep
from services.api.errors import AUTH_ERRORS, error_responses
from services.api.schemas.bench import ResultsFile, ResultsList

router = APIRouter(
    prefix="/api/bench", tags=["bench"], responses=error_responses(*AUTH_ERRORS, 404)
)


@router.get("/results", response_model=ResultsList)
def list_results(_: PrincipalDep, context: ContextDep) -> ResultsList:
    """The results files in the server's folder, newest first (404 when none is set)."""
    files = bench_results.list_results(context)
    return ResultsList(files=[ResultsFile.model_validate(f) for f in files])


@router.get("/results/{name}", responses=error_responses(422))
def get_result(name: str, _: PrincipalDep, context: ContextDep) -> dict[str, Any]:
    """One results file as it was written; names with a path in them are refused (422)."""
    return bench_results.read_result(context, name)
