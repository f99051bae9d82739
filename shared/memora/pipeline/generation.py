"""A process follows the live embedding generation (`memora reembed`, migration 0037): it embeds
with the live generation's model whatever MEMORA_EMBEDDING_MODEL says (saying so when they
differ), and sets that generation on its connections, so the database refuses a vector of
another one (SQLSTATE MG001).

The live generation is read again at most every `FOLLOW_SECONDS`, and at once after an MG001
(`expire`): after a switch, the first write of a stale process fails, its stage is retried, and
the retry embeds with the new model.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from psycopg import Connection

from memora.basics.config import Settings
from memora.db.pool import use_embedding_generation
from memora.store import generations
from memora.store.generations import Generation

log = logging.getLogger(__name__)
FOLLOW_SECONDS = 2.0


def live_settings(settings: Settings, live: Generation) -> Settings:
    """`settings` with the live generation's provider, model and dimension."""
    update: dict[str, Any] = {
        "embedding_provider": live.provider,
        "embedding_model": live.model,
        "embedding_dim": live.dim,
    }
    if live.provider != "local":
        update["embedding_base_url"] = live.base_url or settings.embedding_base_url
    return settings.model_copy(update=update)


def mismatch(settings: Settings, live: Generation) -> str | None:
    """What to do when the configured model is not the live generation's (None: it is)."""
    s = settings
    if live.same_model(s.embedding_provider, s.embedding_model, s.embedding_dim):
        return None
    return (
        f"MEMORA_EMBEDDING_MODEL={s.embedding_model} ({s.embedding_provider}, "
        f"MEMORA_EMBEDDING_DIM={s.embedding_dim}) is not the model of the stored vectors, "
        f"the live embedding generation {live.id}: {live.describe()}. This process embeds with "
        f"the live one. To move the vectors to the configured model, run "
        f"`memora reembed --model {s.embedding_model} --provider {s.embedding_provider}`; "
        "to silence this, set MEMORA_EMBEDDING_MODEL, _PROVIDER and _DIM to the live one."
    )


class Follower:
    """The live generation as this process last read it, and its settings."""

    def __init__(self, configured: Settings) -> None:
        self.configured = configured
        self.live: Generation | None = None
        self.settings = configured
        self._read_at = float("-inf")
        self._warned: int | None = None

    def expire(self) -> None:
        """Read the live generation again on the next `follow` (after an MG001)."""
        self._read_at = float("-inf")

    def due(self) -> bool:
        return time.monotonic() - self._read_at >= FOLLOW_SECONDS

    def follow(self, conn: Connection[Any]) -> bool:
        """Read the live generation when due (the seed, on first use, is committed with the
        caller's transaction); True when it changed since the last read."""
        if not self.due():
            return False
        live = generations.live(conn, self.configured)
        self._read_at = time.monotonic()
        if self.live is not None and live.id == self.live.id:
            return False
        first = self.live is None
        self.live = live
        self.settings = live_settings(self.configured, live)
        use_embedding_generation(conn, live.id)
        message = mismatch(self.configured, live)
        if message is not None and self._warned != live.id:
            log.warning(message)
            self._warned = live.id
        return not first
