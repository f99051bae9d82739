"""Conversation search quality on LoCoMo: how a chunk's vector is made, compared.

    python bench/conversation_quality.py --data ../shared/locomo/locomo_dev.json
    python bench/conversation_quality.py --data … --modes units,embed

For each mode of MEMORA_CONVERSATION_CHUNK_VECTORS, the LoCoMo sessions are ingested through
the write API and the whole pipeline run inline (embedded PostgreSQL, local extractor, one
document per session, message ids = the turns' dia_ids) into an agent of their own; then every
question of categories 1–4 with evidence is asked through conversation search (limit 20),
hybrid (the default keyword weight) and vector only (keyword weight 0), each with the score
calibrated for the model and with the seed's score as it is (`--calibrations`;
memora.retrieval.calibration), at min_score 0 and at the default min_score
(`--min-scores`). A hit covers the messages of its chunk; Recall@k is the share of the
question's evidence turns covered by the first k hits, MRR the reciprocal rank of the first
hit covering one, "empty" the questions that found nothing. Also reported: the chunks each
mode embedded, and the pipeline's ingest time (one process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.db.pool import make_pool
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from memora.retrieval.calibration import calibration_for
from memora.retrieval.conversation import ConversationQuery, search_conversations
from services.api.app import create_app
from services.cli.stack import Stack

sys.path.insert(0, str(Path(__file__).parent))
from ingest import locomo_sessions
from locomo import CATEGORIES, load_questions

KS = (5, 10, 20)
WEIGHTS = {"hybrid": 0.5, "vector": 0.0}


def score(hits: list[list[str]], evidence: set[str]) -> dict[str, float]:
    """`hits`: the message ids each hit covers, best first."""
    out = {}
    for k in KS:
        covered = {m for h in hits[:k] for m in h}
        out[f"R@{k}"] = len(evidence & covered) / len(evidence)
    first = next((i for i, h in enumerate(hits, 1) if evidence & set(h)), None)
    out["MRR"] = 1.0 / first if first else 0.0
    out["empty"] = float(not hits)
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    out = {m: round(statistics.fmean(r[m] for r in rows), 3) for m in rows[0] if m != "empty"}
    return out | {"empty": int(sum(r["empty"] for r in rows))}


def ingest(settings: Settings, pool: Any, prefix: str, data: Path) -> dict[str, Any]:
    pipeline = Pipeline(settings, pool)
    pipeline.context.embedder.embed(["warm-up"])
    app = create_app(settings, pool=pool, backend=InlineBackend(pipeline))
    counts: dict[str, int] = defaultdict(int)
    started = time.perf_counter()
    with TestClient(app) as client:
        for s in locomo_sessions(data):
            sample_id = s.document_id.split("-session")[0]
            items = [{**i, "message_id": i["metadata"]["dia_id"]} for i in s.items]
            body = {"agent_id": f"{prefix}{sample_id}", "document_id": s.document_id,
                    "items": items}  # fmt: skip
            op_id = client.post("/api/memories/batch", json=body).json()["operation_id"]
            op = client.get(f"/api/operations/{op_id}").json()
            assert op["status"] == "completed", op
            for k, v in op["counts"].items():
                counts[k] += v
    return {"seconds": round(time.perf_counter() - started, 1), **counts}


def evaluate(
    settings: Settings, pool: Any, prefix: str, data: Path,
    calibrations: list[str], floors: list[float],
) -> dict[str, Any]:  # fmt: skip
    """{"hybrid" | "vector": {"<calibration> min_score <floor>": {category: metrics}}}"""
    embedder = Pipeline(settings, pool).context.embedder
    questions = load_questions(json.loads(data.read_text()), prefix)
    out: dict[str, Any] = defaultdict(dict)
    with pool.connection() as conn:
        for name, weight in WEIGHTS.items():
            for mode in calibrations:
                cal = calibration_for(embedder, mode)  # type: ignore[arg-type]
                for floor in floors:
                    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
                    for q in questions:
                        query = ConversationQuery(q.agent_id, q.text, limit=20)
                        found = search_conversations(
                            conn, embedder, DEFAULT_SCOPE, query, min_score=floor,
                            keyword_weight=weight, calibration=cal,
                        )  # fmt: skip
                        r = score([h.message_ids for h in found], q.evidence)
                        rows["overall"].append(r)
                        rows[CATEGORIES[q.category]].append(r)
                    key = f"{mode} min_score {floor:g}"
                    out[name][key] = {k: mean(v) for k, v in rows.items()}
            out[name]["questions"] = len(questions)
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--modes", default="units,embed")
    parser.add_argument(
        "--calibrations",
        default="model,off",
        help="model: the score calibrated for the model; off: the seed's",
    )
    parser.add_argument(
        "--min-scores",
        default="0,default",
        help="floors to search at; default: MEMORA_CONVERSATION_MIN_SCORE",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/conversation_quality.json"))
    args = parser.parse_args()
    base = Settings(data_dir=Path(tempfile.mkdtemp(prefix="memora-convq-")), extractor="local",
                    row_security=False)  # fmt: skip
    stack = Stack(base, workers={}, with_api=False, with_query=False, with_beat=False)
    calibrations = [c.strip() for c in args.calibrations.split(",") if c.strip()]
    floors = [base.conversation_min_score if f.strip() == "default" else float(f)
              for f in args.min_scores.split(",") if f.strip()]  # fmt: skip
    result: dict[str, Any] = {}
    try:
        stack.start_infrastructure()
        pool = make_pool(base.require_database_url(), max_size=4, row_security=False)
        pool.open(wait=True)
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            settings = base.model_copy(update={"conversation_chunk_vectors": mode})
            prefix = f"{mode}-"
            result[mode] = {"ingest": ingest(settings, pool, prefix, args.data)}
            result[mode] |= evaluate(settings, pool, prefix, args.data, calibrations, floors)
            print(mode, json.dumps(result[mode], indent=1))
        pool.close()
    finally:
        stack.stop()
    result["load_average"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for name in WEIGHTS:
        for mode in [m for m in result if m != "load_average"]:
            for key, rows in result[mode][name].items():
                if key != "questions":
                    o = rows["overall"]
                    print(f"{name:6s} {mode:6s} {key:22s} "
                          + " ".join(f"{k} {v:.3f}" if k != "empty" else f"{k} {v}"
                                     for k, v in o.items()))  # fmt: skip


if __name__ == "__main__":
    main()
