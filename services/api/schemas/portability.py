"""Export and import (docs/operations.md "Export and import")."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ImportResult(BaseModel):
    agents: list[str] = Field(description="the agents the file held, as their clients name them")
    imported: dict[str, int] = Field(description="rows written, per record type")
    unchanged: dict[str, int] = Field(
        description="rows this server already held (a re-import), per record type"
    )
