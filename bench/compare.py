"""The read path's guard: the same search workload on two commits in one go, each in its own
checkout, database and query service, questions alternating between them; prints the ratio
(change / base) per latency percentile and per stage of the trace.

    python bench/compare.py --base 84899cc                    # base against this working tree
    python bench/compare.py --base main --change HEAD --size 100000 --queries 200
    python bench/compare.py --alone --size 1000000        # this working tree by itself
    python bench/compare.py --base HEAD --filter "type (99.9%)"   # every search filtered
    python bench/compare.py --base 84899cc --mode back-to-back    # or --mode concurrent
    make bench-compare BASE=84899cc

Each checkout loads its own copy of the benchmark's data with its own code (its migrations and
its `bench/search_latency.py` loader, which builds the same synthetic agent: N memories with
their links and entities, then the HNSW index and VACUUM ANALYZE), in an embedded PostgreSQL
under `--data-root`, kept between runs (keyed by the checkout's migrations, loader and size,
so a change to either reloads), brought back to its state as loaded before each run (the
accesses earlier runs recorded dropped) and left to settle (no autovacuum running). Then both
query services start, under row-level security when the checkout has it, and every question
goes to both, which one first alternating, for `--rounds` passes over the questions (or, with
`--mode back-to-back`, each side takes a round's questions one after another in turn, as a
service that never rests between searches meets them; `--mode concurrent`, from `--clients`
clients at once); every `--trace-every`-th request asks for the trace (not counted in the
percentiles). Machine load
hits both sides alike, so the ratios hold on a busy machine better than absolute figures do;
a side that autovacuum ran beside during the run is named after the table. `--filter NAME`
sends every search under one of `search_latency.FILTER_SETS` (its warm-up fills what each
query service holds for the filter). Every change to the read path records a run
(docs/benchmarks.md has the current figures). The searches are plain HTTP (httpx), not
memora_client: the base commit's API may predate the client's models.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from psycopg.rows import dict_row

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py: the agent and its questions
from common import STATEMENT_OPTIONS, analyze_accesses, wait_ready  # bench/common.py

from memora.infra.embedded import EmbeddedPostgres, free_port

ROOT = Path(__file__).resolve().parent.parent
DATA_ROOT = Path("/tmp/memora-compare")
PERCENTILES = (50, 95, 99)

# Run inside a checkout (its own PYTHONPATH): migrate, then load with that checkout's loader,
# whichever of its signatures it has.
LOADER = textwrap.dedent(
    """
    import inspect, random, sys
    import search_latency as bench
    from memora.db.migrate import upgrade
    url, size = sys.argv[1], int(sys.argv[2])
    settings = bench.Settings()
    upgrade(url, settings.embedding_dim)
    embedder = bench.Embedder(settings.embedding_model)
    if "texts" in inspect.signature(bench.load).parameters:
        bench.load(url, size, embedder, bench.sentence_pool(random.Random(7), 3000), pair=True)
    else:
        bench.load(url, size, embedder)
    """
)


@dataclass
class Side:
    name: str
    tree: Path
    data: Path
    postgres: EmbeddedPostgres | None = None
    service: subprocess.Popen[bytes] | None = None
    base_url: str = ""
    latency: list[float] = field(default_factory=list)
    traces: list[dict[str, Any]] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU ms per search, measured
    statements: bool = False  # pg_stat_statements on: per-statement figures after the run

    def processes(self) -> dict[str, psutil.Process]:
        assert self.service is not None and self.postgres is not None
        postmaster = int((self.postgres.pgdata / "postmaster.pid").read_text().split()[0])
        return {"service": psutil.Process(self.service.pid), "database": psutil.Process(postmaster)}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time of the query service and of the database server (every backend)."""
        used = {}
        for name, process in self.processes().items():
            total = 0.0
            for p in [process, *process.children(recursive=True)]:
                try:
                    t = p.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                total += t.user + t.system + t.children_user + t.children_system
            used[name] = total
        return used

    def sql(self, query: str) -> list[dict[str, Any]]:
        assert self.postgres is not None
        with psycopg.connect(self.postgres.url, autocommit=True, row_factory=dict_row) as conn:
            return conn.execute(query).fetchall()

    def top_statements(self, count: int) -> None:
        """The statements that took the database's time since the warm-up, per search."""
        searches = len(self.latency) + len(self.traces)
        rows = self.sql(
            f"""
            SELECT calls, total_exec_time AS exec, total_plan_time AS plan, rows,
                   shared_blks_hit + shared_blks_read AS buffers, query
            FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            ORDER BY total_exec_time + total_plan_time DESC LIMIT {count}
            """
        )
        print(f"\n{self.name}: statements by database time per search ({searches} searches)")
        print(f"{'exec ms':>8s} {'plan ms':>8s} {'calls':>6s} {'buffers':>8s}  statement")
        for r in rows:
            query = " ".join(r["query"].split())
            print(
                f"{r['exec'] / searches:8.2f} {r['plan'] / searches:8.2f} "
                f"{r['calls'] / searches:6.2f} {r['buffers'] / searches:8.0f}  {query[:110]}"
            )

    def maintenance(self) -> dict[str, int]:
        """Autovacuum's runs (vacuum and analyze) so far, by table; not of `memory_access`,
        which the run's own searches fill from empty, so it is analyzed in every run."""
        rows = self.sql(
            "SELECT relname, autovacuum_count + autoanalyze_count AS runs FROM pg_stat_user_tables"
            " WHERE relname <> 'memory_access'"
        )
        return {r["relname"]: int(r["runs"]) for r in rows}

    def env(self) -> dict[str, str]:
        return os.environ | {
            "PYTHONPATH": os.pathsep.join(
                str(self.tree / p) for p in ("shared", ".", "bench", "clients/python")
            ),
            "TOKENIZERS_PARALLELISM": "false",
        }


def checkout(spec: str, trees: Path) -> Path:
    """A folder holding `spec`: this working tree for "." or "WORKTREE", else a detached
    worktree of the commit (made once, under `trees`)."""
    if spec in {".", "WORKTREE"}:
        return ROOT
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{spec}^{{commit}}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    tree = trees / sha[:12]
    if not (tree / ".git").exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(tree), sha],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
    return tree


def data_key(tree: Path, size: int) -> str:
    """What the loaded data depends on: the checkout's migrations, its loader and the size."""
    digest = hashlib.sha256(str(size).encode())
    migrations = sorted((tree / "shared/memora/db/migrations/versions").glob("*.py"))
    for path in [*migrations, tree / "bench/search_latency.py"]:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def prepare(side: Side, size: int) -> None:
    side.postgres = EmbeddedPostgres(
        side.data, options=STATEMENT_OPTIONS if side.statements else ""
    )
    url = side.postgres.start()
    if side.statements:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    marker = side.data / "loaded"
    if marker.exists():
        return
    print(f"{side.name}: loading {size} memories with {side.tree}'s code", flush=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", LOADER, url, str(size)],
        cwd=side.tree, env=side.env(), check=True,
    )  # fmt: skip
    marker.write_text(f"{time.perf_counter() - started:.0f} s\n")


def settle(side: Side, wait: float = 900.0) -> None:
    """The side's database as it was loaded, whatever earlier runs and in-process benchmarks did
    with it: the accesses their searches recorded are dropped (their count weighs in the
    rerankers' frequency signal and in hydration's plan, and it grew with each copy's own
    history), then no autovacuum worker may be running (after a load, those over its big
    tables take minutes, beside the first runs' searches); then its tables and indexes are
    read into the page cache (`prewarm`)."""
    assert side.postgres is not None
    with psycopg.connect(side.postgres.url, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('memory_access') IS NOT NULL").fetchone()
        if row and row[0]:  # (a base from before it has none)
            conn.execute("TRUNCATE memory_access")
            conn.execute("ANALYZE memory_access")
        deadline = time.monotonic() + wait
        while conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            " AND datname = current_database()"
        ).fetchone():
            if time.monotonic() > deadline:
                print(f"{side.name}: autovacuum still running after {wait:.0f} s", flush=True)
                break
            time.sleep(2)
    prewarm(side)


# every table, index and TOAST table of the schema (not the catalogs: they are in use anyway)
_RELATIONS = """
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i', 'm')
    UNION ALL
    SELECT c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.reltoastrelid <> 0
"""


def prewarm(side: Side) -> None:
    """Every block of the side's tables and indexes read once through the page cache
    (pg_prewarm's `read` mode), so that both sides start from memory. This VM pages out memory
    left idle for about a minute, page cache included (the ninth and twelfth rounds): a copy
    of the data that sat idle while the other side loaded or ran read its pages back from disk
    during the run, which raised that side's p95 with the medians equal (the thirteenth round,
    docs/benchmarks-history.md)."""
    assert side.postgres is not None
    started = time.perf_counter()
    with psycopg.connect(side.postgres.url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        row = conn.execute(
            f"SELECT coalesce(sum(pg_prewarm(oid, 'read')), 0) FROM ({_RELATIONS}) r(oid)"
        ).fetchone()
    blocks = int(row[0]) if row else 0
    print(
        f"{side.name}: {blocks * 8 / 1024:.0f} MB read into the page cache"
        f" in {time.perf_counter() - started:.1f} s",
        flush=True,
    )


def guard_arguments(description: str, filters: list[str]) -> argparse.ArgumentParser:
    """The options of the in-process tools on the guard's data: its size, how many of the
    bench's questions, which filters (names in search_latency.FILTER_SETS; `filters` by
    default) and where the data lives."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument(
        "--filters", nargs="+", default=filters, help="names in search_latency.FILTER_SETS"
    )
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT)
    return parser


@contextmanager
def guard_database(size: int, data_root: Path = DATA_ROOT) -> Iterator[str]:
    """The URL of this checkout's copy of the guard's data (`size` memories), loaded first when
    missing; its PostgreSQL stops on leaving. For the in-process benchmarks on the same agent
    (bench/search_timeline.py, bench/entity_filters.py)."""
    side = Side("bench", ROOT, data_root / f"data-{data_key(ROOT, size)}")
    try:
        prepare(side, size)
        settle(side)
        assert side.postgres is not None
        yield side.postgres.url
    finally:
        if side.postgres is not None:
            side.postgres.stop()


def serve(side: Side, row_security: bool) -> None:
    assert side.postgres is not None
    port = free_port()
    env = side.env() | {
        "MEMORA_DATABASE_URL": side.postgres.url,
        "MEMORA_QUERY_PORT": str(port),
        "MEMORA_ROW_SECURITY": "true" if row_security else "false",
    }
    log = (side.data / "query-service.log").open("wb")
    side.service = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "services.api.query_app:create_app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=side.tree, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    side.base_url = f"http://127.0.0.1:{port}"


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def stage_medians(traces: list[dict[str, Any]]) -> dict[str, float]:
    """Median ms of each stage of the trace and of each retriever that ran."""
    found: dict[str, list[float]] = {}
    for trace in traces:
        for stage, ms in trace.get("timings_ms", {}).items():
            if isinstance(ms, int | float):
                found.setdefault(stage, []).append(ms)
        for name, path in (trace.get("paths") or {}).items():
            if path.get("ran", True) and isinstance(path.get("ms"), int | float):
                found.setdefault(f"retriever {name}", []).append(path["ms"])
    return {k: statistics.median(v) for k, v in found.items()}


def run(
    sides: list[Side], questions: list[str], warmup: int, rounds: int, every: int,
    filters: dict[str, Any] | None = None, mode: str = "alternate", clients: int = 1,
) -> None:  # fmt: skip
    """`alternate`: every question to both sides, which one first alternating. `back-to-back`:
    each side takes every question of a round in turn, one after the other (which side first
    alternating by round), so neither rests between its searches; `concurrent`: likewise,
    from `clients` clients at once."""
    http = {s.name: httpx.Client(base_url=s.base_url, timeout=60) for s in sides}
    cpu_before: dict[str, dict[str, float]] = {}
    sent = itertools.count()

    def start_timing(side: Side) -> None:
        assert side.postgres is not None
        analyze_accesses(side.postgres.url)
        cpu_before[side.name] = side.cpu_seconds()
        if side.statements:
            side.sql("SELECT pg_stat_statements_reset()")

    def search(side: Side, question: str, timed: bool) -> None:
        traced = every > 0 and next(sent) % every == every - 1
        body = {"agent_id": bench.AGENT, "query": question, "trace": traced}
        if filters is not None:
            body["filters"] = filters
        started = time.perf_counter()
        response = http[side.name].post("/api/search", json=body)
        response.raise_for_status()
        ms = (time.perf_counter() - started) * 1000
        if not timed:
            return
        if side.name not in cpu_before:
            start_timing(side)
        if traced:
            side.traces.append(response.json()["trace"])
        else:
            side.latency.append(ms)

    if mode == "alternate":
        for round_ in range(rounds):
            for i, question in enumerate(questions):
                for side in sides if (i + round_) % 2 == 0 else sides[::-1]:
                    search(side, question, timed=round_ > 0 or i >= warmup)
    else:
        for side in sides:
            for question in questions[:warmup]:
                search(side, question, timed=False)
        for side in sides:
            start_timing(side)
        timed = questions[warmup:]
        width = clients if mode == "concurrent" else 1
        for round_ in range(rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                with ThreadPoolExecutor(width) as pool:
                    shares = [timed[k::width] for k in range(width)]
                    list(pool.map(lambda qs, s=side: [search(s, q, True) for q in qs], shares))
    for side in sides:
        searches = len(side.latency) + len(side.traces)
        after = side.cpu_seconds()
        side.cpu = {k: (after[k] - cpu_before[side.name][k]) * 1000 / searches for k in after}


def report(base: Side, change: Side) -> dict[str, Any]:
    """The table (and its JSON): percentiles, each stage and retriever either side traced (a
    retriever one side lacks shows there as "-"), CPU per search."""
    rows: list[tuple[str, float | None, float | None]] = [
        (f"p{p}", percentile(base.latency, p), percentile(change.latency, p)) for p in PERCENTILES
    ]
    stages_base, stages_change = stage_medians(base.traces), stage_medians(change.traces)
    rows += [
        (f"{stage} (median)", stages_base.get(stage), stages_change.get(stage))
        for stage in [*stages_base, *(s for s in stages_change if s not in stages_base)]
    ]
    rows += [(f"{what} CPU per search", base.cpu[what], change.cpu[what]) for what in base.cpu]

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} ms"

    def ratio(a: float | None, b: float | None) -> float | None:
        return b / a if a and b is not None else None

    print(f"\n{'':28s} {base.name:>12s} {change.name:>12s}  ratio")
    for label, a, b in rows:
        r = ratio(a, b)
        print(f"{label:28s} {ms(a):>12s} {ms(b):>12s}  {'-' if r is None else f'{r:5.2f}'}")
    print(
        f"({len(base.latency)} timed and {len(base.traces)} traced searches per side; "
        "stages from the traces; CPU: the query service's and the database server's)"
    )
    return {label: {"base_ms": a, "change_ms": b, "ratio": ratio(a, b)}
            for label, a, b in rows}  # fmt: skip


def report_alone(side: Side) -> dict[str, Any]:
    rows = [(f"p{p}", percentile(side.latency, p)) for p in PERCENTILES]
    rows += [(f"{stage} (median)", ms) for stage, ms in stage_medians(side.traces).items()]
    rows += [(f"{what} CPU per search", ms) for what, ms in side.cpu.items()]
    print(f"\n{'':28s} {side.name:>12s}")
    for label, ms in rows:
        print(f"{label:28s} {ms:9.1f} ms")
    print(f"({len(side.latency)} timed and {len(side.traces)} traced searches)")
    return {label: {"change_ms": ms} for label, ms in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a commit (or '.' for the working tree)")
    parser.add_argument(
        "--alone", action="store_true",
        help="no base: only --change, for absolute figures where two loads cost too much (1M)",
    )  # fmt: skip
    parser.add_argument("--change", default=".", help="a commit, or '.' (the working tree)")
    parser.add_argument("--size", type=int, default=100_000, help="memories of the agent")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the questions")
    parser.add_argument("--trace-every", type=int, default=5, help="0: no traces")
    parser.add_argument(
        "--mode", choices=["alternate", "back-to-back", "concurrent"], default="alternate",
        help="questions alternating between the sides, or each side loaded in turn (run())",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=4, help="with --mode concurrent")
    parser.add_argument("--row-security", choices=["on", "off"], default="on")
    parser.add_argument(
        "--filter", choices=list(bench.FILTER_SETS), help="every search under this filter"
    )
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT)
    parser.add_argument("--out", type=Path, help="JSON of the figures")
    parser.add_argument(
        "--statements", type=int, default=0, metavar="N",
        help="also print each side's N statements that took most database time per search "
        "(pg_stat_statements, with planning time)",
    )  # fmt: skip
    args = parser.parse_args()
    if (args.base is None) != args.alone:
        parser.error("give --base, or --alone to measure --change by itself")

    trees = args.data_root / "trees"
    trees.mkdir(parents=True, exist_ok=True)
    sides = []
    specs = (
        [("change", args.change)] if args.alone else [("base", args.base), ("change", args.change)]
    )
    for name, spec in specs:
        tree = checkout(spec, trees)
        data = args.data_root / f"data-{data_key(tree, args.size)}"
        sides.append(Side(name, tree, data, statements=args.statements > 0))
    if len(sides) == 2 and sides[0].data == sides[1].data:  # the same code: two loads
        sides[1].data = sides[1].data.with_name(sides[1].data.name + "-b")
    try:
        for side in sides:
            prepare(side, args.size)
            serve(side, args.row_security == "on")
        for side in sides:
            wait_ready(side.base_url)
        for side in sides:
            settle(side)
        maintenance = {side.name: side.maintenance() for side in sides}
        questions = bench.questions(args.queries + args.warmup)
        filters = bench.FILTER_SETS[args.filter] if args.filter else None
        run(
            sides, questions, args.warmup, args.rounds, args.trace_every, filters,
            mode=args.mode, clients=args.clients,
        )  # fmt: skip
        figures = report(*sides) if len(sides) == 2 else report_alone(sides[0])
        for side in sides:  # autovacuum shared the cores with the run: a tail not the code's
            after = side.maintenance()
            ran = sorted(t for t, n in after.items() if n > maintenance[side.name].get(t, 0))
            if ran:
                print(f"{side.name}: autovacuum ran during the run on {', '.join(ran)}")
        for side in sides if args.statements else []:
            side.top_statements(args.statements)
        if args.out:
            summary = {"args": vars(args) | {"data_root": None}, "figures": figures}
            args.out.write_text(json.dumps(summary, indent=2, default=str))
    finally:
        for side in sides:
            if side.service is not None:
                side.service.terminate()
                side.service.wait(timeout=30)
            if side.postgres is not None:
                side.postgres.stop()


if __name__ == "__main__":
    main()
