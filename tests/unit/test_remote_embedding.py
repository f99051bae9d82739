"""Embedding providers (seed 001) against the fake server over real HTTP: OpenAI's
/v1/embeddings, Ollama's /api/embed and /api/embeddings; batching, retries with back-off,
metrics, and the start-up validation's errors."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from memora.basics.config import Settings
from memora.basics.errors import PermanentStageError, TransientStageError
from memora.nlp.embedding import embedder_for
from memora.nlp.remote_embedding import (
    EmbeddingRejected,
    EmbeddingUnavailable,
    OllamaEmbedder,
    OpenAIEmbedder,
    RemoteEmbedder,
)
from tests.fakes import Fail, FakeOpenAI
from tests.fakes.openai_server import fake_vector

FAST = {"retries": 2, "backoff": (0.001, 0.005), "timeout": 5.0}


@pytest.fixture()
def fake(fake_llm: FakeOpenAI) -> Iterator[FakeOpenAI]:
    yield fake_llm


def requests_count(provider: str, outcome: str) -> float:
    labels = {"provider": provider, "outcome": outcome}
    return REGISTRY.get_sample_value("memora_embedding_request_duration_seconds_count", labels) or 0


def both(fake: FakeOpenAI, model: str = "fake-embed", **kw: object) -> list[RemoteEmbedder]:
    return [
        OpenAIEmbedder(model, fake.base_url, "sk-test", batch_size=3, **FAST, **kw),  # type: ignore[arg-type]
        OllamaEmbedder(model, fake.root_url, batch_size=3, **FAST, **kw),  # type: ignore[arg-type]
    ]


def test_vectors_are_the_servers_normalised_in_order_and_batched(fake: FakeOpenAI) -> None:
    texts = [f"note {i} about the garden" for i in range(7)]
    for embedder in both(fake):
        fake.requests.clear()
        embedder.validate(384)
        vectors = embedder.embed(texts)
        assert vectors.shape == (7, 384) and vectors.dtype == np.float32
        expected = np.asarray([fake_vector(t, 384) for t in texts], dtype=np.float32)
        np.testing.assert_allclose(vectors, expected, atol=1e-6)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        sent = [r for r in fake.embedding_requests() if "input" in r.body]
        assert [len(r.body["input"]) for r in sent] == [1, 3, 3, 1]  # the probe, then batches
        assert embedder.embed([]).shape == (0, 384)


def test_the_key_is_sent(fake: FakeOpenAI) -> None:
    OpenAIEmbedder("fake-embed", fake.base_url, "sk-test", **FAST).embed(["hello"])  # type: ignore[arg-type]
    OllamaEmbedder("fake-embed", fake.root_url, "ol-key", **FAST).embed(["hello"])  # type: ignore[arg-type]
    sent = fake.embedding_requests()
    assert [r.headers["authorization"] for r in sent] == ["Bearer sk-test", "Bearer ol-key"]
    assert [r.body["model"] for r in sent] == ["fake-embed", "fake-embed"]


def test_an_older_ollama_gets_one_prompt_per_request(fake: FakeOpenAI) -> None:
    fake.ollama_batch_route = False
    embedder = OllamaEmbedder("fake-embed", fake.root_url + "/v1", **FAST)  # type: ignore[arg-type]
    embedder.validate(384)
    vectors = embedder.embed(["red apples", "green pears"])
    assert not embedder.batch_route
    assert [r.body.get("prompt") for r in fake.embedding_requests()[-2:]] == [
        "red apples",
        "green pears",
    ]
    np.testing.assert_allclose(vectors[1], fake_vector("green pears", 384), atol=1e-6)


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_transient_failures_are_retried_with_back_off(fake: FakeOpenAI, provider: str) -> None:
    embedder = both(fake)[provider == "ollama"]
    ok_before = requests_count(provider, "ok")
    failed_before = requests_count(provider, "server_error")
    fake.fail_embeddings(Fail(503), Fail(429))
    assert embedder.embed(["after two failures"]).shape == (1, 384)
    assert requests_count(provider, "server_error") - failed_before == 1
    assert requests_count(provider, "ok") - ok_before == 1
    assert requests_count(provider, "rate_limited") >= 1

    fake.fail_embeddings(Fail(500), Fail(500), Fail(500))  # 1 + 2 retries, all failing
    with pytest.raises(EmbeddingUnavailable, match="unavailable after 3 attempts") as failed:
        embedder.embed(["never"])
    assert isinstance(failed.value, TransientStageError)  # a stage retries it later


def test_a_refusal_is_not_retried(fake: FakeOpenAI) -> None:
    embedder = both(fake)[0]
    fake.fail_embeddings(Fail(401, "invalid api key"), Fail(401))
    with pytest.raises(EmbeddingRejected, match="HTTP 401") as refused:
        embedder.embed(["x"])
    assert isinstance(refused.value, PermanentStageError)
    assert len(fake.embedding_requests()) == 1


def test_time_outs_and_dead_servers_are_transient() -> None:
    dead = OpenAIEmbedder("m", "http://127.0.0.1:9/v1", retries=1, backoff=(0.001, 0.001))
    with pytest.raises(EmbeddingUnavailable, match="cannot connect"):
        dead.embed(["x"])


@pytest.mark.parametrize("index", [0, 1])
def test_validation_names_the_setting(fake: FakeOpenAI, index: int) -> None:
    with pytest.raises(
        RuntimeError, match=r"'nomic-embed-text' not found .*MEMORA_EMBEDDING_MODEL"
    ):
        both(fake, "nomic-embed-text")[index].validate(384)
    with pytest.raises(RuntimeError, match="gives 768-d vectors but the database's are 384-d") as e:
        both(fake, "fake-embed-768")[index].validate(384)
    assert "MEMORA_EMBEDDING_DIM" in str(e.value) and "memora migrate" in str(e.value)


def test_an_unknown_model_the_server_does_not_list(fake: FakeOpenAI) -> None:
    """A server without a model listing: the test embedding's 404 names the model."""
    fake.embedding_models["hidden"] = 384
    embedder = OpenAIEmbedder("hidden", fake.base_url, **FAST)  # type: ignore[arg-type]
    embedder.validate(384)  # listed: fine
    fake.list_models = False
    for embedder in both(fake, "gone"):
        with pytest.raises(RuntimeError, match="'gone' not found") as e:
            embedder.validate(384)
        assert "HTTP 404" in str(e.value)  # the test embedding's answer


def test_a_refused_key_names_the_key_setting(fake: FakeOpenAI) -> None:
    fake.fail_embeddings(Fail(401, "Incorrect API key provided"))
    with pytest.raises(RuntimeError, match=r"refused \(MEMORA_EMBEDDING_API_KEY\): HTTP 401"):
        both(fake)[0].validate(384)


def test_an_unreachable_endpoint_names_the_base_url_setting() -> None:
    dead = OllamaEmbedder("m", "http://127.0.0.1:9", retries=0)
    with pytest.raises(RuntimeError, match="does not answer \\(MEMORA_EMBEDDING_BASE_URL\\)"):
        dead.validate(384)


def test_settings_choose_and_check_the_provider(fake: FakeOpenAI) -> None:
    s = Settings(
        embedding_provider="ollama", embedding_base_url=fake.root_url, embedding_model="fake-embed"
    )
    embedder = embedder_for(s)
    assert isinstance(embedder, OllamaEmbedder) and embedder.dim == 384
    assert embedder.count_tokens(["two words"]) == [2]  # the bundled tokenizer's count
    with pytest.raises(RuntimeError, match="768-d"):
        embedder_for(s.model_copy(update={"embedding_model": "fake-embed-768"}))


def test_a_remote_provider_needs_a_model_and_gets_a_default_url() -> None:
    with pytest.raises(ValidationError, match="needs MEMORA_EMBEDDING_MODEL"):
        Settings(embedding_provider="openai")
    s = Settings(embedding_provider="ollama", embedding_model="nomic-embed-text")
    assert s.embedding_base_url == "http://localhost:11434"
    s = Settings(embedding_provider="openai", embedding_model="text-embedding-3-small")
    assert s.embedding_base_url == "https://api.openai.com/v1"
