"""Conflict detection on a generated archive: planted duplicates and contradictions among
distinct look-alike facts, through remember (each statement as it comes) and through the
consolidation job (every statement stored first, then `consolidate` until it has seen all).

    python bench/lifecycle.py --people 40

Per person: six distinct facts (home, employer, a favourite, an instrument, a dog, a number of
cats), then shuffled: exact duplicates (case and punctuation changed), paraphrased duplicates,
distinct look-alikes (another pet, another person with the same hobby, the same trip in another
year, another instrument), and last the contradictions (moves, job changes, changed favourites,
phrased in several ways). Statements are stated in that order, so the newest is the truth.
Reports: duplicates merged (%), contradictions superseded with the newest winning (%), distinct
facts wrongly merged (count; target 0), distinct facts lost (not active at the end; target 0).
Rules only (no LLM). A fresh embedded PostgreSQL per run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.db.migrate import upgrade
from memora.db.pool import make_pool
from memora.infra.embedded import EmbeddedPostgres
from memora.jobs import JOBS, JobContext, run_job
from memora.lifecycle.memory import index, mentions_of
from memora.nlp.embedding import get_embedder
from memora.pipeline.backend import InlineBackend
from memora.pipeline.context import AppContext
from memora.pipeline.runner import Pipeline
from memora.store import lifecycle as store
from memora.usecases.remember import remember

NAMES = ["Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kemal", "Lucia", "Mateo", "Nadia", "Oskar", "Paula", "Quentin", "Rosa", "Stefan",
         "Tariq", "Ulla", "Viktor", "Wanda", "Xavier", "Yara", "Zoltan", "Amira", "Bjorn",
         "Carmen", "Dario", "Esme", "Felix", "Gloria", "Hugo", "Ilse", "Jamal", "Kira", "Lars",
         "Mina", "Nils"]  # fmt: skip
CITIES = ["Paris", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague", "Oslo", "Dublin", "Warsaw",
          "Athens", "Zurich", "Milan", "Porto", "Krakow", "Helsinki", "Seville"]  # fmt: skip
COMPANIES = ["Siemens", "Google", "Spotify", "Nokia", "Airbus", "Philips", "Zalando", "Adidas",
             "Ikea", "Lego", "Bosch", "Unilever"]  # fmt: skip
THINGS = {"food": ["sushi", "pizza", "ramen", "paella", "curry", "falafel"],
          "colour": ["blue", "green", "orange", "purple", "yellow", "red"],
          "band": ["Radiohead", "Coldplay", "Muse", "Blur", "Oasis", "Queen"]}  # fmt: skip
INSTRUMENTS = ["violin", "cello", "piano", "guitar", "flute", "drums", "trumpet", "harp"]
PETS = ["Rex", "Bella", "Max", "Luna", "Charlie", "Milo", "Daisy", "Rocky", "Biscuit", "Coco"]
WORDS = ["two", "three", "four"]


@dataclass
class Fact:
    text: str
    kind: str  # base, exact, paraphrase, lookalike, contradiction
    of: int | None = None  # the base fact it duplicates or contradicts
    attribute: str | None = None  # base facts that a contradiction targets
    unit: UUID | None = None
    decision: str = ""


def archive(people: int, seed: int) -> list[Fact]:
    rng = random.Random(seed)
    facts: list[Fact] = []
    later: list[Fact] = []
    last: list[Fact] = []
    plays = {p: rng.choice(INSTRUMENTS) for p in NAMES[:people]}
    used: set[tuple[str, str]] = set()
    for p in NAMES[:people]:
        city, city2 = rng.sample(CITIES, 2)
        job, job2 = rng.sample(COMPANIES, 2)
        thing = rng.choice(list(THINGS))
        fav, fav2 = rng.sample(THINGS[thing], 2)
        inst = plays[p]
        inst2 = rng.choice([i for i in INSTRUMENTS if i != inst and (p, i) not in used])
        used.add((p, inst2))
        pet, pet2 = rng.sample(PETS, 2)
        cats = rng.choice(WORDS)
        year = rng.randrange(2012, 2020)
        # another person with the same hobby: one who does not play it already
        other = rng.choice(
            [n for n in NAMES[:people] if n != p and plays[n] != inst and (n, inst) not in used]
        )
        used.add((other, inst))
        base = [
            (f"{p} lives in {city}.", "residence"),
            (f"{p} works at {job}.", "employer"),
            (f"{p}'s favourite {thing} is {fav}.", "favourite"),
            (f"{p} plays the {inst} on weekends.", None),
            (f"{p} adopted a dog named {pet}.", None),
            (f"{p} visited {city2} in {year}.", None),
        ]
        first = len(facts)
        facts += [Fact(t, "base", attribute=a) for t, a in base]
        later += [
            Fact(base[3][0].upper().rstrip(".") + "!", "exact", first + 3),
            Fact(f"{p} adopted a dog called {pet}.", "paraphrase", first + 4),
            Fact(f"{p} plays the {inst} every weekend.", "paraphrase", first + 3),
            Fact(f"{p} has {cats} cats and adopted a cat named {pet2}.", "lookalike"),
            Fact(f"{other} plays the {inst} on weekends.", "lookalike"),
            Fact(f"{p} visited {city2} in {year + 3}.", "lookalike"),
            Fact(f"{p} plays the {inst2} on weekends.", "lookalike"),
        ]
        moved = rng.choice([f"{p} moved to {city2}.", f"{p} relocated to {city2}.",
                            f"{p} now lives in {city2}."])  # fmt: skip
        hired = rng.choice([f"{p} now works at {job2}.", f"{p} joined {job2}.",
                            f"{p} got a new job at {job2}."])  # fmt: skip
        liked = rng.choice([f"{p}'s favourite {thing} is now {fav2}.",
                            f"{p}'s new favourite {thing} is {fav2}."])  # fmt: skip
        last += [
            Fact(moved, "contradiction", first),
            Fact(hired, "contradiction", first + 1),
            Fact(liked, "contradiction", first + 2),
        ]
    rng.shuffle(later)  # the base block stays first, in order: `of` indexes it
    rng.shuffle(last)
    return facts + later + last


def store_directly(app: AppContext, agent: str, facts: list[Fact]) -> None:
    """Every statement as its own memory (as they would be without conflict detection)."""
    key = DEFAULT_SCOPE.key(agent)
    vectors = app.embedder.embed([f.text for f in facts])
    start = utcnow() - timedelta(minutes=len(facts))
    with app.pool.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO agents (agent_id, tenant_id) VALUES (%s, 'default') "
            "ON CONFLICT DO NOTHING",
            (key,),
        )
        for i, (f, v) in enumerate(zip(facts, vectors, strict=True)):
            at = start + timedelta(minutes=i)
            f.unit = uuid.uuid4()
            store.insert_unit(
                conn, key, f.unit, text=f.text, vector=v, fact_type="world", importance=5,
                category=None, metadata={"source": "remember"}, at=at,
            )  # fmt: skip
            conn.execute("UPDATE memory_units SET created_at = %s WHERE id = %s", (at, f.unit))
            index(conn, app.settings, key, f.unit, mentions_of(f.text), at)


def score(app: AppContext, agent: str, facts: list[Fact], base: list[Fact]) -> dict[str, Any]:
    with app.pool.connection() as conn:
        rows = {
            r.id: r
            for r in store.get_units(conn, agent, [f.unit for f in facts if f.unit is not None])
        }

    def head(u: UUID | None) -> UUID | None:
        seen = set()
        while u is not None and rows[u].superseded_by is not None and u not in seen:
            seen.add(u)
            u = rows[u].superseded_by
        return u

    dups = [f for f in facts if f.kind in ("exact", "paraphrase")]
    merged = [f for f in dups if head(f.unit) == head(base[f.of].unit) and f.of is not None]
    contra = [f for f in facts if f.kind == "contradiction"]
    won = [
        f for f in contra
        if f.of is not None and rows[f.unit].status == "active"
        and rows[base[f.of].unit].status == "superseded" and head(base[f.of].unit) == f.unit
    ]  # fmt: skip
    targets = {base[f.of].unit for f in contra if f.of is not None}
    distinct = [f for f in facts if f.kind in ("base", "lookalike") and f.unit not in targets]
    # a distinct fact folded into another memory, or replaced by another statement
    wrongly = [f for f in distinct if f.decision in ("SKIP", "MERGE")
               or (f.decision == "" and rows[f.unit].status != "active")]  # fmt: skip
    lost = [f for f in distinct if rows[f.unit].status != "active"]
    return {
        "statements": len(facts),
        "duplicates": len(dups),
        "duplicates_merged_pct": round(100 * len(merged) / max(1, len(dups)), 1),
        "contradictions": len(contra),
        "contradictions_superseded_newest_wins_pct": round(100 * len(won) / max(1, len(contra)), 1),
        "distinct_facts": len(distinct),
        "distinct_wrongly_merged": len(wrongly),
        "distinct_lost": len(lost),
        "examples_not_merged": [
            f"{f.text} ({f.decision or 'job'})" for f in dups if f not in merged
        ][:5],
        "examples_not_superseded": [
            f"{f.text} ({f.decision or 'job'})" for f in contra if f not in won
        ][:5],
        "examples_wrongly_merged": [f"{f.text} ({f.decision or 'job'})" for f in wrongly][:5],
    }


def run_remember(app: AppContext, facts: list[Fact]) -> dict[str, Any]:
    agent = f"bench-remember-{uuid.uuid4().hex[:6]}"
    base = facts
    started = time.perf_counter()
    for f in facts:
        r = remember(app, DEFAULT_SCOPE, agent, f.text, actor="bench")
        f.unit, f.decision = r.memory_id, r.decision.value
    seconds = time.perf_counter() - started
    result = score(app, agent, facts, base)
    result["ms_per_remember"] = round(1000 * seconds / len(facts), 1)
    return result


def run_consolidate(app: AppContext, facts: list[Fact]) -> dict[str, Any]:
    agent = f"bench-consolidate-{uuid.uuid4().hex[:6]}"
    store_directly(app, agent, facts)
    ctx = JobContext(app.settings, app.pool, app.backend, agent_key=agent)
    runs, started = 0, time.perf_counter()
    while True:
        runs += 1
        if run_job(JOBS["consolidate"], ctx).examined == 0:
            break
    result = score(app, agent, facts, facts)
    result["consolidate_runs"] = runs
    result["consolidate_seconds"] = round(time.perf_counter() - started, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=40)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "lifecycle.json"
    )
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="memora-lifecycle-"))
    pg = EmbeddedPostgres(data / "pg")
    url = pg.start()
    try:
        settings = Settings(database_url=url, data_dir=data, llm_base_url=None, llm_api_key=None)
        upgrade(url, settings.embedding_dim)
        embedder = get_embedder(
            settings.embedding_model, settings.torch_threads, settings.embedding_batch_size,
            settings.embedding_backend, settings.model_cache_dir,
        )  # fmt: skip
        with make_pool(url, min_size=1, max_size=4) as pool:
            backend = InlineBackend(Pipeline(settings, pool))
            app = AppContext(settings, pool, backend, embedder=embedder)
            report = {
                "remember": run_remember(app, archive(args.people, args.seed)),
                "consolidate": run_consolidate(app, archive(args.people, args.seed)),
                "load_average": os.getloadavg(),
            }
    finally:
        pg.stop(quiet=True)
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
