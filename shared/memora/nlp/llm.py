"""The one LLM client: any OpenAI-compatible endpoint through the `openai` package.

Every call names an *operation* ("extraction", "think", "opinions", "background"); the operation
picks the model (MEMORA_LLM_<OP>_MODEL, else MEMORA_LLM_MODEL) and labels the usage counters.

Failures are typed, and double as pipeline stage errors so Celery retries the right ones:

- LLMNotConfigured   no endpoint configured (the API answers 503; a stage fails for good)
- LLMUnavailable     429, 5xx, timeouts, refused connections, after bounded retries with
                     exponential back-off and jitter (a TransientStageError: Celery retries)
- LLMInvalidOutput   the answer failed JSON/schema validation after bounded re-asks
                     (a PermanentStageError)
- LLMRequestError    the endpoint rejected the request itself (400/401/403/404...; permanent)

Usage: every HTTP attempt becomes one `LLMCall` event in `usage` (a `UsageRegistry`): totals
per operation are in `usage.snapshot()`, and `usage.add_listener(fn)` lets a metrics module
observe each event as it happens (see docs/llm.md).
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from memora.basics.config import Settings
from memora.basics.errors import PermanentStageError, TransientStageError

if TYPE_CHECKING:
    import openai

log = logging.getLogger("memora.llm")

OPERATIONS = ("extraction", "think", "opinions", "background")
Message = dict[str, str]
T = TypeVar("T", bound=BaseModel)


# ---------------------------------------------------------------------------------- errors
class LLMError(Exception):
    def __init__(self, message: str, operation: str | None = None) -> None:
        super().__init__(message)
        self.operation = operation


class LLMNotConfigured(LLMError, PermanentStageError):
    """No endpoint: set MEMORA_LLM_BASE_URL (and MEMORA_LLM_API_KEY where needed)."""


class LLMUnavailable(LLMError, TransientStageError):
    """Transient: rate limited, server error, timeout or unreachable, after bounded retries."""


class LLMInvalidOutput(LLMError, PermanentStageError):
    """The model's answer failed validation, also after the bounded re-asks."""


class LLMRequestError(LLMError, PermanentStageError):
    """The endpoint rejected the request (bad key, unknown model, request too large...)."""


# ----------------------------------------------------------------------------------- usage
@dataclass(frozen=True)
class LLMCall:
    """One HTTP attempt. outcome: ok, invalid_output, rate_limited, server_error, timeout,
    connection_error or rejected."""

    operation: str
    model: str
    outcome: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


Listener = Callable[[LLMCall], None]
_CALLS: ContextVar[list[LLMCall] | None] = ContextVar("memora_llm_calls", default=None)


@contextmanager
def calls_made() -> Iterator[list[LLMCall]]:
    """The LLM calls (HTTP attempts, as `usage` records them) made in this context, on this
    thread: what one answer or one benchmark question cost."""
    calls: list[LLMCall] = []
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


def tokens_of(calls: list[LLMCall]) -> dict[str, int]:
    """Requests and tokens of `calls`."""
    return {
        "requests": len(calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
    }


class UsageRegistry:
    """Thread-safe totals per operation, plus listeners called with every event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, dict[str, float]] = {}
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Register `listener`; returns a function that removes it again."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def record(self, call: LLMCall) -> None:
        collecting = _CALLS.get()
        if collecting is not None:
            collecting.append(call)
        with self._lock:
            t = self._totals.setdefault(call.operation, {})
            for key, value in (
                ("requests", 1),
                (f"outcome_{call.outcome}", 1),
                ("prompt_tokens", call.prompt_tokens),
                ("completion_tokens", call.completion_tokens),
                ("total_tokens", call.prompt_tokens + call.completion_tokens),
                ("seconds", call.seconds),
            ):
                t[key] = t.get(key, 0) + value
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(call)
            except Exception:  # a broken metrics hook must never break an LLM call
                log.exception("LLM usage listener failed")

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {op: dict(t) for op, t in self._totals.items()}

    def reset(self) -> None:
        with self._lock:
            self._totals.clear()


usage = UsageRegistry()


# ---------------------------------------------------------------------------------- parsing
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def extract_json(content: str) -> str:
    """The JSON object inside a reply: code fences, <think> blocks and chatter removed."""
    text = _THINK.sub("", content).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start != -1 and end > start:
            text = text[start : end + 1]
    return text


def describe_invalid(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
            for e in exc.errors()[:5]
        ]
        return "; ".join(parts)
    return str(exc)[:300]


def schema_instruction(schema: type[BaseModel]) -> str:
    return (
        "Reply with one JSON object and nothing else (no prose, no code fences). "
        f"It must validate against this JSON schema:\n{json.dumps(schema.model_json_schema())}"
    )


# ----------------------------------------------------------------------------------- client
@dataclass(frozen=True)
class _Reply:
    content: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float


@dataclass(frozen=True)
class _Failure:
    """A call that failed in a way worth retrying: its outcome (the metric's label), why."""

    outcome: str
    message: str
    retry_after: float | None = None


class LLMClient:
    def __init__(
        self,
        settings: Settings,
        *,
        registry: UsageRegistry = usage,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not settings.llm_configured:
            raise LLMNotConfigured(
                "no LLM is configured: set MEMORA_LLM_BASE_URL (and MEMORA_LLM_API_KEY) "
                "to an OpenAI-compatible endpoint"
            )
        import openai  # here: a process that never calls an LLM does not pay for its import

        self.settings = settings
        self.registry = registry
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=settings.llm_base_url or None,
            api_key=settings.llm_api_key
            or "not-needed",  # Ollama/vLLM ignore it; the client wants one
            timeout=settings.llm_timeout_seconds,
            max_retries=0,  # retries are ours: bounded, counted, typed
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient:
        return cls(settings)

    def model_for(self, operation: str) -> str:
        s = self.settings
        specific = {
            "extraction": s.llm_extraction_model,
            "think": s.llm_think_model,
            "opinions": s.llm_opinion_model,
            "background": s.llm_background_model,
            "search": s.llm_search_model,
        }.get(operation)
        return specific or s.llm_model

    # -------------------------------------------------------------------- public calls
    def complete_text(
        self, operation: str, messages: list[Message], *, max_tokens: int | None = None
    ) -> str:
        reply = self._chat(operation, messages, json_mode=False, max_tokens=max_tokens)
        self._record(operation, reply, "ok")
        text = _THINK.sub("", reply.content).strip()
        if not text:
            raise LLMInvalidOutput("the model returned an empty answer", operation)
        return text

    def complete_json(
        self,
        operation: str,
        messages: list[Message],
        schema: type[T],
        *,
        max_tokens: int | None = None,
    ) -> T:
        """Ask for JSON validated by `schema`; re-ask (bounded) when it does not validate."""
        convo = _with_schema(messages, schema)
        attempts = 1 + max(0, self.settings.llm_invalid_output_retries)
        problem = ""
        for attempt in range(attempts):
            reply = self._chat(
                operation, convo, json_mode=self.settings.llm_json_mode, max_tokens=max_tokens
            )
            try:
                parsed = schema.model_validate_json(extract_json(reply.content))
            except (ValidationError, ValueError) as exc:
                problem = describe_invalid(exc)
                self._record(operation, reply, "invalid_output")
                log.warning(
                    "invalid LLM output",
                    extra={"operation": operation, "attempt": attempt + 1, "problem": problem},
                )
                convo = [
                    *convo,
                    {"role": "assistant", "content": reply.content[:4000]},
                    {
                        "role": "user",
                        "content": f"That reply was not valid ({problem}). Reply again with only "
                        "the corrected JSON object.",
                    },
                ]
                continue
            self._record(operation, reply, "ok")
            return parsed
        raise LLMInvalidOutput(f"invalid output after {attempts} attempts: {problem}", operation)

    # -------------------------------------------------------------------- transport
    def _record(self, operation: str, reply: _Reply, outcome: str) -> None:
        self.registry.record(
            LLMCall(
                operation,
                reply.model,
                outcome,
                reply.prompt_tokens,
                reply.completion_tokens,
                reply.seconds,
            )
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        delay = min(s.llm_backoff_max_seconds, s.llm_backoff_seconds * (2.0**attempt))
        delay *= random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.llm_backoff_max_seconds))
        return delay

    def _chat(
        self, operation: str, messages: list[Message], *, json_mode: bool, max_tokens: int | None
    ) -> _Reply:
        model = self.model_for(operation)
        kwargs = self._arguments(model, messages, json_mode, max_tokens)
        attempts = 1 + max(0, self.settings.llm_max_retries)
        last = ""
        for attempt in range(attempts):
            started = time.perf_counter()
            result = self._attempt(operation, model, kwargs, started)
            if isinstance(result, _Reply):
                return result
            last = result.message
            self.registry.record(
                LLMCall(operation, model, result.outcome, seconds=time.perf_counter() - started)
            )
            if attempt + 1 < attempts:
                delay = self._backoff(attempt, result.retry_after)
                log.warning(
                    "LLM call failed; retrying",
                    extra={
                        "operation": operation,
                        "outcome": result.outcome,
                        "attempt": attempt + 1,
                        "delay": delay,
                    },
                )
                self._sleep(delay)
        raise LLMUnavailable(f"LLM unavailable after {attempts} attempts: {last}", operation)

    def _arguments(
        self, model: str, messages: list[Message], json_mode: bool, max_tokens: int | None
    ) -> dict[str, Any]:
        """The chat completion's arguments."""
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self.settings.llm_temperature is not None:
            kwargs["temperature"] = self.settings.llm_temperature
        return kwargs

    def _attempt(
        self, operation: str, model: str, kwargs: dict[str, Any], started: float
    ) -> _Reply | _Failure:
        """One call: its reply, or a failure worth retrying; a rejected request raises."""
        import openai

        try:
            response = self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            timeout = self.settings.llm_timeout_seconds
            return _Failure("timeout", f"timed out after {timeout}s ({exc})")
        except openai.APIConnectionError as exc:
            return _Failure("connection_error", f"cannot connect: {exc}")
        except openai.APIStatusError as exc:
            code = exc.status_code
            if code not in (408, 409, 429) and code < 500:
                self.registry.record(
                    LLMCall(operation, model, "rejected", seconds=time.perf_counter() - started)
                )
                raise LLMRequestError(
                    f"the LLM endpoint rejected the request (HTTP {code}): {exc}", operation
                ) from exc
            outcome = "rate_limited" if code == 429 else "server_error"
            return _Failure(outcome, f"HTTP {code}: {exc}", _retry_after(exc))
        seconds = time.perf_counter() - started
        content = response.choices[0].message.content if response.choices else None
        used = response.usage
        return _Reply(
            content or "",
            model,
            used.prompt_tokens if used else 0,
            used.completion_tokens if used else 0,
            seconds,
        )


class LazyLLM:
    """A process's LLM client, made on first use. `get()` raises LLMNotConfigured while no
    endpoint is configured, so that an operation needing the LLM says so when it is called
    (and nothing else does)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: LLMClient | None = None
        self._lock = threading.Lock()

    def get(self) -> LLMClient:
        with self._lock:
            if self._client is None:
                self._client = LLMClient.from_settings(self.settings)
            return self._client


def _with_schema(messages: list[Message], schema: type[BaseModel]) -> list[Message]:
    instruction = schema_instruction(schema)
    if messages and messages[0]["role"] == "system":
        first = {"role": "system", "content": f"{messages[0]['content']}\n\n{instruction}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
