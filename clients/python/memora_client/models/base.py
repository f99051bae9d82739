"""What the models share: the API's enumerations and the two base classes (requests forbid
unknown fields, as the API does; responses accept those a newer server adds)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

FactType = Literal["world", "agent", "opinion"]
# what a search finds: the three networks and, when asked for, the agent's reflections
SearchableType = Literal["world", "agent", "opinion", "reflection"]
Role = Literal["user", "assistant", "system", "tool"]
Reranker = Literal["heuristic", "cross-encoder"]
OperationStatus = Literal["queued", "running", "completed", "failed", "superseded"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "superseded"})


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    model_config = ConfigDict(extra="allow")
