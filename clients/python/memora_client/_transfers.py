"""The export and import's transfers, streamed: their paths, and a file read in chunks (the
sync and the async client's)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

from memora_client._calls import agent_path

NDJSON = "application/x-ndjson"
IMPORT_PATH = "/api/import"
CHUNK_BYTES = 1024 * 1024


def export_path(agent_id: str | None) -> str:
    """The export of one agent, or (None) of every agent of the key's tenant."""
    return "/api/export" if agent_id is None else agent_path(agent_id, "/export")


def file_chunks(path: str | os.PathLike[str]) -> Iterator[bytes]:
    with open(path, "rb") as source:
        while chunk := source.read(CHUNK_BYTES):
            yield chunk


async def afile_chunks(path: str | os.PathLike[str]) -> AsyncIterator[bytes]:
    for chunk in file_chunks(path):
        yield chunk
