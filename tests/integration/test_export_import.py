"""Export and import (data portability) through the deployed topology: an agent exported from
one server (the suite's database) and imported into a fresh one (a second database, its own
pool, pipeline and services) holds as many of the agent's rows in every table, answers the
same searches with the same results, and exports again to the same file; a re-import changes
nothing; a malformed or truncated file is a 4xx naming the line and leaves nothing behind;
tenants stay apart."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from memora.basics.config import Settings
from memora_client import MemoraClient
from tests.conftest import own_database
from tests.integration.auth_support import auth_app, make_tenant
from tests.integration.stack_support import Topology, topology

pytestmark = pytest.mark.integration

FACTS = [
    {"content": "Maya is planning a trip to Kyoto in November.", "speaker": "Maya",
     "event_date": "2024-05-01T09:00:00Z", "metadata": {"topic": "travel"}},
    {"content": "Maya's sister Hanna is allergic to peanuts.", "speaker": "Maya",
     "event_date": "2024-05-01T09:01:00Z"},
    {"content": "Hanna works as a nurse at the Charite hospital in Berlin.", "speaker": "Maya",
     "event_date": "2024-05-03T18:30:00Z"},
    {"content": "Maya bought a green road bike from Oskar last weekend.", "speaker": "Maya",
     "event_date": "2024-05-06T10:00:00Z", "metadata": {"topic": "sport"}},
]  # fmt: skip
MESSAGES = [
    {"message_id": "m1", "role": "user", "event_date": "2024-05-02T09:00:00Z",
     "content": "Could you find a ryokan in Gion for our Kyoto trip in November?"},
    {"message_id": "m2", "role": "assistant", "event_date": "2024-05-02T09:01:00Z",
     "content": "Gion has several quiet ryokan; I would book one near Yasaka Shrine."},
]  # fmt: skip
QUERIES = [
    "Where is Maya travelling?",
    "Who is allergic to peanuts?",
    "Where does Hanna work?",
    "Where does Alice live?",
    "What did Maya buy?",
]
AGENT_TABLES = ("agents", "documents", "conversation_messages", "memory_units", "entities")
# An agent's rows an export leaves behind (docs/operations.md, "Export and import"): its jobs'
# history and cursors, and the exporting database's log of removed vectors.
NOT_CARRIED = frozenset({"operations", "job_cursors", "vector_removals"})
UNITS_OF_AGENT = "(SELECT id FROM memory_units WHERE agent_id = %(a)s)"
# memory_terms holds changes of each term's count (compacted now and then): its terms are counted
TERMS = (
    "SELECT count(*) FROM (SELECT lexeme FROM memory_terms WHERE agent_id = %(a)s "
    "GROUP BY lexeme HAVING sum(df) <> 0) terms"
)


@pytest.fixture(scope="module")
def source(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Topology]:
    with topology(settings, pool, pipeline) as t:
        yield t


@pytest.fixture(scope="module")
def target_url(pg_url: str) -> Iterator[str]:
    """A fresh database on the suite's server, migrated: the server an export moves to."""
    with own_database(pg_url, "memora_import") as url:
        yield url


@pytest.fixture(scope="module")
def target_pool(target_url: str) -> Iterator[Any]:
    from memora.db.pool import make_pool

    p = make_pool(target_url, min_size=1, max_size=6, name="target")
    yield p
    p.close()


@pytest.fixture(scope="module")
def target(settings: Settings, target_url: str, target_pool: Any) -> Iterator[Topology]:
    from memora.pipeline.runner import Pipeline

    s = settings.model_copy(update={"database_url": target_url})
    with topology(s, target_pool, Pipeline(s, target_pool)) as t:
        yield t


def _ingest(client: MemoraClient, agent: str) -> None:
    accepted = client.store_batch(agent, FACTS, document_id="notes", title="Notes")
    assert client.wait_for(accepted.operation_id, timeout=120).status == "completed"
    appended = client.append_messages(agent, "chat-1", MESSAGES, title="Kyoto")
    assert client.wait_for(appended.operation_id, timeout=120).status == "completed"
    first = client.remember(agent, "Alice lives in Paris.", category="home")
    moved = client.remember(agent, "Alice moved to Berlin.")  # supersedes the first
    assert moved.decision == "SUPERSEDE", moved
    bike = client.search(agent, "road bike", top_k=1).results[0]
    client.forget(agent, bike.id, reason="sold it")
    client.link(agent, first.memory_id, moved.memory_id, "updated_by")


def _answers(client: MemoraClient, agent: str) -> list[Any]:
    """What the agent answers: searches (ids, texts, order), its conversation search, and the
    memory view of every hit."""
    found: list[Any] = []
    for query in QUERIES:
        hits = client.search(agent, query, top_k=8).results
        found.append([(str(h.id), h.text) for h in hits])
    chat = client.conversation_search(agent, "ryokan near Yasaka Shrine", limit=5).results
    found.append([(hit.message_id, hit.snippet, round(hit.score, 6)) for hit in chat])
    return found


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _counts(url: str, agent: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t} WHERE agent_id = %s", (agent,)).fetchone()[0]  # type: ignore[index]
            for t in AGENT_TABLES
        }


def _rows_per_table(url: str, agent: str) -> dict[str, int]:
    """The agent's rows in every table of the schema that holds any (by `agent_id`, else by its
    memories' ids), less NOT_CARRIED: read from the schema, so a table added later counts."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT table_name::text, array_agg(column_name::text) FROM information_schema.columns "
            "WHERE table_schema = 'public' AND column_name IN ('agent_id', 'unit_id', 'from_unit') "
            "GROUP BY table_name"
        ).fetchall()
        counts: dict[str, int] = {}
        for table, owners in found:
            if table in NOT_CARRIED:
                continue
            if table == "memory_terms":
                counts[table] = conn.execute(TERMS, {"a": agent}).fetchone()[0]  # type: ignore[index]
                continue
            column = "agent_id" if "agent_id" in owners else owners[0]
            condition = "= %(a)s" if column == "agent_id" else f"IN {UNITS_OF_AGENT}"
            query = sql.SQL("SELECT count(*) FROM {t} WHERE {c} " + condition)
            counted = conn.execute(
                query.format(t=sql.Identifier(table), c=sql.Identifier(column)), {"a": agent}
            ).fetchone()
            counts[table] = counted[0]  # type: ignore[index]
    return counts


def _import(url: str, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{url}/api/import",
        content=body,
        headers={"Content-Type": "application/x-ndjson", **(headers or {})},
        timeout=120,
    )


def test_round_trip_answers_the_same(
    source: Topology,
    target: Topology,
    pg_url: str,
    target_url: str,
    agent_id: str,
    tmp_path: Path,
) -> None:
    exported, again = tmp_path / "agent.ndjson", tmp_path / "again.ndjson"
    with MemoraClient(source.url, timeout=120) as src, MemoraClient(target.url, timeout=120) as dst:
        _ingest(src, agent_id)
        assert src.export_agent(agent_id, exported) > 0
        records = _lines(exported)
        header, end = records[0], records[-1]
        assert header["agent_id"] == agent_id and header["dimension"] == 384
        kinds = {r["type"] for r in records}
        assert {"profile", "document", "message", "memory", "entity", "history"} <= kinds
        assert {"unit_entity", "link", "unit_source", "chunk", "index_state"} <= kinds
        memories = [r for r in records if r["type"] == "memory"]
        assert all(len(m["embedding"]) == 384 for m in memories if m["embedding"])
        assert {m["status"] for m in memories} >= {"active", "superseded", "forgotten"}

        result = dst.import_file(exported)
        assert result.agents == [agent_id] and not result.unchanged
        assert result.imported == {k: v for k, v in end["counts"].items() if v}
        # as many of the agent's rows in every table on both servers
        rows = _rows_per_table(pg_url, agent_id)
        assert all(rows[t] for t in AGENT_TABLES), rows
        assert _rows_per_table(target_url, agent_id) == rows
        # everything travelled: the new server exports the same file
        dst.export_agent(agent_id, again)
        assert _lines(again)[1:] == records[1:]

        assert _answers(dst, agent_id) == _answers(src, agent_id)
        hits = [h for q in _answers(dst, agent_id)[:-1] for h in q]
        assert hits and all(h[1] for h in hits)
        moved = src.search(agent_id, "Where does Alice live?", top_k=3).results[0]
        view, copy = src.memory(agent_id, moved.id), dst.memory(agent_id, moved.id)
        skip = {"access_count", "last_accessed_at"}
        assert {k: v for k, v in view.model_dump().items() if k not in skip} == {
            k: v for k, v in copy.model_dump().items() if k not in skip
        }

        # idempotent: the same file again writes nothing
        before = _counts(target_url, agent_id)
        again_result = dst.import_file(exported)
        assert not again_result.imported and again_result.unchanged == result.imported
        assert _counts(target_url, agent_id) == before

        # the imported conversation goes on on the new server
        late = {"message_id": "m3", "role": "user", "event_date": "2024-05-02T09:05:00Z",
                "content": "Please also book a tea ceremony in Uji for our trip."}  # fmt: skip
        appended = dst.append_messages(agent_id, "chat-1", [late])
        assert appended.status == "appended", appended
        assert dst.wait_for(appended.operation_id, timeout=120).status == "completed"
        found = dst.search(agent_id, "tea ceremony in Uji", top_k=3).results
        assert any("Uji" in hit.text for hit in found)


def test_bad_files_name_the_line_and_leave_nothing(
    source: Topology, target: Topology, target_url: str, agent_id: str, tmp_path: Path
) -> None:
    exported = tmp_path / "agent.ndjson"
    with MemoraClient(source.url, timeout=120) as src:
        _ingest(src, agent_id)
        src.export_agent(agent_id, exported)
    lines = exported.read_bytes().splitlines(keepends=True)
    n = len(lines)
    types = [json.loads(raw)["type"] for raw in lines]
    memory_at, link_at = types.index("memory"), types.index("link")
    history_at = len(types) - 1 - types[::-1].index("history")
    bad_uuid = json.loads(lines[memory_at]) | {"id": "not-a-uuid"}
    dangling = json.loads(lines[link_at]) | {"to_unit": str(uuid.uuid4())}  # a unit nowhere
    header = json.loads(lines[0])
    cases = {
        "truncated": (lines[:-1], 400, f"line {n - 1}: truncated: no end record"),
        "cut mid-line": ([*lines[:-3], lines[-3][:40]], 400, f"line {n - 2}: not valid JSON"),
        "unknown type": (
            [*lines[:2], b'{"type": "gizmo"}\n', *lines[2:]],
            400,
            'line 3: unknown record type "gizmo"',
        ),
        "bad uuid": (
            [*lines[:memory_at], json.dumps(bad_uuid).encode() + b"\n", *lines[memory_at + 1 :]],
            400,
            f"line {memory_at + 1}: memory: id:",
        ),
        "dangling reference": (
            [*lines[:link_at], json.dumps(dangling).encode() + b"\n", *lines[link_at + 1 :]],
            400,
            f"line {link_at + 1}: link:",
        ),
        "wrong counts": (
            [*lines[:history_at], *lines[history_at + 1 :]],
            400,
            f"line {n - 1}: the end record counts",
        ),
        "other model": (
            [json.dumps(header | {"dimension": 768}).encode() + b"\n", *lines[1:]],
            409,
            "line 1: the export's embeddings",
        ),
        "no header": (lines[1:], 400, "line 1: the first line must be the header record"),
        "unknown column": (
            [*lines[:memory_at],
             json.dumps(json.loads(lines[memory_at]) | {"mood": "sunny"}).encode() + b"\n",
             *lines[memory_at + 1 :]],
            400,
            f"line {memory_at + 1}: memory: this server has no column mood",
        ),
    }  # fmt: skip
    for name, (body, status, message) in cases.items():
        answer = _import(target.url, b"".join(body))
        assert answer.status_code == status, (name, answer.text)
        error = answer.json()["error"]
        assert error["message"].startswith(message), (name, error)
        assert _counts(target_url, agent_id) == dict.fromkeys(AGENT_TABLES, 0), name
    assert _import(target.url, b"".join(lines)).status_code == 200  # the file itself is fine


def test_tenants_export_and_import_only_their_own(
    settings: Settings, pool: Any, pipeline: Any, target: Topology, tmp_path: Path
) -> None:
    with auth_app(settings, pool, pipeline) as api:
        a, b = make_tenant(api, "exp"), make_tenant(api, "exp")
        for tenant, agent, text in ((a, "ann", "Ann keeps bees."), (b, "bob", "Bob rows.")):
            body = {"agent_id": agent, "document_id": "d1", "items": [{"content": text}]}
            r = api.post("/api/memories/batch", json=body, headers=tenant.headers)
            assert r.status_code == 200, r.text
        assert api.get("/api/agents/ann/export", headers=b.headers).status_code == 404
        whole = api.get("/api/export", headers=a.headers)
        assert whole.status_code == 200
        assert whole.headers["content-type"].startswith("application/x-ndjson")
        records = [json.loads(line) for line in whole.text.splitlines()]
        assert records[0]["agent_id"] is None
        assert [r["agent_id"] for r in records if r["type"] == "profile"] == ["ann"]
        assert "Ann keeps bees." in whole.text and "Bob rows." not in whole.text
        # another tenant of the same server cannot take over tenant A's rows by their ids
        taken = api.post("/api/import", content=whole.content, headers=b.headers)
        assert taken.status_code == 409, taken.text
        assert taken.json()["error"]["code"] == "import_conflict"
        listed = api.get("/api/agents", headers=b.headers).json()["agents"]
        assert [p["agent_id"] for p in listed] == ["bob"]
        # the same tenant's re-import is a no-op
        same = api.post("/api/import", content=whole.content, headers=a.headers)
        assert same.status_code == 200 and not same.json()["imported"]
    # a tenant-wide export into another server
    moved = _import(target.url, whole.content)
    assert moved.status_code == 200 and moved.json()["agents"] == ["ann"]
    with MemoraClient(target.url, timeout=120) as dst:
        assert dst.search("ann", "Who keeps bees?", top_k=1).results[0].text == "Ann keeps bees."


def test_import_has_its_own_body_limit(
    settings: Settings, pool: Any, pipeline: Any, source: Topology, agent_id: str, tmp_path: Path
) -> None:
    exported = tmp_path / "agent.ndjson"
    with MemoraClient(source.url, timeout=120) as src:
        src.remember(agent_id, "Ravi collects vintage synthesizers.")
        src.export_agent(agent_id, exported)
    body = exported.read_bytes()
    assert len(body) > 4096
    small = {"max_body_bytes": 4096, "auth_required": False}
    with auth_app(settings, pool, pipeline, **small, max_import_bytes=len(body)) as api:
        assert api.post("/api/import", content=body).status_code == 200
        too_big = api.post("/api/memories/batch", content=b"{" + b" " * 5000 + b"}")
        assert too_big.status_code == 413
    with auth_app(settings, pool, pipeline, **small, max_import_bytes=len(body) - 1) as api:
        answer = api.post("/api/import", content=body)
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"


def test_cli_export_and_import(
    source: Topology, target: Topology, target_url: str, agent_id: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from services.cli.main import app

    def memora(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env={"MEMORA_API_KEY": ""})

    with MemoraClient(source.url, timeout=120) as src:
        src.remember(agent_id, "Ines teaches Portuguese on Tuesdays.")
    out = tmp_path / "ines.ndjson"
    exported = memora("export", "--agent", agent_id, "-o", str(out), "--api", source.url)
    assert exported.exit_code == 0, exported.output
    assert json.loads(out.read_text().splitlines()[-1])["type"] == "end"

    truncated = tmp_path / "cut.ndjson"
    kept = out.read_text().splitlines(keepends=True)[:-1]
    truncated.write_text("".join(kept))
    refused = memora("import", str(truncated), "--api", target.url)
    assert refused.exit_code == 1
    said = " ".join(refused.output.split())  # rich wraps lines
    assert f"line {len(kept)}: truncated: no end record" in said
    assert _counts(target_url, agent_id) == dict.fromkeys(AGENT_TABLES, 0)

    imported = memora("import", str(out), "--api", target.url, "--json")
    assert imported.exit_code == 0, imported.output
    result = json.loads(imported.stdout.splitlines()[0])
    assert result["agents"] == [agent_id] and result["imported"]["memory"] == 1

    missing = tmp_path / "nobody.ndjson"
    gone = memora("export", "--agent", "nobody-here", "-o", str(missing), "--api", source.url)
    assert gone.exit_code == 1 and "agent_not_found" in " ".join(gone.output.split())
    assert not missing.exists()
