"""What the code computes with, built once per process: `StageContext` (the settings and the
models, loaded lazily: what a stage computes with) and `AppContext`, the application context
every use case takes first (with the pool, the task backend and the LLM besides)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Concatenate, ParamSpec, TypeVar
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.basics.stages import Stage, stage_of_queue
from memora.db.pool import Pool, pin_embedding_generation
from memora.extraction.base import Extractor
from memora.extraction.llm import LLMExtractor
from memora.extraction.local import LocalExtractor
from memora.nlp.embedding import TextEmbedder, embedder_for
from memora.nlp.language import load_nlp, tagged_proper_noun
from memora.nlp.llm import LazyLLM, LLMClient
from memora.nlp.temporal import resolve_expression
from memora.pipeline.generation import Follower
from memora.pipeline.handoff import TaskBackend
from memora.store.generations import GenerationChanged
from memora.store.operations import Operation

# A stage's write step: runs inside the write transaction, returns counts for the operation.
Writer = Callable[[Connection[Any]], dict[str, int]]


@dataclass(frozen=True)
class Deferred:
    """A prepare step that still needs `texts` embedded: the driver embeds them (with other
    operations' texts when it runs a batch: one model call) and `finish` builds the write.
    `keys` name what each text is (a unit's id): a batch embeds a key once, however many of
    its operations found it (two appends of one conversation, both finding its new units)."""

    texts: list[str]
    finish: Callable[[np.ndarray], Writer]
    keys: Sequence[Hashable] | None = None


Prepared = Writer | Deferred

# The models each stage computes with: a worker loads those of the stages it consumes before
# it takes work (MEMORA_PRELOAD=auto), so that its first task is not the one that loads them.
STAGE_MODELS: Mapping[Stage, frozenset[str]] = {
    Stage.EXTRACT: frozenset({"nlp"}),
    Stage.EMBED: frozenset({"embedder"}),
    Stage.ENTITIES: frozenset({"nlp"}),  # parses the units the extractor left unparsed
    Stage.LINKS: frozenset(),
    Stage.OPINIONS: frozenset({"embedder"}),
    Stage.INDEX_MESSAGES: frozenset({"embedder"}),
    Stage.EVOLVE: frozenset({"nlp"}),  # parses turns for changes (on the maintenance queue)
}


def models_to_preload(setting: str, queues: Iterable[str], *, llm: bool = True) -> str:
    """What a worker consuming `queues` loads at start: MEMORA_PRELOAD's names, or with
    "auto" (the default) the models of those queues' stages; "" or "none": nothing. Without an
    LLM (`llm` False) no opinion is ever formed (think needs one), so the opinions stage's
    models are not loaded."""
    if setting.strip() != "auto":
        return "" if setting.strip() == "none" else setting
    stages = {stage for q in queues if (stage := stage_of_queue(q)) is not None}
    if not llm:
        stages.discard(Stage.OPINIONS)
    return ",".join(sorted(set().union(*(STAGE_MODELS[s] for s in stages))))


class StageContext:
    """Per-process: settings and the models the stages share (`embedder`: the one given, else
    the model of the live embedding generation, made on first use and again when `follow`
    finds another generation live: memora.pipeline.generation)."""

    def __init__(self, settings: Settings, *, embedder: TextEmbedder | None = None) -> None:
        self.follower = Follower(settings)
        self._embedder = embedder
        self._given = embedder is not None
        self._embedder_of: int | None = None  # the generation it was made for (None: unknown)
        self._pin = threading.local()

    @property
    def settings(self) -> Settings:
        """The configured settings, with the live generation's model once it was read."""
        return self.follower.settings

    @property
    def embedder(self) -> TextEmbedder:
        live = self.follower.live
        if live is not None and self._embedder_of != live.id:
            current = self._embedder
            kept = (
                current is not None
                and self._embedder_of is None  # made (or given) before the first read
                and current.dim == live.dim
                and (self._given or current.model_name == live.model)
            )
            self._embedder = current if kept else None
            self._embedder_of = live.id
        if self._embedder is None:
            self._embedder = embedder_for(self.settings)
        pinned = self.pinned_generation()
        if pinned is not None and self._embedder_of != pinned:  # another thread followed
            raise GenerationChanged(f"embedding generation {pinned} is no longer this process's")
        return self._embedder

    def follow(self, conn: Connection[Any]) -> None:
        """Read the live embedding generation when due (memora.pipeline.generation)."""
        self.follower.follow(conn)

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Within the block, on this thread: the embedding generation last read (a stage's
        begin), which its vectors are embedded with (GenerationChanged when the context has
        moved on since) and its write sets (`pinned_generation`), for the database to refuse
        should it no longer be live."""
        live = self.follower.live
        self._pin.generation = live.id if live is not None else None
        previous = pin_embedding_generation(self._pin.generation)  # on connections lent here
        try:
            yield
        finally:
            self._pin.generation = None
            pin_embedding_generation(previous)

    def pinned_generation(self) -> int | None:
        generation: int | None = getattr(self._pin, "generation", None)
        return generation

    @cached_property
    def extractor(self) -> Extractor:
        if self.settings.resolved_extractor == "llm":
            return LLMExtractor(LLMClient.from_settings(self.settings), self.settings)
        return LocalExtractor()

    def resolve(self, prepared: Prepared) -> Writer:
        """The write step of one operation's prepare, embedding its texts if it deferred them."""
        if isinstance(prepared, Deferred):
            return prepared.finish(self.embed(prepared.texts))
        return prepared

    def embed(self, texts: list[str]) -> np.ndarray:
        """The texts' vectors; nothing to embed does not load the model."""
        return self.embedder.embed(texts) if texts else np.zeros((0, 0), dtype=np.float32)

    def preload(self, names: str) -> None:
        """Load models now (at worker start) so the first task is not slowed by it."""
        wanted = {n.strip() for n in names.split(",") if n.strip()}
        if "embedder" in wanted:
            self.embedder.embed(["warm-up"])
        if "nlp" in wanted:
            list(load_nlp().pipe(["Alice met Bob in Paris yesterday."]))
            tagged_proper_noun("Alice met Bob.")  # the tagger for sentence-initial names
            resolve_expression("yesterday", utcnow())


class AppContext(StageContext):
    """The application context: what a use case works with, built once per process (the write
    API, the query service, a worker, the CLI) and passed to every use case first. The settings
    and models (StageContext), the pool, the task backend committed work is handed to (stages,
    webhook deliveries: memora.pipeline.handoff) and the LLM client, made on first use."""

    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        backend: TaskBackend,
        *,
        llm: LazyLLM | None = None,
        embedder: TextEmbedder | None = None,
    ) -> None:
        super().__init__(settings, embedder=embedder)
        self.pool = pool
        self.backend = backend
        self.llm = llm if llm is not None else LazyLLM(settings)

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """`StageContext.pinned`, the live generation read again first when due."""
        self.following()
        with super().pinned():
            yield

    def following(self) -> Settings:
        """The settings with the live embedding generation's model, read again when due."""
        if self.follower.due():
            with self.pool.connection() as conn:
                self.follow(conn)
        return self.settings

    @property
    def embedder(self) -> TextEmbedder:
        """The live generation's model, read again from the pool when due."""
        self.following()
        return super().embedder

    def llm_if_configured(self) -> LLMClient | None:
        """The LLM client for what uses it when there is one (remember's conflict check)."""
        return self.llm.get() if self.settings.llm_configured else None


P = ParamSpec("P")
T = TypeVar("T")


def pinning(
    use_case: Callable[Concatenate[AppContext, P], T],
) -> Callable[Concatenate[AppContext, P], T]:
    """A use case that embeds, then writes what it embedded: run within `AppContext.pinned`,
    so that the database refuses its vectors should a `memora reembed` switch overtake it."""

    @functools.wraps(use_case)
    def pinned(app: AppContext, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with app.pinned():
            return use_case(app, *args, **kwargs)

    return pinned


@dataclass(frozen=True)
class Job:
    """One stage's input: the operation row and, for operations on a document, the document
    row (without its items: a stage reads the messages it works on)."""

    operation: Operation
    document: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_key(self) -> str:
        return self.operation.agent_id

    @property
    def message_pks(self) -> list[UUID] | None:
        """The messages an edit or a delete limits the stages to (None: the whole document)."""
        pks = self.operation.payload.get("message_pks")
        return [UUID(pk) for pk in pks] if pks is not None else None
