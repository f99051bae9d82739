"""The pieces of re-embedding by generation that need no database: what a process does when its
settings name another model than the live generation's, how a refused write is recognised, how
an index is made again over the next column, and the command's refusals
(tests/integration/test_reembed.py runs it whole)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memora.basics.config import DEFAULT_EMBEDDING_MODEL, Settings
from memora.pipeline.generation import live_settings, mismatch
from memora.store import generations
from memora.store.generations import Generation, GenerationChanged
from memora.store.reembed import next_index
from services.cli.main import app

BUNDLED = Generation(1, "live", "local", DEFAULT_EMBEDDING_MODEL, 384)
SERVED = Generation(2, "live", "openai", "text-embedding-3-small", 1536, "http://embed:8000/v1")


def test_the_live_generation_overrides_the_configured_model() -> None:
    s = Settings(embedding_model="/models/bge-small-en-v1.5")
    live = live_settings(s, SERVED)
    assert (live.embedding_provider, live.embedding_model, live.embedding_dim) == (
        "openai", "text-embedding-3-small", 1536,
    )  # fmt: skip
    assert live.embedding_base_url == "http://embed:8000/v1"
    assert live.llm_model == s.llm_model  # the rest as configured
    assert live_settings(s, BUNDLED).embedding_model == DEFAULT_EMBEDDING_MODEL


def test_a_configured_model_other_than_the_live_one_says_what_to_do() -> None:
    assert mismatch(Settings(), BUNDLED) is None
    said = mismatch(Settings(embedding_model="/models/bge-small-en-v1.5"), BUNDLED)
    assert said is not None
    assert "memora reembed --model /models/bge-small-en-v1.5 --provider local" in said
    assert DEFAULT_EMBEDDING_MODEL in said  # the live one, to set instead
    assert mismatch(Settings(embedding_dim=768), BUNDLED) is not None  # the dimension too


def test_a_refused_write_is_recognised_through_its_causes() -> None:
    try:
        try:
            raise GenerationChanged("embedding generation 1 is not the live one")
        except GenerationChanged as exc:
            raise RuntimeError("the stage failed") from exc
    except RuntimeError as outer:
        assert generations.changed(outer)
    assert not generations.changed(RuntimeError("another failure"))


def test_a_vector_of_the_retired_dimension_is_a_generation_change() -> None:
    """pgvector refuses a vector of another dimension before the trigger: a stage that embedded
    with the retired model just before a switch to another dimension runs again too."""
    import psycopg

    assert generations.changed(psycopg.errors.DataException("expected 768 dimensions, not 384"))
    assert not generations.changed(psycopg.errors.DataException("invalid input syntax"))


def test_an_index_is_made_again_over_the_next_column() -> None:
    hnsw = (
        "CREATE INDEX idx_memory_vectors_embedding ON public.memory_vectors "
        "USING hnsw (embedding halfvec_cosine_ops)"
    )
    assert next_index("idx_memory_vectors_embedding", "embedding", hnsw) == (
        "CREATE INDEX CONCURRENTLY idx_memory_vectors_embedding_next ON public.memory_vectors "
        "USING hnsw (embedding_next halfvec_cosine_ops)"
    )
    covering = (
        "CREATE INDEX idx_unit_entities_written ON public.unit_entities USING btree "
        "(entity_id, written) INCLUDE (unit_id, signature, tenant_id)"
    )
    assert next_index("idx_unit_entities_written", "signature", covering).endswith(
        "(entity_id, written) INCLUDE (unit_id, signature_next, tenant_id)"
    )


@pytest.mark.parametrize("args", [["reembed"], ["reembed", "--batch-size", "0"]])
def test_the_command_refuses_without_a_model_or_with_a_bad_batch(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
