"""Entity quality of the local (no-LLM) extractor on LoCoMo conversations (issue 32, item 6).

Every turn of every session goes through LocalExtractor as the extract stage sees it (one
SourceItem per turn, with its `speaker`); the entities are the distinct normalised names of the
mentions it returns, each displayed under its most frequent surface form. This is the extraction
side only: the database's fuzzy resolution is not run (it can merge "Bye Caroline" into
"Caroline", or the reverse, depending on which came first).

    --dump OUT      write every proposed entity (name, type, count, example) for labelling
    --stored        score the entities table instead, after the real pipeline (embedded
                    PostgreSQL, stages inline) ingested each session as a document
    --db-dir DIR    with --stored: keep the database in DIR (to re-clean it later)
    --reclean DIR   score the database an earlier `--stored --db-dir DIR` left (run with an
                    older tree's `shared/` on PYTHONPATH: the entities an older version
                    stored) after migrating it and running the entity_names job until it
                    changes nothing (issue 32, item 5)
    --labels FILE   score against labels: {"speakers": {conv: [names]},
                    "entities": {normalised name: {"real": bool, "canonical": str | null}}}

Figures: precision (real / proposed), recall of real names (labelled canonical names found under
exactly that display name), canonical-name accuracy (real entities displayed under their
canonical name) and, per conversation, whether each speaker is exactly one PERSON entity under
their own name. Entities the labels do not cover are listed (and counted as noise).

Before/after: run this file with PYTHONPATH pointing at the old tree's `shared/`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memora.extraction.base import SourceItem
from memora.extraction.local import LocalExtractor
from memora.nlp.names import normalize_name

T0 = datetime(2023, 5, 8, tzinfo=UTC)


def conversation_items(conv: dict[str, Any]) -> list[list[SourceItem]]:
    sessions = []
    c = conv["conversation"]
    keys = sorted(
        (k for k in c if k.startswith("session_") and not k.endswith("date_time")),
        key=lambda k: int(k.split("_")[1]),
    )
    for key in keys:
        items = [
            SourceItem(i, turn["text"], None, T0, turn["speaker"], {})
            for i, turn in enumerate(c[key])
        ]
        sessions.append(items)
    return sessions


def proposed(conv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """normalised name -> {display, type, count, forms, example}."""
    extractor = LocalExtractor()
    forms: dict[str, Counter[str]] = defaultdict(Counter)
    types: dict[str, Counter[str]] = defaultdict(Counter)
    example: dict[str, str] = {}
    for items in conversation_items(conv):
        for fact in extractor.extract("agent", items):
            for m in fact.mentions or []:
                key = normalize_name(m.name)
                if not key:
                    continue
                forms[key][m.name] += 1
                types[key][m.entity_type] += 1
                example.setdefault(key, fact.text[:160])
    return {
        k: {
            "display": forms[k].most_common(1)[0][0],
            "type": types[k].most_common(1)[0][0],
            "count": sum(forms[k].values()),
            "example": example[k],
        }
        for k in forms
    }


def score(conv_id: str, found: dict[str, dict[str, Any]], labels: dict[str, Any]) -> dict[str, Any]:
    entities = labels["entities"]
    table = {k: entities[v.get("key", k)] for k, v in found.items() if v.get("key", k) in entities}
    real = [k for k in found if table.get(k, {}).get("real")]
    unlabelled = sorted(k for k in found if k not in table)
    gold = {
        v["canonical"] for v in entities.values() if v["real"] and conv_id in v.get("convs", [])
    }
    displays = {found[k]["display"] for k in real}
    right = [k for k in real if found[k]["display"] == table[k]["canonical"]]
    speakers = {}
    for name in labels["speakers"][conv_id]:
        ents = [k for k in real if table[k]["canonical"] == name]
        speakers[name] = (
            len(ents) == 1
            and found[ents[0]]["display"] == name
            and found[ents[0]]["type"] == "PERSON"
        )
    return {
        "proposed": len(found),
        "real": len(real),
        "precision": round(len(real) / len(found), 3) if found else 0.0,
        "recall": round(len(gold & displays) / len(gold), 3) if gold else 0.0,
        "canonical_accuracy": round(len(right) / len(real), 3) if real else 0.0,
        "speakers_one_entity": speakers,
        "missed": sorted(gold - displays),
        "noise": sorted(found[k]["display"] for k in found if k in table and not table[k]["real"]),
        "unlabelled": [f"{found[k]['display']} ({found[k]['type']})" for k in unlabelled],
    }


def _table(pool: Any, agent: str) -> dict[str, dict[str, Any]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT canonical_name, entity_type, mention_count FROM entities WHERE agent_id = %s",
            (agent,),
        ).fetchall()
    return {
        f"{r['canonical_name']} ({r['entity_type']})": {
            "key": normalize_name(r["canonical_name"]),
            "display": r["canonical_name"],
            "type": r["entity_type"],
            "count": r["mention_count"],
        }
        for r in rows
    }


def _agent(conv: dict[str, Any]) -> str:
    return f"entity-quality-{conv['sample_id']}"


def stored(
    convs: list[dict[str, Any]], db_dir: Path | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """The entities table after the real pipeline (embedded PostgreSQL, stages inline) has
    ingested each session as a document: canonical name, type, mention count."""
    import tempfile

    from fastapi.testclient import TestClient

    from memora.basics.config import Settings
    from memora.db.migrate import upgrade
    from memora.db.pool import make_pool
    from memora.infra.embedded import EmbeddedPostgres
    from memora.pipeline.backend import InlineBackend
    from memora.pipeline.runner import Pipeline
    from services.api.app import create_app

    out: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="entity-quality-") as tmp:
        server = EmbeddedPostgres(db_dir or Path(tmp) / "pg")
        url = server.start()
        try:
            upgrade(url, 384)
            settings = Settings(database_url=url, broker_url=None, data_dir=Path(tmp))
            pool = make_pool(url, min_size=1, max_size=4, name="entity-quality")
            app = create_app(settings, pool=pool, backend=InlineBackend(Pipeline(settings, pool)))
            with TestClient(app) as api:
                for conv in convs:
                    for n, items in enumerate(conversation_items(conv)):
                        body = [
                            {
                                "content": i.content,
                                "speaker": i.speaker,
                                "event_date": f"2023-05-{n + 1:02d}T10:00:00Z",
                            }
                            for i in items
                        ]
                        response = api.post(
                            "/api/memories/batch",
                            json={"agent_id": _agent(conv), "items": body, "document_id": f"s{n}"},
                        )
                        response.raise_for_status()
                    out[conv["sample_id"]] = _table(pool, _agent(conv))
            pool.close()
        finally:
            server.stop(quiet=True)
    return out


def recleaned(
    convs: list[dict[str, Any]], db_dir: Path
) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, Any]]:
    """The tables of a kept database after migrating it and running the entity_names job
    until it changes nothing; and the job's totals per conversation."""
    import tempfile

    from memora.basics.config import Settings
    from memora.db.migrate import upgrade
    from memora.db.pool import make_pool
    from memora.infra.embedded import EmbeddedPostgres
    from memora.jobs import JOBS, JobContext, run_job
    from memora.pipeline.backend import InlineBackend
    from memora.pipeline.runner import Pipeline

    out: dict[str, dict[str, dict[str, Any]]] = {}
    runs: dict[str, Any] = {}
    server = EmbeddedPostgres(db_dir)
    url = server.start()
    try:
        upgrade(url, 384)
        with tempfile.TemporaryDirectory(prefix="entity-quality-") as tmp:
            settings = Settings(database_url=url, broker_url=None, data_dir=Path(tmp))
            pool = make_pool(url, min_size=1, max_size=4, name="entity-quality")
            backend = InlineBackend(Pipeline(settings, pool))
            for conv in convs:
                ctx = JobContext(settings, pool, backend, agent_key=_agent(conv))
                totals: Counter[str] = Counter()
                passes = 0
                while True:
                    result = run_job(JOBS["entity_names"], ctx)
                    passes += 1
                    totals.update(result.details)
                    if result.changed == 0:
                        break
                runs[conv["sample_id"]] = {"passes": passes, **totals}
                out[conv["sample_id"]] = _table(pool, _agent(conv))
            pool.close()
    finally:
        server.stop(quiet=True)
    return out, runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/locomo/locomo_dev.json")
    ap.add_argument("--labels", default="bench/data/entities_dev_labels.json")
    ap.add_argument("--dump")
    ap.add_argument(
        "--stored",
        action="store_true",
        help="score the entities table after the real pipeline, not the extractor's mentions",
    )
    ap.add_argument("--db-dir", type=Path, help="with --stored: keep the database here")
    ap.add_argument("--reclean", type=Path, metavar="DIR", help="re-clean a kept database")
    args = ap.parse_args()
    convs = json.loads(Path(args.data).read_text())
    if args.dump:
        out = {c["sample_id"]: proposed(c) for c in convs}
        Path(args.dump).write_text(json.dumps(out, indent=1, ensure_ascii=False))
        return
    labels = json.loads(Path(args.labels).read_text())
    if args.reclean:
        tables, runs = recleaned(convs, args.reclean)
        scores = {k: score(k, v, labels) | {"job": runs[k]} for k, v in tables.items()}
        json.dump(scores, sys.stdout, indent=1, ensure_ascii=False)
        print()
        return
    if args.stored:
        tables = stored(convs, args.db_dir)
        scores = {k: score(k, v, labels) for k, v in tables.items()}
        json.dump(scores, sys.stdout, indent=1, ensure_ascii=False)
        print()
        return
    proposed(convs[0])  # models loaded before timing
    started = time.perf_counter()
    found = {c["sample_id"]: proposed(c) for c in convs}
    elapsed = time.perf_counter() - started
    results: dict[str, Any] = {k: score(k, v, labels) for k, v in found.items()}
    results["extract_seconds"] = round(elapsed, 2)
    json.dump(results, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
