"""Request bodies too large to hold in memory: spooled to a temporary file as they arrive."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO

from fastapi import Request

IN_MEMORY_BYTES = 8 * 1024 * 1024  # beyond this the spool moves to disk


@asynccontextmanager
async def spooled_body(request: Request) -> AsyncIterator[IO[bytes]]:
    """The whole body in a file positioned at its start (BodySizeLimit bounds its size)."""
    with tempfile.SpooledTemporaryFile(max_size=IN_MEMORY_BYTES) as spool:
        async for chunk in request.stream():
            spool.write(chunk)  # memory, or the page cache: no wait worth a thread
        spool.seek(0)
        yield spool
