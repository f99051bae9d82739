"""embed: vectors for the document's units that have none."""

from __future__ import annotations

from typing import Any

import numpy as np
from psycopg import Connection

from memora.pipeline.context import Deferred, Job, StageContext, Writer
from memora.store import units


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Deferred:
    rows = units.to_embed(conn, job.document["id"])

    def finish(vectors: np.ndarray) -> Writer:
        def write(c: Connection[Any]) -> dict[str, int]:
            units.set_embeddings(c, [(v, r.id) for r, v in zip(rows, vectors, strict=True)])
            return {"embedded": len(rows)}

        return write

    return Deferred([r.text for r in rows], finish, keys=[r.id for r in rows])
