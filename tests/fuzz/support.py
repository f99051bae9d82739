"""What the fuzz tests check, how hard they try, and how they reach the apps.

schemathesis needs the schema when the test module is imported, but the apps need the suite's
database, which only exists once the session fixtures ran. So the schema is read from an app
built without one, and requests go to an `AppSlot` that a fixture fills with the real app
(schemathesis runs the app's lifespan itself, through the slot, on the first request).
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis import checks
from starlette.types import Receive, Scope, Send

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]

# Few examples per operation, always the same ones: the fuzz run stays well under a minute and
# a failure reproduces on every machine. MEMORA_FUZZ_EXAMPLES=500 digs deeper (locally).
FUZZ_SETTINGS = settings(
    max_examples=int(os.environ.get("MEMORA_FUZZ_EXAMPLES", "25")),
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)

# POST /api/import takes an export file: NDJSON lines, here objects with some of the format's
# fields (rarely a valid export), or any bytes
_FIELDS = st.sampled_from(["type", "format", "version", "agent_id", "id", "counts", "text"])
_VALUES = st.none() | st.integers() | st.text(max_size=12) | st.sampled_from(["header", "end"])
_NDJSON = st.lists(st.dictionaries(_FIELDS, _VALUES, max_size=5), max_size=4).map(
    lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()
)
schemathesis.openapi.media_type("application/x-ndjson", _NDJSON | st.binary(max_size=64))


class AppSlot:
    """An ASGI app that forwards everything (lifespan included) to the app put in it."""

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "the fixture that fills this slot did not run"
        await self.app(scope, receive, send)


def openapi_of(app: FastAPI) -> dict[str, Any]:
    return app.openapi()
