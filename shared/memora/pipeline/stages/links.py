"""links: temporal, semantic, entity and causal edges from the document's units."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from memora.pipeline.context import Job, StageContext, Writer
from memora.store import links, units


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    ids = units.ids_for_document(conn, job.document["id"], job.operation.id)
    cfg = links.LinkSettings.from_settings(ctx.settings)

    def write(c: Connection[Any]) -> dict[str, int]:
        return {f"links_{k}": v for k, v in links.build_links(c, ids, cfg).items()}

    return write
