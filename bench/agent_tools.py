"""Seed 001's agent tools on a generated cast: correctness of every fixed tool, latency, and
storage against seed 001's duplication approach.

    python bench/agent_tools.py --characters 20 --scenes 5 --turns 1000

A fresh embedded PostgreSQL; the write API (pipeline inline, in-process) takes one seed per
scene (its characters, `--characters / --scenes` each) through POST /api/seed, then `--turns`
lines of dialogue through POST /api/episodes (each heard by the scene's characters). Then, for
every character, each fixed tool's search (the MCP tools' canonical query and filter, through
the query service's /api/search in-process) is checked: only that character's memories of the
tool's own category. Latency per tool; storage of the seeded memories, and what seed 001's
design (each item stored under 2-3 query embeddings) would store for the same cast.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.infra.embedded import free_port
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from services.api import app as write_app
from services.api import query_app
from services.api.mcp.tools import FIXED
from services.cli.stack import Stack

# Seed 001's canonical queries per category: how many embeddings its design stores per item.
DUPLICATES = {"identity": 3, "background": 2, "communication": 3, "decision_style": 2,
              "traits": 2, "skills": 2, "values": 2, "location": 3, "atmosphere": 3,
              "time": 2, "context": 2, "knowledge": 3}  # fmt: skip
ROLES = ["a pragmatic project manager", "a retired sea captain", "a nervous intern",
         "a jazz pianist", "a street food chef", "a botanist", "a detective", "a poet"]  # fmt: skip
PLACES = ["a rooftop bar", "a ferry at dawn", "a library basement", "a mountain hut",
          "a night market"]  # fmt: skip
TOPICS = ["the storm", "dinner", "the missing key", "the election", "a strange letter",
          "the old lighthouse", "music", "the harbour", "money", "the garden"]  # fmt: skip


def cast(n_chars: int, n_scenes: int, rng: random.Random) -> list[dict[str, Any]]:
    names = [f"Char{i:02d}" for i in range(n_chars)]
    seeds = []
    per_scene = n_chars // n_scenes
    for s in range(n_scenes):
        members = names[s * per_scene : (s + 1) * per_scene]
        characters = [
            {
                "agent_id": name.lower(),
                "name": name,
                "archetype": rng.choice(ROLES),
                "description": f"{name} is known for {rng.choice(TOPICS)} stories.",
                "background": " ".join(
                    f"{name} once lived near {rng.choice(PLACES)} and cared about "
                    f"{rng.choice(TOPICS)}." for _ in range(8)
                ),
                "communication_style": f"{name} speaks {rng.choice(['slowly', 'fast'])}.",
                "decision_style": f"{name} decides {rng.choice(['by instinct', 'by numbers'])}.",
                "traits": rng.sample(["curious", "stubborn", "kind", "loud", "shy", "brave"], 3),
                "skills": rng.sample(["cooking", "sailing", "chess", "singing", "maths"], 2),
                "values": rng.sample(["honesty", "family", "freedom", "loyalty"], 2),
            }
            for name in members
        ]  # fmt: skip
        seeds.append({
            "scenario": {"id": f"scene-{s}", "location": PLACES[s % len(PLACES)],
                         "atmosphere": "tense but friendly", "time": "late evening",
                         "description": f"The group argues about {TOPICS[s]}."},
            "characters": characters,
        })  # fmt: skip
    return seeds


RECALL = ("what did they say about the storm?", 5, {"type": "episodic"})  # query_memory


def episodic(meta: dict[str, Any]) -> bool:
    return meta.get("type") == "episodic" and "turn" in meta


def expected(tool: str, me: dict[str, Any], memory: dict[str, Any], name: str) -> bool:
    meta = memory["metadata"]
    _, _, filters = FIXED[tool]
    if tool == "query_scene":
        return bool(meta.get("type") == "scene")
    if tool == "query_character":
        return bool(meta.get("type") == "character_knowledge" and meta.get("about") == name)
    return bool(meta.get("character") == me["name"] and meta.get("category") == filters["category"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--characters", type=int, default=20)
    parser.add_argument("--scenes", type=int, default=5)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "agent_tools.json"
    )
    args = parser.parse_args()
    rng = random.Random(5)
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="memora-agent-tools-")), query_port=free_port()
    )
    stack = Stack(settings, workers={}, with_api=False, with_query=False, with_beat=False,
                  log_dir=settings.data_dir / "logs")  # fmt: skip
    report: dict[str, Any] = {}
    try:
        stack.start_infrastructure()
        settings = settings.model_copy(update={"database_url": settings.require_database_url()})
        pool = make_pool(settings.require_database_url(), min_size=1, max_size=16, name="bench")
        backend = InlineBackend(Pipeline(settings, pool))
        seeds = cast(args.characters, args.scenes, rng)
        with (
            TestClient(write_app.create_app(settings, pool=pool, backend=backend)) as api,
            TestClient(query_app.create_app(settings, pool=pool)) as query,
        ):
            started = time.monotonic()
            for seed in seeds:
                response = api.post("/api/seed", json=seed)
                response.raise_for_status()
            report["seed_seconds"] = round(time.monotonic() - started, 1)
            started = time.monotonic()
            for turn in range(args.turns):
                seed = seeds[turn % len(seeds)]
                speaker = rng.choice(seed["characters"])
                body = {
                    "scene": seed["scenario"]["id"], "turn": turn, "speaker": speaker["name"],
                    "text": f"I keep thinking about {rng.choice(TOPICS)} and {rng.choice(PLACES)}.",
                    "listeners": [c["agent_id"] for c in seed["characters"]],
                }  # fmt: skip
                api.post("/api/episodes", json=body).raise_for_status()
            report["episodes_seconds"] = round(time.monotonic() - started, 1)
            print(f"seeded in {report['seed_seconds']} s, {args.turns} turns in "
                  f"{report['episodes_seconds']} s")  # fmt: skip

            latencies: dict[str, list[float]] = {t: [] for t in [*FIXED, "query_memory"]}
            wrong: dict[str, int] = {t: 0 for t in latencies}
            empty: dict[str, int] = {t: 0 for t in latencies}
            for seed in seeds:
                for me in seed["characters"]:
                    other = rng.choice([c for c in seed["characters"] if c is not me])
                    for tool, (q, k, filters) in [*FIXED.items(), ("query_memory", RECALL)]:
                        name = other["name"]
                        f = {key: v.replace("{name}", name) if isinstance(v, str) else v
                             for key, v in filters.items()}  # fmt: skip
                        body = {"agent_id": me["agent_id"], "query": q.replace("{name}", name),
                                "top_k": k, "filters": f}  # fmt: skip
                        t0 = time.perf_counter()
                        response = query.post("/api/search", json=body)
                        latencies[tool].append((time.perf_counter() - t0) * 1000)
                        found = response.json()["results"]
                        empty[tool] += not found
                        if tool == "query_memory":
                            wrong[tool] += sum(not episodic(r["metadata"]) for r in found)
                        else:
                            wrong[tool] += sum(not expected(tool, me, r, name) for r in found)
            report["tools"] = {
                t: {"searches": len(v), "wrong_results": wrong[t], "empty": empty[t],
                    "p50_ms": round(statistics.median(v), 1),
                    "p95_ms": round(float(np.percentile(v, 95)), 1)}
                for t, v in latencies.items()
            }  # fmt: skip
        with pool.connection() as conn:
            rows = conn.execute(
                """
                SELECT d.document_id LIKE 'seed:%%' AS seeded, m.metadata->>'category' AS category,
                       m.metadata->>'type' AS type, count(*) AS n,
                       sum(pg_column_size(m.embedding)) AS vector_bytes,
                       sum(pg_column_size(m.text)) AS text_bytes
                FROM memory_units m JOIN documents d ON d.id = m.document_pk
                GROUP BY 1, 2, 3
                """
            ).fetchall()
        pool.close()
    finally:
        stack.stop()
    seeded = [r for r in rows if r["seeded"]]
    units = sum(r["n"] for r in seeded)
    per_unit = sum(r["vector_bytes"] + r["text_bytes"] for r in seeded) / max(units, 1)

    def dup(r: dict[str, Any]) -> int:
        key = "knowledge" if r["type"] == "character_knowledge" else r["category"]
        return int(r["n"]) * DUPLICATES.get(key, 1)

    duplicated = sum(dup(r) for r in seeded)
    report["storage"] = {
        "seeded_units": units,
        "episodic_units": sum(r["n"] for r in rows if not r["seeded"]),
        "seed_001_duplicated_rows": duplicated,
        "bytes_per_unit_vector_and_text": round(per_unit),
        "seeded_mb": round(units * per_unit / 1e6, 2),
        "seed_001_duplicated_mb": round(duplicated * per_unit / 1e6, 2),
    }
    report["cast"] = {"characters": args.characters, "scenes": args.scenes, "turns": args.turns}
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
