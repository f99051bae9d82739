"""The query service's port follows the API's unless it is set (issue 25: two stacks on one
machine must not collide on the query port)."""

from __future__ import annotations

import pytest

from memora.basics.config import Settings


def test_query_port_follows_the_api_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORA_QUERY_PORT", raising=False)
    monkeypatch.setenv("MEMORA_PORT", "9100")
    assert Settings().query_port == 9101
    assert Settings(port=9300).query_port == 9301
    monkeypatch.delenv("MEMORA_PORT")
    assert (Settings().port, Settings().query_port) == (8080, 8081)  # the documented default


def test_a_query_port_that_is_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORA_PORT", "9100")
    monkeypatch.setenv("MEMORA_QUERY_PORT", "7000")
    assert Settings().query_port == 7000
    assert Settings(query_port=7001).query_port == 7001
