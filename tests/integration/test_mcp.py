"""The MCP server through the SDK's own client, against real uvicorn servers (write API with
the inline pipeline, query service) on the suite's PostgreSQL: streamable HTTP at
/mcp/{agent_id} and stdio through `memora mcp`. Seed, talk, recall; every fixed tool returns
only its own category; bad arguments and a missing LLM are tool errors, and the session
goes on; API keys and tenants as on the REST API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr

from memora.basics.config import Settings
from tests.integration.auth_support import ADMIN, ADMIN_KEY, make_tenant
from tests.integration.stack_support import stack
from tests.unit.test_seeding import CAST

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api_url(settings: Settings, pool: Any, pipeline: Any) -> Iterator[str]:
    yield from stack(settings, pool, pipeline)


@pytest.fixture(scope="module")
def auth_url(settings: Settings, pool: Any, pipeline: Any) -> Iterator[str]:
    update = {"auth_required": True, "admin_key": SecretStr(ADMIN_KEY)}
    yield from stack(settings.model_copy(update=update), pool, pipeline)


def _call(url: str, agent: str, steps: Any, headers: dict[str, str] | None = None) -> Any:
    """Run `steps(client)` in one MCP session over streamable HTTP."""

    async def go() -> Any:
        async with httpx2.AsyncClient(headers=headers or {}, timeout=120) as http:
            transport = streamable_http_client(f"{url}/mcp/{agent}", http_client=http)
            async with Client(transport) as client:
                return await steps(client)

    return asyncio.run(go())


def _data(result: Any) -> Any:
    assert not result.is_error, result
    return result.structured_content


def _seed(
    url: str, suffix: str, headers: dict[str, str] | None = None, description: str | None = None
) -> tuple[str, str]:
    cast = json.loads(json.dumps(CAST))
    for c in cast["characters"]:
        c["agent_id"] += suffix
    cast["knowledge"] = []
    if description:
        cast["characters"][0]["description"] = description
    response = httpx.post(f"{url}/api/seed", json=cast, headers=headers, timeout=300)
    assert response.status_code == 200, response.text
    return cast["characters"][0]["agent_id"], cast["characters"][1]["agent_id"]


def test_seed_talk_recall_over_streamable_http(api_url: str, agent_id: str) -> None:
    alex, jordan = _seed(api_url, f"-{agent_id}")
    for turn, (speaker, text) in enumerate(
        [("Jordan", "I love Italian food, lasagne most of all."), ("Alex", "Then Bella's it is.")],
        1,
    ):
        body = {"scene": "dinner", "turn": turn, "speaker": speaker, "text": text,
                "listeners": [alex, jordan]}  # fmt: skip
        assert httpx.post(f"{api_url}/api/episodes", json=body).status_code == 200

    async def steps(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out: dict[str, Any] = {"tools": tools}
        for name in ("query_self", "query_background", "query_communication_style", "query_scene"):
            out[name] = _data(await client.call_tool(name, {}))
        out["character"] = _data(await client.call_tool("query_character", {"name": "Jordan"}))
        out["memory"] = _data(
            await client.call_tool("query_memory", {"query": "what food does Jordan like?"})
        )
        out["search"] = _data(
            await client.call_tool("search", {"query": "Bella", "filters": {"speaker": "Alex"}})
        )
        out["bad"] = await client.call_tool("search", {"query": "", "top_k": 500})
        out["bad_filter"] = await client.call_tool(
            "search", {"query": "x", "filters": {"turn": {"near": 1}}}
        )
        out["think"] = await client.call_tool("think", {"query": "Where should we eat?"})
        out["follow_up"] = await client.call_tool("search", {"query": "Bella", "follow_up": True})
        out["retain"] = _data(
            await client.call_tool("retain", {"content": "Alex booked a table at Bella's."})
        )
        live = {"content": "Alex: see you at eight.", "document_id": "chat-1",
                "update_mode": "append", "message_id": "a1", "speaker": "Alex"}  # fmt: skip
        out["append"] = _data(await client.call_tool("retain", live))
        out["append_again"] = _data(await client.call_tool("retain", live))
        secret = {"content": "Alex: my door code is 4417.", "document_id": "chat-tmp",
                  "temporary": True}  # fmt: skip
        out["temporary"] = _data(await client.call_tool("retain", secret))
        out["after"] = _data(await client.call_tool("query_self", {}))  # the session goes on
        return out

    out = _call(api_url, alex, steps)
    assert {"retain", "search", "think", "query_self", "query_background",
            "query_communication_style", "query_scene", "query_character",
            "query_memory"} <= set(out["tools"])  # fmt: skip
    annotations = out["tools"]["query_self"].annotations
    assert annotations.read_only_hint and annotations.idempotent_hint
    assert not out["tools"]["retain"].annotations.read_only_hint
    assert out["query_self"]["memories"][0]["content"].startswith("You are Alex")
    assert len(out["query_self"]["memories"]) == 1
    assert len(out["query_background"]["memories"]) > 1
    assert out["query_communication_style"]["memories"][0]["content"] == "Short sentences."
    assert {m["content"].split(":")[0] for m in out["query_scene"]["memories"]} == {
        "Location", "Atmosphere", "Time", "Situation"}  # fmt: skip
    assert out["character"]["memories"][0]["content"].startswith("Jordan, a chef")
    recalled = out["memory"]["memories"][0]
    assert (
        recalled["content"].startswith("Jordan said: I love Italian food")
        and recalled["turn"] == "1"
    )
    assert [m["content"] for m in out["search"]["memories"]] == ["Alex said: Then Bella's it is."]
    for bad in ("bad", "bad_filter", "think", "follow_up"):
        assert out[bad].is_error
    assert "llm_not_configured" in out["think"].content[0].text
    assert "llm_not_configured" in out["follow_up"].content[0].text  # the server has no LLM
    assert "validation" in out["bad_filter"].content[0].text
    op = httpx.get(f"{api_url}/api/operations/{out['retain']['operation_id']}").json()
    assert op["status"] == "completed" and op["agent_id"] == alex
    assert out["after"]["memories"]
    assert (out["append"]["status"], out["append"]["messages_new"]) == ("created", 1)
    # a temporary chat: stored, nothing remembered from it
    kept = httpx.get(f"{api_url}/api/operations/{out['temporary']['operation_id']}").json()
    assert kept["status"] == "completed" and kept["counts"]["units"] == 0, kept
    assert (out["append_again"]["status"], out["append_again"]["messages_existing"]) == (
        "unchanged", 1,
    )  # fmt: skip


def test_unknown_agent_path_and_bad_keys_are_refused(api_url: str) -> None:
    assert httpx.post(f"{api_url}/mcp/bad%20id", json={}).status_code == 404
    response = httpx.post(f"{api_url}/mcp/alex", json={}, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_stdio_server_through_memora_mcp(api_url: str, agent_id: str) -> None:
    alex, _ = _seed(api_url, f"-{agent_id}")
    env = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "PATH", "HF_", "HOME"))}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "services.cli.main", "mcp", "--agent", alex, "--api", api_url],
        env=env,
    )

    async def go() -> Any:
        async with Client(params) as client:
            scene = await client.call_tool("query_scene", {})
            bad = await client.call_tool("query_character", {"name": ""})
            me = await client.call_tool("query_self", {})
            return scene, bad, me

    scene, bad, me = asyncio.run(go())
    assert len(_data(scene)["memories"]) == 4
    assert bad.is_error
    assert _data(me)["memories"][0]["content"].startswith("You are Alex")


def test_api_keys_and_tenants_as_on_the_rest_api(auth_url: str, agent_id: str) -> None:
    class Api:  # make_tenant's client: the admin routes of the uvicorn server
        @staticmethod
        def post(path: str, **kw: Any) -> httpx.Response:
            return httpx.post(f"{auth_url}{path}", **kw)

    one, two = make_tenant(Api, "mcp1"), make_tenant(Api, "mcp2")
    alex, _ = _seed(auth_url, f"-{agent_id}", one.headers, "Tenant one's Alex.")
    _seed(auth_url, f"-{agent_id}", two.headers, "Tenant two's Alex.")

    async def me(client: Client) -> Any:
        return _data(await client.call_tool("query_self", {}))["memories"][0]["content"]

    assert _call(auth_url, alex, me, one.headers).endswith("Tenant one's Alex.")
    assert _call(auth_url, alex, me, {"X-API-Key": two.key}).endswith("Tenant two's Alex.")
    assert httpx.post(f"{auth_url}/mcp/{alex}", json={}).status_code == 401
    assert httpx.post(f"{auth_url}/mcp/{alex}", json={}, headers=ADMIN).status_code != 401


def test_memora_seed_cli_reads_yaml_and_is_idempotent(
    api_url: str, agent_id: str, tmp_path: Path
) -> None:
    cast = json.loads(json.dumps(CAST))
    for c in cast["characters"]:
        c["agent_id"] += f"-{agent_id}"
    for k in cast["knowledge"]:
        k["agent_id"] += f"-{agent_id}"
    path = tmp_path / "cast.yaml"
    path.write_text(yaml.safe_dump(cast))
    command = [sys.executable, "-m", "services.cli.main", "seed", str(path), "--api", api_url]
    first = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    again = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    assert set(json.loads(first.stdout)) == {"created"}
    assert set(json.loads(again.stdout)) == {"unchanged"}
    path.write_text("characters: [")
    broken = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert broken.returncode != 0 and "cannot read" in broken.stderr


def test_conversation_and_lifecycle_tools(api_url: str, agent_id: str) -> None:
    items = [
        {"content": "Where should we hold the offsite?", "speaker": "Maya", "role": "user",
         "message_id": "m1"},
        {"content": "Lisbon in May: the venue by the river is free.", "speaker": "Sam",
         "role": "assistant", "message_id": "m2"},
    ]  # fmt: skip
    body = {"agent_id": agent_id, "items": items, "document_id": "offsite", "title": "Offsite"}
    assert httpx.post(f"{api_url}/api/memories/batch", json=body).status_code == 200

    async def steps(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out: dict[str, Any] = {"tools": tools}
        out["chat"] = _data(
            await client.call_tool("conversation_search", {"query": "offsite venue river"})
        )
        fact = {"content": "Maya lives in Porto.", "category": "fact", "importance": 7}
        out["first"] = _data(await client.call_tool("remember", fact))
        out["again"] = _data(await client.call_tool("remember", fact))
        out["moved"] = _data(
            await client.call_tool("remember", {"content": "Maya lives in Berlin."})
        )
        out["recall"] = _data(await client.call_tool("recall", {"query": "where does Maya live"}))
        porto = f"{api_url}/api/agents/{agent_id}/memories/{out['first']['memory_id']}"
        then = {"query": "where does Maya live", "as_of": httpx.get(porto).json()["valid_from"]}
        out["search_then"] = _data(await client.call_tool("search", then))
        out["recall_then"] = _data(await client.call_tool("recall", then))
        out["link"] = _data(
            await client.call_tool(
                "link",
                {
                    "memory_id": str(out["moved"]["memory_id"]),
                    "related_memory_id": str(out["first"]["memory_id"]),
                    "relationship": "moved_from",
                },
            )
        )
        out["dry"] = _data(
            await client.call_tool(
                "forget", {"memory_id": str(out["moved"]["memory_id"]), "dry_run": True}
            )
        )
        moved = {"memory_id": str(out["moved"]["memory_id"])}
        by_query = {"query": "Maya lives in Berlin"}
        out["unconfirmed"] = _data(await client.call_tool("forget", by_query))
        out["kept"] = _data(await client.call_tool("recall", {"query": "where does Maya live"}))
        out["by_id"] = _data(await client.call_tool("forget", moved))  # no confirm needed
        out["gone"] = _data(await client.call_tool("recall", {"query": "where does Maya live"}))
        long_ago = {"query": "where does Maya live", "end": "2001-01-01T00:00:00Z"}
        out["recall_long_ago"] = _data(await client.call_tool("recall", long_ago))
        out["restored"] = _data(await client.call_tool("restore", moved))
        better = moved | {"content": "Maya lives in Berlin, in Kreuzberg."}
        out["edited"] = _data(await client.call_tool("edit", better))
        turn = {"message": "Where does Maya live these days?"}
        out["turn_context"] = _data(await client.call_tool("memory_context", turn))
        chat = {"query": "offsite venue river", "limit": 50}  # above 20: clamped, not refused
        out["chat_all"] = _data(await client.call_tool("conversation_search", chat))
        strict = chat | {"min_score": 1.0, "highlight": True}
        out["chat_strict"] = _data(await client.call_tool("conversation_search", strict))
        loose = chat | {"min_score": 0.0, "highlight": True}
        out["chat_marked"] = _data(await client.call_tool("conversation_search", loose))
        out["reflect"] = await client.call_tool("reflect", {"topic": "Maya"})
        out["evolve"] = _data(await client.call_tool("evolve", {}))
        out["bad"] = await client.call_tool("forget", {"memory_id": "not-an-id"})
        return out

    out = _call(api_url, agent_id, steps)
    tools = out["tools"]
    assert {
        "conversation_search",
        "remember",
        "forget",
        "recall",
        "reflect",
        "link",
        "evolve",
    } <= set(tools)
    assert tools["forget"].annotations.destructive_hint
    assert tools["conversation_search"].annotations.read_only_hint
    [hit, *_] = out["chat"]["results"]
    assert "m2" in hit["message_ids"] and hit["conversation_title"] == "Offsite"
    assert out["first"]["decision"] == "ADD" and out["again"]["decision"] == "SKIP"
    assert out["moved"]["decision"] == "SUPERSEDE"
    assert out["moved"]["superseded_id"] == out["first"]["memory_id"]
    assert "Berlin" in out["recall"]["memories"][0]["text"]
    # as_of: what was true when Porto was remembered (superseded since)
    for found in (
        [m["content"] for m in out["search_then"]["memories"]],
        [m["text"] for m in out["recall_then"]["memories"]],
    ):
        assert "Maya lives in Porto." in found and "Maya lives in Berlin." not in found
    assert out["dry"]["dry_run"] and len(out["dry"]["forgotten"]) == 1
    assert out["reflect"].is_error and out["bad"].is_error
    # evolve: the operation (run by a worker; this stack has none for it: left queued)
    evolving = httpx.get(f"{api_url}/api/operations/{out['evolve']['operation_id']}").json()
    assert evolving["kind"] == "evolve" and out["evolve"]["agent_id"] == agent_id
    # forget by query without confirm only lists; by id it forgets (seed 002)
    assert out["unconfirmed"]["dry_run"] and len(out["unconfirmed"]["forgotten"]) >= 1
    kept = [m["id"] for m in out["kept"]["memories"]]
    assert str(out["moved"]["memory_id"]) in kept
    assert not out["by_id"]["dry_run"] and len(out["by_id"]["forgotten"]) == 1
    gone = [m["id"] for m in out["gone"]["memories"]]
    assert str(out["moved"]["memory_id"]) not in gone
    assert out["recall_long_ago"]["memories"] == []  # recall's time range
    # restore, then edit: a new version supersedes the restored memory
    assert out["edited"]["superseded_id"] == out["moved"]["memory_id"]
    assert "Kreuzberg" in out["turn_context"]["context"]  # the turn's memory context
    assert str(out["edited"]["memory_id"]) in {m["id"] for m in out["turn_context"]["memories"]}
    assert tools["memory_context"].annotations.read_only_hint
    # conversation_search: min_score, highlight, limit above 20
    assert 1 <= out["chat_all"]["total_results"] <= 20
    assert out["chat_strict"]["results"] == []
    river = next(r for r in out["chat_marked"]["results"] if "m2" in r["message_ids"])
    assert "**river**" in river["snippet_highlighted"]


def test_the_relations_tool(api_url: str, agent_id: str) -> None:
    items = [{"content": "I live in Porto with my brother Rui.", "speaker": "Maya",
              "event_date": "2024-02-01T10:00:00Z"}]  # fmt: skip
    body = {"agent_id": agent_id, "items": items, "document_id": "family"}
    assert httpx.post(f"{api_url}/api/memories/batch", json=body).status_code == 200

    async def steps(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        maya = _data(await client.call_tool("relations", {"name": "Maya"}))
        nobody = await client.call_tool("relations", {"name": "Nobody"})
        return {"tools": tools, "maya": maya, "nobody": nobody}

    out = _call(api_url, agent_id, steps)
    assert out["tools"]["relations"].annotations.read_only_hint
    assert out["maya"]["entity"] == "Maya"
    found = {(r["relation"], r["object"], r["status"]) for r in out["maya"]["relations"]}
    assert found == {("lives_in", "Porto", "current"), ("sibling_of", "Rui", "current")}
    assert out["nobody"].is_error and "entity_not_found" in str(out["nobody"].content)
