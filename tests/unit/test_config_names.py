"""Seed 003's configuration names beside today's, the LLM providers, the judge LLM's fallback to
the main one, and the start-up report of unknown MEMORA_* variables."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from memora.basics.config import (
    LLM_PROVIDER_URLS,
    Settings,
    judge_llm_settings,
    known_variables,
    report_environment,
)
from memora.nlp.llm import LLMClient


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No MEMORA_*, LLM_* or JUDGE_* variable of the machine's, and no .env file, leaks in."""
    import os

    for name in list(os.environ):
        if name.upper().startswith(("MEMORA_", "LLM_", "JUDGE_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_seed_names_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "MEMORA_API_DATABASE_URL": "postgresql://memora:pw@db:5432/memora",
        "MEMORA_API_LLM_PROVIDER": "groq",
        "MEMORA_API_LLM_API_KEY": "gsk-seed",
        "MEMORA_API_LLM_MODEL": "llama-3.3-70b-versatile",
    }.items():
        monkeypatch.setenv(name, value)
    s = Settings()
    assert s.database_url == "postgresql://memora:pw@db:5432/memora"
    assert (s.llm_provider, s.llm_api_key, s.llm_model) == (
        "groq",
        "gsk-seed",
        "llama-3.3-70b-versatile",
    )
    assert s.llm_base_url == "https://api.groq.com/openai/v1"  # the provider's
    assert s.llm_configured and s.resolved_extractor == "llm"


def test_the_seeds_bare_llm_names_are_read_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "openai")
    monkeypatch.setenv("LLM_API_KEY", "sk-bare")
    s = Settings()
    assert (s.llm_base_url, s.llm_api_key, s.llm_model) == (
        "https://api.openai.com/v1",
        "sk-bare",
        "gpt-4o-mini",
    )
    monkeypatch.setenv("MEMORA_API_LLM_API_KEY", "sk-seed")
    assert Settings().llm_api_key == "sk-seed"


def test_todays_name_wins_and_the_conflict_is_reported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MEMORA_DATABASE_URL", "postgresql://today/db")
    monkeypatch.setenv("MEMORA_API_DATABASE_URL", "postgresql://seed/db")
    monkeypatch.setenv("MEMORA_LLM_MODEL", "model-today")
    monkeypatch.setenv("MEMORA_API_LLM_MODEL", "model-today")  # same value: nothing to say
    assert Settings().database_url == "postgresql://today/db"
    with caplog.at_level(logging.WARNING, logger="memora.config"):
        warnings = report_environment()
    assert warnings == [
        "MEMORA_DATABASE_URL and MEMORA_API_DATABASE_URL are both set: MEMORA_DATABASE_URL is used"
    ]
    assert warnings[0] in caplog.text


def test_an_explicit_base_url_beats_the_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORA_API_LLM_PROVIDER", "openai")
    monkeypatch.setenv("MEMORA_API_LLM_API_KEY", "sk-x")
    monkeypatch.setenv("MEMORA_API_LLM_BASE_URL", "https://proxy.example/v1")
    monkeypatch.setenv("MEMORA_LLM_MODEL", "gpt-4.1")
    s = Settings()
    assert (s.llm_base_url, s.llm_model) == ("https://proxy.example/v1", "gpt-4.1")


def test_ollama_needs_no_key_and_gets_its_url() -> None:
    s = Settings(llm_provider="ollama")
    assert s.llm_base_url == LLM_PROVIDER_URLS["ollama"] == "http://localhost:11434/v1"
    assert s.llm_api_key is None and s.llm_configured
    client = LLMClient(s)  # the openai client gets a placeholder key
    assert str(client._client.base_url).rstrip("/") == "http://localhost:11434/v1"


@pytest.mark.parametrize("provider", ["openai", "groq"])
def test_a_hosted_provider_without_a_key_is_refused(provider: str) -> None:
    with pytest.raises(ValidationError, match=f"MEMORA_LLM_PROVIDER={provider} needs"):
        Settings(llm_provider=provider)


def test_an_unknown_provider_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORA_API_LLM_PROVIDER", "anthropic")
    with pytest.raises(ValidationError, match="openai', 'groq' or 'ollama'"):
        Settings()


def test_the_judge_falls_back_to_the_main_llm() -> None:
    main = Settings(llm_provider="groq", llm_api_key="gsk-main", llm_model="m-main")
    judge = judge_llm_settings(main)
    assert (judge.provider, judge.base_url, judge.api_key, judge.model) == (
        "groq",
        "https://api.groq.com/openai/v1",
        "gsk-main",
        "m-main",
    )
    # a model alone: the main endpoint with another model
    assert judge_llm_settings(main.model_copy(update={"judge_llm_model": "big"})).model == "big"


def test_a_judge_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "groq")
    monkeypatch.setenv("LLM_API_KEY", "gsk-main")
    monkeypatch.setenv("JUDGE_LLM_PROVIDER", "openai")
    monkeypatch.setenv("JUDGE_LLM_API_KEY", "sk-judge")
    s = Settings()
    judge = judge_llm_settings(s)
    assert (judge.provider, judge.base_url, judge.api_key, judge.model) == (
        "openai",
        "https://api.openai.com/v1",
        "sk-judge",
        "gpt-4o-mini",
    )
    # applied to settings: what LLMClient takes, every operation on the judge's model
    applied = judge.apply(s.model_copy(update={"llm_think_model": "m-think"}))
    client = LLMClient(applied)
    assert client.model_for("think") == "gpt-4o-mini"
    assert str(client._client.base_url).rstrip("/") == "https://api.openai.com/v1"
    assert s.llm_api_key == "gsk-main"  # the main LLM is untouched


def test_the_main_key_never_goes_to_another_host() -> None:
    s = Settings(llm_provider="openai", llm_api_key="sk-main", judge_llm_provider="groq")
    with pytest.raises(ValueError, match="JUDGE_LLM_PROVIDER=groq needs JUDGE_LLM_API_KEY"):
        judge_llm_settings(s)
    local = judge_llm_settings(s.model_copy(update={"judge_llm_provider": "ollama"}))
    assert local.api_key is None and local.base_url == "http://localhost:11434/v1"


def test_unknown_variables_are_reported_with_the_nearest_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MEMORA_EMBEDING_MODEL", "x")  # a typo
    monkeypatch.setenv("MEMORA_API_LLM_PROVIDR", "groq")  # a typo of a seed name
    monkeypatch.setenv("MEMORA_COMPLETELY_DIFFERENT_THING", "1")
    monkeypatch.setenv("MEMORA_LT_RUN_ID", "7")  # the load tests'
    monkeypatch.setenv("MEMORA_REDIS_ADDRESS", "redis:6379")  # KEDA's
    monkeypatch.setenv("MEMORA_LLM_API_KEY", "k")  # known
    with caplog.at_level(logging.WARNING, logger="memora.config"):
        warnings = report_environment()
    assert warnings == [
        "unknown setting MEMORA_API_LLM_PROVIDR is ignored; did you mean MEMORA_API_LLM_PROVIDER?",
        "unknown setting MEMORA_COMPLETELY_DIFFERENT_THING is ignored",
        "unknown setting MEMORA_EMBEDING_MODEL is ignored; did you mean MEMORA_EMBEDDING_MODEL?",
    ]
    for warning in warnings:
        assert warning in caplog.text


def test_a_dotenv_file_is_checked_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MEMORA_API_LLM_PROVIDER=ollama\nMEMORA_PROT=9000\n")
    assert report_environment({}) == [
        "unknown setting MEMORA_PROT is ignored; did you mean MEMORA_PORT?"
    ]
    assert Settings().llm_base_url == "http://localhost:11434/v1"  # read from .env


def test_known_variables_cover_every_setting_and_the_seed_names() -> None:
    known = known_variables()
    assert {"MEMORA_PORT", "MEMORA_EMBEDDING_PROVIDER", "MEMORA_API_DATABASE_URL"} <= known
    assert {"LLM_PROVIDER", "JUDGE_LLM_MODEL", "MEMORA_JUDGE_LLM_MODEL"} <= known
    assert len(known) >= len(Settings.model_fields)


def test_the_cli_reports_unknown_variables(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "MEMORA_QUERY_PROT": "9001", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "worker-ready",
         "--heartbeat-file", str(tmp_path / "none")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1  # no heartbeat: the command itself ran
    assert "unknown setting MEMORA_QUERY_PROT is ignored; did you mean MEMORA_QUERY_PORT?" in (
        done.stderr
    )


def test_the_seeds_example_key_is_a_placeholder_in_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORA_API_LLM_PROVIDER", "groq")
    monkeypatch.setenv("MEMORA_API_LLM_API_KEY", "your_api_key_here")  # as seed 003 writes it
    assert Settings().llm_api_key == "your_api_key_here"  # development: accepted
    monkeypatch.setenv("MEMORA_ENVIRONMENT", "production")
    with pytest.raises(
        ValidationError, match="placeholder secrets in production: MEMORA_LLM_API_KEY"
    ):
        Settings()


def test_seed_003s_control_plane_url_is_explained_not_mistaken_for_a_setting() -> None:
    warnings = report_environment({"MEMORA_CP_DATAPLANE_API_URL": "http://localhost:8080"})
    assert len(warnings) == 1 and "did you mean" not in warnings[0]
    assert warnings[0].startswith("MEMORA_CP_DATAPLANE_API_URL is not needed")
    assert "served by the write API" in warnings[0]
