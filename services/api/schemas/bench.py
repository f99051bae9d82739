"""Benchmark results files for the web UI's Results view (docs/benchmarks.md)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class ResultsFile(BaseModel):
    name: str
    bytes: int
    modified: datetime


class ResultsList(BaseModel):
    files: list[ResultsFile]
